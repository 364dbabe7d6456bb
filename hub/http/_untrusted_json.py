"""JSON from outside the hub (a webhook body), parsed so that it is safe to keep.

Lone UTF-16 surrogates (``"\\ud800"`` is valid JSON, but no UTF-8 store can hold it) become
U+FFFD; non-finite numbers (``NaN``, ``Infinity``, ``1e999``) and values nested deeper than
``max_depth`` are refused with an error that names the field.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

__all__ = ["UntrustedJSONError", "load_json", "MAX_JSON_DEPTH"]

MAX_JSON_DEPTH = 64
"""Objects and arrays nested deeper than this are refused."""

_SURROGATE = re.compile("[\ud800-\udfff]")


class UntrustedJSONError(ValueError):
    """The body is not JSON the hub accepts; the message says why and names the field."""


def _fix(text: str) -> str:
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def _field(path: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if key.isidentifier() else f"{path}[{json.dumps(key)}]"


def _depth(value: Any) -> int:
    """How deeply objects and arrays nest, counted without recursion (stops past the limit)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict | list):
            deepest = max(deepest, d)
            if deepest > MAX_JSON_DEPTH:
                break
            stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return deepest


def _clean(value: Any, path: str) -> Any:
    if isinstance(value, str):
        return _fix(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise UntrustedJSONError(f"{path}: {value} is not a finite number (NaN and Infinity are not JSON)")
    if isinstance(value, list):
        return [_clean(v, _field(path, i)) for i, v in enumerate(value)]
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            key = _fix(k)
            out[key] = _clean(v, _field(path, key))
        return out
    return value


def load_json(body: bytes | str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Parse and clean a JSON document from outside.

    Raises:
        UntrustedJSONError: not JSON, not UTF-8, nested too deep, or holding a non-finite number.
    """
    try:
        data = json.loads(body)
    except RecursionError as e:
        raise UntrustedJSONError(f"nested more than {max_depth} levels deep") from e
    except json.JSONDecodeError as e:
        raise UntrustedJSONError(f"not valid JSON: {e}") from e
    except UnicodeDecodeError as e:
        raise UntrustedJSONError(f"not valid UTF-8 (byte {e.start})") from e
    except ValueError as e:  # e.g. an integer of more digits than Python converts
        raise UntrustedJSONError(f"not valid JSON: {e}") from e
    if _depth(data) > max_depth:
        raise UntrustedJSONError(f"nested more than {max_depth} levels deep")
    return _clean(data, "body")
