"""What the engine works with, handed to it by the hub that builds it (`EngineDeps`).

The engine, its actions, outputs and conversation helpers take one `EngineDeps`
instead of the whole hub: the stores it writes, the model and how to ask it
(`ModelAccess`), the registry of definitions, the runner's limits, the ordered
plugins and the redactor, each named. ``hub`` is only passed on to handlers as ``ctx.hub``
(typed `HubAPI`, the public API an action may use); the engine never
reads it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..config import HubConfig, RouteSection
from ..definitions import Conversation, HubAPI, Registry
from ..errors import ModelError
from ..events import EventBus
from ..media import MediaLimits
from ..models import Model, RetryPolicy
from ..personas import Persona, SkillSet
from ..protocol import PromptBuilder
from ..redact import Redactor
from ..store import InboxStore, MemoryStore, RunStore
from ..voice import Voice
from ._agent_context import AgentContext
from ._decoding import Decoder
from ._hooks import Plugins
from ._runner import Runner

__all__ = ["EngineDeps", "ModelAccess"]


@dataclass(slots=True, eq=False)
class ModelAccess:
    """The model and what a step needs to ask it."""

    get: Callable[[], Model]
    """The model, made on first use (a local model loads only when a run needs it)."""
    is_local: Callable[[], bool]
    """Whether it runs in process (``prompt_style = "auto"`` then prompts it as a chat)."""
    retry_policy: RetryPolicy
    prompts: PromptBuilder
    on_error: Callable[[ModelError, bool], None] | None = None
    """Told of every error the model answers, and whether it is retried (the metrics)."""
    named: Callable[[str], Model] | None = None
    """A ``[models.NAME]`` by name, made on first use: the model a ``[[routes]]`` names."""

    def pick(self, route: RouteSection | None) -> Model:
        """The model a run under ``route`` asks: the route's, else the hub's."""
        if route is not None and route.model and self.named is not None:
            return self.named(route.model)
        return self.get()


@dataclass(slots=True, eq=False)
class EngineDeps:
    config: HubConfig
    """Read for ``[agent]`` (limits, timeouts, history), ``[model]`` (vision, prompt style)
    and ``[media] read_files``."""
    runs: RunStore
    inbox: InboxStore
    """Where a run's inputs are marked taken and, when it ends, done."""
    memory: MemoryStore
    model: ModelAccess
    registry: Registry
    """The actions, outputs and inputs by name, and who registered each."""
    persona_for: Callable[[Conversation], Persona | None]
    agent: Callable[[], AgentContext | None]
    """The bot's own context (resolved when the hub starts), or None."""
    limits: Runner
    """The model-call limit (``llm_slot``) and the actions' queue locks (``queue_lock``)."""
    plugins: Plugins
    redactor: Redactor
    hub: HubAPI
    """Handed to handlers as ``ctx.hub``; the engine itself never reads it."""
    decoder: Decoder
    """Where inbound pictures are decoded and PDFs read: worker processes, bounded (a component
    of the hub's, built by the composition root)."""
    media_limits: MediaLimits = field(default_factory=MediaLimits)
    """``[media]``, read once ([`HubConfig.media_limits()`][hub.HubConfig.media_limits])."""
    bus: EventBus | None = None
    """Where live outputs publish what they receive (``output_partial`` events)."""
    voice: Voice | None = None
    """``[voice]``: voice notes transcribed, replies spoken (None: the table is absent)."""
    skills: SkillSet | None = None
    """The skills whose names and descriptions every prompt shows (``load_skill`` reads one)."""
