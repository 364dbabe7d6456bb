"""The Discord extension with the real discord.py client against the loopback fake.

Every test logs in, IDENTIFYs and speaks the gateway for real (``tests/fakes/discord.py``);
only the model is scripted. A fresh client per test keeps discord.py's first IDENTIFY, so
its 5 s delay before re-IDENTIFYing never comes into play.

Negative cases ("this message is ignored") are proven with a sentinel: messages are taken
one at a time in arrival order, so once a later message is answered the earlier one was
decided.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
import warnings
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from hub import Extension, ExtensionFailed, Hub, HubConfig, OutputLog, ScriptedModel, StoreError
from hub.definitions import load_extension
from hub.engine import Plugin
from hub.errors import ConfigError
from hub.models import Model
from hub.testing import temp_config
from hub.testing.discord import FakeDiscord

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # discord imports audioop
    import discord

from hub_discord import SAFE_MENTIONS, DiscordSettings, extension, intents, start_error

ROOT = Path(__file__).resolve().parents[3]
MESSAGES = "POST /channels/{channel_id}/messages"
OTHER_BOT = 1200000000000000007


class Running:
    """A started hub with the Discord extension, its fake, and what its outputs did."""

    def __init__(self, hub: Hub, dc: FakeDiscord, model: Any) -> None:
        self.hub = hub
        self.dc = dc
        self.model = model
        self.outputs: list[OutputLog] = []
        outputs = self.outputs

        class Observe(Plugin):
            def on_output(self, run: Any, out: OutputLog) -> None:
                outputs.append(out)

        hub.plugins.add(Observe())

    def replies_to(self, message_id: int) -> list[dict[str, Any]]:
        return [s for s in self.dc.sent if s["reply_to"] == message_id]

    async def wait_outputs(self, n: int, timeout: float = 5) -> list[OutputLog]:
        deadline = time.monotonic() + timeout
        while len(self.outputs) < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(self.outputs)} of {n} outputs: {self.outputs!r}")
            await asyncio.sleep(0.01)
        return self.outputs

    async def recorded(self, *message_ids: int) -> list[bool]:
        """Whether each message was taken (recorded in the inbox) to be answered."""
        return [await self.hub.inbox.seen(f"discord:{m}") for m in message_ids]

    async def sentinel(self, channel_id: int | None = None) -> int:
        """A mention that must be answered; returns its id once it is."""
        dc = self.dc
        mid = dc.push_message(channel_id or dc.channel_id, f"<@{dc.bot_id}> sentinel")
        await dc.wait_for(lambda: bool(self.replies_to(mid)))
        return mid


def replay(dc: FakeDiscord, message_id: int) -> None:
    """Dispatch a message's MESSAGE_CREATE again, as a RESUME replaying it would."""
    (frame,) = [
        f
        for s in dc.state.sessions.values()
        for f in s.events
        if f["t"] == "MESSAGE_CREATE" and f["d"]["id"] == str(message_id)
    ]
    dc.dispatch("MESSAGE_CREATE", frame["d"])


@contextlib.asynccontextmanager
async def running(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    responses: Any = (),
    *,
    dc: FakeDiscord | None = None,
    default: str | None = "pong",
    model: Model | None = None,
    config: HubConfig | None = None,
    extensions: Sequence[Extension] = (),
    **settings: Any,
) -> AsyncIterator[Running]:
    """A started hub with the Discord extension against ``dc`` (default: a fresh fake), and
    ``extensions`` beside it.

    It runs on ``config`` (default: ``temp_config(tmp_path)``), answered by ``model`` (default: a
    ScriptedModel of ``responses``, then ``default``); ``settings`` go to DiscordSettings.
    """
    async with contextlib.AsyncExitStack() as stack:
        if dc is None:
            dc = await stack.enter_async_context(FakeDiscord())
        dc.attach(monkeypatch)
        cfg = config or temp_config(tmp_path)
        cfg.hub.shutdown_grace = 1.0
        model = model or ScriptedModel(responses, default=default)
        settings.setdefault("guild_ready_timeout", 0.05)
        ext = extension(DiscordSettings(token="fake-token", **settings), resolve=dc.resolve)
        hub = Hub(cfg, model=model, load_extensions=False, extensions=[ext, *extensions])
        async with hub:
            yield Running(hub, dc, model)


