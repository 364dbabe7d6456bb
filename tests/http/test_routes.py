"""Routes that extensions mount on the [http] endpoint (``Extension(routes=[Route(...)])``):
authenticated by their secret header (or a verifier of their signature) before the body is
read, size-capped, JSON (or form) checked, and refused where they would shadow the hub's own paths."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from hub import ConfigError, Extension, ExtensionError, Hub, HubConfig, Route, RouteAnswer, RouteRequest
from hub.config import HttpSection

SECRET = "route-secret_0123456789"  # 16 characters at least, as every webhook secret
HEADER = "X-Platform-Secret"


class Received:
    def __init__(self) -> None:
        self.requests: list[RouteRequest] = []
        self.arrived = asyncio.Event()

    async def handle(self, request: RouteRequest) -> RouteAnswer | None:
        self.requests.append(request)
        self.arrived.set()
        if request.data == {"refuse": True}:
            return RouteAnswer(422, {"error": "refused by the extension"})
        return None


def platform(received: Received, **route: Any) -> Extension:
    route.setdefault("path", "/platform/updates")
    return Extension(
        name="platform", routes=[Route(handler=received.handle, secret_header=HEADER, secret=SECRET, **route)]
    )


@pytest.fixture
async def served(config: HubConfig, make_chat_hub) -> AsyncIterator[tuple[Received, aiohttp.ClientSession, str]]:
    config.http = HttpSection(port=0, max_body=1024)
    received = Received()
    async with make_chat_hub(extra=[platform(received)]) as hub:
        assert hub.http is not None and hub.http.port
        async with aiohttp.ClientSession() as session:
            yield received, session, f"http://127.0.0.1:{hub.http.port}/platform/updates"


async def test_a_request_with_the_secret_reaches_the_handler(served) -> None:
    received, session, url = served
    async with session.post(url, json={"update_id": 1, "text": "hi"}, headers={HEADER: SECRET}) as resp:
        assert (resp.status, await resp.json()) == (200, {"ok": True})
    (request,) = received.requests
    assert request.data == {"update_id": 1, "text": "hi"} and request.path == "/platform/updates"
    async with session.post(url, json={"refuse": True}, headers={HEADER: SECRET}) as resp:
        assert (resp.status, await resp.json()) == (422, {"error": "refused by the extension"})


async def test_wrong_missing_or_oversized_requests_never_reach_the_handler(served) -> None:
    received, session, url = served
    for headers in ({}, {HEADER: "wrong"}, {HEADER: SECRET + "x"}, {"Authorization": f"Bearer {SECRET}"}):
        async with session.post(url, json={"update_id": 1}, headers=headers) as resp:
            assert resp.status == 401, headers
            assert HEADER in (await resp.json())["error"]
    async with session.post(url, data=b'{"a": "' + b"x" * 2000 + b'"}', headers={HEADER: SECRET}) as resp:
        assert resp.status == 413
    async with session.post(url, data=b"{not json", headers={HEADER: SECRET}) as resp:
        assert resp.status == 400 and "body refused" in (await resp.json())["error"]
    async with session.post(url, data=b"", headers={HEADER: SECRET}) as resp:
        assert resp.status == 400
    async with session.get(url, headers={HEADER: SECRET}) as resp:
        assert resp.status == 405
    # a good request afterwards is the first the handler sees
    async with session.post(url, data=json.dumps({"n": 1}), headers={HEADER: SECRET}) as resp:
        assert resp.status == 200
    assert [r.data for r in received.requests] == [{"n": 1}]


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/webhooks/telegram", "the hub's own path"),
        ("/healthz", "the hub's own path"),
        ("/", "name something"),
        ("relative", "must start with '/'"),
    ],
)
def test_routes_may_not_shadow_the_hubs_paths(config: HubConfig, make_chat_hub, path: str, message: str) -> None:
    with pytest.raises(ExtensionError, match=message):
        make_chat_hub(extra=[platform(Received(), path=path)])


def test_a_route_needs_a_secret_and_a_unique_path(config: HubConfig, make_chat_hub) -> None:
    received = Received()
    with pytest.raises(ExtensionError, match="needs a secret"):
        make_chat_hub(extra=[Extension(name="p", routes=[Route("/p", received.handle, HEADER, "")])])
    short = "q7" * 7  # 14 characters: found by trying
    with pytest.raises(ExtensionError, match="its secret is 14 characters: it needs at least 16") as e:
        make_chat_hub(extra=[Extension(name="p", routes=[Route("/p", received.handle, HEADER, short)])])
    assert short not in str(e.value)
    other = Extension(name="other", routes=[Route("/platform/updates", received.handle, HEADER, SECRET)])
    with pytest.raises(ExtensionError, match="route '/platform/updates' is already defined by extension 'platform'"):
        make_chat_hub(extra=[platform(received), other])


async def test_routes_without_the_http_endpoint_stop_the_start(config: HubConfig, make_chat_hub) -> None:
    hub: Hub = make_chat_hub(extra=[platform(Received())])
    with pytest.raises(ConfigError, match=r"\[http\].*platform \(/platform/updates\)"):
        await hub.start()


# --- routes proven by a signature of the body (Slack's Events API), and form bodies -----------


class Signed:
    """A verifier: the header ``X-Stamp`` must be "fresh" before the body is read, and
    ``X-Sig`` must be the body's SHA-256 once it is."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    def headers(self, headers: Any) -> str | None:
        return None if headers.get("X-Stamp") == "fresh" else "X-Stamp is stale: a replay"

    def body(self, headers: Any, body: bytes) -> str | None:
        self.bodies.append(body)
        return None if headers.get("X-Sig") == hashlib.sha256(body).hexdigest() else "X-Sig does not match"


