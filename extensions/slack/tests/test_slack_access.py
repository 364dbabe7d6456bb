"""Who the Slack bot answers, against the loopback fake: ``dm_policy`` (pairing, allowlist),
the channel and user allow-lists, other bots and the loop guard; and :func:`classify`, which
decides from the event alone.

Events are taken one at a time in arrival order, so a sentinel answered after a refused
message shows that the refused one was decided (and never reached the model).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from test_slack import running

from hub.config import config_from_dict
from hub.definitions import load_extension
from hub.errors import ConfigError
from hub.platform import AllowList
from hub_slack import Ignored, Inbound, SlackSettings, classify

CODE = re.compile(r"hub pairing approve ([A-Z2-9]{8})\b")
STRANGER = "USTRANGE1"
STRANGER_DM = "D0000009"


async def test_pairing_sends_a_code_once_and_nothing_reaches_the_model_until_approved(tmp_path: Path) -> None:
    async with running(tmp_path, dm_policy="pairing") as r:
        sl, st = r.sl, r.sl.state
        first = sl.push_message(STRANGER_DM, "hello, who are you?", user=STRANGER)
        (sent,) = await sl.wait_sent(1)
        assert sent["channel"] == STRANGER_DM
        match = CODE.search(sent["text"])
        assert match is not None, sent["text"]
        again = sl.push_message(STRANGER_DM, "hello? hello?", user=STRANGER)  # told already: no second code
        await r.sentinel()  # a mention in a channel is not private: answered as before
        assert [s["channel"] for s in sl.sent].count(STRANGER_DM) == 1
        assert not await r.hub.received(f"slack:{STRANGER_DM}:{first}")
        assert not await r.hub.received(f"slack:{STRANGER_DM}:{again}")
        assert len(r.model.requests) == 1
        (pending,) = await r.hub.access.list()
        assert (pending.platform, pending.user, pending.state) == ("slack", STRANGER, "pending")

        await r.hub.access.approve(match.group(1))
        sl.push_message(STRANGER_DM, "and now?", user=STRANGER)
        await sl.wait_for(lambda: [s["channel"] for s in sl.sent].count(STRANGER_DM) == 2)
        assert sl.sent[-1]["text"] == "pong" and len(r.model.requests) == 2
        assert st.user != STRANGER


async def test_allowlist_refuses_others_in_dms_and_channels_off_the_list(tmp_path: Path) -> None:
    async with running(tmp_path, dm_policy="allowlist", allowed_users=["UHUMAN01"], allowed_channels=["C0000001"]) as r:
        sl, st = r.sl, r.sl.state
        refused = sl.push_message(STRANGER_DM, "let me in", user=STRANGER)
        elsewhere = sl.push_message("C0000077", f"<@{st.bot_user}> here?")
        by_stranger = sl.push_message(text=f"<@{st.bot_user}> me too", user=STRANGER)
        ok = await r.sentinel()
        assert [s["thread_ts"] for s in sl.sent] == [ok]
        for channel, ts in ((STRANGER_DM, refused), ("C0000077", elsewhere), (st.channel, by_stranger)):
            assert not await r.hub.received(f"slack:{channel}:{ts}")
        assert len(r.model.requests) == 1 and await r.hub.access.list() == []


async def test_other_bots_are_ignored_unless_answer_bots_and_then_the_loop_guard_bounds_it(tmp_path: Path) -> None:
    async with running(tmp_path, channels=["C0000001"], reply_in_thread=False) as r:
        sl = r.sl
        sl.push_message(text="beep", user="", bot_id="BOTHER01")
        sl.push_message(text="a human sentinel")
        await sl.wait_sent(1)
        assert len(r.model.requests) == 1 and "sentinel" in str(r.model.requests[0].messages[-1])
    async with running(
        tmp_path / "2", channels=["C0000001"], reply_in_thread=False, answer_bots=True, loop_guard_turns=2
    ) as r:
        sl = r.sl
        beeps = [sl.push_message(text=f"beep {i}", user="", bot_id="BOTHER01") for i in range(4)]
        human = sl.push_message(text="a human sentinel")  # answered: the guard is for bots
        await sl.wait_for(lambda: any("sentinel" in str(q.messages) for q in r.model.requests), timeout=10)
        taken = [await r.hub.received(f"slack:C0000001:{ts}") for ts in (*beeps, human)]
        assert taken == [True, True, False, False, True]  # two answers to the bot, then the guard


def event(text: str = "hi", **fields: Any) -> dict[str, Any]:
    base = {"type": "message", "channel": "C1", "user": "U1", "text": text, "ts": "1.000001", "channel_type": "channel"}
    return {**base, **fields}


def verdict(e: dict[str, Any], known: bool = False, **settings: Any) -> Inbound | Ignored:
    settings.setdefault("app_token", "xapp-1")
    s = SlackSettings(bot_token="xoxb-1", **settings)
    return classify(
        e,
        bot_user="UBOT",
        bot_id="BBOT",
        settings=s,
        channels=AllowList(s.allowed_channels),
        users=AllowList(s.allowed_users),
        known_thread=known,
    )


@pytest.mark.parametrize(
    ("e", "settings", "known", "where"),
    [
        (event("<@UBOT> hi"), {}, False, ("slack:thread", "1.000001")),
        (event("<@UBOT> hi"), {"reply_in_thread": False}, False, ("slack:channel", None)),
        (event("<@UBOT> hi", thread_ts="0.5"), {}, False, ("slack:thread", "0.5")),
        (event("in the thread", thread_ts="0.5"), {}, True, ("slack:thread", "0.5")),
        (event("in another thread", thread_ts="0.5"), {}, False, None),
        (event("hi all"), {}, False, None),
        (event("hi all"), {"channels": ["C1"]}, False, ("slack:thread", "1.000001")),
        (event("hi", type="app_mention"), {}, False, ("slack:thread", "1.000001")),
        (event("hi", channel="D1", channel_type="im"), {}, False, ("slack:channel", None)),
        (event("hi", channel="D1", channel_type="im", thread_ts="0.5"), {}, False, ("slack:channel", None)),
        (event("hi", channel="D1", channel_type="im"), {"dms": False}, False, None),
        (event("<@UBOT> hi", user="UBOT"), {}, False, None),
        (event("<@UBOT> hi", bot_id="BBOT"), {}, False, None),
        (event("<@UBOT> hi", bot_id="BX", subtype="bot_message"), {}, False, None),
        (
            event("<@UBOT> hi", bot_id="BX", subtype="bot_message"),
            {"answer_bots": True},
            False,
            ("slack:thread", "1.000001"),
        ),
        (event("<@UBOT> edited", subtype="message_changed"), {}, False, None),
        (event("<@UBOT>"), {}, False, None),  # nothing but the mention: no text
        (event("<@UBOT> hi"), {"allowed_channels": ["C2"]}, False, None),
        (event("<@UBOT> hi"), {"allowed_users": ["U2"]}, False, None),
    ],
)
def test_classify(
    e: dict[str, Any], settings: dict[str, Any], known: bool, where: tuple[str, str | None] | None
) -> None:
    result = verdict(e, known, **settings)
    if where is None:
        assert isinstance(result, Ignored), result
    else:
        assert isinstance(result, Inbound), result
        assert (result.context, result.thread_ts) == where


def test_the_text_loses_the_bots_mention_and_keeps_others() -> None:
    result = verdict(event("<@UBOT> ask <@U2|bob> about a &lt;tag&gt; &amp; more"))
    assert isinstance(result, Inbound) and result.text == "ask <@U2> about a <tag> & more"


def test_settings_name_what_is_missing() -> None:
    cfg = config_from_dict({}, env={})
    with pytest.raises(ConfigError, match=r"SLACK_BOT_TOKEN"):
        load_extension("slack", {"app_token": "xapp-1"}, cfg)
    with pytest.raises(ConfigError, match=r"SLACK_APP_TOKEN"):
        load_extension("slack", {"bot_token": "xoxb-1"}, cfg)
    with pytest.raises(ConfigError, match=r"xoxb-"):
        load_extension("slack", {"bot_token": "xapp-1", "app_token": "xapp-1"}, cfg)
    with pytest.raises(ConfigError, match=r"extensions\.slack\.dm_policy"):
        load_extension("slack", {"bot_token": "xoxb-1", "app_token": "xapp-1", "dm_policy": "paring"}, cfg)
    with pytest.raises(ConfigError, match=r"signing secret"):
        load_extension("slack", {"bot_token": "xoxb-1", "signing_secret": "short"}, cfg)
    ext = load_extension("slack", {"bot_token": "xoxb-1", "signing_secret": "8f742231b10e8888abcd99yyyzzz85a5"}, cfg)
    assert ext.routes[0].path == "/slack/events"
