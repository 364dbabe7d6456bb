"""The Slack extension with the real slack-bolt and slack-sdk against the loopback fake
(``hub.testing.slack.FakeSlack``: the Web API and the Socket Mode websocket); only the model is
scripted. Negative cases ("this message is ignored") are proven with a sentinel: the intake
takes events one at a time, so once a later message is answered the earlier one was decided.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from hub import Extension, Hub, HubConfig, OutputLog, ScriptedModel, StoreError
from hub.engine import Plugin
from hub.logs import InputLog
from hub.models import Model
from hub.store import InMemoryInbox
from hub.testing import loopback_resolver, temp_config
from hub.testing.slack import APP_TOKEN, BOT_TOKEN, FakeSlack
from hub_slack import SlackSettings, extension
from hub_slack._intake import LAST_RETRY, PARK_AFTER


class Running:
    """A started hub with the Slack extension, its fake, and what its outputs did."""

    def __init__(self, hub: Hub, sl: FakeSlack, model: Any) -> None:
        self.hub = hub
        self.sl = sl
        self.model = model
        self.outputs: list[OutputLog] = []
        outputs = self.outputs

        class Observe(Plugin):
            def on_output(self, run: Any, out: OutputLog) -> None:
                outputs.append(out)

        hub.plugins.add(Observe())

    async def wait_outputs(self, n: int, timeout: float = 5) -> list[OutputLog]:
        deadline = time.monotonic() + timeout
        while len(self.outputs) < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(self.outputs)} of {n} outputs: {self.outputs!r}")
            await asyncio.sleep(0.01)
        return self.outputs

    async def sentinel(self, channel: str | None = None) -> str:
        """A mention that must be answered; returns its ts once it is."""
        sl = self.sl
        ts = sl.push_message(channel, f"<@{sl.state.bot_user}> sentinel")
        await sl.wait_for(lambda: any(s["thread_ts"] == ts for s in sl.sent))
        return ts


def settings_for(sl: FakeSlack, **settings: Any) -> SlackSettings:
    settings.setdefault("app_token", APP_TOKEN)
    return SlackSettings(bot_token=BOT_TOKEN, base_url=sl.api_url, **settings)


@contextlib.asynccontextmanager
async def running(
    tmp_path: Path,
    responses: Any = (),
    *,
    sl: FakeSlack | None = None,
    default: str | None = "pong",
    model: Model | None = None,
    config: HubConfig | None = None,
    extensions: Sequence[Extension] = (),
    connected: bool = True,
    inbox: Any = None,
    **settings: Any,
) -> AsyncIterator[Running]:
    """A started hub with the Slack extension against ``sl`` (default: a fresh fake), answered
    by ``model`` (default: a ScriptedModel of ``responses``, then ``default``); ``settings`` go
    to SlackSettings. With ``connected``, it yields once Socket Mode is connected."""
    async with contextlib.AsyncExitStack() as stack:
        if sl is None:
            sl = await stack.enter_async_context(FakeSlack())
        cfg = config or temp_config(tmp_path)
        cfg.hub.shutdown_grace = 1.0
        model = model or ScriptedModel(responses, default=default)
        ext = extension(settings_for(sl, **settings), resolve=loopback_resolver("files.slack.com"))
        hub = Hub(cfg, model=model, load_extensions=False, extensions=[ext, *extensions], inbox=inbox)
        before = sl.state.connections
        async with hub:
            if connected and settings_for(sl, **settings).socket_mode:
                await sl.wait_for(lambda: sl.state.connections > before, timeout=10)
            yield Running(hub, sl, model)


# --- in and out -------------------------------------------------------------------------


async def test_a_mention_in_a_channel_is_answered_in_a_thread_under_it(tmp_path: Path) -> None:
    async with running(
        tmp_path, ['<response><output type="slack:message">**hello** <!channel></output></response>']
    ) as r:
        sl, st = r.sl, r.sl.state
        ts = sl.push_message(text=f"<@{st.bot_user}> hi there")
        sent = await sl.wait_sent(1)
        assert sent[0]["channel"] == st.channel and sent[0]["thread_ts"] == ts
        assert sent[0]["mrkdwn"] == "*hello* &lt;!channel&gt;"  # mrkdwn, and no @channel ping
        assert sent[0]["text"] == "hello &lt;!channel&gt;"  # the plain fallback beside it
        outs = await r.wait_outputs(1)
        assert outs[0].sent and outs[0].type == "slack:message"
        request = r.model.requests[0]
        assert "hi there" in request.messages[-1]["content"]
        assert f"<@{st.bot_user}>" not in request.messages[-1]["content"]
        runs = await r.hub.runs.list(limit=5)
        assert [run.context for run in runs] == [f"slack:thread:{st.channel}/{ts}"]
        # the message came as `message` and `app_mention` both; the bot's reply came back as
        # an event too: each envelope acknowledged, one answer
        await sl.wait_for(lambda: len(sl.acked()) == len(st.envelopes))
        await r.sentinel()
        assert len(sl.sent) == 2


async def test_a_direct_message_is_answered_in_the_channel_and_a_thread_reply_in_its_thread(tmp_path: Path) -> None:
    async with running(tmp_path) as r:
        sl, st = r.sl, r.sl.state
        sl.push_message(st.dm, "hello in private")
        await sl.wait_sent(1)
        assert sl.sent[0]["channel"] == st.dm and sl.sent[0]["thread_ts"] is None
        # a reply in a thread of the DM: answered in that thread, the same conversation
        parent = sl.sent[0]["ts"]
        sl.push_message(st.dm, "and in a thread", thread_ts=parent)
        await sl.wait_sent(2)
        assert sl.sent[1]["thread_ts"] == parent
        runs = await r.hub.runs.list(limit=5)
        assert {run.context for run in runs} == {f"slack:channel:{st.dm}"}


async def test_replies_in_its_thread_need_no_mention_and_other_chatter_is_ignored(tmp_path: Path) -> None:
    async with running(tmp_path) as r:
        sl, st = r.sl, r.sl.state
        ts = sl.push_message(text=f"<@{st.bot_user}> start")
        await sl.wait_sent(1)
        sl.push_message(text="chatter at the top, not for the bot")
        follow = sl.push_message(text="a follow-up in the thread", thread_ts=ts)
        await sl.wait_sent(2)
        assert sl.sent[1]["thread_ts"] == ts
        runs = await r.hub.runs.list(limit=5)
        assert {run.context for run in runs} == {f"slack:thread:{st.channel}/{ts}"}
        assert not await r.hub.received(f"slack:{st.channel}:{follow}x")
        assert len(sl.sent) == 2


# --- long replies, rate limits ---------------------------------------------------------------


async def test_a_long_reply_is_split_at_slacks_limit_in_order_in_the_thread(tmp_path: Path) -> None:
    prose = " ".join(f"word{i} & more" for i in range(700))  # escapes make it longer in mrkdwn
    code = "```\n" + "\n".join(f"line {i} < {i + 1}" for i in range(150)) + "\n```"
    long = f"{prose}\n\n{code}\n\nThe end."
    async with running(tmp_path, [f'<response><output type="slack:message">{long}</output></response>']) as r:
        sl, st = r.sl, r.sl.state
        ts = sl.push_message(text=f"<@{st.bot_user}> tell me everything")
        outs = await r.wait_outputs(1, timeout=20)
        assert outs[0].sent, outs[0]
        parts = sl.thread(st.channel, ts)
        assert len(parts) >= 3
        assert all(len(p["mrkdwn"]) <= 3000 for p in parts)
        assert outs[0].data["message_ts"] == [p["ts"] for p in parts]
        joined = "".join(p["mrkdwn"] for p in parts)
        assert "word0 &amp; more" in joined and "word699 &amp; more" in joined and joined.endswith("The end.")
        # each part that holds code opens and closes its block
        assert all(p["mrkdwn"].count("```") % 2 == 0 for p in parts)


async def test_a_429_storm_is_waited_out_as_retry_after_asks_and_the_reply_sent_once(tmp_path: Path) -> None:
    async with running(tmp_path) as r:
        sl, st = r.sl, r.sl.state
        sl.fail_next("chat.postMessage", status=429, retry_after=1, count=3)
        ts = sl.push_message(text=f"<@{st.bot_user}> hi")
        outs = await r.wait_outputs(1, timeout=15)
        assert outs[0].sent
        calls = sl.calls("chat.postMessage")
        assert [c.status for c in calls] == [429, 429, 429, 200]
        gaps = [b.at - a.at for a, b in zip(calls, calls[1:], strict=False)]
        assert all(g >= 0.95 for g in gaps), gaps  # Retry-After: 1, honoured each time
        assert [s["thread_ts"] for s in sl.sent] == [ts]


async def test_a_refused_block_is_sent_again_as_plain_text(tmp_path: Path) -> None:
    async with running(tmp_path, ['<response><output type="slack:message">**bold** move</output></response>']) as r:
        sl, st = r.sl, r.sl.state
        sl.fail_next("chat.postMessage", status=200, retry_after=None, description="invalid_blocks")
        sl.push_message(st.dm, "hi")
        (sent,) = await sl.wait_sent(1)
        assert sent["mrkdwn"] is None and sent["text"] == "bold move"
        last = sl.calls("chat.postMessage")[-1]
        assert last.params.get("mrkdwn") in (False, "0", "false") and not last.params.get("blocks")


# --- acknowledged only once recorded -------------------------------------------------------------


class FailingInbox(InMemoryInbox):
    """An inbox whose next ``failures`` records fail, as a store outage does."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures
        self.failed_at: list[str | None] = []  # the platform id of each record that failed

    @property
    def attempts(self) -> int:
        return len(self.failed_at)

    async def record(self, context: str, entry: InputLog) -> bool:
        if self.failures:
            self.failures -= 1
            self.failed_at.append(entry.platform_id)
            raise StoreError("the inbox is down (injected)", store="inbox", operation="write")
        return await super().record(context, entry)