def _sig(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


async def test_a_signed_route_checks_the_headers_before_the_body_and_the_signature_before_parsing(
    config: HubConfig, make_chat_hub
) -> None:
    config.http = HttpSection(port=0, max_body=1024, body_timeout=5)
    received, signed = Received(), Signed()
    route = Route("/signed/events", received.handle, verify=signed, forms=True)
    async with make_chat_hub(extra=[Extension(name="signed", routes=[route])]) as hub:
        assert hub.http is not None
        url = f"http://127.0.0.1:{hub.http.port}/signed/events"
        # a stale stamp is refused from the headers alone: the body that never comes is not waited for
        reader, writer = await asyncio.open_connection("127.0.0.1", hub.http.port)
        writer.write(b"POST /signed/events HTTP/1.1\r\nHost: x\r\nX-Stamp: old\r\nContent-Length: 100\r\n\r\n")
        await writer.drain()
        status = await asyncio.wait_for(reader.readline(), 2)
        assert b" 401 " in status
        writer.close()
        assert signed.bodies == []
        async with aiohttp.ClientSession() as session:
            form = b"command=%2Fhelp&text=a+b&empty="
            for headers, expected in (
                ({"X-Stamp": "fresh", "X-Sig": "forged"}, 401),
                ({"X-Sig": _sig(form)}, 401),
                ({"X-Stamp": "fresh", "X-Sig": _sig(form)}, 200),
            ):
                headers["Content-Type"] = "application/x-www-form-urlencoded"
                async with session.post(url, data=form, headers=headers) as resp:
                    assert resp.status == expected, await resp.text()
            body = json.dumps({"type": "event_callback"}).encode()
            async with session.post(url, data=body, headers={"X-Stamp": "fresh", "X-Sig": _sig(body)}) as resp:
                assert resp.status == 200
    assert [r.data for r in received.requests] == [
        {"command": "/help", "text": "a b", "empty": ""},
        {"type": "event_callback"},
    ]


def test_a_route_without_a_secret_needs_a_verifier(config: HubConfig, make_chat_hub) -> None:
    received = Received()
    with pytest.raises(ExtensionError, match="needs a secret or a verify"):
        make_chat_hub(extra=[Extension(name="p", routes=[Route("/p", received.handle)])])
    make_chat_hub(extra=[Extension(name="p", routes=[Route("/p", received.handle, verify=Signed())])])


async def test_a_route_with_a_get_handler_answers_its_subscription_check_as_bare_text(
    config: HubConfig, make_chat_hub
) -> None:
    """A platform that checks its webhook with a GET (Meta's hub.challenge) gets the query and
    answers bare text; the POST at the same path still needs the secret."""
    config.http = HttpSection(port=0, max_body=1024)
    received = Received()
    checks: list[RouteRequest] = []

    async def check(request: RouteRequest) -> RouteAnswer:
        checks.append(request)
        if request.query.get("token") != "right":
            return RouteAnswer(403, text="Forbidden")
        return RouteAnswer(text=request.query.get("challenge", ""))

    ext = Extension(
        name="platform",
        routes=[Route("/platform/updates", received.handle, secret_header=HEADER, secret=SECRET, get=check)],
    )
    async with make_chat_hub(extra=[ext]) as hub:
        assert hub.http is not None and hub.http.port
        url = f"http://127.0.0.1:{hub.http.port}/platform/updates"
        async with aiohttp.ClientSession() as session:
            async with session.get(url, params={"token": "right", "challenge": "1158201444"}) as resp:
                assert (resp.status, resp.content_type, await resp.text()) == (200, "text/plain", "1158201444")
            async with session.get(url, params={"token": "wrong", "challenge": "x"}) as resp:
                assert (resp.status, await resp.text()) == (403, "Forbidden")
            async with session.post(url, json={"n": 1}) as resp:
                assert resp.status == 401
    assert [c.query.get("token") for c in checks] == ["right", "wrong"] and not received.requests
