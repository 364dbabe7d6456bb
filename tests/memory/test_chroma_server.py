"""Episodic memory on a Chroma server (``[memory] chroma_url``): the config key, what two
workers see, and a server that cannot be reached. The contract suite runs against the
server too (conftest's ``store``, param ``chroma-server``)."""

from __future__ import annotations

import pytest

from hub.config import config_from_dict
from hub.errors import ConfigError
from hub.memory import (
    INDEX,
    ChromaVectorStore,
    MiniLMEmbedder,
    VectorRecord,
    VectorStoreError,
    episode_store_exists,
    local_store_path,
    open_episode_store,
    parse_chroma_url,
)

from .conftest import _drop_collections, _free_port


def test_chroma_url_is_checked_and_names_the_key(tmp_path) -> None:
    cfg = config_from_dict({"memory": {"chroma_url": "http://chroma.internal:8000"}})
    assert cfg.memory.chroma_url == "http://chroma.internal:8000"
    assert local_store_path(cfg) is None and episode_store_exists(cfg)
    assert config_from_dict({}).memory.chroma_url == ""  # the default: embedded, in data_dir
    for bad, why in (
        ("chroma.internal:8000", "http://HOST:PORT"),
        ("http://h:8000/api", "without a path"),
        ("http://h:port", "bad port"),
    ):
        with pytest.raises(ConfigError, match=rf"memory\.chroma_url.*{why}"):
            config_from_dict({"memory": {"chroma_url": bad}})
    assert parse_chroma_url("https://chroma.example.com") == ("chroma.example.com", 443, True)
    assert parse_chroma_url("http://127.0.0.1:9000/") == ("127.0.0.1", 9000, False)


async def test_two_workers_share_the_episodes_on_the_server(chroma_server: str, minilm: MiniLMEmbedder) -> None:
    cfg = config_from_dict({"memory": {"chroma_url": chroma_server}})
    one, two = open_episode_store(cfg, embedder=minilm), open_episode_store(cfg, embedder=minilm)
    assert isinstance(one, ChromaVectorStore) and one.url == chroma_server
    try:
        async with one, two:
            await one.upsert(INDEX, [VectorRecord("e1", "the weather in New York is sunny", {"context": "c:1"})])
            hits = await two.query(INDEX, "forecast for New York", k=1)
            assert [h.id for h in hits] == ["e1"] and hits[0].metadata == {"context": "c:1"}
            assert await two.delete(INDEX, where={"context": "c:1"}) == 1
            assert await one.count(INDEX) == 0
    finally:
        _drop_collections(chroma_server)


async def test_a_server_that_cannot_be_reached_is_named(minilm: MiniLMEmbedder) -> None:
    url = f"http://127.0.0.1:{_free_port()}"  # nothing listens there
    store = ChromaVectorStore(url=url, embedder=minilm)
    with pytest.raises(VectorStoreError, match=rf"{url}: cannot reach the Chroma server"):
        await store.open()
    with pytest.raises(ValueError, match="a directory .path. or a server .url=."):
        ChromaVectorStore(embedder=minilm)
