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
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from ..config import HubConfig, load_config
from ..definitions import installed_platforms, platform_list
from ..errors import ConfigError, HubError
from ..logging_setup import setup_logging
from ._approvals import APPROVAL_COMMANDS, add_approval_commands
from ._memory import MEMORY_COMMANDS, add_memory_commands
from ._pairing import ACCESS_COMMANDS, add_access_commands
from ._people import PEOPLE_COMMANDS, add_people_commands
from ._review import REVIEW_COMMANDS, add_review_commands
from ._store import STORE_COMMANDS, add_store_commands
from ._tools import TOOLS_COMMANDS, add_tools_commands

__all__ = ["main"]

log = logging.getLogger("hub")

HEARTBEAT = "heartbeat"  # under data_dir, touched by `hub run`, read by `hub health`


def _version() -> str:
    """The installed distribution's version (pyproject.toml), as pip and bug reports see it."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("hub")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def _description() -> str:
    """What ``hub --help`` opens with: the platforms installed, read from their packages' metadata."""
    try:
        platforms = installed_platforms()
    except HubError as e:  # a package's broken metadata must not take the help (or any command) down
        return f"An LLM agent on the platforms installed (their list is unreadable: {e})."
    if not platforms:
        return "An LLM agent gateway; no platform is installed (pip install 'hub[all]', or one platform's extra)."
    return f"An LLM agent on {platform_list(platforms)}."


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hub", description=_description())
    p.add_argument("--version", action="version", version=f"hub {_version()}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", default=None, metavar="FILE", help="config file (default: ./config.toml)")
    common.add_argument(
        "--log-level",
        default=None,
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="overrides [hub] log_level (hub chat: WARNING unless given)",
    )
    common.add_argument("--log-format", default=None, choices=["text", "json"], help="overrides [hub] log_format")
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", parents=[common], help="run every enabled extension until SIGINT/SIGTERM")
    chat = sub.add_parser("chat", parents=[common], help="talk to the agent in the terminal (or pipe lines in)")
    for cmd in (run, chat):  # the data-dir check (hub/store/_datadir.py)
        cmd.add_argument(
            "--allow-empty",
            action="store_true",
            help="start even though hub.db is empty or missing in a data dir with history",
        )
    runs = sub.add_parser("runs", parents=[common], help="recent runs")
    runs.add_argument("--limit", type=int, default=20, metavar="N", help="at most N runs, newest first")
    runs.add_argument(
        "--state",
        default=None,
        choices=["running", "completed", "failed", "rejected", "killed"],
        help="only runs in this state",
    )
    runs.add_argument("--context", default=None, metavar="TYPE:KEY", help="only this conversation (a context instance)")
    runs.add_argument("--json", action="store_true", help="one JSON object per line")
    runs.add_argument("--raw", action="store_true", help="print control characters as they are (not escaped)")
    runs.add_argument("--follow", action="store_true", help="print runs' events as they arrive, until Ctrl-C")
    trace = sub.add_parser("trace", parents=[common], help="one run's whole event log and its tree of child runs")
    trace.add_argument("run_id", help="a run id or a unique prefix of one")
    trace.add_argument("--json", action="store_true", help="the run, its events and its child runs as one JSON object")
    trace.add_argument("--raw", action="store_true", help="print control characters as they are (not escaped)")
    trace.add_argument("--follow", action="store_true", help="print the run's events as they arrive, until it ends")
    stop = sub.add_parser("stop", parents=[common], help="stop a run in progress, on whichever worker holds it")
    stop.add_argument("run_id", help="a run id or a unique prefix of one")
    stop.add_argument(
        "--wait", type=float, default=10.0, metavar="SECONDS", help="seconds to wait for the run to end (default 10)"
    )
    sub.add_parser("check", parents=[common], help="validate config, personas and extension settings")
    health = sub.add_parser("health", parents=[common], help="exit 0 if a running hub is alive (container healthcheck)")
    health.add_argument(
        "--max-age",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="without [http]: the heartbeat file may be at most this old (default 60)",
    )
    persona = sub.add_parser("persona", help="persona revisions: history and rollback")
    psub = persona.add_subparsers(dest="persona_command", required=True)
    psub.add_parser("list", parents=[common], help="personas, their files and revision counts")
    history = psub.add_parser("history", parents=[common], help="every accepted revision of a persona, with diffs")
    history.add_argument("name", help="the persona's name")
    history.add_argument("--json", action="store_true", help="one JSON object per revision")
    rollback = psub.add_parser("rollback", parents=[common], help="put a revision back in force")
    rollback.add_argument("name", help="the persona's name")
    rollback.add_argument("rev", type=int, help="the revision number, as history lists it")
    add_memory_commands(sub, common)
    add_store_commands(sub, common)
    add_access_commands(sub, common)
    add_people_commands(sub, common)
    add_approval_commands(sub, common)
    add_review_commands(sub, common)
    add_tools_commands(sub, common)
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
    from ..redact import Redactor

    setup_logging(level, args.log_format or config.hub.log_format, redactor=Redactor.from_config(config))
    if args.command in ("run", "chat"):  # `hub check` reports them itself
        for warning in config.unset_warnings():
            log.warning("config: %s", warning)
    commands: dict[str, Callable[[HubConfig, argparse.Namespace], Coroutine[Any, Any, int]]] = {
        "run": cmd_run,
        "chat": cmd_chat,
        "runs": cmd_runs,
        "trace": cmd_trace,
        "stop": cmd_stop,
        "check": cmd_check,
        "persona": cmd_persona,
        "health": cmd_health,
    }
    commands.update(MEMORY_COMMANDS)
    commands.update(STORE_COMMANDS)
    commands.update(ACCESS_COMMANDS)
    commands.update(PEOPLE_COMMANDS)
    commands.update(APPROVAL_COMMANDS)
    commands.update(REVIEW_COMMANDS)
    commands.update(TOOLS_COMMANDS)
    lock = None
    try:
        if args.command in ("run", "chat"):  # one process per data dir, and a database worth opening
            from ..store import claim_data_dir

            lock = claim_data_dir(config, allow_empty=args.allow_empty)
            args.holds_data_dir = True
        return asyncio.run(commands[args.command](config, args))
    except KeyboardInterrupt:
        return 130
    except HubError as e:
        print(f"hub: {e}", file=sys.stderr)
        return 2
    finally:
        if lock is not None:
            lock.release()


