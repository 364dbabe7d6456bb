"""Fixtures for the memory tests: one MiniLM embedder for the whole session (loading
it costs about half a second), and the vector store contract's implementations."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hub.memory.embedder import MiniLMEmbedder
from hub.memory.vector import InMemoryVectorStore, VectorStore


@pytest.fixture(scope="session")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder()


@pytest.fixture(params=["memory", "chroma"])
async def store(
    request: pytest.FixtureRequest, minilm: MiniLMEmbedder, tmp_path: Path
) -> AsyncIterator[VectorStore]:
    """Every VectorStore implementation, each with the real MiniLM embedder."""
    if request.param == "memory":
        impl: VectorStore = InMemoryVectorStore(minilm)
    else:
        from hub.memory.chroma import ChromaVectorStore

        impl = ChromaVectorStore(tmp_path / "chroma", embedder=minilm)
    async with impl:
        yield impl
