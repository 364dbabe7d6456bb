"""Hub: one asyncio process that puts an LLM agent on Discord, Telegram and X at once.

The public surface is this module's ``__all__``; everything else is internal.
"""

from .config import HubConfig, load_config
from .definitions import (
    Action,
    Context,
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
    action,
    input,
    output,
    service,
)
from .engine import ContextInstance, RunContext, RunResult
from .errors import (
    ActionError,
    ConfigError,
    ExtensionError,
    ExtensionFailed,
    HubError,
    MediaError,
    MediaRefused,
    MediaTooLarge,
    ModelError,
    ModelUnavailable,
    ParseError,
    RetryAction,
    RunError,
    StoreError,
)
from .hub import Hub
from .logs import (
    ActionCallLog,
    ActionResultLog,
    ErrorLog,
    InputLog,
    Log,
    MediaPart,
    OutputLog,
    StateLog,
    StepLog,
    ThoughtLog,
)
from .media import Media, MediaFile
from .memory.store import InMemoryStore, MemoryStore
from .models import Model, ModelRequest, Usage
from .models.scripted import ScriptedModel
from .runner import Submission
from .access import Decision
from .events import Dropped, Event, EventStream, OutputPartial, RunEnded, RunEvent, RunStarted
from .live import LiveText
from .runs import RunRecord, RunState

__all__ = [
    "Action",
    "ActionCallLog",
    "ActionError",
    "ActionResultLog",
    "ConfigError",
    "Context",
    "ContextInstance",
    "Decision",
    "Dropped",
    "ErrorLog",
    "Event",
    "EventStream",
    "Extension",
    "ExtensionError",
    "ExtensionFailed",
    "Hub",
    "HubConfig",
    "HubError",
    "InMemoryStore",
    "Input",
    "InputLog",
    "LiveText",
    "Log",
    "Media",
    "MediaError",
    "MediaFile",
    "MediaPart",
    "MediaRefused",
    "MediaTooLarge",
    "MemoryStore",
    "Model",
    "ModelError",
    "ModelRequest",
    "ModelUnavailable",
    "NoArgs",
    "Output",
    "OutputLog",
    "OutputPartial",
    "OutputResult",
    "ParseError",
    "RetryAction",
    "Route",
    "RouteAnswer",
    "RouteRequest",
    "RunContext",
    "RunEnded",
    "RunError",
    "RunEvent",
    "RunRecord",
    "RunResult",
    "RunStarted",
    "RunState",
    "ScriptedModel",
    "Service",
    "StateLog",
    "StepLog",
    "StoreError",
    "Submission",
    "TextArgs",
    "ThoughtLog",
    "Usage",
    "action",
    "input",
    "load_config",
    "output",
    "service",
]
