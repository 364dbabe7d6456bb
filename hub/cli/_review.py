"""``hub review list / approve ID / reject ID``: posts held on public timelines (``review = true``).

They open the hub's database beside a running hub (or the workers' PostgreSQL): an approval is
a compare-and-set on the held post's state, and the extension's worker posts it within
seconds (hub/platform/_public.py).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Coroutine
from typing import Any

from ..config import HubConfig

__all__ = ["add_review_commands", "REVIEW_COMMANDS"]


def add_review_commands(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add ``review`` to the ``hub`` parser."""
    review = sub.add_parser(
        "review", parents=[common], help="posts held for review on X, Mastodon, Bluesky: list, approve ID, reject ID"
    )
    review.add_argument("action", choices=["list", "approve", "reject"], help="what to do")
    review.add_argument("id", nargs="?", help="approve, reject: the held post's id (hub review list)")
    review.add_argument("--text", default=None, help="approve: post this text instead (an edit)")
    review.add_argument("--all", action="store_true", help="list: every held post, not only those waiting")
    review.add_argument("--json", action="store_true", help="list: one JSON object per line")


async def cmd_review(config: HubConfig, args: argparse.Namespace) -> int:
    from ..errors import HubError
    from ._store import _stores
    from ._trace import escape_terminal

    if args.action != "list" and not args.id:
        raise HubError(f"hub review {args.action} needs the id of a held post (see `hub review list`)")
    async with _stores(config) as stores:
        if args.action != "list":
            r = await stores.reviews.decide(args.id, approve=args.action == "approve", text=args.text)
            print(f"{r.state}: {r.id} ({r.platform} {r.output})")
            return 0
        reviews = await stores.reviews.list()
    now = time.time()
    shown = [r for r in reviews if args.all or (r.state == "pending" and not r.expired(now))]
    for r in shown:
        if args.json:
            print(
                json.dumps(
                    {
                        "id": r.id,
                        "platform": r.platform,
                        "output": r.output,
                        "chat": r.chat,
                        "in_reply_to": r.in_reply_to,
                        "state": r.shown_state,
                        "created": r.created,
                        "expires": r.expires,
                        "text": r.text,
                        "result": r.result,
                    }
                )
            )
            continue
        until = time.strftime("%Y-%m-%d %H:%M", time.localtime(r.expires))
        reply = f" in reply to {r.in_reply_to}" if r.in_reply_to else ""
        print(f"{r.id}  {r.platform:9} {r.shown_state:8} until {until}{escape_terminal(reply, newlines=False)}")
        print(f"    {escape_terminal(r.text, newlines=False)}")
    if not shown and not args.json:
        print("no posts waiting for review" if not args.all else "no held posts")
    return 0


REVIEW_COMMANDS: dict[str, Callable[[HubConfig, argparse.Namespace], Coroutine[Any, Any, int]]] = {
    "review": cmd_review,
}
