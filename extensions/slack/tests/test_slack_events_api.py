"""The Events API (``signing_secret`` set): Slack POSTs events and slash commands to
``events_path`` on the hub's ``[http]`` endpoint; each request's signature is checked before
its body is parsed, a stale or repeated one is refused as a replay, and a message is answered
once however often it is delivered."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp
import pytest
from test_slack import Running, running

from hub.config import HttpSection
from hub.testing import temp_config
from hub.testing.slack import SIGNING_SECRET, FakeSlack


@asynccontextmanager
async def served(tmp_path: Path, **settings: Any) -> AsyncIterator[tuple[Running, aiohttp.ClientSession, str]]:
    config = temp_config(tmp_path)
    config.http = HttpSection(port=0, max_body=64 * 1024)
    async with running(tmp_path, config=config, signing_secret=SIGNING_SECRET, app_token="", **settings) as r:
        assert r.hub.http is not None
        async with aiohttp.ClientSession() as session:
            yield r, session, f"http://127.0.0.1:{r.hub.http.port}/slack/events"


def event_body(sl: FakeSlack, text: str, *, channel: str | None = None, event_id: str = "Ev1") -> tuple[bytes, str]:
    st = sl.state
    ts = st.next_ts()
    channel = channel or st.dm
    st.messages[(channel, ts)] = {"channel": channel, "ts": ts}
    body = {
        "type": "event_callback",
        "team_id": st.team,
        "event_id": event_id,
        "event": {"type": "message", "channel": channel, "channel_type": "im", "user": st.user, "text": text, "ts": ts},
        "authorizations": [{"team_id": st.team, "user_id": st.bot_user, "is_bot": True}],
    }
    return json.dumps(body).encode(), ts


async def post(
    session: aiohttp.ClientSession, url: str, body: bytes, headers: dict[str, str], **kw: Any
) -> tuple[int, Any]:
    headers = {"Content-Type": "application/json", **headers}
    async with session.post(url, data=body, headers=headers, **kw) as resp:
        text = await resp.text()
        return resp.status, (json.loads(text) if text else None)


async def test_a_signed_event_is_answered_and_the_url_verified(tmp_path: Path) -> None:
    async with served(tmp_path) as (r, session, url):
        sl = r.sl
        challenge = json.dumps({"type": "url_verification", "challenge": "c-123", "token": "t"}).encode()
        assert await post(session, url, challenge, sl.signed(challenge)) == (200, {"challenge": "c-123"})
        body, ts = event_body(sl, "hello over HTTP")
        status, _ = await post(session, url, body, sl.signed(body))
        assert status == 200
        (sent,) = await sl.wait_sent(1)
        assert sent["channel"] == sl.state.dm and sent["text"] == "pong"
        assert await r.hub.received(f"slack:{sl.state.dm}:{ts}")
        assert sl.state.connections == 0 and not sl.calls("apps.connections.open"), "no Socket Mode"
        # Slack's retry of the same event (signed anew): acknowledged, not answered again
        again = sl.signed(body, at=int(time.time()) + 1)
        assert (await post(session, url, body, {**again, "X-Slack-Retry-Num": "1"}))[0] == 200
        body2, _ = event_body(sl, "a sentinel")
        assert (await post(session, url, body2, sl.signed(body2)))[0] == 200
        await sl.wait_sent(2)
        assert len(sl.sent) == 2


async def test_forged_stale_and_replayed_requests_are_refused_before_anything_is_taken(tmp_path: Path) -> None:
    async with served(tmp_path) as (r, session, url):
        sl = r.sl
        body, ts = event_body(sl, "nobody should see this")
        forged = sl.signed(body, secret="another-signing-secret-0123456789")
        stale = sl.signed(body, at=int(time.time()) - 301)
        future = sl.signed(body, at=int(time.time()) + 600)
        for headers in ({}, forged, stale, future, {"X-Slack-Signature": forged["X-Slack-Signature"]}):
            status, answer = await post(session, url, body, headers)
            assert status == 401, (headers, answer)
        # a body changed after signing
        good = sl.signed(body)
        tampered = body.replace(b"nobody", b"anybody")
        assert (await post(session, url, tampered, good))[0] == 401
        assert not await r.hub.received(f"slack:{sl.state.dm}:{ts}")
        # the genuine request is taken once; the very same request sent again is a replay
        assert (await post(session, url, body, good))[0] == 200
        status, answer = await post(session, url, body, good)
        assert status == 401 and "replay" in answer["error"]
        await sl.wait_sent(1)
        assert len(sl.sent) == 1


async def test_a_stale_request_is_refused_without_its_body_being_read(tmp_path: Path) -> None:
    import asyncio

    async with served(tmp_path) as (r, _session, url):
        assert r.hub.http is not None
        reader, writer = await asyncio.open_connection("127.0.0.1", r.hub.http.port)
        stamp = int(time.time()) - 3600
        writer.write(
            b"POST /slack/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"X-Slack-Request-Timestamp: {stamp}\r\nX-Slack-Signature: v0=00\r\n".encode()
            + b"Content-Length: 60000\r\n\r\n"
        )
        await writer.drain()
        status = await asyncio.wait_for(reader.readline(), 2)  # the body never comes: not waited for
        assert b" 401 " in status
        writer.close()


async def test_a_slash_command_posted_as_a_form_is_acked_with_its_answer_within_three_seconds(tmp_path: Path) -> None:
    async with served(tmp_path) as (r, session, url):
        sl, st = r.sl, r.sl.state
        form = urlencode(
            {
                "command": "/help",
                "text": "",
                "channel_id": st.dm,
                "user_id": st.user,
                "team_id": st.team,
                "trigger_id": "trig.http.1",
                "response_url": f"{sl.base_url}/respond/trig.http.1",
            }
        ).encode()
        headers = {**sl.signed(form), "Content-Type": "application/x-www-form-urlencoded"}
        started = time.monotonic()
        async with session.post(url, data=form, headers=headers) as resp:
            assert resp.status == 200
            answer = await resp.json()
        assert time.monotonic() - started < 3.0
        assert answer["response_type"] == "in_channel" and "/new" in answer["text"]
        assert await r.hub.received("slack:command:trig.http.1")


async def test_an_event_the_store_could_not_record_is_answered_503_and_taken_when_sent_again(tmp_path: Path) -> None:
    from test_slack import FailingInbox

    async with served(tmp_path, inbox=FailingInbox(1)) as (r, session, url):
        sl = r.sl
        body, ts = event_body(sl, "keep me")
        status, answer = await post(session, url, body, sl.signed(body))
        assert status == 503 and "delivers it again" in answer["error"]
        assert not await r.hub.received(f"slack:{sl.state.dm}:{ts}")
        retry = sl.signed(body, at=int(time.time()) + 1)  # Slack's retry, signed anew
        assert (await post(session, url, body, {**retry, "X-Slack-Retry-Num": "1"}))[0] == 200
        (sent,) = await sl.wait_sent(1)
        assert sent["text"] == "pong"


async def test_a_poison_event_is_answered_503_until_parked_and_parked_at_once_at_slacks_last_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_slack import poison_on

    from hub_slack._intake import LAST_RETRY, PARK_AFTER

    attempts = poison_on(monkeypatch, "poison")
    async with served(tmp_path) as (r, session, url):
        sl, now = r.sl, int(time.time())

        async def deliver(body: bytes, retry: int) -> int:
            headers = sl.signed(body, at=now + retry)  # each delivery signed anew
            if retry:
                headers["X-Slack-Retry-Num"] = str(retry)
            return (await post(session, url, body, headers))[0]

        body, ts = event_body(sl, "poison", event_id="Ev1")
        assert [await deliver(body, n) for n in range(PARK_AFTER)] == [503] * (PARK_AFTER - 1) + [200]
        (parked,) = await r.hub.inbox.parked()
        assert parked.entry.platform_id == f"slack:{sl.state.dm}:{ts}" and parked.failures == PARK_AFTER
        # the deliveries before went to other workers: Slack's last retry is parked at its first failure
        body2, ts2 = event_body(sl, "poison", event_id="Ev2")
        assert await deliver(body2, LAST_RETRY) == 200
        last = [p for p in await r.hub.inbox.parked() if p.entry.platform_id == f"slack:{sl.state.dm}:{ts2}"]
        assert len(last) == 1 and last[0].failures == 1
        body3, _ = event_body(sl, "a sentinel", event_id="Ev3")
        assert await deliver(body3, 0) == 200
        (sent,) = await sl.wait_sent(1)
        assert len(attempts) == PARK_AFTER + 1 and "a sentinel" in str(r.model.requests[-1].messages[-1])


async def test_a_signed_body_that_is_not_utf8_is_refused_400_and_nothing_is_taken(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with served(tmp_path) as (r, session, url):
        sl = r.sl
        for body, kind in (
            (b'{"type": "event_callback", "x": "\xff\xfe"}', "application/json"),
            (b"command=%2Fstop&text=\xff", "application/x-www-form-urlencoded"),
        ):
            status, answer = await post(session, url, body, {**sl.signed(body), "Content-Type": kind})
            assert status == 400 and "utf-8" in answer["error"].lower(), (kind, status, answer)
        assert not [rec for rec in caplog.records if rec.exc_info]
        body, _ = event_body(sl, "a sentinel")
        assert (await post(session, url, body, sl.signed(body)))[0] == 200
        await sl.wait_sent(1)
