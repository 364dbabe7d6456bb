"""The store commands: ``hub inbox`` (parked inputs: list, retry, drop) and ``hub prune``.

They open ``data/hub.db`` beside a running hub (SQLite serialises the writers; a busy
lock is waited out), so an operator can act without stopping it.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from ..config import HubConfig
from ..errors import HubError

if TYPE_CHECKING:
    from ..store import Stores

__all__ = ["add_store_commands", "STORE_COMMANDS"]


def add_store_commands(
    sub: argparse._SubParsersAction,
    common: argparse.ArgumentParser,
) -> None:
    """Add ``inbox`` and ``prune`` to the ``hub`` parser."""
    inbox = sub.add_parser(
        "inbox", parents=[common], help="inputs parked after failing too often: list, retry ID, drop ID"
    )
    inbox.add_argument(
        "action", nargs="?", choices=["list", "retry", "drop"], default="list", help="what to do (default: list)"
    )
    inbox.add_argument("id", nargs="?", help="with retry/drop: an input id or a unique prefix (as listed)")
    inbox.add_argument("--json", action="store_true", help="list: one JSON object per line")
    prune = sub.add_parser("prune", parents=[common], help="apply [hub] retention now")
    prune.add_argument("--dry-run", action="store_true", help="show what would be deleted, delete nothing")


def _stores(config: HubConfig) -> Stores:
    """The stores of the hub that wrote ``data_dir`` (or ``[store] url``), which must exist."""
    from ..store import open_stores

    return open_stores(config, missing="no database yet")


async def cmd_inbox(config: HubConfig, args: argparse.Namespace) -> int:
    if args.action != "list" and not args.id:
        raise HubError(f"hub inbox {args.action} needs the id of a parked input (see `hub inbox`)")
    async with _stores(config) as stores:
        inbox = stores.inbox
        if args.action == "list":
            parked = await inbox.parked()
            for p in parked:
                if args.json:
                    print(
                        json.dumps(
                            {
                                "id": p.entry.id,
                                "context": p.context,
                                "failures": p.failures,
                                "error": p.error,
                                "run_id": p.run_id,
                                "received": p.entry.ts,
                                "content": p.entry.content,
                            },
                            ensure_ascii=False,
                            default=str,
                        )
                    )
                else:
                    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(p.entry.ts))
                    content = json.dumps(p.entry.content, ensure_ascii=False, default=str)
                    content = content if len(content) <= 60 else content[:59] + "…"
                    print(f"{p.entry.id[:10]}  {when}  {p.context}  {p.failures} failed runs: {p.error}\n    {content}")
            if not parked and not args.json:
                print("no parked inputs")
            return 0
        input_id = await inbox.find(args.id)
        if input_id is None:
            raise HubError(f"no input matches {args.id!r} (give more characters if several do)")
        ok = await (inbox.retry(input_id) if args.action == "retry" else inbox.drop(input_id))
        if not ok:
            raise HubError(f"input {input_id[:10]} is not parked (only parked inputs can be retried or dropped)")
    if args.action == "retry":
        print(f"input {input_id[:10]} is pending again: the hub takes it at its next start")
    else:
        print(f"input {input_id[:10]} dropped")
    return 0


async def cmd_prune(config: HubConfig, args: argparse.Namespace) -> int:
    from ..store import prune

    policy = config.hub.retention
    async with _stores(config) as stores:
        assert stores.db is not None  # open_stores gives a database unless every store is given
        report = await prune(stores.db, policy, dry_run=args.dry_run)
    keep = f"runs ended within {policy.days:g} days" if policy.days else "runs of any age"
    cap = f", at most {policy.max_runs}" if policy.max_runs else ""
    print(f"retention: {keep}{cap}: {report}")
    if args.dry_run:
        for table, n in report.rows.items():
            print(f"  {table:18} {n:>9}")
    return 0


STORE_COMMANDS: dict[str, Callable[[HubConfig, argparse.Namespace], Coroutine[Any, Any, int]]] = {
    "inbox": cmd_inbox,
    "prune": cmd_prune,
}
