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

from hub.memory import (
    ChromaVectorStore,
    HashEmbedder,
    MiniLMEmbedder,
    VectorRecord,
    VectorStoreError,
    chroma_collection_name,
)

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
    from the collection's config once hub.memory has registered it."""

    async def fill() -> None:
        async with ChromaVectorStore(tmp_path, embedder=minilm) as store:
            await store.upsert("ep", CORPUS)  # short name: mapped

    asyncio.run(fill())
    script = textwrap.dedent(
        f"""
        import asyncio, chromadb
        from chromadb.config import Settings
        from hub.memory import ChromaVectorStore, chroma_collection_name, chroma_embedding_function

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
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60)
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
    code = "import sys, hub.memory; print('chromadb' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert done.stdout.strip() == "False", done.stderr


async def test_large_upserts_are_split_into_chroma_batches(tmp_path: Path) -> None:
    records = [VectorRecord(f"r{i}", f"note {i}", {"i": i}) for i in range(6000)]
    async with ChromaVectorStore(tmp_path, embedder=HashEmbedder(16)) as store:
        await store.upsert("bulk", records)  # over Chroma's 5461-record batch limit
        assert await store.count("bulk") == 6000
        assert await store.delete("bulk", where={"i": 5999}) == 1