# --- in and out -------------------------------------------------------------------------


async def test_mention_in_a_guild_channel_is_answered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with running(
        tmp_path,
        monkeypatch,
        ['<response><output type="discord:message">hello @everyone</output></response>'],
    ) as r:
        dc = r.dc
        identify = dc.identifies[0]
        assert identify["token"] == "fake-token"
        assert identify["intents"] == intents().value
        assert discord.Intents._from_value(identify["intents"]).message_content

        mid = dc.push_message(dc.channel_id, f"<@{dc.bot_id}> hi there")
        sent = await dc.wait_sent(1)
        assert sent[0]["channel_id"] == dc.channel_id
        assert sent[0]["content"] == "hello @everyone"
        assert sent[0]["reply_to"] == mid
        # no @everyone or role pings, whatever the model writes
        assert sent[0]["payload"]["allowed_mentions"] == SAFE_MENTIONS.to_dict()
        assert "everyone" not in sent[0]["payload"]["allowed_mentions"]["parse"]
        assert dc.channel_id in dc.typing

        outs = await r.wait_outputs(1)
        assert outs[0].sent and outs[0].type == "discord:message"
        assert outs[0].data == {"message_ids": [str(sent[0]["id"])], "reply_to": str(mid)}
        request = r.model.requests[0]
        assert "hi there" in request.messages[-1]["content"]
        assert f'user="{dc.user_id}"' in request.messages[-1]["content"]

        # the bot's own reply came back on the gateway as a MESSAGE_CREATE: ignored
        await r.sentinel()
        assert len(dc.sent) == 2
        started = time.monotonic()
    assert time.monotonic() - started < 2.0, "stop must close the client quickly"


