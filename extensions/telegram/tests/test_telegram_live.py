"""``live = true`` on Telegram: one message edited in place while a slow model writes, with the
real python-telegram-bot client against the loopback fake (``hub.testing.telegram``)."""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

import pytest
from test_telegram import _start_hub, reply, running

from hub.platform import utf16_len
from hub.testing import FakeOpenAI
from hub.testing.telegram import FakeTelegram, TelegramState

pytestmark = [pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")]


def body_of(n: int, *, emoji: bool = False) -> str:
    """About ``n`` characters of paragraphs (with emoji: 2 UTF-16 units each)."""
    paragraphs, size, i = [], 0, 0
    while size < n:
        p = f"Paragraph {i}: " + " ".join(f"word{i}.{j}" + ("😀" if emoji and j % 3 == 0 else "") for j in range(30))
        paragraphs.append(p)
        size += len(p) + 2
        i += 1
    return "\n\n".join(paragraphs)


def slow(h, chunk: int = 40, delay: float = 0.01) -> None:
    """The hub's model streams in chunks of ``chunk`` characters, ``delay`` seconds apart."""
    h.model.chunk = chunk
    h.model.chunk_delay = delay


def requests(tg: FakeTelegram, name: str) -> list:
    return [r for r in tg.requests if r.name == name]


def squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


async def test_a_slow_3000_character_reply_grows_by_edits_and_ends_equal(tmp_path: Path) -> None:
    body = body_of(3000)
    async with FakeTelegram() as tg:
        async with running(tmp_path, tg, [reply(body)], live=True, live_interval=0.1) as h:
            slow(h)
            tg.push_message(chat_id=42, text="tell me")
            (result,) = await h.wait_results(1, timeout=30)
            (entry,) = result.outputs
            assert entry.sent and entry.live and entry.content == body
            sends, edits = requests(tg, "sendMessage"), requests(tg, "editMessageText")
            assert len(sends) == 1, "one message"
            assert len(edits) >= 3, "that grows by edits"
            mid = tg.sent[0]["message_id"]
            assert {int(r.params["message_id"]) for r in edits} == {mid}
            shown = [s["text"] for s in tg.sent]
            assert all(len(a) <= len(b) for a, b in zip(shown, shown[1:], strict=False)), "it only grows"
            assert all(body.startswith(s) for s in shown)
            assert tg.shown(42) == [body], "and ends equal to the complete output"
            assert entry.data["message_ids"] == [mid] and entry.parts[0]["data"] == mid


async def test_a_9000_character_reply_continues_over_the_limit_in_order(tmp_path: Path) -> None:
    code = "```python\n" + "\n".join(f"print({i})  # line {i}" for i in range(120)) + "\n```"
    body = body_of(4000, emoji=True) + "\n\n" + code + "\n\n" + body_of(3000, emoji=True)
    assert utf16_len(body) > 9000
    async with FakeTelegram() as tg:
        async with running(tmp_path, tg, [reply(body)], live=True, live_interval=0.1, chat_rate=50) as h:
            slow(h, chunk=90, delay=0.005)
            tg.push_message(chat_id=42, text="tell me everything")
            (result,) = await h.wait_results(1, timeout=60)
            assert result.outputs[0].sent, result.outputs[0].error
            shown = tg.shown(42)
            assert len(shown) >= 3 and all(utf16_len(s) <= 4096 for s in shown)
            strip_fences = lambda s: squash(re.sub(r"```python|```", "", s))  # noqa: E731
            assert strip_fences("".join(shown)) == strip_fences(body), "nothing lost, in order"
            assert all(s["text"].count("```") % 2 == 0 for s in tg.sent), "fences balanced in every state"
            sends = [s["message_id"] for s in tg.sent if s["method"] == "sendMessage"]
            assert sends == sorted(sends) and len(sends) == len(shown), "each part sent once"
            assert result.outputs[0].data["message_ids"] == sends


async def test_a_429_on_an_edit_is_honoured(tmp_path: Path) -> None:
    body = body_of(1500)
    async with FakeTelegram() as tg:
        async with running(tmp_path, tg, [reply(body)], live=True, live_interval=0.1) as h:
            slow(h, chunk=30, delay=0.02)
            tg.fail_next("editMessageText", status=429, retry_after=1)
            tg.push_message(chat_id=42, text="tell me")
            (result,) = await h.wait_results(1, timeout=30)
            assert result.outputs[0].sent
            edits = requests(tg, "editMessageText")
            refused = next(i for i, r in enumerate(edits) if r.status == 429)
            after = edits[refused + 1]
            assert after.at - edits[refused].at >= 0.95, "the next edit waited retry_after"
            assert tg.shown(42) == [body] and len(requests(tg, "sendMessage")) == 1


async def test_a_failed_edit_leads_to_exactly_one_follow_up_message(tmp_path: Path) -> None:
    body = body_of(2000)
    async with FakeTelegram() as tg:
        async with running(tmp_path, tg, [reply(body)], live=True, live_interval=0.1) as h:
            slow(h, chunk=30, delay=0.01)
            tg.fail_next("editMessageText", status=400, description="Bad Request: message can't be edited")
            tg.push_message(chat_id=42, text="tell me")
            (result,) = await h.wait_results(1, timeout=30)
            entry = result.outputs[0]
            assert entry.sent, entry.error
            assert len(requests(tg, "sendMessage")) == 2, "the remainder once, as a new message"
            assert len(requests(tg, "editMessageText")) == 1, "no edit after the failed one"
            first, rest = tg.shown(42)
            assert squash(first + rest) == squash(body) and body.startswith(first)
            assert len(entry.parts) == 2


async def test_markup_is_applied_and_refused_markup_falls_back_to_plain_text(tmp_path: Path) -> None:
    good = " ".join(f"<b>w{i}</b>" for i in range(80))
    bad = "1 < 2 and " + " ".join(f"w{i}" for i in range(80))  # an unescaped <: Telegram refuses the HTML
    async with FakeTelegram() as tg:
        async with running(
            tmp_path, tg, [reply(good), reply(bad)], live=True, live_interval=0.1, parse_mode="HTML"
        ) as h:
            slow(h, chunk=13, delay=0.01)
            tg.push_message(chat_id=42, text="bold?")
            await h.wait_results(1, timeout=30)
            assert tg.shown(42) == [good]
            assert [s for s in tg.sent if s["chat_id"] == 42][-1]["parse_mode"] == "HTML", "the final text formatted"
            tg.push_message(chat_id=43, text="compare?")
            (_, result) = await h.wait_results(2, timeout=30)
            assert result.outputs[0].sent and tg.shown(43) == [bad]
            assert {s["parse_mode"] for s in tg.sent if s["chat_id"] == 43} == {None}, "sent as plain text"


async def test_half_written_markup_costs_one_request_per_edit(tmp_path: Path) -> None:
    # tags cut by every chunk: each edit of a half-written reply would be refused, then
    # sent again as plain text; once refused, the message is edited as plain text until
    # the reply is complete, then shown with its markup
    good = "\n".join(f"<b>{' '.join(f'bold{i}.{j}' for j in range(30))}</b> plain" for i in range(6))
    async with FakeTelegram() as tg:
        async with running(tmp_path, tg, [reply(good)], live=True, live_interval=0.1, parse_mode="HTML") as h:
            slow(h, chunk=7, delay=0.01)
            tg.push_message(chat_id=42, text="bold?")
            (result,) = await h.wait_results(1, timeout=30)
            assert result.outputs[0].sent and tg.shown(42) == [good]
            edits = requests(tg, "editMessageText")
            refused = [r for r in edits if r.status == 400]
            assert len(edits) >= 5, "it grew by edits"
            assert len(refused) <= 1, f"{len(refused)} edits refused for their markup"
            assert edits[-1].params.get("parse_mode") == "HTML" and edits[-1].status == 200, "formatted at the end"


async def test_live_off_sends_the_whole_text_once(tmp_path: Path) -> None:
    body = body_of(500)
    async with FakeTelegram() as tg:
        async with running(tmp_path, tg, [reply(body)]) as h:
            slow(h)
            tg.push_message(chat_id=42, text="tell me")
            await h.wait_results(1, timeout=30)
            assert [s["method"] for s in tg.sent] == ["sendMessage"] and tg.shown(42) == [body]


def test_live_settings_are_validated() -> None:
    from pydantic import ValidationError

    from hub_telegram import TelegramSettings

    assert TelegramSettings(token="1:x").live is False
    with pytest.raises(ValidationError, match="live_interval"):
        TelegramSettings(token="1:x", live_interval=0)


# -- a real process killed mid-reply ----------------------------------------------------------


async def test_sigkill_mid_reply_then_restart_completes_the_message_without_a_second_copy(tmp_path: Path) -> None:
    body = body_of(3000)
    model = FakeOpenAI(responses=[reply(body), reply(body)], default=reply("ok"), chunk=20, chunk_delay=0.03)
    await model.start()
    state = TelegramState()
    log_path = tmp_path / "hub.log"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        async with FakeTelegram(state=state) as tg:
            config = tmp_path / "config.toml"
            config.write_text(
                f"""
[hub]
data_dir = "data"
contexts_dir = "contexts"
shutdown_grace = 1

[model]
provider = "openai"
base_url = "http://127.0.0.1:{model.port}/v1"
api_key = "x"
name = "hub"
max_retries = 0

[extensions.telegram]
token = "${{TELEGRAM_BOT_TOKEN}}"
base_url = "{tg.base_url}/bot"
poll_timeout = 5
live = true
live_interval = 0.2
""",
                encoding="utf-8",
            )
            procs.append(_start_hub(config, log_path))
            tg.push_message(chat_id=1, text="tell me a long story")
            # (generous bounds: a loaded machine starts a process slowly) the reply is on screen and growing: its id is in the ledger (before the first edit)
            await tg.wait_for(lambda: len(requests(tg, "editMessageText")) >= 2, timeout=60)
            procs[0].send_signal(signal.SIGKILL)
            procs[0].wait(5)
            (half,) = tg.shown(1)
            assert body.startswith(half) and half != body, "killed mid-reply"

            model.chunk_delay = 0.0
            procs.append(_start_hub(config, log_path))
            await tg.wait_for(lambda: tg.shown(1) == [body], timeout=60)
            tg.push_message(chat_id=2, text="a last one")  # everything before it is done by now
            await tg.wait_for(lambda: tg.shown(2) == ["ok"], timeout=60)
            procs[1].send_signal(signal.SIGTERM)
            assert procs[1].wait(30) == 0
            to_chat_1 = [s for s in tg.sent if s["chat_id"] == 1 and s["method"] == "sendMessage"]
            assert len(to_chat_1) == 1, f"a second copy was sent\n{log_path.read_text()[-3000:]}"
            assert tg.shown(1) == [body], "the half-written message was completed"
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(5)
        await model.stop()
