"""Episodic memory: each finished run becomes an episode; new inputs recall the relevant ones.

An :class:`Episode` is what came in, what the agent thought and did, the results and how
the run ended, with the conversation, user, platform and time. :class:`EpisodicMemory` is
the hub component that keeps them in a `VectorStore` (Chroma under ``data/chroma`` by
default) and hooks into every run:

- before a run, the episodes closest to the new inputs (of that conversation, or of all
  of them with ``global_recall``) go into ``ctx.episodes``; the prompt builder fits them
  into its token budget;
- after a run, the episode is written in the background (one chain of writes per
  conversation, so its next run recalls it), summarised by the model if configured;
- at start and every ``prune_every`` episodes, episodes past ``retention_days`` and the
  oldest past ``max_episodes`` are deleted.

What is embedded is the episode's *key*: the inputs' text and the agent's answer, which
is what a later question resembles (a whole digest with action arguments dilutes it). What
the prompt shows is the summary, or the deterministic digest. Both, and the prompt and
completion for training export, are in the record's metadata.

Memory is an aid, never a reason to fail: a store that cannot be opened (corrupt, no
permission, chromadb missing) is one error in the log and the hub runs without it.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import HubConfig, MemorySection
from .errors import HubError
from .logs import ActionCallLog, ActionResultLog, InputLog, Log, OutputLog, StateLog, ThoughtLog

if TYPE_CHECKING:
    from .engine import RunContext, RunResult
    from .hub import Hub
    from .memory.embedder import Embedder
    from .memory.vector import VectorHit, VectorRecord, VectorStore
    from .runner import Slot

__all__ = [
    "Episode",
    "EpisodicMemory",
    "INDEX",
    "episode_from_run",
    "open_episode_store",
    "forget",
    "export_training",
]

log = logging.getLogger(__name__)

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
#: Memory-store keys that let a run skip recall without opening the store: one per
#: conversation that has had an episode written, and one saying those are complete.
MARK_PREFIX = "episodes:"
MARKS_COMPLETE = "episodes:*marked"

#: Seconds a run waits for its conversation's previous episode to be written before recall.
RECALL_WAIT = 2.0
_SUMMARY_SYSTEM = (
    "Summarise this conversation episode for the agent's long-term memory in one to three "
    "plain sentences: what the user wanted, what the agent did and found, how it ended. "
    "Answer with the summary only, no tags, no preamble."
)
_TAGS = re.compile(r"</?[A-Za-z_][\w:-]*(?:\s[^<>]*)?>")


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

    @property
    def context_type(self) -> str:
        return self.context.rpartition(":")[0] if ":" in self.context else self.context

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
        from .memory.vector import VectorRecord

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
    def from_record(
        cls, record: VectorRecord | VectorHit, *, score: float | None = None
    ) -> Episode:
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


def episode_from_run(result: RunResult, *, user: str | None = None) -> Episode | None:
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
    )


def _clip_block(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def default_store_path(config: HubConfig) -> Path:
    return config.data_dir / "chroma"


@functools.cache
def shared_embedder() -> Embedder:
    """The default embedder, one per process: it is read-only and thread-safe, and each
    load costs about half a second and tens of MB, which several hubs (tests) need not pay
    again. Loaded on its first `embed`, not here."""
    from .memory.embedder import default_embedder

    return default_embedder()


def open_episode_store(config: HubConfig, *, embedder: Embedder | None = None) -> VectorStore:
    """The configured episode store (Chroma under ``data/chroma``), not yet opened."""
    from .memory.chroma import ChromaVectorStore

    return ChromaVectorStore(default_store_path(config), embedder=embedder or shared_embedder())


class EpisodicMemory:
    """The hub component that writes, recalls, prunes and forgets episodes.

    Args:
        config: The ``[memory]`` section.
        store: The vector store; default Chroma under ``data/chroma`` (opened at start).
        embedder: The embedder of the default store (default MiniLM, loaded on first use).
    """

    def __init__(
        self,
        config: MemorySection,
        *,
        store: VectorStore | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.embedder = embedder
        self.error: str | None = None
        self._hub: Hub | None = None
        self._ready: asyncio.Task[None] | None = None
        self._writes: dict[str, asyncio.Task[None]] = {}
        self._since_prune = 0
        self._pruning: asyncio.Task[int] | None = None
        self._marked: set[str] = set()  # conversations known to have episodes
        self._marks_complete = False

    @classmethod
    def attach(cls, hub: Hub, **kw: Any) -> EpisodicMemory:
        """Create one for ``hub`` and register it as a component and run hooks."""
        memory = cls(hub.config.memory, **kw)
        hub.components.append(memory)
        hub.before_run_hooks.append(memory.before_run)
        hub.after_run_hooks.append(memory.after_run)
        return memory

    @property
    def available(self) -> bool:
        """Open and usable (False before start, after a failure, after stop)."""
        opened = self._ready is not None and self._ready.done()
        return opened and self.store is not None and self.error is None

    # --- lifecycle ----------------------------------------------------------------------

    async def start(self, hub: Hub) -> None:
        """Open the store in the background: chromadb and the model load while the hub
        starts listening, and a failure is logged once instead of stopping the hub.
        With no store on disk yet there is no episode to recall: it opens when the first
        episode is written, so a hub that has not finished a run stays small."""
        self._hub = hub
        self._marks_complete = bool(await hub.memory.get(MARKS_COMPLETE))
        if self.store is not None or default_store_path(hub.config).exists():
            self._open_soon()
        elif not self._marks_complete:  # no store, so no episode: every mark from now on
            await hub.memory.set(MARKS_COMPLETE, True)
            self._marks_complete = True

    def _open_soon(self) -> None:
        if self._ready is None and self._hub is not None:
            self._ready = asyncio.create_task(self._open(self._hub), name="episodes:open")

    async def _open(self, hub: Hub) -> None:
        try:
            if self.store is None:
                # in a thread: importing numpy and the store module takes a tenth of a second
                self.store = await asyncio.to_thread(
                    open_episode_store, hub.config, embedder=self.embedder
                )
            await self.store.open()
            await self.store.create_index(INDEX)
            await self.prune()
            if not self._marks_complete:  # a store written before the marks: mark its conversations
                marked = {r.metadata.get("context") async for r in scan(self.store)}
                for context in marked:
                    if isinstance(context, str):
                        await hub.memory.set(MARK_PREFIX + context, True)
                        self._marked.add(context)
                await hub.memory.set(MARKS_COMPLETE, True)
                self._marks_complete = True
            embedder = getattr(self.store, "embedder", None)
            if embedder is not None:  # load the model now, not in the first conversation
                await asyncio.to_thread(embedder.embed, ["warm-up"])
        except asyncio.CancelledError:
            raise
        except Exception as e:  # StoreError, chromadb missing, a Chroma bug: memory off
            self._disable(e)

    def _disable(self, e: BaseException) -> None:
        if self.error is not None:
            return
        if isinstance(e, ImportError):
            reason = f"{e} (reinstall the hub with its dependencies, or set [memory] episodes = false)"
        else:
            reason = str(e) if isinstance(e, HubError) else f"{type(e).__name__}: {e}"
        self.error = reason
        log.error("episodic memory is off (the hub runs without it): %s", reason)

    async def stop(self) -> None:
        """Finish pending writes, then close the store. Idempotent."""
        if self._ready is not None and not self._ready.done():
            # let a store being opened finish opening (its thread cannot be interrupted),
            # so that it is closed below rather than leaked
            await asyncio.wait({self._ready}, timeout=10)
            self._ready.cancel()
            await asyncio.gather(self._ready, return_exceptions=True)
        pending = [t for t in (*self._writes.values(), self._pruning) if t is not None]
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        self._writes.clear()
        if self.store is not None:
            store, self.store = self.store, None
            await store.close()
        if self.error is None:
            self.error = "stopped"

    async def _usable(self) -> VectorStore | None:
        if self.error is None:
            self._open_soon()
        if self._ready is None:
            return None
        if not self._ready.done():
            await asyncio.wait({self._ready})  # a cancelled run must not cancel the opening
        return self.store if self.error is None else None

    # --- run hooks ----------------------------------------------------------------------

    async def before_run(self, ctx: RunContext, slot: Slot) -> None:
        """Recall episodes for the run's new inputs into ``ctx.episodes``; never raises."""
        ctx.episodes = []
        if self.config.recall <= 0:
            return
        query = "\n".join(t for t in (_text(e.content) for e in ctx.inputs) if t)
        if not query:
            return
        if self._ready is None:
            return  # no store on disk and no episode written yet: nothing to recall
        pending = self._writes.get(ctx.context.id)
        if pending is not None and not pending.done():
            # the conversation's last episode first, unless its summary keeps the model busy
            await asyncio.wait({pending}, timeout=RECALL_WAIT)
        elif not self.config.global_recall and not await self._has_episodes(ctx.context.id):
            return  # nothing to recall: answer now, not after the store opens and the model loads
        shown = {e.id for e in ctx.context.history if isinstance(e, InputLog)}
        try:
            episodes = await self.recall(query, context=ctx.context.id)
        except Exception as e:
            self._failed("recall", e)
            return
        # episodes whose inputs are all still in the conversation's history add nothing
        ctx.episodes = [
            ep.render() for ep in episodes if not (ep.input_ids and set(ep.input_ids) <= shown)
        ]

    async def _has_episodes(self, context: str) -> bool:
        """False only if the conversation surely has none (its mark is missing, and the
        marks are complete); a forgotten conversation may still say True."""
        if context in self._marked or not self._marks_complete or self._hub is None:
            return True
        if await self._hub.memory.get(MARK_PREFIX + context):
            self._marked.add(context)
            return True
        return False

    async def after_run(self, result: RunResult, ctx: RunContext | None) -> None:
        """Write the run's episode in the background, after the conversation's earlier ones."""
        if self._hub is None or self.error is not None:
            return
        episode = episode_from_run(result, user=ctx.user if ctx is not None else None)
        if episode is None:
            return
        previous = self._writes.get(episode.context)
        task = asyncio.create_task(
            self._write(episode, previous), name=f"episodes:write:{episode.context}"
        )
        self._writes[episode.context] = task
        task.add_done_callback(self._written)

    def _written(self, task: asyncio.Task[None]) -> None:
        for context, pending in list(self._writes.items()):
            if pending is task:
                del self._writes[context]

    async def _write(self, episode: Episode, previous: asyncio.Task[None] | None) -> None:
        if previous is not None and not previous.done():
            await asyncio.wait({previous})
        try:
            if self.config.summarize and self._hub is not None:
                episode.summary = await self._summarize(episode)
            await self.remember(episode)
        except Exception as e:
            self._failed("writing an episode", e)

    def _failed(self, doing: str, e: Exception) -> None:
        from .memory.embedder import EmbedderError

        if isinstance(e, EmbedderError):
            self._disable(e)  # it will not load next time either
        else:
            log.warning("episodic memory: %s failed: %s", doing, e)

    async def _summarize(self, episode: Episode) -> str:
        """The model's summary of the episode, or "" (the digest stands) if it fails."""
        from .models import ModelRequest, Usage, stream_with_retry

        hub = self._hub
        assert hub is not None
        request = ModelRequest(
            system=_SUMMARY_SYSTEM,
            messages=[{"role": "user", "content": episode.digest}],
            max_tokens=200,
            metadata={"purpose": "episode-summary", "run_id": episode.run_id},
        )
        chunks: list[str] = []
        try:
            async with asyncio.timeout(hub.config.model.timeout), hub.runner.llm_slot():
                async for chunk in stream_with_retry(hub.model, request, hub.retry_policy):
                    if not isinstance(chunk, Usage):
                        chunks.append(chunk)
        except Exception as e:  # the model's failure, whatever its type, costs only the summary
            log.warning(
                "episode summary of run %s failed, keeping the digest: %s", episode.run_id[:8], e
            )
            return ""
        return _clip(_TAGS.sub(" ", "".join(chunks)), MAX_DIGEST)

    # --- operations ---------------------------------------------------------------------

    async def recall(self, text: str, *, context: str | None = None) -> list[Episode]:
        """The most relevant episodes for ``text``, best first: at most ``recall``, scoring
        at least ``min_score``, of ``context`` only unless ``global_recall``."""
        store = await self._usable()
        if store is None or not text.strip():
            return []
        where = None if (self.config.global_recall or context is None) else {"context": context}
        hits = await store.query(
            INDEX, text, k=self.config.recall, where=where, min_score=self.config.min_score
        )
        return [Episode.from_record(h, score=h.score) for h in hits]

    async def remember(self, episode: Episode) -> None:
        """Store one episode now; prune every ``prune_every`` episodes."""
        store = await self._usable()
        if store is None:
            return
        if episode.context not in self._marked and self._hub is not None:
            await self._hub.memory.set(MARK_PREFIX + episode.context, True)  # before: never a miss
            self._marked.add(episode.context)
        await store.upsert(INDEX, [episode.to_record()])
        self._since_prune += 1
        every = self.config.prune_every
        if every and self._since_prune >= every and (self._pruning is None or self._pruning.done()):
            self._since_prune = 0
            self._pruning = asyncio.create_task(self.prune(), name="episodes:prune")

    async def flush(self) -> None:
        """Wait for the episodes being written (tests, shutdown)."""
        while self._writes:
            await asyncio.gather(*list(self._writes.values()), return_exceptions=True)

    async def prune(self, *, now: float | None = None) -> int:
        """Apply retention: delete episodes older than ``retention_days``, then the oldest
        beyond ``max_episodes``. Returns how many were deleted."""
        store = self.store
        if store is None:
            return 0
        return await prune_store(store, self.config, now=now)

    async def forget(self, *, user: str | None = None, context: str | None = None) -> int:
        """Delete the episodes of a user and/or a conversation; returns how many."""
        store = await self._usable()
        if store is None:
            return 0
        return await store.delete(INDEX, where=forget_filter(user=user, context=context))

    async def episodes(self, *, context: str | None = None) -> list[Episode]:
        """Every stored episode (of ``context``), oldest first."""
        store = await self._usable()
        if store is None:
            return []
        return await all_episodes(store, context=context)


