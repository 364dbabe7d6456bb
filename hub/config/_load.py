"""``config.toml``, validated with pydantic at start.

Every string may hold ``${VAR}``, replaced from the environment, so secrets stay out of the
file; ``${VAR:-default}`` and ``${VAR:?message}`` work as in Docker Compose. An unset
variable is named: a warning ([`HubConfig.unset`][hub.HubConfig.unset]), or an error where the key needs a
value. An unknown key or a wrong type is a [`ConfigError`][hub.ConfigError] that names the
file and the dotted key, and never echoes a value that came from the environment or sits
in a secret's key. Extension tables are checked against the extension's own settings model
when it loads (see `hub.definitions`).

This module reads and checks the file; the sections' models are in ``_sections``.
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..errors import ConfigError
from ._sections import (
    HubConfig,
)

__all__ = [
    "load_config",
    "read_toml",
    "substitute_env",
    "format_validation_error",
    "MAX_FILE_BYTES",
    "loads_toml",
    "MAX_DEPTH",
]

# ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?message}, ${VAR?message} (Docker Compose)
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}")
MAX_FILE_BYTES = 1_000_000
"""A config or persona file larger than this is refused (a mistake, or a bomb)."""
MAX_DEPTH = 32
"""Tables and arrays nested deeper than this are refused (a TOML bomb)."""
# keys whose value is a credential: never echoed, and an unset ${VAR} in one is an error
_SECRET_KEY = re.compile(r"(^|_)(token|secret|password|passwd|keys?|credentials?)$", re.IGNORECASE)
# keys of the core that need a value: an unset ${VAR} leaving one empty is an error
_NEEDS_VALUE = {("hub", "data_dir"), ("hub", "contexts_dir"), ("model", "name"), ("model", "model_path")}


class _Substitution:
    """``${VAR}`` forms replaced in a TOML tree; records the variables left unset and the
    values that came from the environment (never echoed in an error)."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.unset: list[tuple[str, str]] = []
        self.values: set[str] = set()

    def string(self, text: str, key: str) -> str:
        def one(m: re.Match[str]) -> str:
            name, op, arg = m.group(1), m.group(2), m.group(3)
            value = self.env.get(name)
            missing = value is None or (op is not None and op.startswith(":") and value == "")
            if op is None:
                if value is None:
                    self.unset.append((key, name))
                    return ""
            elif op.endswith("-"):
                if missing:
                    return arg
            elif missing:  # ?: required
                why = arg or "is required"
                raise ConfigError(f"${{{name}}} {'is empty' if value == '' else 'is not set'}: {why}", key=key)
            assert value is not None
            if value:
                self.values.add(value)
            return value

        return _VAR.sub(one, text)

    def tree(self, value: Any, key: str = "") -> Any:
        if isinstance(value, str):
            return self.string(value, key)
        if isinstance(value, list):
            return [self.tree(v, f"{key}[{i}]") for i, v in enumerate(value)]
        if isinstance(value, dict):
            return {k: self.tree(v, f"{key}.{k}" if key else str(k)) for k, v in value.items()}
        return value


def substitute_env(value: Any, env: Any = None) -> Any:
    """Replace ``${VAR}`` (and ``${VAR:-default}``, ``${VAR:?message}``) in every string of a TOML tree.

    Raises:
        ConfigError: a ``${VAR:?message}`` whose variable is unset or empty.
    """
    return _Substitution(os.environ if env is None else env).tree(value)


_URL_PASSWORD = re.compile(r"://[^/@\s]*:[^/@\s]*@")  # scheme://user:password@host (a [store] url)


def _hidden(value: Any, key: str, hide: set[str] | frozenset[str]) -> bool:
    if _SECRET_KEY.search(key.rsplit(".", 1)[-1]):
        return True
    if isinstance(value, (dict, list)):  # a table's own error (an [mcp.NAME] with headers) quotes the whole table
        value = repr(value)
    return isinstance(value, str) and (any(h in value for h in hide) or bool(_URL_PASSWORD.search(value)))


def format_validation_error(
    e: ValidationError, *, prefix: str = "", hide: set[str] | frozenset[str] = frozenset()
) -> tuple[str, str]:
    """(dotted key, message) of a pydantic error's first problem.

    The value at fault is quoted, unless the key names a credential or the value holds one
    of ``hide`` (values that came from the environment): then only its type is.
    """
    err = e.errors()[0]
    key = ".".join(str(p) for p in (*([prefix] if prefix else []), *err["loc"]))
    if err["type"] == "extra_forbidden":
        msg = "unknown key"
    elif err["type"] == "missing":
        msg = "required key is missing"
    elif "input" in err and _hidden(err["input"], key, hide):
        msg = f"{err['msg']} (got a {type(err['input']).__name__}, not shown: it may be a secret)"
    else:
        msg = f"{err['msg']} (got {_short_repr(err.get('input'))})" if "input" in err else err["msg"]
    more = len(e.errors()) - 1
    return key, msg + (f" (and {more} more problem{'s' if more > 1 else ''})" if more else "")


