"""The index of each conversation's episode ids in the hub's memory store: a conversation's
recall reads its episodes by id (hub.episode.ID_PREFIX) and finds what the where filter
finds; the keys are written before the records, backfilled for a store written before
them, and deleted with the episodes (prune, forget, the command line)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hub.config import MemorySection
from hub.memory import (
    ID_PREFIX,
    IDS_COMPLETE,
    INDEX,
    Episode,
    EpisodicMemory,
    InMemoryVectorStore,
    MiniLMEmbedder,
    VectorStore,
    id_key,
    id_prefix,
)
from hub.store import InMemoryStore

# "chat:1" and "chat:1:x": one conversation's id is a prefix of the other's
CONTEXTS = ["chat:1", "chat:1:x", "chat:2"]
TEXTS = [
    ("What's the weather in Paris?", "It is sunny in Paris."),
    ("How do I make risotto?", "Stir the rice for twenty minutes."),
    ("Is the billing service down?", "Billing answers in 40 ms; it is up."),
    ("Book a train from Oslo to Lima", "Booked: Oslo to Lima."),
    ("What did Ann say about the budget?", "Ann wants it cut by 10%."),
]
QUERIES = ["forecast for Paris", "a recipe for rice", "is billing having an outage?", "train tickets", "the budget"]


def _episode(n: int, context: str, *, user: str = "ann", age: float = 0.0) -> Episode:
    prompt, completion = TEXTS[n % len(TEXTS)]
    return Episode(
        run_id=f"run{n:04d}",
        context=context,
        user=user,
        time=time.time() - age,
        state="completed",
        prompt=f"{prompt} ({n})",
        completion=completion,
        digest=f"User asked: {prompt} / Agent answered: {completion}",
        input_ids=(f"in{n}",),
    )


def _corpus() -> list[Episode]:
    return [_episode(n, CONTEXTS[n % len(CONTEXTS)], user="ann" if n % 2 else "bob") for n in range(30)]


@pytest.fixture(params=["memory", "chroma"])
async def vectors(request: pytest.FixtureRequest, minilm: MiniLMEmbedder, tmp_path: Path) -> AsyncIterator[VectorStore]:
    from hub.memory import ChromaVectorStore

    impl: VectorStore = (
        InMemoryVectorStore(minilm)
        if request.param == "memory"
        else ChromaVectorStore(tmp_path / "chroma", embedder=minilm)
    )
    async with impl:
        yield impl


async def _memory(store: VectorStore, marks: InMemoryStore, **config: object) -> EpisodicMemory:
    section = MemorySection(min_score=-1.0, recall=3, retention_days=0, max_episodes=0, prune_every=0)
    memory = EpisodicMemory(section.model_copy(update=config), store=store, marks=marks)
    await memory.start()
    await memory._usable()  # opened: pruned, backfilled
    return memory


async def _ids(marks: InMemoryStore, context: str) -> set[str]:
    prefix = id_prefix(context)
    return {k[len(prefix) :] for k in await marks.keys(prefix)}


async def test_recall_by_the_index_finds_what_the_where_filter_finds(vectors: VectorStore) -> None:
    marks = InMemoryStore()
    memory = await _memory(vectors, marks)
    for episode in _corpus():
        await memory.remember(episode)
    assert await marks.get(IDS_COMPLETE)
    for context in CONTEXTS:
        assert await _ids(marks, context) == {e.run_id for e in _corpus() if e.context == context}
        for query in QUERIES:
            by_index = await memory.recall(query, context=context)
            memory._ids_complete = False  # today's path: the where filter alone
            by_where = await memory.recall(query, context=context)
            memory._ids_complete = True
            assert len(by_index) == 3
            assert by_index == by_where, (context, query)
            assert {e.context for e in by_index} == {context}
    assert await memory.recall("the weather", context="chat:none") == []
    await memory.stop()


async def test_an_episode_is_recallable_right_after_it_is_remembered(vectors: VectorStore) -> None:
    marks = InMemoryStore()
    memory = await _memory(vectors, marks)
    for n in range(6):
        episode = _episode(n, "chat:1")
        await memory.remember(episode)
        hits = await memory.recall(episode.prompt, context="chat:1")
        assert hits[0].run_id == episode.run_id
    await memory.stop()


async def test_prune_and_forget_delete_the_keys_with_the_episodes(vectors: VectorStore) -> None:
    marks = InMemoryStore()
    memory = await _memory(vectors, marks, retention_days=1, max_episodes=20)
    old = [_episode(100 + n, "chat:2", age=3 * 86400) for n in range(3)]
    for episode in [*old, *_corpus()]:
        await memory.remember(episode)
    assert await memory.prune() == 3 + 10  # past retention, then the oldest beyond 20
    stored = {r.id for r in await vectors.get(INDEX)}
    indexed = {k.rsplit(":", 1)[1] for k in await marks.keys(ID_PREFIX) if k != IDS_COMPLETE}
    assert len(stored) == 20 and indexed == stored

    assert await memory.forget(user="bob") == len([e for e in _corpus()[10:] if e.user == "bob"])
    assert await memory.forget(context="chat:1") > 0
    stored = {r.id for r in await vectors.get(INDEX)}
    indexed = {k.rsplit(":", 1)[1] for k in await marks.keys(ID_PREFIX) if k != IDS_COMPLETE}
    assert indexed == stored and stored
    assert await _ids(marks, "chat:1") == set()
    assert await _ids(marks, "chat:1:x") == {
        e.run_id for e in _corpus()[10:] if e.context == "chat:1:x" and e.user == "ann"
    }
    await memory.stop()


async def test_a_store_written_before_the_index_is_backfilled(vectors: VectorStore) -> None:
    await vectors.upsert(INDEX, [e.to_record() for e in _corpus()])  # no key, no complete mark
    marks = InMemoryStore()
    memory = await _memory(vectors, marks)
    assert await marks.get(IDS_COMPLETE)
    for context in CONTEXTS:
        assert await _ids(marks, context) == {e.run_id for e in _corpus() if e.context == context}
    hits = await memory.recall("forecast for Paris", context="chat:1")
    assert hits and all(h.context == "chat:1" for h in hits) and "Paris" in hits[0].prompt
    await memory.stop()


async def test_until_the_index_is_complete_recall_uses_the_where_filter(vectors: VectorStore) -> None:
    await vectors.upsert(INDEX, [e.to_record() for e in _corpus()])
    memory = EpisodicMemory(MemorySection(min_score=-1.0), store=vectors)  # no memory store: no index
    await memory.start()
    hits = await memory.recall("forecast for Paris", context="chat:1")
    assert hits and all(h.context == "chat:1" for h in hits)
    await memory.stop()


async def test_two_workers_writing_one_conversation_at_once_both_index(vectors: VectorStore) -> None:
    marks = InMemoryStore()
    one, two = await _memory(vectors, marks), await _memory(vectors, marks)
    episodes = [_episode(n, "chat:1") for n in range(10)]
    await asyncio.gather(*(w.remember(e) for w, e in zip([one, two] * 5, episodes, strict=True)))
    assert await _ids(marks, "chat:1") == {e.run_id for e in episodes}
    assert len(await one.recall("forecast", context="chat:1")) == 3
    await one.stop()
    await two.stop()


async def test_keys_pointing_at_nothing_are_swept_by_the_second_prune_that_sees_them(
    vectors: VectorStore,
) -> None:
    marks = InMemoryStore()
    memory = await _memory(vectors, marks)
    await memory.remember(_episode(1, "chat:1"))
    await marks.set(id_key("chat:1", "run-lost"), time.time())  # its record was never written
    assert (await memory.recall("forecast for Paris", context="chat:1"))[0].run_id == "run0001"  # ignored
    await memory.prune()
    assert "run-lost" in await _ids(marks, "chat:1")  # maybe a record being written: kept once
    await memory.prune()
    assert await _ids(marks, "chat:1") == {"run0001"}
    await memory.stop()
