"""A bot configured with two models, through the whole hub, with the real openai client
against two loopback fakes: it keeps answering through an outage of the first; when every
model fails the run fails once with one failure reply; a stream that broke after its
first output is not asked of another model; and no key shows anywhere."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import aiohttp

from hub import Hub, HubConfig, RunState, StepLog
from hub.config import HttpSection, ModelSection
from hub.testing import FakeOpenAI, ToolTurn
from hub_cli import CliSettings
from hub_cli import extension as cli_extension

CLI = ("cli:session", {"user": "ann"})
PRIMARY_KEY = "sk-primary-secret-0001"
POOL_KEY = "sk-primary-secret-0002"
BACKUP_KEY = "sk-backup-secret-0003"
TOKEN = "failover-http-token-0123456789"


def configure(config: HubConfig, primary: FakeOpenAI, backup: FakeOpenAI) -> None:
    config.model.provider = "openai"
    config.model.name = "primary-llm"
    config.model.base_url = primary.url
    config.model.api_key = PRIMARY_KEY
    config.model.retry_base_delay = 0  # the engine's retries do not wait here
    config.model.max_retries = 1
    config.models = {
        "backup": ModelSection(provider="openai", name="backup-llm", base_url=backup.url, api_key=BACKUP_KEY)
    }
    config.model.fallbacks = ["backup"]


def make(config: HubConfig, out: io.StringIO) -> Hub:
    """A hub that builds its own model from the config (so its metrics count the requests)."""
    return Hub(config, load_extensions=False, extensions=[cli_extension(CliSettings(stdin=False), out=out)])


def answer(text: str) -> str:
    return f"<response><output>{text}</output></response>"


async def cli(argv: list[str], config: HubConfig, tmp_path: Path) -> str:
    """What ``hub ARGV`` prints for the hub's data dir (run beside the test's loop)."""
    from hub.cli import main

    path = tmp_path / "config.toml"
    path.write_text(f'[hub]\ndata_dir = "{config.data_dir}"\n', encoding="utf-8")
    sink = io.StringIO()
    with redirect_stdout(sink), redirect_stderr(sink):
        code = await asyncio.to_thread(main, [*argv, "--config", str(path)])
    assert code == 0, sink.getvalue()
    return sink.getvalue()


async def test_a_bot_with_two_models_keeps_answering_through_an_outage_of_the_first(config, out, tmp_path) -> None:
    async with FakeOpenAI(default=answer("from primary")) as primary, FakeOpenAI(default=answer("backup")) as backup:
        configure(config, primary, backup)
        primary.fail_next("chat", status=500, count=100)  # the outage
        async with make(config, out) as hub:
            results = [await hub.send(*CLI, f"message {i}") for i in range(5)]
            problems = hub.model_problems()
            metrics = hub.metrics.render()[0].decode()
            runs = await hub.runs.list(limit=10)
    assert [r.state for r in results] == [RunState.COMPLETED] * 5
    assert out.getvalue() == "backup\n" * 5  # the user sees the answers, nothing else
    # the circuit opened after 3 failures in a row: the last two turns did not ask the primary
    assert len(primary.requests) == 3 and len(backup.requests) == 5
    assert list(problems) == ["model"] and "circuit open" in problems["model"]
    steps = [e for r in results for e in r.logs if isinstance(e, StepLog)]
    assert [s.model for s in steps] == ["backup"] * 5
    assert {r.models for r in runs} == {"backup"}
    assert 'hub_model_requests_total{model="model",outcome="server_error"} 3.0' in metrics
    assert 'hub_model_requests_total{model="model",outcome="skipped"} 2.0' in metrics
    assert 'hub_model_requests_total{model="backup",outcome="ok"} 5.0' in metrics
    assert 'hub_model_requests_total{model="backup",outcome="server_error"} 0.0' in metrics
    listing = await cli(["runs"], config, tmp_path)
    assert listing.splitlines()[0].split()[-2:] == ["models", "reason"] and listing.count(" backup ") == 5
    assert "answered by backup" in await cli(["trace", results[0].run_id], config, tmp_path)


async def test_when_every_model_fails_the_run_fails_once_with_one_failure_reply(config, out) -> None:
    config.agent.failure_reply = "Sorry, I cannot answer now."
    async with FakeOpenAI() as primary, FakeOpenAI() as backup:
        configure(config, primary, backup)
        primary.fail_next("chat", status=500, count=100)
        backup.fail_next("chat", status=503, count=100)
        async with make(config, out) as hub:
            result = await hub.send(*CLI, "hello?", user="ann")
            runs = await hub.runs.list(limit=10)
    assert result.state == RunState.FAILED
    assert "no model answered" in (result.reason or "")
    assert out.getvalue() == "Sorry, I cannot answer now.\n"  # once
    assert len(runs) == 1
    # each model asked once per attempt of the engine's bounded policy (max_retries = 1)
    assert len(primary.requests) == 2 and len(backup.requests) == 2


async def test_a_stream_that_broke_after_its_first_output_is_not_asked_of_another_model(config, out) -> None:
    broken = ToolTurn(content='<response><output type="cli:message">Hello from the primary</output>', drop=True)
    async with FakeOpenAI([broken], default=answer("done")) as primary, FakeOpenAI(default=answer("SECOND")) as backup:
        configure(config, primary, backup)
        async with make(config, out) as hub:
            result = await hub.send(*CLI, "hi")
    assert "Hello from the primary" in out.getvalue()
    assert "SECOND" not in out.getvalue()
    assert backup.requests == []
    assert result.state in (RunState.COMPLETED, RunState.FAILED)


async def test_keys_never_appear_in_logs_traces_errors_the_dashboard_or_metrics(
    config, out, tmp_path: Path, caplog
) -> None:
    """Every key is refused by a server that quotes it back (as OpenAI's 401 does): the
    run fails, and no key shows in the log, the run's events and reason, `hub trace`,
    `hub runs`, /healthz, /metrics or the dashboard's pages."""
    caplog.set_level(logging.DEBUG)
    config.agent.failure_reply = "Sorry."
    config.http = HttpSection(port=0, token=TOKEN)
    seen: list[str] = []
    async with FakeOpenAI() as primary, FakeOpenAI() as backup:
        configure(config, primary, backup)
        config.model.api_keys = [POOL_KEY]
        primary.fail_next("chat", status=401, retry_after=None, count=100)
        backup.fail_next("chat", status=401, retry_after=None, count=100)
        async with make(config, out) as hub:
            result = await hub.send(*CLI, "hello?", user="ann")
            events = await hub.runs.events(result.run_id)
            assert hub.http is not None
            base = f"http://127.0.0.1:{hub.http.port}"
            bearer = {"Authorization": f"Bearer {TOKEN}"}
            async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as s:
                for path in ("/healthz", "/metrics"):
                    async with s.get(base + path, headers=bearer) as resp:
                        seen.append(await resp.text())
                async with s.post(base + "/ui/login", data={"token": TOKEN}, allow_redirects=False) as resp:
                    assert resp.status == 303
                for path in (f"/ui/runs/{result.run_id}", f"/ui/runs/{result.run_id}/trace", "/ui/health", "/ui/"):
                    async with s.get(base + path) as resp:
                        assert resp.status == 200, path
                        seen.append(await resp.text())
        seen += [caplog.text, result.reason or "", json.dumps([repr(e) for e in events])]
    assert result.state == RunState.FAILED
    # the servers were given the keys, and quoted them back
    assert PRIMARY_KEY in json.dumps([r.headers for r in primary.requests])
    assert "key 1 of 2 refused" in (result.reason or "") and "key 1 of 1 refused" in (result.reason or "")
    assert '"models"' in seen[0] and "refused" in seen[0]  # /healthz, with the token, names them
    health_page = seen[4]
    assert "Model <code>backup</code> is not answering: key 1 of 1 refused (401/403)" in health_page
    assert "primary-llm (fallbacks: backup)" in health_page
    seen += [await cli(["runs"], config, tmp_path), await cli(["trace", result.run_id], config, tmp_path)]
    everything = "\n".join(seen)
    assert "refused" in everything
    for key in (PRIMARY_KEY, POOL_KEY, BACKUP_KEY):
        assert key not in everything
        assert key[-8:] not in everything  # nor a tail of one
