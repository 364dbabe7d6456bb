"""``hub run`` as a real process with ``[extensions.slack]``, against the loopback fake: killed
with SIGKILL mid-run, then started again, nothing is lost and nothing is answered twice; a
poison message (its run kills the process every time) is parked, and the conversation goes on."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from hub.testing import FakeOpenAI
from hub.testing.processes import hub_command, start_hub, stop_hub, store_rows, until, until_exited, write_hub_config
from hub.testing.slack import APP_TOKEN, BOT_TOKEN, FakeSlack

ANSWER = "<response><output>answered</output></response>"
TOKENS = {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_APP_TOKEN": APP_TOKEN}

BOMB = """
import os
from pydantic import BaseModel
from hub import Extension, action

class Nothing(BaseModel):
    pass

@action(name="detonate", description="Only for the test.")
async def detonate(args: Nothing, ctx) -> dict:
    os._exit(3)  # the process dies in the middle of the run, as a crash would

extension = Extension(name="bomb", actions=[detonate])
"""


def _write_config(tmp_path: Path, sl: FakeSlack, model_url: str, extra: str = "") -> Path:
    return write_hub_config(
        tmp_path,
        model_url=model_url,
        hub=extra,
        extension=f"""
[extensions.slack]
bot_token = "${{SLACK_BOT_TOKEN}}"
app_token = "${{SLACK_APP_TOKEN}}"
base_url = "{sl.api_url}"
""",
    )


def _recorded(tmp_path: Path) -> set[str]:
    return {row[0] for row in store_rows(tmp_path, "SELECT platform_id FROM inbox")}


async def test_sigkill_mid_run_then_restart_loses_and_repeats_nothing(tmp_path: Path) -> None:
    async with FakeSlack() as sl, FakeOpenAI(default=ANSWER, latency=1.0) as ai:
        st = sl.state
        config = _write_config(tmp_path, sl, ai.url)
        hub = start_hub(tmp_path, config, TOKENS)
        try:
            await sl.wait_for(lambda: st.connections == 1, timeout=20)
            first = sl.push_message(text=f"<@{st.bot_user}> answered before the crash")
            await sl.wait_sent(1, timeout=10)
            # from now on the acks are lost with the process: Slack will deliver these again
            sl.hold_acks = True
            second = sl.push_message(text=f"<@{st.bot_user}> in flight")
            dm = sl.push_message(st.dm, "in flight too")
            third = sl.push_message("C0000002", f"<@{st.bot_user}> and here")
            ids = {f"slack:{st.channel}:{second}", f"slack:{st.dm}:{dm}", f"slack:C0000002:{third}"}
            await until(lambda: ids <= _recorded(tmp_path), hub, timeout=10)
            assert len(sl.sent) == 1
        finally:
            output = stop_hub(hub)
        assert len(sl.sent) == 1, output

        sl.hold_acks = False
        hub = start_hub(tmp_path, config, TOKENS)
        try:
            # the new connection gets every unacknowledged envelope again, as Slack retries
            await sl.wait_for(lambda: st.connections == 2, timeout=20)
            await sl.wait_sent(4, timeout=15)  # the three cut off by the crash, answered now
            sentinels = [
                (st.channel, sl.push_message(text=f"<@{st.bot_user}> after the restart")),
                (st.dm, sl.push_message(st.dm, "after the restart")),
                ("C0000002", sl.push_message("C0000002", f"<@{st.bot_user}> after the restart")),
            ]
            # once each conversation's sentinel is answered, everything before it was decided
            await sl.wait_for(
                lambda: (
                    all(any(s["channel"] == c and s["thread_ts"] == ts for s in sl.sent) for c, ts in sentinels[::2])
                    and sum(s["channel"] == st.dm for s in sl.sent) == 2
                ),
                timeout=15,
            )
            await sl.wait_for(lambda: all(e["acked"] for e in st.envelopes), timeout=10)
        finally:
            output = stop_hub(hub, signal.SIGTERM)
        assert hub.returncode == 0, output
        threads = sorted((s["channel"], s["thread_ts"]) for s in sl.sent if s["thread_ts"])
        expected = [(st.channel, first), (st.channel, second), ("C0000002", third)]
        expected += [(c, ts) for c, ts in sentinels if c != st.dm]
        assert threads == sorted(expected), output
        assert sum(s["channel"] == st.dm for s in sl.sent) == 2, output
        assert any(e["retry_attempt"] for e in st.envelopes), "the lost acks were delivered again"


def _poison_answer(body: dict) -> str:
    if "POISON" in json.dumps(body["messages"]):
        return '<response><action_call name="detonate">{}</action_call></response>'
    return ANSWER


async def test_a_poison_message_that_kills_every_run_is_parked_and_the_conversation_goes_on(tmp_path: Path) -> None:
    (tmp_path / "bomb.py").write_text(BOMB)
    async with FakeSlack() as sl, FakeOpenAI(default=_poison_answer) as ai:
        st = sl.state
        config = _write_config(tmp_path, sl, ai.url, extra="dead_letter_after = 2")
        config.write_text(config.read_text() + '\n[extensions.bomb]\nmodule = "bomb"\n')
        hub = start_hub(tmp_path, config, TOKENS)
        outputs = []
        try:
            await sl.wait_for(lambda: st.connections == 1, timeout=20)
            poison = sl.push_message(st.dm, "POISON")
            outputs.append(await until_exited(hub))
            assert hub.returncode == 3  # the run took the process down with it
            hub = start_hub(tmp_path, config, TOKENS)  # resumes it: down again
            outputs.append(await until_exited(hub))
            assert hub.returncode == 3
            hub = start_hub(tmp_path, config, TOKENS)  # parked now: the conversation goes on
            await sl.wait_for(lambda: st.connections == 3, timeout=20)
            sl.push_message(st.dm, "hello again")
            (sent,) = await sl.wait_sent(1, timeout=15)
            assert sent["channel"] == st.dm and sent["text"] == "answered"
        finally:
            log = stop_hub(hub, signal.SIGTERM)
        assert hub.returncode == 0, log
        assert "POISON" not in json.dumps(ai.bodies[-1]["messages"])
        assert all(e["acked"] for e in st.envelopes if e["payload"].get("event", {}).get("ts") == poison)
        code, out, err = await hub_command(tmp_path, "inbox", "--json", "--config", str(config), env=TOKENS)
        assert code == 0, err
        (parked,) = [json.loads(line) for line in out.splitlines()]
        assert parked["content"] == "POISON" and parked["failures"] == 2
        assert parked["context"] == f"slack:channel:{st.dm}" and "abnormal_exit" in parked["error"]


async def test_sigkill_mid_live_reply_then_restart_completes_the_message_without_a_second_copy(tmp_path: Path) -> None:
    from hub_slack import to_mrkdwn

    body = "\n\n".join(f"Paragraph {i}: " + " ".join(f"word{i}.{j}" for j in range(30)) for i in range(8))
    answer = f'<response><output type="slack:message">{body}</output></response>'
    async with (
        FakeSlack() as sl,
        FakeOpenAI(responses=[answer, answer], default=ANSWER, chunk=20, chunk_delay=0.05) as ai,
    ):
        st = sl.state
        config = _write_config(tmp_path, sl, ai.url)
        config.write_text(config.read_text() + "live = true\nlive_interval = 0.5\n")
        hub = start_hub(tmp_path, config, TOKENS)
        try:
            await sl.wait_for(lambda: st.connections == 1, timeout=30)
            asked = sl.push_message(text=f"<@{st.bot_user}> tell me a long story")
            # the reply is on screen and growing: its ts is in the ledger (before the first edit)
            await sl.wait_for(lambda: len(st.edits) >= 2, timeout=30)
        finally:
            output = stop_hub(hub)
        (half,) = sl.thread(st.channel, asked)
        assert half["mrkdwn"] != to_mrkdwn(body), f"killed mid-reply\n{output}"

        ai.chunk_delay = 0.0
        hub = start_hub(tmp_path, config, TOKENS)
        try:
            await sl.wait_for(
                lambda: [m["mrkdwn"] for m in sl.thread(st.channel, asked)] == [to_mrkdwn(body)], timeout=30
            )
            sl.push_message(st.dm, "a last one")  # everything before it is done by now
            await sl.wait_for(lambda: any(s["channel"] == st.dm for s in sl.sent), timeout=30)
        finally:
            output = stop_hub(hub, signal.SIGTERM)
        assert hub.returncode == 0, output
        assert [s["ts"] for s in sl.thread(st.channel, asked)] == [half["ts"]], f"a second copy was sent\n{output}"
