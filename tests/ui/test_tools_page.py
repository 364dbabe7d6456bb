"""The dashboard's Tools page: the MCP servers (up or down, and why), their tools, the skills."""

from __future__ import annotations

import sys
from pathlib import Path

from hub.config import McpServerSection
from tests.mcp.conftest import FAULT_SERVER
from tests.ui.conftest import client, dashboard, login, make_config


async def test_the_tools_page_lists_servers_tools_and_skills(tmp_path: Path) -> None:
    cfg = make_config(tmp_path)
    cfg.mcp = {
        "f": McpServerSection(command=[sys.executable, FAULT_SERVER], tools=["echo", "pid"]),
        "broken": McpServerSection(command=[sys.executable, FAULT_SERVER, "nostart"]),
    }
    skill = tmp_path / "skills" / "invoices" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: invoices\ndescription: Bill a customer.\n---\nDo it.\n")
    cfg.agent.skills_dir = str(tmp_path / "skills")
    async with dashboard(tmp_path, config=cfg) as d, client() as s:
        await login(s, d.base)
        async with s.get(f"{d.base}/ui/tools") as resp:
            page = await resp.text()
    assert resp.status == 200
    assert "<code>f__echo</code>" in page and "<code>f__pid</code>" in page
    assert "left out: not in the tools allow-list" in page
    assert "broken" in page and "refusing to start" in page
    assert "<code>invoices</code> Bill a customer." in page
