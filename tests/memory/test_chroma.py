"""ChromaVectorStore beyond the shared contract: persistence, broken stores, names."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hub.memory.chroma import ChromaVectorStore, chroma_collection_name
from hub.memory.embedder import HashEmbedder, MiniLMEmbedder
from hub.memory.vector import VectorRecord, VectorStoreError

from .test_vector_contract import CORPUS, QUERY

REPO = Path(__file__).resolve().parents[2]


async def test_a_reopened_store_still_answers(tmp_path: Path, minilm: MiniLMEmbedder) -> None:
    first = ChromaVectorStore(tmp_path, embedder=minilm)
    await first.upsert("episodes", CORPUS)
    await first.close()
    async with ChromaVectorStore(tmp_path, embedder=minilm) as second:
        assert await second.count("episodes") == 4
        hits = await second.query("episodes", QUERY, k=1)
        assert [h.id for h in hits] == ["weather"]


def test_a_fresh_process_queries_with_no_setup(tmp_path: Path, minilm: MiniLMEmbedder) -> None:
    """The default store rebuilds its embedder, and a plain Chroma client rebuilds it
    from the collection's config once hub.memory.chroma has registered it."""

    async def fill() -> None:
        async with ChromaVectorStore(tmp_path, embedder=minilm) as store:
            await store.upsert("ep", CORPUS)  # short name: mapped

    asyncio.run(fill())
    script = textwrap.dedent(
        f"""
        import asyncio, chromadb
        from chromadb.config import Settings
        from hub.memory.chroma import ChromaVectorStore, chroma_collection_name, chroma_embedding_function

        async def main():
            async with ChromaVectorStore({str(tmp_path)!r}) as store:
                print((await store.query("ep", {QUERY!r}, k=1))[0].id)

        asyncio.run(main())
        chroma_embedding_function()
        client = chromadb.PersistentClient({str(tmp_path)!r}, settings=Settings(anonymized_telemetry=False))
        got = client.get_collection(chroma_collection_name("ep")).query(query_texts=[{QUERY!r}], n_results=1)
        print(got["ids"][0][0])
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["weather", "weather"]


async def test_a_corrupt_store_raises_an_error_naming_the_path(tmp_path: Path) -> None:
    (tmp_path / "chroma.sqlite3").write_bytes(os.urandom(4096))
    store = ChromaVectorStore(tmp_path, embedder=HashEmbedder())
    with pytest.raises(VectorStoreError, match=re.escape(str(tmp_path))) as caught:
        await asyncio.wait_for(store.query("episodes", QUERY), timeout=20)
    assert caught.value.path == str(tmp_path)
    assert caught.value.__cause__ is not None
    await store.close()


async def test_a_path_that_is_a_file_raises_an_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "not-a-dir"
    path.write_text("x")
    with pytest.raises(VectorStoreError, match=re.escape(str(path))):
        async with ChromaVectorStore(path, embedder=HashEmbedder()):
            pass


async def test_an_index_refuses_a_different_embedder(tmp_path: Path, minilm: MiniLMEmbedder) -> None:
    async with ChromaVectorStore(tmp_path, embedder=HashEmbedder()) as store:
        await store.upsert("episodes", CORPUS)
        assert (await store.query("episodes", "new york weather", k=1))[0].id == "weather"
    async with ChromaVectorStore(tmp_path, embedder=minilm) as store:
        with pytest.raises(VectorStoreError, match="hash-256"):
            await store.query("episodes", QUERY)


def test_collection_names_are_deterministic_valid_and_distinct() -> None:
    names = ["ep", "e", "episodes", "episodes:discord:1", "hub-x", "a..b", "1.2.3.4", "x" * 600, "épisode"]
    mapped = [chroma_collection_name(n) for n in names]
    assert mapped == [chroma_collection_name(n) for n in names]
    assert len(set(mapped)) == len(names)
    assert mapped[2] == "episodes"  # valid names stay readable
    for name in mapped:
        assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]{1,510}[A-Za-z0-9]", name), name
    with pytest.raises(ValueError):
        chroma_collection_name("")


async def test_importing_the_module_does_not_import_chromadb() -> None:
    code = "import sys, hub.memory.chroma, hub.memory.vector; print('chromadb' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert done.stdout.strip() == "False", done.stderr


async def test_large_upserts_are_split_into_chroma_batches(tmp_path: Path) -> None:
    records = [VectorRecord(f"r{i}", f"note {i}", {"i": i}) for i in range(6000)]
    async with ChromaVectorStore(tmp_path, embedder=HashEmbedder(16)) as store:
        await store.upsert("bulk", records)  # over Chroma's 5461-record batch limit
        assert await store.count("bulk") == 6000
        assert await store.delete("bulk", where={"i": 5999}) == 1


# --- partitions ---------------------------------------------------------------------------


def _chroma(path: Path):
    import chromadb
    from chromadb.config import Settings

    return chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))


def _conversations(n: int, per: int) -> list[VectorRecord]:
    topics = ["weather in Paris", "a risotto recipe", "the billing outage", "train to Oslo"]
    return [
        VectorRecord(f"c{c}-{i}", f"{topics[i % 4]} number {i}", {"context": f"chat:{c}", "i": i})
        for c in range(n)
        for i in range(per)
    ]


async def test_a_filtered_query_searches_its_partition_only(tmp_path: Path) -> None:
    from hub.memory.chroma import chroma_partition_name, partition_of

    async with ChromaVectorStore(tmp_path, embedder=HashEmbedder(64), partition_by="context", partitions=4) as store:
        await store.upsert("episodes", _conversations(6, 5))
        assert await store.partitioned("episodes")
        hits = await store.query("episodes", "weather in Paris", k=10, where={"context": "chat:2"})
        assert sorted(h.id for h in hits) == [f"c2-{i}" for i in range(5)]
        assert hits[0].metadata == {"context": "chat:2", "i": 0}
        assert await store.count("episodes") == 30  # the whole index is still there
        # each partition holds exactly the conversations that hash to it
        client = _chroma(tmp_path)
        for p in range(4):
            ids = set(client.get_collection(chroma_partition_name("episodes", p)).get(include=[])["ids"])
            assert ids == {f"c{c}-{i}" for c in range(6) if partition_of(f"chat:{c}", 4) == p for i in range(5)}


async def test_a_record_that_changes_conversation_moves_partition(tmp_path: Path) -> None:
    async with ChromaVectorStore(tmp_path, embedder=HashEmbedder(64), partition_by="context", partitions=64) as store:
        await store.upsert("episodes", _conversations(3, 2))
        await store.upsert("episodes", [VectorRecord("c0-0", "weather in Paris", {"context": "chat:9"})])
        await store.upsert("episodes", [VectorRecord("c1-0", "weather in Paris", {"other": 1})])
        assert [h.id for h in await store.query("episodes", "weather", k=5, where={"context": "chat:9"})] == ["c0-0"]
        assert [h.id for h in await store.query("episodes", "weather", k=5, where={"context": "chat:0"})] == ["c0-1"]
        assert [h.id for h in await store.query("episodes", "weather", k=5, where={"context": "chat:1"})] == ["c1-1"]
        assert await store.query("episodes", "weather", k=5, where={"context": "chat:1", "other": 1}) == []
        # deletes reach the partitions: nothing deleted is ever recalled
        assert await store.delete("episodes", where={"context": "chat:2"}) == 2
        assert await store.delete("episodes", ids=["c0-0"]) == 1
        assert await store.query("episodes", "weather", k=5, where={"context": "chat:2"}) == []
        assert await store.query("episodes", "weather", k=5, where={"context": "chat:9"}) == []
        await store.delete_index("episodes")
        assert not [c for c in _chroma(tmp_path).list_collections() if c.name.startswith("hub.")]


async def test_a_store_written_before_partitions_is_copied_into_them(tmp_path: Path) -> None:
    records = _conversations(5, 4)
    async with ChromaVectorStore(tmp_path, embedder=HashEmbedder(64)) as old:  # the old layout
        await old.upsert("episodes", records)
    async with ChromaVectorStore(tmp_path, embedder=HashEmbedder(64), partition_by="context", partitions=3) as store:
        # answered at once, from the whole collection while the copy runs
        hits = await store.query("episodes", "train to Oslo", k=10, where={"context": "chat:3"})
        assert sorted(h.id for h in hits) == [f"c3-{i}" for i in range(4)]
        await store.upsert("episodes", [VectorRecord("new", "train to Oslo", {"context": "chat:3"})])
        await store.delete("episodes", ids=["c3-0"])
        assert await store.partitioned("episodes")
        hits = await store.query("episodes", "train to Oslo", k=10, where={"context": "chat:3"})
        assert sorted(h.id for h in hits) == ["c3-1", "c3-2", "c3-3", "new"]
    # reopened: partitioned already, with its own count whatever the new default
    async with ChromaVectorStore(tmp_path, embedder=HashEmbedder(64), partition_by="context", partitions=50) as again:
        assert await again.partitioned("episodes")
        hits = await again.query("episodes", "train to Oslo", k=10, where={"context": "chat:3"})
        assert sorted(h.id for h in hits) == ["c3-1", "c3-2", "c3-3", "new"]
    # and a store opened without partitions still reads the same index whole
    async with ChromaVectorStore(tmp_path, embedder=HashEmbedder(64)) as plain:
        assert await plain.count("episodes") == 20


async def test_bad_partition_settings_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="partition_by"):
        ChromaVectorStore(tmp_path, embedder=HashEmbedder(8), partition_by="")
    with pytest.raises(ValueError, match="partitions must be a positive int"):
        ChromaVectorStore(tmp_path, embedder=HashEmbedder(8), partition_by="context", partitions=0)
