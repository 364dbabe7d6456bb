"""The definitions an extension declares, as plain data: [`Action`][hub.Action], [`Output`][hub.Output],
[`Input`][hub.Input], [`Context`][hub.Context], [`Service`][hub.Service] and [`Extension`][hub.Extension].
[`ContextInstance`][hub.ContextInstance] is one conversation of a [`Context`][hub.Context]. The decorators
that build them from handlers, inferring their schemas, are in ``_decorators``.
"""

from __future__ import annotations

import asyncio
import builtins
import json
import logging
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from ..config import MIN_SECRET_LENGTH
from ..errors import ActionError, ExtensionError
from ..logs import Log, MediaPart, SummaryLog
from ..store import Counters, Forgotten, Generation, counter_paths, merge3
from ._approver import Approver
from ._commands import Command
from ._run_context import ArgsT, MemoryT, RunContext

if TYPE_CHECKING:
    from ..store import MemoryStore

log = logging.getLogger("hub.engine")

HubRef = Any
"""The [`Hub`][hub.Hub] an ``install``, ``subscribe``, ``enabled`` or ``start`` receives. Typed
``Any`` here because definitions sit below the hub in the layers (they may not import it)."""

ErrorDecision = Literal["continue", "retry", "abort"]

_NAME = re.compile(r"^[A-Za-z_][\w.:-]*$")


def validation_message(e: ValidationError) -> str:
    """Data that does not match a definition's schema (an action's arguments or result, an
    output's content or attributes, an input's data), in one line: the first five fields
    at fault, each with what is wrong."""
    parts = []
    for err in e.errors()[:5]:
        loc = ".".join(str(p) for p in err["loc"]) or "(root)"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


class NoArgs(BaseModel):
    """Arguments of an action that takes none."""

    model_config = ConfigDict(extra="forbid")


class TextArgs(BaseModel):
    """The args of a context keyed by one string (a chat id, a user name)."""

    id: str
    """The one string: the conversation's key."""


