"""``hub pairing list / approve CODE / revoke USER``: who may talk to the bot in private.

They open ``data/hub.db`` beside a running hub (SQLite serialises the writers), so an
approval takes effect with the user's next message, without a restart.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Coroutine
from typing import Any

from ..config import HubConfig

__all__ = ["add_access_commands", "ACCESS_COMMANDS"]


def add_access_commands(
    sub: argparse._SubParsersAction,
    common: argparse.ArgumentParser,
) -> None:
    """Add ``pairing`` to the ``hub`` parser."""
    pairing = sub.add_parser(
        "pairing", parents=[common], help="who may talk to the bot in private: list, approve CODE, revoke USER"
    )
    pairing.add_argument("action", choices=["list", "approve", "revoke"], help="what to do")
    pairing.add_argument("value", nargs="?", help="approve: the code the user got; revoke: the user id")
    pairing.add_argument("--platform", default=None, help="revoke: only on this platform (default: every one)")
    pairing.add_argument("--json", action="store_true", help="list: one JSON object per line")
    pairing.add_argument("--raw", action="store_true", help="print control characters as they are (not escaped)")


async def cmd_pairing(config: HubConfig, args: argparse.Namespace) -> int:
    from ..errors import HubError
    from ..features import Access
    from ._store import _stores
    from ._trace import escape_terminal

    if args.action != "list" and not args.value:
        what = "the code the user got" if args.action == "approve" else "the user id"
        raise HubError(f"hub pairing {args.action} needs {what}")
    async with _stores(config) as stores:
        access = Access(stores.pairings)
        if args.action == "approve":
            p = await access.approve(args.value)
            print(f"approved: {p.platform} user {escape_terminal(p.user, newlines=False)}")
            return 0
        if args.action == "revoke":
            n = await access.revoke(args.value, platform=args.platform)
            if n == 0:
                raise HubError(f"no pairing of user {args.value!r}" + (f" on {args.platform}" if args.platform else ""))
            print(f"revoked {n} pairing{'s' if n > 1 else ''} of user {escape_terminal(args.value, newlines=False)}")
            return 0
        pairings = await access.list()
    now = time.time()
    for p in pairings:
        state = "expired" if p.expired(now) else p.state
        if args.json:
            print(
                json.dumps(
                    {
                        "platform": p.platform,
                        "user": p.user,
                        "state": state,
                        "code": p.code,
                        "created": p.created,
                        "expires": p.expires,
                        "approved": p.approved,
                        "user_name": p.user_name,
                        "user_handle": p.user_handle,
                    }
                )
            )
            continue
        user = p.user if args.raw else escape_terminal(p.user, newlines=False)
        platform = p.platform if args.raw else escape_terminal(p.platform, newlines=False)
        detail = (
            f"code {p.code}, expires {time.strftime('%H:%M:%S', time.localtime(p.expires))}"
            if state == "pending"
            else ""
        )
        who = " ".join(x for x in (p.user_name, f"@{p.user_handle}" if p.user_handle else None) if x)
        if who and not args.raw:
            who = escape_terminal(who, newlines=False)
        print(f"{platform:12} {user:24} {state:9} {detail}{f' ({who})' if who else ''}".rstrip())
    if not pairings and not args.json:
        print("no pairings")
    return 0


ACCESS_COMMANDS: dict[str, Callable[[HubConfig, argparse.Namespace], Coroutine[Any, Any, int]]] = {
    "pairing": cmd_pairing,
}
