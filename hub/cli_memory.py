"""The episodic-memory commands: ``hub memory forget`` and ``hub export-training``.

Both work on the stores in ``data/`` directly; run them while the hub is stopped (Chroma's
embedded store does not share its directory safely between processes).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from .config import HubConfig

__all__ = ["add_memory_commands", "MEMORY_COMMANDS"]


def add_memory_commands(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    common: argparse.ArgumentParser,
) -> None:
    """Add ``memory forget`` and ``export-training`` to the ``hub`` parser."""
    memory = sub.add_parser("memory", help="episodic memory: forget a user or a conversation")
    msub = memory.add_subparsers(dest="memory_command", required=True)
    forget = msub.add_parser(
        "forget",
        parents=[common],
        help="delete the episodes of a user or a conversation (and its working memory)",
    )
    who = forget.add_mutually_exclusive_group(required=True)
    who.add_argument("--user", help="a user id, as the platform gives it")
    who.add_argument("--context", help="a conversation, TYPE:KEY (e.g. telegram:chat:42)")
    forget.add_argument("--platform", help="with --user: only on this platform (e.g. telegram)")

    export = sub.add_parser(
        "export-training", parents=[common], help="episodes as JSONL prompt/completion pairs"
    )
    export.add_argument("--out", required=True, type=Path, help="the JSONL file to write")
    export.add_argument("--context", help="only this conversation, TYPE:KEY")
    export.add_argument(
        "--meta", action="store_true", help="add run id, context, user, platform and time"
    )
    export.add_argument("--all-states", action="store_true", help="also runs that did not complete")


async def cmd_memory(config: HubConfig, args: argparse.Namespace) -> int:
    from .episodes import forget

    if args.platform and not args.user:
        print("hub: --platform only narrows --user", file=sys.stderr)
        return 2
    deleted, keys = await forget(
        config, user=args.user, context=args.context, platform=args.platform
    )
    if args.user:
        who = f"user {args.user}" + (f" on {args.platform}" if args.platform else "")
    else:
        who = args.context
    also = "".join(f", {k}" for k in keys)
    print(f"forgot {who}: {deleted} episode{'s' if deleted != 1 else ''}{also}")
    return 0


async def cmd_export_training(config: HubConfig, args: argparse.Namespace) -> int:
    from .episodes import export_training

    n = await export_training(
        config, args.out, context=args.context, with_meta=args.meta, all_states=args.all_states
    )
    print(f"wrote {n} prompt/completion pair{'s' if n != 1 else ''} to {args.out}", file=sys.stderr)
    return 0


MEMORY_COMMANDS: dict[str, Callable[[HubConfig, argparse.Namespace], Awaitable[int]]] = {
    "memory": cmd_memory,
    "export-training": cmd_export_training,
}
