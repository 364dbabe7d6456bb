"""Values as the database stores them: strings as valid UTF-8 (a lone surrogate becomes
U+FFFD) and JSON that any reader accepts (a non-finite number becomes ``null``), so no input
can make a write fail. Re-exported by `hub.store.sql`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

import orjson

_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(s: str) -> str:
    """``s`` as valid UTF-8: lone UTF-16 surrogates (valid in JSON, not in UTF-8) become U+FFFD."""
    if s.isascii():  # no surrogate, found without encoding a copy (every value of every write)
        return s
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", s)
    return s


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


_SCALARS = frozenset((str, int, float, bool, type(None)))


def _plain(value: Any) -> bool:
    """Whether ``value`` is made of dicts with string keys, lists, tuples and the JSON scalars
    only (their exact types: a subclass, an Enum, is json's to write); False when too deep."""
    try:
        return _plain_walk(value)
    except RecursionError:  # too deep, or circular: json's path says what is wrong
        return False


def _plain_walk(value: Any) -> bool:
    t = type(value)
    if t in _SCALARS:
        return True
    if t is dict:
        for k, v in value.items():
            if type(k) is not str or (type(v) not in _SCALARS and not _plain_walk(v)):
                return False
        return True
    if t is list or t is tuple:
        for v in value:
            if type(v) not in _SCALARS and not _plain_walk(v):
                return False
        return True
    return False


_ORJSON = orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME


def dumps(value: Any, *, default: Any = repr) -> str:
    """JSON text that any JSON reader accepts: NaN and ±Infinity become ``null`` (as
    JavaScript's ``JSON.stringify`` writes them), lone surrogates U+FFFD.

    Raises:
        TypeError: a value JSON cannot hold, when ``default`` is None.
    """
    if default is not None:
        # orjson first: a run's event log is serialised here, about ten events a turn, at a
        # tenth of the json module's cost. It writes NaN and ±Infinity as null as we want;
        # dataclasses and datetimes still go to ``default`` as with json. What it refuses
        # (a lone surrogate, an int beyond 64 bits, a circular value) takes the path below.
        try:
            return orjson.dumps(value, default=default, option=_ORJSON).decode()
        except orjson.JSONEncodeError:
            pass
    elif _plain(value):
        # no default (a memory value, a conversation's history at every turn): orjson too, for
        # values of the plain JSON types only, as orjson would also write a UUID or an Enum
        # that json refuses
        try:
            return orjson.dumps(value, option=_ORJSON).decode()
        except orjson.JSONEncodeError:
            pass
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, default=default)
    except ValueError as e:  # a non-finite float somewhere (a circular value stays an error)
        if "ircular" in str(e):
            raise
        text = json.dumps(_finite(value), ensure_ascii=False, allow_nan=False, default=default)
    return clean_text(text)


# In the text's UTF-8 bytes (where ASCII is itself), digits become "0" and what may come
# before a number's digits ("[", ",", ":", a blank, a sign) becomes NUL (raw in no valid JSON
# text): a number of 19 digits or more is then found by one substring search, in C. A
# regular expression, or str.translate on text not all ASCII, costs many times more on a
# turn's history (docs/benchmarks/index.md, "Figures quoted by the code")
_MARKED = bytes.maketrans(b"123456789[,: \t\r\n-", b"000000000" + b"\x00" * 8)
_RUN = b"0" * 19
_NUMBER = b"\x00" + _RUN


def _long_number(text: str) -> bool:
    """Whether ``text`` holds a number of 19 digits or more. A number starts the text or
    follows "[", "," or ":" (then JSON's blanks, then a sign); 19 digits inside a string, as
    in a hex id, or after a decimal point are not one."""
    raw = text.encode("utf-8", "surrogatepass")
    marked = raw.translate(_MARKED)
    k = len(raw) - len(raw.lstrip(b" \t\r\n"))
    if marked.startswith(_RUN, k + (raw[k : k + 1] == b"-")):  # the text is a number
        return True
    i = marked.find(_NUMBER)
    while i >= 0:
        j = i - (raw[i : i + 1] == b"-")  # back over the sign and the blanks, to what comes before
        while j >= 0 and raw[j : j + 1] in (b" ", b"\t", b"\r", b"\n"):
            j -= 1
        if j < 0 or raw[j : j + 1] in (b"[", b",", b":"):
            return True
        i = marked.find(_NUMBER, i + 1)
    return False


def loads(text: str) -> Any:
    """What ``json.loads(text)`` gives, read by orjson where that is the same (a few times
    faster on a conversation's history, read at every turn). orjson refuses what it cannot
    read as json does (NaN, a lone surrogate's escape, 1e400): those go to json. It would read
    an integer beyond 64 bits as a float: text with a number of 19 digits or more goes to json
    too (a run of digits inside a string, as in an id, does not)."""
    if not _long_number(text):
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)


def _clean_params(params: Sequence[Any] | None) -> Sequence[Any] | None:
    if not params:
        return params
    out = None
    for i, p in enumerate(params):
        if isinstance(p, str):
            c = clean_text(p)
        elif isinstance(p, float) and not math.isfinite(p):
            c = None
        else:
            continue
        if c is not p:
            if out is None:
                out = list(params)
            out[i] = c
    return params if out is None else out


_PLAIN = re.compile(r"^[A-Za-z0-9_.:@+\-]+$")  # written as is inside a JSON string, by either writer


def holds_text(column: str, text: str, dialect: str) -> tuple[str, tuple[Any, ...]]:
    """A condition that keeps the rows whose JSON ``column`` may hold the string ``text``: a
    substring test, cheap where parsing each row's JSON in SQL is not safe (PostgreSQL refuses
    ``\\u0000`` in a value it extracts); the caller parses the rows it keeps. Text JSON
    writes escaped keeps every row."""
    if not _PLAIN.match(text):
        return "1 = 1", ()
    return f"{'strpos' if dialect == 'postgres' else 'instr'}({column}, ?) > 0", (text,)
