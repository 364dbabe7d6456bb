"""Any OpenAI-compatible chat-completions server (OpenAI, Ollama, vLLM, llama.cpp).

The streaming chat request, a turn's hot path, is sent on keep-alive connections shared by
the clients of one base URL (`_http`; through a proxy, on a shared aiohttp session); the
``openai`` SDK stays for everything else (a caller's own ``client``, audio) and words the
errors (`_openai_errors`), so what is raised is what the SDK would raise.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import aiohttp
import orjson
from multidict import CIMultiDict
from yarl import URL

from ..errors import ContextTooLong, ModelError
from . import CONTEXT_TOO_LONG_CODES, Model, ModelRequest, ToolCallDelta, Usage, context_too_long
from ._http import Response
from ._openai_errors import connection_error, load_sdk, status_error
from ._sessions import SessionLease, env_proxy

if TYPE_CHECKING:
    import openai
    from openai import AsyncOpenAI

__all__ = ["OpenAIModel"]

#: The SDK's base URL when none is configured (and ``OPENAI_BASE_URL`` is unset).
DEFAULT_BASE_URL = "https://api.openai.com/v1"

#: Headers of every request on the SDK's path (the client adds auth, ``base_url`` and its own).
_JSON = {"headers": {"Content-Type": "application/json"}}


class OpenAIModel(Model):
    """Streams chat completions. The client never retries by itself: the engine's policy does.

    The request is built once per model: its URL and headers at construction (the
    SDK's: ``Authorization``, ``OpenAI-Organization`` and ``OpenAI-Project`` from
    ``OPENAI_ORG_ID`` / ``OPENAI_PROJECT_ID``, ``base_url`` else ``OPENAI_BASE_URL``),
    its body serialised with orjson, then written on a keep-alive connection shared by
    every client of the same base URL on the loop (a client per key costs no pool of its
    own), or through the environment's proxy on aiohttp.
    The SSE body is decoded here. The SDK's request building and per-chunk models were
    about half of a turn's CPU (the docs' benchmarks page). Errors are the SDK's own
    exception types before they become [`ModelError`][hub.ModelError] (chained as its
    ``__cause__``), so nothing above the client sees a difference.

    Args:
        concurrency: Streams in flight at once for this client (``[model] concurrency``);
            more wait for one to end, so each reuses a kept connection.
        client: An ``AsyncOpenAI`` (Azure, custom auth) whose own request path is used
            instead, through its generic ``post(stream=True)``.
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
        self.timeout = timeout
        self.concurrency = max(1, concurrency)
        self._client = client
        self._usage_option = True
        self.extra_body = extra_body
        base = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        self.base_url = base
        self._url = base + "/chat/completions"
        headers = {
            "Authorization": f"Bearer {api_key or 'not-needed'}",
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": "hub (aiohttp)",
        }
        for header, env in (("OpenAI-Organization", "OPENAI_ORG_ID"), ("OpenAI-Project", "OPENAI_PROJECT_ID")):
            if os.environ.get(env):
                headers[header] = os.environ[env]
        # parsed once: aiohttp would parse the URL and copy a dict of headers on every request
        self._headers = CIMultiDict(headers)
        self._target = URL(self._url)
        # httpx's timeout as the SDK set it: to connect, and between two reads (not in all)
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=timeout, sock_read=timeout)
        self._lease = SessionLease(base)
        self._proxy = env_proxy(self._url)
        self._slots: asyncio.Semaphore | None = None
        self._head = _request_head(self._url, headers)

    async def close(self) -> None:
        await self._lease.release()
        if self._client is not None:
            await self._client.close()

    async def stream(self, request: ModelRequest) -> AsyncIterator[str | Usage | ToolCallDelta]:
        payload = self._payload(request)
        chunks = _Chunks(self.name, tools=bool(request.tools))
        if self._client is not None:
            async for item in self._stream_sdk(payload, chunks):
                yield item
            return
        slots = self._slots
        if slots is None:
            slots = self._slots = asyncio.Semaphore(self.concurrency)
        if self._proxy is None:
            async with slots:
                async for item in self._stream_direct(payload, chunks):
                    yield item
            return
        session = self._lease.session()
        async with slots:
            reading = False
            watch: _ReadWatch | None = None
            try:
                async with session.post(
                    self._target, data=payload, headers=self._headers, timeout=self._timeout, proxy=self._proxy
                ) as response:
                    if response.status >= 400:
                        body = await response.read()
                        await load_sdk()
                        error = status_error(response.status, list(response.raw_headers), body, self._url)
                        raise self._failure(error) from error
                    reading = True
                    watch = _ReadWatch.start(response, self.timeout)
                    reads = response.content.iter_any()
                    async for item in chunks.items(reads if watch is None else watch.stamped(reads)):
                        yield item
            except (aiohttp.ClientError, TimeoutError) as e:
                # the body's read timeout (ours) closed the response: a timeout, as aiohttp's is
                cause: BaseException = _read_timeout() if watch is not None and watch.timed_out else e
                await load_sdk()
                broke = connection_error(cause, self._url, reading=reading)
                raise self._failure(broke) from broke
            finally:
                if watch is not None:
                    watch.cancel()
        chunks.usage.finish_reason = chunks.finish_reason
        yield chunks.usage

    async def _stream_direct(self, payload: bytes, chunks: _Chunks) -> AsyncIterator[str | Usage | ToolCallDelta]:
        """The request on the shared keep-alive connections (`_http`): no proxy in the way."""
        origin = self._lease.origin()
        response: Response | None = None
        reading = False
        try:
            response = await origin.request(self._head, payload, timeout=self.timeout)
            if response.status >= 400:
                body = await response.read()
                await load_sdk()
                error = status_error(response.status, response.raw_headers, body, self._url)
                raise self._failure(error) from error
            reading = True
            async for item in chunks.items(response.chunks()):
                yield item
        except (OSError, TimeoutError) as e:
            await load_sdk()
            broke = connection_error(e, self._url, reading=reading)
            raise self._failure(broke) from broke
        finally:
            if response is not None:
                origin.release(response)
        chunks.usage.finish_reason = chunks.finish_reason
        yield chunks.usage

    async def _stream_sdk(self, payload: bytes, chunks: _Chunks) -> AsyncIterator[str | Usage | ToolCallDelta]:
        """The same request through a caller's SDK client (its generic ``post(stream=True)``)."""
        import openai

        httpx2 = _httpx()
        assert self._client is not None
        try:
            # the client's documented raw form (cast_to the transport's Response, stream=True)
            # has no overload of its own in the SDK's stubs
            response = await self._client.post(  # type: ignore[call-overload]
                "/chat/completions", cast_to=httpx2.Response, content=payload, options=_JSON, stream=True
            )
            async with aclosing(response):
                async for item in chunks.items(response.aiter_bytes()):
                    yield item
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
        """The ModelError for the SDK's exception (or, on a caller's client, its transport's),
        retryable where another try may work."""
        import openai

        httpx2 = _httpx()
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