async def cmd_run(config: HubConfig, args: argparse.Namespace) -> int:
    from ..hub import Hub
    from ..store import sole_worker

    # with the data dir's lock held on SQLite, no other process shares this store: the same
    # lease holder as the last process here, so a restart after a crash polls at once
    worker = sole_worker(config) if getattr(args, "holds_data_dir", False) else None
    hub = Hub(config, heartbeat=config.data_dir / HEARTBEAT, worker=worker)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with hub:
        from ._heap import settle_heap

        log.debug("start-up heap frozen out of garbage collection: %d objects", settle_heap())
        log.info("hub running with %s; stop with Ctrl-C or SIGTERM", ", ".join(hub.extensions) or "no extensions")
        await stop.wait()
        log.info("stopping: no new input; runs in flight get %.0fs", config.hub.shutdown_grace)
    return 0


async def cmd_chat(config: HubConfig, args: argparse.Namespace) -> int:
    from ..definitions import import_extension, load_extensions
    from ..hub import Hub

    # the terminal is an extension like any other (hub-cli), found through its entry point
    terminal = import_extension("cli")
    CliSettings, os_user, read_lines = terminal.CliSettings, terminal.os_user, terminal.read_lines
    cli_extension, converse = terminal.extension, terminal.converse

    # the terminal only: keep tool extensions, leave platform listeners to `hub run`
    config.extensions = {k: v for k, v in config.extensions.items() if k != "cli"}
    tools = [e for e in load_extensions(config) if not e.inputs and not e.services]
    interactive = sys.stdin.isatty()
    cli = cli_extension(CliSettings(stdin=False, prefix="bot> " if interactive else ""))
    config.http = None  # triggers are `hub run`'s: no second server on its port, no schedules fired twice
    hub = Hub(config, extensions=[cli, *tools], load_extensions=False)
    hub.scheduler.enabled = False
    user = os_user()

    def answered(result: Any) -> None:
        if result is not None and not result.ok:
            print(f"[run {result.run_id[:8]} {result.state}: {result.reason}]", file=sys.stderr)
        if interactive:
            print("you> ", end="", flush=True)

    async with hub:
        if interactive:
            print(f"Talking to the hub as {user}. Ctrl-D to leave; /help for the commands.", file=sys.stderr)
            print("you> ", end="", flush=True)
        # a line at a time, in order; the chat commands (/help, /new, /stop) answered by the hub
        await converse(hub.submit, hub.commands.names, user, read_lines(), answered=answered, approver=cli.approver)
        if interactive:
            print(file=sys.stderr)
    return 0


