"""The hub's side of the side-by-side benchmarks (bench/run.py calls these).

Each function measures the same thing as the Daydreams script of the same name in
``bench/daydreams/`` and returns a dict with the same keys (listed in its
docstring). ``run.py`` runs each one in a fresh process, as it does each Node
script, so that peak-RSS figures start from a clean interpreter:

    python bench/hub_side.py NAME --base-url URL [--turns N ...]

prints one JSON line: the dict plus ``"ok": true``.

Everything here is the real stack: :class:`hub.Hub` with its engine, runner, prompt
builder and streaming parser; :class:`hub.models.openai.OpenAIModel` (the streaming request on the shared keep-alive connections
of hub/models/_http.py; its raw SSE body is decoded by the hub) talking to
the shared loopback fake; the SQLite stores
(memory, runs and their event logs, the inbox) in a fresh temporary data directory,
so every turn's state is saved to disk as in production. ``turn`` also reports a
variant with the in-memory stores, labelled as such, because Daydreams' agent keeps
its state in its default in-memory store.

Against the fake (``bench/fake_openai.py``) the hub asks for model ``"hub"``, so the
fake answers in the hub's format (``bench/scripts/turn.json``): step 2 is chosen when
the last message holds the new action result (``new="true">{"temperature"``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))

MODEL = "hub"  # the fake's client name for the hub's responses
QUESTION = "What is the weather in New York City?"


# --- the agent under test ------------------------------------------------------------------

from pydantic import BaseModel  # noqa: E402


class ChatArgs(BaseModel):
    id: str


class WeatherArgs(BaseModel):
    location: str


class Counters:
    def __init__(self) -> None:
        self.actions = 0
        self.outputs = 0
        self.output_chars = 0
        self.on_output: Any = None


def bench_extension(counters: Counters) -> Any:
    """The benchmark's agent, the way a hub user writes it: a chat context keyed by id,
    a ``getWeather`` action and a text output (the fake answers ``type="cli:message"``)."""
    from hub import Context, Extension, action, output

    chat = Context(
        type="bench:chat",
        schema=ChatArgs,
        key=lambda a: a.id,
        description="A chat with one user.",
        reply_output="cli:message",
        max_steps=5,
        create=lambda args, ctx: {"turns": 0},
    )

    @action(name="getWeather", description="Current weather for a location.")
    async def get_weather(args: WeatherArgs, ctx: Any) -> dict:
        counters.actions += 1
        return {"temperature": 72}

    @output(type="cli:message", description="Reply to the user.", context="bench:chat")
    async def reply(content: str, ctx: Any) -> None:
        if counters.on_output is not None:
            counters.on_output()
        counters.outputs += 1
        counters.output_chars += len(content)
        return None

    return Extension(name="bench", contexts=[chat], actions=[get_weather], outputs=[reply])


def make_hub(
    base_url: str,
    data_dir: str,
    counters: Counters,
    *,
    in_memory: bool = False,
    concurrency: int = 16,
    client: Any = None,
    prompt_style: str = "auto",
    compaction: bool = False,
    models: str = "client",
) -> Any:
    """The benchmark's hub. ``models``: ``"client"`` hands it one :class:`OpenAIModel` (the
    side-by-side figures); ``"one"`` lets the hub build ``[model]`` from the config as a
    deployment does (one model, one key); ``"pool"`` adds a pool of three keys and a
    fallback model (``[models.backup]``, the same fake) to ``[model]``."""
    from hub import Hub, HubConfig, InMemoryStore
    from hub.models.openai import OpenAIModel
    from hub.store import InMemoryInbox, InMemoryRunStore

    model_table = {
        "provider": "openai",
        "name": MODEL,
        "base_url": base_url,
        "api_key": "x",
        "concurrency": concurrency,
        "max_retries": 0,
        "prompt_style": prompt_style,
    }
    named: dict[str, Any] = {}
    if models == "pool":
        model_table = {**model_table, "api_keys": ["x2", "x3"], "fallbacks": ["backup"]}
        named = {"backup": {**model_table, "api_key": "y", "api_keys": [], "fallbacks": []}}
    cfg = HubConfig.model_validate(
        {
            "hub": {"data_dir": data_dir, "contexts_dir": str(ROOT / "contexts"), "log_level": "ERROR"},
            "model": model_table,
            "models": named,
            # Daydreams' agent has no vector memory in these turns: neither do we (recall and
            # its embedding have their own figures in recall_bench.py)
            "memory": {"episodes": False},
            # nor does it summarise: the side-by-side turns are two requests each (the prefix
            # figure, prompt_prefix, runs with compaction on, as a hub does by default)
            "agent": {"compaction": compaction},
        }
    )
    model = (
        OpenAIModel(MODEL, base_url=base_url, api_key="x", client=client, concurrency=concurrency)
        if models == "client"
        else None
    )
    stores: dict[str, Any] = {}
    if in_memory:
        stores = {"memory": InMemoryStore(), "runs": InMemoryRunStore(), "inbox": InMemoryInbox()}
    return Hub(cfg, model=model, load_extensions=False, extensions=[bench_extension(counters)], **stores)


def quiet_logs() -> None:
    import logging

    logging.basicConfig(level=logging.ERROR)
    logging.getLogger().setLevel(logging.ERROR)


def peak_rss_mb() -> float:
    """The process's peak RSS (exact, from the kernel; Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def root_of(base_url: str) -> str:
    return base_url.rstrip("/").removesuffix("/v1")


