"""The model seam: a request in, text chunks out.

``Model.stream(request)`` is an async iterator of text chunks (and, for a request that offers
``tools``, `ToolCallDelta` pieces of the model's native tool calls) that ends with one
[`Usage`][hub.Usage], which also says why the model stopped (``finish_reason``: ``"length"`` when
the response was cut at the token limit). Providers raise [`ModelError`][hub.ModelError] with ``retryable`` set for
429, 5xx, timeouts and connection failures; `stream_with_retry()` retries those with
exponential backoff and jitter, bounded, and raises ``ModelUnavailable`` past the bound.

Above the seam, `hub.models.failover` makes one model of several named ones (failover,
key pools), with the circuit breaker `Circuit` and the key pool `KeyPool`.
"""

from __future__ import annotations

import asyncio
import re
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from ..backoff import Backoff
from ..errors import ModelError, ModelUnavailable
from ._circuit import Circuit, CircuitState, Ticket
from ._keys import KeyPool

__all__ = [
    "CONTEXT_TOO_LONG_CODES",
    "Circuit",
    "CircuitState",
    "KeyPool",
    "Model",
    "ModelRequest",
    "RetryPolicy",
    "Ticket",
    "ToolCallDelta",
    "Usage",
    "context_too_long",
    "stream_with_retry",
]

CONTEXT_TOO_LONG_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error", "string_above_max_length"})
"""Error codes (or types) that say the prompt is over the context window: OpenAI and Azure
(``context_length_exceeded``), llama.cpp's server (``exceed_context_size_error``)."""

# How OpenAI-compatible servers word "the prompt is over the context window" in an error's
# message, when they give no code. One pattern each (lowercased text):
_TOO_LONG = re.compile(
    "|".join(
        (
            r"maximum context length",  # OpenAI, vLLM, DeepSeek, Groq: "This model's maximum context length is 8192"
            r"context[ _]length[ _]exceeded",
            r"exceeds? (?:the )?(?:available |maximum )?context(?: size| window| length)?",  # llama.cpp, LM Studio
            r"context (?:size|window|length) (?:has been |was |is )?exceeded",  # llama.cpp (older)
            r"prompt (?:is )?too long",  # Ollama "prompt too long; exceeded max context length", Anthropic
            r"too large for model with \d+ maximum context length",  # Mistral
            r"longer than the maximum model length",  # vLLM (newer)
            r"input token count .{0,40}exceeds the maximum",  # Gemini's OpenAI-compatible endpoint
            r"reduce the length of the messages",  # OpenAI (older), Together
            r"input is too long for (?:the |this )?model",
        )
    )
)


def context_too_long(message: str | None, code: str | None = None) -> bool:
    """Whether a model's error says the prompt is longer than its context window: by
    ``code`` (`CONTEXT_TOO_LONG_CODES`) or by the common phrasings of OpenAI-compatible
    servers (OpenAI, vLLM, llama.cpp, Ollama, Mistral, Anthropic-compatible, Gemini)."""
    if code and code.lower() in CONTEXT_TOO_LONG_CODES:
        return True
    return bool(message) and _TOO_LONG.search(message.lower()) is not None  # type: ignore[union-attr]


@dataclass(slots=True)
class ModelRequest:
    """What a run asks of a [`Model`][hub.Model] for one step: the system prompt, the
    conversation as chat messages, and the limits. A model of one's own reads it in
    [`Model.stream`][hub.Model.stream].
    """

    system: str
    """The system prompt: the persona, the actions and outputs, the protocol."""
    messages: list[dict[str, Any]]
    """Chat messages; a user message's ``content`` is text, or a list of parts (``text`` and
    ``image_url``) when pictures go to a vision model."""
    max_tokens: int | None = None
    """The most tokens the model may write (`[model] max_tokens`); None: the provider's limit."""
    temperature: float | None = None
    """Sampling temperature (`[model] temperature`); None: the provider's default."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Notes of the hub about the request (its ``purpose``, the ``tools`` it offers), for its own
    use; not sent to the provider."""
    tools: list[dict[str, Any]] | None = None
    """OpenAI ``tools`` (``{"type": "function", "function": {name, description, parameters}}``)
    for the model's native tool calling (``prompt_style = "tools"``); None: none offered."""