def _short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _depth(value: Any) -> int:
    """How deeply tables and arrays nest, counted without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            items: Any = v.values()
        elif isinstance(v, list):
            items = v
        else:
            continue
        deepest = max(deepest, d)
        if deepest > MAX_DEPTH:
            return deepest
        stack.extend((x, d + 1) for x in items)
    return deepest


def read_toml(path: Path) -> dict[str, Any]:
    """A TOML file, refused in one line when it is not a regular file, larger than
    `MAX_FILE_BYTES`, not TOML, or nested deeper than `MAX_DEPTH`.

    Opened without blocking, so a FIFO or a device is refused instead of waited on.

    Raises:
        ConfigError: naming the file.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise ConfigError(f"cannot read: {e.strerror}", path=str(path)) from e
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError("not a regular file", path=str(path))
        if st.st_size > MAX_FILE_BYTES:
            raise ConfigError(f"is {st.st_size:,} bytes, more than the {MAX_FILE_BYTES:,} allowed", path=str(path))
        data = f.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise ConfigError(f"is more than the {MAX_FILE_BYTES:,} bytes allowed", path=str(path))
    return loads_toml(data, path=path)


def loads_toml(data: bytes, *, path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """TOML text as `read_toml()` takes a file's (the dashboard's persona editor checks
    an edit before it is written), refused in one line when too large, not TOML, or nested
    deeper than `MAX_DEPTH`.

    Raises:
        ConfigError: naming ``path``.
    """
    where = str(path) if path is not None else None
    if len(data) > MAX_FILE_BYTES:
        raise ConfigError(f"is more than the {MAX_FILE_BYTES:,} bytes allowed", path=where)
    try:
        raw = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ConfigError(f"not UTF-8 (byte {e.start})", path=where) from e
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"not valid TOML: {e}", path=where) from e
    except RecursionError as e:
        raise ConfigError(f"nested too deeply (more than {MAX_DEPTH} levels)", path=where) from e
    if _depth(raw) > MAX_DEPTH:
        raise ConfigError(f"nested too deeply (more than {MAX_DEPTH} levels)", path=where)
    return raw


def load_config(path: str | os.PathLike[str] | None = None, *, env: dict[str, str] | None = None) -> HubConfig:
    """Read, substitute and validate a config file. A missing default file gives the defaults.

    Raises:
        ConfigError: one line naming the file, the key and what is wrong.
    """
    explicit = path is not None
    p = Path(path) if path is not None else Path("config.toml")
    if not p.exists():
        if explicit:
            raise ConfigError("file not found", path=str(p))
        cfg = HubConfig()
        cfg.extensions = {"cli": {}}
        return cfg
    cfg = config_from_dict(read_toml(p), path=p, env=env)
    cfg.check_data_dir()
    return cfg


def _needs_value(key: str, enabled: set[str]) -> bool:
    parts = key.split(".")
    if tuple(parts[:2]) in _NEEDS_VALUE or (parts[0] == "webhooks" and parts[-1] == "secret"):
        return True
    # the credentials of an enabled extension (a platform's token)
    return len(parts) >= 3 and parts[0] == "extensions" and parts[1] in enabled and bool(_SECRET_KEY.search(parts[-1]))


def _in_effect(key: str, raw: dict[str, Any]) -> bool:
    """False for keys of an extension table with ``enabled = false`` (not used, not worth a warning)."""
    parts = key.split(".")
    if len(parts) >= 2 and parts[0] == "extensions":
        table = raw.get("extensions", {}).get(parts[1])
        return not (isinstance(table, dict) and table.get("enabled", True) is False)
    return True


def _lookup(tree: Any, key: str) -> Any:
    for part in re.split(r"\.|(?=\[)", key):
        if part.startswith("["):
            tree = tree[int(part[1:-1])] if isinstance(tree, list) else None
        elif isinstance(tree, dict):
            tree = tree.get(part)
        else:
            return None
    return tree


def config_from_dict(raw: dict[str, Any], *, path: Path | None = None, env: dict[str, str] | None = None) -> HubConfig:
    where = str(path) if path else None
    sub = _Substitution(os.environ if env is None else env)
    try:
        data = sub.tree(raw)
    except ConfigError as e:
        raise ConfigError(str(e), path=where) from e
    unset = [(k, v) for k, v in sub.unset if _in_effect(k, data)]
    enabled = {
        n for n, t in data.get("extensions", {}).items() if isinstance(t, dict) and t.get("enabled", True) is not False
    }
    for key, var in unset:
        if _needs_value(key, enabled) and _lookup(data, key) == "":
            raise ConfigError(f"${{{var}}} is not set, and this key needs a value", path=where, key=key)
    try:
        cfg = HubConfig.model_validate(data)
    except ValidationError as e:
        key, msg = format_validation_error(e, hide=sub.values)
        raise ConfigError(msg, path=where, key=key) from e
    cfg.path = path.resolve() if path else None
    cfg._unset = unset
    return cfg
