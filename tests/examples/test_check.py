"""``hub check --config examples/NAME/config.toml`` passes for every example, as a reader runs
it (the real command, in a process of its own, with the example's secrets in the environment)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests._support.processes import hub_cmd
from tests.examples._examples import ENV, EXAMPLES, ROOT

NAMES = sorted(p.parent.name for p in EXAMPLES.glob("*/config.toml"))
# what the examples' configs read besides the shared secrets; `python` (an MCP server's command)
# is the Python that has the mcp SDK, as in the reader's virtual environment
EXTRA = {"PAGER_TOKEN": "pager-test-token", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


def test_every_example_is_checked() -> None:
    assert NAMES == ["approvals", "custom-platform", "digest", "mcp-notes", "support", "weather"]


@pytest.mark.parametrize("name", NAMES)
async def test_hub_check_passes(name: str, tmp_path: Path) -> None:
    if name == "mcp-notes":
        pytest.importorskip("mcp")  # the extra its server needs (hub[mcp])
    code, out, err = await hub_cmd("check", "--config", f"examples/{name}/config.toml", cwd=ROOT, env={**ENV, **EXTRA})
    assert code == 0, out + err
    assert f"ok: {EXAMPLES / name / 'config.toml'}" in out
    assert not (EXAMPLES / name / "data").exists()  # a check writes nothing into the example


async def test_hub_check_names_a_secret_that_is_not_set() -> None:
    """The check is not vacuous: the weather example without its bot token fails, naming it."""
    env = {**ENV, **EXTRA}
    del env["TELEGRAM_BOT_TOKEN"]
    code, out, err = await hub_cmd("check", "--config", "examples/weather/config.toml", cwd=ROOT, env=env)
    assert code != 0 and "TELEGRAM_BOT_TOKEN" in out + err
