"""The vector store seam of episodic memory, and its in-memory implementation.

A `VectorStore` keeps named indexes of `VectorRecord`s (id, text, flat metadata) and
answers similarity queries with `VectorHit`s scored by cosine similarity. The store
embeds texts itself through its `Embedder`, so callers deal only in text.

Shared contract, for every implementation (``tests/memory/test_vector_contract.py``):

- Index operations are idempotent; reading from a missing index gives an empty result
  (``[]`` or ``0``), never an error; `upsert` creates a missing index.
- `upsert` of an existing id replaces its text, metadata and vector in place; within one
  call a repeated id counts once, the last one wins.
- ``where`` is equality on metadata keys, all pairs must hold; a bool matches only a bool,
  and ints and floats compare as numbers (``1 == 1.0``).
- Metadata keys are non-empty strings not starting with ``#``, ``$`` or ``chroma:``;
  values are str, bool, int (64-bit) or finite float. Anything else is a `TypeError` or
  `ValueError` before the store is touched.
- A closed store raises `VectorStoreError`.
"""

from __future__ import annotations

import asyncio
import math
import os
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Self, TypeAlias

from ..errors import StoreError
from ._embedder import Embedder, HashEmbedder

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "InMemoryVectorStore",
    "MetadataValue",
    "VectorHit",
    "VectorRecord",
    "VectorStore",
    "VectorStoreError",
]

MetadataValue: TypeAlias = str | int | float | bool


@dataclass(slots=True)
class VectorRecord:
    """One text to remember, with flat metadata for filtering (`where`)."""

    id: str
    text: str
    metadata: dict[str, MetadataValue] = field(default_factory=dict)


@dataclass(slots=True)
class VectorHit:
    """A query result; `score` is cosine similarity in [-1, 1], higher is closer."""

    id: str
    text: str
    metadata: dict[str, MetadataValue]
    score: float


class VectorStoreError(StoreError):
    """A vector store could not be opened or used; names the store's location."""

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"vector store {self.path}: {reason}")


class VectorStore(ABC):
    """Named indexes of embedded texts. All methods are async; `close` is idempotent.

    Use as ``async with store:`` to open it eagerly (so a broken store fails at start,
    not at the first recall) and close it on exit.
    """

    async def open(self) -> None:  # noqa: B027  # optional: stores with nothing to open keep this no-op
        """Open the backing storage now instead of on first use. Idempotent.

        Raises:
            VectorStoreError: The storage cannot be opened.
        """

    @abstractmethod
    async def create_index(self, name: str) -> None:
        """Create an index; no-op if it exists."""

    @abstractmethod
    async def delete_index(self, name: str) -> None:
        """Drop an index and its records; no-op if it does not exist."""

    @abstractmethod
    async def upsert(self, index: str, records: Sequence[VectorRecord]) -> None:
        """Insert or replace records by id, creating the index if needed."""

    @abstractmethod
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
        """The (at most) `k` records closest to `text`, best first.

        Args:
            where: Metadata equalities that every hit satisfies.
            min_score: Drop hits whose cosine similarity is below it.
            ids: Only these records are candidates (ids that do not exist are ignored;
                an empty sequence gives no hits); with ``where``, both must hold.
        """

    @abstractmethod
    async def delete(
        self,
        index: str,
        *,
        ids: Sequence[str] | None = None,
        where: dict[str, MetadataValue] | None = None,
    ) -> int:
        """Remove records matching `ids` and/or `where` (both: AND); return how many.

        Raises:
            ValueError: Neither `ids` nor `where` given (use `delete_index` for all).
        """

    @abstractmethod
    async def count(self, index: str) -> int:
        """Number of records in the index (0 if it does not exist)."""

    @abstractmethod
    async def get(
        self,
        index: str,
        *,
        where: dict[str, MetadataValue] | None = None,
        limit: int | None = None,
    ) -> list[VectorRecord]:
        """Records (for hygiene and export), in insertion order; a replaced record
        keeps its place."""

    @abstractmethod
    async def close(self) -> None:
        """Release resources; later calls raise `VectorStoreError`. Idempotent."""

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


