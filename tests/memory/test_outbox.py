"""The episodic outbox parks an episode the vector store keeps refusing, and lets the others
go on; a store that is down parks nothing (issue 40, item 5). The faults are injected by a
vector store that refuses what a test tells it to, not by patching the hub."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from hub.config import MemorySection
from hub.memory import OUTBOX_PARK_AFTER, Episode, EpisodicMemory, InMemoryVectorStore, VectorRecord, VectorStoreError
from hub.store import InMemoryStore


class RefusingStore(InMemoryVectorStore):
    """Refuses any record whose text holds ``POISON`` (as a server refuses bad metadata), and
    everything, probes included, while ``down`` (a server gone mid-operation)."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.refuse = True
        self.attempts = 0
        self.tried = asyncio.Event()

    async def create_index(self, name: str) -> None:
        if self.down:
            raise VectorStoreError("http://chroma:8000", "getting the collection: Connection reset by peer")
        await super().create_index(name)

    async def upsert(self, index: str, records: Sequence[VectorRecord]) -> None:
        self.attempts += 1
        self.tried.set()
        if self.down:
            raise VectorStoreError("http://chroma:8000", "upserting: Connection reset by peer")
        if self.refuse and any("POISON" in r.text for r in records):
            raise VectorStoreError("http://chroma:8000", "upserting: metadata value is not a str, int or float")
        await super().upsert(index, records)


def episode(n: int, text: str) -> Episode:
    return Episode(
        run_id=f"run{n:04d}",
        context="chat:1",
        user="ann",
        time=1_700_000_000.0 + n,
        state="completed",
        prompt=text,
        completion="ok",
        digest=text,
    )


async def memory_on(store: RefusingStore, marks: InMemoryStore) -> EpisodicMemory:
    section = MemorySection(min_score=-1.0, retention_days=0, max_episodes=0, prune_every=0)
    memory = EpisodicMemory(section, store=store, marks=marks, retry_first=0.001)
    await memory.start()
    await memory._usable()
    return memory


async def test_a_refused_episode_is_parked_and_the_others_are_written() -> None:
    store, marks = RefusingStore(), InMemoryStore()
    memory = await memory_on(store, marks)
    await memory.remember(episode(1, "POISON in the metadata"))
    for n in range(2, 5):
        await memory.remember(episode(n, f"a fine exchange {n}"))
    await asyncio.wait_for(memory.flush(), 10)  # today: retried forever, everything behind it
    written = {e.run_id for e in await memory.episodes()}
    assert written == {"run0002", "run0003", "run0004"}
    assert await memory.outbox.keys() == []
    (parked,) = await memory.outbox.parked_keys()
    assert (await marks.get(parked))["attempts"] == OUTBOX_PARK_AFTER, "kept, with its failures: nothing lost"
    assert memory.outbox.parked == 1 and memory.outbox.waiting == 0
    assert "1 episode parked" in (memory.health() or "")
    assert await shown(memory) == ("episodic memory: 1 episode parked", 0.0, 1.0)
    await memory.stop()
    # a restart tries a parked episode again: here the store was fixed meanwhile
    fixed = RefusingStore()
    fixed.refuse = False
    again = await memory_on(fixed, marks)
    assert again.outbox.parked == 0 and len(await again.outbox.keys()) == 1
    await asyncio.wait_for(again.flush(), 10)
    assert again.health() is None and "run0001" in {e.run_id for e in await again.episodes()}
    await again.stop()


async def test_a_store_that_is_down_parks_nothing() -> None:
    store, marks = RefusingStore(), InMemoryStore()
    memory = await memory_on(store, marks)
    store.down = True
    for n in range(3):
        await memory.remember(episode(n, f"said while the server was away {n}"))
    while store.attempts < 2 * OUTBOX_PARK_AFTER + 1:  # more passes over the outbox than parking takes
        store.tried.clear()
        await asyncio.wait_for(store.tried.wait(), 10)
    assert memory.outbox.parked == 0 and len(await memory.outbox.keys()) == 3
    store.down = False
    await asyncio.wait_for(memory.flush(), 10)
    assert len(await memory.episodes()) == 3 and await memory.outbox.parked_keys() == []
    await memory.stop()


async def shown(memory: EpisodicMemory) -> tuple[str, float, float]:
    """What an operator sees: the heartbeat's note (read by `hub health`) and the gauges."""
    import tempfile
    from pathlib import Path

    from prometheus_client.parser import text_string_to_metric_families

    from hub.engine import Runner
    from hub.features import Heartbeat, Metrics

    with tempfile.TemporaryDirectory() as tmp:
        beat = Heartbeat(Path(tmp) / "heartbeat", notes=memory.health)
        await beat.start()
        while not beat.path.exists():
            await asyncio.sleep(0.01)
        (note,) = [line for line in beat.path.read_text().splitlines() if line.startswith("note: ")]
        await beat.stop()
    metrics = Metrics(Runner(concurrency=1))
    metrics.watch_episodes(waiting=lambda: memory.outbox.waiting, parked=lambda: memory.outbox.parked)
    samples = {s.name: s.value for f in text_string_to_metric_families(metrics.render()[0].decode()) for s in f.samples}
    return note[len("note: ") :].split(" (")[0], samples["hub_episodes_waiting"], samples["hub_episodes_parked"]
