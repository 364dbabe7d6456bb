"""What a filtered recall costs in raw Chroma, by how many records the filter selects: the
reads of the exact path against Chroma's HNSW search, to choose `EXACT_CAP` and the reads.

    python bench/recall_cap.py                 # 100,000 episodes + conversations of 250 to 2,000
    python bench/recall_cap.py --repeat 20

The store is `recall_bench.py`'s corpus (its cached MiniLM vectors: run that first), one
collection as `ChromaVectorStore` makes it, plus six conversations of 250, 500, 750, 1,000,
1,500 and 2,000 episodes copied from it. Each filtered query is given a random unit vector
(the cost of a search does not depend on it). Shapes, all with ``where={"context": ...}``:

- one get: `get` of the matches' vectors, documents and metadata, ranked with numpy;
- two gets: `get` of the matches' vectors only, ranked, then `get(ids=...)` of the k best's
  documents and metadata (what `ChromaVectorStore.query` does);
- ids first: `get` of the matches' ids, then their vectors by id, then the k best;
- HNSW: Chroma's `query` with the filter (what it did before).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from recall_bench import CORPUS, key_vectors, make_episodes  # noqa: E402
from vector_bench import CachedEmbedder  # noqa: E402

from hub.memory import INDEX, ChromaVectorStore, MiniLMEmbedder, VectorRecord, chroma_collection_name

BIG = [250, 500, 750, 1_000, 1_500, 2_000]
K = 3
LIMIT = 5_001  # above every conversation here: each shape reads them all


async def fill(path: Path) -> float:
    embedder = MiniLMEmbedder()
    episodes = make_episodes(CORPUS)
    keys = list(dict.fromkeys(e.key for e in episodes))
    vectors, _ = key_vectors(embedder, keys)
    records = [e.to_record() for e in episodes]
    rng = np.random.default_rng(3)
    for size in BIG:
        for j, i in enumerate(rng.choice(len(episodes), size, replace=False)):
            r = records[int(i)]
            records.append(VectorRecord(f"big{size}-{j}", r.text, {**r.metadata, "context": f"big:{size}"}))
    started = time.perf_counter()
    async with ChromaVectorStore(path, embedder=CachedEmbedder(embedder, keys, vectors)) as store:
        for start in range(0, len(records), 2_000):
            await store.upsert(INDEX, records[start : start + 2_000])
    return time.perf_counter() - started


def _p(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))]


def measure(path: Path, repeat: int) -> None:
    import chromadb
    from chromadb.config import Settings

    client = chromadb.PersistentClient(str(path), settings=Settings(anonymized_telemetry=False))
    col = client.get_collection(chroma_collection_name(INDEX))
    rng = np.random.default_rng(2)

    def unit() -> np.ndarray:
        v = rng.standard_normal(384).astype(np.float32)
        return v / np.linalg.norm(v)

    def best(ids: list[str], embeddings: Any, q: np.ndarray) -> list[str]:
        m = np.asarray(embeddings, dtype=np.float32)
        m /= np.linalg.norm(m, axis=1, keepdims=True)
        return [ids[i] for i in np.argsort(1 - m @ q, kind="stable")[:K]]

    def one_get(w: dict[str, Any], q: np.ndarray) -> None:
        f = col.get(where=w, limit=LIMIT, include=["embeddings", "documents", "metadatas"])
        best(f["ids"], f["embeddings"], q)

    def two_gets(w: dict[str, Any], q: np.ndarray) -> None:
        f = col.get(where=w, limit=LIMIT, include=["embeddings"])
        col.get(ids=best(f["ids"], f["embeddings"], q), include=["documents", "metadatas"])

    def ids_first(w: dict[str, Any], q: np.ndarray) -> None:
        ids = col.get(where=w, limit=LIMIT, include=[])["ids"]
        f = col.get(ids=ids, include=["embeddings"])
        col.get(ids=best(f["ids"], f["embeddings"], q), include=["documents", "metadatas"])

    def hnsw(w: dict[str, Any], q: np.ndarray) -> None:
        col.query(query_embeddings=[q], n_results=K, where=w, include=["documents", "metadatas", "distances"])

    col.query(query_embeddings=[unit()], n_results=K)  # loads the index
    shapes: list[tuple[str, Callable[[dict[str, Any], np.ndarray], None]]] = [
        ("one get", one_get),
        ("two gets", two_gets),
        ("ids first", ids_first),
        ("HNSW", hnsw),
    ]
    groups = [("~100 (real)", [f"telegram:chat:{i}" for i in rng.choice(1_000, repeat * 2, replace=False)])]
    groups += [(f"{size:,}", [f"big:{size}"] * repeat) for size in BIG]
    print("ms, p50 / p99, per filtered query (no embedding)")
    print(f"{'matches':<12}" + "".join(f"{name:>18}" for name, _ in shapes))
    for label, contexts in groups:
        cells = []
        for _, shape in shapes:
            latencies = []
            for context in contexts:
                where, q = {"context": {"$eq": context}}, unit()
                t0 = time.perf_counter()
                shape(where, q)
                latencies.append((time.perf_counter() - t0) * 1000)
            cells.append(f"{_p(latencies, 0.5):7.1f} / {_p(latencies, 0.99):<7.1f}")
        print(f"{label:<12}" + "".join(f"{c:>18}" for c in cells), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15, help="queries per conversation size")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="recall-cap-") as tmp:
        path = Path(tmp) / "chroma"
        print(f"filled in {asyncio.run(fill(path)):.0f} s")
        measure(path, args.repeat)


if __name__ == "__main__":
    main()
