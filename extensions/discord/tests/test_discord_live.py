"""``live = true`` on Discord: one message edited in place (PATCH) while a slow model writes,
with the real discord.py client against the loopback fake (``hub.testing.discord``)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_discord import MESSAGES, ROOT, _write_config, running

from hub.testing import FakeOpenAI
from hub.testing.discord import FakeDiscord

EDIT = "PATCH /channels/{channel_id}/messages/{message_id}"


def reply(text: str) -> str:
    return f'<response><output type="discord:message">{text}</output></response>'


def body_of(n: int) -> str:
    paragraphs, size, i = [], 0, 0
    while size < n:
        p = f"Paragraph {i}: " + " ".join(f"word{i}.{j}" for j in range(30))
        paragraphs.append(p)
        size += len(p) + 2
        i += 1
    return "\n\n".join(paragraphs)


def squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def slow(r, chunk: int = 40, delay: float = 0.01) -> None:
    r.model.chunk = chunk
    r.model.chunk_delay = delay


async def test_a_slow_reply_grows_by_edits_and_ends_equal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    body = body_of(1800)
    async with running(tmp_path, monkeypatch, [reply(body)], live=True, live_interval=0.1) as r:
        dc = r.dc
        slow(r)
        mid = dc.push_message(dc.channel_id, f"<@{dc.bot_id}> tell me")
        (out,) = await r.wait_outputs(1, timeout=30)
        assert out.sent and out.content == body
        assert len(dc.calls(MESSAGES)) == 1 and len(r.replies_to(mid)) == 1, "one message, a reply"
        edits = dc.state.edits
        assert len(edits) >= 3 and {e["id"] for e in edits} == {dc.sent[0]["id"]}
        contents = [dc.sent[0]["content"]] + [e["content"] for e in edits]
        assert all(body.startswith(c) for c in contents) and contents[-1] == body
        assert dc.shown(dc.channel_id) == [body]
        assert out.data["message_ids"] == [str(dc.sent[0]["id"])]


async def test_a_long_reply_continues_over_2000_characters_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = "```python\n" + "\n".join(f"print({i})  # line {i}" for i in range(60)) + "\n```"
    body = body_of(2500) + "\n\n" + code + "\n\n" + body_of(2500)
    async with running(tmp_path, monkeypatch, [reply(body)], live=True, live_interval=0.1, channel_rate=(50, 1.0)) as r:
        dc = r.dc
        slow(r, chunk=80, delay=0.005)
        dc.push_message(dc.channel_id, f"<@{dc.bot_id}> tell me everything")
        (out,) = await r.wait_outputs(1, timeout=60)
        assert out.sent, out.error
        shown = dc.shown(dc.channel_id)
        assert len(shown) >= 4 and all(len(s) <= 2000 for s in shown)
        strip_fences = lambda s: squash(re.sub(r"```python|```", "", s))  # noqa: E731
        assert strip_fences("".join(shown)) == strip_fences(body)
        states = [s["content"] for s in dc.sent] + [e["content"] for e in dc.state.edits]
        assert all(s.count("```") % 2 == 0 for s in states), "fences balanced in every state"
        assert out.data["message_ids"] == [str(s["id"]) for s in dc.sent], "each part sent once, in order"


async def test_a_429_on_an_edit_is_honoured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    body = body_of(1200)
    async with running(tmp_path, monkeypatch, [reply(body)], live=True, live_interval=0.1) as r:
        dc = r.dc
        slow(r, chunk=30, delay=0.02)
        dc.fail_next(EDIT, status=429, retry_after=0.5)
        dc.push_message(dc.channel_id, f"<@{dc.bot_id}> tell me")
        (out,) = await r.wait_outputs(1, timeout=30)
        assert out.sent
        calls = dc.calls(EDIT)
        refused = next(i for i, c in enumerate(calls) if c.status == 429)
        assert calls[refused + 1].at - calls[refused].at >= 0.45, "the next edit waited retry_after"
        assert dc.shown(dc.channel_id) == [body] and len(dc.calls(MESSAGES)) == 1


async def test_a_failed_edit_leads_to_exactly_one_follow_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    body = body_of(1500)
    async with running(tmp_path, monkeypatch, [reply(body)], live=True, live_interval=0.1) as r:
        dc = r.dc
        slow(r, chunk=30, delay=0.01)
        dc.fail_next(EDIT, status=404, retry_after=None, description="Unknown Message")
        dc.push_message(dc.channel_id, f"<@{dc.bot_id}> tell me")
        (out,) = await r.wait_outputs(1, timeout=30)
        assert out.sent, out.error
        assert len(dc.calls(MESSAGES)) == 2 and len(dc.calls(EDIT)) == 1
        first, rest = dc.shown(dc.channel_id)
        assert body.startswith(first) and squash(first + rest) == squash(body)


# --- a real process killed mid-reply ----------------------------------------------------------


async def test_sigkill_mid_reply_then_restart_completes_the_message_without_a_second_copy(tmp_path: Path) -> None:
    body = body_of(1800)
    model = FakeOpenAI(responses=[reply(body), reply(body)], default=reply("ok"), chunk=20, chunk_delay=0.03)
    await model.start()
    log_path = tmp_path / "hub.log"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        async with FakeDiscord() as dc:
            config = _write_config(tmp_path, model.port)
            config.write_text(config.read_text() + "live = true\nlive_interval = 0.2\n")
            env = {
                **os.environ,
                "PYTHONPATH": str(ROOT),
                "DISCORD_BOT_TOKEN": "fake-token",
                "FAKE_DISCORD_API": dc.api_base,
                "FAKE_DISCORD_GATEWAY": dc.gateway_url,
                "PYTHONWARNINGS": "ignore::DeprecationWarning",
            }

            def start() -> subprocess.Popen[bytes]:
                with log_path.open("ab") as log_file:
                    return subprocess.Popen(
                        [sys.executable, "-m", "hub.cli", "run", "--config", str(config)],
                        cwd=ROOT,
                        env=env,
                        stdout=log_file,
                        stderr=subprocess.STDOUT,
                    )

            procs.append(start())
            await dc.wait_ready(timeout=60)
            asked = dc.push_message(dc.channel_id, f"<@{dc.bot_id}> tell me a long story")
            # (generous bounds: a loaded machine starts a process slowly) the reply is on screen and growing: its id is in the ledger (before the first edit)
            await dc.wait_for(lambda: len(dc.state.edits) >= 2, timeout=60)
            procs[0].send_signal(signal.SIGKILL)
            procs[0].wait(5)
            (half,) = dc.shown(dc.channel_id)
            assert body.startswith(half) and half != body, "killed mid-reply"

            model.chunk_delay = 0.0
            procs.append(start())
            await dc.wait_for(lambda: dc.shown(dc.channel_id) == [body], timeout=60)
            last = dc.push_message(dc.dm_channel_id, "a last one")  # everything before it is done by now
            await dc.wait_for(
                lambda: any(s["reply_to"] == last or s["channel_id"] == dc.dm_channel_id for s in dc.sent), timeout=60
            )
            procs[1].send_signal(signal.SIGTERM)
            assert procs[1].wait(30) == 0
            to_channel = [s for s in dc.sent if s["channel_id"] == dc.channel_id]
            assert len(to_channel) == 1, f"a second copy was sent\n{log_path.read_text()[-3000:]}"
            assert to_channel[0]["reply_to"] == asked and dc.shown(dc.channel_id) == [body]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(5)
        await model.stop()
