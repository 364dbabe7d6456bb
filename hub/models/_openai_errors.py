"""The openai SDK's own exceptions for what the hub's lean request path met.

The streaming chat request is sent on aiohttp, not through the SDK (the SDK's request
building was about half of a turn's CPU), but everything above the client reads the SDK's
exception types: an error status becomes the ``APIStatusError`` subclass the SDK itself
would raise (``RateLimitError`` with the response's headers, so ``Retry-After`` is
readable), a refused or broken connection ``APIConnectionError``, a timeout
``APITimeoutError``. The SDK is imported here, on the first error, not at start.
"""

from __future__ import annotations

import asyncio
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import openai

__all__ = ["load_sdk", "status_error", "connection_error"]

_loaded = False


async def load_sdk() -> None:
    """Import the SDK (and make the client that words its errors) in a worker thread, once:
    on the first error, half a second or more of imports would otherwise stop the loop and
    every other conversation's stream with it."""
    global _loaded
    if not _loaded:
        await asyncio.to_thread(_sdk)
        _loaded = True


@cache
def _sdk() -> Any:
    """An SDK client that only words errors (never sends): its ``_make_status_error_from_response``
    is how the SDK turns a response into the exception of its status."""
    import openai

    return openai.AsyncOpenAI(api_key="unused", base_url="http://127.0.0.1/v1", max_retries=0)


def _httpx() -> Any:
    import httpx2  # what openai 3.x is built on: its Request and Response classes

    return httpx2


def _request(url: str) -> Any:
    return _httpx().Request("POST", url)


def status_error(status: int, headers: list[tuple[bytes, bytes]], body: bytes, url: str) -> openai.APIStatusError:
    """The SDK's exception for an error response (its status, raw headers and body)."""
    response = _httpx().Response(status, headers=headers, content=body, request=_request(url))
    error: openai.APIStatusError = _sdk()._make_status_error_from_response(response)
    return error


def connection_error(e: BaseException, url: str, *, reading: bool = False) -> openai.APIConnectionError:
    """The SDK's exception for an aiohttp or timeout error: ``APITimeoutError`` for a timeout,
    else ``APIConnectionError`` (``reading``: the stream broke after its headers)."""
    import openai

    request = _request(url)
    error: openai.APIConnectionError
    if isinstance(e, TimeoutError):  # aiohttp's connect and read timeouts are TimeoutErrors
        error = openai.APITimeoutError(request=request)
    elif reading:
        error = openai.APIConnectionError(
            message=f"Connection broke while reading the stream: {_words(e)}", request=request
        )
    else:
        error = openai.APIConnectionError(message=f"Connection error: {_words(e)}", request=request)
    error.__cause__ = e
    return error


def _words(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