class InMemoryVectorStore(VectorStore):
    """Vectors in one numpy matrix per index; exact (brute-force) cosine search.

    For tests and small deployments; nothing survives `close`.
    """

    def __init__(self, embedder: Embedder | None = None) -> None:
        self.embedder = embedder if embedder is not None else HashEmbedder()
        self._indexes: dict[str, _MemoryIndex] = {}
        self._closed = False

    async def create_index(self, name: str) -> None:
        self._check_open()
        check_index_name(name)
        self._indexes.setdefault(name, _MemoryIndex(self.embedder.dim))

    async def delete_index(self, name: str) -> None:
        self._check_open()
        check_index_name(name)
        self._indexes.pop(name, None)

    async def upsert(self, index: str, records: Sequence[VectorRecord]) -> None:
        self._check_open()
        check_index_name(index)
        records = check_records(records)
        if not records:
            return
        vectors = await asyncio.to_thread(self.embedder.embed, [r.text for r in records])
        self._check_open()  # closed while embedding
        target = self._indexes.setdefault(index, _MemoryIndex(self.embedder.dim))
        for record, vector in zip(records, vectors, strict=True):
            target.put(record, vector)

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
        self._check_open()
        check_k(k)
        where = check_where(where)
        id_set = check_ids(ids)
        target = self._indexes.get(index)
        if target is None or not target.rows or id_set == set():
            return []
        vector = (await asyncio.to_thread(self.embedder.embed, [text]))[0]
        return target.search(vector, k=k, where=where, min_score=min_score, ids=id_set)

    async def delete(
        self,
        index: str,
        *,
        ids: Sequence[str] | None = None,
        where: dict[str, MetadataValue] | None = None,
    ) -> int:
        self._check_open()
        ids, where = check_delete_args(ids, where)
        target = self._indexes.get(index)
        if target is None:
            return 0
        return target.remove(ids, where)

    async def count(self, index: str) -> int:
        self._check_open()
        target = self._indexes.get(index)
        return 0 if target is None else len(target.rows)

    async def get(
        self,
        index: str,
        *,
        where: dict[str, MetadataValue] | None = None,
        limit: int | None = None,
    ) -> list[VectorRecord]:
        self._check_open()
        where = check_where(where)
        check_limit(limit)
        target = self._indexes.get(index)
        if target is None:
            return []
        out: list[VectorRecord] = []
        for row in target.rows.values():
            if limit is not None and len(out) >= limit:
                break
            if where is None or metadata_matches(row.metadata, where):
                out.append(VectorRecord(row.id, row.text, dict(row.metadata)))
        return out

    async def close(self) -> None:
        self._closed = True
        self._indexes.clear()

    def _check_open(self) -> None:
        if self._closed:
            raise VectorStoreError("<memory>", "store is closed")


@dataclass(slots=True)
class _Row:
    id: str
    text: str
    metadata: dict[str, MetadataValue]
    vector: np.ndarray


