"""Erasing a person from the hub's database (``hub memory forget --person``): for each of
their identities, their runs and what they said in other people's runs (hub/store/_run_records.py),
their inputs in the inbox, their messages in the search index, their reminders and the
approval questions of their runs; then their memory, links and words in every
conversation's kept history (`People.forget`).

Every step finds what is left and deletes it, so doing it again finishes a forget that was
cut off: the journal entry (`People.begin_forgetting`) says whose, and it is done again
by the next ``hub memory forget`` and at the hub's next start (`finish_forgetting`).
On SQLite the deletes leave nothing in the file (`Database.scrubbing`).
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass

from ._backend import Stores
from ._people import People

__all__ = ["Erased", "erase_person", "finish_forgetting"]

log = logging.getLogger("hub.store")


@dataclass(slots=True)
class Erased:
    """What one erase took out of the database."""

    runs: int = 0
    inputs_blanked: int = 0
    inbox: int = 0
    messages: int = 0
    reminders: int = 0
    approvals: int = 0

    def __str__(self) -> str:
        parts = (
            (self.runs, "run", "runs"),
            (self.inputs_blanked, "input in others' runs", "inputs in others' runs"),
            (self.inbox, "inbox input", "inbox inputs"),
            (self.messages, "indexed message", "indexed messages"),
            (self.reminders, "reminder", "reminders"),
            (self.approvals, "approval question", "approval questions"),
        )
        said = [f"{n} {one if n == 1 else many}" for n, one, many in parts if n]
        return ", ".join(said) or "nothing in the database"


async def erase_person(stores: Stores, person: str, identities: list[str]) -> Erased:
    """Erase ``person`` (with ``identities``, from `People.begin_forgetting`) from the
    database and mark that part of the journal done.

    Raises:
        StoreError: the database failed; what was deleted stays deleted, the journal stays.
    """
    erased = Erased()
    people = People(stores.memory)
    async with stores.db.scrubbing() if stores.db is not None else contextlib.nullcontext():
        for identity in identities:
            platform, _, user = identity.partition(":")
            runs, blanked = await stores.runs.forget_user(user, platform=platform)
            erased.runs += runs
            erased.inputs_blanked += blanked
            erased.inbox += await stores.inbox.forget_user(user, platform=platform)
            erased.messages += await stores.history.forget(user, platform=platform)
            erased.reminders += await stores.reminders.forget(user, platform=platform)
            erased.approvals += await stores.approvals.forget_user(user, platform=platform)
        await people.forget(person, identities)
    await people.forgotten(person, "database")
    return erased


async def finish_forgetting(stores: Stores) -> list[str]:
    """Finish the database part of every forget that was cut off (the hub's start); the
    people it finished. Their episodes are the episodic memory's (hub/memory), when it opens."""
    people = People(stores.memory)
    pending = await people.forgetting(part="database")
    for person, ids in pending.items():
        erased = await erase_person(stores, person, ids)
        log.warning("forgetting person %s (%s) was cut off; finished: %s", person, ", ".join(ids), erased)
    return list(pending)
