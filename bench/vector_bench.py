"""Vector store benchmark: embedding throughput, upsert time, query p50/p99.

    python bench/vector_bench.py --records 10000 --queries 200 [--embedder hash]

Texts are embedded once (that is the throughput figure); the stores then get those
vectors from a cache, so upsert times measure the store, and query times include
embedding the query with the real embedder, as a recall does.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from collections.abc import Sequence

import numpy as np

from hub.memory import Embedder, HashEmbedder, InMemoryVectorStore, MiniLMEmbedder, VectorRecord, VectorStore

WORDS = (
    "weather forecast rain sunny city river market price team match goal recipe cook "
    "bread garden tomato tax deadline train ticket music concert movie review phone "
    "battery server outage deploy release bug user account password meeting tomorrow"
).split()


class CachedEmbedder(Embedder):
    """Serves the corpus's precomputed vectors; embeds anything else afresh."""

    def __init__(self, inner: Embedder, texts: Sequence[str], vectors: np.ndarray) -> None:
        self.inner, self.dim = inner, inner.dim
        self.cache = dict(zip(texts, vectors, strict=True))

    @property
    def name(self) -> str:
        return self.inner.name

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if texts and all(t in self.cache for t in texts):
            return np.stack([self.cache[t] for t in texts])
        return self.inner.embed(texts)  # queries: never cached, so every store pays alike


def _sentences(n: int, rng: random.Random) -> list[str]:
    return [f"{i} " + " ".join(rng.choices(WORDS, k=rng.randint(6, 18))) for i in range(n)]


async def _latencies(store: VectorStore, queries: list[str]) -> list[float]:
    out = []
    for q in queries:
        t0 = time.perf_counter()
        await store.query("bench", q, k=5)
        out.append((time.perf_counter() - t0) * 1000)
    return sorted(out)


def _p(latencies: list[float], q: float) -> float:
    return latencies[min(len(latencies) - 1, int(len(latencies) * q))]


async def _bench_store(
    store: VectorStore, cached: CachedEmbedder, texts: list[str], queries: list[str]
) -> dict[str, float]:
    async with store:
        started = time.perf_counter()
        for start in range(0, len(texts), 1000):
            chunk = texts[start : start + 1000]
            await store.upsert(
                "bench", [VectorRecord(str(start + i), t, {"i": start + i}) for i, t in enumerate(chunk)]
            )
        upsert_s = time.perf_counter() - started
        await store.query("bench", queries[0])  # warm
        full = await _latencies(store, queries)
        cached.cache.update(zip(queries, cached.inner.embed(queries), strict=True))
        search = await _latencies(store, queries)
        for q in queries:
            del cached.cache[q]
    return {
        "upsert_s": upsert_s,
        "p50": _p(full, 0.5),
        "p99": _p(full, 0.99),
        "search_p50": _p(search, 0.5),
        "search_p99": _p(search, 0.99),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--embedder", choices=["minilm", "hash"], default="minilm")
    parser.add_argument("--stores", default="memory,chroma")
    args = parser.parse_args()

    rng = random.Random(7)
    texts, queries = _sentences(args.records, rng), _sentences(args.queries, rng)
    inner: Embedder = MiniLMEmbedder() if args.embedder == "minilm" else HashEmbedder()
    inner.embed(["warm up"])
    started = time.perf_counter()
    vectors = await asyncio.to_thread(inner.embed, texts)
    embed_s = time.perf_counter() - started
    print(f"embedder {inner.name}: {len(texts)} texts in {embed_s:.2f} s = {len(texts) / embed_s:,.0f} texts/s")

    cached = CachedEmbedder(inner, texts, vectors)
    print("query: embed + search, as a recall does; search: query vector precomputed")
    print(f"{'store':<8} {'records':>8} {'upsert s':>9} {'query p50/p99 ms':>17} {'search p50/p99 ms':>18}")
    for name in args.stores.split(","):
        with tempfile.TemporaryDirectory(prefix="vector-bench-") as tmp:
            if name == "memory":
                store: VectorStore = InMemoryVectorStore(cached)
            else:
                from hub.memory import ChromaVectorStore

                store = ChromaVectorStore(tmp, embedder=cached)
            r = await _bench_store(store, cached, texts, queries)
        print(
            f"{name:<8} {len(texts):>8} {r['upsert_s']:>9.2f} "
            f"{r['p50']:>8.2f}/{r['p99']:<8.2f} {r['search_p50']:>9.2f}/{r['search_p99']:<8.2f}"
        )


if __name__ == "__main__":
    asyncio.run(main())