def get_json(url: str, data: bytes | None = None) -> Any:
    with urllib.request.urlopen(url, data=data, timeout=30) as r:
        return json.loads(r.read())


def reset_stats(base_url: str) -> None:
    get_json(root_of(base_url) + "/stats/reset", data=b"")


def stats(base_url: str) -> dict:
    return get_json(root_of(base_url) + "/stats")


def check(cond: bool, msg: str) -> None:
    if not cond:
        print(json.dumps({"ok": False, "error": msg}))
        sys.exit(2)


async def one_turn(hub: Any, counters: Counters, cid: str, text: str = QUESTION) -> Any:
    a, o = counters.actions, counters.outputs
    result = await hub.send("bench:chat", {"id": cid}, text)
    check(
        result is not None and result.ok,
        f"{cid}: run ended {getattr(result, 'state', None)}: {getattr(result, 'reason', None)}",
    )
    check(counters.actions == a + 1, f"{cid}: getWeather ran {counters.actions - a} times, not once")
    check(counters.outputs == o + 1, f"{cid}: the output handler ran {counters.outputs - o} times, not once")
    return result


def run_async(coro: Any) -> Any:
    return asyncio.run(coro)


# --- the measurements ----------------------------------------------------------------------


def parser(fixture: str, chunks: list[int], reps: int, warmup: int) -> dict:
    """Parse the fixture (``bench/fixtures/response_16k.txt``) cut into each chunk size.

    As the engine does (and as Daydreams' ``handleStream`` is fed): an async iterator of
    chunks, each fed to :class:`hub.protocol.ElementParser`, every completed element
    dispatched by kind. ``sync_ms`` is the parser alone, fed from a plain loop.

    Returns ``{"by_chunk": {"1": {"ms": median_ms, "ms_p90": ...}, "8": ..., "32": ...}}``;
    every unit's action call and output must come out whole (assert it).
    """
    from hub.protocol import ElementParser

    text = Path(fixture).read_text(encoding="utf-8")
    units = text.count("</response>")

    async def aiter(parts: list[str]) -> Any:
        for p in parts:
            yield p

    async def run_stream(parts: list[str]) -> dict[str, int]:
        done = {"action_call": 0, "output": 0, "thought": 0}
        p = ElementParser()
        async for chunk in aiter(parts):
            for el in p.feed(chunk):
                name = el.name
                if name == "action_call":
                    done["action_call"] += 1
                elif name == "output":
                    done["output"] += 1
                else:
                    done["thought"] += 1
        p.close()
        return done

    def run_sync(parts: list[str]) -> int:
        p = ElementParser()
        n = 0
        for chunk in parts:
            n += len(p.feed(chunk))
        return n + len(p.close())

    async def main() -> dict:
        out: dict[str, Any] = {}
        for n in chunks:
            parts = [text[i : i + n] for i in range(0, len(text), n)]
            done = await run_stream(parts)
            check(done["action_call"] == units and done["output"] == units, f"chunk {n}: {done} for {units} units")
            times, sync_times = [], []
            for r in range(warmup + reps):
                t0 = time.perf_counter()
                await run_stream(parts)
                t1 = time.perf_counter()
                run_sync(parts)
                t2 = time.perf_counter()
                if r >= warmup:
                    times.append((t1 - t0) * 1e3)
                    sync_times.append((t2 - t1) * 1e3)
            times.sort()
            med = statistics.median(times)
            out[str(n)] = {
                "chunks": len(parts),
                "ms": round(med, 3),
                "ms_p90": round(times[min(len(times) - 1, int(0.9 * (len(times) - 1) + 0.5))], 3),
                "mb_per_s": round(len(text.encode()) / 1e6 / (med / 1e3), 2),
                "sync_ms": round(statistics.median(sync_times), 3),
            }
        return out

    by_chunk = run_async(main())
    return {"bench": "parser", "chars": len(text), "units": units, "reps": reps, "by_chunk": by_chunk}


