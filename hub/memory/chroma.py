"""`ChromaVectorStore`: the default vector store, Chroma's embedded PersistentClient.

One Chroma collection per index, HNSW in cosine space. The store embeds texts with its
own `Embedder` and hands Chroma the vectors; each collection also records the embedder
(``hub_embedder`` metadata, and `chroma_embedding_function` in its configuration) so a
store reopened in a fresh process, or a plain Chroma client, embeds queries the same way,
and a store with a different embedder is refused instead of comparing unrelated vectors.

Partitions (``partition_by="context"``, as episodic memory opens it): Chroma evaluates a
``where`` filter over the whole collection and then searches HNSW with that allow-list,
which took 120 ms at 100,000 episodes for one conversation's 100. So each record is also
kept in one of ``partitions`` small collections, chosen by a stable hash of its
``partition_by`` value, and a query whose ``where`` names that value searches only its
partition. The whole collection stays as it was (counts, reads, global queries). A store
written before partitions existed is copied into them in the background on first open;
until that is done (``hub_partitions`` in the collection's metadata), queries use the
whole collection as before.

chromadb is imported on first use (it costs most of a second), and every Chroma call
runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import os
import re
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from hub.memory.embedder import Embedder, default_embedder, embedder_from_name
from hub.memory.vector import (
    MetadataValue,
    VectorHit,
    VectorRecord,
    VectorStore,
    VectorStoreError,
    check_index_name,
    check_k,
    check_limit,
    check_delete_args,
    check_records,
    check_where,
)

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection

__all__ = ["ChromaVectorStore", "chroma_collection_name", "chroma_embedding_function"]

_T = TypeVar("_T")
log = logging.getLogger(__name__)

#: Name under which the embedding function is registered with chromadb.
EMBEDDING_FUNCTION_NAME = "hub-embedder"
_INDEX_KEY = "hub_index"
_EMBEDDER_KEY = "hub_embedder"
_PARTITION_KEY = "hub_partition_by"  # set on an index whose partitions are complete
_PARTITIONS_KEY = "hub_partitions"
_MIGRATE_BATCH = 1_000
# Names Chroma accepts as they are (3-512 chars of [A-Za-z0-9_-], alphanumeric at both
# ends); dots are left out so "..", and IPv4-like names, never pass through.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{1,200}[A-Za-z0-9]")
_MAPPED_PREFIX = "hub-"


def chroma_collection_name(index: str) -> str:
    """The Chroma collection that holds `index`: the name itself when Chroma accepts
    it, else ``hub-<slug>-<hash>``. Deterministic and injective (names starting with
    ``hub-`` are always mapped, so a mapped name never meets a plain one)."""
    check_index_name(index)
    if _PLAIN_NAME.fullmatch(index) and not index.startswith(_MAPPED_PREFIX):
        return index
    slug = re.sub(r"[^A-Za-z0-9_-]+", "_", index)[:40].strip("_-") or "x"
    digest = hashlib.sha256(index.encode()).hexdigest()[:16]
    return f"{_MAPPED_PREFIX}{slug}-{digest}"


def chroma_partition_name(index: str, partition: int) -> str:
    """The Chroma collection of one partition of `index`. Plain and mapped index names
    never contain a dot (see `chroma_collection_name`), so these never meet them."""
    check_index_name(index)
    digest = hashlib.sha256(index.encode()).hexdigest()[:16]
    return f"hub.{digest}.p{partition}"


def partition_of(value: str, partitions: int) -> int:
    """The partition of a record whose partition key holds `value` (stable across processes)."""
    return zlib.crc32(value.encode()) % partitions


@functools.cache
def chroma_embedding_function() -> type:
    """The chromadb embedding function class wrapping an `Embedder`, registered with
    chromadb on first call. Call it before a plain Chroma client opens a hub collection
    (the store does it itself) so Chroma can rebuild the embedder from the config."""
    from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
    from chromadb.utils.embedding_functions import register_embedding_function

    class HubEmbeddingFunction(EmbeddingFunction[Documents]):
        """Chroma's view of a hub `Embedder` (MiniLM or hash: those it can rebuild)."""

        def __init__(self, embedder: Embedder | None = None) -> None:
            self.embedder = embedder if embedder is not None else default_embedder()

        def __call__(self, input: Documents) -> Embeddings:
            return list(self.embedder.embed(list(input)))

        @staticmethod
        def name() -> str:
            return EMBEDDING_FUNCTION_NAME

        def get_config(self) -> dict[str, Any]:
            return {"embedder": self.embedder.name}

        @staticmethod
        def build_from_config(config: dict[str, Any]) -> HubEmbeddingFunction:
            return HubEmbeddingFunction(embedder_from_name(config["embedder"]))

        def default_space(self) -> str:  # type: ignore[override]
            return "cosine"

        def supported_spaces(self) -> list[str]:  # type: ignore[override]
            return ["cosine"]

    register_embedding_function(HubEmbeddingFunction)
    return HubEmbeddingFunction