def _stores(config: HubConfig) -> Any:
    """The stores of the hub that wrote ``data_dir`` (or ``[store] url``), for a command that reads its runs."""
    from ..store import open_stores

    return open_stores(config, missing="no runs yet")


def _fmt_time(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else "-"


async def cmd_runs(config: HubConfig, args: argparse.Namespace) -> int:
    if args.follow:
        from ._follow import cmd_follow

        return await cmd_follow(config, args)
    from ..store import ApprovalState, RunState

    async with _stores(config) as stores:
        runs = await stores.runs.list(limit=args.limit, state=args.state, context=args.context)
        # a run waiting for a person's yes shows it (hub approvals answers it)
        waiting = {a.run_id: a for a in await stores.approvals.list(states=(ApprovalState.PENDING,))}
    if args.json:
        for r in runs:
            row = _run_dict(r)
            if r.id in waiting and r.state == RunState.RUNNING:
                row["waiting_for_approval"] = waiting[r.id].id
            print(json.dumps(row))
        return 0
    if not runs:
        print("no runs")
        return 0
    from ._trace import escape_terminal

    def safe(text: str) -> str:  # a context id or a reason may hold user text
        return text if args.raw else escape_terminal(text, newlines=False)

    # which named models answered: a column only when one of these runs was answered by one
    named = any(r.models for r in runs)
    print(
        f"{'id':10} {'started':19} {'context':28} {'state':10} {'steps':>5} {'tokens':>7} {'cost':>8} {'secs':>6}  "
        + (f"{'models':16} " if named else "")
        + "reason"
    )
    for r in runs:
        dur = f"{r.duration:.1f}" if r.duration is not None else "-"
        models = f"{safe(r.models or '-')[:16]:16} " if named else ""
        state, reason = str(r.state), r.reason or ""
        if r.id in waiting and r.state == RunState.RUNNING:
            q = waiting[r.id]
            state, reason = "waiting", f"approval {q.id}: {q.action} (hub approvals approve|deny {q.id})"
        print(
            f"{r.id[:10]:10} {_fmt_time(r.started):19} {safe(r.context)[:28]:28} {state:10} {r.steps:>5} "
            f"{r.tokens:>7} {format_cost(r.cost):>8} {dur:>6}  {models}{safe(reason)}"
        )
    return 0


def format_cost(cost: float) -> str:
    """A run's cost as the command line shows it: ``-`` when nothing was priced."""
    return f"{cost:.4f}" if cost > 0 else "-"


def _run_dict(r: Any) -> dict[str, Any]:
    return {
        "id": r.id,
        "context": r.context,
        "state": str(r.state),
        "reason": r.reason,
        "steps": r.steps,
        "prompt_tokens": r.prompt_tokens,
        "completion_tokens": r.completion_tokens,
        "cached_tokens": r.cached_tokens,
        "started": r.started,
        "ended": r.ended,
        "duration": r.duration,
        "parent_id": r.parent_id,
        "user": r.user,
        "cost": r.cost,
        "models": r.models.split(",") if r.models else [],
    }


async def cmd_stop(config: HubConfig, args: argparse.Namespace) -> int:
    """Ask whichever process holds the run (a ``hub run`` beside this one on SQLite, or any
    worker on PostgreSQL) to stop it, and wait for its end."""
    from ..features import request_stop
    from ..store import RunState

    async with _stores(config) as stores:
        record = await request_stop(stores.runs, stores.stops, args.run_id, wait=args.wait)
    if record.state == RunState.RUNNING:
        print(
            f"hub: run {record.id[:10]}: stop requested, but it is still running after {args.wait:g}s "
            "(is the hub that runs it alive? a run cut off by a crash is recorded at its next start)",
            file=sys.stderr,
        )
        return 1
    print(f"run {record.id[:10]} {record.context}: {record.state}" + (f" ({record.reason})" if record.reason else ""))
    return 0


async def cmd_trace(config: HubConfig, args: argparse.Namespace) -> int:
    from ..logs import to_dict
    from ..store import collect_tree
    from ._trace import render_trace

    if args.follow:
        from ._follow import cmd_follow

        return await cmd_follow(config, args)
    async with _stores(config) as stores:
        store = stores.runs
        run = await store.find(args.run_id)
        if run is None:
            raise HubError(f"no run matches {args.run_id!r} (give more characters if several do)")
        events = await store.events(run.id)
        tree = await collect_tree(store, run.id)
    from ..redact import Redactor

    redactor = Redactor.from_config(config)  # also masks runs recorded before a secret was set
    if args.json:

        def nested(run_id: str) -> list[dict[str, Any]]:
            return [{**_run_dict(c), "children": nested(c.id)} for c in tree.get(run_id, [])]

        data = {"run": _run_dict(run), "events": [to_dict(e) for e in events], "children": nested(run.id)}
        print(json.dumps(redactor.redact_tree(json.loads(json.dumps(data, default=str)))))
        return 0
    from ._trace import escape_terminal

    text = redactor.redact(render_trace(run, events, tree=tree))
    print(text if args.raw else escape_terminal(text))
    return 0


async def cmd_check(config: HubConfig, args: argparse.Namespace) -> int:
    from ._check import check_config, check_mcp

    report = check_config(config)
    mcp = await check_mcp(config, report)
    for w in report.warnings:
        print(f"warning: {w}", file=sys.stderr)
    if report.errors:
        for e in report.errors:
            print(f"error: {e}", file=sys.stderr)
        print(f"{len(report.errors)} problem{'s' if len(report.errors) > 1 else ''} found", file=sys.stderr)
        return 2
    from ..errors import StoreError
    from ..store import inspect_store

    try:  # the one thing check connects to: the workers' shared database, if there is one
        store = await inspect_store(config)
    except StoreError as e:
        print(f"error: store.url: {e}", file=sys.stderr)
        return 2
    where = config.path or "defaults (no config.toml)"
    provider = config.model.resolved_provider()
    print(f"ok: {where}")
    print(f"  store: {store}")
    print(f"  model: {provider} {config.model.name if provider == 'openai' else ''}".rstrip())
    for name in config.model.fallbacks:  # tried in order when the one before fails
        m = config.models[name]
        print(f"  fallback {name}: {m.resolved_provider()} {m.name}, {len(m.keys)} key(s)")
    if len(config.model.keys) > 1:
        print(f"  keys: {len(config.model.keys)}, used in turn")
    print(f"  extensions: {', '.join(report.extensions) or 'none'}")
    print(f"  personas: {', '.join(report.personas) or 'none'}")
    print(f"  skills: {', '.join(report.skills) or 'none'}")
    for line in mcp:
        print(line)
    return 0


async def cmd_health(config: HubConfig, args: argparse.Namespace) -> int:
    """/healthz of the hub's HTTP endpoint when there is one, else the heartbeat's age."""
    if config.http is not None:
        import urllib.error
        import urllib.request

        host = config.http.host if config.http.host not in ("0.0.0.0", "::", "") else "127.0.0.1"
        url = f"http://{host}:{config.http.port}/healthz"
        # with the token /healthz also names the models not answering now (a circuit open)
        request = urllib.request.Request(
            url, headers={"Authorization": f"Bearer {config.http.token}"} if config.http.token else {}
        )

        def fetch() -> tuple[int, bytes]:
            with urllib.request.urlopen(request, timeout=5) as answer:
                return answer.status, answer.read()

        try:
            status, body = await asyncio.to_thread(fetch)
        except urllib.error.HTTPError as e:  # 503: stopping, or a store failing
            text = e.read().decode("utf-8", "replace")
            state = json.loads(text).get("status", "unhealthy") if text.startswith("{") else "unhealthy"
            print(f"{state}: {url} answered {e.code}: {text}", file=sys.stderr)
            return 1
        except (urllib.error.URLError, OSError) as e:
            print(f"unhealthy: {url}: {e}", file=sys.stderr)
            return 1
        print(f"ok: {url} answered {status}")
        answer = json.loads(body) if body.startswith(b"{") else {}
        if answer.get("note"):  # not a failure (the exit status stays 0): episodes parked
            print(f"note: {answer['note']}")
        _print_models(answer.get("models"))
        return 0
    path = config.data_dir / HEARTBEAT
    try:
        age = time.time() - path.stat().st_mtime
    except FileNotFoundError:
        print(f"unhealthy: no heartbeat at {path} (is `hub run` running?)", file=sys.stderr)
        return 1
    if age > args.max_age:
        print(f"unhealthy: last heartbeat {age:.0f}s ago (more than {args.max_age:.0f}s)", file=sys.stderr)
        return 1
    degraded = [line for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("degraded:")]
    if degraded:  # the store is failing: runs fail with store_error, their inputs wait in the inbox
        print(degraded[0], file=sys.stderr)
        return 1
    print(f"ok: heartbeat {age:.0f}s ago")
    lines = path.read_text(encoding="utf-8").splitlines()
    for line in lines:
        if line.startswith("note:"):  # not a failure (the exit status stays 0): episodes parked
            print(line)
        elif line.startswith("model "):
            print(f"warning: {line}", file=sys.stderr)
    return 0


def _print_models(models: Any) -> None:
    """The models /healthz names as not answering (a fallback answers meanwhile): warnings."""
    if isinstance(models, dict):
        for name, why in models.items():
            print(f"warning: model {name}: {why}", file=sys.stderr)


async def cmd_persona(config: HubConfig, args: argparse.Namespace) -> int:
    from ..personas import render_history, rollback
    from ..store import has_database, open_stores

    path = config.data_dir / "hub.db"
    folder = config.contexts_dir
    if not has_database(config):
        if args.persona_command == "list":
            for p in sorted(folder.glob("*.toml")):
                print(f"{p.stem:20}   0 revisions  {p}")
            return 0
        raise HubError(f"no persona revisions yet: {path} does not exist (the hub records them when it runs)")
    async with open_stores(config) as stores:
        store = stores.revisions
        if args.persona_command == "list":
            stored = {n for n in await store.names() if not n.startswith("skill:")}  # skills' are `hub skill`'s
            names = sorted({p.stem for p in folder.glob("*.toml")} | stored)
            counts = {n: len(await store.history(n)) for n in names}
            for n in names:
                file = folder / f"{n}.toml"
                plural = "s" if counts[n] != 1 else " "
                print(f"{n:20} {counts[n]:>3} revision{plural}  {file if file.exists() else '(file deleted)'}")
            if not names:
                print(f"no personas in {folder}")
            return 0
        revisions = await store.history(args.name)
        if not revisions:
            known = ", ".join(await store.names()) or "none"
            raise HubError(f"persona {args.name!r} has no revisions (known: {known})")
        if args.persona_command == "history":
            file = folder / f"{args.name}.toml"
            current = file.read_text(encoding="utf-8") if file.exists() else None
            if args.json:
                for r in revisions:
                    print(json.dumps({"name": r.name, "rev": r.rev, "ts": r.ts, "note": r.note, "text": r.text}))
            else:
                print(render_history(revisions, current=current))
            return 0
        target = await rollback(store, folder, args.name, args.rev)
        print(
            f"persona {args.name}: rev {target.rev} is back in {folder / (args.name + '.toml')}; "
            "a running hub uses it from its next message"
        )
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