def turn(base_url: str, turns: int, warmup: int) -> dict:
    """Sequential full turns: input, prompt, stream, parse, getWeather, step 2, output
    handler, state saved. ``turns`` in new conversations, then ``turns`` in one.

    Returns ``{"turns_per_s": distinct, "turns_per_s_one_conversation": one}`` for the
    SQLite stores (the default), and the same with the in-memory stores under
    ``in_memory``. Asserts that each turn ran the action and the output handler once and
    that the fake saw responses 0,1 per turn (``GET /stats``).
    """
    return _turns(base_url, turns, warmup, "xml")


def tool_turn(base_url: str, turns: int, warmup: int) -> dict:
    """The same turns with ``prompt_style = "tools"``: getWeather is an OpenAI tool, the
    fake streams its call as ``tool_calls`` deltas (``scripts/tool_turn.json``), step 2's
    plain text is the reply. The hub only (Daydreams has no such style)."""
    return {**_turns(base_url, turns, warmup, "tools"), "bench": "tool_turn"}


def _turns(base_url: str, turns: int, warmup: int, style: str) -> dict:
    async def measure(in_memory: bool) -> dict:
        counters = Counters()
        with tempfile.TemporaryDirectory(prefix="hub-bench-") as data:
            async with make_hub(base_url, data, counters, in_memory=in_memory, prompt_style=style) as hub:
                for i in range(warmup):
                    await one_turn(hub, counters, f"warm-{i}")

                async def phase(label: str, ids: list[str]) -> dict:
                    reset_stats(base_url)
                    gc.collect()
                    t0, c0 = time.perf_counter(), time.process_time()
                    for cid in ids:
                        await one_turn(hub, counters, cid)
                    ms = (time.perf_counter() - t0) * 1e3
                    cpu = (time.process_time() - c0) * 1e3
                    picks = "".join(str(r["response"]) for r in stats(base_url)["requests"])
                    check(picks == "01" * len(ids), f"{label}: the fake saw {picks[:40]}..., expected 0101...")
                    # CPU time of this process per turn: less sensitive to the machine's load
                    # than the wall time (it excludes the fake server and other processes).
                    return {
                        "turns": len(ids),
                        "ms": round(ms, 1),
                        "turns_per_s": round(len(ids) * 1e3 / ms, 2),
                        "cpu_ms_per_turn": round(cpu / len(ids), 3),
                    }

                only_phase = os.environ.get("BENCH_TURN_PHASE")  # "distinct" or "one" (profiling)
                distinct = await phase("distinct", [f"c-{i}" for i in range(turns)]) if only_phase != "one" else {}
                one = await phase("one", ["one"] * turns) if only_phase != "distinct" else {}
        return {"distinct": distinct, "one": one}

    only = os.environ.get("BENCH_TURN_STORES")  # "sqlite" or "memory": one of them (profiling)
    sqlite = run_async(measure(False)) if only != "memory" else {"distinct": {}, "one": {}}
    memory = run_async(measure(True)) if only != "sqlite" else None
    return {
        "bench": "turn",
        "turns_per_s": sqlite["distinct"].get("turns_per_s"),
        "turns_per_s_one_conversation": sqlite["one"].get("turns_per_s"),
        "store": "sqlite",
        "sqlite": sqlite,
        "in_memory": memory,
        "requests_per_turn": 2,
    }