async def test_an_event_the_store_could_not_record_is_not_acked_and_slack_delivers_it_again(tmp_path: Path) -> None:
    async with running(tmp_path, inbox=FailingInbox(1)) as r:
        sl, st = r.sl, r.sl.state
        ts = sl.push_message(st.dm, "keep me")
        (env,) = st.envelopes
        # the intake raised: bolt answered 500, and Socket Mode sends no ack for it
        r.sl.push_message(st.dm, "a sentinel")
        await sl.wait_sent(1)
        assert not env["acked"] and st.envelopes[1]["acked"]
        sl.refresh()  # a new connection: Slack delivers what was never acknowledged
        await sl.wait_for(lambda: env["acked"], timeout=10)
        assert env["retry_attempt"] == 1
        await r.wait_outputs(2, timeout=10)
        assert await r.hub.received(f"slack:{st.dm}:{ts}")
        assert "keep me" in str(r.model.requests[-1].messages[-1])
        assert len(sl.sent) == 2


async def test_a_refused_bot_token_stops_the_start_with_one_clear_line(tmp_path: Path) -> None:
    from hub import ExtensionFailed
    from hub_slack import SlackSettings

    async with FakeSlack() as sl:
        settings = SlackSettings(bot_token="xoxb-a-wrong-token", app_token=APP_TOKEN, base_url=sl.api_url)
        hub = Hub(
            temp_config(tmp_path), model=ScriptedModel([]), load_extensions=False, extensions=[extension(settings)]
        )
        with pytest.raises(ExtensionFailed) as caught:
            async with hub:
                pass
        message = str(caught.value)
        assert "Slack refused the bot token (invalid_auth)" in message and "SLACK_BOT_TOKEN" in message
        assert "xoxb-a-wrong-token" not in message
        assert sl.state.connections == 0


