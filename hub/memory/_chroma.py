"""`ChromaVectorStore`: the default vector store, Chroma's embedded PersistentClient, or a
Chroma server through its HttpClient (``[memory] chroma_url``, for several workers).

One Chroma collection per index, HNSW in cosine space. A query filtered by ``where`` that
selects at most `EXACT_CAP` records is ranked exactly instead, with numpy over the
matches' vectors: Chroma's HNSW search with a small allow-list costs several times more
than reading one conversation's vectors (Chroma's filter, a scan of the whole collection's
metadata, is most of either; the figures are on the docs' benchmarks page), and HNSW is
approximate. A query given the candidates' ``ids`` (the hub's index of a conversation's
episodes) reads them by id instead, without Chroma's filter: at most `EXACT_CAP` are
ranked exactly, the ``where`` checked on the best; more go to HNSW restricted to them.

The store embeds texts with its own `Embedder` and hands Chroma the vectors; each
collection also records the embedder (``hub_embedder`` metadata, and
`chroma_embedding_function` in its configuration) so a store reopened in a fresh
process, or a plain Chroma client, embeds queries the same way, and a store with a
different embedder is refused instead of comparing unrelated vectors.

chromadb is imported on first use (its import is slow), and every Chroma call
runs in a worker thread. On a server the hub still embeds every text itself (the server
is handed vectors, so it never needs, or downloads, a model).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import importlib
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

from ._embedder import Embedder, default_embedder, embedder_from_name
from ._vector import (
    MetadataValue,
    VectorHit,
    VectorRecord,
    VectorStore,
    VectorStoreError,
    check_delete_args,
    check_ids,
    check_index_name,
    check_k,
    check_limit,
    check_records,
    check_where,
    metadata_matches,
)

if TYPE_CHECKING:
    import numpy as np
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection

__all__ = [
    "EXACT_CAP",
    "ChromaVectorStore",
    "chroma_collection_name",
    "chroma_embedding_function",
    "parse_chroma_url",
]

_T = TypeVar("_T")

#: Name under which the embedding function is registered with chromadb.
EMBEDDING_FUNCTION_NAME = "hub-embedder"
_INDEX_KEY = "hub_index"
_EMBEDDER_KEY = "hub_embedder"
# Names Chroma accepts as they are (3-512 chars of [A-Za-z0-9_-], alphanumeric at both
# ends); dots are left out so "..", and IPv4-like names, never pass through.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{1,200}[A-Za-z0-9]")
_MAPPED_PREFIX = "hub-"
#: A filtered query that selects at most this many records is ranked exactly (numpy over
#: the records' vectors); above it, Chroma's HNSW search, which costs less from about 600
#: matches on (bench/recall_cap.py; the docs' benchmark history, "Episodic memory").
EXACT_CAP = 500


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


def parse_chroma_url(url: str) -> tuple[str, int, bool]:
    """``http(s)://host[:port]`` → (host, port, ssl) as ``chromadb.HttpClient`` takes them.

    Raises:
        ValueError: naming what is wrong with the URL.
    """
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"must be http://HOST:PORT or https://HOST:PORT, not {url!r}")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError(f"must be the server's root (http://HOST:PORT), without a path: {url!r}")
    try:
        port = parts.port
    except ValueError as e:
        raise ValueError(f"has a bad port: {url!r}") from e
    ssl = parts.scheme == "https"
    return parts.hostname, port or (443 if ssl else 8000), ssl


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
    """Indexes as Chroma collections in a directory, or on a Chroma server; survives restarts.

    Opens on first use (or on `open` / ``async with``). A directory is not safe against
    other processes writing it at once; a server is (several workers share it).

    Args:
        path: The store's directory (created if missing).
        url: Instead of ``path``: a Chroma server, ``http://HOST:PORT`` (``chroma run``).
        embedder: Embeds texts and queries; default `default_embedder()` (MiniLM).
        exact_cap: A query with a ``where`` that selects at most this many records is
            ranked exactly; 0 sends every query to HNSW.

    Raises:
        VectorStoreError: (from any method) the directory cannot be opened as a
            Chroma store, the server cannot be reached, or Chroma fails; the message
            names the path or the URL.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        url: str | None = None,
        embedder: Embedder | None = None,
        exact_cap: int = EXACT_CAP,
    ) -> None:
        if (path is None) == (url is None):
            raise ValueError("ChromaVectorStore takes a directory (path) or a server (url=), one of them")
        if exact_cap < 0:
            raise ValueError(f"exact_cap must be 0 or more, not {exact_cap}")
        self.exact_cap = exact_cap
        self.path = Path(path) if path is not None else None
        self.url = url
        if url is not None:
            parse_chroma_url(url)  # a bad URL is an error now, not at first use
        self.location = url if url is not None else str(path)
        self.embedder = embedder if embedder is not None else default_embedder()
        self._client: ClientAPI | None = None
        self._collections: dict[str, Collection] = {}
        self._lock = asyncio.Lock()
        self._closed = False

    async def open(self) -> None:
        await self._get_client()

    async def create_index(self, name: str) -> None:
        await self._get_collection(name, create=True)

    async def delete_index(self, name: str) -> None:
        client = await self._get_client()
        chroma_name = chroma_collection_name(name)
        self._collections.pop(name, None)

        def drop() -> None:
            from chromadb.errors import NotFoundError

            try:
                client.delete_collection(chroma_name)
            except NotFoundError:
                pass

        await self._call(drop, f"deleting index {name!r}")

    async def upsert(self, index: str, records: Sequence[VectorRecord]) -> None:
        records = check_records(records)
        collection = await self._get_collection(index, create=True)
        if not records:
            return
        assert collection is not None
        vectors = await asyncio.to_thread(self.embedder.embed, [r.text for r in records])
        batch = self._max_batch()

        def write() -> None:
            for start in range(0, len(records), batch):
                chunk = records[start : start + batch]
                ids = [r.id for r in chunk]
                # Chroma merges metadata on upsert; replacing means nulling old keys.
                old = collection.get(ids=ids, include=["metadatas"])
                old_keys = {i: set(m or ()) for i, m in zip(old["ids"], old["metadatas"] or [], strict=False)}
                metadatas: list[dict[str, Any] | None] = []
                for r in chunk:
                    meta: dict[str, Any] = {k: None for k in old_keys.get(r.id, ())}
                    meta.update(r.metadata)
                    metadatas.append(meta or None)
                collection.upsert(
                    ids=ids,
                    embeddings=vectors[start : start + batch],
                    documents=[r.text for r in chunk],
                    metadatas=metadatas,  # type: ignore[arg-type]
                )

        await self._call(write, f"writing to index {index!r}")

    async def query(
        self,
        index: str,
        text: str,
        *,
        k: int = 5,
        where: dict[str, MetadataValue] | None = None,
        min_score: float | None = None,
        ids: Sequence[str] | None = None,
    ) -> list[VectorHit]:
        check_k(k)
        where = check_where(where)
        id_set = check_ids(ids)
        collection = await self._get_collection(index, create=False)
        if collection is None or id_set == set():
            return []
        id_list = None if id_set is None else sorted(id_set)
        chroma_where = _chroma_where(where)
        doing = f"querying index {index!r}"
        embedding = asyncio.to_thread(self.embedder.embed, [text])
        found: _Matches | None = None
        exact = self.exact_cap and _is_cosine(collection)
        if exact and id_list is not None and len(id_list) <= self.exact_cap:
            by_id = id_list
            # read by id (an indexed lookup), not through Chroma's where filter (a scan of
            # every record's metadata); the where is checked on the few that rank
            found, vectors = await asyncio.gather(self._call(lambda: _read_ids(collection, by_id), doing), embedding)
        elif exact and id_list is None and chroma_where is not None:
            exact_where, cap = chroma_where, self.exact_cap
            # the matches are read while the text is embedded: neither needs the other
            found, vectors = await asyncio.gather(
                self._call(lambda: _read_matches(collection, exact_where, cap), doing), embedding
            )
        else:
            vectors = await embedding
        vector = vectors[0]
        if found is not None:
            matches = found
            return await self._call(
                lambda: _rank_exactly(
                    collection,
                    matches,
                    vector,
                    k=k,
                    min_score=min_score,
                    guard=where if id_list is not None else None,
                ),
                doing,
            )

        def search() -> list[VectorHit]:
            result = collection.query(
                query_embeddings=[vector],
                ids=id_list,
                n_results=k,
                where=chroma_where,
                include=["documents", "metadatas", "distances"],
            )
            hits = [
                _hit(*row)
                for row in zip(
                    result["ids"][0],
                    (result["documents"] or [[]])[0],
                    (result["metadatas"] or [[]])[0],
                    (result["distances"] or [[]])[0],
                    strict=False,
                )
            ]
            return [h for h in hits if min_score is None or h.score >= min_score]

        return await self._call(search, doing)

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

        def remove() -> int:
            # Chroma's own delete reports requested ids, not removed ones: look first.
            found = collection.get(ids=id_list, where=_chroma_where(where), include=[])["ids"]
            batch = self._max_batch()
            for start in range(0, len(found), batch):
                collection.delete(ids=found[start : start + batch])
            return len(found)

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
            return collection.get(where=_chroma_where(where), limit=limit, include=["documents", "metadatas"])

        result = await self._call(read, f"reading index {index!r}")
        return [
            VectorRecord(id_, doc or "", dict(meta or {}))
            for id_, doc, meta in zip(result["ids"], result["documents"] or [], result["metadatas"] or [], strict=False)
        ]

    async def close(self) -> None:
        async with self._lock:
            self._closed = True
            client, self._client = self._client, None
            self._collections.clear()
            close = getattr(client, "close", None)  # ClientAPI lacks the close() its Client has
            if close is not None:
                await asyncio.to_thread(close)

    # -- internals ---------------------------------------------------------------

    async def _get_client(self) -> ClientAPI:
        if self._client is not None:
            return self._client
        async with self._lock:
            if self._closed:
                raise VectorStoreError(self.location, "store is closed")
            if self._client is None:
                _import_shared_modules()
                self._client = await asyncio.to_thread(self._open_client)
            return self._client

    def _open_client(self) -> ClientAPI:
        if self.url is not None:
            return self._open_server(self.url)
        assert self.path is not None
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
            client = chromadb.PersistentClient(path=str(self.path), settings=Settings(anonymized_telemetry=False))
            client.heartbeat()
        except Exception as e:  # sqlite, Rust and config errors all mean "cannot open"
            raise VectorStoreError(self.path, f"cannot open Chroma store: {e}") from e
        return client

    def _open_server(self, url: str) -> ClientAPI:
        import chromadb
        from chromadb.config import Settings

        host, port, ssl = parse_chroma_url(url)
        chroma_embedding_function()  # registered before any collection is opened
        try:
            client = chromadb.HttpClient(host=host, port=port, ssl=ssl, settings=Settings(anonymized_telemetry=False))
            client.heartbeat()
        except Exception as e:  # refused, timed out, not a Chroma server
            raise VectorStoreError(url, f"cannot reach the Chroma server: {e}") from e
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
                self.location,
                f"index {index!r} holds vectors of embedder {stored!r}, "
                f"but this store embeds with {self.embedder.name!r}",
            )
        self._collections[index] = collection
        return collection

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
            raise VectorStoreError(self.location, "store is closed")
        try:
            return await asyncio.to_thread(fn)
        except VectorStoreError:
            raise
        except Exception as e:  # Chroma raises ChromaError, ValueError and Rust errors alike
            raise VectorStoreError(self.location, f"{doing}: {e}") from e


