"""``live = true`` on Slack: one message edited in place (``chat.update``) while a slow model
writes, with the real slack-sdk against the loopback fake (``hub.testing.slack``)."""

from __future__ import annotations

from pathlib import Path

from test_slack import running

from hub_slack import to_mrkdwn, to_plain


def reply(text: str) -> str:
    return f'<response><output type="slack:message">{text}</output></response>'


def body_of(n: int) -> str:
    paragraphs, size, i = [], 0, 0
    while size < n:
        p = f"Paragraph {i}: **bold {i}** " + " ".join(f"word{i}.{j}" for j in range(30))
        paragraphs.append(p)
        size += len(p) + 2
        i += 1
    return "\n\n".join(paragraphs)


FAST = {"live": True, "live_interval": 0.5, "channel_rate": (50, 1.0), "update_rate": (100, 1.0)}


async def test_a_slow_reply_grows_by_edits_and_ends_equal_to_the_output(tmp_path: Path) -> None:
    body = body_of(1500)
    async with running(tmp_path, [reply(body)], **FAST) as r:
        sl, st = r.sl, r.sl.state
        r.model.chunk, r.model.chunk_delay = 20, 0.02
        ts = sl.push_message(text=f"<@{st.bot_user}> tell me")
        (out,) = await r.wait_outputs(1, timeout=30)
        assert out.sent and out.content == body
        (message,) = sl.thread(st.channel, ts)  # one message, in the thread asked in
        assert len(st.edits) >= 2 and {e["ts"] for e in st.edits} == {message["ts"]}
        assert message["mrkdwn"] == to_mrkdwn(body) and message["text"] == to_plain(body)
        assert out.data["message_ts"] == [message["ts"]] and out.data["thread_ts"] == ts


async def test_a_429_on_an_edit_is_honoured_and_the_reply_still_ends_equal(tmp_path: Path) -> None:
    body = body_of(900)
    async with running(tmp_path, [reply(body)], **FAST) as r:
        sl, st = r.sl, r.sl.state
        r.model.chunk, r.model.chunk_delay = 20, 0.03
        sl.fail_next("chat.update", status=429, retry_after=1)
        sl.push_message(st.dm, "tell me")
        (out,) = await r.wait_outputs(1, timeout=30)
        assert out.sent
        calls = sl.calls("chat.update")
        refused = next(i for i, c in enumerate(calls) if c.status == 429)
        assert calls[refused + 1].at - calls[refused].at >= 0.95, "the next edit waited Retry-After"
        (message,) = sl.sent
        assert message["mrkdwn"] == to_mrkdwn(body) and len(sl.calls("chat.postMessage")) == 1


async def test_a_live_reply_past_the_limit_continues_in_new_messages_in_order(tmp_path: Path) -> None:
    body = body_of(7000)
    async with running(tmp_path, [reply(body)], **FAST) as r:
        sl, st = r.sl, r.sl.state
        r.model.chunk, r.model.chunk_delay = 200, 0.005
        ts = sl.push_message(text=f"<@{st.bot_user}> tell me everything")
        (out,) = await r.wait_outputs(1, timeout=60)
        assert out.sent, out.error
        parts = sl.thread(st.channel, ts)
        assert len(parts) >= 3 and all(len(p["mrkdwn"]) <= 3000 for p in parts)
        squash = lambda s: "".join(s.split())  # noqa: E731
        assert squash("".join(p["mrkdwn"] for p in parts)) == squash(to_mrkdwn(body))
        assert out.data["message_ts"] == [p["ts"] for p in parts]
