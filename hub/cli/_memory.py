"""The offline episodic-memory operations and their commands: ``hub memory forget`` and
``hub export-training``.

Both work on the stores in ``data/`` directly; run them while the hub is stopped (Chroma's
embedded store does not share its directory safely between processes).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

from ..config import HubConfig
from ..features import forget_history
from ..memory import (
    Episode,
    all_episodes,
    episode_store_exists,
    finish_forgetting,
    forget_filter,
    forget_store,
    open_episode_store,
    training_line,
)
from ..redact import Redactor
from ..store import Erased, MemoryStore, erase_person, has_database, open_stores

__all__ = ["add_memory_commands", "MEMORY_COMMANDS", "forget", "forget_person", "export_training"]


def add_memory_commands(
    sub: argparse._SubParsersAction,
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
    who.add_argument("--context", metavar="TYPE:KEY", help="a conversation (e.g. telegram:chat:42)")
    who.add_argument(
        "--person",
        help="a person everywhere, named by one identity (platform:user) or its id: their memory, "
        "links, messages and episodes on every platform",
    )
    forget.add_argument("--platform", help="with --user: only on this platform (e.g. telegram)")

    export = sub.add_parser("export-training", parents=[common], help="episodes as JSONL prompt/completion pairs")
    export.add_argument("--out", required=True, type=Path, metavar="FILE", help="the JSONL file to write")
    export.add_argument("--context", metavar="TYPE:KEY", help="only this conversation")
    export.add_argument("--meta", action="store_true", help="add run id, context, user, platform and time")
    export.add_argument("--all-states", action="store_true", help="also runs that did not complete")


async def cmd_memory(config: HubConfig, args: argparse.Namespace) -> int:
    if args.platform and not args.user:
        print("hub: --platform only narrows --user", file=sys.stderr)
        return 2
    if args.person:
        deleted, ids, erased = await forget_person(config, args.person)
        episodes = f"{deleted} episode{'s' if deleted != 1 else ''}"
        print(f"forgot person {args.person} ({', '.join(ids)}): {episodes}, {erased}")
        return 0
    deleted, keys = await forget(config, user=args.user, context=args.context, platform=args.platform)
    if args.user:
        who = f"user {args.user}" + (f" on {args.platform}" if args.platform else "")
    else:
        who = args.context
    also = "".join(f", {k}" for k in keys)
    print(f"forgot {who}: {deleted} episode{'s' if deleted != 1 else ''}{also}")
    return 0


async def cmd_export_training(config: HubConfig, args: argparse.Namespace) -> int:
    n = await export_training(config, args.out, context=args.context, with_meta=args.meta, all_states=args.all_states)
    print(f"wrote {n} prompt/completion pair{'s' if n != 1 else ''} to {args.out}", file=sys.stderr)
    return 0


async def forget(
    config: HubConfig,
    *,
    user: str | None = None,
    context: str | None = None,
    platform: str | None = None,
) -> tuple[int, list[str]]:
    """Forget, with the hub stopped: delete matching episodes and, for a conversation, its
    working memory. Returns (episodes deleted, memory keys deleted).

    Raises:
        StoreError: The episode store or the hub's database cannot be opened.
        ValueError: Neither a user nor a context was given.
    """
    where = forget_filter(user=user, context=context, platform=platform)
    deleted = 0
    keys: list[str] = []
    async with contextlib.AsyncExitStack() as stack:
        memory: MemoryStore | None = None
        if has_database(config):
            stores = await stack.enter_async_context(open_stores(config))
            memory = stores.memory
            if user:  # their messages leave the search index (hub/features/_history.py), their reminders go
                searchable = await forget_history(stores.history, user, platform=platform)
                reminders = 0 if platform else await stores.reminders.forget(user)
                keys.extend(
                    f"{n} {what}" for n, what in ((searchable, "indexed messages"), (reminders, "reminders")) if n
                )
        if episode_store_exists(config):
            async with open_episode_store(config) as store:
                # the episodes' id keys go too (hub.episode.ID_PREFIX)
                deleted = await forget_store(store, where, index=memory)
        if context and memory is not None:
            key = f"working-memory:{context}"
            if await memory.get(key) is not None:
                await memory.delete(key)
                keys.append(key)
    return deleted, keys


async def forget_person(config: HubConfig, who: str) -> tuple[int, list[str], Erased]:
    """Forget a person everywhere, with the hub stopped: their episodes on each identity's
    platform, then (`hub.store.erase_person()`) their runs, inputs, indexed messages,
    memory, links and words in the conversations' kept history. A journal entry written
    first names them until both parts are done, so a forget cut off is finished by the next
    one (any forget cut off before is finished with this one) and by the hub's next start.
    Returns (episodes deleted, the identities the person had, what left the database).

    Raises:
        HubError: nobody is known by ``who`` (nothing is deleted).
        StoreError: The episode store or the hub's database cannot be opened.
    """
    from ..errors import HubError
    from ..store import People

    if not has_database(config):
        raise HubError(f"no person {who!r}: the hub has no database yet")
    async with open_stores(config) as stores:
        people = People(stores.memory)
        person = await people.find(who)
        if person is None:
            raise HubError(f"no person {who!r}: name one by an identity (platform:user) or its id (hub people list)")
        ids = await people.begin_forgetting(person)
        episodes: dict[str, int] = {}
        if episode_store_exists(config):
            async with open_episode_store(config) as store:
                episodes = await finish_forgetting(store, stores.memory)  # everyone's left, theirs too
        else:  # no store, no episode of anyone's
            for pending in await people.forgetting(part="episodes"):
                await people.forgotten(pending, "episodes")
        erased = Erased()
        for pending, pending_ids in (await people.forgetting(part="database")).items():
            done = await erase_person(stores, pending, pending_ids)
            if pending == person:
                erased = done
    return episodes.get(person, 0), ids, erased


async def export_training(
    config: HubConfig,
    out: Path,
    *,
    context: str | None = None,
    with_meta: bool = False,
    all_states: bool = False,
) -> int:
    """Write episodes as JSONL ``{"prompt", "completion"}`` lines, oldest first: the inputs
    and the answers the agent sent. Only completed runs that answered, unless
    ``all_states``. Returns the number of lines.

    Raises:
        StoreError: The episode store cannot be opened.
    """
    episodes: Sequence[Episode] = []
    if episode_store_exists(config):
        async with open_episode_store(config) as store:
            episodes = await all_episodes(store, context=context)
    redactor = Redactor.from_config(config)  # masked as the running export masks (hub/memory/_training.py)
    n = 0
    tmp = out.with_name(out.name + ".part")
    with tmp.open("w", encoding="utf-8") as f:
        for ep in episodes:
            line: dict[str, Any] | None = training_line(ep, all_states=all_states)
            if line is None:
                continue
            if with_meta:
                line["meta"] = {
                    "run_id": ep.run_id,
                    "context": ep.context,
                    "platform": ep.platform,
                    "user": ep.user,
                    "time": ep.time,
                    "state": ep.state,
                }
            if redactor:
                line = redactor.redact_tree(line)
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
            n += 1
    tmp.replace(out)
    return n


MEMORY_COMMANDS: dict[str, Callable[[HubConfig, argparse.Namespace], Coroutine[Any, Any, int]]] = {
    "memory": cmd_memory,
    "export-training": cmd_export_training,
}
