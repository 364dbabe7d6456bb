"""The VectorStore contract, run against every implementation (see conftest `store`)."""

from __future__ import annotations

import pytest

from hub.memory import VectorRecord, VectorStore, VectorStoreError

WEATHER = "the weather in New York City is sunny"
CORPUS = [
    VectorRecord("weather", WEATHER, {"topic": "weather", "n": 1, "pinned": True}),
    VectorRecord("cooking", "how to cook a perfect risotto with parmesan", {"topic": "food", "n": 2}),
    VectorRecord("football", "the football team won the championship last night", {"topic": "sport", "n": 3}),
    VectorRecord("taxes", "file your income taxes before the april deadline", {"topic": "money", "n": 4}),
]
QUERY = "forecast for New York"
# Measured with MiniLM int8 (both stores agree to 1e-6) for QUERY:
#   weather 0.610, taxes 0.108, football 0.023, cooking -0.003.
# 0.35 sits well clear of both sides.
MIN_SCORE = 0.35


async def test_create_and_delete_index_are_idempotent(store: VectorStore) -> None:
    await store.create_index("episodes")
    await store.create_index("episodes")
    assert await store.count("episodes") == 0
    await store.upsert("episodes", CORPUS[:1])
    await store.create_index("episodes")  # must not wipe it
    assert await store.count("episodes") == 1
    await store.delete_index("episodes")
    await store.delete_index("episodes")
    assert await store.count("episodes") == 0
    assert await store.query("episodes", QUERY) == []


async def test_query_ranks_the_relevant_text_first(store: VectorStore) -> None:
    await store.upsert("episodes", CORPUS)
    hits = await store.query("episodes", QUERY, k=4)
    assert [h.id for h in hits][0] == "weather"
    assert len(hits) == 4
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert hits[0].text == WEATHER
    assert hits[0].metadata == {"topic": "weather", "n": 1, "pinned": True}
    assert hits[0].score == pytest.approx(0.61, abs=0.02)
    assert len(await store.query("episodes", QUERY, k=2)) == 2
    assert len(await store.query("episodes", QUERY, k=50)) == 4


async def test_min_score_keeps_the_relevant_text_only(store: VectorStore) -> None:
    await store.upsert("episodes", CORPUS)
    hits = await store.query("episodes", QUERY, k=4, min_score=MIN_SCORE)
    assert [h.id for h in hits] == ["weather"]


async def test_upsert_of_an_existing_id_replaces_it(store: VectorStore) -> None:
    await store.upsert("episodes", CORPUS)
    await store.upsert("episodes", [VectorRecord("weather", "a recipe for lemon cake", {"kind": "recipe"})])
    assert await store.count("episodes") == 4
    records = {r.id: r for r in await store.get("episodes")}
    assert records["weather"].text == "a recipe for lemon cake"
    assert records["weather"].metadata == {"kind": "recipe"}  # old keys gone, not merged
    assert await store.get("episodes", where={"topic": "weather"}) == []
    hits = await store.query("episodes", QUERY, k=4, min_score=MIN_SCORE)
    assert hits == []  # the vector was replaced too
    hits = await store.query("episodes", "baking a cake", k=1)
    assert hits[0].id == "weather"


async def test_upsert_with_empty_metadata_clears_it(store: VectorStore) -> None:
    await store.upsert("episodes", CORPUS[:1])
    await store.upsert("episodes", [VectorRecord("weather", WEATHER)])
    assert (await store.get("episodes"))[0].metadata == {}


async def test_a_repeated_id_in_one_upsert_counts_once_and_the_last_wins(store: VectorStore) -> None:
    await store.upsert("episodes", [VectorRecord("x", "first", {"v": 1}), VectorRecord("x", "second", {"v": 2})])
    assert await store.get("episodes") == [VectorRecord("x", "second", {"v": 2})]


async def test_where_is_an_and_of_equalities(store: VectorStore) -> None:
    await store.upsert("episodes", CORPUS)
    await store.upsert("episodes", [VectorRecord("rain", "rain expected in Boston", {"topic": "weather", "n": 5})])
    hits = await store.query("episodes", QUERY, k=5, where={"topic": "weather"})
    assert [h.id for h in hits] == ["weather", "rain"]
    hits = await store.query("episodes", QUERY, k=5, where={"topic": "weather", "n": 5})
    assert [h.id for h in hits] == ["rain"]
    assert await store.query("episodes", QUERY, where={"topic": "weather", "n": 2}) == []
    assert await store.query("episodes", QUERY, where={"nope": "x"}) == []
    # a bool matches only a bool; ints and floats compare as numbers
    assert [h.id for h in await store.query("episodes", QUERY, where={"pinned": True})] == ["weather"]
    assert await store.query("episodes", QUERY, where={"n": True}) == []
    assert [h.id for h in await store.query("episodes", QUERY, where={"n": 2.0})] == ["cooking"]
    # where applies before k: the best match overall is excluded, the rest still come
    hits = await store.query("episodes", QUERY, k=1, where={"topic": "food"})
    assert [h.id for h in hits] == ["cooking"]


