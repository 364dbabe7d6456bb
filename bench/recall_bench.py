"""Episodic recall benchmark: recall p50/p99 at 10,000 and 100,000 episodes, embedding throughput.

    python bench/recall_bench.py                      # 10k and 100k, Chroma and in-memory
    python bench/recall_bench.py --sizes 10000 --queries 100 --stores chroma

Recall is `EpisodicMemory.recall` on a started hub, as a run's before-run hook calls it:
embed the new input with MiniLM (never cached), query the store (k=3, min_score 0.35),
filtered to the conversation (its episodes read by id: the hub's index of each
conversation's episode ids, in its SQLite memory store), or global. The store is filled
before the hub starts, which indexes the ids once as it opens the store ("open s": the
same backfill as for any store written before the index). Episodes are synthetic conversations on a dozen
topics across 1,000 conversations; what is embedded is each episode's key (its input and
answer), as the hub does.

Embedding 100,000 keys with MiniLM takes minutes on 2 cores, so the vectors are computed
once in batches of 2,000 and cached in ``bench/results/`` (not committed); the time it took
is printed (and kept in the cache's JSON). Stores get the cached vectors on upsert; every
query is embedded afresh.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hub import Hub, HubConfig, ScriptedModel  # noqa: E402
from hub.memory import (
    ID_PREFIX,
    INDEX,
    Episode,
    EpisodicMemory,
    InMemoryVectorStore,
    MiniLMEmbedder,
    VectorStore,
    prune_store,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from vector_bench import CachedEmbedder as Cached  # noqa: E402  # precomputed vectors, queries embedded afresh

RESULTS = Path(__file__).resolve().parent / "results"
CONVERSATIONS = 1_000
CORPUS = 100_000
CITIES = "New York,Paris,Berlin,Tokyo,Lagos,Lima,Oslo,Madrid,Seoul,Cairo,Austin,Denver".split(",")
THINGS = "bread,pasta,curry,soup,salad,tacos,pancakes,risotto,dumplings,pie".split(",")
SERVICES = "api,billing,search,auth,gateway,worker,database,frontend".split(",")
TOPICS: list[tuple[str, str]] = [
    ("What's the weather in {city}?", "It is {n}°F and {sky} in {city}."),
    ("Will it rain in {city} tomorrow?", "Rain is {p}% likely in {city} tomorrow."),
    ("How do I make {thing}?", "For {thing} you need {n} minutes and a hot pan."),
    ("Suggest a wine for {thing}.", "A light red goes well with {thing}."),
    ("The {svc} deploy failed again", "The {svc} release {n} failed its health check; I rolled it back."),
    ("Is the {svc} service down?", "The {svc} service answers in {n} ms; it is up."),
    ("Book a train from {city} to {city2}", "Booked: {city} to {city2}, {n} euros."),
    ("Remind me to call {name} at {n}", "I will remind you to call {name} at {n}."),
    ("What did {name} say about the budget?", "{name} wants the budget cut by {p}%."),
    ("Recommend a movie like {movie}", "If you liked {movie}, try its sequel."),
    ("Translate 'good morning' to {lang}", "In {lang}: it depends on the region."),
    ("What's my account balance?", "Your balance is {n} dollars."),
]
NAMES = "Ann,Bob,Chen,Dara,Eve,Femi,Gus,Hana,Ivo,June".split(",")
MOVIES = "Alien,Heat,Up,Jaws,Arrival,Amelie,Ran,Coco".split(",")
LANGS = "French,German,Japanese,Yoruba,Spanish,Korean".split(",")
QUERIES = [
    "forecast for {city}",
    "do I need an umbrella in {city}?",
    "a recipe for {thing} please",
    "is {svc} having an outage?",
    "train tickets to {city}",
    "what does {name} think of the budget?",
    "a film similar to {movie}",
    "how much money is in my account?",
    "how do I reset my router password?",
    "tell me a joke about cats",
]


def _fill(template: str, rng: random.Random) -> str:
    return template.format(
        city=rng.choice(CITIES),
        city2=rng.choice(CITIES),
        thing=rng.choice(THINGS),
        svc=rng.choice(SERVICES),
        name=rng.choice(NAMES),
        movie=rng.choice(MOVIES),
        lang=rng.choice(LANGS),
        n=rng.randint(1, 999),
        p=rng.randint(1, 99),
        sky=rng.choice(["sunny", "cloudy", "foggy", "clear"]),
    )


def make_episodes(n: int, *, seed: int = 7) -> list[Episode]:
    rng = random.Random(seed)
    now = time.time()
    out = []
    for i in range(n):
        ask, answer = rng.choice(TOPICS)
        state = rng.getstate()
        prompt = _fill(ask, rng)
        rng.setstate(state)  # the answer names the same city, thing, ...
        completion = _fill(answer, rng)
        conv = rng.randrange(CONVERSATIONS)
        digest = f"User u{conv % 500} asked: {prompt} / Agent answered: {completion} / Ended: completed"
        out.append(
            Episode(
                run_id=f"run{i:06d}",
                context=f"telegram:chat:{conv}",
                user=f"u{conv % 500}",
                time=now - (n - i),
                state="completed",
                prompt=prompt,
                completion=completion,
                digest=digest,
                input_ids=(f"in{i:06d}",),
            )
        )
    return out


def key_vectors(embedder: MiniLMEmbedder, keys: list[str], *, batch: int = 2_000) -> tuple[np.ndarray, float]:
    """MiniLM vectors of ``keys``, computed in batches that are cached in ``bench/results/``
    (an interrupted run resumes); returns them and the seconds spent computing them."""
    folder = RESULTS / f"recall_vectors_{len(keys)}"
    folder.mkdir(parents=True, exist_ok=True)
    meta_path = folder / "meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    if meta.get("first") != keys[0] or meta.get("last") != keys[-1]:
        for old in folder.glob("*.npy"):
            old.unlink()
        meta = {"first": keys[0], "last": keys[-1], "seconds": 0.0}
    parts = []
    for start in range(0, len(keys), batch):
        path = folder / f"{start:07d}.npy"
        if not path.exists():
            t0 = time.perf_counter()
            np.save(path, embedder.embed(keys[start : start + batch]))
            meta["seconds"] += time.perf_counter() - t0
            meta_path.write_text(json.dumps(meta))
            done = min(start + batch, len(keys))
            print(f"  embedding keys: {done:,}/{len(keys):,} ({meta['seconds']:.0f} s so far)", flush=True)
        parts.append(np.load(path))
    return np.concatenate(parts), meta["seconds"]


def _p(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))]


async def bench_store(
    kind: str, episodes: list[Episode], cached: Cached, queries: list[tuple[str, str]]
) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="recall-bench-") as tmp:
        if kind == "chroma":
            from hub.memory import ChromaVectorStore

            store: VectorStore = ChromaVectorStore(Path(tmp) / "chroma", embedder=cached)
        else:
            store = InMemoryVectorStore(cached)
        cfg = HubConfig()
        cfg.hub.data_dir = cfg.hub.contexts_dir = tmp
        cfg.memory.prune_every = 0
        cfg.memory.retention_days = cfg.memory.max_episodes = 0  # the start's prune keeps all
        hub = Hub(cfg, model=ScriptedModel([]), load_extensions=False)
        memory = hub.episodes
        assert isinstance(memory, EpisodicMemory)
        memory.store = store
        # filled before the hub starts, so the start indexes the episodes' ids as it does
        # for any store written before the index (EpisodicMemory._open's backfill)
        started = time.perf_counter()
        for start in range(0, len(episodes), 2_000):
            await store.upsert(INDEX, [e.to_record() for e in episodes[start : start + 2_000]])
        fill_s = time.perf_counter() - started
        async with hub:
            started = time.perf_counter()
            await memory.recall("warm up", context="telegram:chat:0")  # waits for the opening
            results: dict[str, float] = {"fill_s": fill_s, "open_s": time.perf_counter() - started}
            indexed = len(await hub.memory.keys(ID_PREFIX)) - 1  # less the complete mark
            assert indexed == len(episodes), f"{indexed:,} ids indexed of {len(episodes):,} episodes"
            for mode in ("context", "global"):
                memory.config.global_recall = mode == "global"
                latencies, found = [], 0
                for query, context in queries:
                    t0 = time.perf_counter()
                    hits = await memory.recall(query, context=context)
                    latencies.append((time.perf_counter() - t0) * 1000)
                    found += bool(hits)
                results[f"{mode}_p50"] = _p(latencies, 0.5)
                results[f"{mode}_p99"] = _p(latencies, 0.99)
                results[f"{mode}_found"] = found / len(queries)
            started = time.perf_counter()
            cfg.memory.max_episodes = len(episodes) + 1
            await prune_store(store, cfg.memory)  # a full scan that deletes nothing
            results["prune_s"] = time.perf_counter() - started
            if kind == "chroma":
                files = [p for p in Path(tmp, "chroma").rglob("*") if p.is_file()]
                results["disk_mb"] = sum(p.stat().st_size for p in files) / 1e6
    return results


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--stores", default="chroma,memory")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    embedder = MiniLMEmbedder()
    embedder.embed(["warm up"])
    # one corpus for every size (the first N episodes), so its vectors are computed once
    episodes = make_episodes(max(CORPUS, *sizes))
    keys = list(dict.fromkeys(e.key for e in episodes))
    sample = keys[:2_000]
    started = time.perf_counter()
    embedder.embed(sample)
    rate = len(sample) / (time.perf_counter() - started)
    print(
        f"embedding throughput (MiniLM int8, batches of 64): {rate:,.0f} episode keys/s "
        f"(keys of ~{np.mean([len(k) for k in sample]):.0f} characters)"
    )
    qrng = random.Random(11)
    single = [_fill(qrng.choice(QUERIES), qrng) for _ in range(200)]
    started = time.perf_counter()
    for q in single:
        embedder.embed([q])
    print(f"one query at a time: {(time.perf_counter() - started) / len(single) * 1000:.2f} ms per query")
    vectors, seconds = key_vectors(embedder, keys)
    print(f"  {len(keys):,} distinct keys of {len(episodes):,} episodes: {seconds:.0f} s to embed")
    cached = Cached(embedder, keys, vectors)

    queries = [
        (_fill(qrng.choice(QUERIES), qrng), f"telegram:chat:{qrng.randrange(CONVERSATIONS)}")
        for _ in range(args.queries)
    ]
    print("recall = embed the input + query the store (k=3, min_score 0.35); ms")
    print(
        f"{'store':<7} {'episodes':>9} {'fill s':>7} {'open s':>7} {'conv p50/p99':>15} {'global p50/p99':>16} "
        f"{'hit conv/glob':>14} {'prune scan s':>12} {'disk MB':>8}"
    )
    for size in sizes:
        for kind in args.stores.split(","):
            r = await bench_store(kind, episodes[:size], cached, queries)
            print(
                f"{kind:<7} {size:>9,} {r['fill_s']:>7.1f} {r['open_s']:>7.1f} {r['context_p50']:>7.1f}/{r['context_p99']:<7.1f} "
                f"{r['global_p50']:>8.1f}/{r['global_p99']:<7.1f} {r['context_found']:>6.0%}/{r['global_found']:<7.0%} "
                f"{r['prune_s']:>12.2f} {r.get('disk_mb', 0):>8.0f}",
                flush=True,
            )


if __name__ == "__main__":
    asyncio.run(main())