# --- store-level operations, shared by the component and the command line ---------------


async def scan(store: VectorStore, *, context: str | None = None) -> AsyncIterator[VectorRecord]:
    """Every episode record (of ``context``), one bucket at a time: Chroma cannot return
    100,000 records in one `get` ("too many SQL variables"), and the store has no offset."""
    for bucket in range(BUCKETS):
        where: dict[str, Any] = {"bucket": bucket}
        if context:
            where["context"] = context
        for record in await store.get(INDEX, where=where):
            yield record


async def all_episodes(store: VectorStore, *, context: str | None = None) -> list[Episode]:
    episodes = [Episode.from_record(r) async for r in scan(store, context=context)]
    episodes.sort(key=lambda e: e.time)
    return episodes


async def prune_store(
    store: VectorStore, config: MemorySection, *, now: float | None = None
) -> int:
    """Delete episodes older than ``retention_days``, then the oldest beyond ``max_episodes``."""
    if not config.retention_days and not config.max_episodes:
        return 0
    now = time.time() if now is None else now
    stamped = sorted([(_time_of(r), r.id) async for r in scan(store)])
    doomed: list[str] = []
    if config.retention_days:
        cutoff = now - config.retention_days * 86400
        doomed = [i for t, i in stamped if t < cutoff]
        stamped = stamped[len(doomed) :]
    if config.max_episodes and len(stamped) > config.max_episodes:
        doomed += [i for _, i in stamped[: len(stamped) - config.max_episodes]]
    if not doomed:
        return 0
    removed = 0
    for start in range(0, len(doomed), DELETE_BATCH):
        removed += await store.delete(INDEX, ids=doomed[start : start + DELETE_BATCH])
    log.info("episodic memory: pruned %d episodes (retention)", removed)
    return removed


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


