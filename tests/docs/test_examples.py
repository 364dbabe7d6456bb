"""The docs' examples that are whole programs or procedures, run as a reader would run them.

The platform example is run in tests/platform/test_readme_extension.py and the README's
quick starts beside each platform (extensions/NAME/tests/test_NAME_quickstart.py); every other
block is checked against the code by test_code_blocks.py.
"""

from __future__ import annotations

import importlib
import re
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import yaml

from hub import Hub, HubConfig, RunState, ScriptedModel
from hub.definitions import load_extension
from tests.docs.test_code_blocks import ROOT, Block, blocks


def page_blocks(page: str, lang: str) -> list[Block]:
    found = [b for b in blocks(ROOT / "docs" / page) if b.lang == lang]
    assert found, f"docs/{page} has no {lang} block"
    return found


async def test_the_actions_example_answers_through_its_action(
    config: HubConfig, make_hub: Callable[..., Hub], tmp_path: Path
) -> None:
    """docs/extending/actions.md: ``my_tools.py`` as written, named by ``module =`` as written."""
    (code,) = (b for b in page_blocks("extending/actions.md", "python") if "my_tools.py" in b.text)
    (table,) = (b for b in page_blocks("extending/actions.md", "toml") if "[extensions.weather]" in b.text)
    assert 'module = "my_tools"' in table.text
    (tmp_path / "my_tools.py").write_text(code.text)
    config.path = tmp_path / "config.toml"
    # another test may have imported a my_tools.py of its own: load this one, not that
    sys.modules.pop("my_tools", None)
    importlib.invalidate_caches()
    sys.path.insert(0, str(tmp_path))
    try:
        weather = load_extension("weather", {"module": "my_tools"}, config)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("my_tools", None)
    model = ScriptedModel(
        [
            '<response><action_call name="getWeather">{"location": "Paris"}</action_call></response>',
            '<response><output type="cli:message">It is 72 and sunny.</output></response>',
        ]
    )
    async with make_hub(model, weather) as hub:
        result = await hub.send("cli:session", {"user": "ann"}, "weather in Paris?")
    assert result.state == RunState.COMPLETED, result.reason
    # the action's result reached the model's second step
    assert '"temperature": 72' in str(model.requests[1]) and "sunny" in str(model.requests[1])


async def test_the_backup_command_copies_a_running_hubs_database(
    config: HubConfig, make_hub: Callable[..., Hub], tmp_path: Path
) -> None:
    """docs/operating/backups.md: the online backup, run while the hub holds its database."""
    (block,) = page_blocks("operating/backups.md", "sh")
    work = Path(config.hub.data_dir).parent
    assert Path(config.hub.data_dir).name == "data"  # the block's paths are relative to the config's folder
    async with make_hub(['<response><output type="cli:message">hi</output></response>']) as hub:
        result = await hub.send("cli:session", {"user": "ann"}, "hello")
        assert result.state == RunState.COMPLETED
        for line in block.text.splitlines():
            line = line.replace(".venv/bin/python", sys.executable)
            subprocess.run(line, shell=True, cwd=work, check=True, timeout=60)
    conn = sqlite3.connect(work / "backup" / "hub.db")
    try:
        assert conn.execute("PRAGMA quick_check").fetchone() == ("ok",)
        (runs,) = conn.execute("SELECT count(*) FROM runs").fetchone()
    finally:
        conn.close()
    assert runs == 1


async def test_the_alert_rules_name_metrics_the_hub_exports(make_hub: Callable[..., Hub]) -> None:
    """docs/operating/metrics.md: every hub_* series in the alerting rules is one /metrics serves."""
    (block,) = page_blocks("operating/metrics.md", "yaml")
    rules = [r for g in yaml.safe_load(block.text)["groups"] for r in g["rules"]]
    used = {name for r in rules for name in re.findall(r"\bhub_\w+", r["expr"])}
    assert len(used) >= 6
    async with make_hub() as hub:
        families = list(hub.metrics.registry.collect())
    # a labelled series has no sample until it is observed: the families say what it will be
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}
    exported = {f.name + end for f in families for end in suffixes.get(f.type, ("",))}
    assert used <= exported, f"not exported: {sorted(used - exported)}"
