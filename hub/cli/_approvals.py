"""``hub approvals list / approve ID / deny ID``: the operator's answer to a run waiting before
an action (``[approvals]``, hub/features/_approvals.py).

The answer is a compare-and-set on the approval's row in the store the hub runs on (SQLite
beside ``hub run``, or the workers' PostgreSQL); the worker holding the run reads it within a
second. A question already answered, or past its time, is left as it is, and said so.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Coroutine
from typing import Any

from ..config import HubConfig

__all__ = ["APPROVAL_COMMANDS", "add_approval_commands"]


def add_approval_commands(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add ``approvals`` to the ``hub`` parser."""
    p = sub.add_parser("approvals", parents=[common], help="actions waiting for a yes: list, approve ID, deny ID")
    p.add_argument("action", choices=["list", "approve", "deny"], help="what to do")
    p.add_argument("id", nargs="?", help="approve, deny: the approval's id (as list shows it)")
    p.add_argument("--all", action="store_true", help="list: answered ones too (kept a week)")
    p.add_argument("--json", action="store_true", help="list: one JSON object per line")


async def cmd_approvals(config: HubConfig, args: argparse.Namespace) -> int:
    from ..errors import HubError
    from ..features import Approvals
    from ..store import ApprovalState
    from ._store import _stores
    from ._trace import escape_terminal

    if args.action != "list" and not args.id:
        raise HubError(f"hub approvals {args.action} needs the approval's id (hub approvals list shows them)")
    async with _stores(config) as stores:
        desk = Approvals(
            stores.approvals,
            settings=config.approvals,
            roles_of=lambda platform, user: set(),
            approver_of=lambda extension: None,
            outputs={},
            runs=stores.runs,
        )
        if args.action != "list":
            answer = await desk.answer_as_operator(args.id, approve=args.action == "approve")
            if not answer.accepted:
                raise HubError(f"approval {args.id}: {answer.message}")
            print(answer.message)
            return 0
        rows = await stores.approvals.list(states=() if args.all else (ApprovalState.PENDING,))
    now = time.time()
    for row in rows:
        state = "expired" if row.overdue(now) else str(row.state)
        if args.json:
            print(
                json.dumps(
                    {
                        "id": row.id,
                        "run_id": row.run_id,
                        "context": row.context,
                        "action": row.action,
                        "args": row.args,
                        "state": state,
                        "user": row.user,
                        "created": row.created,
                        "expires": row.expires,
                        "answered_by": row.answered_by,
                    },
                    ensure_ascii=False,
                )
            )
            continue
        arguments = escape_terminal(json.dumps(row.args, ensure_ascii=False), newlines=False)
        if len(arguments) > 60:
            arguments = arguments[:59] + "…"
        left = f"{max(0, row.expires - now):.0f}s left" if state == "pending" else (row.answered_by or "")
        where = escape_terminal(row.context, newlines=False)
        print(f"{row.id}  {state:8} {row.action} {arguments}  run {row.run_id[:8]} in {where}  {left}".rstrip())
    if not rows and not args.json:
        print("no approval waiting" if not args.all else "no approvals")
    return 0


APPROVAL_COMMANDS: dict[str, Callable[[HubConfig, argparse.Namespace], Coroutine[Any, Any, int]]] = {
    "approvals": cmd_approvals,
}
