"""Any OpenAI-compatible chat-completions server (OpenAI, Ollama, vLLM, llama.cpp) via ``openai``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import httpx2  # the HTTP client openai 3.x is built on: its limits and exceptions
import openai
import orjson
from openai import AsyncOpenAI

from ..errors import ContextTooLong, ModelError
from . import CONTEXT_TOO_LONG_CODES, Model, ModelRequest, ToolCallDelta, Usage, context_too_long

__all__ = ["OpenAIModel"]


#: Headers of every request (the client adds auth, ``base_url`` and its own defaults).
_JSON = {"headers": {"Content-Type": "application/json"}}


class OpenAIModel(Model):
    """Streams chat completions. The client never retries by itself: the engine's policy does.

    Requests go through the client's generic ``post(..., stream=True)`` (the SDK's path for
    custom requests): the body is serialised once with orjson and the SSE body decoded
    here, skipping the SDK's per-request parameter transform and per-chunk models, which
    were most of the CPU of a turn (the docs' benchmarks page). Auth, ``base_url``, errors, Azure
    and proxies stay the client's.

    Args:
        concurrency: Connections kept open to the server (``[model] concurrency``): the
            aiohttp connector is sized to the calls in flight, so none waits for a socket
            and each is reused.
    """

    def __init__(
        self,
        name: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        temperature: float | None = None,
        max_tokens: int | None = None,
        client: AsyncOpenAI | None = None,
        extra_body: dict[str, Any] | None = None,
        concurrency: int = 16,
    ) -> None:
        self.name = name
        self.temperature = temperature
        self.max_tokens = max_tokens
        self._client = client or AsyncOpenAI(
            base_url=base_url or None,
            api_key=api_key or "not-needed",
            timeout=timeout,
            max_retries=0,
            # the SDK's aiohttp transport: at a thousand streams at once the default httpx2
            # pool costs several times the CPU (the docs' benchmarks, "1000 conversations")
            http_client=openai.DefaultAioHttpClient(
                timeout=timeout,
                limits=httpx2.Limits(
                    max_connections=max(1, concurrency), max_keepalive_connections=max(1, concurrency)
                ),
            ),
        )
        self._usage_option = True
        self.extra_body = extra_body

    async def close(self) -> None:
        await self._client.close()

    async def stream(self, request: ModelRequest) -> AsyncIterator[str | Usage | ToolCallDelta]:
        payload = self._payload(request)
        chunks = _Chunks(self.name, tools=bool(request.tools))
        try:
            # the client's documented raw form (cast_to the transport's Response, stream=True)
            # has no overload of its own in the SDK's stubs
            response = await self._client.post(  # type: ignore[call-overload]
                "/chat/completions", cast_to=httpx2.Response, content=payload, options=_JSON, stream=True
            )
            async with aclosing(response):
                async for events in _sse_events(response.aiter_bytes()):
                    # the text of every event one network read brought, as one piece: one
                    # trip up the generators and one parser feed per read, not one per event
                    # (a fast server's read holds dozens of them)
                    pieces: list[str] = []
                    try:
                        chunks.read(events, pieces)
                    finally:
                        # what came before a broken event is still the model's: handed on first
                        if pieces:
                            yield pieces[0] if len(pieces) == 1 else "".join(pieces)
                        if chunks.calls:  # a tool call's pieces follow the text they came after
                            calls, chunks.calls = chunks.calls, []
                            for call in calls:
                                yield call
        except (openai.APIStatusError, openai.APIConnectionError, httpx2.TransportError) as e:
            raise self._failure(e) from e
        chunks.usage.finish_reason = chunks.finish_reason
        yield chunks.usage

    def _payload(self, request: ModelRequest) -> bytes:
        """The request body, serialised once."""
        messages: list[dict[str, Any]] = [{"role": "system", "content": request.system}, *request.messages]
        body: dict[str, Any] = {"model": self.name, "messages": messages, "stream": True}
        temperature = request.temperature if request.temperature is not None else self.temperature
        max_tokens = request.max_tokens or self.max_tokens
        if temperature is not None:
            body["temperature"] = temperature
        if max_tokens:
            body["max_tokens"] = max_tokens
        if self._usage_option:
            body["stream_options"] = {"include_usage": True}
        if request.tools:
            body["tools"] = request.tools
        if self.extra_body:
            body.update(self.extra_body)
        try:
            return orjson.dumps(body)
        except TypeError as e:
            raise ModelError(f"{self.name}: the request cannot be sent as JSON: {e}") from e

    def _failure(self, e: Exception) -> ModelError:
        """The ModelError for what the client raised, retryable where another try may work."""
        match e:
            case openai.BadRequestError() if self._usage_option and "stream_options" in str(e):
                self._usage_option = False  # an older server: ask again without it
                return _error(e, retryable=True)
            case openai.APIStatusError() if context_too_long(e.message, _code(e)):
                return ContextTooLong(f"{self.name}: HTTP {e.status_code}: {e.message}", status=e.status_code)
            case openai.APIStatusError():
                return _error(e, retryable=e.status_code == 429 or e.status_code >= 500 or e.status_code == 408)
            case openai.APITimeoutError() | openai.APIConnectionError():
                return ModelError(f"{self.name}: {type(e).__name__}: {e}", retryable=True)
            case httpx2.TimeoutException():  # while reading the body
                return ModelError(f"{self.name}: timed out reading the stream: {e}", retryable=True)
            case _:
                return ModelError(f"{self.name}: connection broke: {type(e).__name__}: {e}", retryable=True)


class _Chunks:
    """The stream's chunks as they are read: the text they carry, and the usage and finish
    reason the last ones report. An error chunk, or one that is not JSON, raises ModelError."""

    __slots__ = ("name", "usage", "finish_reason", "done", "tools", "calls")

    def __init__(self, name: str, *, tools: bool = False) -> None:
        self.name = name
        self.usage = Usage()
        self.finish_reason: str | None = None
        self.done = False
        self.tools = tools
        """Whether the request offered tools: only then are ``tool_calls`` deltas read."""
        self.calls: list[ToolCallDelta] = []
        """Tool-call pieces read and not yet handed on."""

    def read(self, events: list[bytes], pieces: list[str]) -> None:
        """Add the text of ``events`` (the ``data:`` of each) to ``pieces``."""
        # one loop, no call per event: this runs for every token of every reply
        for data in events:
            # After [DONE], read on to the end of the body (it ends there): a response closed
            # unread closes its connection instead of reusing it.
            if self.done or data == b"[DONE]":
                self.done = True
                continue
            try:
                chunk = orjson.loads(data)
            except ValueError as e:
                raise ModelError(f"{self.name}: invalid JSON in the stream: {e}") from e
            if not isinstance(chunk, dict):
                continue
            if chunk.get("error"):
                raise self._error(chunk["error"])
            u = chunk.get("usage")
            if u:
                self.usage = Usage(u.get("prompt_tokens") or 0, u.get("completion_tokens") or 0)
                details = u.get("prompt_tokens_details")
                if isinstance(details, dict):  # the prompt cache's share (OpenAI, vLLM, ...)
                    self.usage.cached_tokens = details.get("cached_tokens") or 0
            for choice in chunk.get("choices") or ():
                if choice.get("finish_reason"):
                    self.finish_reason = choice["finish_reason"]
                delta = choice.get("delta")
                text = delta.get("content") if delta else None
                if text:
                    pieces.append(text)
                if self.tools and delta and delta.get("tool_calls"):
                    self._tool_calls(delta["tool_calls"])

    def _tool_calls(self, calls: Any) -> None:
        """The ``tool_calls`` of one delta, as :class:`ToolCallDelta` pieces."""
        for call in calls if isinstance(calls, list) else ():
            if not isinstance(call, dict) or not isinstance(call.get("index"), int):
                raise ModelError(f"{self.name}: a tool call in the stream has no index: {str(call)[:200]}")
            fn = call.get("function") or {}
            args = fn.get("arguments") if isinstance(fn, dict) else None
            name = fn.get("name") if isinstance(fn, dict) else None
            self.calls.append(
                ToolCallDelta(
                    index=call["index"],
                    id=call.get("id") if isinstance(call.get("id"), str) else None,
                    name=name if isinstance(name, str) else None,
                    arguments=args if isinstance(args, str) else "",
                )
            )

    def _error(self, error: Any) -> ModelError:
        message = error.get("message") if isinstance(error, dict) else None
        code = error.get("code") if isinstance(error, dict) else None
        if context_too_long(message, code if isinstance(code, str) else None):
            return ContextTooLong(f"{self.name}: {message or code}")
        return ModelError(f"{self.name}: {message or 'an error occurred during streaming'}")


async def _sse_events(body: AsyncIterator[bytes]) -> AsyncIterator[list[bytes]]:
    """The ``data:`` fields of a server-sent-events body (one per event, multi-line joined),
    a list per network read: the events that read completed."""
    buf = b""
    data: list[bytes] = []
    async for chunk in body:
        buf = buf + chunk if buf else chunk
        if b"\n" not in chunk:
            continue
        lines = buf.split(b"\n")
        buf = lines.pop()
        events: list[bytes] = []
        for line in lines:
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line:  # end of an event
                if data:
                    events.append(data[0] if len(data) == 1 else b"\n".join(data))
                    data = []
            elif line.startswith(b"data:"):
                value = line[5:]
                data.append(value[1:] if value.startswith(b" ") else value)
        if events:
            yield events
    if buf.startswith(b"data:"):
        value = buf[5:].rstrip(b"\r")
        data.append(value[1:] if value.startswith(b" ") else value)
    if data:
        yield [b"\n".join(data)]


async def _sse_data(body: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The ``data:`` fields of a server-sent-events body, one event at a time."""
    async for events in _sse_events(body):
        for data in events:
            yield data


def _code(e: openai.APIStatusError) -> str | None:
    """The error's ``code`` (or ``type``), as the server's JSON body gave it."""
    body: dict[str, Any] = e.body if isinstance(e.body, dict) else {}
    error = body.get("error")
    inner: dict[str, Any] = error if isinstance(error, dict) else body
    values = [v for v in (getattr(e, "code", None), inner.get("code"), inner.get("type")) if isinstance(v, str) and v]
    return next((v for v in values if v.lower() in CONTEXT_TOO_LONG_CODES), values[0] if values else None)


def _error(e: openai.APIStatusError, *, retryable: bool = False) -> ModelError:
    message = e.message
    err = ModelError(f"HTTP {e.status_code}: {message}", status=e.status_code, retryable=retryable)
    retry_after = e.response.headers.get("retry-after") if e.response is not None else None
    try:
        err.retry_after = float(retry_after) if retry_after else None  # type: ignore[attr-defined]
    except ValueError:
        err.retry_after = None  # type: ignore[attr-defined]
    return err
