"""The engine: the step loop, a run, the intake that owns every input's lifecycle, the runner's queues and limits, actions, outputs, live output, chat commands, replies outside the step loop, the decoding of inbound files in bounded worker processes, and the hook protocol through which features take part, and the compaction of a conversation's history into a kept summary."""

from __future__ import annotations

from ._agent_context import AgentContext
from ._commands import BUILT_IN, STOPPED_BY_USER, CommandInfo, Commands, Stopper
from ._compaction import SUMMARY_SYSTEM, Compactor
from ._conversation import COMPACTION_SLACK
from ._decoding import Decoder
from ._deps import EngineDeps, ModelAccess
from ._hooks import Plugin, Plugins
from ._intake import Intake
from ._live_output import LiveText
from ._outputs import CUT_OFF_MARK
from ._replies import failure_text, reply_output, send_reply
from ._runner import BUSY_MODES, INTERRUPTED, Runner, Slot, Submission
from ._step_loop import Engine

__all__ = [
    "AgentContext",
    "BUILT_IN",
    "COMPACTION_SLACK",
    "CUT_OFF_MARK",
    "CommandInfo",
    "Commands",
    "Compactor",
    "Decoder",
    "Engine",
    "EngineDeps",
    "Intake",
    "LiveText",
    "ModelAccess",
    "Plugin",
    "Plugins",
    "Runner",
    "STOPPED_BY_USER",
    "BUSY_MODES",
    "INTERRUPTED",
    "SUMMARY_SYSTEM",
    "Slot",
    "Stopper",
    "Submission",
    "failure_text",
    "reply_output",
    "send_reply",
]