async def test_direct_message_is_answered_without_a_mention(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with running(tmp_path, monkeypatch) as r:
        dc = r.dc
        mid = dc.push_message(dc.dm_channel_id, "hello in private")
        await dc.wait_sent(1)
        assert dc.sent[0]["channel_id"] == dc.dm_channel_id
        assert dc.sent[0]["reply_to"] == mid
        assert dc.sent[0]["content"] == "pong"
        runs = await r.hub.runs.list(limit=5)
        assert [run.context for run in runs] == [f"discord:channel:{dc.dm_channel_id}"]
        user = dc.state.users[dc.user_id]  # who wrote, as the dashboard shows them
        assert (runs[0].user_name, runs[0].user_handle) == (user["global_name"], user["username"])
        assert runs[0].message == "hello in private"
        async with asyncio.timeout(5):  # the reply's preview is written with the step's progress
            while not (run := await r.hub.runs.get(runs[0].id)) or not run.reply:
                await asyncio.sleep(0.02)
        assert run.reply == "pong"


async def test_replies_to_its_messages_and_watched_channels_are_answered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeDiscord() as dc:
        watched = dc.add_text_channel(dc.guild_id, "bot-chat")
        async with running(tmp_path, monkeypatch, dc=dc, channels=[watched]) as r:
            first = dc.push_message(dc.channel_id, f"<@{dc.bot_id}> first")
            await dc.wait_sent(1)
            # a reply to the bot's message, with the ping turned off: no mention in it
            reply = dc.push_message(dc.channel_id, "and a follow-up", reply_to=dc.sent[0]["id"], mentions=[])
            await dc.wait_for(lambda: bool(r.replies_to(reply)))
            chatter = dc.push_message(watched, "no mention needed here")
            await dc.wait_for(lambda: bool(r.replies_to(chatter)))
            assert [s["reply_to"] for s in dc.sent] == [first, reply, chatter]


async def test_ignores_unaddressed_own_and_bot_messages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with running(tmp_path, monkeypatch) as r:
        dc = r.dc
        plain = dc.push_message(dc.channel_id, "just talking among humans")
        own = dc.push_message(dc.channel_id, f"<@{dc.bot_id}> talking to myself", author_id=dc.bot_id)
        bot = dc.push_message(dc.channel_id, f"<@{dc.bot_id}> beep", author_id=OTHER_BOT, author_is_bot=True)
        everyone = dc.push_message(dc.channel_id, "@everyone look")
        sentinel = await r.sentinel()
        assert [s["reply_to"] for s in dc.sent] == [sentinel]
        assert await r.recorded(plain, own, bot, everyone, sentinel) == [False] * 4 + [True]
        assert len(r.model.requests) == 1


async def test_answers_bots_when_configured_and_the_loop_guard_stops_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running(tmp_path, monkeypatch, answer_bots=True, loop_guard_turns=2) as r:
        dc = r.dc
        bot_ids = []
        for i in range(4):
            mid = dc.push_message(dc.channel_id, f"<@{dc.bot_id}> ping {i}", author_id=OTHER_BOT, author_is_bot=True)
            bot_ids.append(mid)
            if i < 2:
                await dc.wait_for(lambda mid=mid: bool(r.replies_to(mid)))
            if i == 0:
                replay(dc, mid)  # a redelivery does not use up a turn of the guard
        await r.sentinel(dc.dm_channel_id)  # a DM: it does not reset the guild channel's guard
        assert [s["reply_to"] for s in dc.sent[:2]] == bot_ids[:2]
        assert await r.recorded(*bot_ids) == [True, True, False, False]
        # a human speaks in the channel: the guard resets and bots are answered again
        human = await r.sentinel()
        again = dc.push_message(dc.channel_id, f"<@{dc.bot_id}> ping again", author_id=OTHER_BOT, author_is_bot=True)
        await dc.wait_for(lambda: bool(r.replies_to(again)))
        assert r.replies_to(human)


async def test_allow_lists(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with FakeDiscord() as dc:
        allowed = dc.add_text_channel(dc.guild_id, "allowed")
        other_guild = dc.add_guild("Elsewhere")
        elsewhere = dc.add_text_channel(other_guild, "general")
        stranger = dc.add_user(1300000000000000003, "mallory")
        async with running(
            tmp_path,
            monkeypatch,
            dc=dc,
            allowed_guilds=[dc.guild_id],
            allowed_channels=[allowed],
            allowed_users=[dc.user_id],
        ) as r:
            blocked_channel = dc.push_message(dc.channel_id, f"<@{dc.bot_id}> here?")
            blocked_guild = dc.push_message(elsewhere, f"<@{dc.bot_id}> there?")
            blocked_user = dc.push_message(allowed, f"<@{dc.bot_id}> me?", author_id=stranger)
            ok = await r.sentinel(allowed)
            dm = dc.push_message(dc.dm_channel_id, "DMs are not restricted by guild lists")
            await dc.wait_for(lambda: bool(r.replies_to(dm)))
            assert [s["reply_to"] for s in dc.sent] == [ok, dm]
            assert await r.recorded(blocked_channel, blocked_guild, blocked_user) == [False] * 3


async def test_dms_can_be_turned_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with running(tmp_path, monkeypatch, dms=False) as r:
        dm = r.dc.push_message(r.dc.dm_channel_id, "hello?")
        await r.sentinel()
        assert await r.recorded(dm) == [False] and len(r.dc.sent) == 1


# --- long replies, rate limits, failures ------------------------------------------------


def _long_reply() -> str:
    """About 4,500 characters: prose, a code block too long for one message, paragraphs."""
    prose = " ".join(f"Sentence number {i} says something useful." for i in range(20))
    code = "\n".join(f"    value_{i} = compute({i})  # step {i}" for i in range(68))
    tail = "\n\n".join(f"Paragraph {i}: " + "more words here " * 8 for i in range(8))
    return f"{prose}\n\n```python\n{code}\n```\n\n{tail}"


async def test_long_reply_is_split_in_order_with_balanced_fences(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = _long_reply()
    assert 4400 <= len(text) <= 4700
    async with running(tmp_path, monkeypatch, [text]) as r:
        dc = r.dc
        mid = dc.push_message(dc.channel_id, f"<@{dc.bot_id}> tell me everything")
        outs = await r.wait_outputs(1)
        parts = [s["content"] for s in dc.sent]
        assert outs[0].sent and outs[0].data["message_ids"] == [str(s["id"]) for s in dc.sent]
        assert len(parts) >= 3
        assert all(len(p) <= 2000 for p in parts)
        assert all(p.count("```") % 2 == 0 for p in parts)
        assert dc.sent[0]["reply_to"] == mid
        assert all(s["reply_to"] is None for s in dc.sent[1:])

        def lines(s: str) -> list[str]:
            return [ln for ln in s.split("\n") if ln.strip() and not ln.startswith("```")]

        def words(s: str) -> list[str]:
            return " ".join(lines(s)).split()

        # nothing lost, nothing reordered (the fences reopened around a split code block aside)
        assert words("\n".join(parts)) == words(text)


async def test_429_then_success_is_sent_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with running(tmp_path, monkeypatch) as r:
        dc = r.dc
        dc.fail_next(MESSAGES, status=429, retry_after=0.1)
        mid = dc.push_message(dc.channel_id, f"<@{dc.bot_id}> hi")
        await r.wait_outputs(1)
        assert [c.status for c in dc.calls(MESSAGES)] == [429, 200]
        assert len(r.replies_to(mid)) == 1 and r.outputs[0].sent


async def test_429s_discord_py_gives_up_on_are_retried_by_the_governor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running(tmp_path, monkeypatch) as r:
        dc = r.dc
        # discord.py tries a request 5 times; after that the HTTPException(429) reaches the
        # Governor, which waits Retry-After (1 s) and sends again.
        dc.fail_next(MESSAGES, status=429, retry_after=0.01, count=5)
        mid = dc.push_message(dc.channel_id, f"<@{dc.bot_id}> hi")
        await r.wait_outputs(1)
        assert [c.status for c in dc.calls(MESSAGES)] == [429] * 5 + [200]
        assert len(r.replies_to(mid)) == 1 and r.outputs[0].sent


async def test_a_send_that_fails_is_recorded_as_not_sent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with running(tmp_path, monkeypatch) as r:
        dc = r.dc
        dc.fail_next(MESSAGES, status=403, retry_after=None)
        dc.push_message(dc.channel_id, f"<@{dc.bot_id}> hi")
        outs = await r.wait_outputs(1)
        assert not outs[0].sent
        assert "403" in (outs[0].error or "") and "Missing Permissions" in (outs[0].error or "")
        assert dc.sent == []
        runs = await r.hub.runs.list(limit=1)
        events = await r.hub.runs.events(runs[0].id)
        logged = [e for e in events if isinstance(e, OutputLog)]
        # the event log keeps the output as queued, then as it ended: never as sent
        assert logged and not any(e.sent for e in logged) and logged[-1].error


async def test_a_part_that_fails_after_others_went_out_says_which(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running(tmp_path, monkeypatch, [_long_reply()]) as r:
        dc = r.dc
        injected: list[bool] = []

        def fail_after_the_first_part() -> bool:
            # evaluated as the fake records each message: the second part is refused
            if dc.sent and not injected:
                dc.fail_next(MESSAGES, status=403, retry_after=None)
                injected.append(True)
            return bool(injected)

        watcher = asyncio.ensure_future(dc.wait_for(fail_after_the_first_part))
        dc.push_message(dc.channel_id, f"<@{dc.bot_id}> long please")
        outs = await r.wait_outputs(1)
        await watcher
        assert len(dc.sent) == 1 and not outs[0].sent
        assert "403" in (outs[0].error or "")
        assert "part 2 of" in (outs[0].error or "") and str(dc.sent[0]["id"]) in (outs[0].error or "")


async def test_replayed_message_create_is_not_answered_twice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with running(tmp_path, monkeypatch) as r:
        dc = r.dc
        mid = dc.push_message(dc.channel_id, f"<@{dc.bot_id}> once please")
        await dc.wait_sent(1)
        replay(dc, mid)
        # the sentinel in the same channel: a replay taken as new would be answered before it,
        # or taken with it by the sentinel's run
        await r.sentinel()
        assert await r.recorded(mid) == [True]
        assert len(r.replies_to(mid)) == 1
        assert len(r.model.requests) == 2
        runs = await r.hub.runs.list(limit=10)
        assert len(runs) == 2
        for run in runs:
            assert [e.kind for e in await r.hub.runs.events(run.id)].count("input") == 1


async def test_messages_during_a_disconnect_are_answered_after_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running(tmp_path, monkeypatch) as r:
        dc = r.dc
        await dc.disconnect(code=4000)
        mid = dc.push_message(dc.channel_id, f"<@{dc.bot_id}> are you there?")
        await dc.wait_for(lambda: bool(r.replies_to(mid)))
        assert dc.resumes and len(dc.identifies) == 1
        assert len(r.replies_to(mid)) == 1


async def test_a_message_the_store_could_not_record_is_retried_not_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running(tmp_path, monkeypatch) as r:
        dc, inbox = r.dc, r.hub.inbox
        real, failures = inbox.record, [2]

        async def record(context: str, entry: Any) -> bool:
            if failures[0]:  # a short database outage: the first two attempts fail
                failures[0] -= 1
                raise StoreError("database is locked (injected)", store="inbox", operation="write")
            return await real(context, entry)

        monkeypatch.setattr(inbox, "record", record)
        first = dc.push_message(dc.channel_id, f"<@{dc.bot_id}> first")
        second = dc.push_message(dc.channel_id, f"<@{dc.bot_id}> second")
        # both wait behind the retries, so one run may take them together (one reply) or each
        # its own: either way both are recorded, answered, and the channel goes on
        await dc.wait_for(lambda: bool(r.replies_to(first)) or bool(r.replies_to(second)), timeout=15)
        await r.sentinel()
        assert failures == [0] and await r.recorded(first, second) == [True, True]
        waiting = {p.entry.platform_id for p in await inbox.pending()}
        assert not waiting & {f"discord:{first}", f"discord:{second}"}  # both answered
        assert await inbox.parked() == []  # the store's fault: never parked


async def test_a_poison_message_is_parked_and_the_channel_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hub_discord._bot as bot

    real, attempts = bot.message_text, []

    def message_text(message: Any) -> str:
        if "poison" in message.content:
            attempts.append(message.id)
            raise TypeError("unexpected embed shape (injected)")
        return real(message)

    monkeypatch.setattr(bot, "message_text", message_text)
    async with running(tmp_path, monkeypatch) as r:
        dc = r.dc
        poison = dc.push_message(dc.channel_id, f"<@{dc.bot_id}> poison")
        after = dc.push_message(dc.channel_id, f"<@{dc.bot_id}> after")
        await dc.wait_for(lambda: bool(r.replies_to(after)), timeout=15)
        assert attempts == [poison] * bot.PARK_AFTER and r.replies_to(poison) == []
        (parked,) = await r.hub.inbox.parked()
        assert parked.entry.platform_id == f"discord:{poison}" and "poison" in parked.entry.content
        assert parked.context == f"discord:channel:{dc.channel_id}" and "TypeError" in parked.error


# --- start, config ------------------------------------------------------------------------


async def test_a_rejected_token_fails_start_with_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with FakeDiscord(token="the-right-token") as dc:
        with pytest.raises(ExtensionFailed) as caught:
            async with running(tmp_path, monkeypatch, dc=dc):
                pass
        message = str(caught.value)
        assert "Discord rejected the bot token" in message and "DISCORD_BOT_TOKEN" in message
        assert "\n" not in message and "fake-token" not in message
        assert not dc.identifies


class NoContentIntentDiscord(FakeDiscord):
    """A fake whose application lacks the Message Content intent: IDENTIFY is refused."""

    async def _identify(self, ws: Any, d: dict[str, Any]) -> None:
        await ws.close(code=4014, message=b"Disallowed intent(s).")


async def test_a_missing_message_content_intent_fails_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with NoContentIntentDiscord() as dc:
        with pytest.raises(ExtensionFailed) as caught:
            async with running(tmp_path, monkeypatch, dc=dc):
                pass
        assert "Message Content intent is not enabled" in str(caught.value)
        assert len(dc.identifies) == 1


def test_start_errors_say_what_to_fix() -> None:
    intents_error = start_error(discord.PrivilegedIntentsRequired(None))
    assert "Message Content" in str(intents_error) and "developer portal" in str(intents_error)
    token_error = start_error(discord.LoginFailure("Improper token has been passed."))
    assert "DISCORD_BOT_TOKEN" in str(token_error)


def test_an_empty_token_is_a_config_error_naming_key_and_variable() -> None:
    cfg = HubConfig()
    with pytest.raises(ConfigError) as caught:
        load_extension("discord", {"token": ""}, cfg)
    assert caught.value.key == "extensions.discord.token"
    assert "DISCORD_BOT_TOKEN" in str(caught.value)
    with pytest.raises(ConfigError) as caught:
        load_extension("discord", {"token": "t", "answer_bot": True}, cfg)
    assert caught.value.key == "extensions.discord.answer_bot"
    assert load_extension("discord", {"token": "secret-value"}, cfg).name == "discord"
    assert "secret-value" not in repr(DiscordSettings(token="secret-value"))


# --- SIGKILL and restart --------------------------------------------------------------------

SHIM = '''
"""Points discord.py at the test's fake Discord, then is the Discord extension."""
import os
import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import discord.gateway
    import discord.http
import yarl

discord.http.Route.BASE = os.environ["FAKE_DISCORD_API"]
discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(os.environ["FAKE_DISCORD_GATEWAY"])

from hub_discord import extension  # noqa: E402,F401
'''


def _write_config(tmp_path: Path, model_port: int) -> Path:
    (tmp_path / "discord_shim.py").write_text(SHIM)
    contexts = tmp_path / "contexts"
    contexts.mkdir(exist_ok=True)
    config = tmp_path / "config.toml"
    config.write_text(
        f"""
[hub]
data_dir = "data"
contexts_dir = "contexts"
shutdown_grace = 1

[model]
provider = "openai"
name = "hub"
base_url = "http://127.0.0.1:{model_port}/v1"
api_key = "x"
max_retries = 0

[memory]
episodes = false

[extensions.discord]
module = "discord_shim.py"
token = "${{DISCORD_BOT_TOKEN}}"
guild_ready_timeout = 0.05
"""
    )
    return config


async def _start_hub(config: Path, dc: FakeDiscord, token: str = "fake-token") -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DISCORD_BOT_TOKEN": token,
        "FAKE_DISCORD_API": dc.api_base,
        "FAKE_DISCORD_GATEWAY": dc.gateway_url,
        "PYTHONWARNINGS": "ignore::DeprecationWarning",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "hub.cli", "run", "--config", str(config)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


@contextlib.asynccontextmanager
async def fake_model(tmp_path: Path, *, latency: float) -> AsyncIterator[int]:
    script = tmp_path / "script.json"
    script.write_text('["pong"]')
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "hub.testing.openai",
        "--port",
        "0",
        "--latency",
        str(latency),
        "--script",
        str(script),
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 10)).decode()
        port = int(re.match(r"PORT=(\d+)", line).group(1))  # type: ignore[union-attr]
        yield port
    finally:
        proc.terminate()
        await proc.wait()


async def _wait_recorded(db: Path, message_ids: set[int], timeout: float = 5) -> None:
    """Wait until the hub's inbox holds these messages (read from its SQLite file)."""
    wanted = {f"discord:{m}" for m in message_ids}
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
            got = {row[0] for row in conn.execute("SELECT platform_id FROM inbox")}
        if wanted <= got:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"recorded {sorted(got)}, waiting for {sorted(wanted)}")
        await asyncio.sleep(0.05)


def _kill(proc: subprocess.Popen[bytes]) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    out, _ = proc.communicate(timeout=10)
    return out.decode(errors="replace")


async def test_sigkill_mid_run_then_restart_loses_and_repeats_nothing(tmp_path: Path) -> None:
    async with FakeDiscord() as dc, fake_model(tmp_path, latency=1.0) as port:
        config = _write_config(tmp_path, port)
        other = dc.add_text_channel(dc.guild_id, "other")
        hub = await _start_hub(config, dc)
        try:
            await dc.wait_ready(timeout=15)
            first = dc.push_message(dc.channel_id, f"<@{dc.bot_id}> answered before the crash")
            await dc.wait_sent(1, timeout=10)

            second = dc.push_message(dc.channel_id, f"<@{dc.bot_id}> in flight")
            dm = dc.push_message(dc.dm_channel_id, "in flight too")
            third = dc.push_message(other, f"<@{dc.bot_id}> and here")
            # kill once all three are recorded in the inbox, while their runs wait on the model
            await _wait_recorded(tmp_path / "data" / "hub.db", {second, dm, third})
            assert len(dc.sent) == 1
        finally:
            output = _kill(hub)
        assert len(dc.sent) == 1, output

        hub = await _start_hub(config, dc)
        try:
            await dc.wait_for(lambda: len(dc.identifies) == 2 and bool(dc.live_sessions()), 15)
            await dc.wait_sent(4, timeout=10)  # the three cut off by the crash, answered now
            # the first message replayed (as a resumed session would): already answered. Then a
            # sentinel in each conversation: once each is answered, every message before it in
            # that conversation was answered or refused, the replay included
            replay(dc, first)
            sentinels = [
                dc.push_message(dc.channel_id, f"<@{dc.bot_id}> after the restart"),
                dc.push_message(dc.dm_channel_id, "after the restart"),
                dc.push_message(other, f"<@{dc.bot_id}> after the restart"),
            ]
            await dc.wait_for(lambda: set(sentinels) <= {s["reply_to"] for s in dc.sent}, 10)
        finally:
            hub.send_signal(signal.SIGTERM)
            try:
                output = hub.communicate(timeout=10)[0].decode(errors="replace")
            except subprocess.TimeoutExpired:
                output = _kill(hub)
        replies = sorted(s["reply_to"] for s in dc.sent)
        assert replies == sorted([first, second, dm, third, *sentinels]), output
        assert hub.returncode == 0, output


async def test_hub_run_with_a_bad_token_exits_with_one_line(tmp_path: Path) -> None:
    async with FakeDiscord(token="the-right-token") as dc:
        config = _write_config(tmp_path, 9)
        proc = await _start_hub(config, dc, token="a-wrong-token")
        try:
            out, _ = await asyncio.to_thread(proc.communicate, timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()
        text = out.decode(errors="replace")
        errors = [ln for ln in text.splitlines() if ln.startswith("hub:")]
        assert proc.returncode == 2, text
        assert len(errors) == 1 and "Discord rejected the bot token" in errors[0], text
        assert "Traceback" not in text and "a-wrong-token" not in text
