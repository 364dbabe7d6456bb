"""``hub people list / link CODE IDENTITY / unlink IDENTITY``: one person across platforms.

``link`` is the operator's way of joining what ``/link CODE`` joins in chat: the code a user
was given with ``/link``, and the other identity (``platform:user``) the operator vouches for.
They open the hub's database beside a running hub, as ``hub pairing`` does.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Coroutine
from typing import Any

from ..config import HubConfig

__all__ = ["add_people_commands", "PEOPLE_COMMANDS"]


def add_people_commands(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add ``people`` to the ``hub`` parser."""
    people = sub.add_parser(
        "people", parents=[common], help="one person across platforms: list, link CODE IDENTITY, unlink IDENTITY"
    )
    people.add_argument("action", choices=["list", "link", "unlink"], help="what to do")
    people.add_argument("value", nargs="?", help="link: the code the user got with /link; unlink: platform:user")
    people.add_argument("identity", nargs="?", help="link: the other identity to join, platform:user (e.g. discord:77)")
    people.add_argument("--json", action="store_true", help="list: one JSON object per line")


async def cmd_people(config: HubConfig, args: argparse.Namespace) -> int:
    from ..errors import HubError
    from ..store import People
    from ._store import _stores
    from ._trace import escape_terminal

    if args.action == "link" and not (args.value and args.identity):
        raise HubError("hub people link needs the code the user got with /link and the other identity, platform:user")
    if args.action == "unlink" and not args.value:
        raise HubError("hub people unlink needs an identity, platform:user")
    async with _stores(config) as stores:
        people = People(stores.memory)
        if args.action == "link":
            platform, sep, user = args.identity.partition(":")
            if not sep or not user:
                raise HubError(f"{args.identity!r} is not an identity: write platform:user (e.g. discord:77)")
            linked = await people.redeem(args.value, platform, user, operator=True)
            print(f"linked: {escape_terminal(', '.join(linked.identities), newlines=False)} are person {linked.person}")
            return 0
        if args.action == "unlink":
            platform, _, user = args.value.partition(":")
            fresh = await people.unlink(platform, user)
            if fresh is None:
                raise HubError(f"{args.value!r} is not linked to another identity")
            print(f"unlinked: {escape_terminal(args.value, newlines=False)} is person {fresh} now")
            return 0
        everyone = await people.people()
    for person, ids in everyone.items():
        if args.json:
            print(json.dumps({"person": person, "identities": ids}))
        elif len(ids) > 1:
            print(f"{person}  {escape_terminal(', '.join(ids), newlines=False)}")
    if not args.json and not any(len(ids) > 1 for ids in everyone.values()):
        print("no linked people")
    return 0


PEOPLE_COMMANDS: dict[str, Callable[[HubConfig, argparse.Namespace], Coroutine[Any, Any, int]]] = {
    "people": cmd_people,
}
