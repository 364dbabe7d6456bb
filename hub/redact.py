"""Secrets redaction: tokens, keys and passwords never reach a log line, a trace or a prompt.

A `Redactor` knows the secret values of one config: every string under a key named
like a secret (``token``, ``api_key``, ``secret``, ``password``, ...), every value a
``${VAR}`` with a secret-looking name put into the config, and the process environment's
secret-looking variables. It replaces each occurrence (raw, JSON-escaped or XML-escaped) by
``[REDACTED]``.

It is applied where text enters: `Hub.submit()` masks every input, the engine masks
action results and the model's elements as they arrive, so the run's logs, and everything
made from them (prompts of either style, the run store, working memory, episodes, training
export), never hold a known secret. Where text leaves the process, a logging filter
(`RedactingFilter`), the prompt builder (both prompt styles, for text that came from
elsewhere: a persona, a context's memory) and the run store (``hub.store.RedactingRunStore``,
for error reasons) mask again. With no secrets known, a redactor is false and every method
returns its argument unchanged, at the cost of one attribute test.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar
from urllib.parse import urlsplit

from .logs import Log, from_dict, to_dict

if TYPE_CHECKING:
    from .config import HubConfig


class _Element(Protocol):
    """What `Redactor.redact_element()` needs of a parsed element (a dataclass)."""

    @property
    def content(self) -> str: ...

    @property
    def attrs(self) -> dict[str, str]: ...


_E = TypeVar("_E", bound=_Element)

__all__ = [
    "Redactor",
    "RedactingFilter",
    "is_secret_name",
    "MASK",
    "MIN_SECRET_LENGTH",
]

MASK = "[REDACTED]"
MIN_SECRET_LENGTH = 6
"""Shorter values are not treated as secrets: masking "abc" everywhere would garble logs."""

_SECRET_WORDS = frozenset(
    {"token", "secret", "key", "keys", "apikey", "password", "passwd", "credential", "credentials"}
)
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def is_secret_name(name: str) -> bool:
    """True for names like ``api_key``, ``bearer_token``, ``TELEGRAM_BOT_TOKEN``, ``dbPassword``."""
    parts = re.split(r"[_\-.\s]+", name)
    words = {w.lower() for part in parts for w in (_WORD.findall(part) or [part])}
    return bool(words & _SECRET_WORDS)


class Redactor:
    """Masks known secret values in text and in JSON-like trees."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self.add(*secrets)

    def add(self, *secrets: str) -> None:
        """Know more secrets (values shorter than MIN_SECRET_LENGTH are ignored)."""
        for s in secrets:
            if not isinstance(s, str) or len(s.strip()) < MIN_SECRET_LENGTH:
                continue
            s = s.strip()
            # the forms a value takes in a JSON document and in the XML prompt
            for form in (s, json.dumps(s)[1:-1], s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")):
                self._secrets.add(form)
        if self._secrets:
            alternatives = sorted(self._secrets, key=len, reverse=True)  # longest first: no partial leftovers
            self._pattern = re.compile("|".join(re.escape(a) for a in alternatives))

    def __bool__(self) -> bool:
        return self._pattern is not None

    def __len__(self) -> int:
        return len(self._secrets)

    def redact(self, text: str) -> str:
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(MASK, text)

    __call__ = redact

    def unsafe_tail(self, text: str) -> int:
        """How many characters at the end of ``text`` could be the beginning of a known secret
        (the longest such suffix): text still being written is shown without them, so that a
        secret is masked whole once it is, never shown in part before."""
        if self._pattern is None or not text:
            return 0
        last = text[-1]
        longest = 0
        for secret in self._secrets:
            if last not in secret:
                continue
            for k in range(min(len(secret) - 1, len(text)), longest, -1):
                if secret[k - 1] == last and text.endswith(secret[:k]):
                    longest = k
                    break
        return longest

    def redact_tree(self, value: Any) -> Any:
        """A copy of a JSON-like value with every string redacted (keys included)."""
        if self._pattern is None:
            return value
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, dict):
            return {self.redact(k) if isinstance(k, str) else k: self.redact_tree(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.redact_tree(v) for v in value]
        return value

    def redact_element(self, el: _E) -> _E:
        """The model's element (`hub.protocol.Element`) with its content and attributes
        masked (the same object when clean)."""
        if self._pattern is None:
            return el
        content = self.redact(el.content)
        attrs = {k: self.redact(v) for k, v in el.attrs.items()}
        if content == el.content and attrs == el.attrs:
            return el
        return dataclasses.replace(el, content=content, attrs=attrs)  # type: ignore[type-var]

    def redact_log(self, entry: Log) -> Log:
        """A redacted copy of an event-log entry (the original is left alone)."""
        if self._pattern is None:
            return entry
        return from_dict(self.redact_tree(to_dict(entry)))

    # --- where the secrets come from ----------------------------------------------------

    @classmethod
    def from_config(cls, config: HubConfig, *, env: Mapping[str, str] | None = None) -> Redactor:
        """The secrets of a config: values under secret-looking keys, secret-looking
        ``${VAR}`` substitutions, and the environment's secret-looking variables."""
        env = os.environ if env is None else env
        found: list[str] = []
        _walk(config.model_dump(mode="python"), found, secret=False)
        store_password = _url_password(config.store.url)  # [store] url may carry one inline
        if store_password:
            found.append(store_password)
        for name, value in env.items():
            if is_secret_name(name):
                found.append(value)
        if config.path is not None and config.path.is_file():
            try:
                raw = tomllib.loads(config.path.read_text(encoding="utf-8"))
            except (OSError, tomllib.TOMLDecodeError):
                raw = {}
            for var in _vars(raw):
                if is_secret_name(var) and env.get(var):
                    found.append(env[var])
        return cls(found)


def _url_password(url: str) -> str | None:
    try:
        return urlsplit(url).password if url else None
    except ValueError:
        return None


def _walk(value: Any, found: list[str], *, secret: bool) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _walk(v, found, secret=secret or (isinstance(k, str) and is_secret_name(k)))
    elif isinstance(value, (list, tuple)):
        for v in value:
            _walk(v, found, secret=secret)
    elif isinstance(value, str) and secret:
        found.append(value)


def _vars(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield from _VAR.findall(value)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _vars(v)
    elif isinstance(value, list):
        for v in value:
            yield from _vars(v)


# --- where redaction is applied ---------------------------------------------------------


_RECORD_ATTRS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class RedactingFilter(logging.Filter):
    """A handler filter: the record's message, arguments and traceback are redacted."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        r = self.redactor
        if not r:
            return True
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: let the handler report it as usual
            return True
        record.msg, record.args = r.redact(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = r.redact(record.exc_text)
            record.exc_info = None  # formatters would format it again, unredacted
        if record.stack_info:
            record.stack_info = r.redact(record.stack_info)
        for key, value in vars(record).items():  # extra= data
            if key not in _RECORD_ATTRS and isinstance(value, (str, dict, list, tuple)):
                setattr(record, key, r.redact_tree(value))
        return True