@dataclass(slots=True, frozen=True)
class ToolCallDelta:
    """A piece of a streamed tool call, as OpenAI streams it: the call's ``index`` in the
    response; its ``id`` and function ``name`` in its first piece; then fragments of its
    JSON ``arguments``, to be joined in order."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass(slots=True)
class Usage:
    """The last item of a stream: tokens used, and why the model stopped."""

    prompt_tokens: int = 0
    """Tokens of the prompt, as the provider counted them."""
    completion_tokens: int = 0
    """Tokens the model wrote."""
    finish_reason: str | None = None
    """``"stop"``, ``"length"`` (cut at the token limit), ... as the provider says; None: unknown."""
    model: str | None = None
    """Which named model answered (``"model"`` for ``[model]``, else a ``[models.NAME]``), when
    the model is a `FailoverModel`; None: the only one there is."""
    cached_tokens: int = 0
    """Of ``prompt_tokens``, those the provider served from its prompt cache (OpenAI's
    ``usage.prompt_tokens_details.cached_tokens``; 0 when it says nothing)."""


class Model(ABC):
    """The model a hub talks to: anything that streams an answer to a [`ModelRequest`][hub.ModelRequest].

    The hub builds its own from ``[model]`` (an OpenAI-compatible client, a failover of
    ``[models.NAME]``); pass one as ``Hub(config, model=...)`` to use another, such as a
    [`ScriptedModel`][hub.ScriptedModel] in tests. A subclass implements
    [`stream`][hub.Model.stream], which yields text chunks as they arrive (and tool-call pieces
    when ``request.tools`` is set), then one [`Usage`][hub.Usage]; it raises
    [`ModelError`][hub.ModelError] (or [`ModelUnavailable`][hub.ModelUnavailable],
    [`ContextTooLong`][hub.ContextTooLong]) for a failure the hub should retry or report.
    [`start`][hub.Model.start] and [`close`][hub.Model.close] are optional hooks the hub calls
    with its own lifecycle.
    """

    name: str = "model"
    """The model's name as logs, metrics and `hub health` show it."""

    @abstractmethod
    def stream(self, request: ModelRequest) -> AsyncIterator[str | Usage | ToolCallDelta]:
        """Text chunks as they arrive (and tool-call pieces when ``request.tools`` is set), then one Usage."""

    async def start(self) -> None:  # noqa: B027 - optional hook
        """Start resources (a local server); idempotent."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources; idempotent."""

    def problems(self) -> dict[str, str]:
        """Named models that are not answering now, and why (a circuit open, keys refused):
        what ``hub health`` and ``/healthz`` report. A single model has none to report."""
        return {}


@dataclass(slots=True)
class RetryPolicy:
    max_retries: int = 4
    base_delay: float = 0.5
    max_delay: float = 20.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Exponential backoff with jitter ([`Backoff`][hub.platform.Backoff]); a server's Retry-After is a floor."""
        return Backoff(self.base_delay, self.max_delay).delay(attempt, retry_after=retry_after)


async def stream_with_retry(
    model: Model,
    request: ModelRequest,
    policy: RetryPolicy,
    *,
    on_retry: Any = None,
    on_error: Callable[[ModelError, bool], None] | None = None,
) -> AsyncGenerator[str | Usage | ToolCallDelta, None]:
    """Stream, retrying retryable errors that happen before the first chunk.

    A failure after chunks were yielded is not retried (those chunks were already acted
    on): it is raised as is. ``on_error(error, retried)`` hears of every error the model
    answered, whether it is retried here or raised (the hub's metrics count them).
    """
    attempt = 0
    while True:
        started = False
        try:
            stream = model.stream(request)
            try:
                async for chunk in stream:
                    started = True
                    yield chunk
            finally:
                # closed when our consumer stops early or raises: the connection is released now
                close = getattr(stream, "aclose", None)
                if close is not None:
                    await close()
            return
        except ModelError as e:
            retried = not started and e.retryable and attempt < policy.max_retries
            if on_error is not None:
                on_error(e, retried)
            if started or not e.retryable:
                raise
            if attempt >= policy.max_retries:
                raise ModelUnavailable(f"model unavailable after {attempt + 1} attempts: {e}", status=e.status) from e
            delay = policy.delay(attempt, getattr(e, "retry_after", None))
            if on_retry is not None:
                on_retry(attempt, delay, e)
            attempt += 1
            await asyncio.sleep(delay)
