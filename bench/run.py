#!/usr/bin/env python3
"""Benchmarks of the hub side by side with Daydreams: one command, one table.

    python bench/run.py            # full run (a few minutes)
    python bench/run.py --quick    # smoke run (about half a minute)
    python bench/run.py --json     # the results as JSON on stdout

It installs the peer's Node packages when they are missing (``npm ci --prefix
bench``), starts the shared fake OpenAI server (``bench/fake_openai.py``) in the
configuration each figure needs, runs each measurement for the hub
(``bench/hub_side.py``) and for Daydreams (``bench/daydreams/*.mjs``), each in a
fresh process, and prints: figure | hub | daydreams | ratio. The table is also
written to ``bench/results/latest.md`` and the raw results to ``latest.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
RESULTS = BENCH / "results"
FIXTURE = BENCH / "fixtures" / "response_16k.txt"
TIMEOUT = 600


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def ensure_node() -> str:
    node = shutil.which("node")
    if not node:
        sys.exit("bench: Node.js 20+ is needed for the Daydreams side (node not found)")
    version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
    major = int(re.match(r"v(\d+)", version).group(1)) if version.startswith("v") else 0
    if major < 20:
        sys.exit(f"bench: Node.js 20+ is needed, found {version}")
    if not (BENCH / "node_modules" / "@daydreamsai" / "core" / "package.json").exists():
        npm = shutil.which("npm")
        if not npm:
            sys.exit("bench: npm is needed to install the Daydreams side")
        log("bench: installing the Daydreams side (npm ci --prefix bench) ...")
        subprocess.run(
            [npm, "ci", "--prefix", str(BENCH), "--no-audit", "--no-fund", "--loglevel=error"],
            check=True,
            stdout=sys.stderr,
        )
    return node


@contextlib.contextmanager
def fake_server(script: str, latency: float = 0, chunk: int = 8, interval: float = 0) -> Iterator[str]:
    """Start bench/fake_openai.py; yield its base URL (…/v1); stop it afterwards."""
    cmd = [
        sys.executable,
        str(BENCH / "fake_openai.py"),
        "--port",
        "0",
        "--latency",
        str(latency),
        "--chunk",
        str(chunk),
        "--interval",
        str(interval),
        "--script",
        str(BENCH / "scripts" / script),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        if not line.startswith("PORT="):
            raise RuntimeError(f"fake server did not start: {line!r} {proc.stderr.read()}")
        yield f"http://127.0.0.1:{int(line.strip()[5:])}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_json(cmd: list[str]) -> dict:
    """Run one measurement process; its last stdout line is a JSON object."""
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"timed out after {TIMEOUT} s"}
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    try:
        result = json.loads(lines[-1]) if lines else {}
    except json.JSONDecodeError:
        result = {}
    if not result:
        result = {"ok": False, "error": f"exit {p.returncode}: {(p.stderr or p.stdout).strip()[-500:]}"}
    elif p.returncode != 0:
        result["ok"] = False
        result.setdefault("error", f"exit {p.returncode}")
    result["_seconds"] = round(time.perf_counter() - t0, 2)
    return result


def cli_args(opts: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for k, v in opts.items():
        out += ["--" + k.replace("_", "-"), ",".join(map(str, v)) if isinstance(v, list) else str(v)]
    return out


@dataclass
class Figure:
    name: str
    unit: str
    better: str  # "lower" or "higher"
    bench: str
    get: Callable[[dict], Any]


def by_chunk(n: int) -> Callable[[dict], Any]:
    return lambda r: r["by_chunk"][str(n)]["ms"]


def figures(chunks: list[int], n_many: int, turns_growth: int) -> list[Figure]:
    out = [Figure(f"parser, 16 KB in {n}-char chunks", "ms", "lower", "parser", by_chunk(n)) for n in chunks]
    out += [
        Figure(
            "full turn, new conversation each (hub: SQLite stores)",
            "turns/s",
            "higher",
            "turn",
            lambda r: r["turns_per_s"],
        ),
        Figure(
            "full turn, one conversation (hub: SQLite stores)",
            "turns/s",
            "higher",
            "turn",
            lambda r: r["turns_per_s_one_conversation"],
        ),
        # The hub's default stores are SQLite (state on disk); Daydreams keeps its state in
        # its default in-memory store. The hub with its in-memory stores, for the like-for-like.
        Figure(
            "full turn, new conversation each (hub: in-memory stores)",
            "turns/s",
            "higher",
            "turn",
            lambda r: r["in_memory"]["distinct"]["turns_per_s"] if "in_memory" in r else r["turns_per_s"],
        ),
        Figure(
            "full turn, one conversation (hub: in-memory stores)",
            "turns/s",
            "higher",
            "turn",
            lambda r: r["in_memory"]["one"]["turns_per_s"] if "in_memory" in r else r["turns_per_s_one_conversation"],
        ),
        Figure(
            "tool turn, prompt_style tools, new conversation each (hub: SQLite stores)",
            "turns/s",
            "higher",
            "tool_turn",
            lambda r: r["turns_per_s"],
        ),
        Figure(
            "tool turn: CPU per turn (hub: SQLite stores)",
            "ms",
            "lower",
            "tool_turn",
            lambda r: r["sqlite"]["distinct"]["cpu_ms_per_turn"],
        ),
        # CPU time of the hub's process per turn (aiosqlite's thread included): steadier than
        # turns/s on a shared machine. Daydreams' side does not report it.
        Figure(
            "full turn: CPU per turn (hub: SQLite stores)",
            "ms",
            "lower",
            "turn",
            lambda r: r["sqlite"]["distinct"]["cpu_ms_per_turn"],
        ),
        Figure(
            "full turn: CPU per turn (hub: in-memory stores)",
            "ms",
            "lower",
            "turn",
            lambda r: r["in_memory"]["distinct"]["cpu_ms_per_turn"],
        ),
        # the hub alone: failover and a key pool while the primary is healthy, three hubs side
        # by side in one process (in-memory stores: the model layer's largest share of a turn)
        Figure(
            "failover layer: CPU per turn, one client handed in (in-memory stores)",
            "ms",
            "lower",
            "failover_cost",
            lambda r: r["cpu_ms_per_turn"]["client"],
        ),
        Figure(
            "failover layer: CPU per turn, [model] from the config, one key",
            "ms",
            "lower",
            "failover_cost",
            lambda r: r["cpu_ms_per_turn"]["one"],
        ),
        Figure(
            "failover layer: CPU per turn, three keys and a fallback model",
            "ms",
            "lower",
            "failover_cost",
            lambda r: r["cpu_ms_per_turn"]["pool"],
        ),
        Figure(
            "failover and key pool: cost over one client handed in",
            "%",
            "lower",
            "failover_cost",
            lambda r: r["pool_cost_pct"],
        ),
        Figure("long output 200 KB, 8-char chunks: time", "ms", "lower", "longout", lambda r: r["ms"]),
        Figure("long output 200 KB: peak RSS", "MB", "lower", "longout", lambda r: r["peak_rss_mb"]),
        Figure(f"{n_many} conversations at once, 1 s model: wall", "s", "lower", "many", lambda r: r["wall_s"]),
        Figure(f"{n_many} conversations at once: first done", "s", "lower", "many", lambda r: r["first_done_s"]),
        Figure(f"{n_many} conversations at once: peak RSS", "MB", "lower", "many", lambda r: r["peak_rss_mb"]),
        # the hub's process CPU over the 1,000 turns (Daydreams' side does not report it)
        Figure(f"{n_many} conversations at once: CPU", "s", "lower", "many", lambda r: r["cpu_s"]),
        # started (the hub: its stores open, its model built), before the first turn
        Figure("resident memory before the first turn", "MB", "lower", "many", lambda r: r["rss_before_mb"]),
        Figure("</output> to output handler: p50", "ms", "lower", "latency", lambda r: r["p50_ms"]),
        Figure("</output> to output handler: p99", "ms", "lower", "latency", lambda r: r["p99_ms"]),
        Figure("prompt at turn 1", "tokens", "lower", "prompt_growth", lambda r: r["first_tokens"]),
        Figure(f"prompt at turn {turns_growth}", "tokens", "lower", "prompt_growth", lambda r: r["last_tokens"]),
        Figure("prompt growth per turn", "chars", "lower", "prompt_growth", lambda r: r["growth_chars_per_turn"]),
        # the hub alone: each turn's prompt that is an exact prefix of the next turn's (what a
        # provider's prompt cache serves), compaction on, over the same turns
        Figure(
            f"prompt kept as the next turn's prefix, mean over {turns_growth} turns",
            "%",
            "higher",
            "prompt_prefix",
            lambda r: round(100 * r["mean_share"], 1),
        ),
        Figure(
            "prompt kept as the next turn's prefix: lowest turn (one that compacts)",
            "%",
            "higher",
            "prompt_prefix",
            lambda r: round(100 * r["min_share"], 1),
        ),
        # the hub alone: `hub chat` on the shipped config.toml, a fresh data directory
        Figure("`hub chat`: start to first answer", "s", "lower", "startup", lambda r: r["first_answer_s"]),
        Figure("`hub chat`: peak RSS to first answer", "MB", "lower", "startup", lambda r: r["peak_rss_mb"]),
    ]
    return out


def measure(node: str, only: set[str] | None, quick: bool) -> tuple[dict, dict]:
    """Run every measurement on both sides. Returns (settings, results[bench][side])."""
    s = dict(
        chunks=[1, 8, 32],
        parser_reps=5 if quick else 30,
        turns=20 if quick else 200,
        many=100 if quick else 1000,
        latency_turns=20 if quick else 200,
        growth_turns=20 if quick else 100,
    )
    hub = [sys.executable, str(BENCH / "hub_side.py")]
    dd = BENCH / "daydreams"
    # bench -> (fake server settings or None, hub options, daydreams options)
    plan: dict[str, tuple[dict | None, dict, dict | None]] = {
        "parser": (
            None,
            dict(fixture=str(FIXTURE), chunks=s["chunks"], reps=s["parser_reps"], warmup=3),
            dict(fixture=str(FIXTURE), chunks=s["chunks"], reps=s["parser_reps"], warmup=3),
        ),
        "turn": (dict(script="turn.json"), dict(turns=s["turns"], warmup=10), dict(turns=s["turns"], warmup=10)),
        # the same turn in the native tool-calling style: the hub only (Daydreams has none)
        "tool_turn": (dict(script="tool_turn.json"), dict(turns=s["turns"], warmup=10), None),
        # the hub only: a turn with one model against one with fallbacks and a key pool
        "failover_cost": (
            dict(script="turn.json"),
            dict(turns=s["turns"] // 2, warmup=10, rounds=3 if quick else 8),
            None,
        ),
        "longout": (dict(script="longout.json", chunk=8), {}, {}),
        "many": (dict(script="turn.json", latency=1), dict(n=s["many"]), dict(n=s["many"])),
        "latency": (
            dict(script="turn.json", interval=1),
            dict(turns=s["latency_turns"], warmup=10),
            dict(turns=s["latency_turns"], warmup=10),
        ),
        "prompt_growth": (dict(script="turn.json"), dict(turns=s["growth_turns"]), dict(turns=s["growth_turns"])),
        # the hub only, against a fake of its own in its process (it keeps every prompt)
        "prompt_prefix": (None, dict(turns=s["growth_turns"]), None),
        "startup": (dict(script="hello.json"), dict(reps=3 if quick else 5), None),  # the hub only
    }
    results: dict[str, dict[str, dict]] = {}
    for bench, (server, hub_opts, dd_opts) in plan.items():
        if only and bench not in only:
            continue
        results[bench] = {}
        with fake_server(**server) if server else contextlib.nullcontext(None) as base_url:
            extra = {"base_url": base_url} if base_url else {}
            log(f"bench: {bench}: hub ...")
            results[bench]["hub"] = run_json(hub + [bench] + cli_args({**extra, **hub_opts}))
            if dd_opts is None:
                continue
            log(f"bench: {bench}: daydreams ...")
            results[bench]["daydreams"] = run_json([node, str(dd / f"{bench}.mjs")] + cli_args({**extra, **dd_opts}))
            r = results[bench]["daydreams"]
            log(
                f"bench: {bench}: daydreams {'ok' if r.get('ok') else 'FAILED: ' + str(r.get('error'))}"
                f" ({r['_seconds']} s)"
            )
    return s, results


def fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:,.3g}" if abs(v) < 10 else f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.1f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def cell(result: dict | None, fig: Figure) -> tuple[str, float | None]:
    if result is None:
        return "not run", None
    if result.get("pending"):
        return "pending", None
    if not result.get("ok"):
        return "error", None
    try:
        v = fig.get(result)
    except (KeyError, TypeError):
        return "n/a", None
    return fmt(v), float(v)


def table(settings: dict, results: dict) -> tuple[str, list[dict]]:
    rows = []
    lines = ["| figure | unit | better | hub | daydreams | ratio hub/daydreams |", "|---|---|---|---:|---:|---:|"]
    for fig in figures(settings["chunks"], settings["many"], settings["growth_turns"]):
        if fig.bench not in results:
            continue
        h_txt, h = cell(results[fig.bench].get("hub"), fig)
        d_txt, d = cell(results[fig.bench].get("daydreams"), fig)
        ratio = f"{h / d:.2f}" if h is not None and d else "–"
        rows.append(
            dict(
                figure=fig.name,
                unit=fig.unit,
                better=fig.better,
                hub=h,
                daydreams=d,
                ratio=(h / d if h is not None and d else None),
            )
        )
        lines.append(f"| {fig.name} | {fig.unit} | {fig.better} | {h_txt} | {d_txt} | {ratio} |")
    notes = []
    for bench, sides in results.items():
        for side, r in sides.items():
            if not r.get("ok") and not r.get("pending"):
                notes.append(f"- {side} {bench}: {r.get('error')}")
    if notes:
        lines += ["", "Errors:"] + notes
    return "\n".join(lines), rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Hub vs Daydreams, side by side.")
    p.add_argument("--quick", action="store_true", help="small sizes: a smoke run of every figure")
    p.add_argument("--json", action="store_true", help="print the results as JSON instead of the table")
    p.add_argument(
        "--only",
        help="comma-separated: parser,turn,tool_turn,failover_cost,longout,many,latency,prompt_growth,"
        "prompt_prefix,startup",
    )
    a = p.parse_args(argv)
    node = ensure_node()
    only = set(a.only.split(",")) if a.only else None
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    settings, results = measure(node, only, a.quick)
    md, rows = table(settings, results)
    RESULTS.mkdir(exist_ok=True)
    header = (
        f"# Hub vs Daydreams ({'quick' if a.quick else 'full'} run, {started})\n\n"
        f"Machine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, "
        f"Node {subprocess.run([node, '--version'], capture_output=True, text=True).stdout.strip()}. "
        f"Ratio = hub ÷ Daydreams; see the 'better' column for which way is good.\n\n"
    )
    (RESULTS / "latest.md").write_text(header + md + "\n", encoding="utf-8")
    dump = {"started": started, "quick": a.quick, "settings": settings, "rows": rows, "raw": results}
    (RESULTS / "latest.json").write_text(json.dumps(dump, indent=1), encoding="utf-8")
    if a.json:
        print(json.dumps(dump, indent=1))
    else:
        print(md)
    failed = any("daydreams" in sides and not sides["daydreams"].get("ok") for sides in results.values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
