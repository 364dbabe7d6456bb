"""The Matrix quick start (README.md and docs/platforms/matrix.md), followed as written: the
shipped ``config.toml`` with the section's ``[extensions.matrix]`` lines, the access token
from the variable its ``export`` line sets, the extension found by its entry point as
``hub run`` finds it; then the reader invites the bot to a direct room without encryption
and says hello, and it joins and answers, against the loopback fake homeserver.

What the test changes, and only that: the homeserver's address (the fake's, where the reader
writes theirs; the bot's id is the section's), the token's value (one the fake issued), the
data folder (a temporary directory), episodic memory and the terminal off, and the model
(scripted, where the reader exports OPENAI_API_KEY).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hub import Hub, ScriptedModel
from hub.testing import quickstart as qs
from hub.testing.matrix import FakeMatrix, MatrixState

SOURCES = {"README.md": "Quick start: Matrix", "docs/platforms/matrix.md": "Quick start"}
ANN = "@ann:example.org"


def section(source: str) -> str:
    return qs.doc_section(source, SOURCES[source])


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_the_quick_start_exports_the_token_the_config_reads(source: str) -> None:
    text = section(source)
    table = qs.toml_of(text)["extensions"]["matrix"]
    assert table["enabled"] is True and table["homeserver"].startswith("https://")
    var = qs.variable_of(table["access_token"])  # the access token comes from the environment
    assert var in qs.exports(text), f"the section exports {var}"
    assert "without encryption" in " ".join(text.split()), "the reader is told the bot cannot read encrypted rooms"


@pytest.mark.parametrize("source", sorted(SOURCES))
async def test_the_quick_start_joins_on_invite_and_answers(source: str, tmp_path: Path) -> None:
    text = section(source)
    table = qs.toml_of(text)["extensions"]["matrix"]
    var = qs.variable_of(table["access_token"])
    async with FakeMatrix(MatrixState(user_id=table["user_id"])) as hs:
        changes = {"hub": {"shutdown_grace": 1}, "extensions": {"matrix": {"homeserver": hs.base_url}}}
        cfg = qs.quickstart_config(text, tmp_path / "data", changes, {var: hs.token(), "OPENAI_API_KEY": "sk-test"})
        model = ScriptedModel(['<response><output type="matrix:message">Hello, Ann!</output></response>'])
        async with Hub(cfg, model=model):
            await hs.wait_for(lambda: bool(hs.state.syncs), timeout=10)  # signed in with the token, syncing
            room = hs.create_room([ANN], bot_joined=False)  # a direct chat, encryption off
            hs.invite(room, ANN, direct=True)
            await hs.wait_for(lambda: room in hs.state.joined, timeout=10)
            hello = hs.push_text(room, ANN, "hello")
            (sent,) = await hs.wait_sent(1, timeout=30)
    assert sent["room_id"] == room and sent["content"]["body"] == "Hello, Ann!"
    assert sent["content"]["m.relates_to"] == {"m.in_reply_to": {"event_id": hello["event_id"]}}