async def until(predicate: Any, timeout: float = 10) -> None:
    """Until ``predicate()`` holds (what the hub does, not what the fake saw)."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


async def redeliver(r: Running, env: dict[str, Any], attempts: list[Any], n: int) -> None:
    """A new connection, so that Slack delivers ``env`` again; returns once the intake tried
    it the ``n``-th time."""
    retry = env["retry_attempt"]
    r.sl.refresh()
    await r.sl.wait_for(lambda: env["retry_attempt"] > retry, timeout=10)
    await until(lambda: len(attempts) >= n)


def poison_on(monkeypatch: pytest.MonkeyPatch, text: str) -> list[str]:
    """Reading an event whose text is ``text`` fails (a bug, or a shape the intake does not
    expect): its ts, once per attempt."""
    import hub_slack._intake as intake

    real, attempts = intake.classify, []

    def classify(event: dict[str, Any], **kw: Any) -> Any:
        if event.get("text") == text:
            attempts.append(event["ts"])
            raise AttributeError("'NoneType' object has no attribute 'get' (injected)")
        return real(event, **kw)

    monkeypatch.setattr(intake, "classify", classify)
    return attempts


async def test_a_poison_event_is_redelivered_then_parked_and_intake_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    attempts = poison_on(monkeypatch, "poison")
    async with running(tmp_path) as r:
        sl, st = r.sl, r.sl.state
        ts = sl.push_message(st.dm, "poison")
        sl.push_message(st.dm, "after it")
        await sl.wait_sent(1)
        await until(lambda: len(attempts) == 1)
        env = st.envelopes[0]
        assert not env["acked"]  # not taken, not parked yet: Slack is to deliver it again
        for n in range(2, PARK_AFTER + 1):
            await redeliver(r, env, attempts, n)
        await sl.wait_for(lambda: env["acked"], timeout=10)  # parked: acked, never delivered again
        assert env["retry_attempt"] == PARK_AFTER - 1 and attempts == [ts] * PARK_AFTER
        (parked,) = await r.hub.inbox.parked()
        assert parked.context == f"slack:channel:{st.dm}" and parked.entry.content == "poison"
        assert parked.entry.platform_id == f"slack:{st.dm}:{ts}" and parked.entry.meta["ts"] == ts
        assert parked.failures == PARK_AFTER and "AttributeError" in parked.error
        sl.refresh()  # nothing is left unacknowledged: nothing comes again
        sl.push_message(st.dm, "later")
        await sl.wait_sent(2)
        await r.wait_outputs(2)
        assert len(attempts) == PARK_AFTER and len(sl.sent) == 2
        asked = [str(req.messages[-1]) for req in r.model.requests]
        assert "after it" in asked[0] and "later" in asked[-1] and not any("poison" in a for a in asked)
        assert len(await r.hub.inbox.parked()) == 1


async def test_a_poison_event_on_slacks_last_retry_is_parked_whatever_its_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Slack gives up after its third retry: an event failing then is parked, not lost,
    though this worker saw fewer deliveries than PARK_AFTER (a restart between them)."""
    attempts = poison_on(monkeypatch, "poison")
    async with running(tmp_path) as r:
        sl, st = r.sl, r.sl.state
        sl.push_message(st.dm, "poison")
        await until(lambda: len(attempts) == 1)
        env = st.envelopes[0]
        env["retry_attempt"] = LAST_RETRY - 1  # the retries between went elsewhere
        await redeliver(r, env, attempts, 2)
        await sl.wait_for(lambda: env["acked"], timeout=10)
        (parked,) = await r.hub.inbox.parked()
        assert env["retry_attempt"] == LAST_RETRY and parked.failures == 2 < PARK_AFTER


