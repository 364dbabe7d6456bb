"""The chat panel: a message from the dashboard goes to the bot in web:chat:<session>, and the
reply streams back over the conversation's run events."""

from __future__ import annotations

import asyncio
import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
from yarl import URL

from hub.models import ModelRequest

from .conftest import HeldModel, client, dashboard, login, make_config

LONG = "This reply is long enough to come in several pieces, signed ALPHA."


def chat_reply(request: ModelRequest) -> str:
    said = request.messages[-1]["content"]
    found = re.findall(r"Sign every reply as (\w+)", request.system + "".join(m["content"] for m in request.messages))
    sig = found[-1] if found else "NOBODY"
    echo = "ping" if "ping" in said else "?"
    return f'<response><output type="web:reply">{LONG} ({echo}, {sig})</output></response>'


class WritingModel(HeldModel):
    """Writes its answer a few characters at a time, as a model streams it."""

    async def stream(self, request: ModelRequest):  # type: ignore[override]
        async for part in super().stream(request):
            yield part
            await asyncio.sleep(0.03)  # longer than the live output publishes (PUBLISH_EVERY)


async def _sse(resp: Any, n_until: str) -> list[tuple[str, dict[str, Any]]]:
    """Events of an SSE response until one of kind ``n_until``."""
    got: list[tuple[str, dict[str, Any]]] = []
    kind = ""
    async for raw in resp.content:
        line = raw.decode().rstrip("\n")
        if line.startswith("event: "):
            kind = line[7:]
        elif line.startswith("data: "):
            got.append((kind, json.loads(line[6:])))
            if kind == n_until:
                return got
    return got


async def test_a_message_from_the_panel_is_answered_and_the_reply_streams_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-live-chatpanel-0123456789abcdef"
    monkeypatch.setenv("UI_TEST_API_KEY", secret)
    model = WritingModel(chat_reply, hold=True)
    async with dashboard(tmp_path, model=model) as d, client() as s:
        csrf = await login(s, d.base)
        async with s.get(d.base + "/ui/chat") as resp:
            page = await resp.text()
        context = re.search(r"<code>(web:chat:[0-9a-f]{12})</code>", page).group(1)
        chat_id = context.rsplit(":", 1)[1]
        assert chat_id not in str(s.cookie_jar.filter_cookies(URL(d.base + "/ui/")))  # not the session's secret
        async with s.get(d.base + "/ui/chat/events", timeout=None) as events:
            assert events.headers["Content-Type"] == "text/event-stream"
            reading = asyncio.create_task(_sse(events, "run_ended"))
            async with s.post(
                d.base + "/ui/chat",
                data={"csrf": csrf, "text": f"ping, my key is {secret}"},
                headers={"Accept": "application/json"},
            ) as resp:
                assert resp.status == 202 and await resp.json() == {"sent": True}
            await asyncio.wait_for(model.waiting.wait(), 5)
            model.release()
            got = await asyncio.wait_for(reading, 10)
        kinds = [k for k, _ in got]
        assert kinds[0] == "input" and kinds[-1] == "run_ended"
        assert got[0][1]["entry"]["content"] == "ping, my key is [REDACTED]" and got[-1][1]["state"] == "completed"
        assert secret not in json.dumps(got)  # what streams is redacted as the run store is
        partials = [e["text"] for k, e in got if k == "output_partial"]
        assert len(partials) >= 3, "the reply came in pieces, as written"
        whole = f"{LONG} (ping, ALPHA)"
        assert "".join(partials) == whole
        (final,) = [e["entry"] for k, e in got if k == "output" and e["entry"]["sent"]]
        assert final["content"] == whole and final["type"] == "web:reply"
        (run,) = await d.hub.runs.page(limit=5, context=context)
        assert (run.user, run.user_name, run.reply) == ("operator", "Operator (dashboard)", whole)
        assert run.message == "ping, my key is [REDACTED]"
        async with s.get(d.base + "/ui/chat") as resp:  # the transcript, from the run store
            page = html.unescape(await resp.text())
        assert (
            '<li class="line user"' in page and ">ping, my key is [REDACTED]</li>" in page and f">{whole}</li>" in page
        )
        assert secret not in page


async def test_a_form_post_without_script_and_bad_messages(tmp_path: Path) -> None:
    async with dashboard(tmp_path, model=HeldModel(chat_reply)) as d, client() as s:
        csrf = await login(s, d.base)
        async with s.post(d.base + "/ui/chat", data={"csrf": csrf, "text": "ping"}, allow_redirects=False) as resp:
            assert resp.status == 303 and resp.headers["Location"] == "/ui/chat"
        async with s.post(d.base + "/ui/chat", data={"text": "no csrf"}) as resp:
            assert resp.status == 403
        async with s.post(d.base + "/ui/chat", data={"csrf": csrf, "text": "   "}) as resp:
            assert resp.status == 400 and "the message is empty" in await resp.text()
        long = "x" * 9000
        async with s.post(d.base + "/ui/chat", data={"csrf": csrf, "text": long}) as resp:
            page = await resp.text()
            assert resp.status == 400 and "at most 8000" in page and long in page  # kept, not lost
        for _ in range(100):
            async with s.get(d.base + "/ui/chat") as resp:
                page = html.unescape(await resp.text())
            if "(ping, ALPHA)" in page:
                break
            await asyncio.sleep(0.05)
        assert "(ping, ALPHA)" in page
        # another login has a conversation of its own
        async with client() as other:
            await login(other, d.base)
            async with other.get(d.base + "/ui/chat") as resp:
                assert "(ping, ALPHA)" not in await resp.text()


async def test_without_a_dashboard_there_is_no_web_chat_context(tmp_path: Path) -> None:
    async with dashboard(tmp_path, config=make_config(tmp_path, token="")) as d:
        assert "web:chat" not in d.hub.contexts


async def test_a_chat_command_is_answered_without_the_model(tmp_path: Path) -> None:
    model = HeldModel(chat_reply)
    async with dashboard(tmp_path, model=model) as d, client() as s:
        csrf = await login(s, d.base)
        async with s.post(d.base + "/ui/chat", data={"csrf": csrf, "text": "/help"}) as resp:
            assert resp.status == 200
        for _ in range(100):
            runs = await d.hub.runs.page(limit=5, platform="web")
            if runs and runs[0].reply:
                break
            await asyncio.sleep(0.05)
        assert "/new" in runs[0].reply and model.requests == []  # the hub's own answer
