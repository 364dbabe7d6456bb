"""ChromaVectorStore's filtered queries: exact below `exact_cap`, HNSW above it, and both
give the brute-force ranking of the records that match (issue 14: recall filtered to one
conversation)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

from hub.memory import (
    EXACT_CAP,
    ChromaVectorStore,
    MetadataValue,
    MiniLMEmbedder,
    VectorRecord,
    chroma_collection_name,
    chroma_embedding_function,
)

SUBJECTS = [
    "the weather in {city} is sunny and warm",
    "rain is likely in {city} tomorrow afternoon",
    "a recipe for {dish} with garlic and butter",
    "the {service} deploy failed its health check",
    "book a train ticket from {city} to the coast",
    "what does {name} think about the budget cut",
    "a movie night with {name} and popcorn",
    "my account balance after paying {name}",
]
CITIES = ["Paris", "Lima", "Oslo", "Seoul", "Cairo"]
DISHES = ["risotto", "dumplings", "curry", "pancakes"]
SERVICES = ["billing", "search", "auth"]
NAMES = ["Ann", "Chen", "Femi", "Hana"]
# conversation -> how many episodes it holds: above, at and below the small cap below
SIZES = {"conv:big": 40, "conv:cap": 10, "conv:small": 5}
SMALL_CAP = 10
QUERIES = ["forecast for Paris", "is billing down?", "how do I cook dumplings", "what did Hana say about money"]


def _corpus() -> list[VectorRecord]:
    records, n = [], 0
    for context, size in SIZES.items():
        for _ in range(size):
            text = SUBJECTS[n % len(SUBJECTS)].format(
                city=CITIES[n % 5], dish=DISHES[n % 4], service=SERVICES[n % 3], name=NAMES[n % 4]
            )
            records.append(VectorRecord(f"r{n:03d}", f"{text} ({n})", {"context": context, "n": n}))
            n += 1
    return records


CORPUS = _corpus()


def _brute_force(
    embedder: MiniLMEmbedder,
    query: str,
    context: str,
    *,
    k: int,
    min_score: float | None = None,
    records: list[VectorRecord] = CORPUS,
) -> list[tuple[str, float]]:
    """The reference: every record of `context` scored by cosine similarity, best first."""
    mine = [r for r in records if r.metadata["context"] == context]
    vectors = embedder.embed([r.text for r in mine]).astype(np.float64)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    q = embedder.embed([query])[0].astype(np.float64)
    scores = vectors @ (q / np.linalg.norm(q))
    ranked = sorted(zip((r.id for r in mine), scores.tolist(), strict=True), key=lambda p: -p[1])
    return [(i, s) for i, s in ranked[:k] if min_score is None or s >= min_score]


@pytest.fixture(params=[EXACT_CAP, SMALL_CAP, 0], ids=["exact", "exact-small-hnsw-big", "hnsw"])
async def store(
    request: pytest.FixtureRequest, tmp_path: Path, minilm: MiniLMEmbedder
) -> AsyncIterator[ChromaVectorStore]:
    """The default cap (every conversation exact), a cap of 10 (the 40-record conversation
    falls back to HNSW, the 10- and 5-record ones stay exact), and 0 (HNSW only)."""
    async with ChromaVectorStore(tmp_path, embedder=minilm, exact_cap=request.param) as impl:
        await impl.upsert("episodes", CORPUS)
        yield impl


@pytest.mark.parametrize("k", [1, 3, 50])
async def test_filtered_queries_give_the_brute_force_top_k(
    store: ChromaVectorStore, minilm: MiniLMEmbedder, k: int
) -> None:
    for context in SIZES:
        for query in QUERIES:
            hits = await store.query("episodes", query, k=k, where={"context": context})
            expected = _brute_force(minilm, query, context, k=k)
            assert [h.id for h in hits] == [i for i, _ in expected], (context, query)
            assert [h.score for h in hits] == pytest.approx([s for _, s in expected], abs=1e-5)
            assert all(h.metadata["context"] == context for h in hits)  # never another conversation
            assert len(hits) == min(k, SIZES[context])


@pytest.mark.parametrize("k", [1, 3, 50])
async def test_queries_by_the_conversations_ids_give_the_brute_force_top_k(
    store: ChromaVectorStore, minilm: MiniLMEmbedder, k: int
) -> None:
    """The ids a conversation's index gives, with its where as a guard: read by id up to
    the cap, above it HNSW restricted to the ids (an id of another conversation, or of
    nothing, is ignored)."""
    for context in SIZES:
        ids = [r.id for r in CORPUS if r.metadata["context"] == context] + ["r000", "gone"]
        for query in QUERIES:
            hits = await store.query("episodes", query, k=k, where={"context": context}, ids=ids)
            expected = _brute_force(minilm, query, context, k=k)
            assert [h.id for h in hits] == [i for i, _ in expected], (context, query)
            assert [h.score for h in hits] == pytest.approx([s for _, s in expected], abs=1e-5)
            by_where = await store.query("episodes", query, k=k, where={"context": context})
            assert [(h.id, h.text, h.metadata) for h in hits] == [(h.id, h.text, h.metadata) for h in by_where]


async def test_ids_of_other_conversations_are_skipped_for_the_next_best(
    store: ChromaVectorStore, minilm: MiniLMEmbedder
) -> None:
    """The where guards the ids: given every record's id, the hits are still the
    conversation's best, read k at a time past the better ones of the others."""
    every = [r.id for r in CORPUS]
    for k in (1, 2, 5):
        for query in QUERIES:
            hits = await store.query("episodes", query, k=k, where={"context": "conv:small"}, ids=every)
            assert [h.id for h in hits] == [i for i, _ in _brute_force(minilm, query, "conv:small", k=k)]


