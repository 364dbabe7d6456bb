"""What extensions declare (actions, outputs, inputs, contexts, services), the run context their handlers get, and the registry and loader that find them."""

from __future__ import annotations

from ._decorators import action, input, output, service
from ._loader import ENTRY_POINT_GROUP, import_extension, load_extension, load_extensions
from ._registry import Registry
from ._run_context import (
    Conversation,
    RunContext,
    RunRejected,
    RunResult,
    StopRun,
    jsonable,
    store_reason,
    validation_message,
)
from ._types import (
    Action,
    Context,
    ContextInstance,
    Extension,
    Input,
    NoArgs,
    Output,
    OutputResult,
    Route,
    RouteAnswer,
    RouteRequest,
    Service,
    TextArgs,
    load_memory,
    save_memory,
)

__all__ = [
    "Action",
    "Context",
    "ContextInstance",
    "Conversation",
    "ENTRY_POINT_GROUP",
    "Extension",
    "Input",
    "NoArgs",
    "Output",
    "OutputResult",
    "Registry",
    "Route",
    "RouteAnswer",
    "RouteRequest",
    "RunContext",
    "RunRejected",
    "RunResult",
    "Service",
    "StopRun",
    "TextArgs",
    "action",
    "import_extension",
    "input",
    "jsonable",
    "load_extension",
    "load_extensions",
    "load_memory",
    "output",
    "save_memory",
    "service",
    "store_reason",
    "validation_message",
]