def _import_shared_modules() -> None:
    """Import, on the calling (event loop's) thread, the modules chromadb shares with the
    rest of the process, before chromadb is imported in a worker thread: two threads
    importing httpx at once can hand one of them the module half loaded (``partially
    initialized module 'httpx'``), failing whichever run builds an HTTP client then."""
    for name in _SHARED_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:  # chromadb's own import names what is missing
            pass


#: Modules both chromadb and the hub's clients (or an extension's) import.
_SHARED_MODULES = ("httpx",)


def _is_cosine(collection: Collection) -> bool:
    """Whether the collection's HNSW space is cosine (the store creates them so; a
    collection made elsewhere may differ, and then only Chroma's own distances hold)."""
    hnsw = (collection.configuration_json or {}).get("hnsw") or {}
    space = hnsw.get("space") or (collection.metadata or {}).get("hnsw:space")
    return space == "cosine"


#: Ids and vectors of a query's candidates, ranked by `_rank_exactly`.
_Matches = tuple[list[str], Any]


def _read_ids(collection: Collection, ids: list[str]) -> _Matches:
    """The vectors of the records of `ids` that exist: a lookup by id, without their
    metadata (reading the metadata too costs more than twice as much at 100,000 episodes); a
    where is checked by `_rank_exactly` on the few that rank."""
    found = collection.get(ids=ids, include=["embeddings"])
    return found["ids"], found["embeddings"]