async def test_min_score_and_k_hold_on_filtered_queries(store: ChromaVectorStore, minilm: MiniLMEmbedder) -> None:
    for context in SIZES:
        for query in QUERIES:
            hits = await store.query("episodes", query, k=3, where={"context": context}, min_score=0.35)
            expected = _brute_force(minilm, query, context, k=3, min_score=0.35)
            assert [h.id for h in hits] == [i for i, _ in expected], (context, query)
            assert len(hits) <= 3 and all(h.score >= 0.35 for h in hits)
    # a min_score above every match leaves nothing, whatever k
    assert await store.query("episodes", QUERIES[0], k=50, where={"context": "conv:big"}, min_score=0.99) == []


async def test_hits_carry_the_record_as_stored(store: ChromaVectorStore) -> None:
    hits = await store.query("episodes", CORPUS[41].text, k=1, where={"context": "conv:cap"})
    [hit] = hits
    assert (hit.id, hit.text, hit.metadata) == (CORPUS[41].id, CORPUS[41].text, CORPUS[41].metadata)
    assert hit.score == pytest.approx(1.0, abs=1e-5)


async def test_a_where_that_matches_nothing_gives_no_hits(store: ChromaVectorStore) -> None:
    assert await store.query("episodes", QUERIES[0], where={"context": "conv:none"}) == []
    assert await store.query("episodes", QUERIES[0], where={"context": "conv:big", "n": 45}) == []  # r045 is conv:cap's
    assert await store.query("episodes", QUERIES[0], where={"context": "conv:small", "n": 0}) == []
    hits = await store.query("episodes", QUERIES[0], where={"context": "conv:small", "n": 52})
    assert [h.id for h in hits] == ["r052"]


async def test_records_written_or_deleted_since_are_seen(store: ChromaVectorStore, minilm: MiniLMEmbedder) -> None:
    new = VectorRecord("fresh", "forecast for Paris: sunny", {"context": "conv:small", "n": 99})
    await store.upsert("episodes", [new])
    assert (await store.query("episodes", "forecast for Paris", k=1, where={"context": "conv:small"}))[0].id == "fresh"
    await store.delete("episodes", ids=["fresh"])
    hits = await store.query("episodes", "forecast for Paris", k=1, where={"context": "conv:small"})
    assert [h.id for h in hits] == [i for i, _ in _brute_force(minilm, "forecast for Paris", "conv:small", k=1)]


async def test_the_exact_and_the_hnsw_scores_agree(tmp_path: Path, minilm: MiniLMEmbedder) -> None:
    """Both paths score 1 - Chroma's cosine distance: a hit scores the same either way."""
    async with (
        ChromaVectorStore(tmp_path / "exact", embedder=minilm) as exact,
        ChromaVectorStore(tmp_path / "hnsw", embedder=minilm, exact_cap=0) as hnsw,
    ):
        await exact.upsert("episodes", CORPUS)
        await hnsw.upsert("episodes", CORPUS)
        for query in QUERIES:
            where: dict[str, MetadataValue] = {"context": "conv:big"}
            a = await exact.query("episodes", query, k=5, where=where)
            b = await hnsw.query("episodes", query, k=5, where=where)
            assert [h.id for h in a] == [h.id for h in b]
            assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-6)


@pytest.mark.filterwarnings("ignore:space l2 is not supported")
async def test_a_collection_not_in_cosine_space_keeps_chromas_distances(tmp_path: Path, minilm: MiniLMEmbedder) -> None:
    """The exact ranking is cosine; a collection another client made in l2 space is searched
    by Chroma as before (its score is 1 - the squared l2 distance, 2·cos - 1 for unit vectors)."""
    import chromadb
    from chromadb.config import Settings

    function = chroma_embedding_function()(minilm)
    client = chromadb.PersistentClient(str(tmp_path), settings=Settings(anonymized_telemetry=False))
    records = CORPUS[:5]
    collection = client.create_collection(
        chroma_collection_name("episodes"), configuration={"hnsw": {"space": "l2"}}, embedding_function=function
    )
    collection.add(
        ids=[r.id for r in records],
        embeddings=minilm.embed([r.text for r in records]),
        documents=[r.text for r in records],
        metadatas=[dict(r.metadata) for r in records],
    )
    async with ChromaVectorStore(tmp_path, embedder=minilm) as store:
        hits = await store.query("episodes", QUERIES[0], k=1, where={"context": "conv:big"})
    [(best_id, cosine)] = _brute_force(minilm, QUERIES[0], "conv:big", k=1, records=records)
    assert [h.id for h in hits] == [best_id]
    assert hits[0].score == pytest.approx(2 * cosine - 1, abs=1e-5)


def test_a_negative_cap_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="exact_cap"):
        ChromaVectorStore(tmp_path, exact_cap=-1)