class ChromaVectorStore(VectorStore):
    """Indexes as Chroma collections in a directory; survives restarts.

    Opens on first use (or on `open` / ``async with``). Not safe against other
    processes writing the same directory at once.

    Args:
        path: The store's directory (created if missing).
        embedder: Embeds texts and queries; default `default_embedder()` (MiniLM).
        partition_by: A metadata key whose (string) values partition each index, so a
            query filtered to one value searches a small collection (module docstring).
        partitions: How many partitions a new index gets (an existing one keeps its own).

    Raises:
        VectorStoreError: (from any method) the directory cannot be opened as a
            Chroma store, or Chroma fails; the message names the path.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        embedder: Embedder | None = None,
        partition_by: str | None = None,
        partitions: int = 256,
    ) -> None:
        if partition_by is not None and (not isinstance(partition_by, str) or not partition_by):
            raise ValueError(f"partition_by must be a non-empty metadata key, got {partition_by!r}")
        if not isinstance(partitions, int) or isinstance(partitions, bool) or partitions < 1:
            raise ValueError(f"partitions must be a positive int, got {partitions!r}")
        self.path = Path(path)
        self.embedder = embedder if embedder is not None else default_embedder()
        self.partition_by = partition_by
        self.partitions = partitions
        self._client: ClientAPI | None = None
        self._collections: dict[str, Collection] = {}
        self._lock = asyncio.Lock()
        self._closed = False
        # index -> its partition count, for indexes whose writes go to partitions too;
        # `_ready` holds those whose partitions are complete (queries may use them)
        self._parts: dict[str, int] = {}
        self._ready: set[str] = set()
        self._writing = asyncio.Lock()  # upserts, deletes and migration batches in turn
        self._migrations: dict[str, asyncio.Task[None]] = {}

    async def open(self) -> None:
        await self._get_client()

    async def create_index(self, name: str) -> None:
        await self._get_collection(name, create=True)

    async def delete_index(self, name: str) -> None:
        client = await self._get_client()
        chroma_name = chroma_collection_name(name)
        await self._stop_migration(name)
        collection = await self._get_collection(name, create=False)
        count = self._parts.get(name, self.partitions if self.partition_by else 0)
        stored = (collection.metadata or {}).get(_PARTITIONS_KEY) if collection is not None else None
        if isinstance(stored, int):
            count = max(count, stored)
        self._collections.pop(name, None)
        self._parts.pop(name, None)
        self._ready.discard(name)
        names = [chroma_partition_name(name, i) for i in range(count)]
        for key in [k for k in self._collections if k.startswith("\x00")]:
            if key.split("\x00")[1] == name:
                del self._collections[key]

        def drop() -> None:
            from chromadb.errors import NotFoundError

            # the partitions first: a crash half way leaves the whole index, still usable
            for each in [*names, chroma_name]:
                try:
                    client.delete_collection(each)
                except NotFoundError:
                    pass

        async with self._writing:
            await self._call(drop, f"deleting index {name!r}")

    async def upsert(self, index: str, records: Sequence[VectorRecord]) -> None:
        records = check_records(records)
        collection = await self._get_collection(index, create=True)
        if not records:
            return
        assert collection is not None
        vectors = await asyncio.to_thread(self.embedder.embed, [r.text for r in records])
        batch = self._max_batch()

        parts = self._parts.get(index, 0)

        def write() -> None:
            for start in range(0, len(records), batch):
                chunk = records[start : start + batch]
                ids = [r.id for r in chunk]
                # Chroma merges metadata on upsert; replacing means nulling old keys.
                old = collection.get(ids=ids, include=["metadatas"])
                old_meta = {i: m or {} for i, m in zip(old["ids"], old["metadatas"] or [])}
                metadatas: list[dict[str, Any] | None] = []
                for r in chunk:
                    meta: dict[str, Any] = {k: None for k in old_meta.get(r.id, ())}
                    meta.update(r.metadata)
                    metadatas.append(meta or None)
                embeddings = vectors[start : start + batch]
                collection.upsert(
                    ids=ids,
                    embeddings=embeddings,
                    documents=[r.text for r in chunk],
                    metadatas=metadatas,  # type: ignore[arg-type]
                )
                if parts:
                    self._write_partitions(index, chunk, embeddings, metadatas, old_meta, parts)

        async with self._writing:
            await self._call(write, f"writing to index {index!r}")

    async def query(
        self,
        index: str,
        text: str,
        *,
        k: int = 5,
        where: dict[str, MetadataValue] | None = None,
        min_score: float | None = None,
    ) -> list[VectorHit]:
        check_k(k)
        where = check_where(where)
        collection = await self._get_collection(index, create=False)
        if collection is None:
            return []
        value = where.get(self.partition_by) if where and self.partition_by else None
        if isinstance(value, str) and index in self._ready:
            # only this value's partition can hold a match: search it, not everyone's
            collection = await self._partition(index, partition_of(value, self._parts[index]))
        vector = (await asyncio.to_thread(self.embedder.embed, [text]))[0]

        def search() -> Any:
            return collection.query(
                query_embeddings=[vector],
                n_results=k,
                where=_chroma_where(where),
                include=["documents", "metadatas", "distances"],
            )

        result = await self._call(search, f"querying index {index!r}")
        hits = []
        for id_, doc, meta, distance in zip(
            result["ids"][0],
            (result["documents"] or [[]])[0],
            (result["metadatas"] or [[]])[0],
            (result["distances"] or [[]])[0],
        ):
            score = 1.0 - float(distance)  # Chroma's cosine distance is 1 - similarity
            if min_score is None or score >= min_score:
                hits.append(VectorHit(id_, doc or "", dict(meta or {}), score))
        return hits

    async def delete(
        self,
        index: str,
        *,
        ids: Sequence[str] | None = None,
        where: dict[str, MetadataValue] | None = None,
    ) -> int:
        id_list, where = check_delete_args(ids, where)
        collection = await self._get_collection(index, create=False)
        if collection is None or id_list == []:
            return 0

        parts = self._parts.get(index, 0)

        def remove() -> int:
            # Chroma's own delete reports requested ids, not removed ones: look first.
            include: Any = ["metadatas"] if parts else []
            result = collection.get(ids=id_list, where=_chroma_where(where), include=include)
            found = result["ids"]
            batch = self._max_batch()
            if parts:
                by_partition: dict[int, list[str]] = {}
                for id_, meta in zip(found, result["metadatas"] or []):
                    value = (meta or {}).get(self.partition_by)  # type: ignore[arg-type]
                    if isinstance(value, str):
                        by_partition.setdefault(partition_of(value, parts), []).append(id_)
                for i, ids in by_partition.items():
                    for start in range(0, len(ids), batch):
                        self._partition_sync(index, i).delete(ids=ids[start : start + batch])
            for start in range(0, len(found), batch):
                collection.delete(ids=found[start : start + batch])
            return len(found)

        async with self._writing:
            return await self._call(remove, f"deleting from index {index!r}")

    async def count(self, index: str) -> int:
        collection = await self._get_collection(index, create=False)
        if collection is None:
            return 0
        return await self._call(collection.count, f"counting index {index!r}")

    async def get(
        self,
        index: str,
        *,
        where: dict[str, MetadataValue] | None = None,
        limit: int | None = None,
    ) -> list[VectorRecord]:
        where = check_where(where)
        check_limit(limit)
        collection = await self._get_collection(index, create=False)
        if collection is None or limit == 0:
            return []

        def read() -> Any:
            return collection.get(
                where=_chroma_where(where), limit=limit, include=["documents", "metadatas"]
            )

        result = await self._call(read, f"reading index {index!r}")
        return [
            VectorRecord(id_, doc or "", dict(meta or {}))
            for id_, doc, meta in zip(
                result["ids"], result["documents"] or [], result["metadatas"] or []
            )
        ]

    async def partitioned(self, index: str) -> bool:
        """Whether queries of `index` filtered on ``partition_by`` search one partition;
        waits for a copy into partitions that is under way (an older store's)."""
        await self._get_collection(index, create=False)
        task = self._migrations.get(index)
        if task is not None:
            await asyncio.wait({task})
        return index in self._ready

    async def close(self) -> None:
        for index in list(self._migrations):
            await self._stop_migration(index)
        async with self._lock:
            self._closed = True
            client, self._client = self._client, None
            self._collections.clear()
            if client is not None:
                await asyncio.to_thread(client.close)

    # -- internals ---------------------------------------------------------------

    async def _get_client(self) -> ClientAPI:
        if self._client is not None:
            return self._client
        async with self._lock:
            if self._closed:
                raise VectorStoreError(self.path, "store is closed")
            if self._client is None:
                self._client = await asyncio.to_thread(self._open_client)
            return self._client

    def _open_client(self) -> ClientAPI:
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise VectorStoreError(self.path, f"cannot create directory: {e.strerror or e}") from e
        if not self.path.is_dir():
            raise VectorStoreError(self.path, "not a directory")
        if not os.access(self.path, os.R_OK | os.W_OK | os.X_OK):
            raise VectorStoreError(self.path, "directory is not readable and writable")
        import chromadb
        from chromadb.config import Settings

        chroma_embedding_function()  # registered before any collection is opened
        try:
            client = chromadb.PersistentClient(
                path=str(self.path), settings=Settings(anonymized_telemetry=False)
            )
            client.heartbeat()
        except Exception as e:  # sqlite, Rust and config errors all mean "cannot open"
            raise VectorStoreError(self.path, f"cannot open Chroma store: {e}") from e
        return client

    async def _get_collection(self, index: str, *, create: bool) -> Collection | None:
        """The collection for `index` (cached); None if missing and not `create`."""
        client = await self._get_client()
        collection = self._collections.get(index)
        if collection is not None:
            return collection
        chroma_name = chroma_collection_name(index)
        function = chroma_embedding_function()(self.embedder) if self._rebuildable() else None

        def fetch() -> Collection | None:
            from chromadb.errors import NotFoundError

            if create:
                return client.get_or_create_collection(
                    chroma_name,
                    configuration={"hnsw": {"space": "cosine"}},
                    metadata={_INDEX_KEY: index, _EMBEDDER_KEY: self.embedder.name},
                    embedding_function=function,
                )
            try:
                return client.get_collection(chroma_name, embedding_function=function)
            except NotFoundError:
                return None

        collection = await self._call(fetch, f"opening index {index!r}")
        if collection is None:
            return None
        stored = (collection.metadata or {}).get(_EMBEDDER_KEY)
        if stored is not None and stored != self.embedder.name:
            raise VectorStoreError(
                self.path,
                f"index {index!r} holds vectors of embedder {stored!r}, "
                f"but this store embeds with {self.embedder.name!r}",
            )
        self._collections[index] = collection
        if self.partition_by is not None:
            await self._start_partitions(index, collection)
        return collection

    # -- partitions --------------------------------------------------------------

    async def _start_partitions(self, index: str, collection: Collection) -> None:
        """Decide how `index` is partitioned: complete partitions are used at once; an
        empty index is marked partitioned; one written without partitions is copied
        into them in the background."""
        if index in self._parts:  # another caller opened it first
            return
        meta = dict(collection.metadata or {})
        stored_key, stored_count = meta.get(_PARTITION_KEY), meta.get(_PARTITIONS_KEY)
        if stored_key is not None:
            if stored_key == self.partition_by and isinstance(stored_count, int) and stored_count > 0:
                self._parts[index] = stored_count
                self._ready.add(index)
            else:  # partitioned by another key: queries keep to the whole collection
                log.warning(
                    "vector store %s: index %r is partitioned by %r, not %r; its queries scan it whole",
                    self.path, index, stored_key, self.partition_by,
                )
            return
        self._parts[index] = self.partitions  # writes from now on go to the partitions too
        if await self._call(collection.count, f"counting index {index!r}") == 0:
            await self._mark_partitioned(index, collection)
            return
        log.info("vector store %s: copying index %r into %d partitions", self.path, index, self.partitions)
        self._migrations[index] = asyncio.create_task(
            self._migrate(index, collection), name=f"chroma:partition:{index}"
        )

    async def _mark_partitioned(self, index: str, collection: Collection) -> None:
        meta = {k: v for k, v in (collection.metadata or {}).items() if not k.startswith("hnsw:")}
        meta.update({_PARTITION_KEY: self.partition_by, _PARTITIONS_KEY: self._parts[index]})
        await self._call(lambda: collection.modify(metadata=meta), f"marking index {index!r} partitioned")
        self._ready.add(index)

    async def _migrate(self, index: str, collection: Collection) -> None:
        """Copy every record of `index` into its partition, a batch at a time between
        other writes (which already write partitions too), then mark it partitioned."""
        parts = self._parts[index]
        try:
            async with self._writing:
                ids: list[str] = []
                while True:  # the ids as they are now; later writes reach the partitions anyway
                    page = await self._call(
                        lambda: collection.get(limit=_MIGRATE_BATCH, offset=len(ids), include=[]),
                        f"listing index {index!r}",
                    )
                    ids.extend(page["ids"])
                    if len(page["ids"]) < _MIGRATE_BATCH:
                        break
            for start in range(0, len(ids), _MIGRATE_BATCH):
                batch = ids[start : start + _MIGRATE_BATCH]

                def copy() -> None:
                    got = collection.get(ids=batch, include=["embeddings", "documents", "metadatas"])
                    metadatas = [m or None for m in got["metadatas"] or []]
                    records = [
                        VectorRecord(i, d or "", dict(m or {}))
                        for i, d, m in zip(got["ids"], got["documents"] or [], metadatas)
                    ]
                    embeddings = got["embeddings"]
                    if records and embeddings is not None:
                        self._write_partitions(index, records, embeddings, metadatas, {}, parts)

                async with self._writing:  # a delete or an upsert in between is not undone
                    await self._call(copy, f"partitioning index {index!r}")
            await self._mark_partitioned(index, collection)
            log.info("vector store %s: index %r is partitioned (%d records)", self.path, index, len(ids))
        except asyncio.CancelledError:
            raise
        except Exception as e:  # the whole collection still answers every query
            log.warning("vector store %s: partitioning index %r failed: %s", self.path, index, e)

    async def _stop_migration(self, index: str) -> None:
        task = self._migrations.pop(index, None)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _partition(self, index: str, i: int) -> Collection:
        collection = self._collections.get(f"\x00{index}\x00{i}")
        if collection is not None:
            return collection
        return await self._call(
            lambda: self._partition_sync(index, i), f"opening partition {i} of index {index!r}"
        )

    def _partition_sync(self, index: str, i: int) -> Collection:
        """Partition `i` of `index`, opened (created if missing) and cached; in a worker thread."""
        key = f"\x00{index}\x00{i}"
        collection = self._collections.get(key)
        if collection is not None:
            return collection
        client = self._client
        if client is None:
            raise VectorStoreError(self.path, "store is closed")
        function = chroma_embedding_function()(self.embedder) if self._rebuildable() else None
        collection = client.get_or_create_collection(
            chroma_partition_name(index, i),
            configuration={"hnsw": {"space": "cosine"}},
            metadata={_INDEX_KEY: index, _EMBEDDER_KEY: self.embedder.name, "hub_partition": i},
            embedding_function=function,
        )
        self._collections[key] = collection
        return collection

    def _write_partitions(
        self,
        index: str,
        records: Sequence[VectorRecord],
        embeddings: Any,
        metadatas: list[dict[str, Any] | None],
        old_meta: dict[str, dict[str, Any]],
        parts: int,
    ) -> None:
        """In a worker thread: put each record in its value's partition, and take it out
        of its old value's partition if that changed."""
        key = self.partition_by
        assert key is not None
        moved_out: dict[int, list[str]] = {}
        groups: dict[int, list[int]] = {}
        for n, r in enumerate(records):
            old = old_meta.get(r.id, {}).get(key)
            new = r.metadata.get(key)
            old_p = partition_of(old, parts) if isinstance(old, str) else None
            new_p = partition_of(new, parts) if isinstance(new, str) else None
            if old_p is not None and old_p != new_p:
                moved_out.setdefault(old_p, []).append(r.id)
            if new_p is not None:
                groups.setdefault(new_p, []).append(n)
        for p, ids in moved_out.items():
            self._partition_sync(index, p).delete(ids=ids)
        for p, rows in groups.items():
            part_meta: list[dict[str, Any] | None] = []
            for n in rows:
                r = records[n]
                old = old_meta.get(r.id, {})
                same = isinstance(old.get(key), str) and partition_of(old[key], parts) == p
                part_meta.append(metadatas[n] if same else (dict(r.metadata) or None))
            self._partition_sync(index, p).upsert(
                ids=[records[n].id for n in rows],
                embeddings=[embeddings[n] for n in rows],
                documents=[records[n].text for n in rows],
                metadatas=part_meta,  # type: ignore[arg-type]
            )

    def _rebuildable(self) -> bool:
        try:
            embedder_from_name(self.embedder.name)
        except ValueError:
            return False
        return True

    def _max_batch(self) -> int:
        assert self._client is not None
        return max(1, self._client.get_max_batch_size())

    async def _call(self, fn: Callable[[], _T], doing: str) -> _T:
        if self._closed:
            raise VectorStoreError(self.path, "store is closed")
        try:
            return await asyncio.to_thread(fn)
        except VectorStoreError:
            raise
        except Exception as e:  # Chroma raises ChromaError, ValueError and Rust errors alike
            raise VectorStoreError(self.path, f"{doing}: {e}") from e


def _chroma_where(where: dict[str, MetadataValue] | None) -> dict[str, Any] | None:
    if not where:
        return None
    clauses = [{key: {"$eq": value}} for key, value in where.items()]
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}
