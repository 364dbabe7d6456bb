"""An episode: one finished run as episodic memory keeps it, and the store-level operations.

`Episode` is what came in, what the agent thought and did, the results and how the
run ended, with the conversation, user, platform and time; `episode_from_run()` makes
one from a run's logs (which hold no known secret: they are masked where they enter).

What is embedded is the episode's *key*: the inputs' text and the agent's answer, which
is what a later question resembles (a whole digest with action arguments dilutes it). What
the prompt shows is the summary, or the deterministic digest. Both, and the prompt and
completion for training export, are in the record's metadata.

The functions below work on a `VectorStore` directly; the runtime plugin
(`hub.memory`) and the offline commands (`hub.cli`) share them.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..config import HubConfig, MemorySection
from ..logs import ActionCallLog, ActionResultLog, InputLog, OutputLog, StateLog, ThoughtLog

if TYPE_CHECKING:
    from ..definitions import RunResult
    from ..store import MemoryStore
    from ._embedder import Embedder
    from ._vector import VectorHit, VectorRecord, VectorStore

__all__ = [
    "Episode",
    "INDEX",
    "episode_from_run",
    "open_episode_store",
    "default_store_path",
    "local_store_path",
    "episode_store_exists",
    "scan",
    "all_episodes",
    "prune_store",
    "forget_store",
    "forget_filter",
    "forget_identities",
    "finish_forgetting",
    "ID_PREFIX",
    "IDS_COMPLETE",
    "id_prefix",
    "id_key",
    "index_ids",
    "unindex_ids",
]

log = logging.getLogger("hub.memory")

_T = TypeVar("_T")

#: The vector index that holds episodes.
INDEX = "episodes"
#: Bounds on what one episode keeps, so the store's size is bounded by ``max_episodes``.
MAX_TEXT = 4000  # prompt, completion
MAX_DIGEST = 1500  # what the prompt shows of one episode
MAX_PART = 300  # one thought, one action call or result inside the digest
#: Episodes are spread over buckets (a metadata key) so that listing them all (retention,
#: export) reads a bucket at a time: about 1,600 records a read at 100,000 episodes.
BUCKETS = 64
DELETE_BATCH = 1_000
#: The index of each conversation's episode ids in the hub's memory store, so a filtered
#: recall reads its candidates by id instead of through the vector store's metadata filter
#: (which scans every record's metadata). One key per episode,
#: ``episode-ids:<length of the context>:<context>:<episode id>`` (the length makes a
#: conversation's prefix select its own keys only, whatever ``:`` its id and the others'
#: hold), whose value is when it was written; one key per episode needs no
#: read-modify-write, so writers of one conversation cannot lose each other's keys.
#: ``episode-ids:*complete`` says every stored episode has its key (a store written
#: before the index is backfilled once). A key is written before its record and deleted
#: after it: an id may point at nothing (ignored), a record is never missing its key.
ID_PREFIX = "episode-ids:"
IDS_COMPLETE = "episode-ids:*complete"
#: Memory-store writes issued together (one commit of the store's group writes).
INDEX_BATCH = 500


@dataclass(slots=True)
class Episode:
    """One finished run, as memory keeps it. ``time`` is the run's end (Unix seconds)."""

    run_id: str
    context: str
    user: str
    time: float
    state: str
    prompt: str
    completion: str
    digest: str
    summary: str = ""
    input_ids: tuple[str, ...] = ()
    score: float | None = None
    #: the conversation's context type, as the run knew it (a key may hold colons: never
    #: cut from ``context``); "" when the run ended before its context was made
    context_type: str = ""

    @property
    def platform(self) -> str:
        return self.context.split(":", 1)[0]

    @property
    def text(self) -> str:
        """What the prompt shows: the summary if there is one, else the digest."""
        return self.summary or self.digest

    @property
    def key(self) -> str:
        """What is embedded: the inputs and the answer, what a later question resembles."""
        return f"{self.prompt}\n{self.completion}".strip()

    def render(self) -> str:
        """The line recalled into the prompt: when, where, how it ended, what happened."""
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(self.time))
        return f"{when}, {self.context} ({self.state}): {self.text}"

    def to_record(self) -> VectorRecord:
        from ._vector import VectorRecord

        metadata: dict[str, str | int | float | bool] = {
            "context": self.context,
            "context_type": self.context_type,
            "platform": self.platform,
            "user": self.user,
            "time": self.time,
            "run_id": self.run_id,
            "state": self.state,
            "prompt": self.prompt,
            "completion": self.completion,
            "digest": self.digest,
            "summary": self.summary,
            "inputs": ",".join(self.input_ids),
            "bucket": _bucket(self.run_id),
        }
        return VectorRecord(self.run_id, self.key, metadata)

    @classmethod
    def from_record(cls, record: VectorRecord | VectorHit, *, score: float | None = None) -> Episode:
        m = record.metadata

        def s(name: str) -> str:
            value = m.get(name, "")
            return value if isinstance(value, str) else str(value)

        t = m.get("time", 0.0)
        return cls(
            run_id=s("run_id") or record.id,
            context=s("context"),
            user=s("user"),
            time=float(t) if isinstance(t, (int, float)) else 0.0,
            state=s("state"),
            prompt=s("prompt"),
            completion=s("completion"),
            digest=s("digest") or record.text,
            summary=s("summary"),
            input_ids=tuple(i for i in s("inputs").split(",") if i),
            score=score,
            context_type=s("context_type"),
        )


