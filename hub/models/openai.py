"""Any OpenAI-compatible chat-completions server (OpenAI, Ollama, vLLM, llama.cpp).

The ``openai`` package's :class:`AsyncOpenAI` resolves the configuration (base URL, API
key, organisation and project headers, the environment's ``OPENAI_*`` variables). The
streaming request itself goes over one pooled ``aiohttp`` session and its SSE body is
decoded here: through the SDK (httpx2, request transforms, a pydantic model per chunk) a
request cost about 2.2 ms of CPU, over aiohttp about 0.5 ms, and two requests make a turn
(bench/README.md). A caller that passes its own ``client`` (e.g. with a custom
``http_client``) gets the SDK's transport, with the same decoding.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import openai
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL
from openai import AsyncOpenAI

try:  # openai 3.x is built on httpx2, earlier versions on httpx: the same exceptions
    import httpx2
except ImportError:  # pragma: no cover
    import httpx as httpx2  # type: ignore[no-redef]

from ..errors import ModelError
from . import Model, ModelRequest, Usage

__all__ = ["OpenAIModel"]


class OpenAIModel(Model):
    """Streams chat completions. The client never retries by itself: the engine's policy does.

    ``session``: an aiohttp session to send the requests with (default: one of its own,
    created at the first request, closed by :meth:`close`). ``client``: an AsyncOpenAI to
    send them with instead (its own transport).
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
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        self.name = name
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout = timeout
        self._via_sdk = client is not None
        self._client = client or AsyncOpenAI(
            base_url=base_url or None,
            api_key=api_key or "not-needed",
            timeout=timeout,
            max_retries=0,
        )
        self._session = session
        self._own_session = session is None
        self._url: str | None = None
        self._headers: dict[str, str] | None = None
        self._proxy: URL | None = None
        self._proxy_auth: aiohttp.BasicAuth | None = None
        self._usage_option = True

    async def close(self) -> None:
        if self._own_session and self._session is not None:
            await self._session.close()
            self._session = None
        await self._client.close()

    def _body(self, request: ModelRequest) -> dict[str, Any]:
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
        return body

    async def stream(self, request: ModelRequest) -> AsyncIterator[str | Usage]:
        body = self._body(request)
        events = self._events_sdk(body) if self._via_sdk else self._events_http(body)
        usage = Usage()
        done = False
        async for data in events:
            # After [DONE], read on to the end of the body (it ends there): a response
            # closed unread closes its connection instead of going back to the pool.
            if done or data == b"[DONE]":
                done = True
                continue
            try:
                chunk = json.loads(data)
            except ValueError as e:
                raise ModelError(f"{self.name}: invalid JSON in the stream: {e}") from e
            if not isinstance(chunk, dict):
                continue
            if chunk.get("error"):
                error = chunk["error"]
                message = error.get("message") if isinstance(error, dict) else None
                raise ModelError(f"{self.name}: {message or 'an error occurred during streaming'}")
            u = chunk.get("usage")
            if u:
                usage = Usage(u.get("prompt_tokens") or 0, u.get("completion_tokens") or 0)
            for choice in chunk.get("choices") or ():
                delta = choice.get("delta")
                text = delta.get("content") if delta else None
                if text:
                    yield text
        yield usage

    # --- over aiohttp ---------------------------------------------------------------------

    def _prepare(self) -> aiohttp.ClientSession:
        if self._url is None:
            c = self._client
            self._url = str(c.base_url).rstrip("/") + "/chat/completions"
            headers = {k: v for k, v in c.default_headers.items() if isinstance(v, str)}
            try:
                headers.update(c.auth_headers)
            except Exception:  # noqa: BLE001 - an SDK without the property: a plain key
                if isinstance(c.api_key, str) and c.api_key:
                    headers["Authorization"] = f"Bearer {c.api_key}"
            headers["Content-Type"] = "application/json"
            headers["Accept"] = "text/event-stream"
            self._headers = headers
            # The environment's proxy for this URL, looked up once: with trust_env=True
            # aiohttp looks it up in a thread at every request (a thread hop each).
            try:
                self._proxy, self._proxy_auth = get_env_proxy_for_url(URL(self._url))
            except LookupError:
                self._proxy, self._proxy_auth = None, None
        if self._session is None or self._session.closed:
            # No connection limit of its own: model.concurrency bounds the requests.
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=self.timeout, sock_read=self.timeout),
            )
            self._own_session = True
        return self._session

    async def _events_http(self, body: dict[str, Any]) -> AsyncIterator[bytes]:
        session = self._prepare()
        try:
            async with session.post(
                self._url,  # type: ignore[arg-type]
                data=json.dumps(body),
                headers=self._headers,
                proxy=self._proxy,
                proxy_auth=self._proxy_auth,
            ) as resp:
                if resp.status >= 400:
                    raise await self._http_error(resp)
                async for data in _sse_data(resp.content.iter_any()):
                    yield data
        except (asyncio.TimeoutError, aiohttp.ServerTimeoutError) as e:
            raise ModelError(f"{self.name}: timed out: {e}", retryable=True) from e
        except aiohttp.ClientError as e:
            raise ModelError(f"{self.name}: {type(e).__name__}: {e}", retryable=True) from e

    async def _http_error(self, resp: aiohttp.ClientResponse) -> ModelError:
        status = resp.status
        try:
            text = await resp.text()
        except (aiohttp.ClientError, UnicodeDecodeError):
            text = ""
        message = text
        try:
            payload = json.loads(text)
            error = payload.get("error") if isinstance(payload, dict) else None
            if isinstance(error, dict) and error.get("message"):
                message = str(error["message"])
            elif isinstance(error, str):
                message = error
        except ValueError:
            pass
        retryable = status in (408, 429) or status >= 500
        if status == 400 and self._usage_option and "stream_options" in text:
            self._usage_option = False  # an older server: ask again without it
            retryable = True
        err = ModelError(f"HTTP {status}: {message[:500]}", status=status, retryable=retryable)
        err.retry_after = _seconds(resp.headers.get("retry-after"))  # type: ignore[attr-defined]
        return err

    # --- through the SDK's own transport ------------------------------------------------

    async def _events_sdk(self, body: dict[str, Any]) -> AsyncIterator[bytes]:
        kwargs = dict(body)
        try:
            async with self._client.chat.completions.with_streaming_response.create(**kwargs) as response:
                async for data in _sse_data(response.http_response.aiter_bytes()):
                    yield data
        except openai.BadRequestError as e:
            if self._usage_option and "stream_options" in str(e):
                self._usage_option = False  # an older server: ask again without it
                raise _error(e, retryable=True) from e
            raise _error(e) from e
        except openai.APIStatusError as e:
            raise _error(e, retryable=e.status_code == 429 or e.status_code >= 500 or e.status_code == 408) from e
        except (openai.APITimeoutError, openai.APIConnectionError) as e:
            raise ModelError(f"{self.name}: {type(e).__name__}: {e}", retryable=True) from e
        except httpx2.TimeoutException as e:  # while reading the body
            raise ModelError(f"{self.name}: timed out reading the stream: {e}", retryable=True) from e
        except httpx2.TransportError as e:
            raise ModelError(f"{self.name}: connection broke: {type(e).__name__}: {e}", retryable=True) from e


async def _sse_data(body: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The ``data:`` fields of a server-sent-events body (one per event, multi-line joined)."""
    buf = b""
    data: list[bytes] = []
    async for chunk in body:
        buf = buf + chunk if buf else chunk
        if b"\n" not in chunk:
            continue
        lines = buf.split(b"\n")
        buf = lines.pop()
        for line in lines:
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line:  # end of an event
                if data:
                    yield data[0] if len(data) == 1 else b"\n".join(data)
                    data = []
            elif line.startswith(b"data:"):
                value = line[5:]
                data.append(value[1:] if value.startswith(b" ") else value)
    if buf.startswith(b"data:"):
        value = buf[5:].rstrip(b"\r")
        data.append(value[1:] if value.startswith(b" ") else value)
    if data:
        yield b"\n".join(data)


def _seconds(value: str | None) -> float | None:
    try:
        return float(value) if value else None
    except ValueError:
        return None


def _error(e: openai.APIStatusError, *, retryable: bool = False) -> ModelError:
    message = e.message
    err = ModelError(f"HTTP {e.status_code}: {message}", status=e.status_code, retryable=retryable)
    err.retry_after = _seconds(e.response.headers.get("retry-after") if e.response is not None else None)  # type: ignore[attr-defined]
    return err
