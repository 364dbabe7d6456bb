"""What extensions declare (actions, outputs, inputs, contexts, services, commands), the run context their handlers get, the registry and loader that find them, and the platforms installed."""

from __future__ import annotations

from ._approver import ApprovalAnswer, ApprovalDesk, ApprovalRequest, Approver
from ._commands import COMMAND_NAME, Command, CommandCall, CommandContext, command_handler_result
from ._context_names import split_context_name
from ._decorators import action, command, input, output, service
from ._hub_api import HubAPI, PlatformMetrics, Queued
from ._loader import ENTRY_POINT_GROUP, import_extension, load_extension, load_extensions
from ._platforms import PLATFORM_GROUP, InstalledPlatform, installed_platforms, platform_list
from ._registry import Registry
from ._run_context import Conversation, RunContext
from ._run_outcome import RunResult, StopRun, store_reason
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
    RouteVerifier,
    Service,
    TextArgs,
    load_memory,
    plain_json,
    save_memory,
    validation_message,
)

__all__ = [
    "ApprovalAnswer",
    "ApprovalDesk",
    "ApprovalRequest",
    "Approver",
    "split_context_name",
    "COMMAND_NAME",
    "Action",
    "Command",
    "CommandCall",
    "CommandContext",
    "Context",
    "ContextInstance",
    "Conversation",
    "ENTRY_POINT_GROUP",
    "Extension",
    "HubAPI",
    "InstalledPlatform",
    "Input",
    "NoArgs",
    "PLATFORM_GROUP",
    "Output",
    "OutputResult",
    "PlatformMetrics",
    "Queued",
    "Registry",
    "Route",
    "RouteAnswer",
    "RouteRequest",
    "RouteVerifier",
    "RunContext",
    "RunResult",
    "Service",
    "StopRun",
    "TextArgs",
    "action",
    "command",
    "command_handler_result",
    "import_extension",
    "input",
    "installed_platforms",
    "load_extension",
    "load_extensions",
    "load_memory",
    "plain_json",
    "platform_list",
    "output",
    "save_memory",
    "service",
    "store_reason",
    "validation_message",
]
