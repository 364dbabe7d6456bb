"""Every response carries the security headers, raised ones too (issue 24, finding 10), and
/healthz tells anyone only ok, degraded or down: the runs, the queue and where the database
is need the [http] token (finding 8)."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from hub import Extension, HubConfig, Input
from hub.config import HttpSection, WebhookSection

from .test_server import SECRET

TOKEN = "headers-token-0123456789"
BEARER = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def http_config(config: HubConfig) -> HubConfig:
    config.http = HttpSection(port=0, token=TOKEN)
    config.webhooks = {"deploys": WebhookSection(context="test:chat:42", secret=SECRET)}
    return config


def assert_secured(resp: aiohttp.ClientResponse, what: str) -> None:
    h = resp.headers
    assert h.get("X-Content-Type-Options") == "nosniff", what
    assert h.get("X-Frame-Options") == "DENY", what
    assert "frame-ancestors 'none'" in h.get("Content-Security-Policy", ""), what
    assert h.get("Referrer-Policy") == "same-origin", what
    assert "aiohttp" not in h.get("Server", "") and "Python" not in h.get("Server", ""), what


async def test_every_response_carries_the_security_headers(http_config: HubConfig, make_chat_hub) -> None:
    async with make_chat_hub() as hub, aiohttp.ClientSession() as session:
        base = f"http://127.0.0.1:{hub.http.port}"
        seen = {}
        for method, path, headers in [
            ("GET", "/healthz", {}),
            ("GET", "/metrics", BEARER),
            ("GET", "/nowhere", {}),  # the router's 404
            ("POST", "/healthz", {}),  # the router's 405
            ("GET", "/ui", {}),  # a redirect raised by a handler (308)
            ("GET", "/ui/", {}),  # the dashboard's 303 to its login, raised
            ("GET", "/ui/nowhere", {}),  # the dashboard's own 404 (no session: 303 first)
            ("GET", "/ui/login", {}),
            ("GET", "/ui/static/htmx.min.js", {}),
            ("POST", "/webhooks/deploys", {}),  # 401
            ("GET", f"/runs/{'0' * 8}", BEARER),  # 404 as JSON
        ]:
            async with session.request(method, base + path, headers=headers, allow_redirects=False) as resp:
                seen[(method, path)] = resp.status
                assert_secured(resp, f"{method} {path} -> {resp.status}")
                if path.startswith("/ui"):
                    assert "script-src 'self'" in resp.headers["Content-Security-Policy"]
                else:
                    assert resp.headers["Content-Security-Policy"].startswith("default-src 'none'")
        assert seen[("GET", "/nowhere")] == 404 and seen[("POST", "/healthz")] == 405
        assert seen[("GET", "/ui/")] == 303 and seen[("GET", "/ui")] == 308
        # a stream the handler prepares itself gets them too
        async with session.get(f"{base}/events", headers=BEARER) as resp:
            assert resp.status == 200 and resp.headers["Content-Type"].startswith("text/event-stream")
            assert_secured(resp, "GET /events")


async def test_healthz_tells_anyone_only_its_status_and_the_details_need_the_token(
    http_config: HubConfig, make_chat_hub
) -> None:
    async with make_chat_hub() as hub, aiohttp.ClientSession() as session:
        url = f"http://127.0.0.1:{hub.http.port}/healthz"
        for headers in ({}, {"Authorization": "Bearer wrong-token-0123456789"}, {"Authorization": TOKEN}):
            async with session.get(url, headers=headers) as resp:
                assert resp.status == 200 and await resp.json() == {"status": "ok"}
                assert "aiohttp" not in resp.headers.get("Server", "")
        async with session.get(url, headers=BEARER) as resp:
            body = await resp.json()
        assert body["status"] == "ok" and body["runs_running"] == 0 and body["queue_depth"] == 0
        assert body["database"]["backend"] == "sqlite"


def listener(stopping: asyncio.Event, release: asyncio.Event) -> Extension:
    """An input whose stop holds the hub's stop until the test releases it."""

    async def subscribe(send: Any, hub: Any) -> Any:
        async def stop() -> None:
            stopping.set()
            await release.wait()

        return stop

    return Extension(name="listener", inputs=[Input(type="listener:event", subscribe=subscribe)])


async def test_healthz_says_down_once_the_hub_stops_taking_input(http_config: HubConfig, make_chat_hub) -> None:
    stopping, release = asyncio.Event(), asyncio.Event()
    hub = make_chat_hub(extra=[listener(stopping, release)])
    await hub.start()
    stop = asyncio.create_task(hub.stop())
    try:
        await stopping.wait()  # the hub is stopping; its endpoint still answers
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{hub.http.port}/healthz") as resp:
                assert resp.status == 503 and await resp.json() == {"status": "down"}
    finally:
        release.set()
        await stop
