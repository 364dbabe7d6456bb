"""The HTTP endpoint on loopback: webhooks (auth, limits, wait), /healthz, /metrics."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from hub import ConfigError, Hub, HubConfig
from hub.config import HttpSection, WebhookSection, config_from_dict
from hub.http import signature
from tests._support.chat import Said, reply_to_input, test_extension

SECRET = "s3cret-token-for-tests"


@pytest.fixture
def http_config(config: HubConfig) -> HubConfig:
    config.http = HttpSection(port=0, max_body=1024)
    config.webhooks = {"deploys": WebhookSection(context="test:chat:42", secret=SECRET)}
    return config


@pytest.fixture
async def served(http_config: HubConfig, make_chat_hub) -> AsyncIterator[tuple[Hub, aiohttp.ClientSession, str]]:
    async with make_chat_hub() as hub:
        assert hub.http is not None and hub.http.port
        async with aiohttp.ClientSession() as session:
            yield hub, session, f"http://127.0.0.1:{hub.http.port}"


def signed(body: bytes, secret: str = SECRET) -> dict[str, str]:
    return {"X-Hub-Signature-256": signature(secret, body), "Content-Type": "application/json"}


async def no_runs(hub: Hub) -> None:
    assert await hub.runs.list() == []
    assert await hub.inbox.pending() == []


async def test_a_signed_webhook_starts_a_run_and_answers_its_id(served, said: Said) -> None:
    hub, session, base = served
    body = json.dumps({"service": "api", "version": "1.2.3"}).encode()
    async with session.post(f"{base}/webhooks/deploys", data=body, headers=signed(body)) as resp:
        assert resp.status == 202
        answer = await resp.json()
    run_id = answer["run_id"]
    assert answer["context"] == "test:chat:42"
    await said.wait_for(1)
    run = await hub.runs.get(run_id)
    assert run is not None and run.context == "test:chat:42"
    first = (await hub.runs.events(run_id))[0]
    assert first.kind == "input" and first.type == "webhook"
    assert first.content == {"service": "api", "version": "1.2.3"}
    assert first.meta == {"webhook": "deploys"}


async def test_a_bearer_token_with_wait_answers_the_terminal_state_and_outputs(served, said: Said) -> None:
    hub, session, base = served
    headers = {"Authorization": f"Bearer {SECRET}"}
    async with session.post(f"{base}/webhooks/deploys?wait=1", json={"msg": "hi"}, headers=headers) as resp:
        assert resp.status == 200
        answer = await resp.json()
    assert answer["state"] == "completed" and answer["reason"] is None
    assert answer["outputs"] == [{"type": "test:say", "content": 'echo: {"msg": "hi"}', "sent": True, "error": None}]
    assert (await hub.runs.get(answer["run_id"])).state == "completed"


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({"X-Hub-Signature-256": "sha256=" + "0" * 64}, "does not match the body"),
        ({"X-Hub-Signature-256": "md5=abc"}, "must be 'sha256=HEX'"),
        ({"Authorization": "Bearer wrong"}, "bearer token does not match"),
        ({"Authorization": "Basic czNjcmV0"}, "must be 'Bearer SECRET'"),
        ({}, "missing Authorization"),
    ],
)
async def test_a_bad_signature_runs_nothing(served, headers: dict[str, str], message: str) -> None:
    hub, session, base = served
    async with session.post(f"{base}/webhooks/deploys", data=b'{"a": 1}', headers=headers) as resp:
        assert resp.status == 401
        assert message in (await resp.json())["error"]
    await no_runs(hub)


async def test_a_signature_of_another_body_runs_nothing(served) -> None:
    hub, session, base = served
    async with session.post(f"{base}/webhooks/deploys", data=b'{"a": 2}', headers=signed(b'{"a": 1}')) as resp:
        assert resp.status == 401
    await no_runs(hub)


async def test_bad_json_too_large_and_unknown_names_are_4xx_and_run_nothing(served) -> None:
    hub, session, base = served
    bad = b'{"a": '
    async with session.post(f"{base}/webhooks/deploys", data=bad, headers=signed(bad)) as resp:
        assert resp.status == 400
        assert "not valid JSON" in (await resp.json())["error"]
    empty = b""
    async with session.post(f"{base}/webhooks/deploys", data=empty, headers=signed(empty)) as resp:
        assert resp.status == 400
    big = json.dumps({"x": "y" * 2000}).encode()
    async with session.post(f"{base}/webhooks/deploys", data=big, headers=signed(big)) as resp:
        assert resp.status == 413
        assert "larger than 1024 bytes" in (await resp.json())["error"]

    async def chunked() -> AsyncIterator[bytes]:  # no Content-Length: counted while read
        for _ in range(3):
            yield b" " * 600

    async with session.post(
        f"{base}/webhooks/deploys", data=chunked(), headers={"Authorization": f"Bearer {SECRET}"}
    ) as resp:
        assert resp.status == 413
    async with session.post(f"{base}/webhooks/nope", data=b"{}", headers=signed(b"{}")) as resp:
        assert resp.status == 401  # as a wrong signature: names cannot be enumerated
    async with session.get(f"{base}/webhooks/deploys") as resp:
        assert resp.status == 405
    await no_runs(hub)


async def test_a_redelivery_with_the_same_idempotency_key_runs_once(served, said: Said) -> None:
    hub, session, base = served
    headers = {"Authorization": f"Bearer {SECRET}", "Idempotency-Key": "delivery-1"}
    async with session.post(f"{base}/webhooks/deploys", json={"n": 1}, headers=headers) as resp:
        assert resp.status == 202
    async with session.post(f"{base}/webhooks/deploys", json={"n": 1}, headers=headers) as resp:
        assert resp.status == 200
        assert (await resp.json())["duplicate"] is True
    await said.wait_for(1)
    assert len(await hub.runs.list()) == 1


async def test_healthz(served) -> None:
    _, session, base = served
    async with session.get(f"{base}/healthz") as resp:
        assert resp.status == 200
        assert (await resp.json())["status"] == "ok"


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


async def test_metrics_parse_and_count_runs_steps_tokens_and_platform_sends(served, said: Said) -> None:
    hub, session, base = served
    headers = {"Authorization": f"Bearer {SECRET}"}
    async with session.post(f"{base}/webhooks/deploys?wait=1", json={"n": 1}, headers=headers) as resp:
        assert resp.status == 200
    hub.metrics.platform_send("telegram", True)
    hub.metrics.platform_send("telegram", False)
    hub.metrics.platform_429("telegram")
    async with session.get(f"{base}/metrics") as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/plain")
        text = await resp.text()
    families = {f.name for f in text_string_to_metric_families(text)}
    assert {
        "hub_runs",
        "hub_run_steps",
        "hub_tokens",
        "hub_llm_latency_seconds",
        "hub_run_duration_seconds",
        "hub_runs_running",
        "hub_queue_depth",
        "hub_llm_waiting",
        "hub_platform_sends",
        "hub_platform_rate_limited",
        "hub_webhook_requests",
        "hub_outputs",
        "hub_schedule_fires",
    } <= families
    got = samples(text)
    assert got[("hub_runs_total", (("context_type", "test:chat"), ("state", "completed")))] == 1
    assert got[("hub_run_steps_total", (("context_type", "test:chat"),))] == 1
    assert got[("hub_tokens_total", (("kind", "prompt"),))] > 0
    assert got[("hub_tokens_total", (("kind", "completion"),))] > 0
    assert got[("hub_llm_latency_seconds_count", ())] == 1
    assert got[("hub_queue_depth", ())] == 0
    assert got[("hub_outputs_total", (("result", "sent"), ("type", "test:say")))] == 1
    assert got[("hub_platform_sends_total", (("platform", "telegram"), ("result", "ok")))] == 1
    assert got[("hub_platform_sends_total", (("platform", "telegram"), ("result", "error")))] == 1
    assert got[("hub_platform_rate_limited_total", (("platform", "telegram"),))] == 1
    assert got[("hub_webhook_requests_total", (("status", "200"), ("webhook", "deploys")))] == 1


async def test_two_hubs_in_one_process_keep_their_own_metrics(config: HubConfig, make_chat_hub) -> None:
    a, b = make_chat_hub(), make_chat_hub()
    a.metrics.platform_429("discord")
    assert a.metrics.registry.get_sample_value("hub_platform_rate_limited_total", {"platform": "discord"}) == 1
    assert b.metrics.registry.get_sample_value("hub_platform_rate_limited_total", {"platform": "discord"}) is None


async def test_the_endpoint_is_off_without_an_http_table(config: HubConfig, make_chat_hub) -> None:
    config.webhooks = {"deploys": WebhookSection(context="test:chat:42", secret=SECRET)}
    hub = make_chat_hub()
    assert hub.http is None
    assert not any(type(c).__name__ == "HttpServer" for c in hub.components)


async def test_a_webhook_to_an_unknown_context_is_a_config_error_at_start(
    http_config: HubConfig, make_chat_hub
) -> None:
    http_config.webhooks = {"deploys": WebhookSection(context="nope:chat:1", secret=SECRET)}
    with pytest.raises(ConfigError, match=r"webhooks\.deploys\.context"):
        async with make_chat_hub():
            pass


def test_config_defaults_and_errors() -> None:
    cfg = config_from_dict({"http": {}})
    assert (cfg.http.host, cfg.http.port) == ("127.0.0.1", 8080)
    assert config_from_dict({}).http is None
    with pytest.raises(
        ConfigError, match=r"webhooks\.deploys\.secret: \$\{UNSET_SECRET\} is not set, and this key needs a value"
    ):
        config_from_dict(
            {"webhooks": {"deploys": {"context": "telegram:chat:42", "secret": "${UNSET_SECRET}"}}}, env={}
        )
    with pytest.raises(ConfigError, match=r"webhooks\.deploys\.secret: .*must not be empty"):
        config_from_dict({"webhooks": {"deploys": {"context": "telegram:chat:42", "secret": "${EMPTY:-}"}}}, env={})
    with pytest.raises(ConfigError, match=r"webhooks\.deploys\.context"):
        config_from_dict({"webhooks": {"deploys": {"context": "telegram", "secret": SECRET}}})


async def test_either_credential_is_enough(served, said: Said) -> None:
    hub, session, base = served
    body = b'{"a": 1}'
    headers = {**signed(body), "Authorization": "Basic cHJveHk6cGFzcw=="}  # a proxy's, not ours
    async with session.post(f"{base}/webhooks/deploys", data=body, headers=headers) as resp:
        assert resp.status == 202


async def test_wait_gives_up_with_504_and_the_run_goes_on(http_config: HubConfig, said: Said) -> None:
    from hub import ScriptedModel

    http_config.webhooks = {"slow": WebhookSection(context="test:chat:1", secret=SECRET, wait_timeout=0.1)}
    model = ScriptedModel(reply_to_input, delay=0.5)
    hub = Hub(http_config, model=model, load_extensions=False, extensions=[test_extension(said)])
    async with hub, aiohttp.ClientSession() as session:
        url = f"http://127.0.0.1:{hub.http.port}/webhooks/slow?wait=1"
        async with session.post(url, json={"n": 1}, headers={"Authorization": f"Bearer {SECRET}"}) as resp:
            assert resp.status == 504
            answer = await resp.json()
        assert answer["run_id"] and "did not end within 0.1s" in answer["error"]
        result = await hub.send("test:chat:1", data="after")  # queued behind the slow run
        assert result is not None and result.ok
        assert (await hub.runs.get(answer["run_id"])).state == "completed"
