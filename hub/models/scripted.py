"""A scripted model for tests and benchmarks, like pydantic-ai's FunctionModel.

Give it responses (strings, exceptions to raise, functions of the request, or a native tool
turn: a list of text pieces and `ToolCallDelta` pieces, streamed as they
are); it streams each string in chunks split at awkward places: inside tags, attributes and between the surrogate-free
code points of multi-byte characters, with a seeded random generator so failures replay.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from ..errors import ModelError
from . import Model, ModelRequest, ToolCallDelta, Usage

__all__ = ["ScriptedModel", "Script", "Turn", "PrefixCache", "prefix_length"]

Turn = list[str | ToolCallDelta]
"""A native tool turn: text pieces and tool-call pieces, streamed in this order."""
Script = str | Turn | BaseException | Callable[[ModelRequest], "str | Turn | BaseException"]


def prefix_length(a: str, b: str) -> int:
    """How many leading characters ``a`` and ``b`` share (a binary search over slices: each
    comparison runs in C, so a long prompt costs a few dozen of them, not a Python loop)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


class PrefixCache:
    """A provider's prompt cache, as the test models play it: a prompt's cached part is the
    longest prefix it shares with one of the last ``size`` prompts (OpenAI caches the
    longest identical prefix it saw recently), in tokens at about four characters each."""

    def __init__(self, size: int = 16) -> None:
        self.size = size
        self._seen: list[str] = []

    def cached_tokens(self, prompt: str) -> int:
        best = max((prefix_length(prompt, p) for p in self._seen), default=0)
        self._seen.append(prompt)
        if len(self._seen) > self.size:
            self._seen.pop(0)
        return best // 4


class ScriptedModel(Model):
    """Streams the next scripted response for each request.

    ``chunk``: a fixed chunk size, or None for random sizes 1..12. ``delay``: seconds before
    the first chunk (a slow model). When the script runs out, ``default`` answers (or an
    error is raised, so a test never waits on a silent model).

    Args:
        responses: What to answer, in order, one per request: text (with the protocol's tags),
            a scripted tool-call turn, an exception to raise, or a function of the request;
            or one function that answers every request.
        chunk: A fixed chunk size, or None for random sizes 1..12.
        seed: Seeds the random chunk sizes, so a test's stream is the same each run.
        delay: Seconds before the first chunk.
        chunk_delay: Seconds between chunks.
        default: The answer once the responses run out; None: an error.

    Attributes:
        chunk: A fixed chunk size, or None for random sizes.
        delay: Seconds before the first chunk.
        chunk_delay: Seconds between chunks.
        default: The answer once the responses run out.
        requests: Every request it was sent, in order: what a test asserts the prompt held.
        cache: Which prompt prefixes it has seen, to report ``cached_tokens`` as a provider would.
    """

    name = "scripted"
    """Its name in logs and metrics."""

    def __init__(
        self,
        responses: Sequence[Script] | Callable[[ModelRequest], str] = (),
        *,
        chunk: int | None = None,
        seed: int = 0,
        delay: float = 0.0,
        chunk_delay: float = 0.0,
        default: str | None = None,
    ) -> None:
        self._fn = responses if callable(responses) else None
        self._queue = [] if callable(responses) else list(responses)
        self.chunk = chunk
        self.delay = delay
        self.chunk_delay = chunk_delay
        self.default = default
        self._rng = random.Random(seed)
        self.requests: list[ModelRequest] = []
        self.cache = PrefixCache()

    def add(self, *responses: Script) -> None:
        """Queue more responses, after those left."""
        self._queue.extend(responses)

    def _next(self, request: ModelRequest) -> str | Turn | BaseException:
        if self._fn is not None:
            return self._fn(request)
        if self._queue:
            item = self._queue.pop(0)
        elif self.default is not None:
            item = self.default
        else:
            return ModelError("scripted model: no response left for this request", retryable=False)
        if callable(item) and not isinstance(item, BaseException):
            return item(request)
        return item

    def split(self, text: str) -> list[str]:
        """``text`` in the chunks it streams it as (``chunk`` long, or random sizes)."""
        out, i = [], 0
        while i < len(text):
            n = self.chunk or self._rng.randint(1, 12)
            out.append(text[i : i + n])
            i += n
        return out

    async def stream(self, request: ModelRequest) -> AsyncIterator[str | Usage | ToolCallDelta]:
        self.requests.append(request)
        item = self._next(request)
        if self.delay:
            await asyncio.sleep(self.delay)
        if isinstance(item, BaseException):
            raise item
        pieces: list[str | ToolCallDelta] = list(self.split(item)) if isinstance(item, str) else list(item)
        for piece in pieces:
            if self.chunk_delay:
                await asyncio.sleep(self.chunk_delay)
            yield piece
        prompt = request.system + "".join(_text(m["content"]) for m in request.messages)
        prompt_chars = len(prompt)
        written = sum(len(p) if isinstance(p, str) else len(p.arguments) for p in pieces)
        called = any(isinstance(p, ToolCallDelta) for p in pieces)
        yield Usage(
            prompt_tokens=prompt_chars // 4 + 1,
            completion_tokens=written // 4 + 1,
            finish_reason="tool_calls" if called else "stop",
            cached_tokens=min(self.cache.cached_tokens(prompt), prompt_chars // 4 + 1),
        )


def _text(content: Any) -> str:
    """A message's text (a vision request's content is a list of parts; a tool turn's may be None)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content if isinstance(p, dict))
