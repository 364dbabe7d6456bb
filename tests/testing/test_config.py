"""hub.testing.temp_config: a hub on it keeps every file under the test's folder."""

from __future__ import annotations

import io
from pathlib import Path

from hub import Hub, ScriptedModel
from hub.testing import temp_config
from hub_cli import CliSettings
from hub_cli import extension as cli_extension


async def test_a_hub_on_a_temp_config_writes_only_under_its_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    cfg = temp_config(root, persona='name = "Ann"\ninstructions = "Answer as Ann."\n')
    assert (cfg.data_dir, cfg.contexts_dir) == (root / "data", root / "contexts")
    assert not cfg.memory.episodes
    model = ScriptedModel(["<response><output>hi</output></response>"])
    cli = cli_extension(CliSettings(stdin=False), out=io.StringIO())
    async with Hub(cfg, model=model, load_extensions=False, extensions=[cli]) as hub:
        result = await hub.send("cli:session", {"user": "ann"}, "hello", user="ann")
    assert result is not None and result.ok
    assert "Answer as Ann." in model.requests[0].system
    assert (root / "data" / "hub.db").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["root"]


def test_without_a_persona_the_folder_is_made_and_empty(tmp_path: Path) -> None:
    cfg = temp_config(tmp_path)
    assert cfg.contexts_dir.is_dir() and list(cfg.contexts_dir.iterdir()) == []
