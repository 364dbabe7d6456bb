"""examples/custom-platform: a platform extension as its own distribution (hub_pager.py and
its pyproject's entry point), run without installing it, through ``module =`` in the
example's config, against its loopback fake (examples/custom-platform/tests/fake_pager.py)."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

from hub import Hub, ScriptedModel
from tests.examples._examples import EXAMPLES, example_config

HERE = EXAMPLES / "custom-platform"
sys.path.insert(0, str(HERE / "tests"))
from fake_pager import FakePager  # noqa: E402

TOKEN = "pager-test-token"


def test_the_distribution_registers_the_module_under_its_entry_point() -> None:
    project = tomllib.loads((HERE / "pyproject.toml").read_text())
    assert project["project"]["entry-points"]["hub.extensions"] == {"pager": "hub_pager"}
    assert project["tool"]["setuptools"]["py-modules"] == ["hub_pager"]
    assert project["project"]["license"] == "Apache-2.0"
    assert (HERE / "hub_pager.py").is_file()


async def test_pager_messages_are_answered_through_the_extension(tmp_path: Path) -> None:
    long_reply = "word " * 300  # 1500 characters: Pager takes 1000 a message
    model = ScriptedModel(
        [
            '<response><output type="pager:send">Hello, Ann!</output></response>',
            f'<response><output type="pager:send">{long_reply.strip()}</output></response>',
        ]
    )
    async with FakePager(TOKEN) as pager:
        cfg = example_config(
            "custom-platform",
            tmp_path,
            env={"PAGER_TOKEN": TOKEN},
            extensions={"pager": {"base_url": pager.api_url, "poll_interval": 0.02, "allowed_users": ["ann"]}},
        )
        pager.fail_next("send", status=429, retry_after=0.05)  # the governor waits, then sends again
        async with Hub(cfg, model=model):
            pager.push("lobby", "hi", user="mallory")  # not on allowed_users: never reaches the model
            first = pager.push("lobby", "hello!")
            await pager.wait_sent(1, timeout=30)
            pager.push("lobby", "tell me a long story")
            await pager.wait_sent(3, timeout=30)
    hello, *story = pager.sent
    assert hello["room"] == "lobby" and hello["text"] == "Hello, Ann!" and hello["reply_to"] == first
    assert [r.status for r in pager.calls("send")][:2] == [429, 200]
    assert len(story) == 2 and all(len(m["text"]) <= 1000 for m in story)
    assert " ".join(m["text"].strip() for m in story).split() == long_reply.split()
    assert len(model.requests) == 2  # mallory's message was passed over