async def test_a_parked_event_put_back_with_hub_inbox_retry_is_answered_in_its_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = temp_config(tmp_path)
    async with FakeSlack() as sl:
        st = sl.state
        attempts = poison_on(monkeypatch, f"<@{st.bot_user}> poison")
        async with running(tmp_path, sl=sl, config=config) as r:
            ts = sl.push_message(text=f"<@{st.bot_user}> poison", mention_event=False)
            env = st.envelopes[0]
            await until(lambda: len(attempts) == 1)
            for n in range(2, PARK_AFTER + 1):
                await redeliver(r, env, attempts, n)
            await sl.wait_for(lambda: env["acked"], timeout=10)
            (parked,) = await r.hub.inbox.parked()
            assert parked.context == f"slack:thread:{st.channel}/{ts}"
            assert await r.hub.inbox.retry(parked.entry.id)  # what `hub inbox retry ID` does
        assert sl.sent == []
        async with running(tmp_path, sl=sl, config=config, default="answered at last") as r:
            (sent,) = await sl.wait_sent(1, timeout=10)
            assert (sent["channel"], sent["thread_ts"], sent["text"]) == (st.channel, ts, "answered at last")
            assert "poison" in str(r.model.requests[-1].messages[-1]) and await r.hub.inbox.parked() == []
        assert len(attempts) == PARK_AFTER and len(sl.sent) == 1


async def test_an_event_the_intake_cannot_read_is_parked_whole_in_its_thread(tmp_path: Path) -> None:
    """No hook: a message whose text is not a string breaks the real intake. Parked at the
    third delivery with the raw event, in the thread its answer would have started."""
    async with running(tmp_path) as r:
        sl, st = r.sl, r.sl.state
        ts = st.next_ts()
        broken = {"type": "message", "channel": st.channel, "user": st.user, "ts": ts, "team": st.team}
        broken["text"] = {"not": "a string"}  # no Slack client sends this; the intake cannot read it
        sl._push_event(broken)
        env = st.envelopes[0]
        for _ in range(PARK_AFTER - 1):
            sl.push_message(text=f"<@{st.bot_user}> a sentinel")  # taken after the broken one failed
            await r.wait_outputs(len(r.outputs) + 1)
            assert not env["acked"] and not await r.hub.inbox.parked()
            retry = env["retry_attempt"]
            sl.refresh()
            await sl.wait_for(lambda: env["retry_attempt"] > retry, timeout=10)  # noqa: B023
        await sl.wait_for(lambda: env["acked"], timeout=10)
        (parked,) = await r.hub.inbox.parked()
        assert parked.context == f"slack:thread:{st.channel}/{ts}" and parked.failures == PARK_AFTER
        assert json.loads(parked.entry.content)["text"] == {"not": "a string"}
        assert parked.entry.meta["thread_ts"] == ts and "TypeError" in parked.error
        assert len(sl.sent) == PARK_AFTER - 1  # the sentinels, each once


