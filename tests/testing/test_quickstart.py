"""hub.testing.quickstart's readers of a quick start, on sections written here: what each reads
from the text, and that a test's values go over the reader's."""

from __future__ import annotations

from pathlib import Path

import pytest

from hub.testing import quickstart as qs

SECTION = """
1. In `config.toml`:

   ```toml
   [extensions.slack]
   enabled = true
   bot_token = "${SLACK_BOT_TOKEN}"
   ```

2. Then:

   ```bash
   export SLACK_BOT_TOKEN="xoxb-..." SLACK_APP_TOKEN="xapp-..."
   export OPENAI_API_KEY="sk-..."
   ```

   (or `export NOT_THIS="x"` in a sentence)
"""


def test_exports_reads_every_variable_of_each_export_line() -> None:
    assert qs.exports(SECTION) == {
        "SLACK_BOT_TOKEN": "xoxb-...",
        "SLACK_APP_TOKEN": "xapp-...",
        "OPENAI_API_KEY": "sk-...",
    }


def test_variable_of_names_the_variable_and_refuses_a_written_secret() -> None:
    assert qs.variable_of("${SLACK_BOT_TOKEN}") == "SLACK_BOT_TOKEN"
    with pytest.raises(AssertionError, match="'xoxb-pasted' does not come from the environment"):
        qs.variable_of("xoxb-pasted")


def test_quickstart_config_puts_the_tests_values_over_the_exported_ones(tmp_path: Path) -> None:
    cfg = qs.quickstart_config(SECTION, tmp_path / "data", {"hub": {"shutdown_grace": 1}}, {"SLACK_BOT_TOKEN": "mine"})
    assert cfg.enabled_extensions()["slack"]["bot_token"] == "mine"
    assert cfg.hub.shutdown_grace == 1 and cfg.hub.data_dir == str(tmp_path / "data")
    exported = qs.quickstart_config(SECTION, tmp_path / "data", {})
    assert exported.enabled_extensions()["slack"]["bot_token"] == "xoxb-..."