def _bucket(run_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(run_id.encode(), digest_size=4).digest(), "big") % BUCKETS


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    return json.dumps(value, ensure_ascii=False, default=str)


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def episode_from_run(result: RunResult, *, user: str | None = None, context_type: str = "") -> Episode | None:
    """The episode of a finished run; None when nothing with text came in (nothing to
    remember, e.g. a run that failed before taking its input)."""
    logs = result.logs
    inputs = [e for e in logs if isinstance(e, InputLog) and _text(e.content)]
    if not inputs:
        return None
    user = user or next((e.user for e in inputs if e.user), None) or ""
    results = {e.call_id: e for e in logs if isinstance(e, ActionResultLog)}
    parts: list[str] = []
    answers: list[str] = []
    for e in logs:
        match e:
            case InputLog() if _text(e.content):
                who = f"User {e.user}" if e.user else f"Input ({e.type})"
                parts.append(f"{who} asked: {_clip(_text(e.content), MAX_PART * 2)}")
            case ThoughtLog():
                parts.append(f"Agent thought: {_clip(e.content, MAX_PART)}")
            case ActionCallLog():
                res = results.get(e.id)
                if res is None:
                    outcome = "(no result)"
                elif res.ok:
                    outcome = _clip(_text(res.data), MAX_PART) or "ok"
                else:
                    failure = "denied" if res.denied else "error"
                    outcome = f"{failure}: {_clip(res.error or '', MAX_PART)}"
                args = _clip(_text(e.args), MAX_PART)
                parts.append(f"Agent called {e.name}({args}) → {outcome}")
            case OutputLog() if e.sent:
                answers.append(_text(e.content))
                parts.append(f"Agent answered: {_clip(_text(e.content), MAX_PART * 2)}")
            case OutputLog() if e.error:
                parts.append(f"Agent's {e.type or 'output'} failed: {_clip(e.error, MAX_PART)}")
            case _:
                pass
    ending = str(result.state) + (f" ({result.reason})" if result.reason else "")
    parts.append(f"Ended: {ending}")
    digest = " / ".join(parts)
    if len(digest) > MAX_DIGEST:
        # keep how it ended: the end of a long run matters as much as its start
        tail = " / " + parts[-1]
        digest = digest[: MAX_DIGEST - len(tail) - 5].rstrip() + " / …" + tail
    ended = next((e.ts for e in reversed(logs) if isinstance(e, StateLog)), time.time())
    return Episode(
        run_id=result.run_id,
        context=result.context,
        user=user,
        time=ended,
        state=str(result.state),
        prompt=_clip_block("\n".join(_text(e.content) for e in inputs), MAX_TEXT),
        completion=_clip_block("\n\n".join(answers), MAX_TEXT),
        digest=digest,
        input_ids=tuple(e.id for e in inputs),
        context_type=context_type,
    )