class _NoAttributes(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _counters_of(kind: str, name: str, paths: Sequence[str]) -> Counters:
    if isinstance(paths, str):
        paths = (paths,)
    try:
        return counter_paths(paths)
    except ValueError as e:
        raise ValueError(f"{kind} {name!r}: counters: {e}") from e


def _check_name(kind: str, name: str) -> None:
    if not name or not _NAME.match(name):
        raise ValueError(
            f"{kind} name {name!r} must start with a letter or '_' and contain only letters, digits, _ . : -"
        )


@dataclass(slots=True, eq=False, weakref_slot=True)  # weakly held by the prompt's caches
class Action:
    """A tool the model may call with ``<action_call name="NAME">{json}</action_call>``."""

    name: str
    """The name the model calls it by (default: the function's name)."""
    handler: Callable[[Any, RunContext], Awaitable[Any]]
    """``async handler(args, ctx)``: runs the call with the validated arguments and a
    [`RunContext`][hub.RunContext]."""
    schema: type[BaseModel] = NoArgs
    """The pydantic model of its arguments (from the handler's first parameter); [`NoArgs`][hub.NoArgs]: none."""
    description: str = ""
    """What it does, as the model reads it (default: the handler's docstring)."""
    instructions: str = ""
    """When and how to use it, added to the prompt after the description."""
    returns: Any = None
    """The handler's return type, when annotated: its JSON schema is shown to the model."""
    examples: Sequence[str] = ()
    """Example calls, shown to the model."""
    enabled: Callable[[RunContext], bool] | None = None
    """``enabled(ctx)``: whether the run is offered the action; None: always."""
    retry: int = 0
    """How many more times a failed or timed-out call is tried (with a backoff) before the model is told."""
    queue: str | None = None
    """Calls of actions sharing a queue name run one at a time, across runs."""
    memory: str | None = None
    """A name for the action's own persistent value (``ctx.action_memory``); None: none."""
    timeout: float | None = None
    """Seconds a call may take; None: ``[agent] action_timeout``."""
    on_success: Callable[[Any, RunContext], Awaitable[None] | None] | None = None
    """``on_success(result, ctx)``: called after a call succeeded."""
    on_error: Callable[[BaseException, RunContext], Awaitable[None] | None] | None = None
    """``on_error(error, ctx)``: called after a call failed for good."""
    roles: Sequence[str] = ()
    """Only users holding one of these roles (``[roles.NAME]``) may have it called; empty: everyone."""
    critical: bool = False
    """A denied call (the role guard) ends the run as ``rejected`` rather than telling the model."""
    confirm: bool = False
    """Ask the person (or an operator) before each call runs, as ``[approvals] actions`` does."""
    scope: Literal["context", "global"] = "context"
    """Where ``memory`` lives: one value per conversation (``"context"``), or one shared by all."""
    counters: Sequence[str] = ()
    """Paths in ``memory`` that count (``"$"``: the memory itself is a number): concurrent
    increments add up when saves are merged; any other value is last writer wins."""
    _returns_adapter: TypeAdapter[Any] | None = field(default=None, init=False, repr=False)
    counter_paths: Counters = field(default=frozenset(), init=False, repr=False)
    """``counters``, parsed (set by the definition itself)."""

    def __post_init__(self) -> None:
        _check_name("action", self.name)
        self.counter_paths = _counters_of("action", self.name, self.counters)
        if self.retry < 0:
            raise ValueError(f"action {self.name!r}: retry must be >= 0")
        if self.scope not in ("context", "global"):
            raise ValueError(f"action {self.name!r}: scope must be 'context' or 'global', not {self.scope!r}")

    def json_schema(self) -> dict[str, Any]:
        """The JSON schema of its arguments, as the model is shown it."""
        return self.schema.model_json_schema()

    def parse_arguments(self, raw: Any) -> Any:
        """A call's arguments checked against the action's schema: what the handler gets.

        Raises:
            ActionError: They do not match; the message names the fields at fault.
        """
        try:
            return self.schema.model_validate(raw)
        except ValidationError as e:
            raise ActionError(self.name, "invalid arguments: " + validation_message(e)) from e

    def returns_schema(self) -> dict[str, Any] | None:
        """The JSON schema of what it returns, or None when ``returns`` is not set."""
        if self.returns is None:
            return None
        return TypeAdapter(self.returns).json_schema()

    def check_result(self, result: Any) -> None:
        """Validate a handler's result against ``returns`` (nothing to check without one).

        Raises:
            pydantic.ValidationError: The result does not match; its errors name the field.
        """
        if self.returns is None:
            return
        if self._returns_adapter is None:
            self._returns_adapter = TypeAdapter(self.returns)
        self._returns_adapter.validate_python(result)


@dataclass(slots=True, eq=False, weakref_slot=True)  # weakly held by the prompt's caches
class Output:
    """A way for the model to say something: ``<output type="TYPE" attr="...">content</output>``.

    ``attributes`` is the schema of the tag's attributes; a destination attribute is only
    possible when the definition declares one. ``context`` restricts the output to runs of one
    context type. ``format(content)`` is how the log shows it (the prompt's history, traces):
    a string in place of the raw content.

    The handler gets the validated content and ``ctx`` (``ctx.output`` is its own log entry).
    It returns nothing, data that goes into the entry's ``data``, an [`OutputResult`][hub.OutputResult], or
    a list of them: the first updates the entry, each further one is an entry of its own. An
    entry whose result says ``processed=False`` is shown to the model as new, and the run
    takes another step for it.

    ``live=True`` (text outputs only) delivers while the model writes: the handler is called
    when the opening tag arrives, with a [`LiveText`][hub.LiveText] in place of the content,
    and returns once it has delivered the final text (a message edited in place).
    """

    type: str
    """The tag's ``type`` (``telegram:message``, ``cli:message``, ...); unique across extensions."""
    handler: Callable[[Any, RunContext], Awaitable[Any]]
    """``async handler(content, ctx)``: delivers the validated content (see above for what it returns)."""
    schema: Any = str
    """The content's type (``str``: text; a pydantic model: JSON)."""
    attributes: builtins.type[BaseModel] = _NoAttributes
    """The pydantic model of the tag's attributes."""
    description: str = ""
    """What it is for, as the model reads it (default: the handler's docstring)."""
    instructions: str = ""
    """When and how to use it, added to the prompt after the description."""
    examples: Sequence[str] = ()
    """Example tags, shown to the model."""
    format: Callable[[Any], str] | None = None
    """``format(content)``: how the log shows it; None: the content itself."""
    install: Callable[[HubRef], Awaitable[None] | None] | None = None
    """Called with the hub once at start, as [`Extension.install`][hub.Extension.install] is."""
    enabled: Callable[[RunContext], bool] | None = None
    """``enabled(ctx)``: whether the run is offered the output; None: always."""
    context: str | None = None
    """Only runs of this context type are offered it; None: every run."""
    live: bool = False
    """Deliver while the model writes: the handler gets a [`LiveText`][hub.LiveText]."""

    def __post_init__(self) -> None:
        _check_name("output", self.type)
        if self.live and self.schema is not str:
            raise TypeError(f"output {self.type!r}: live=True needs text content (schema str), not {self.schema!r}")

    @property
    def is_text(self) -> bool:
        """Whether its content is plain text (``schema`` is ``str``)."""
        return self.schema is str

    def content_schema(self) -> dict[str, Any] | None:
        """The JSON schema of its content, shown to the model; None for text."""
        if self.is_text:
            return None
        return TypeAdapter(self.schema).json_schema()


@dataclass(slots=True)
class OutputResult:
    """What an output handler may return, one or a list: ``data`` for the log entry, and
    ``processed=False`` to show the entry to the model as new in the next step."""

    data: Any = None
    """What goes into the entry's ``data`` (a platform's message id, ...)."""
    processed: bool = True
    """False: show the entry to the model as new, and take another step for it."""


@dataclass(slots=True, eq=False)
class Input:
    """A listener: ``subscribe(send, hub)`` starts it and returns an async callable that stops it.

    ``schema`` (a type pydantic validates; ``Any``: anything) is checked against the data each
    ``send`` carries: a mismatch is an [`ExtensionError`][hub.ExtensionError] naming the input type and
    the field. ``format(data)`` is how the log shows the input (the prompt, traces).
    """

    type: str
    """The input's type, unique across extensions (the ``type`` of the inputs it records)."""
    subscribe: Callable[[Callable[..., Awaitable[Any]], HubRef], Awaitable[Callable[[], Awaitable[None]]]]
    """``await subscribe(send, hub)``: starts listening and returns an async callable that stops it."""
    schema: Any = Any
    """What the data each ``send`` carries must be."""
    description: str = ""
    """What it listens to, for people (default: the function's docstring)."""
    format: Callable[[Any], str] | None = None
    """``format(data)``: how the log shows an input it sent; None: the data itself."""
    install: Callable[[HubRef], Awaitable[None] | None] | None = None
    """Called with the hub once at start, as [`Extension.install`][hub.Extension.install] is."""
    enabled: Callable[[HubRef], bool] | None = None
    """``enabled(hub)``: whether to subscribe it at start; None: always."""
    fetch: Callable[[MediaPart, int], Awaitable[bytes]] | None = None
    """``fetch(part, max_bytes)``: the bytes of a file this input recorded (a
    [`MediaPart`][hub.MediaPart] it sent with ``media=``), read at most ``max_bytes`` (raise
    [`MediaTooLarge`][hub.MediaTooLarge] past it). Called only when a run needs the bytes."""

    _adapter: TypeAdapter[Any] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        _check_name("input", self.type)

    def validate(self, data: Any) -> Any:
        """``data`` validated against ``schema``.

        Raises:
            pydantic.ValidationError: It does not match.
        """
        if self.schema is Any:
            return data
        if self._adapter is None:
            self._adapter = TypeAdapter(self.schema)
        return self._adapter.validate_python(data)


@dataclass(slots=True, eq=False)
class Context(Generic[ArgsT, MemoryT]):
    """A kind of conversation. One type has many instances, named ``TYPE:KEY``.

    ``key(args)`` gives the instance key; ``parse_key(key)`` turns it back into args (default:
    the schema's single field). ``create`` gives the initial persistent memory; ``load`` and
    ``save`` replace the store round trip; ``render`` shows the state in the prompt.
    ``reply_output`` is the output type used for a plain-text reply and for ``<output>``
    tags whose type is omitted.

    ``memory_schema``, a pydantic model, makes the memory typed: loaded into it (its
    defaults when new), saved as its JSON. ``Context[Args, Memory]`` and handlers taking
    ``ctx: RunContext[Args, Memory]`` then type-check ``ctx.memory.count``.
    """

    type: str
    """The context type: the ``TYPE`` of its instances' names ``TYPE:KEY``."""
    schema: builtins.type[ArgsT] = TextArgs  # type: ignore[assignment]
    """The pydantic model of its args (default [`TextArgs`][hub.TextArgs]: one string)."""
    key: Callable[[ArgsT], str] | None = None
    """``key(args)``: the instance key; None: the schema's single field."""
    parse_key: Callable[[str], dict[str, Any]] | None = None
    """``parse_key(key)``: the args (as a dict) of an instance key; None: the schema's single field."""
    create: Callable[[ArgsT, RunContext[ArgsT, MemoryT]], MemoryT | Awaitable[MemoryT]] | None = None
    """``create(args, ctx)``: the first memory of a new instance; None: an empty one."""
    load: Callable[[str, RunContext[ArgsT, MemoryT]], Awaitable[Any]] | None = None
    """``await load(key, ctx)``: the instance's memory from elsewhere, in place of the hub's store."""
    save: Callable[[str, MemoryT, RunContext[ArgsT, MemoryT]], Awaitable[None]] | None = None
    """``await save(key, memory, ctx)``: the memory saved elsewhere, in place of the hub's store."""
    render: Callable[[MemoryT, RunContext[ArgsT, MemoryT]], str] | None = None
    """``render(memory, ctx)``: the state the prompt shows the model; None: nothing."""
    description: str = ""
    """What the conversation is, as the model reads it."""
    instructions: str = ""
    """How to behave in it, added to the prompt."""
    use: Callable[[ArgsT, RunContext[ArgsT, MemoryT]], Sequence[tuple[Context[Any, Any], Any]]] | None = None
    """``use(args, ctx)``: other contexts (with their args) this one uses: their memory, actions and outputs
    join the run."""
    actions: Sequence[Action] = ()
    """Actions offered only in runs of this context."""
    outputs: Sequence[Output] = ()
    """Outputs offered only in runs of this context."""
    on_step: Callable[[RunContext[ArgsT, MemoryT]], Awaitable[None] | None] | None = None
    """``on_step(ctx)``: called before each step of its runs."""
    on_run: Callable[[RunContext[ArgsT, MemoryT]], Awaitable[None] | None] | None = None
    """``on_run(ctx)``: called when one of its runs ends, before the memory is saved."""
    on_error: Callable[[BaseException, RunContext[ArgsT, MemoryT]], Awaitable[ErrorDecision] | ErrorDecision] | None = (
        None
    )
    """``on_error(error, ctx)``: what to do about an error in a run: ``continue``, ``retry`` or ``abort``."""
    max_steps: int | None = None
    """Steps per run in this context; None: ``[agent] max_steps``."""
    max_history: int | None = None
    """History entries the prompt keeps; None: ``[agent] max_history``."""
    reply_output: str | None = None
    """The output type of a plain-text reply and of ``<output>`` tags without a type."""
    persona: str | None = None
    """The persona its runs speak with, unless ``[personas]`` or a route says otherwise."""
    memory_schema: builtins.type[MemoryT] | None = None
    """A pydantic model for the memory: typed, with its defaults when new."""
    counters: Sequence[str] = ()
    """Paths in the memory that count (``"visits"``, ``"stats.steps"``, ``"by_user.*"``):
    concurrent increments add up when saves are merged; any other value is last writer wins."""
    counter_paths: Counters = field(default=frozenset(), init=False, repr=False)
    """``counters``, parsed (set by the definition itself)."""

    def __post_init__(self) -> None:
        _check_name("context", self.type)
        self.counter_paths = _counters_of("context", self.type, self.counters)
        if self.memory_schema is not None and not (
            isinstance(self.memory_schema, builtins.type) and issubclass(self.memory_schema, BaseModel)
        ):
            raise TypeError(f"context {self.type!r}: memory_schema must be a pydantic BaseModel class")

    def memory_from(self, raw: Any) -> Any:
        """Stored memory as the context holds it (validated into ``memory_schema``)."""
        if self.memory_schema is None or raw is None or isinstance(raw, self.memory_schema):
            return raw
        return self.memory_schema.model_validate(raw)  # type: ignore[attr-defined]

    def memory_to(self, value: Any) -> Any:
        """Memory as it is stored (JSON)."""
        if isinstance(value, BaseModel):
            return value.model_dump(mode="json")
        return value

    def new_memory(self) -> Any:
        """Memory for an instance that has none yet, when there is no ``create``."""
        return self.memory_schema() if self.memory_schema is not None else {}

    def key_of(self, args: Any) -> str:
        """The instance key of ``args``: ``key(args)``, else the schema's single field.

        Raises:
            ValueError: the schema has several fields and no ``key`` is given.
        """
        if self.key is not None:
            return str(self.key(args))
        fields = list(type(args).model_fields) if isinstance(args, BaseModel) else []
        if len(fields) == 1:
            return str(getattr(args, fields[0]))
        if isinstance(args, BaseModel) and not fields:
            return "default"
        raise ValueError(f"context {self.type!r} has several args fields: give it a key(args) function")

    def args_from_key(self, key: str) -> Any:
        """The args an instance key stands for: ``parse_key(key)``, else the schema's single field.

        Raises:
            ValueError: the schema has several fields and no ``parse_key`` is given.
        """
        if self.parse_key is not None:
            return self.schema.model_validate(self.parse_key(key))
        fields = list(self.schema.model_fields)
        if len(fields) == 1:
            return self.schema.model_validate({fields[0]: key})
        if not fields:
            return self.schema()
        raise ValueError(f"context {self.type!r} has several args fields: give it a parse_key(key) function")


@dataclass(slots=True, eq=False)
class Service:
    """A client with a lifecycle, started before inputs subscribe and stopped after they stop."""

    name: str
    """The service's name, for logs."""
    start: Callable[[HubRef], Awaitable[None]]
    """``await start(hub)``: called when the hub starts, before inputs subscribe."""
    stop: Callable[[], Awaitable[None]]
    """``await stop()``: called when the hub stops, after the inputs stopped."""


_ROUTE_PATH = re.compile(r"/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*")
_HEADER_NAME = re.compile(r"[A-Za-z0-9-]+")
RESERVED_PATHS = ("/healthz", "/metrics", "/webhooks", "/events", "/runs", "/ui")
"""The hub's own paths on ``[http]``: an extension's route may not be one of them or under one."""


@dataclass(frozen=True, slots=True)
class RouteRequest:
    """A request to an extension's route, authenticated and read by the hub: the body is
    capped by ``[http] max_body`` and ``data`` is its JSON, cleaned (`hub.http`)."""

    path: str
    """The path it came to."""
    headers: Mapping[str, str]
    """Its headers (case-insensitive)."""
    body: bytes
    """Its body as sent, capped at ``[http] max_body`` (for a signature check)."""
    data: Any
    """Its body parsed: JSON (or a form's fields, for a route with ``forms``); None for a GET."""
    query: Mapping[str, str] = field(default_factory=dict)
    """The query string's parameters (a GET's, for [`Route.get`][hub.Route.get])."""


class RouteVerifier(Protocol):
    """How a route whose requests are signed proves them (see [`Route`][hub.Route])."""

    def headers(self, headers: Mapping[str, str]) -> str | None:
        """Why the request is refused from its headers alone (missing, stale), or None."""

    def body(self, headers: Mapping[str, str], body: bytes) -> str | None:
        """Why the request is refused once its body is read (the signature), or None."""


@dataclass(frozen=True, slots=True)
class RouteAnswer:
    """What a route handler answers: a status and a JSON body (default ``{"ok": true}``),
    or ``text`` as ``text/plain`` (a subscription check that wants its challenge echoed bare)."""

    status: int = 200
    """The HTTP status."""
    body: Any = None
    """A JSON body; None: ``{"ok": true}``."""
    text: str | None = None
    """A ``text/plain`` body, in place of JSON; None: JSON."""


@dataclass(slots=True, eq=False)
class Route:
    """An HTTP route an extension serves on the hub's ``[http]`` endpoint (a platform's webhook).

    The hub checks ``secret_header`` against ``secret`` (in constant time, from the headers,
    before any body is read: 401 otherwise), caps and times the body as it does for
    ``/webhooks/NAME``, parses it as JSON (400 when it is not) and answers 503 while the hub
    is not taking input. ``handler`` gets a [`RouteRequest`][hub.RouteRequest] and returns a
    [`RouteAnswer`][hub.RouteAnswer] (None: 200). A ``StoreError`` it raises answers 503, so the sender
    delivers again; answer only once what came in is recorded.

    A platform that signs each request instead (an HMAC of the body, as Slack does) gives
    ``verify`` in place of the secret: ``verify.headers`` is asked from the headers alone
    before the body is read (a stale timestamp: a replay), ``verify.body`` once the capped
    body is read and before it is parsed; each returns why it refuses (401), or None.
    ``forms``: an ``application/x-www-form-urlencoded`` body is taken too, ``data`` then a
    dict of its fields (Slack's slash commands).
    ``get``: a GET at the same path goes to this handler (a platform's subscription check,
    as Meta's ``hub.challenge``), with the query string in ``query`` and no body; it is not
    authenticated by the hub: the handler checks the platform's token itself.
    """

    path: str
    """Where it is served on ``[http]`` (``/telegram/webhook``); not one of the hub's own paths."""
    handler: Callable[[RouteRequest], Awaitable[RouteAnswer | None]]
    """``await handler(request)``: answers a [`RouteRequest`][hub.RouteRequest]."""
    secret_header: str = ""
    """The header that carries ``secret`` (``X-Telegram-Bot-Api-Secret-Token``)."""
    secret: str = ""
    """What ``secret_header`` must hold: at least [`MIN_SECRET_LENGTH`][hub.platform.MIN_SECRET_LENGTH]
    characters."""
    method: str = "POST"
    """The HTTP method it is served for."""
    description: str = ""
    """What it is for, for people reading the extension (the hub does not use it)."""
    verify: RouteVerifier | None = None
    """Checks a signed request in place of ``secret`` (see above); None: the secret is checked."""
    forms: bool = False
    """Take form-encoded bodies too (``data`` is then a dict of the fields)."""
    get: Callable[[RouteRequest], Awaitable[RouteAnswer | None]] | None = None
    """``await get(request)``: answers a GET at the same path (see above); None: no GET."""

    def check(self, extension: str) -> None:
        """Raises ExtensionError naming what is wrong with this route."""
        if not _ROUTE_PATH.fullmatch(self.path) or self.path == "/" or "//" in self.path:
            raise ExtensionError(extension, f"route {self.path!r}: the path must start with '/' and name something")
        for reserved in RESERVED_PATHS:
            if self.path == reserved or self.path.startswith(reserved + "/"):
                raise ExtensionError(extension, f"route {self.path!r}: {reserved} is the hub's own path")
        if self.verify is None or self.secret_header or self.secret:  # else: proven by its signature
            self._check_secret(extension)
        if self.method not in ("POST", "PUT"):
            raise ExtensionError(extension, f"route {self.path!r}: method must be POST or PUT, not {self.method!r}")

    def _check_secret(self, extension: str) -> None:
        if not self.secret_header and not self.secret:
            raise ExtensionError(
                extension, f"route {self.path!r}: needs a secret or a verify (requests are authenticated)"
            )
        if not _HEADER_NAME.fullmatch(self.secret_header):
            raise ExtensionError(extension, f"route {self.path!r}: {self.secret_header!r} is not a header name")
        if not self.secret:
            raise ExtensionError(
                extension, f"route {self.path!r}: needs a secret or a verify (requests are authenticated)"
            )
        if len(self.secret) < MIN_SECRET_LENGTH:
            raise ExtensionError(
                extension,
                f"route {self.path!r}: its secret is {len(self.secret)} characters: it needs at least "
                f"{MIN_SECRET_LENGTH}, or it can be guessed",
            )


@dataclass(slots=True, eq=False)
class Extension:
    """What one platform or toolset contributes to a hub: everything it declares, under one name.

    A package makes one in a factory function named by its ``hub.extensions`` entry point (the
    factory takes the extension's settings model, validated from ``[extensions.NAME]``); a
    program may also pass one to ``Hub(extensions=[...])`` or [`Hub.register`][hub.Hub.register].
    Two extensions may not declare the same name: [`ExtensionError`][hub.ExtensionError]
    names both.
    """

    name: str
    """The extension's name, as its ``[extensions.NAME]`` table and its entry point name it."""
    actions: Sequence[Action] = ()
    """Actions the model may call ([`@action`][hub.action])."""
    outputs: Sequence[Output] = ()
    """Ways for the model to say something ([`@output`][hub.output])."""
    inputs: Sequence[Input] = ()
    """Listeners that bring messages in ([`@input`][hub.input])."""
    contexts: Sequence[Context] = ()
    """Kinds of conversation its inputs send to ([`Context`][hub.Context])."""
    services: Sequence[Service] = ()
    """Clients started before its inputs and stopped after them ([`service`][hub.service])."""
    install: Callable[[HubRef], Awaitable[None] | None] | None = None
    """Called with the hub once at start, before services start: set up what needs the hub."""
    description: str = ""
    """A line about what it does, for people reading a listing (the model never sees it)."""
    agent_context: Context | None = None
    """The bot's own context (see `hub.engine`), registered with ``contexts``."""
    routes: Sequence[Route] = ()
    """HTTP routes served on the hub's ``[http]`` endpoint (a platform's webhook)."""
    commands: Sequence[Command] = ()
    """Chat commands (``@command``), answered without the model on every platform with commands."""
    approver: Approver | None = None
    """How this platform asks a person to approve an action (its buttons); None: a plain reply."""

    def __post_init__(self) -> None:
        for seq_name in ("actions", "outputs", "inputs", "contexts", "services", "routes", "commands"):
            items = getattr(self, seq_name)
            if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
                raise ExtensionError(self.name, f"{seq_name} must be a list")
            setattr(self, seq_name, list(items))
        if self.agent_context is not None and self.agent_context not in self.contexts:
            self.contexts.append(self.agent_context)  # type: ignore[attr-defined]


@dataclass(slots=True)
class ContextInstance:
    """One conversation: a context definition, its args and key, its memory and history."""

    definition: Context
    """The context it is an instance of."""
    args: Any
    """Its args, validated by the context's ``schema``."""
    key: str
    """Its key: the ``KEY`` of ``TYPE:KEY``."""
    memory: Any = None
    """Its persistent memory, loaded for the run and saved when it ends."""
    history: list[Log] = field(default_factory=list)
    """Its recent log entries, which the prompt shows (up to ``max_history``)."""
    extension: str | None = None
    """The extension that declared the context, if one did."""
    summary: SummaryLog | None = None
    """The summary of the history older than ``history`` ([agent] compaction), if any."""
    used: list[ContextInstance] = field(default_factory=list)
    """The instances of the contexts it uses (``use``), nearest first."""
    base: Any = None
    """The memory as loaded (plain JSON): a save merges the run's changes onto what others saved meanwhile."""
    version: Any = None
    """The memory's version in the store when loaded (for that merge)."""
    versioned: bool = False
    """Whether the store keeps versions of the memory (then saves merge)."""
    generation: Generation | None = None
    """The life of the conversation the run loaded: its writes are dropped once ``/new`` or retention ends it."""

    @property
    def id(self) -> str:
        """Its name, ``TYPE:KEY``."""
        return f"{self.definition.type}:{self.key}"

    @property
    def type(self) -> str:
        """Its context type: the ``TYPE`` of ``TYPE:KEY``."""
        return self.definition.type


async def load_memory(store: MemoryStore, inst: ContextInstance, ctx: RunContext) -> Any:
    """A context instance's persistent memory: its ``load`` override or the store, else
    its ``create`` (awaited when async), else a new one; in its ``memory_schema``."""
    definition = inst.definition
    inst.versioned, inst.version, inst.base = False, None, None
    inst.generation = await store.begin(inst.id)  # before the load: a /new after it ends this life
    if definition.load is not None:
        memory = await _value(definition.load(inst.id, ctx))
    else:
        memory, inst.version = await store.get_versioned(f"memory:{inst.id}")
        inst.versioned = True
    if memory is None:
        memory = (
            await _value(definition.create(inst.args, ctx))
            if definition.create is not None
            else definition.new_memory()
        )
    memory = definition.memory_from(memory)
    if inst.versioned:
        try:
            inst.base = plain_json(definition.memory_to(memory))
        except (TypeError, ValueError):  # not JSON (the save says so): saved whole
            inst.versioned = False
    return memory


async def save_memory(store: MemoryStore, inst: ContextInstance, ctx: RunContext) -> None:
    """Write a context instance's memory back: its ``save`` override, or the store. Nothing
    is written once the conversation was forgotten since it was loaded (``/new``, retention)."""
    definition = inst.definition
    if definition.save is not None:
        await _value(definition.save(inst.id, inst.memory, ctx))
        return
    key = f"memory:{inst.id}"
    if not inst.versioned:
        value = definition.memory_to(inst.memory)
        if inst.generation is None:
            await store.set(key, value)
        elif not await store.set_if_current(key, value, inst.generation):
            log.info("memory of %s not saved: the conversation was forgotten since this run began", inst.id)
        return
    value = plain_json(definition.memory_to(inst.memory))  # TypeError: not JSON, as store.set says
    if value == inst.base and inst.version is not None:
        return  # unchanged: nothing to write over what others saved
    try:
        stored, inst.version = await store.save_merged(
            key,
            value,
            base=inst.base,
            version=inst.version,
            counters=definition.counter_paths,
            generation=inst.generation,
        )
    except Forgotten:
        log.info("memory of %s not saved: the conversation was forgotten since this run began", inst.id)
        return
    inst.base = stored
    if stored != value:  # merged with what others saved: the instance holds that now, with
        # what a run sharing it (the bot's own context) changed while the save was awaited
        now = plain_json(definition.memory_to(inst.memory))
        merged = merge3(value, now, stored, counters=definition.counter_paths)
        inst.memory = definition.memory_from(plain_json(merged))  # shares nothing with base


def plain_json(value: Any) -> Any:
    """``value`` as JSON holds it (a deep copy: tuples become lists, keys strings)."""
    return json.loads(json.dumps(value))


async def _value(res: Any) -> Any:
    if asyncio.iscoroutine(res):
        return await res
    return res
