"""The health page as Grafana's reads: totals for today and the last hour, uptime, version and
model, charts with axes, units and a chosen window, and the failed runs one click away."""

from __future__ import annotations

import html
import re
import time
from pathlib import Path

import pytest

from hub.http.dashboard._charts import amount, chart, nice_max
from hub.store import InMemoryRunStore, RunRecord, RunState, RunStore
from hub.store.sql import PostgresRunStore, SqlRunStore
from tests._support.backends import BACKENDS, sql_database

from .conftest import client, dashboard, login


async def test_totals_uptime_version_model_and_the_failed_runs(tmp_path: Path) -> None:
    async with dashboard(tmp_path) as d, client() as s:
        now = time.time()
        midnight = now - now % 86400
        rows = [
            # (started, state, tokens, cost)
            (now - 60, RunState.COMPLETED, 100, 0.01),
            (now - 120, RunState.FAILED, 50, 0.005),
            (now - 600, RunState.COMPLETED, 10, 0.0),
            (max(midnight + 1, now - 3 * 3600), RunState.FAILED, 40, 0.002),  # today, before the last hour
            (midnight - 3600, RunState.FAILED, 1000, 1.0),  # yesterday: in neither total
        ]
        for started, state, tokens, cost in rows:
            r = RunRecord(
                context="telegram:chat:9",
                started=started,
                state=state,
                prompt_tokens=tokens,
                cost=cost,
                reason="boom" if state == RunState.FAILED else None,
            )
            await d.hub.runs.create(r)
            r.ended = started + 1
            await d.hub.runs.finish(r)
        await login(s, d.base)
        async with s.get(d.base + "/ui/health") as resp:
            page = html.unescape(await resp.text())
        today = page.split('id="totals-today-(UTC)"', 1)[1].split("</dl>", 1)[0]
        hour = page.split('id="totals-last-hour"', 1)[1].split("</dl>", 1)[0]
        in_hour = rows[:3] if now - rows[3][0] > 3600 else rows[:4]
        expected_today = rows[:4]
        for part, chosen in ((today, expected_today), (hour, in_hour)):
            failed = sum(1 for r in chosen if r[1] == RunState.FAILED)
            assert f"<dt>runs</dt><dd>{len(chosen)}</dd>" in part
            assert f'<dt>failures</dt><dd><a href="/ui/?state=failed" class="bad">{failed}</a></dd>' in part
            assert f"<dt>error rate</dt><dd>{failed / len(chosen) * 100:.1f} %</dd>" in part
            assert f"<dt>tokens</dt><dd>{sum(r[2] for r in chosen)}</dd>" in part
            assert f"<dt>cost</dt><dd>{sum(r[3] for r in chosen):.4f}</dd>" in part
        assert re.search(r'up <strong id="uptime">\d+ min \d+ s</strong>', page)
        assert '<strong id="version">0.1.0</strong>' in page and '<strong id="model">held</strong>' in page
        failures = page.split("<h2>Latest failed runs", 1)[1].split("</ul>", 1)[0]
        assert failures.count('<a href="/ui/runs/') == 3 and "boom" in failures  # newest first, a click away
        # the store's charts: the runs of the window as bars, with axes in UTC and a total
        runs_chart = page.split('id="chart-runs"', 1)[1].split("</figure>", 1)[0]
        assert "runs started: <strong>3 in the last 1h</strong>" in runs_chart or "4 in the last 1h" in runs_chart
        assert runs_chart.count("<rect") >= 2 and '<text class="x"' in runs_chart and '<text class="y"' in runs_chart
        assert (
            time.strftime("%H:%M", time.gmtime(now)) in runs_chart
            or time.strftime("%H:%M", time.gmtime(now + 60)) in runs_chart
        )  # the x axis ends now
        async with s.get(d.base + "/ui/health?window=24h") as resp:
            day = html.unescape(await resp.text())
        assert "runs started: <strong>4 in the last 24h</strong>" in day or "5 in the last 24h" in day
        assert '<a href="/ui/health?window=24h" aria-current="true">24h</a>' in day
        assert 'hx-get="/ui/health/charts?window=24h"' in day  # the polled part keeps the window
        async with s.get(d.base + "/ui/health?window=2y") as resp:
            assert resp.status == 400 and "window must be one of 15m, 1h, 6h, 24h" in html.unescape(await resp.text())


def test_a_chart_has_axes_with_units_round_maximums_and_gaps() -> None:
    svg = chart([None, 1.0, 3.0, None, 2.0], start=0.0, step=60.0, unit="ms", label="latency")
    assert ">5 ms</text>" in svg and ">0 ms</text>" in svg and ">2.5 ms</text>" in svg  # 0, half, a round top
    assert ">00:00</text>" in svg and ">00:05</text>" in svg  # the window's start and end, UTC
    assert svg.count("<polyline") == 1 and svg.count("<circle") == 1  # a gap where no sample was
    assert "<title>latency</title>" in svg
    bars = chart([0.0, 4.0, 0.0], start=0.0, step=60.0, unit="", label="runs", bars=True)
    assert bars.count("<rect") == 1
    assert [nice_max(v) for v in (0, 0.3, 1, 7, 12, 4500)] == [1, 0.5, 1, 10, 20, 5000]
    assert [amount(v) for v in (0, 3, 2.5, 1500, 25_000, 3_400_000)] == ["0", "3", "2.5", "1.5k", "25k", "3.4M"]
    escaped = chart([1.0], start=0.0, step=1.0, unit="<b>", label="<script>")
    assert "<script>" not in escaped and "<b>" not in escaped


@pytest.mark.parametrize("kind", BACKENDS)
async def test_totals_and_the_histogram_on_every_backend(tmp_path: Path, kind: str) -> None:
    if kind == "memory":
        await _check_totals(InMemoryRunStore())
        return
    async with sql_database(kind, tmp_path) as db:
        store = SqlRunStore(db) if kind == "sqlite" else PostgresRunStore(db)
        await store.open()
        await _check_totals(store)


async def _check_totals(store: RunStore) -> None:
    t0 = 1_700_000_000.0
    for started, state, tokens, cost in (
        (t0 - 1, RunState.FAILED, 7, 0.5),  # before the span
        (t0, RunState.COMPLETED, 10, 0.25),
        (t0 + 59.9, RunState.FAILED, 5, 0.125),
        (t0 + 60, RunState.COMPLETED, 1, 0.0),
        (t0 + 179, RunState.KILLED, 2, 0.0),
        (t0 + 180, RunState.COMPLETED, 100, 0.0),  # after the span
    ):
        await store.create(RunRecord(context="c:1", started=started, state=state, prompt_tokens=tokens, cost=cost))
    got = await store.totals(since=t0)
    assert (got.runs, got.failed, got.tokens, got.cost) == (5, 1, 118, 0.375) and got.error_rate == 0.2
    assert (await store.totals(since=t0 + 1000)).error_rate is None
    bins = await store.histogram(since=t0, width=60.0, buckets=3)
    assert [(b.runs, b.failed, b.tokens) for b in bins] == [(2, 1, 15), (1, 0, 1), (1, 0, 2)]