def _clip_block(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def default_store_path(config: HubConfig) -> Path:
    return config.data_dir / "chroma"


@functools.cache
def shared_embedder() -> Embedder:
    """The default embedder, one per process: it is read-only and thread-safe, and each
    load costs time and memory (the figures are on the docs' benchmarks page), which several
    hubs (tests) need not pay again. Loaded on its first `embed`, not here."""
    from ._embedder import default_embedder

    return default_embedder()


def open_episode_store(config: HubConfig, *, embedder: Embedder | None = None) -> VectorStore:
    """The configured episode store (Chroma under ``data/chroma``, or the server of
    ``[memory] chroma_url``), not yet opened."""
    from ._chroma import ChromaVectorStore

    if config.memory.chroma_url:
        return ChromaVectorStore(url=config.memory.chroma_url, embedder=embedder or shared_embedder())
    return ChromaVectorStore(default_store_path(config), embedder=embedder or shared_embedder())


def local_store_path(config: HubConfig) -> Path | None:
    """The embedded store's directory; None when episodes are on a server (which may hold
    episodes whatever is on disk here)."""
    return None if config.memory.chroma_url else default_store_path(config)


def episode_store_exists(config: HubConfig) -> bool:
    """Whether there may be episodes to read: a server, or the embedded store's directory."""
    path = local_store_path(config)
    return path is None or path.exists()


# --- store-level operations, shared by the component and the command line ---------------


async def scan(
    store: VectorStore, *, context: str | None = None, where: dict[str, Any] | None = None
) -> AsyncIterator[VectorRecord]:
    """Every episode record (of ``context``, matching ``where``), one bucket at a time:
    Chroma cannot return 100,000 records in one `get` ("too many SQL variables"), and the
    store has no offset."""
    for bucket in range(BUCKETS):
        filter_: dict[str, Any] = {**(where or {}), "bucket": bucket}
        if context:
            filter_["context"] = context
        for record in await store.get(INDEX, where=filter_):
            yield record


def id_prefix(context: str) -> str:
    """The prefix of the memory-store keys of ``context``'s episode ids."""
    return f"{ID_PREFIX}{len(context)}:{context}:"


def id_key(context: str, episode_id: str) -> str:
    return id_prefix(context) + episode_id


def _context_of(record: VectorRecord) -> str | None:
    context = record.metadata.get("context")
    return context if isinstance(context, str) else None


async def _in_batches(items: Sequence[_T], op: Callable[[_T], Awaitable[None]]) -> None:
    """``op`` on every item, `INDEX_BATCH` of them issued together (they share the memory
    store's group commits)."""
    for start in range(0, len(items), INDEX_BATCH):
        await asyncio.gather(*(op(item) for item in items[start : start + INDEX_BATCH]))


async def index_ids(index: MemoryStore, pairs: list[tuple[str, str]]) -> None:
    """Write the keys of (context, episode id) pairs, a batch of writes at a time."""
    now = time.time()
    await _in_batches(pairs, lambda pair: index.set(id_key(*pair), now))


async def unindex_ids(index: MemoryStore, pairs: list[tuple[str, str]]) -> None:
    """Delete the keys of (context, episode id) pairs (after their records)."""
    await _in_batches(pairs, lambda pair: index.delete(id_key(*pair)))


async def all_episodes(store: VectorStore, *, context: str | None = None) -> list[Episode]:
    episodes = [Episode.from_record(r) async for r in scan(store, context=context)]
    episodes.sort(key=lambda e: e.time)
    return episodes


async def prune_store(
    store: VectorStore,
    config: MemorySection,
    *,
    now: float | None = None,
    index: MemoryStore | None = None,
    suspects: set[str] | None = None,
) -> int:
    """Delete episodes older than ``retention_days``, then the oldest beyond ``max_episodes``.

    With the id ``index``, the deleted episodes' keys go too, and keys whose episode is
    not in the store are swept: those found so in this scan and in the previous one (the
    keys of ``suspects``, which is updated; a key written just before its record is not
    swept by one scan that misses the record)."""
    retention = bool(config.retention_days or config.max_episodes)
    if not retention and index is None:
        return 0
    now = time.time() if now is None else now
    stamped = sorted([(_time_of(r), r.id, _context_of(r)) async for r in scan(store)])
    if index is not None and suspects is not None:
        await _sweep(index, {(c, i) for _, i, c in stamped if c is not None}, suspects)
    if not retention:
        return 0
    doomed: list[tuple[str, str | None]] = []
    if config.retention_days:
        cutoff = now - config.retention_days * 86400
        doomed = [(i, c) for t, i, c in stamped if t < cutoff]
        stamped = stamped[len(doomed) :]
    if config.max_episodes and len(stamped) > config.max_episodes:
        doomed += [(i, c) for _, i, c in stamped[: len(stamped) - config.max_episodes]]
    if not doomed:
        return 0
    removed = 0
    for start in range(0, len(doomed), DELETE_BATCH):
        chunk = doomed[start : start + DELETE_BATCH]
        removed += await store.delete(INDEX, ids=[i for i, _ in chunk])
        if index is not None:  # after the records: a record never lacks its key
            await unindex_ids(index, [(c, i) for i, c in chunk if c is not None])
    log.info("episodic memory: pruned %d episodes (retention)", removed)
    return removed


async def _sweep(index: MemoryStore, stored: set[tuple[str, str]], suspects: set[str]) -> None:
    """Delete the id keys that point at no stored episode now and did at the last sweep."""
    keys = {id_key(c, i) for c, i in stored}
    stale = {k for k in await index.keys(ID_PREFIX) if k != IDS_COMPLETE and k not in keys}
    doomed = stale & suspects
    suspects.clear()
    suspects.update(stale - doomed)
    await _in_batches(sorted(doomed), index.delete)


async def forget_store(store: VectorStore, where: dict[str, Any], *, index: MemoryStore | None = None) -> int:
    """Delete the episodes matching ``where`` (a `forget_filter`) and their id keys;
    returns how many episodes."""
    doomed = [] if index is None else [(c, r.id) async for r in scan(store, where=where) if (c := _context_of(r))]
    deleted = await store.delete(INDEX, where=where)
    if index is not None:
        await unindex_ids(index, doomed)
    return deleted


async def forget_identities(store: VectorStore, identities: Sequence[str], *, index: MemoryStore | None) -> int:
    """Delete the episodes of each ``platform:user`` in ``identities`` (a person's) and their id keys."""
    deleted = 0
    for identity in identities:
        platform, _, user = identity.partition(":")
        deleted += await forget_store(store, forget_filter(user=user, platform=platform), index=index)
    return deleted


async def finish_forgetting(store: VectorStore, memory: MemoryStore) -> dict[str, int]:
    """The episodes of every person being forgotten whose episodes are still there (the
    journal in ``memory``, hub/store/_people.py): deleted, and that part marked done. Each
    person with the number of their episodes deleted."""
    from ..store import People

    people = People(memory)
    done: dict[str, int] = {}
    for person, ids in (await people.forgetting(part="episodes")).items():
        done[person] = await forget_identities(store, ids, index=memory)
        await people.forgotten(person, "episodes")
    return done


def _time_of(record: VectorRecord) -> float:
    t = record.metadata.get("time")
    return float(t) if isinstance(t, (int, float)) else 0.0


def forget_filter(
    *, user: str | None = None, context: str | None = None, platform: str | None = None
) -> dict[str, Any]:
    """The metadata filter for forgetting. Raises ValueError when it would match everything."""
    where: dict[str, Any] = {}
    if user:
        where["user"] = user
    if context:
        where["context"] = context
    if platform:
        where["platform"] = platform
    if "user" not in where and "context" not in where:
        raise ValueError("forget needs a user or a context")
    return where
