"""``/metrics`` in both formats a Prometheus server reads, checked by prometheus_client's
own parsers (the OpenMetrics one is strict): OpenMetrics when the scraper asks for it,
labelled counters at 0 before their first event, the standard process collectors, the
build info, and the model's errors and retries."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

from hub import Hub, HubConfig, ModelError
from hub.config import HttpSection
from tests._support.chat import reply_to_input

# what Prometheus 2.42 sends when it scrapes
PROMETHEUS_ACCEPT = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"


@pytest.fixture
async def scraped(config: HubConfig, make_chat_hub) -> AsyncIterator[tuple[Hub, aiohttp.ClientSession, str]]:
    config.http = HttpSection(port=0, max_body=1024)
    config.model.retry_base_delay = 0.01
    failing = [ModelError("502 Bad Gateway (injected)", status=502, retryable=True), reply_to_input]
    async with make_chat_hub(failing) as hub:
        assert hub.http is not None and hub.http.port
        async with aiohttp.ClientSession() as session:
            yield hub, session, f"http://127.0.0.1:{hub.http.port}/metrics"


async def get(session: aiohttp.ClientSession, url: str, accept: str | None) -> tuple[str, str]:
    headers = {"Accept": accept} if accept else {}
    async with session.get(url, headers=headers) as resp:
        assert resp.status == 200
        return resp.headers["Content-Type"], await resp.text()


def sample(families: list, name: str, **labels: str) -> float | None:
    for family in families:
        for s in family.samples:
            if s.name == name and s.labels == labels:
                return float(s.value)
    return None


async def test_openmetrics_when_asked_classic_text_otherwise(scraped) -> None:
    hub, session, url = scraped
    kind, text = await get(session, url, PROMETHEUS_ACCEPT)
    assert kind.startswith("application/openmetrics-text") and text.endswith("# EOF\n")
    families = list(parse_openmetrics(text))  # strict: raises on anything out of the format
    types = {f.name: f.type for f in families}
    assert types["hub_runs"] == "counter" and types["hub_build"] == "info"
    assert not [name for name in types if name.endswith("_created")]  # part of their counter here
    kind, text = await get(session, url, None)
    assert kind.startswith("text/plain; version=0.0.4")
    assert {"hub_runs", "process_cpu_seconds"} <= {f.name for f in parse_text(text)}


async def test_counters_exist_at_zero_and_the_standard_collectors_are_there(scraped) -> None:
    hub, session, url = scraped
    _, text = await get(session, url, PROMETHEUS_ACCEPT)
    families = list(parse_openmetrics(text))
    # before any run: a rate() over them is 0, not "no data"
    for state in ("completed", "failed", "rejected", "killed"):
        assert sample(families, "hub_runs_total", state=state, context_type="test:chat") == 0
    assert sample(families, "hub_outputs_total", type="test:say", result="failed") == 0
    assert sample(families, "hub_model_errors_total", kind="server_error") == 0
    assert sample(families, "hub_model_retries_total") == 0
    names = {f.name for f in families}
    assert {"process_cpu_seconds", "process_resident_memory_bytes", "process_start_time_seconds"} <= names
    assert "python_info" in names
    (build,) = [s for f in families if f.name == "hub_build" for s in f.samples]
    assert build.labels["version"] and build.labels["python"]


async def test_a_model_error_that_is_retried_is_counted(scraped) -> None:
    hub, session, url = scraped
    result = await hub.send("test:chat:1", None, "hello")
    assert result is not None and result.ok  # the 502 was retried, then answered
    _, text = await get(session, url, PROMETHEUS_ACCEPT)
    families = list(parse_openmetrics(text))
    assert sample(families, "hub_model_errors_total", kind="server_error") == 1
    assert sample(families, "hub_model_retries_total") == 1
    assert sample(families, "hub_runs_total", state="completed", context_type="test:chat") == 1
    assert sample(families, "hub_runs_total", state="failed", context_type="test:chat") == 0


async def test_creation_times_are_in_openmetrics_only(scraped) -> None:
    # A scraper that does not negotiate OpenMetrics would store each `*_created` as a series
    hub, session, url = scraped
    await hub.send("test:chat:1", None, "hello")
    _, text = await get(session, url, None)
    families = list(parse_text(text))
    assert [f.name for f in families if f.name.endswith("_created")] == []
    assert not [s.name for f in families for s in f.samples if s.name.endswith("_created")]
    _, text = await get(session, url, PROMETHEUS_ACCEPT)
    created = {s.name for f in parse_openmetrics(text) for s in f.samples if s.name.endswith("_created")}
    assert {"hub_runs_created", "hub_run_duration_seconds_created"} <= created
