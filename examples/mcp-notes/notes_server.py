"""An MCP server with two tools, add_note and search_notes, over a JSON file of notes.

Written with the mcp SDK's high-level server (``MCPServer``, called ``FastMCP`` before mcp 2);
the hub runs it over stdio as ``[mcp.notes]`` says. The notes file is ``$NOTES_FILE``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from mcp.server.mcpserver import MCPServer  # FastMCP before mcp 2, the same API

NOTES = Path(os.environ.get("NOTES_FILE", "notes.json"))
server = MCPServer("notes")


def _load() -> list[str]:
    return json.loads(NOTES.read_text()) if NOTES.exists() else []


@server.tool(description="Save a note. Returns how many notes there are now.")
def add_note(text: str) -> int:
    if not text.strip():
        raise ValueError("a note needs some text")
    notes = [*_load(), text.strip()]
    # write beside, then rename: a crash never leaves half a file
    tmp = NOTES.with_suffix(".tmp")
    tmp.write_text(json.dumps(notes, ensure_ascii=False))
    tmp.replace(NOTES)
    return len(notes)


@server.tool(description="The saved notes that contain every word of the query (case does not matter).")
def search_notes(query: str) -> list[str]:
    words = query.lower().split()
    return [n for n in _load() if all(w in n.lower() for w in words)]


if __name__ == "__main__":
    server.run()  # stdio
