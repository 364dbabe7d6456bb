"""The model seam: a request in, text chunks out.

``Model.stream(request)`` is an async iterator of text chunks (and, for a request that offers
``tools``, :class:`ToolCallDelta` pieces of the model's native tool calls) that ends with one
:class:`Usage`, which also says why the model stopped (``finish_reason``: ``"length"`` when
the response was cut at the token limit). Providers raise :class:`~hub.errors.ModelError` with ``retryable`` set for
429, 5xx, timeouts and connection failures; :func:`stream_with_retry` retries those with
exponential backoff and jitter, bounded, and raises ``ModelUnavailable`` past the bound.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from ..backoff import Backoff
from ..errors import ModelError, ModelUnavailable

__all__ = ["Model", "ModelRequest", "ToolCallDelta", "Usage", "RetryPolicy", "stream_with_retry"]


@dataclass(slots=True)
class ModelRequest:
    system: str
    messages: list[dict[str, Any]]
    """Chat messages; a user message's ``content`` is text, or a list of parts (``text`` and
    ``image_url``) when pictures go to a vision model."""
    max_tokens: int | None = None
    temperature: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
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
    completion_tokens: int = 0
    finish_reason: str | None = None
    """``"stop"``, ``"length"`` (cut at the token limit), ... as the provider says; None: unknown."""
    cached_tokens: int = 0
    """Of ``prompt_tokens``, those the provider served from its prompt cache
    (OpenAI's ``usage.prompt_tokens_details.cached_tokens``); 0 when it says none."""


class Model(ABC):
    name: str = "model"

    @abstractmethod
    def stream(self, request: ModelRequest) -> AsyncIterator[str | Usage | ToolCallDelta]:
        """Text chunks as they arrive (and tool-call pieces when ``request.tools`` is set), then one Usage."""

    async def start(self) -> None:  # noqa: B027 - optional hook
        """Start resources (a local server); idempotent."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources; idempotent."""


@dataclass(slots=True)
class RetryPolicy:
    max_retries: int = 4
    base_delay: float = 0.5
    max_delay: float = 20.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Exponential backoff with jitter (:class:`~hub.backoff.Backoff`); a server's Retry-After is a floor."""
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
