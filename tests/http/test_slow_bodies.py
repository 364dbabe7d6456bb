"""Every request's body has a deadline and a cap before it is proven, whatever its route: slow
dashboard logins, webhooks and extension routes by the hundred cannot hold the endpoint, and
/healthz and a signed webhook are still answered (issue 24, finding 1)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import aiohttp

from hub import Extension, HubConfig, Route, RouteRequest
from hub.config import HttpSection, WebhookSection
from tests._support.chat import Said

from .test_server import SECRET, signed

TOKEN = "slow-bodies-token-0123456789"
ROUTE_SECRET = "slow-route-secret-0123456789"


def route_extension() -> Extension:
    async def handle(request: RouteRequest) -> None:
        return None

    return Extension(name="platform", routes=[Route("/platform/updates", handle, "X-Platform-Secret", ROUTE_SECRET)])


def config_for(config: HubConfig, *, body_timeout: float) -> HubConfig:
    config.http = HttpSection(port=0, token=TOKEN, header_timeout=30.0, body_timeout=body_timeout)
    config.webhooks = {"deploys": WebhookSection(context="test:chat:42", secret=SECRET)}
    return config


LOGIN = (
    b"POST /ui/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n"
    b"Content-Length: 200\r\n\r\ntoken="
)
UNSIGNED_HOOK = (  # a signature to check against a body that never comes
    b"POST /webhooks/deploys HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"X-Hub-Signature-256: sha256=" + b"0" * 64 + b"\r\nContent-Length: 200\r\n\r\n{"
)
WRONG_ROUTE = (
    b"POST /platform/updates HTTP/1.1\r\nHost: x\r\nX-Platform-Secret: guessed-0123456789\r\n"
    b"Content-Length: 200\r\n\r\n{"
)


async def open_bodies(port: int, n: int, head: bytes) -> list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    """``n`` connections that send ``head`` (a request's headers and the start of its body), then nothing."""
    out = []
    for _ in range(n):
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(head)
        out.append((r, w))
    return out


async def headers_handled(hub, n: int) -> None:
    """Until ``n`` connections are open and the endpoint has read all their headers."""
    guard = hub.http._guard
    async with asyncio.timeout(10):
        while not (len(guard.live) >= n and all(c._deadline is None for c in guard.live.values())):
            await asyncio.sleep(0.01)


def close(conns: Sequence[tuple[asyncio.StreamReader, asyncio.StreamWriter]]) -> None:
    for _, w in conns:
        w.close()


async def test_hundreds_of_slow_bodies_on_every_route_leave_healthz_and_a_signed_webhook_answered(
    config: HubConfig, make_chat_hub, said: Said
) -> None:
    """The issue's attack: 260 logins that send their headers and then nothing (the endpoint
    holds 256), with slow unsigned webhooks and routes with a guessed secret beside them."""
    config_for(config, body_timeout=30.0)  # eviction, not the deadline, has to make room here
    async with make_chat_hub(extra=[route_extension()]) as hub, aiohttp.ClientSession() as session:
        port, guard = hub.http.port, hub.http._guard
        logins = await open_bodies(port, 260, LOGIN)
        await headers_handled(hub, 256)
        assert not any(c.proven for c in guard.live.values())  # a login still sending its body proves nothing
        hooks = await open_bodies(port, 100, UNSIGNED_HOOK)
        routes = await open_bodies(port, 40, WRONG_ROUTE)
        try:
            for r, _ in routes:  # a route's secret is checked from its headers: refused before any body
                assert (await asyncio.wait_for(r.readline(), 5)).startswith(b"HTTP/1.1 401")
            t0 = time.monotonic()
            async with session.get(f"http://127.0.0.1:{port}/healthz", timeout=aiohttp.ClientTimeout(total=5)) as resp:
                assert resp.status == 200
            body = b'{"deploy": 1}'
            async with session.post(
                f"http://127.0.0.1:{port}/webhooks/deploys?wait=1",
                data=body,
                headers=signed(body),
                timeout=aiohttp.ClientTimeout(total=5),
            ) as resp:
                assert resp.status == 200 and (await resp.json())["state"] == "completed"
            assert time.monotonic() - t0 < 5
            assert len(guard.live) <= 256 and guard.evicted >= 260 + 100 - 256
            assert guard.refused == 0  # nobody was told 503
        finally:
            close([*logins, *hooks, *routes])


async def test_a_login_body_has_a_deadline_and_a_small_cap(config: HubConfig, make_chat_hub) -> None:
    config_for(config, body_timeout=1.0)
    async with make_chat_hub() as hub:
        port = hub.http.port
        (r, w), *_ = await open_bodies(port, 1, LOGIN)
        t0 = time.monotonic()
        line = await asyncio.wait_for(r.readline(), 5)
        assert line.startswith(b"HTTP/1.1 408") and 0.5 < time.monotonic() - t0 < 4
        w.close()
        # a login is a form with the token: a larger one is refused from its headers, unread
        (r, w), *_ = await open_bodies(port, 1, LOGIN.replace(b"Content-Length: 200", b"Content-Length: 100000"))
        assert (await asyncio.wait_for(r.readline(), 5)).startswith(b"HTTP/1.1 413")
        w.close()
        # and one sent in chunks is cut where it passes the cap
        async with aiohttp.ClientSession() as session:

            async def chunks():
                yield b"token=" + b"x" * 3000
                yield b"x" * 3000

            url = f"http://127.0.0.1:{port}/ui/login"
            headers = {"Content-Type": "application/x-www-form-urlencoded"}
            async with session.post(url, data=chunks(), headers=headers) as resp:
                assert resp.status == 413
            async with session.post(url, data={"token": TOKEN}, allow_redirects=False) as resp:
                assert resp.status == 303  # the right token, in time: logged in


async def test_a_slow_body_on_any_other_path_has_the_same_deadline(config: HubConfig, make_chat_hub) -> None:
    """A route that does not read a body is no hiding place for one; a path that does not
    exist is answered at once."""
    config_for(config, body_timeout=1.0)
    async with make_chat_hub() as hub:
        head = b"POST /ui/logout HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{"
        (r, w), *_ = await open_bodies(hub.http.port, 1, head)
        assert (await asyncio.wait_for(r.readline(), 5)).startswith(b"HTTP/1.1 408")
        w.close()
        head = b"POST /nowhere HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{"
        (r, w), *_ = await open_bodies(hub.http.port, 1, head)
        assert (await asyncio.wait_for(r.readline(), 5)).startswith(b"HTTP/1.1 404")
        w.close()
