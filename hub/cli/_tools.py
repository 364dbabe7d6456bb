"""``hub mcp list`` and ``hub skill list / history / rollback``; what ``hub check`` says of them.

``hub mcp list`` starts each configured MCP server only to ask it for its tools (the running
hub's own servers are its children, not shared), then stops it.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Coroutine
from typing import Any

from ..config import HubConfig
from ..errors import ConfigError, HubError

__all__ = ["TOOLS_COMMANDS", "add_tools_commands", "mcp_lines", "probe_mcp"]


def add_tools_commands(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    mcp = sub.add_parser("mcp", help="MCP servers: their tools")
    msub = mcp.add_subparsers(dest="mcp_command", required=True)
    listing = msub.add_parser("list", parents=[common], help="each configured server and its tools (starts them)")
    listing.add_argument("--json", action="store_true", help="one JSON object per server")
    skill = sub.add_parser("skill", help="skills: list, revisions and rollback")
    ssub = skill.add_subparsers(dest="skill_command", required=True)
    ssub.add_parser("list", parents=[common], help="skills, their descriptions and revision counts")
    history = ssub.add_parser("history", parents=[common], help="every accepted revision of a skill, with diffs")
    history.add_argument("name", help="the skill's name")
    history.add_argument("--json", action="store_true", help="one JSON object per revision")
    rollback = ssub.add_parser("rollback", parents=[common], help="put a revision of a skill back in force")
    rollback.add_argument("name", help="the skill's name")
    rollback.add_argument("rev", type=int, help="the revision number, as history lists it")


async def probe_mcp(config: HubConfig) -> list[Any]:
    """The statuses of ``config``'s MCP servers, each started and asked for its tools."""
    if not any(s.enabled for s in config.mcp.values()):
        return []
    try:
        from ..mcp import probe
    except ImportError as e:
        raise ConfigError(f"[mcp.*] servers need the mcp extra: pip install 'hub[mcp]' ({e})", key="mcp") from e
    return await probe(config)


def mcp_lines(statuses: list[Any]) -> tuple[list[str], list[str]]:
    """(lines for the listing, errors): each server, its state and its tools."""
    lines, errors = [], []
    for st in statuses:
        if st.state != "up":
            errors.append(f"mcp.{st.name}: the server did not start: {st.error}")
            lines.append(f"  mcp {st.name} ({st.transport}): down: {st.error}")
            continue
        names = ", ".join(f"{st.name}__{t.name}" for t in st.tools) or "no tools"
        lines.append(f"  mcp {st.name} ({st.transport}): {len(st.tools)} tools: {names}")
        lines.extend(f"    left out: {tool}: {why}" for tool, why in st.skipped.items())
    return lines, errors


async def cmd_mcp(config: HubConfig, args: argparse.Namespace) -> int:
    statuses = await probe_mcp(config)
    if not statuses:
        print("no MCP servers configured ([mcp.NAME] in config.toml)")
        return 0
    if args.json:
        for st in statuses:
            tools = [{"action": f"{st.name}__{t.name}", "description": t.description} for t in st.tools]
            print(json.dumps({"server": st.name, "state": st.state, "error": st.error, "tools": tools}))
    else:
        lines, _ = mcp_lines(statuses)
        print("\n".join(line.strip() if line.startswith("  mcp") else line for line in lines))
    return 0 if all(st.state == "up" for st in statuses) else 1


async def cmd_skill(config: HubConfig, args: argparse.Namespace) -> int:
    from ..personas import REVISION_PREFIX, SkillSet, render_history, rollback_skill
    from ..store import has_database, open_stores

    folder = config.resolve(config.agent.skills_dir)
    skills = SkillSet(folder)
    skills.refresh()
    if args.skill_command == "list":
        counts: dict[str, int] = {}
        if has_database(config):
            async with open_stores(config) as stores:
                counts = {n: len(await stores.revisions.history(REVISION_PREFIX + n)) for n in skills.names()}
        for name, about in skills.summaries():
            print(f"{name:24} {counts.get(name, 0):>3} revisions  {about}")
        for name, error in skills.errors().items():
            print(f"{name:24} error: {error}")
        if not skills.names() and not skills.errors():
            print(f"no skills in {folder}")
        return 0
    if not has_database(config):
        raise HubError("no skill revisions yet: the hub records them when it runs")
    async with open_stores(config) as stores:
        store = stores.revisions
        key = REVISION_PREFIX + args.name
        revisions = await store.history(key)
        if not revisions:
            raise HubError(f"skill {args.name!r} has no revisions (skills: {', '.join(skills.names()) or 'none'})")
        if args.skill_command == "history":
            file = folder / args.name / "SKILL.md"
            if args.json:
                for r in revisions:
                    print(json.dumps({"name": args.name, "rev": r.rev, "ts": r.ts, "note": r.note, "text": r.text}))
            else:
                print(render_history(revisions, current=file.read_text(encoding="utf-8") if file.exists() else None))
            return 0
        target = await rollback_skill(store, folder, args.name, args.rev)
    print(
        f"skill {args.name}: rev {target.rev} is back in {folder / args.name / 'SKILL.md'}; a running hub uses it now"
    )
    return 0


TOOLS_COMMANDS: dict[str, Callable[[HubConfig, argparse.Namespace], Coroutine[Any, Any, int]]] = {
    "mcp": cmd_mcp,
    "skill": cmd_skill,
}