async def test_ids_restrict_a_query_to_those_records(store: VectorStore) -> None:
    await store.upsert("episodes", CORPUS)
    await store.upsert("episodes", [VectorRecord("rain", "rain expected in Boston", {"topic": "weather", "n": 5})])
    hits = await store.query("episodes", QUERY, k=5, ids=["taxes", "rain", "missing"])
    assert [h.id for h in hits] == ["rain", "taxes"]  # ranked; an id that does not exist is ignored
    assert hits[0].text == "rain expected in Boston" and hits[0].metadata == {"topic": "weather", "n": 5}
    # ids and where: both must hold, with where's equality rules
    hits = await store.query("episodes", QUERY, k=5, ids=["weather", "rain", "taxes"], where={"topic": "weather"})
    assert [h.id for h in hits] == ["weather", "rain"]
    assert [h.id for h in await store.query("episodes", QUERY, ids=["weather", "cooking"], where={"n": 2.0})] == [
        "cooking"
    ]
    assert await store.query("episodes", QUERY, ids=["cooking"], where={"n": True}) == []
    assert await store.query("episodes", QUERY, ids=["weather"], where={"topic": "food"}) == []
    # the same hits as the where that selects the same records
    by_where = await store.query("episodes", QUERY, k=5, where={"topic": "weather"}, min_score=0.2)
    by_ids = await store.query("episodes", QUERY, k=5, ids=["weather", "rain"], min_score=0.2)
    assert by_ids == by_where
    assert await store.query("episodes", QUERY, ids=[]) == []
    assert await store.query("episodes", QUERY, ids=["missing"]) == []
    with pytest.raises(TypeError):
        await store.query("episodes", QUERY, ids="weather")


async def test_delete_by_ids_and_by_where(store: VectorStore) -> None:
    await store.upsert("episodes", CORPUS)
    assert await store.delete("episodes", ids=["cooking", "missing"]) == 1
    assert await store.count("episodes") == 3
    assert await store.delete("episodes", where={"topic": "sport"}) == 1
    assert await store.delete("episodes", ids=["weather", "taxes"], where={"topic": "money"}) == 1
    assert [r.id for r in await store.get("episodes")] == ["weather"]
    assert await store.delete("episodes", ids=[]) == 0
    with pytest.raises(ValueError, match="delete_index"):
        await store.delete("episodes")
    assert await store.count("episodes") == 1


async def test_get_returns_records_in_insertion_order(store: VectorStore) -> None:
    await store.upsert("episodes", CORPUS[2:])
    await store.upsert("episodes", CORPUS[:2])
    assert [r.id for r in await store.get("episodes")] == ["football", "taxes", "weather", "cooking"]
    assert [r.id for r in await store.get("episodes", limit=2)] == ["football", "taxes"]
    assert await store.get("episodes", limit=0) == []
    assert await store.get("episodes", where={"topic": "food"}) == [CORPUS[1]]
    await store.upsert("episodes", [VectorRecord("football", "chess final", {"topic": "sport"})])
    assert [r.id for r in await store.get("episodes")][0] == "football"  # keeps its place


async def test_reads_of_a_missing_index_are_empty(store: VectorStore) -> None:
    assert await store.query("nowhere", QUERY) == []
    assert await store.query("nowhere", QUERY, where={"topic": "x"}, min_score=0.5) == []
    assert await store.count("nowhere") == 0
    assert await store.get("nowhere") == []
    assert await store.delete("nowhere", ids=["a"]) == 0
    await store.create_index("empty")
    assert await store.query("empty", QUERY) == []


async def test_indexes_are_separate_whatever_their_names(store: VectorStore) -> None:
    names = ["ep", "e", "episodes:discord:1234", "hub-x", "x" * 300, "épisodes"]
    for i, name in enumerate(names):
        await store.upsert(name, [VectorRecord(f"r{i}", f"text {i}")])
    for i, name in enumerate(names):
        assert [r.id for r in await store.get(name)] == [f"r{i}"]


async def test_bad_records_and_filters_are_refused_before_writing(store: VectorStore) -> None:
    bad: list[VectorRecord] = [
        VectorRecord("a", "t", {"tags": ["x"]}),  # type: ignore[dict-item]
        VectorRecord("a", "t", {"#document": "x"}),
        VectorRecord("a", "t", {"x": float("nan")}),
        VectorRecord("", "t"),
    ]
    for record in bad:
        with pytest.raises((TypeError, ValueError)):
            await store.upsert("episodes", [CORPUS[0], record])
    with pytest.raises(TypeError):
        await store.query("episodes", QUERY, where={"x": None})  # type: ignore[dict-item]
    with pytest.raises(ValueError):
        await store.query("episodes", QUERY, k=0)
    assert await store.count("episodes") == 0


async def test_a_closed_store_refuses_calls(store: VectorStore) -> None:
    await store.upsert("episodes", CORPUS[:1])
    await store.close()
    await store.close()
    with pytest.raises(VectorStoreError, match="closed"):
        await store.query("episodes", QUERY)
    with pytest.raises(VectorStoreError, match="closed"):
        await store.upsert("episodes", CORPUS[:1])