async def test_a_store_outage_is_never_counted_against_an_event_and_parks_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    inbox = FailingInbox(PARK_AFTER + 1)
    async with running(tmp_path, inbox=inbox) as r:
        sl, st = r.sl, r.sl.state
        ts = sl.push_message(st.dm, "keep me")
        env = st.envelopes[0]
        await until(lambda: inbox.attempts == 1)
        for n in range(2, PARK_AFTER + 2):  # more failures than would park a poison event
            await redeliver(r, env, inbox.failed_at, n)
            assert not env["acked"]
        sl.refresh()  # the store is back: this delivery is recorded, and acked
        await sl.wait_for(lambda: env["acked"], timeout=10)
        (sent,) = await sl.wait_sent(1)
        assert env["retry_attempt"] == PARK_AFTER + 1 and await r.hub.received(f"slack:{st.dm}:{ts}")
        assert await r.hub.inbox.parked() == []
        assert "keep me" in str(r.model.requests[-1].messages[-1]) and len(r.model.requests) == 1
        said = [rec.getMessage() for rec in caplog.records if "was not recorded" in rec.getMessage()]
        assert len(said) == PARK_AFTER + 1 and all(f"event {ts} in {st.dm}" in m for m in said)


async def test_a_conversation_named_by_its_instance_name_is_answered_where_it_is(tmp_path: Path) -> None:
    """A schedule or a webhook names a conversation TYPE:KEY: a thread's key holds no colon."""
    async with running(tmp_path) as r:
        sl, st = r.sl, r.sl.state
        ts = sl.push_message(text=f"<@{st.bot_user}> start a thread")
        await sl.wait_sent(1)
        await r.hub.send(f"slack:thread:{st.channel}/{ts}", None, "the morning post")  # returns once answered
        await r.hub.send(f"slack:channel:{st.dm}", None, "a note in the DM")
        await sl.wait_sent(3)
        assert [(s["channel"], s["thread_ts"]) for s in sl.sent] == [(st.channel, ts), (st.channel, ts), (st.dm, None)]
        with pytest.raises(Exception, match="CHANNEL/THREAD_TS"):
            await r.hub.send("slack:thread:C0000001", None, "no thread")


async def test_a_refused_app_token_stops_the_start_with_one_clear_line(tmp_path: Path) -> None:
    from hub import ExtensionFailed
    from hub_slack import SlackSettings

    async with FakeSlack() as sl:
        settings = SlackSettings(bot_token=BOT_TOKEN, app_token="xapp-a-wrong-token", base_url=sl.api_url)
        hub = Hub(
            temp_config(tmp_path), model=ScriptedModel([]), load_extensions=False, extensions=[extension(settings)]
        )
        with pytest.raises(ExtensionFailed) as caught:
            async with hub:
                pass
        message = str(caught.value)
        assert "Slack refused the app token (invalid_auth)" in message and "SLACK_APP_TOKEN" in message
        assert "xapp-a-wrong-token" not in message and sl.state.connections == 0


async def test_an_idle_threads_marker_is_forgotten(tmp_path: Path) -> None:
    """Issue 40, item 21: a thread's marker holds the time of its last message, and a thread
    idle past retention is forgotten (it needs a mention again)."""
    from hub.platform import prune_markers

    async with running(tmp_path, ['<response><output type="slack:message">hi</output></response>']) as r:
        sl, st = r.sl, r.sl.state
        ts = sl.push_message(text=f"<@{st.bot_user}> hi there")
        await sl.wait_sent(1)
        key = f"slack:thread:{st.channel}/{ts}"
        value = await r.hub.memory.get(key)
        assert isinstance(value, dict) and value["ts"] > 0
        day = 86_400.0
        assert await prune_markers(r.hub.memory, "slack:thread:", max_age=90 * day, now=value["ts"] + 89 * day) == 0
        assert await prune_markers(r.hub.memory, "slack:thread:", max_age=90 * day, now=value["ts"] + 91 * day) == 1
        assert await r.hub.memory.get(key) is None
