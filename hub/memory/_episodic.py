"""Episodic memory at run time: each finished run becomes an episode; new inputs recall the relevant ones.

`EpisodicMemory` is a plugin and a component. It keeps episodes (`hub.memory`)
in a `VectorStore` (Chroma under ``data/chroma`` by default) and takes part in every run:

- ``before_run``: the episodes closest to the new inputs (of that conversation, or of all
  of them with ``global_recall``) go into ``run.episodes``; the prompt builder fits them
  into its token budget;
- ``after_run``: the episode is written in the background (one chain of writes per
  conversation, so its next run recalls it), summarised by the model if configured;
- at start and every ``prune_every`` episodes, episodes past ``retention_days`` and the
  oldest past ``max_episodes`` are deleted.

Forgetting a user and exporting training data with the hub stopped are the command line's
(`hub.cli`).

Memory is an aid, never a reason to fail: a store that cannot be opened (corrupt, no
permission, chromadb missing) is one error in the log and the hub runs without it.

A Chroma server (``[memory] chroma_url``) may be down, restarting, or not up yet when the
hub starts: the hub then retries it in the background, with backoff, and memory comes on
by itself when the server answers. Meanwhile, and whenever the store fails a write, the
run's episode waits in the outbox (`hub.memory._outbox`, in the hub's own store) and
is written once the store takes it: episodes are never lost to an outage.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..config import MemorySection
from ..definitions import RunContext, RunResult
from ..engine import Plugin, Runner
from ..errors import HubError, StoreError
from ..logs import InputLog
from ..models import Model, ModelRequest, RetryPolicy, Usage, stream_with_retry
from ..protocol import EPISODE_CAP, scan_all
from ._episode_store import (
    IDS_COMPLETE,
    INDEX,
    MAX_DIGEST,
    Episode,
    _clip,
    _text,
    all_episodes,
    episode_from_run,
    finish_forgetting,
    forget_filter,
    forget_store,
    id_key,
    id_prefix,
    index_ids,
    prune_store,
    scan,
)
from ._outbox import EpisodeOutbox

if TYPE_CHECKING:
    from pathlib import Path

    from ..store import MemoryStore
    from ._embedder import Embedder
    from ._vector import MetadataValue, VectorStore

__all__ = ["EpisodicMemory"]

log = logging.getLogger("hub.memory")

#: Memory-store keys that let a run skip recall without opening the store: one per
#: conversation that has had an episode written, and one saying those are complete.
MARK_PREFIX = "episodes:"
MARKS_COMPLETE = "episodes:*marked"
#: Seconds a run waits for its conversation's previous episode to be written before recall.
RECALL_WAIT = 2.0
#: Seconds between tries of a Chroma server that is down, growing to `RETRY_MOST`.
RETRY_FIRST = 1.0
RETRY_MOST = 60.0
_SUMMARY_SYSTEM = (
    "Summarise this conversation episode for the agent's long-term memory in one to three "
    "plain sentences: what the user wanted, what the agent did and found, how it ended. "
    "Answer with the summary only, no tags, no preamble."
)
_TAGS = re.compile(r"</?[A-Za-z_][\w:-]*(?:\s[^<>]*)?>")


class EpisodicMemory(Plugin):
    """The plugin and component that writes, recalls, prunes and forgets episodes.

    Args:
        config: The ``[memory]`` section.
        store: The vector store; default ``open_store(embedder)`` (opened at start).
        embedder: The embedder of the default store (default MiniLM, loaded on first use).
        open_store: Makes the default store (Chroma under ``data/chroma``).
        model: The hub's model, asked for only when an episode is summarised.
        runner: Summaries share the LLM concurrency limit with runs.
        retry_policy, model_timeout: How a summary request is retried and bounded.
        marks: Where a mark per conversation that has episodes is kept (the memory store),
            so a conversation with none skips recall without opening the store; and the
            index of each conversation's episode ids (`hub.episode.ID_PREFIX`), so its
            recall reads those records by id instead of filtering the whole store.
        store_path: Where the default store lives on disk; while it does not exist, the
            store opens only when the first episode is written.
        retry_first: Seconds before the first retry of a server that is down (doubling
            to a minute), and of writing the episodes that wait in the outbox.
    """

    name = "episodes"

    def __init__(
        self,
        config: MemorySection,
        *,
        store: VectorStore | None = None,
        embedder: Embedder | None = None,
        open_store: Callable[[Embedder | None], VectorStore] | None = None,
        model: Callable[[], Model] | None = None,
        runner: Runner | None = None,
        retry_policy: RetryPolicy | None = None,
        model_timeout: float = 60.0,
        marks: MemoryStore | None = None,
        store_path: Path | None = None,
        retry_first: float = RETRY_FIRST,
        on_usage: Callable[[RunContext | None, Usage], None] | None = None,
    ) -> None:
        self.config = config
        self._marks = marks
        self._store_path = store_path
        self._marked: set[str] = set()  # conversations known to have episodes
        self._marks_complete = False
        self._ids_complete = False  # every stored episode has its id key
        self._suspects: set[str] = set()  # id keys that pointed at nothing at the last sweep
        self._started = False
        self.store = store
        self.embedder = embedder
        self._open_store = open_store
        self._model = model
        self._runner = runner
        self._retry_policy = retry_policy or RetryPolicy()
        self._model_timeout = model_timeout
        self.error: str | None = None
        self._ready: asyncio.Task[None] | None = None
        self._writes: dict[str, asyncio.Task[None]] = {}
        self._since_prune = 0
        self._pruning: asyncio.Task[int] | None = None
        self.outbox = EpisodeOutbox(marks)
        self.waiting: str | None = None  # why the store is not open yet (a server that is down)
        self._reconnect: asyncio.Task[None] | None = None
        self._draining: asyncio.Task[None] | None = None
        self._retry_first = retry_first
        self._on_usage = on_usage  # a summary's tokens and cost count as the run's (budgets, metrics)

    @property
    def available(self) -> bool:
        """Open and usable (False before start, after a failure, after stop)."""
        opened = self._ready is not None and self._ready.done()
        return opened and self.store is not None and self.error is None and self.waiting is None

    # --- lifecycle ----------------------------------------------------------------------

    async def start(self, hub: Any = None) -> None:
        """Open the store in the background: chromadb and the model load while the hub
        starts listening, and a failure is logged once instead of stopping the hub.
        With no store on disk yet there is no episode to recall: it opens when the first
        episode is written, so a hub that has not finished a run stays small."""
        self._started = True
        if self._marks is not None:
            self._marks_complete = bool(await self._marks.get(MARKS_COMPLETE))
            self._ids_complete = bool(await self._marks.get(IDS_COMPLETE))
        if self.store is not None or self._store_path is None or self._store_path.exists():
            self._open_soon()
        elif self._marks is not None:  # no store, so no episode yet
            if not self._marks_complete:
                await self._marks.set(MARKS_COMPLETE, True)
                self._marks_complete = True
            if not self._ids_complete:
                await self._marks.set(IDS_COMPLETE, True)
                self._ids_complete = True

    def _open_soon(self) -> None:
        if self._ready is None and self._started:
            self._ready = asyncio.create_task(self._open(), name="episodes:open")

    async def _open(self) -> None:
        try:
            if self.store is None:
                if self._open_store is None:
                    raise HubError("no episode store: give EpisodicMemory a store or open_store")
                # in a thread: importing numpy and the store module takes a tenth of a second
                self.store = await asyncio.to_thread(self._open_store, self.embedder)
            await self._open_store_now(self.store)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # StoreError, chromadb missing, a Chroma bug: memory off
            if self._server_down(e):
                self._wait_for_server(e)
            else:
                self._disable(e)
        else:
            if await self.outbox.unpark():
                log.info("episodic memory: the parked episodes are tried again")
            if await self.outbox.keys():
                self._drain_soon()

    async def _open_store_now(self, store: VectorStore) -> None:
        await store.open()
        await store.create_index(INDEX)
        if self._marks is not None:  # a `hub memory forget --person` cut off: its episodes go first
            for person, n in (await finish_forgetting(store, self._marks)).items():
                log.warning("forgetting person %s was cut off; %d of their episodes deleted now", person, n)
        await self.prune()
        if self._marks is not None and not (self._marks_complete and self._ids_complete):
            await self._backfill(store, self._marks)
        embedder = getattr(store, "embedder", None)
        if embedder is not None:  # load the model now, not in the first conversation
            await asyncio.to_thread(embedder.embed, ["warm-up"])

    def _server_down(self, e: BaseException) -> bool:
        """A store on a server that could not be reached (retried), rather than one that
        cannot work (a corrupt directory, another embedder's vectors: memory off)."""
        from ._vector import VectorStoreError

        return (
            isinstance(e, VectorStoreError)
            and getattr(self.store, "url", None) is not None
            and "cannot reach" in str(e)
        )

    def _wait_for_server(self, e: BaseException) -> None:
        self.waiting = str(e)
        log.error(
            "episodic memory waits for its server (%s); retrying in the background, episodes wait in the hub's store",
            e,
        )
        if self._reconnect is None or self._reconnect.done():
            self._reconnect = asyncio.create_task(self._reconnecting(), name="episodes:reconnect")

    async def _reconnecting(self) -> None:
        """Open the store until it opens: memory comes on by itself when the server does."""
        delay = self._retry_first
        while self.waiting is not None and self.store is not None:
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MOST)
            try:
                await self._open_store_now(self.store)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                if not self._server_down(e):
                    self.waiting = None
                    self._disable(e)
                    return
                log.info("episodic memory: the server is still down (%s); next try in %.0fs", e, delay)
            else:
                log.warning("episodic memory is on: the server answers")
                self.waiting = None
                self._drain_soon()

    def _drain_soon(self) -> None:
        if self.error is None and self.waiting is None and (self._draining is None or self._draining.done()):
            self._draining = asyncio.create_task(self._drain(), name="episodes:outbox")

    async def _drain(self) -> None:
        """Write the episodes that waited, oldest first. A store that fails (down, or the
        hub's own store) stops the pass, tried again later; an episode the store refuses while
        it works is counted and, after ``OUTBOX_PARK_AFTER`` refusals, parked: the others go on."""
        delay = self._retry_first
        while True:
            try:
                keys = await self.outbox.keys()
                if not keys:
                    return
                refused = 0
                for key in keys:
                    if self.store is None:
                        return  # stopped: they wait for the next start
                    if not await self._drain_one(self.store, key):
                        refused += 1
                log.info("episodic memory: %d episodes that waited for the store are written", len(keys) - refused)
                if not refused:
                    delay = self._retry_first
                    continue
                why = f"{refused} refused by the store"
            except asyncio.CancelledError:
                raise
            except Exception as e:  # still down, or the hub's store failed: nothing is counted
                why = str(e)
            log.warning("episodic memory: the waiting episodes are not all written (%s); again in %.0fs", why, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MOST)

    async def _drain_one(self, store: VectorStore, key: str) -> bool:
        """Write one waiting episode; False when the store refused it (counted). Raises when
        the store itself fails (the pass stops, nothing is blamed on the episode)."""
        episode = await self.outbox.get(key)
        try:
            if episode is not None:
                await self._store(store, episode)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            if not await self._refused(store, e):
                raise
            error = str(e) if isinstance(e, HubError) else f"{type(e).__name__}: {e}"
            if await self.outbox.refused(key, error):
                log.error(
                    "episodic memory: run %s's episode was refused %d times and is parked (%s); the others go on",
                    episode.run_id[:8] if episode is not None else key,
                    self.outbox.park_after,
                    error,
                )
            return False
        await self.outbox.remove(key)
        return True

    async def _refused(self, store: VectorStore, e: Exception) -> bool:
        """Whether ``e`` is the store refusing this episode (it works: a probe answers) rather
        than the store, or the hub's own, failing."""
        from ._vector import VectorStoreError

        if isinstance(e, StoreError) and not isinstance(e, VectorStoreError):
            return False  # the hub's memory store
        if isinstance(e, VectorStoreError) and "cannot reach" in e.reason:
            return False
        try:
            await store.create_index(INDEX)  # idempotent, and it asks the server
        except Exception:
            return False
        return True

    def health(self) -> str | None:
        """Why episodic memory is not whole (episodes parked, or waiting for a store that is
        down), or None."""
        parts = []
        if self.outbox.parked:
            n = self.outbox.parked
            parts.append(
                f"{n} episode{'s' if n != 1 else ''} parked (refused {self.outbox.park_after} times by the vector"
                " store; tried again at the next start)"
            )
        if self.waiting is not None:
            parts.append(f"waiting for the vector store ({self.waiting}); {self.outbox.waiting} episodes wait")
        elif self.error is not None:
            parts.append(f"off: {self.error}")
        return "episodic memory: " + "; ".join(parts) if parts else None

    async def _backfill(self, store: VectorStore, marks: MemoryStore) -> None:
        """A store written before the marks or the id index: mark the conversations it
        holds and index its episodes' ids, in one scan."""
        pairs = [(context, r.id) async for r in scan(store) if isinstance(context := r.metadata.get("context"), str)]
        if not self._marks_complete:
            for context in {c for c, _ in pairs}:
                await marks.set(MARK_PREFIX + context, True)
                self._marked.add(context)
            await marks.set(MARKS_COMPLETE, True)
            self._marks_complete = True
        if not self._ids_complete:
            await index_ids(marks, pairs)
            await marks.set(IDS_COMPLETE, True)
            self._ids_complete = True
            if pairs:
                log.info("episodic memory: indexed the ids of %d episodes", len(pairs))

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
        """Finish pending writes, then close the store. Idempotent. Episodes still waiting
        for the store stay in the outbox for the next start."""
        for task in (self._reconnect, self._draining):
            if task is not None and not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
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
        return self.store if self.error is None and self.waiting is None else None

    # --- run hooks ----------------------------------------------------------------------

    async def before_run(self, ctx: RunContext) -> None:
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
        ctx.episodes = scan_all(  # prompt-injection markers neutralised (hub/protocol/_injection.py)
            [ep.render() for ep in episodes if not (ep.input_ids and set(ep.input_ids) <= shown)],
            source=f"a recalled episode of {ctx.context.id}",
            cap=EPISODE_CAP,
        )

    async def _has_episodes(self, context: str) -> bool:
        """False only if the conversation surely has none (its mark is missing, and the
        marks are complete); a forgotten conversation may still say True."""
        if context in self._marked or not self._marks_complete or self._marks is None:
            return True
        if await self._marks.get(MARK_PREFIX + context):
            self._marked.add(context)
            return True
        return False

    async def after_run(self, result: RunResult, ctx: RunContext | None) -> None:
        """Write the run's episode in the background, after the conversation's earlier ones."""
        if not self._started or self.error is not None:
            return
        episode = episode_from_run(
            result,
            user=ctx.user if ctx is not None else None,
            context_type=ctx.context.type if ctx is not None else "",
        )
        if episode is None:
            return
        previous = self._writes.get(episode.context)
        task = asyncio.create_task(self._write(episode, previous, ctx), name=f"episodes:write:{episode.context}")
        self._writes[episode.context] = task
        task.add_done_callback(self._written)

    def _written(self, task: asyncio.Task[None]) -> None:
        for context, pending in list(self._writes.items()):
            if pending is task:
                del self._writes[context]

    async def _write(
        self, episode: Episode, previous: asyncio.Task[None] | None, ctx: RunContext | None = None
    ) -> None:
        if previous is not None and not previous.done():
            await asyncio.wait({previous})
        try:
            if self.config.summarize and self._model is not None and self._runner is not None:
                episode.summary = await self._summarize(episode, ctx)
            await self.remember(episode)
        except Exception as e:
            self._failed("writing an episode", e)

    def _failed(self, doing: str, e: Exception) -> None:
        from ._embedder import EmbedderError

        if isinstance(e, EmbedderError):
            self._disable(e)  # it will not load next time either
        else:
            log.warning("episodic memory: %s failed: %s", doing, e)

    async def _summarize(self, episode: Episode, ctx: RunContext | None = None) -> str:
        """The model's summary of the episode, or "" (the digest stands) if it fails; its
        usage counted for ``ctx``'s run."""
        assert self._model is not None and self._runner is not None
        request = ModelRequest(
            system=_SUMMARY_SYSTEM,
            messages=[{"role": "user", "content": episode.digest}],
            max_tokens=200,
            metadata={"purpose": "episode-summary", "run_id": episode.run_id},
        )
        chunks: list[str] = []
        try:
            async with asyncio.timeout(self._model_timeout), self._runner.llm_slot():
                async for chunk in stream_with_retry(self._model(), request, self._retry_policy):
                    if isinstance(chunk, str):
                        chunks.append(chunk)
                    elif isinstance(chunk, Usage) and self._on_usage is not None:
                        self._on_usage(ctx, chunk)
        except Exception as e:  # the model's failure, whatever its type, costs only the summary
            log.warning("episode summary of run %s failed, keeping the digest: %s", episode.run_id[:8], e)
            return ""
        return _clip(_TAGS.sub(" ", "".join(chunks)), MAX_DIGEST)

    # --- operations ---------------------------------------------------------------------

    async def recall(self, text: str, *, context: str | None = None) -> list[Episode]:
        """The most relevant episodes for ``text``, best first: at most ``recall``, scoring
        at least ``min_score``, of ``context`` only unless ``global_recall``."""
        store = await self._usable()
        if store is None or not text.strip():
            return []
        where: dict[str, MetadataValue] | None = (
            None if (self.config.global_recall or context is None) else {"context": context}
        )
        ids: list[str] | None = None
        if context is not None and where is not None and self._ids_complete and self._marks is not None:
            # the conversation's episodes by id (the where stays, as a guard)
            prefix = id_prefix(context)
            ids = [key[len(prefix) :] for key in await self._marks.keys(prefix)]
            if not ids:
                return []
        hits = await store.query(
            INDEX, text, k=self.config.recall, where=where, min_score=self.config.min_score, ids=ids
        )
        return [Episode.from_record(h, score=h.score) for h in hits]

    async def remember(self, episode: Episode) -> None:
        """Store one episode now, or keep it in the outbox while the store is down (or
        others wait before it); prune every ``prune_every`` episodes."""
        from ._vector import VectorStoreError

        store = await self._usable()
        if store is None:
            if self.waiting is not None:
                await self.outbox.add(episode)  # written when the server answers
            return
        if self._draining is not None and not self._draining.done():
            await self.outbox.add(episode)  # after the ones that waited: in order
            return
        try:
            await self._store(store, episode)
        except VectorStoreError as e:
            log.warning("episodic memory: run %s's episode waits for the store: %s", episode.run_id[:8], e)
            await self.outbox.add(episode)
            self._drain_soon()
            return
        self._since_prune += 1
        every = self.config.prune_every
        if every and self._since_prune >= every and (self._pruning is None or self._pruning.done()):
            self._since_prune = 0
            self._pruning = asyncio.create_task(self.prune(), name="episodes:prune")

    async def _store(self, store: VectorStore, episode: Episode) -> None:
        if self._marks is not None:  # both before the record: never a miss
            if episode.context not in self._marked:
                await self._marks.set(MARK_PREFIX + episode.context, True)
                self._marked.add(episode.context)
            await self._marks.set(id_key(episode.context, episode.run_id), time.time())
        await store.upsert(INDEX, [episode.to_record()])

    async def flush(self) -> None:
        """Wait for the episodes being written (tests, shutdown), and for those that waited
        in the outbox while the store takes them."""
        while self._writes or (self._draining is not None and not self._draining.done()):
            await asyncio.gather(*list(self._writes.values()), return_exceptions=True)
            if self._draining is not None and not self._draining.done() and not self._writes:
                await asyncio.wait({self._draining})

    async def prune(self, *, now: float | None = None) -> int:
        """Apply retention: delete episodes older than ``retention_days``, then the oldest
        beyond ``max_episodes``. Returns how many were deleted."""
        store = self.store
        if store is None:
            return 0
        index = self._marks if self._ids_complete else None
        return await prune_store(store, self.config, now=now, index=index, suspects=self._suspects)

    async def forget(self, *, user: str | None = None, context: str | None = None) -> int:
        """Delete the episodes of a user and/or a conversation; returns how many."""
        store = await self._usable()
        if store is None:
            return 0
        return await forget_store(store, forget_filter(user=user, context=context), index=self._marks)

    async def episodes(self, *, context: str | None = None) -> list[Episode]:
        """Every stored episode (of ``context``), oldest first."""
        store = await self._usable()
        if store is None:
            return []
        return await all_episodes(store, context=context)