def failover_cost(base_url: str, turns: int, warmup: int, rounds: int = 6) -> dict:
    """What failover and a key pool cost a turn while the primary is healthy: the same
    sequential turns (new conversations, in-memory stores, so the model layer's share is
    the largest it can be) on three hubs open side by side in one process: ``client``, one
    :class:`OpenAIModel` handed in (no failover layer at all); ``one``, ``[model]`` built
    from the config (one model, one key, as a deployment without fallbacks runs); ``pool``,
    ``[model]`` with three keys in turn and ``fallbacks = ["backup"]``. ``rounds`` rounds of
    ``turns`` turns each, the hubs' order rotating each round. Returns the median CPU per turn
    of each (ms) and ``pool_cost_pct``: ``pool`` over ``client``, in per cent of a turn."""
    from hub.models.failover import FailoverModel

    variants = ("client", "one", "pool")

    async def main() -> dict:
        counters = Counters()
        samples: dict[str, list[float]] = {v: [] for v in variants}
        with tempfile.TemporaryDirectory(prefix="hub-bench-") as data:
            hubs = {v: make_hub(base_url, f"{data}/{v}", counters, in_memory=True, models=v) for v in variants}
            for h in hubs.values():
                await h.__aenter__()
            try:
                pool = hubs["pool"].model
                check(isinstance(pool, FailoverModel), f"pool: the hub's model is {type(pool).__name__}")
                shape = [(c.name, len(c.clients)) for c in pool.candidates]
                check(shape == [("model", 3), ("backup", 1)], f"pool: candidates {shape}")
                for v, h in hubs.items():
                    for i in range(warmup):
                        await one_turn(h, counters, f"{v}-warm-{i}")
                for r in range(rounds):
                    order = variants[r % 3 :] + variants[: r % 3]
                    for v in order:
                        reset_stats(base_url)
                        gc.collect()
                        c0 = time.process_time()
                        for i in range(turns):
                            await one_turn(hubs[v], counters, f"{v}-{r}-{i}")
                        samples[v].append((time.process_time() - c0) * 1e3 / turns)
                        picks = "".join(str(x["response"]) for x in stats(base_url)["requests"])
                        check(picks == "01" * turns, f"{v}: the fake saw {picks[:40]}..., expected 0101...")
                # the healthy primary answered everything, each of its keys in turn
                primary = pool.candidates[0]
                check(not primary.pool.refused() and not primary.problem(), f"pool: {primary.problem()}")
            finally:
                for h in hubs.values():
                    await h.__aexit__(None, None, None)
        med = {v: statistics.median(s) for v, s in samples.items()}
        return {
            "bench": "failover_cost",
            "turns": turns,
            "rounds": rounds,
            "cpu_ms_per_turn": {v: round(m, 3) for v, m in med.items()},
            "cpu_ms_per_turn_range": {v: [round(min(s), 3), round(max(s), 3)] for v, s in samples.items()},
            "pool_cost_pct": round(100 * (med["pool"] / med["client"] - 1), 2),
            "one_cost_pct": round(100 * (med["one"] / med["client"] - 1), 2),
            "pool_vs_one_pct": round(100 * (med["pool"] / med["one"] - 1), 2),
        }

    return run_async(main())


def longout(base_url: str, min_chars: int = 150_000) -> dict:
    """One turn whose output is about 200 KB, streamed in 8-character chunks
    (the fake serves ``scripts/longout.json``). Returns ``{"ms", "peak_rss_mb"}``."""

    async def main() -> dict:
        counters = Counters()
        with tempfile.TemporaryDirectory(prefix="hub-bench-") as data:
            async with make_hub(base_url, data, counters) as hub:
                gc.collect()
                before = rss_mb()
                reset_stats(base_url)
                t0 = time.perf_counter()
                result = await hub.send("bench:chat", {"id": "long-0"}, "Write me a very long text.")
                ms = (time.perf_counter() - t0) * 1e3
                check(result is not None and result.ok, f"run ended {getattr(result, 'state', None)}")
                check(counters.outputs == 1, f"the output handler ran {counters.outputs} times, not once")
                check(counters.output_chars > min_chars, f"the output was only {counters.output_chars} characters")
                n = stats(base_url)["count"]
                check(n == 1, f"the fake saw {n} requests, expected 1")
                peak = peak_rss_mb()
        return {
            "bench": "longout",
            "ms": round(ms, 1),
            "output_chars": counters.output_chars,
            "peak_rss_mb": round(peak, 1),
            "rss_before_mb": round(before, 1),
            "peak_rss_delta_mb": round(peak - before, 1),
        }

    return run_async(main())


