"""What the MCP tests share: a config's [mcp.*] tables, the SDK-built fault server, and a
look at this process's children (no server may outlive the hub)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from hub.config import McpServerSection

FAULT_SERVER = str(Path(__file__).with_name("fault_server.py"))


def fault_server(mode: str = "ok", **kw) -> McpServerSection:
    """The fault server (tests/mcp/fault_server.py) over stdio, in ``mode``."""
    return McpServerSection(command=[sys.executable, FAULT_SERVER, mode], **kw)


def time_server(**kw) -> McpServerSection:
    """The reference server mcp-server-time (from the package index), in UTC."""
    return McpServerSection(command=["mcp-server-time", "--local-timezone", "UTC"], **kw)


def descendants(pid: int | None = None) -> list[tuple[int, str]]:
    """(pid, command line) of every living descendant of ``pid`` (this process by default)."""
    root = pid or os.getpid()
    parents: dict[int, int] = {}
    cmdlines: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] == "Z":  # a zombie has exited
            continue
        parents[int(entry)] = int(fields[1])
        cmdlines[int(entry)] = cmd
    found, frontier = [], {root}
    while frontier:
        kids = {p for p, pp in parents.items() if pp in frontier}
        found.extend((k, cmdlines[k]) for k in kids)
        frontier = kids
    return found


def mcp_children(pid: int | None = None) -> list[tuple[int, str]]:
    return [(p, c) for p, c in descendants(pid) if "mcp" in c or "fault_server" in c]


@pytest.fixture(autouse=True)
def _no_orphans():
    """Every test ends with no MCP server left running under this process."""
    yield
    assert mcp_children() == [], "an MCP server outlived its hub"
