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

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from hub import Hub, ScriptedModel
from hub.config import config_from_dict
from hub.testing.matrix import FakeMatrix, MatrixState

ROOT = Path(__file__).resolve().parents[3]
SOURCES = {
    "README.md": r"^## Quick start: Matrix\n(.*?)^## ",
    "docs/platforms/matrix.md": r"^## Quick start\n(.*?)^## ",
}
ANN = "@ann:example.org"


def section(source: str) -> str:
    match = re.search(SOURCES[source], (ROOT / source).read_text(), re.S | re.M)
    assert match, f"{source} has no Matrix quick start section"
    return match.group(1)


def toml_of(text: str) -> dict[str, Any]:
    (block,) = re.findall(r"```toml\n(.*?)```", text, re.S)
    return tomllib.loads(re.sub(r"^ +", "", block, flags=re.M))


def exports(text: str) -> dict[str, str]:
    lines = [line for line in text.splitlines() if line.strip().startswith("export ")]
    return dict(re.findall(r'(\w+)="([^"]*)"', "\n".join(lines)))


def merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_the_quick_start_exports_the_token_the_config_reads(source: str) -> None:
    text = section(source)
    table = toml_of(text)["extensions"]["matrix"]
    assert table["enabled"] is True and table["homeserver"].startswith("https://")
    var = re.fullmatch(r"\$\{(\w+)\}", table["access_token"])
    assert var, "the access token comes from the environment"
    assert var.group(1) in exports(text), f"the section exports {var.group(1)}"
    assert "without encryption" in " ".join(text.split()), "the reader is told the bot cannot read encrypted rooms"


@pytest.mark.parametrize("source", sorted(SOURCES))
async def test_the_quick_start_joins_on_invite_and_answers(source: str, tmp_path: Path) -> None:
    text = section(source)
    readme = toml_of(text)
    shipped = tomllib.loads((ROOT / "config.toml").read_text())
    (var,) = re.findall(r"\$\{(\w+)\}", readme["extensions"]["matrix"]["access_token"])
    async with FakeMatrix(MatrixState(user_id=readme["extensions"]["matrix"]["user_id"])) as hs:
        raw = merged(
            merged(shipped, readme),
            {
                "hub": {
                    "data_dir": str(tmp_path / "data"),
                    "contexts_dir": str(ROOT / "contexts"),
                    "shutdown_grace": 1,
                },
                "memory": {"episodes": False},
                "extensions": {"cli": {"enabled": False}, "matrix": {"homeserver": hs.base_url}},
            },
        )
        env = {var: hs.token(), "OPENAI_API_KEY": "sk-test"}
        cfg = config_from_dict(raw, path=tmp_path / "config.toml", env=env)
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