class _MemoryIndex:
    """Rows in insertion order; the matrix is rebuilt lazily after writes, so a burst
    of upserts costs one stack, not one per record."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.rows: dict[str, _Row] = {}
        self._matrix: np.ndarray | None = None
        self._order: list[_Row] = []

    def put(self, record: VectorRecord, vector: np.ndarray) -> None:
        self.rows[record.id] = _Row(record.id, record.text, dict(record.metadata), vector)
        self._matrix = None

    def remove(self, ids: Sequence[str] | None, where: dict[str, MetadataValue] | None) -> int:
        candidates = list(self.rows) if ids is None else [i for i in ids if i in self.rows]
        doomed = [i for i in candidates if where is None or metadata_matches(self.rows[i].metadata, where)]
        for i in doomed:
            del self.rows[i]
        if doomed:
            self._matrix = None
        return len(doomed)

    def search(
        self,
        vector: np.ndarray,
        *,
        k: int,
        where: dict[str, MetadataValue] | None,
        min_score: float | None,
        ids: set[str] | None = None,
    ) -> list[VectorHit]:
        import numpy as np  # on first use, not at start (about 11 MB)

        if self._matrix is None:
            self._order = list(self.rows.values())
            self._matrix = np.stack([row.vector for row in self._order]).astype(np.float32)
        scores = self._matrix @ vector.astype(np.float32)
        if where is not None or ids is not None:
            mask = np.fromiter(
                (
                    (ids is None or row.id in ids) and (where is None or metadata_matches(row.metadata, where))
                    for row in self._order
                ),
                dtype=bool,
                count=len(self._order),
            )
            scores = np.where(mask, scores, -np.inf)
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
        top = top[np.argsort(-scores[top], kind="stable")]
        hits = []
        for i in top:
            score = float(scores[i])
            if score == -np.inf or (min_score is not None and score < min_score):
                continue
            row = self._order[i]
            hits.append(VectorHit(row.id, row.text, dict(row.metadata), score))
        return hits


# Validation shared by every implementation, so they reject the same inputs alike.

_RESERVED_KEY_PREFIXES = ("#", "$", "chroma:")
_INT64 = (-(2**63), 2**63 - 1)


def check_records(records: Sequence[VectorRecord]) -> list[VectorRecord]:
    """Validate records; a repeated id keeps its last record (at its first place).

    Raises:
        TypeError, ValueError: A record has a bad id, text or metadata.
    """
    if isinstance(records, VectorRecord):
        raise TypeError("upsert() takes a sequence of VectorRecord, not one record")
    unique: dict[str, VectorRecord] = {}
    for record in records:
        if not isinstance(record, VectorRecord):
            raise TypeError(f"expected VectorRecord, got {type(record).__name__}")
        if not isinstance(record.id, str) or not record.id:
            raise ValueError(f"record id must be a non-empty str, got {record.id!r}")
        if not isinstance(record.text, str):
            raise TypeError(f"record {record.id!r}: text must be str")
        _check_metadata(record.metadata, f"record {record.id!r}")
        unique[record.id] = record
    return list(unique.values())


def check_where(where: Mapping[str, MetadataValue] | None) -> dict[str, MetadataValue] | None:
    """Validate a `where` filter; an empty one means no filter (None)."""
    if where is None or not where:
        return None
    _check_metadata(where, "where")
    return dict(where)


def check_ids(ids: Sequence[str] | None) -> set[str] | None:
    """Validate a query's `ids`: None (no restriction) or a sequence of str."""
    if ids is None:
        return None
    if isinstance(ids, str):
        raise TypeError("ids must be a sequence of str, not one str")
    out = set(ids)
    for id_ in out:
        if not isinstance(id_, str):
            raise TypeError(f"ids must be str, got {type(id_).__name__}")
    return out


def check_delete_args(
    ids: Sequence[str] | None, where: Mapping[str, MetadataValue] | None
) -> tuple[list[str] | None, dict[str, MetadataValue] | None]:
    if isinstance(ids, str):
        raise TypeError("ids must be a sequence of str, not one str")
    if ids is None and not where:
        raise ValueError("delete() needs ids or where; use delete_index() to drop all")
    return (None if ids is None else list(ids)), check_where(where)


def metadata_matches(metadata: Mapping[str, MetadataValue], where: Mapping[str, MetadataValue]) -> bool:
    """Equality on every pair of `where`; bools match only bools (as Chroma does)."""
    for key, want in where.items():
        if key not in metadata:
            return False
        have = metadata[key]
        if isinstance(have, bool) != isinstance(want, bool) or have != want:
            return False
    return True


def _check_metadata(metadata: Mapping[str, object], what: str) -> None:
    if not isinstance(metadata, Mapping):
        raise TypeError(f"{what}: metadata must be a dict, got {type(metadata).__name__}")
    for key, value in metadata.items():
        if not isinstance(key, str) or not key or key.startswith(_RESERVED_KEY_PREFIXES):
            raise ValueError(
                f"{what}: metadata key {key!r} must be a non-empty str not starting "
                f"with {', '.join(_RESERVED_KEY_PREFIXES)}"
            )
        if isinstance(value, bool) or isinstance(value, str):
            continue
        if isinstance(value, int):
            if not _INT64[0] <= value <= _INT64[1]:
                raise ValueError(f"{what}: metadata {key!r}: int {value} exceeds 64 bits")
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise ValueError(f"{what}: metadata {key!r}: float must be finite, got {value}")
        else:
            raise TypeError(f"{what}: metadata {key!r} must be str, int, float or bool, got {type(value).__name__}")


def check_index_name(name: str) -> None:
    if not isinstance(name, str) or not name:
        raise ValueError(f"index name must be a non-empty str, got {name!r}")


def check_k(k: int) -> None:
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")


def check_limit(limit: int | None) -> None:
    if limit is not None and (not isinstance(limit, int) or limit < 0):
        raise ValueError(f"limit must be a non-negative int or None, got {limit!r}")