def _request_head(url: str, headers: dict[str, str]) -> bytes:
    """The request line and headers of every chat request to ``url``, built once (the
    length of each body is added as it is sent)."""
    parts = urlsplit(url)
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    default = 443 if parts.scheme == "https" else 80
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 address, bracketed as in the URL
        host = f"[{host}]"
    if parts.port and parts.port != default:
        host = f"{host}:{parts.port}"
    lines = [f"POST {target} HTTP/1.1", f"Host: {host}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    for line in lines:
        # named by the header, never shown: the value may be a key
        if "\r" in line or "\n" in line:
            raise ValueError(f"a header of the model request holds a line break: {line.split(':')[0]!r}")
        if not line.isascii():
            raise ValueError(
                f"a header of the model request holds a character that is not ASCII: {line.split(':')[0]!r}"
            )
    return "\r\n".join(lines).encode("ascii")


def _httpx() -> Any:
    """httpx2, the HTTP client openai 3.x is built on (its exceptions), imported with the SDK."""
    import httpx2

    return httpx2


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

    async def items(self, body: AsyncIterator[bytes]) -> AsyncIterator[str | ToolCallDelta]:
        """The text and tool-call pieces of an SSE ``body``: the text of every event one
        network read brought as one piece (one parser feed per read, not one per event: a
        fast server's read holds dozens), then the tool calls it finished."""
        async for events in _sse_events(body):
            pieces: list[str] = []
            try:
                self.read(events, pieces)
            finally:
                # what came before a broken event is still the model's: handed on first
                if pieces:
                    yield pieces[0] if len(pieces) == 1 else "".join(pieces)
                if self.calls:  # a tool call's pieces follow the text they came after
                    calls, self.calls = self.calls, []
                    for call in calls:
                        yield call

    def read(self, events: list[bytes], pieces: list[str]) -> None:
        """Add the text of ``events`` (the ``data:`` of each) to ``pieces``."""
        # After [DONE], read on to the end of the body (it ends there): a response closed
        # unread closes its connection instead of reusing it.
        if self.done:
            return
        parsed, broken = _parsed(events)
        if len(parsed) < len(events) and broken is None:
            self.done = True  # [DONE]: what follows it is not read
        # one loop, no call per event: this runs for every token of every reply
        for chunk in parsed:
            if not isinstance(chunk, dict):
                continue
            if chunk.get("error"):
                raise self._error(chunk["error"])
            u = chunk.get("usage")
            if u:
                details = u.get("prompt_tokens_details")
                cached = details.get("cached_tokens") if isinstance(details, dict) else None
                self.usage = Usage(
                    u.get("prompt_tokens") or 0, u.get("completion_tokens") or 0, cached_tokens=cached or 0
                )
            for choice in chunk.get("choices") or ():
                if choice.get("finish_reason"):
                    self.finish_reason = choice["finish_reason"]
                delta = choice.get("delta")
                text = delta.get("content") if delta else None
                if text:
                    pieces.append(text)
                if self.tools and delta and delta.get("tool_calls"):
                    self._tool_calls(delta["tool_calls"])
        if broken is not None:  # what came before it is the model's, handed on first
            raise ModelError(f"{self.name}: invalid JSON in the stream: {broken}") from broken

    def _tool_calls(self, calls: Any) -> None:
        """The ``tool_calls`` of one delta, as `ToolCallDelta` pieces."""
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


def _parsed(events: list[bytes]) -> tuple[list[Any], ValueError | None]:
    """The JSON of ``events`` up to ``[DONE]`` (not included), and the error of the first
    event that is not JSON (the ones before it are returned). A read's events are parsed as
    one array, one call instead of one per event, and one by one only when that fails."""
    if not events:
        return [], None
    body = events[:-1] if events[-1] == b"[DONE]" else events
    try:
        if len(body) == 1:
            return [orjson.loads(body[0])], None
        parsed = orjson.loads(b"[" + b",".join(body) + b"]") if body else []
        if len(parsed) == len(body):  # ``data: 1,2`` would be two values: parsed one by one
            return parsed, None
    except ValueError:
        pass
    out: list[Any] = []
    for data in events:
        if data == b"[DONE]":
            return out, None
        try:
            out.append(orjson.loads(data))
        except ValueError as e:
            return out, e
    return out, None


def _read_timeout() -> aiohttp.ServerTimeoutError:
    """What aiohttp raises when ``sock_read`` passes (the SDK's ``APITimeoutError`` above)."""
    return aiohttp.ServerTimeoutError("Timeout on reading data from socket")


class _ReadWatch:
    """``sock_read`` for a response's body, at one timer per ``timeout`` seconds.

    aiohttp's own read timeout (kept for the wait for the headers) cancels and schedules a
    timer at every network read, a few times a request, and the loop sifts the cancelled ones
    out of its heap; this timer is moved only when it is due and data came meanwhile. When no
    byte came for ``timeout`` seconds the response is closed and the read raises a timeout,
    as aiohttp's would.
    """

    __slots__ = ("loop", "timeout", "response", "last", "handle", "timed_out")

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout: float, response: aiohttp.ClientResponse) -> None:
        self.loop = loop
        self.timeout = timeout
        self.response = response
        self.last = loop.time()
        self.timed_out = False
        self.handle: asyncio.TimerHandle | None = loop.call_at(self.last + timeout, self._due)

    @classmethod
    def start(cls, response: aiohttp.ClientResponse, timeout: float) -> _ReadWatch | None:
        """Take the body's read timeout over from aiohttp; None when there is nothing left to
        wait for (the whole body came with the headers: the connection is already released)."""
        connection = response.connection
        protocol = connection.protocol if connection is not None else None
        if protocol is None or not timeout:
            return None
        protocol.read_timeout = None  # set again by the next request on this connection
        return cls(asyncio.get_running_loop(), timeout, response)

    async def stamped(self, body: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """``body``, noting when each read came."""
        async for chunk in body:
            self.last = self.loop.time()
            yield chunk

    def _due(self) -> None:
        due = self.last + self.timeout
        if self.loop.time() < due:  # data came since: wait for the rest of the new interval
            self.handle = self.loop.call_at(due, self._due)
            return
        self.handle = None
        self.timed_out = True
        self.response.content.set_exception(_read_timeout())
        self.response.close()  # the connection is not reused with the rest of a body unread

    def cancel(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None


async def _sse_events(body: AsyncIterator[bytes]) -> AsyncIterator[list[bytes]]:
    """The ``data:`` fields of a server-sent-events body (one per event, multi-line joined),
    a list per network read: the events that read completed."""
    # Cut at whole events (a blank line), not lines: an event that is one ``data: ...`` line,
    # as every chat completion chunk is, costs two bytes methods; others go line by line.
    buf = b""
    async for chunk in body:
        buf = buf + chunk if buf else chunk
        if b"\n" not in chunk:
            continue
        held = b""
        if b"\r" in buf:  # CRLF line ends, as LF; a CR that ends the read may start a CRLF
            if buf.endswith(b"\r"):
                buf, held = buf[:-1], b"\r"
            buf = buf.replace(b"\r\n", b"\n")
        end = buf.rfind(b"\n\n")
        if end < 0:
            buf += held
            continue
        complete, buf = buf[:end], buf[end + 2 :] + held
        # the usual read: one-line ``data: `` events only (a JSON chunk holds no raw line
        # break), cut by one split
        if complete.startswith(b"data: ") and complete.count(b"\n") == 2 * complete.count(b"\n\ndata: "):
            yield complete[6:].split(b"\n\ndata: ")
            continue
        events: list[bytes] = []
        for event in complete.split(b"\n\n"):
            if event.startswith(b"data: ") and b"\n" not in event:
                events.append(event[6:])
            elif event:
                data = _data_fields(event)
                if data is not None:
                    events.append(data)
        if events:
            yield events
    if buf:  # the body ended inside an event: what it has is still an event
        data = _data_fields(buf.replace(b"\r\n", b"\n").rstrip(b"\r"))
        if data is not None:
            yield [data]


def _data_fields(event: bytes) -> bytes | None:
    """The ``data:`` lines of one event, joined by newlines (None: it has none)."""
    data = [
        line[6:] if line.startswith(b"data: ") else line[5:] for line in event.split(b"\n") if line.startswith(b"data:")
    ]
    return (data[0] if len(data) == 1 else b"\n".join(data)) if data else None


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
