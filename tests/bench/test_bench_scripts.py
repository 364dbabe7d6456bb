"""The benchmarks still run: each script under bench/ that needs no peer (Daydreams, nanobot)
is started at a tiny size, so a refactor that breaks one fails here, not on the next
measuring day. Figures are not checked: speed is the benchmarks' business, not the suite's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_soak_runs_and_samples_each_window(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    args = ["--turns", "300", "--conversations", "20", "--capacity-turns", "60", "--max-runs", "100"]
    proc = run("soak.py", *args, "--prune-interval", "0.2", "--sample", "0.2", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(out.read_text(encoding="utf-8"))
    assert res["turns"] == 300 and res["failed"] == 0
    assert res["samples"], "the soak took no samples"
    assert {"lag_p99_ms", "callback_max_cpu_ms", "gc_max_cpu_ms"} <= set(res["samples"][-1])
