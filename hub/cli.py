"""The ``hub`` command: run, chat, runs, trace, check (and memory, export-training).

Every command takes ``--config`` (default ``./config.toml``). Errors the operator can fix
(config, personas, an unreachable model) are one clear line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
import time
from collections.abc import Sequence
from typing import Any

from .cli_memory import MEMORY_COMMANDS, add_memory_commands
from .config import HubConfig, load_config
from .errors import ConfigError, HubError
from .logconf import setup_logging

__all__ = ["main"]

log = logging.getLogger("hub")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hub", description="An LLM agent on Discord, Telegram, X and the terminal.")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", default=None, help="config file (default: ./config.toml)")
    common.add_argument("--log-level", default=None, choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    common.add_argument("--log-format", default=None, choices=["text", "json"])
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("run", parents=[common], help="run every enabled extension until SIGINT/SIGTERM")
    sub.add_parser("chat", parents=[common], help="talk to the agent in the terminal (or pipe lines in)")
    runs = sub.add_parser("runs", parents=[common], help="recent runs")
    runs.add_argument("--limit", type=int, default=20)
    runs.add_argument("--state", default=None, choices=["running", "completed", "failed", "rejected", "killed"])
    runs.add_argument("--context", default=None, help="a context instance, TYPE:KEY")
    runs.add_argument("--json", action="store_true", help="one JSON object per line")
    trace = sub.add_parser("trace", parents=[common], help="one run's whole event log")
    trace.add_argument("run_id", help="a run id or a unique prefix of one")
    trace.add_argument("--json", action="store_true")
    sub.add_parser("check", parents=[common], help="validate config, personas and extension settings")
    add_memory_commands(sub, common)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        config = load_config(args.config)
    except ConfigError as e:
        print(f"hub: config error: {e}", file=sys.stderr)
        return 2
    level = args.log_level or config.hub.log_level
    if args.command == "chat" and args.log_level is None:
        level = "WARNING"  # the terminal is for the conversation
    setup_logging(level, args.log_format or config.hub.log_format)
    commands = {"run": cmd_run, "chat": cmd_chat, "runs": cmd_runs, "trace": cmd_trace, "check": cmd_check}
    commands.update(MEMORY_COMMANDS)
    try:
        return asyncio.run(commands[args.command](config, args))
    except KeyboardInterrupt:
        return 130
    except HubError as e:
        print(f"hub: {e}", file=sys.stderr)
        return 2


async def cmd_run(config: HubConfig, args: argparse.Namespace) -> int:
    from .hub import Hub

    hub = Hub(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with hub:
        log.info("hub running with %s; stop with Ctrl-C or SIGTERM", ", ".join(hub.extensions) or "no extensions")
        await stop.wait()
        log.info("stopping: no new input; runs in flight get %.0fs", config.hub.shutdown_grace)
    return 0


async def cmd_chat(config: HubConfig, args: argparse.Namespace) -> int:
    from extensions.cli import CliSettings, os_user, read_lines
    from extensions.cli import extension as cli_extension

    from .hub import Hub
    from .loader import load_extensions

    # the terminal only: keep tool extensions, leave platform listeners to `hub run`
    config.extensions = {k: v for k, v in config.extensions.items() if k != "cli"}
    tools = [e for e in load_extensions(config) if not e.inputs and not e.services]
    interactive = sys.stdin.isatty()
    cli = cli_extension(CliSettings(stdin=False, prefix="bot> " if interactive else ""))
    hub = Hub(config, extensions=[cli, *tools], load_extensions=False)
    user = os_user()
    async with hub:
        if interactive:
            print(f"Talking to the hub as {user}. Ctrl-D to leave.", file=sys.stderr)
            print("you> ", end="", flush=True)
        async for line in read_lines():
            text = line.strip()
            if text:
                result = await hub.send("cli:session", {"user": user}, text, user=user)
                if result is not None and not result.ok:
                    print(f"[run {result.run_id[:8]} {result.state}: {result.reason}]", file=sys.stderr)
            if interactive:
                print("you> ", end="", flush=True)
        if interactive:
            print(file=sys.stderr)
    return 0


def _stores(config: HubConfig) -> Any:
    from .db import Database
    from .runs import SQLiteRunStore

    path = config.data_dir / "hub.db"
    if not path.exists():
        raise HubError(f"no runs yet: {path} does not exist")
    return Database(path), SQLiteRunStore


def _fmt_time(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else "-"


async def cmd_runs(config: HubConfig, args: argparse.Namespace) -> int:
    db, cls = _stores(config)
    async with db:
        store = cls(db)
        await store.open()
        runs = await store.list(limit=args.limit, state=args.state, context=args.context)
    if args.json:
        for r in runs:
            print(json.dumps(_run_dict(r)))
        return 0
    if not runs:
        print("no runs")
        return 0
    print(f"{'id':10} {'started':19} {'context':28} {'state':10} {'steps':>5} {'tokens':>7} {'secs':>6}  reason")
    for r in runs:
        dur = f"{r.duration:.1f}" if r.duration is not None else "-"
        print(
            f"{r.id[:10]:10} {_fmt_time(r.started):19} {r.context[:28]:28} {r.state!s:10} {r.steps:>5} "
            f"{r.tokens:>7} {dur:>6}  {r.reason or ''}"
        )
    return 0


def _run_dict(r: Any) -> dict[str, Any]:
    return {
        "id": r.id,
        "context": r.context,
        "state": str(r.state),
        "reason": r.reason,
        "steps": r.steps,
        "prompt_tokens": r.prompt_tokens,
        "completion_tokens": r.completion_tokens,
        "started": r.started,
        "ended": r.ended,
        "duration": r.duration,
        "parent_id": r.parent_id,
        "user": r.user,
    }


async def cmd_trace(config: HubConfig, args: argparse.Namespace) -> int:
    from .logs import to_dict

    db, cls = _stores(config)
    async with db:
        store = cls(db)
        await store.open()
        run = await store.find(args.run_id)
        if run is None:
            raise HubError(f"no run matches {args.run_id!r} (give more characters if several do)")
        events = await store.events(run.id)
        children = await store.list(parent_id=run.id, limit=1000)
    if args.json:
        print(json.dumps({"run": _run_dict(run), "events": [to_dict(e) for e in events],
                          "children": [_run_dict(c) for c in children]}, default=str))
        return 0
    from .trace import render_trace

    print(render_trace(run, events, children))
    return 0


async def cmd_check(config: HubConfig, args: argparse.Namespace) -> int:
    from .loader import load_extensions
    from .persona import PersonaSet

    problems: list[str] = []
    try:
        exts = load_extensions(config)
    except HubError as e:
        problems.append(str(e))
        exts = []
    personas = PersonaSet(config.contexts_dir)
    if not config.contexts_dir.is_dir():
        problems.append(f"{config.contexts_dir}: personas folder not found")
    else:
        problems.extend(str(e) for e in personas.load_all())
        if config.contexts_dir.is_dir() and personas.get(personas.default) is None and not problems:
            problems.append(f"{config.contexts_dir}: no {personas.default}.toml (the default persona)")
    if config.model.resolved_provider() == "local" and not config.model.model_path:
        from .models.local import default_gguf

        try:
            default_gguf()
        except HubError as e:
            problems.append(str(e))
    where = config.path or "defaults (no config.toml)"
    if problems:
        for p in problems:
            print(f"error: {p}", file=sys.stderr)
        return 2
    print(f"ok: {where}")
    print(f"  model: {config.model.resolved_provider()} {config.model.name if config.model.resolved_provider() == 'openai' else ''}".rstrip())
    print(f"  extensions: {', '.join(e.name for e in exts) or 'none'}")
    print(f"  personas: {', '.join(personas.names()) or 'none'}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