def _read_matches(collection: Collection, where: dict[str, Any], cap: int) -> _Matches | None:
    """The ids and vectors of the records matching `where`; None when more than `cap`
    match (Chroma's HNSW search is then cheaper than reading and ranking them all).

    Only the vectors: the documents and metadata of every match would cost about twice
    as much to read, and only the few that rank need them (`_rank_exactly`)."""
    found = collection.get(where=where, limit=cap + 1, include=["embeddings"])
    return None if len(found["ids"]) > cap else (found["ids"], found["embeddings"])


def _rank_exactly(
    collection: Collection,
    found: _Matches,
    vector: np.ndarray,
    *,
    k: int,
    min_score: float | None,
    guard: dict[str, MetadataValue] | None = None,
) -> list[VectorHit]:
    """The `k` of `found` closest to `vector`, ranked exactly by cosine distance as
    Chroma's HNSW computes it (1 - the dot product of the normalised vectors, in float32),
    with their documents and metadata. With a `guard`, a candidate whose metadata does not
    match it is skipped for the next best (they are read k at a time)."""
    import numpy as np  # on first use, not at start (about 11 MB)

    ids, embeddings = found
    if not ids:
        return []
    matrix = np.asarray(embeddings, dtype=np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True) + np.float32(1e-30)  # as hnswlib does
    query = np.asarray(vector, dtype=np.float32)
    query = query / (np.linalg.norm(query) + np.float32(1e-30))
    distances = np.float32(1.0) - matrix @ query
    ranked = [
        (ids[i], float(distances[i]))
        for i in np.argsort(distances, kind="stable")
        if min_score is None or 1.0 - float(distances[i]) >= min_score
    ]
    hits: list[VectorHit] = []
    for start in range(0, len(ranked), k):
        best = ranked[start : start + k]
        rows = collection.get(ids=[id_ for id_, _ in best], include=["documents", "metadatas"])
        documents: list[Any] = rows["documents"] or [None] * len(rows["ids"])
        metadatas: list[Any] = rows["metadatas"] or [None] * len(rows["ids"])
        stored = {id_: (doc, meta) for id_, doc, meta in zip(rows["ids"], documents, metadatas, strict=True)}
        # a record deleted between the two reads is left out
        hits += [
            _hit(id_, *stored[id_], distance)
            for id_, distance in best
            if id_ in stored and (guard is None or metadata_matches(stored[id_][1] or {}, guard))
        ]
        if len(hits) >= k or guard is None:
            break
    return hits[:k]


def _hit(id_: str, document: str | None, metadata: Any, distance: float) -> VectorHit:
    # Chroma's cosine distance is 1 - similarity, so a hit's score is 1 - distance
    return VectorHit(id_, document or "", dict(metadata or {}), 1.0 - float(distance))


def _chroma_where(where: dict[str, MetadataValue] | None) -> dict[str, Any] | None:
    if not where:
        return None
    clauses = [{key: {"$eq": value}} for key, value in where.items()]
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}