def many(base_url: str, n: int) -> dict:
    """``n`` full turns in ``n`` distinct conversations at once against a fake with 1 s
    latency. Returns ``{"wall_s", "peak_rss_mb"}``; asserts n actions and n outputs.

    ``model.concurrency`` (LLM calls in flight) is raised to ``n`` for this figure; the
    default (16) would queue the calls. The model's HTTP session has no connection limit
    of its own."""

    async def main() -> dict:
        counters = Counters()
        with tempfile.TemporaryDirectory(prefix="hub-bench-") as data:
            async with make_hub(base_url, data, counters, concurrency=max(n, 16)) as hub:
                before = rss_mb()
                reset_stats(base_url)
                ends: list[float] = []
                t0, c0 = time.perf_counter(), time.process_time()

                async def go(i: int) -> None:
                    result = await hub.send("bench:chat", {"id": f"many-{i}"}, QUESTION)
                    check(result is not None and result.ok, f"many-{i}: {getattr(result, 'reason', None)}")
                    ends.append(time.perf_counter() - t0)

                await asyncio.gather(*(go(i) for i in range(n)))
                wall = time.perf_counter() - t0
                cpu = time.process_time() - c0
                peak = peak_rss_mb()
                check(counters.actions == n, f"getWeather ran {counters.actions} times, expected {n}")
                check(counters.outputs == n, f"the output handler ran {counters.outputs} times, expected {n}")
                count = stats(base_url)["count"]
                check(count == 2 * n, f"the fake saw {count} requests, expected {2 * n}")
        ends.sort()
        return {
            "bench": "many",
            "n": n,
            "wall_s": round(wall, 2),
            "first_done_s": round(ends[0], 2),
            "median_done_s": round(ends[len(ends) // 2], 2),
            "peak_rss_mb": round(peak, 1),
            "rss_before_mb": round(before, 1),
            "requests": count,
            "concurrency": max(n, 16),
            "cpu_s": round(cpu, 2),
        }

    return run_async(main())


def latency(base_url: str, turns: int, warmup: int) -> dict:
    """From the arrival (at the HTTP client, before parsing) of the bytes that complete
    ``</output>`` to the call of the output handler, over ``turns`` sequential turns
    (the fake paces events 1 ms apart). Returns ``{"p50_ms", "p99_ms"}``.

    The timestamp is taken where the model's HTTP client hands over body bytes: each
    network chunk of the streaming response as the model client's connection yields
    it, before any SSE, JSON or XML parsing (Daydreams' side wraps ``fetch`` and stamps
    each body chunk at the same point). The SSE text is followed cheaply there to find
    the chunk in which the streamed content first contains ``</output>``. The output
    handler stamps its own call."""
    import hub.models.openai as openai_model

    MARK = "</output>"
    state: dict[str, Any] = {"arrived": None, "handled": None, "pending": b"", "content": ""}
    # the SSE reader the model wraps around the body (_sse_events since the reads are
    # batched, _sse_data before): stamped below it, at the transport's chunks
    name = "_sse_events" if hasattr(openai_model, "_sse_events") else "_sse_data"
    original = getattr(openai_model, name)

    def timed_sse_data(body: Any) -> Any:
        async def stamped() -> Any:
            async for data in body:
                now = time.perf_counter()
                if state["arrived"] is None and data:
                    lines = (state["pending"] + bytes(data)).split(b"\n")
                    state["pending"] = lines.pop()
                    for line in lines:
                        if line.startswith(b"data: {"):
                            choices = json.loads(line[6:]).get("choices") or [{}]
                            delta = (choices[0].get("delta") or {}).get("content")
                            if delta:
                                state["content"] += delta
                    if MARK in state["content"]:
                        state["arrived"] = now
                yield data

        return original(stamped())

    setattr(openai_model, name, timed_sse_data)

    async def main() -> list[float]:
        counters = Counters()
        counters.on_output = lambda: state.__setitem__("handled", time.perf_counter())
        samples = []
        with tempfile.TemporaryDirectory(prefix="hub-bench-") as data:
            async with make_hub(base_url, data, counters) as hub:
                for i in range(warmup + turns):
                    state.update(arrived=None, handled=None, pending=b"", content="")
                    await one_turn(hub, counters, f"lat-{i}")
                    a, h = state["arrived"], state["handled"]
                    check(a is not None and h is not None, f"turn {i}: no {MARK} seen or handler not timed")
                    if i >= warmup:
                        samples.append((h - a) * 1e3)
        return sorted(samples)

    s = run_async(main())

    def q(p: float) -> float:
        pos = (len(s) - 1) * p
        lo, hi = int(pos), min(len(s) - 1, int(pos) + 1)
        return s[lo] + (s[hi] - s[lo]) * (pos - lo)

    return {
        "bench": "latency",
        "turns": turns,
        "p50_ms": round(q(0.5), 3),
        "p99_ms": round(q(0.99), 3),
        "max_ms": round(s[-1], 3),
        "min_ms": round(s[0], 3),
    }


def prompt_growth(base_url: str, turns: int) -> dict:
    """``turns`` full turns in one conversation; the fake's ``GET /stats`` gives each
    prompt's characters (all messages). Returns ``{"first_tokens", "last_tokens",
    "growth_chars_per_turn", "step1_chars": [...]}`` (tokens = chars / 4; growth over
    the second half of the turns), and the configured budget."""

    async def main() -> dict:
        counters = Counters()
        with tempfile.TemporaryDirectory(prefix="hub-bench-") as data:
            async with make_hub(base_url, data, counters) as hub:
                reset_stats(base_url)
                for i in range(turns):
                    await one_turn(hub, counters, "growth", f"Turn {i + 1}: what is the weather in New York City?")
                budget = hub.config.agent.prompt_budget
        st = stats(base_url)
        check(st["count"] == 2 * turns, f"the fake saw {st['count']} requests, expected {2 * turns}")
        step1 = [r["prompt_chars"] for r in st["requests"][0::2]]
        step2 = [r["prompt_chars"] for r in st["requests"][1::2]]
        half = turns // 2
        slope = (step1[-1] - step1[half - 1]) / (turns - half) if half > 0 else 0.0
        marks = [t for t in (1, 2, 5, 10, 20, 50, 100) if t <= turns]
        biggest = max(r["prompt_chars"] for r in st["requests"])
        return {
            "bench": "prompt_growth",
            "turns": turns,
            "first_chars": step1[0],
            "last_chars": step1[-1],
            "first_tokens": round(step1[0] / 4),
            "last_tokens": round(step1[-1] / 4),
            "max_tokens": round(biggest / 4),
            "budget_tokens": budget,
            "within_budget": biggest / 4 <= budget,
            "growth_chars_per_turn": round(slope, 1),
            "bounded": abs(slope) < 1,  # the input text itself grows by a digit now and then
            "by_turn": {t: {"step1_chars": step1[t - 1], "step2_chars": step2[t - 1]} for t in marks},
            "step1_chars": step1,
        }

    return run_async(main())


SUMMARY_ANSWER = "The user keeps asking for the weather in New York City; it has been 72°F each time."


def prompt_prefix(turns: int, base_url: str | None = None) -> dict:
    """``turns`` full turns in one conversation with compaction on (the default), against an
    in-process fake that keeps every request: for each turn, the share of its prompt (step 1,
    as sent: tools, then each message) that is an exact prefix of the next turn's, which is
    what a provider's prompt cache can serve. Returns ``{"mean_share", "min_share",
    "median_share", "compactions", "cached_share"}`` (``cached_share``: the fake's cached
    tokens over all prompt tokens, summary calls included)."""
    from hub.engine import SUMMARY_SYSTEM
    from hub.models.scripted import prefix_length
    from hub.testing import FakeOpenAI
    from hub.testing.openai import prompt_text

    script = json.loads((BENCH / "scripts" / "turn.json").read_text())
    hub_client = script["clients"]["hub"]
    hub_client["responses"].append(SUMMARY_ANSWER)
    hub_client["rules"].insert(0, {"contains": SUMMARY_SYSTEM[:60], "in": "all", "pick": 2})

    async def main() -> dict:
        counters = Counters()
        async with FakeOpenAI(script=script) as fake:
            with tempfile.TemporaryDirectory(prefix="hub-bench-") as data:
                async with make_hub(fake.url, data, counters, compaction=True) as hub:
                    firsts = []
                    for i in range(turns):
                        before = len(fake.bodies)
                        await one_turn(hub, counters, "prefix", f"Turn {i + 1}: what is the weather in New York City?")
                        own = [b for b in fake.bodies[before:] if b["messages"][0]["content"] != SUMMARY_SYSTEM]
                        check(len(own) == 2, f"turn {i + 1}: {len(own)} requests of the turn, not 2")
                        firsts.append(prompt_text(own[0]))
            summaries = sum(1 for b in fake.bodies if b["messages"][0]["content"] == SUMMARY_SYSTEM)
            usage = [s for s in fake.stats]
        shares = [prefix_length(a, b) / len(a) for a, b in zip(firsts, firsts[1:], strict=False)]
        prompt_tokens = sum(u["prompt_tokens"] for u in usage)
        return {
            "bench": "prompt_prefix",
            "turns": turns,
            "mean_share": round(statistics.mean(shares), 4),
            "median_share": round(statistics.median(shares), 4),
            "min_share": round(min(shares), 4),
            "compactions": summaries,
            "cached_share": round(fake.cached_tokens_total / max(1, prompt_tokens), 4),
        }

    return run_async(main())


def startup(base_url: str, reps: int = 3) -> dict:
    """``hub chat`` on the shipped ``config.toml`` (episodic memory on, a fresh data
    directory), pointed at the fake through ``OPENAI_BASE_URL``: seconds from starting the
    process to the first answer on its stdout, and the process's peak RSS at that moment
    (the kernel's ``VmHWM``, exact), before its first episode is written. Median of
    ``reps`` fresh processes. Returns ``{"first_answer_s", "peak_rss_mb", "runs"}``."""
    import shutil
    import subprocess

    runs = []
    for _ in range(reps):
        with tempfile.TemporaryDirectory(prefix="hub-startup-") as tmp:
            shutil.copy(ROOT / "config.toml", tmp)
            shutil.copytree(ROOT / "contexts", Path(tmp) / "contexts")
            env = {
                **os.environ,
                "OPENAI_BASE_URL": base_url,
                "OPENAI_API_KEY": "x",
                "PYTHONPATH": str(ROOT),
                "PYTHONUNBUFFERED": "1",
            }
            started = time.perf_counter()
            proc = subprocess.Popen(
                [sys.executable, "-m", "hub.cli", "chat"],
                cwd=tmp,
                env=env,
                text=True,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
            try:
                assert proc.stdin is not None and proc.stdout is not None
                proc.stdin.write("hello\n")
                proc.stdin.flush()
                line = proc.stdout.readline()
                answered = time.perf_counter() - started
                status = Path(f"/proc/{proc.pid}/status").read_text()
                hwm = next(int(ln.split()[1]) for ln in status.splitlines() if ln.startswith("VmHWM:"))
                check("Hello!" in line, f"hub chat answered {line!r}")
                proc.stdin.close()
                proc.wait(60)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            runs.append({"first_answer_s": round(answered, 3), "peak_rss_mb": round(hwm / 1024, 1)})
    return {
        "first_answer_s": statistics.median(r["first_answer_s"] for r in runs),
        "peak_rss_mb": statistics.median(r["peak_rss_mb"] for r in runs),
        "runs": runs,
    }


FUNCTIONS = {
    f.__name__: f
    for f in (parser, turn, tool_turn, failover_cost, longout, many, latency, prompt_growth, prompt_prefix, startup)
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Run one hub-side measurement; print one JSON line.")
    p.add_argument("name", choices=sorted(FUNCTIONS))
    p.add_argument("--base-url")
    p.add_argument("--fixture")
    p.add_argument("--chunks", type=lambda s: [int(x) for x in s.split(",")])
    p.add_argument("--reps", type=int)
    p.add_argument("--warmup", type=int)
    p.add_argument("--turns", type=int)
    p.add_argument("--n", type=int)
    p.add_argument("--min-chars", type=int)
    p.add_argument("--rounds", type=int)
    a = p.parse_args(argv)
    quiet_logs()
    kwargs = {k: v for k, v in vars(a).items() if k != "name" and v is not None}
    try:
        result = FUNCTIONS[a.name](**kwargs)
    except NotImplementedError as e:
        print(json.dumps({"ok": False, "pending": True, "error": str(e)}))
        return 0
    print(json.dumps({"ok": True, "python": sys.version.split()[0], **result}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
