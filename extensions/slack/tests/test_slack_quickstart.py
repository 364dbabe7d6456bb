"""The Slack quick start (README.md and docs/platforms/slack.md), followed as written: the
shipped ``config.toml`` with the section's ``[extensions.slack]`` lines, the two tokens from
the variables its ``export`` line sets, the extension found by its entry point as ``hub run``
finds it, then a direct message and a mention in a channel answered over Socket Mode,
against the loopback fake of Slack (the Web API and the Socket Mode websocket).

What the test changes, and only that: Slack's address (the fake's), the tokens' values (the
fake's, where the reader pastes theirs), the data folder (a temporary directory), episodic
memory and the terminal off, and the model (scripted, where the reader exports
OPENAI_API_KEY).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hub import Hub, ScriptedModel
from hub.testing import quickstart as qs
from hub.testing.slack import APP_TOKEN, BOT_TOKEN, FakeSlack

SOURCES = {"README.md": "Quick start: Slack", "docs/platforms/slack.md": "Quick start"}
# what the reader pastes, by its prefix: the fake's tokens stand in for theirs
FAKE_TOKENS = {"xoxb-": BOT_TOKEN, "xapp-": APP_TOKEN}


def section(source: str) -> str:
    return qs.doc_section(source, SOURCES[source])


def reply(text: str) -> str:
    return f'<response><output type="slack:message">{text}</output></response>'


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_the_quick_start_exports_the_tokens_the_config_reads(source: str) -> None:
    text = section(source)
    table = qs.toml_of(text)["extensions"]["slack"]
    assert table["enabled"] is True
    env = qs.exports(text)
    for key, prefix in (("bot_token", "xoxb-"), ("app_token", "xapp-")):
        var = qs.variable_of(table[key])
        assert env.get(var, "").startswith(prefix), f"the section exports {var}, a {prefix} token"
    assert "signing_secret" not in table, "the quick start is Socket Mode: no public address"


@pytest.mark.parametrize("source", sorted(SOURCES))
async def test_the_quick_start_answers_a_direct_message_and_a_mention(source: str, tmp_path: Path) -> None:
    text = section(source)
    env = {name: t for name, value in qs.exports(text).items() for p, t in FAKE_TOKENS.items() if value.startswith(p)}
    assert set(env.values()) == {BOT_TOKEN, APP_TOKEN}
    async with FakeSlack() as sl:
        changes = {"hub": {"shutdown_grace": 1}, "extensions": {"slack": {"base_url": sl.api_url}}}
        cfg = qs.quickstart_config(text, tmp_path / "data", changes, {**env, "OPENAI_API_KEY": "sk-test"})
        model = ScriptedModel([reply("Hello in private!"), reply("Hello in the thread!")])
        async with Hub(cfg, model=model):
            st = sl.state
            await sl.wait_for(lambda: st.connections > 0, timeout=10)  # Socket Mode, with the app token
            sl.push_message(st.dm, "hello")
            await sl.wait_sent(1, timeout=30)
            ts = sl.push_message(st.channel, f"<@{st.bot_user}> hello")
            await sl.wait_sent(2, timeout=30)
    dm, thread = sl.sent
    assert dm["channel"] == st.dm and dm["text"] == "Hello in private!" and dm["thread_ts"] is None
    assert thread["channel"] == st.channel and thread["thread_ts"] == ts and thread["text"] == "Hello in the thread!"
    # the fake answers invalid_auth to a wrong token: each token went where it belongs
    assert all(r.status == 200 for r in st.requests) and {r.name for r in st.requests} >= {
        "auth.test",
        "apps.connections.open",
        "chat.postMessage",
    }
