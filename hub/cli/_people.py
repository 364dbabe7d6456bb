"""``hub people list / link CODE [IDENTITY] / unlink IDENTITY``: one person across platforms.

``link CODE`` is ``/link CODE`` typed in the terminal chat: the operator's terminal identity
(``cli:<OS user>``, the one ``hub chat`` talks as) joins the person who was given the code,
a wrong code counted against it as in chat. ``link CODE IDENTITY`` is the operator vouching
for someone else: ``IDENTITY`` (``platform:user``) joins instead, and a wrong code is not
counted. They open the hub's database beside a running hub, as ``hub pairing`` does.
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
        "people",
        parents=[common],
        help="one person across platforms: list, link CODE [IDENTITY], unlink IDENTITY",
        description="link CODE joins your terminal identity (cli:<your OS user>, as in hub chat) with whoever "
        "was given CODE by /link, as /link CODE in the terminal chat would; link CODE IDENTITY joins IDENTITY "
        "(platform:user) instead, the operator vouching for someone else.",
    )
    people.add_argument("action", choices=["list", "link", "unlink"], help="what to do")
    people.add_argument("value", nargs="?", help="link: the code the user got with /link; unlink: platform:user")
    people.add_argument(
        "identity",
        nargs="?",
        help="link: the identity to join, platform:user (e.g. discord:77); without it, your terminal identity",
    )
    people.add_argument("--json", action="store_true", help="list: one JSON object per line")


def terminal_identity() -> tuple[str, str]:
    """The identity ``hub chat`` talks as: platform ``cli``, the OS user (the terminal
    extension's own rule, read through its entry point as ``hub chat`` does)."""
    from ..definitions import import_extension

    return "cli", str(import_extension("cli").os_user())


async def cmd_people(config: HubConfig, args: argparse.Namespace) -> int:
    from ..errors import HubError
    from ..store import People
    from ._store import _stores
    from ._trace import escape_terminal

    if args.action == "link" and not args.value:
        raise HubError(
            "hub people link needs the code the user got with /link (and, to link someone other than "
            "your terminal identity, their identity, platform:user)"
        )
    if args.action != "link" and args.identity:
        raise HubError(f"hub people {args.action} takes no second identity ({args.identity!r})")
    if args.action == "unlink" and not args.value:
        raise HubError("hub people unlink needs an identity, platform:user")
    async with _stores(config) as stores:
        people = People(stores.memory)
        if args.action == "link":
            if args.identity is None:  # as /link CODE typed in `hub chat`: a wrong code counts
                platform, user = terminal_identity()
                linked = await people.redeem(args.value, platform, user)
            else:
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
