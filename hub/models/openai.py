"""Any OpenAI-compatible chat-completions server (OpenAI, Ollama, vLLM, llama.cpp) via ``openai``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import openai
from openai import AsyncOpenAI

from ..errors import ModelError
from . import Model, ModelRequest, Usage

__all__ = ["OpenAIModel"]


class OpenAIModel(Model):
    """Streams chat completions. The client never retries by itself: the engine's policy does."""

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
    ) -> None:
        self.name = name
        self.temperature = temperature
        self.max_tokens = max_tokens
        self._client = client or AsyncOpenAI(
            base_url=base_url or None,
            api_key=api_key or "not-needed",
            timeout=timeout,
            max_retries=0,
        )
        self._usage_option = True
        self.extra_body = extra_body

    async def close(self) -> None:
        await self._client.close()

    async def stream(self, request: ModelRequest) -> AsyncIterator[str | Usage]:
        messages: list[dict[str, Any]] = [{"role": "system", "content": request.system}, *request.messages]
        kwargs: dict[str, Any] = {"model": self.name, "messages": messages, "stream": True}
        temperature = request.temperature if request.temperature is not None else self.temperature
        max_tokens = request.max_tokens or self.max_tokens
        if temperature is not None:
            kwargs["temperature"] = temperature
        if max_tokens:
            kwargs["max_tokens"] = max_tokens
        if self._usage_option:
            kwargs["stream_options"] = {"include_usage": True}
        if self.extra_body:
            kwargs["extra_body"] = self.extra_body
        usage = Usage()
        try:
            stream = await self._client.chat.completions.create(**kwargs)
            async with stream:
                async for chunk in stream:
                    if chunk.usage is not None:
                        usage = Usage(chunk.usage.prompt_tokens or 0, chunk.usage.completion_tokens or 0)
                    for choice in chunk.choices:
                        text = choice.delta.content if choice.delta else None
                        if text:
                            yield text
        except openai.BadRequestError as e:
            if self._usage_option and "stream_options" in str(e):
                self._usage_option = False  # an older server: ask again without it
                raise _error(e, retryable=True) from e
            raise _error(e) from e
        except openai.APIStatusError as e:
            raise _error(e, retryable=e.status_code == 429 or e.status_code >= 500 or e.status_code == 408) from e
        except (openai.APITimeoutError, openai.APIConnectionError) as e:
            raise ModelError(f"{self.name}: {type(e).__name__}: {e}", retryable=True) from e
        yield usage


def _error(e: openai.APIStatusError, *, retryable: bool = False) -> ModelError:
    message = e.message
    err = ModelError(f"HTTP {e.status_code}: {message}", status=e.status_code, retryable=retryable)
    retry_after = e.response.headers.get("retry-after") if e.response is not None else None
    try:
        err.retry_after = float(retry_after) if retry_after else None  # type: ignore[attr-defined]
    except ValueError:
        err.retry_after = None  # type: ignore[attr-defined]
    return err
