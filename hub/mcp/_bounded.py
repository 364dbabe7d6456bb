"""An httpx2 transport that bounds the JSON answers of an MCP server over HTTP
(``[mcp.NAME] max_message_bytes``); imported when such a server is first connected."""

from __future__ import annotations

from typing import Any

import httpx2

__all__ = ["BoundedJson"]


class BoundedJson(httpx2.AsyncBaseTransport):
    """An httpx2 transport whose JSON bodies are read to ``limit`` bytes at most: the SDK reads
    such an answer whole (``aread``), so one over the limit fails as a stream error, which the
    SDK turns into an error for that request, before it is held."""

    def __init__(self, inner: Any, limit: int) -> None:
        self.inner = inner
        self.limit = limit

    async def handle_async_request(self, request: Any) -> Any:
        response = await self.inner.handle_async_request(request)
        if response.headers.get("content-type", "").lower().startswith("application/json"):
            response.stream = _Capped(response.stream, self.limit)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


class _Capped(httpx2.AsyncByteStream):
    """A response body that raises once more than ``limit`` bytes have come."""

    def __init__(self, stream: Any, limit: int) -> None:
        self.stream = stream
        self.limit = limit

    async def __aiter__(self) -> Any:
        size = 0
        async for chunk in self.stream:
            size += len(chunk)
            if size > self.limit:
                raise httpx2.StreamError(
                    f"the server's answer is over {self.limit} bytes (max_message_bytes): left unread"
                )
            yield chunk

    async def aclose(self) -> None:
        await self.stream.aclose()
