"""What the engine works with, handed to it by the composition root (:class:`~hub.hub.Hub`).

The engine, its actions, outputs and conversation helpers take one :class:`EngineDeps`
instead of the whole hub: the stores, the model, the prompt builder, the ordered plugins,
the redactor and the registries, each named. ``hub`` is only passed through to handlers
as ``ctx.hub`` (the public API an action may use); the engine never reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..config import HubConfig
from ..definitions import Action, Conversation, Input, Output
from ..events import EventBus
from ..media import MediaLimits
from ..models import Model, RetryPolicy
from ..personas import Persona
from ..protocol import PromptBuilder
from ..redact import Redactor
from ..store import InboxStore, MemoryStore, RunStore
from ._agent_context import AgentContext
from ._hooks import Plugins
from ._runner import Runner

__all__ = ["EngineDeps"]


@dataclass(slots=True, eq=False)
class EngineDeps:
    config: HubConfig
    runs: RunStore
    inbox: InboxStore
    memory: MemoryStore
    prompts: PromptBuilder
    runner: Runner
    plugins: Plugins
    redactor: Redactor
    retry_policy: RetryPolicy
    model: Callable[[], Model]
    """The model, made on first use (a local model loads only when a run needs it)."""
    model_is_local: Callable[[], bool]
    actions: Mapping[str, Action]
    outputs: Mapping[str, Output]
    owner_of: Callable[[Any], str | None]
    """The extension that registered a definition."""
    persona_for: Callable[[Conversation], Persona | None]
    agent: Callable[[], AgentContext | None]
    """The bot's own context (resolved when the hub starts), or None."""
    hub: Any
    """Handed to handlers as ``ctx.hub``; the engine itself never reads it."""
    inputs: Mapping[str, Input] = field(default_factory=dict)
    """The inputs by type: the one that recorded a file fetches it (``Input.fetch``)."""
    media_limits: MediaLimits = field(default_factory=MediaLimits)
    """``[media]``, read once (:meth:`HubConfig.media_limits`)."""
    bus: EventBus | None = None
    """Where live outputs publish what they receive (``output_partial`` events)."""

    @property
    def prompt_style(self) -> str:
        return self.config.model.prompt_style
