"""Fixtures for the memory tests: one MiniLM embedder for the whole session (loading
it costs about half a second), and the vector store contract's implementations: in
memory, embedded Chroma, and a real Chroma server (``chroma run``, started once for the
session on a free port, its collections dropped after each test)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from hub.memory import InMemoryVectorStore, MiniLMEmbedder, VectorStore


@pytest.fixture(scope="session")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Chroma server (chromadb's own ``chroma run``) for the session; its URL."""
    chroma = Path(sys.executable).parent / "chroma"
    assert chroma.exists(), f"{chroma} is missing: chromadb installs it"
    path = tmp_path_factory.mktemp("chroma-server")
    port = _free_port()
    log = (path / "server.log").open("wb")
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
    proc = subprocess.Popen(
        [str(chroma), "run", "--path", str(path / "data"), "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"chroma run did not start: {(path / 'server.log').read_text()[-2000:]}"
                    ) from None
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _drop_collections(url: str) -> None:
    import chromadb
    from chromadb.config import Settings

    from hub.memory import parse_chroma_url

    host, port, ssl = parse_chroma_url(url)
    client = chromadb.HttpClient(host=host, port=port, ssl=ssl, settings=Settings(anonymized_telemetry=False))
    for collection in client.list_collections():
        client.delete_collection(collection.name)


@pytest.fixture(params=["memory", "chroma", "chroma-server"])
async def store(request: pytest.FixtureRequest, minilm: MiniLMEmbedder, tmp_path: Path) -> AsyncIterator[VectorStore]:
    """Every VectorStore implementation, each with the real MiniLM embedder."""
    from hub.memory import ChromaVectorStore

    url = None
    if request.param == "memory":
        impl: VectorStore = InMemoryVectorStore(minilm)
    elif request.param == "chroma":
        impl = ChromaVectorStore(tmp_path / "chroma", embedder=minilm)
    else:
        url = request.getfixturevalue("chroma_server")
        impl = ChromaVectorStore(url=url, embedder=minilm)
    try:
        async with impl:
            yield impl
    finally:
        if url is not None:  # the next test starts from an empty server
            _drop_collections(url)