async def forget(
    config: HubConfig,
    *,
    user: str | None = None,
    context: str | None = None,
    platform: str | None = None,
) -> tuple[int, list[str]]:
    """Forget, with the hub stopped: delete matching episodes and, for a conversation, its
    working memory. Returns (episodes deleted, memory keys deleted).

    Raises:
        StoreError: The episode store or the hub's database cannot be opened.
        ValueError: Neither a user nor a context was given.
    """
    where = forget_filter(user=user, context=context, platform=platform)
    deleted = 0
    path = default_store_path(config)
    if path.exists():
        async with open_episode_store(config) as store:
            deleted = await store.delete(INDEX, where=where)
    keys: list[str] = []
    db_path = config.data_dir / "hub.db"
    if context and db_path.exists():
        from .db import Database
        from .memory.sqlite import SQLiteMemoryStore

        async with Database(db_path) as db:
            memory = SQLiteMemoryStore(db)
            await memory.open()
            key = f"working-memory:{context}"
            if await memory.get(key) is not None:
                await memory.delete(key)
                keys.append(key)
    return deleted, keys


async def export_training(
    config: HubConfig,
    out: Path,
    *,
    context: str | None = None,
    with_meta: bool = False,
    all_states: bool = False,
) -> int:
    """Write episodes as JSONL ``{"prompt", "completion"}`` lines, oldest first: the inputs
    and the answers the agent sent. Only completed runs that answered, unless
    ``all_states``. Returns the number of lines.

    Raises:
        StoreError: The episode store cannot be opened.
    """
    path = default_store_path(config)
    episodes: Sequence[Episode] = []
    if path.exists():
        async with open_episode_store(config) as store:
            episodes = await all_episodes(store, context=context)
    n = 0
    tmp = out.with_name(out.name + ".part")
    with tmp.open("w", encoding="utf-8") as f:
        for ep in episodes:
            if not ep.prompt or not ep.completion or (ep.state != "completed" and not all_states):
                continue
            line: dict[str, Any] = {"prompt": ep.prompt, "completion": ep.completion}
            if with_meta:
                line["meta"] = {
                    "run_id": ep.run_id,
                    "context": ep.context,
                    "platform": ep.platform,
                    "user": ep.user,
                    "time": ep.time,
                    "state": ep.state,
                }
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
            n += 1
    tmp.replace(out)
    return n

