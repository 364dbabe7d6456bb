"""What an extension declares: actions, outputs, inputs, contexts, services.

The schemas come from pydantic annotations: an action's arguments from its handler's first
parameter, an output's content from its handler's first parameter (``str`` means text), a
context's args from ``schema``. Decorators return the definition objects, which are plain
data: registries live on the [`Hub`][hub.Hub] instance, never at module level.

The definition classes are in ``_types``; this module holds the decorators and the schema
inference.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, get_type_hints

from pydantic import BaseModel, ConfigDict, create_model

from ._commands import Command, CommandContext
from ._types import (
    Action,
    Input,
    NoArgs,
    Output,
    Service,
    _NoAttributes,
)

if TYPE_CHECKING:
    from ._run_context import RunContext

__all__ = ["action", "output", "input", "service", "command"]


def _first_param_annotation(fn: Callable[..., Any], what: str) -> Any:
    params = list(inspect.signature(fn).parameters.values())
    if not params:
        raise TypeError(f"{what} handler {fn.__qualname__} must take its arguments as first parameter")
    try:
        hints = get_type_hints(fn)
    except Exception:  # another parameter's forward ref (e.g. ctx under TYPE_CHECKING)
        hints = {}
    ann = hints.get(params[0].name, params[0].annotation)
    if isinstance(ann, str):  # resolve just this one, as typing would
        try:
            ann = eval(ann, getattr(fn, "__globals__", {}), {})  # noqa: S307 - an annotation, not input
        except Exception:
            pass
    return None if ann is inspect.Parameter.empty else ann


# --- decorators -------------------------------------------------------------------------


def _schema_from(ann: Any, fn: Callable[..., Any], what: str) -> type[BaseModel]:
    if ann is None:
        return NoArgs
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return ann
    if ann is dict or ann is Any:
        return create_model(f"{fn.__name__}_args", __config__=ConfigDict(extra="allow"))
    if isinstance(ann, str):
        raise TypeError(
            f"{what} {fn.__qualname__}: cannot resolve the annotation {ann!r}; define the model at module "
            f"level or pass schema=..."
        )
    raise TypeError(f"{what} {fn.__qualname__}: annotate the first parameter with a pydantic BaseModel")


def action(
    fn: Callable[..., Awaitable[Any]] | None = None,
    *,
    name: str | None = None,
    schema: type[BaseModel] | None = None,
    description: str = "",
    instructions: str = "",
    examples: Sequence[str] = (),
    enabled: Callable[[RunContext], bool] | None = None,
    retry: int = 0,
    queue: str | None = None,
    memory: str | None = None,
    timeout: float | None = None,
    on_success: Callable[..., Any] | None = None,
    on_error: Callable[..., Any] | None = None,
    roles: Sequence[str] = (),
    critical: bool = False,
    confirm: bool = False,
    scope: Literal["context", "global"] = "context",
    counters: Sequence[str] = (),
) -> Any:
    """Declare an action; the first parameter's pydantic annotation is its argument schema.

    ``confirm=True``: each call waits for a person's yes (hub/features/_approvals.py).

    ``memory="name"`` gives it persistent memory (``ctx.action_memory``), one value per
    conversation unless ``scope="global"``; updates to one value never race. ``counters``
    names the paths in it that count (``"$"``: the memory is one number): concurrent
    increments add up; any other value is last writer wins."""

    def wrap(f: Callable[..., Awaitable[Any]]) -> Action:
        if not inspect.iscoroutinefunction(f):
            raise TypeError(f"action {f.__qualname__} must be an async function")
        args_schema = schema or _schema_from(_first_param_annotation(f, "action"), f, "action")
        try:
            returns = get_type_hints(f).get("return")
        except Exception:
            returns = None
        return Action(
            name=name or f.__name__,
            handler=f,
            schema=args_schema,
            description=description or inspect.getdoc(f) or "",
            instructions=instructions,
            returns=None if returns in (None, type(None), Any) else returns,
            examples=tuple(examples),
            enabled=enabled,
            retry=retry,
            queue=queue,
            memory=memory,
            timeout=timeout,
            on_success=on_success,
            on_error=on_error,
            roles=tuple(roles),
            critical=critical,
            confirm=confirm,
            scope=scope,
            counters=tuple(counters),
        )

    return wrap(fn) if fn is not None else wrap


def output(
    fn: Callable[..., Awaitable[Any]] | None = None,
    *,
    type: str,  # noqa: A002 - the contract's name
    description: str = "",
    instructions: str = "",
    attributes: type[BaseModel] | None = None,
    examples: Sequence[str] = (),
    format: Callable[[Any], str] | None = None,  # noqa: A002
    install: Callable[..., Any] | None = None,
    enabled: Callable[[RunContext], bool] | None = None,
    context: str | None = None,
    live: bool = False,
) -> Any:
    """Declare an output; the first parameter's annotation is its content schema (``str``: text).
    With ``live=True`` the handler takes a [`LiveText`][hub.LiveText] and the content is text."""

    def wrap(f: Callable[..., Awaitable[Any]]) -> Output:
        if not inspect.iscoroutinefunction(f):
            raise TypeError(f"output {f.__qualname__} must be an async function")
        ann = _first_param_annotation(f, "output")
        return Output(
            type=type,
            handler=f,
            schema=str if live or ann in (None, str) else ann,
            attributes=attributes or _NoAttributes,
            description=description or inspect.getdoc(f) or "",
            instructions=instructions,
            examples=tuple(examples),
            format=format,
            install=install,
            enabled=enabled,
            context=context,
            live=live,
        )

    return wrap(fn) if fn is not None else wrap


def input(  # noqa: A001 - the contract's name
    fn: Callable[..., Awaitable[Any]] | None = None,
    *,
    type: str,  # noqa: A002
    schema: Any = Any,
    description: str = "",
    format: Callable[[Any], str] | None = None,  # noqa: A002
    install: Callable[..., Any] | None = None,
    enabled: Callable[..., bool] | None = None,
) -> Any:
    """Declare an input from its ``subscribe(send, hub)`` function."""

    def wrap(f: Callable[..., Any]) -> Input:
        return Input(
            type=type,
            subscribe=f,
            schema=schema,
            description=description or inspect.getdoc(f) or "",
            format=format,
            install=install,
            enabled=enabled,
        )

    return wrap(fn) if fn is not None else wrap


def service(name: str, *, start: Callable[..., Awaitable[None]], stop: Callable[[], Awaitable[None]]) -> Service:
    """Declare a client with a lifecycle (a platform's connection, a pool), for
    ``Extension(services=[...])``: ``await start(hub)`` runs when the hub starts, before any
    input subscribes, and ``await stop()`` when it stops, after every input stopped. A
    ``start`` that raises fails the hub's start with [`ExtensionFailed`][hub.ExtensionFailed]."""
    return Service(name=name, start=start, stop=stop)


def command(
    name: str,
    *,
    description: str = "",
    arguments: str = "",
    roles: Sequence[str] = (),
) -> Callable[[Callable[[CommandContext], Awaitable[str | None]]], Command]:
    """Declare a chat command ``/name``: the handler gets a [`CommandContext`][hub.CommandContext] and
    returns the answer's text (or None). ``description`` (default: the docstring's first
    line) is shown in ``/help`` and the platforms' command menus; ``arguments`` describes the
    text it takes after its name; ``roles`` limits it to users holding one of those roles."""

    def wrap(f: Callable[[CommandContext], Awaitable[str | None]]) -> Command:
        if not inspect.iscoroutinefunction(f):
            raise TypeError(f"command {f.__qualname__} must be an async function")
        doc = (inspect.getdoc(f) or "").strip().splitlines()
        return Command(
            name=name,
            handler=f,
            description=description or (doc[0] if doc else ""),
            arguments=arguments,
            roles=tuple(roles),
        )

    return wrap
