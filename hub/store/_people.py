"""People: one human across platforms, their identities, link codes and their own memory.

An identity is ``platform:user`` (``telegram:42``, ``discord:77``). Each identity belongs to
exactly one person (``person-of:<identity>`` holds the person's id, drawn the first time the
identity is seen); ``/link`` joins two identities into one person, ``/unlink`` gives an
identity a person of its own again. A person's memory (name, preferences, what they asked
the bot to remember) is kept at ``person-memory:<person>``, apart from any conversation's.

Everything lives on the memory store's API (``get_versioned`` / ``set_if_unchanged`` /
``update``), so that every backend, and every worker on one database, reaches one outcome:
a link code is spent by one compare-and-set, an identity moves to a person by another.
"""

from __future__ import annotations

import functools
import re
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import HubError
from ._memory import MemoryStore

__all__ = ["LinkError", "LinkResult", "People", "LINK_CODE_TTL", "LINK_ATTEMPTS", "FORGETTING"]

LINK_CODE_TTL = 600.0
"""Seconds a ``/link`` code stays valid."""
LINK_ATTEMPTS = 5
"""Wrong codes one identity may send within `LINK_CODE_TTL` before ``/link CODE`` is
refused until the window passes: 32**8 codes, 5 tries a window, guessing one is hopeless."""

FORGETTING = "forgetting:"
"""The memory-store keys of forgets under way: ``forgetting:<person>``."""

_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # as pairing codes: no 0/O, 1/I
_CODE_LENGTH = 8
_IDENTITY = re.compile(r"^[a-z0-9_.-]+:\S+$")


class LinkError(HubError):
    """A link code that cannot join two identities (unknown, used, expired, too many tries)."""


@dataclass(frozen=True, slots=True)
class LinkResult:
    person: str
    identities: tuple[str, ...]
    """The person's identities after the link, sorted."""


def identity(platform: str, user: str) -> str:
    return f"{platform}:{user}"


def _fresh() -> str:
    return f"p-{uuid.uuid4().hex[:16]}"


def _normalize(code: str) -> str:
    return re.sub(r"[\s-]", "", code).upper()


class People:
    """Persons over a [`MemoryStore`][hub.MemoryStore]; ``clock`` is for tests of expiry."""

    def __init__(
        self,
        memory: MemoryStore,
        *,
        code_ttl: float = LINK_CODE_TTL,
        attempts: int = LINK_ATTEMPTS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.memory = memory
        self.code_ttl = code_ttl
        self.attempts = attempts
        self.clock = clock

    # --- who is who ---------------------------------------------------------------------

    async def person_of(self, platform: str, user: str) -> str:
        """The person ``platform:user`` belongs to; drawn (and kept) the first time."""
        who = identity(platform, user)
        key = f"person-of:{who}"
        for _ in range(3):
            found, version = await self.memory.get_versioned(key)
            if isinstance(found, str):
                return found
            # a person is named after its first identity (so its budget scope, user:PLATFORM:USER,
            # is the one an unlinked user always had), unless that name was left to others
            taken = await self.memory.get(f"person-name-taken:{who}")
            fresh = _fresh() if taken else who
            if await self.memory.set_if_unchanged(key, fresh, version) is not None:
                return fresh
        found = await self.memory.get(key)
        assert isinstance(found, str)
        return found

    async def lookup(self, platform: str, user: str) -> str | None:
        """The person ``platform:user`` belongs to, if it was ever seen; one read, nothing drawn."""
        found = await self.memory.get(f"person-of:{identity(platform, user)}")
        return found if isinstance(found, str) else None

    async def find(self, who: str) -> str | None:
        """The person ``who`` names (a person's id, ``p-...``, or one of its identities,
        ``platform:user``), without drawing one; None when nobody is known by it. A person
        whose forgetting was cut off is still found, by either."""
        found = await self.memory.get(f"person-of:{who}")
        if isinstance(found, str):
            return found
        for person, ids in (await self.forgetting()).items():
            if who == person or who in ids:
                return person
        if await self.identities(who) or await self.memory.get(f"person-memory:{who}") is not None:
            return who
        return None

    async def identities(self, person: str) -> list[str]:
        """Every identity that belongs to ``person``, sorted."""
        out = []
        for key in await self.memory.keys("person-of:"):
            if await self.memory.get(key) == person:
                out.append(key.removeprefix("person-of:"))
        return sorted(out)

    async def people(self) -> dict[str, list[str]]:
        """Every person with their identities."""
        out: dict[str, list[str]] = {}
        for key in await self.memory.keys("person-of:"):
            person = await self.memory.get(key)
            if isinstance(person, str):
                out.setdefault(person, []).append(key.removeprefix("person-of:"))
        return {p: sorted(ids) for p, ids in sorted(out.items())}

    # --- linking ------------------------------------------------------------------------

    async def new_code(self, platform: str, user: str) -> str:
        """A one-time code that joins ``platform:user`` with whoever sends it back."""
        now = self.clock()
        for _ in range(5):
            code = "".join(secrets.choice(_ALPHABET) for _ in range(_CODE_LENGTH))
            entry = {"identity": identity(platform, user), "expires": now + self.code_ttl, "used": False}
            if await self.memory.set_if_unchanged(f"link-code:{code}", entry, None) is not None:
                return code
        raise LinkError("could not draw a link code that is not in use: try again")

    async def redeem(self, code: str, platform: str, user: str, *, operator: bool = False) -> LinkResult:
        """Join ``platform:user`` to the person who was given ``code``. The code is spent by one
        compare-and-set: a second use, on any worker, fails. A wrong code counts against the
        sender (``operator``: ``hub people link``, which is not counted).

        Raises:
            LinkError: unknown, used or expired code, the sender's own code, or too many tries.
        """
        who = identity(platform, user)
        if not _IDENTITY.match(who):
            raise LinkError(f"{who!r} is not an identity (platform:user)")
        now = self.clock()
        if not operator and await self._tries(who, now) >= self.attempts:
            raise LinkError("too many wrong link codes: wait 10 minutes and ask for a new one")
        code = _normalize(code)
        key = f"link-code:{code}"
        entry, version = await self.memory.get_versioned(key)
        if not isinstance(entry, dict):
            if not operator:
                await self._count_try(who, now)
            raise LinkError(f"no link code {code!r}: send /link to get one")
        if entry.get("used"):
            raise LinkError(f"the link code {code!r} was used already")
        if float(entry.get("expires", 0)) <= now:
            raise LinkError(f"the link code {code!r} expired: send /link for a new one")
        if entry.get("identity") == who:
            raise LinkError("send this code from your other account, not from the one that asked for it")
        if await self.memory.set_if_unchanged(key, {**entry, "used": True, "by": who}, version) is None:
            raise LinkError(f"the link code {code!r} was used already")
        owner_platform, _, owner_user = str(entry["identity"]).partition(":")
        person = await self.person_of(owner_platform, owner_user)
        previous = await self.person_of(platform, user)
        if previous != person:
            await self._move(who, previous, person)
        return LinkResult(person, tuple(await self.identities(person)))

    async def unlink(self, platform: str, user: str) -> str | None:
        """Give ``platform:user`` a person of its own again; the new person, or None when it
        was alone already (nothing changes). The person's memory stays with the others."""
        who = identity(platform, user)
        person = await self.person_of(platform, user)
        if await self.identities(person) == [who]:
            return None
        fresh = _fresh()
        if person == who:  # the others keep this name: a later first sight of who must not rejoin them
            await self.memory.set(f"person-name-taken:{who}", True)
        key = f"person-of:{who}"
        current, version = await self.memory.get_versioned(key)
        if current != person or await self.memory.set_if_unchanged(key, fresh, version) is None:
            return await self.unlink(platform, user)  # moved meanwhile: decide on what is there now
        return fresh

    async def _move(self, who: str, previous: str, person: str) -> None:
        """``who`` leaves ``previous`` for ``person``: its identity by compare-and-set, and the
        memory it had alone merged in (what ``person`` already has wins)."""
        key = f"person-of:{who}"
        current, version = await self.memory.get_versioned(key)
        if current != previous or await self.memory.set_if_unchanged(key, person, version) is None:
            raise LinkError(f"{who} was linked or unlinked at the same time: try again")
        if await self.identities(previous):
            return  # others stay with the old person, and so does its memory
        old = await self.memory.get(f"person-memory:{previous}")
        if isinstance(old, dict) and old:
            await self.memory.update(f"person-memory:{person}", lambda cur: {**old, **(cur or {})})
        await self.memory.delete(f"person-memory:{previous}")

    async def _tries(self, who: str, now: float) -> int:
        tries = await self.memory.get(f"link-tries:{who}")
        if not isinstance(tries, dict) or float(tries.get("since", 0)) + self.code_ttl <= now:
            return 0
        return int(tries.get("count", 0))

    async def _count_try(self, who: str, now: float) -> None:
        ttl = self.code_ttl

        def bump(cur: Any) -> dict[str, Any]:
            if not isinstance(cur, dict) or float(cur.get("since", 0)) + ttl <= now:
                return {"since": now, "count": 1}
            return {"since": cur["since"], "count": int(cur.get("count", 0)) + 1}

        await self.memory.update(f"link-tries:{who}", bump)

    # --- memory -------------------------------------------------------------------------

    async def memory_of(self, person: str) -> dict[str, Any]:
        value = await self.memory.get(f"person-memory:{person}")
        return value if isinstance(value, dict) else {}

    async def remember(self, person: str, key: str, value: Any) -> dict[str, Any]:
        """Set one entry of ``person``'s memory without losing another writer's."""

        def put(cur: Any) -> dict[str, Any]:
            return {**(cur if isinstance(cur, dict) else {}), key: value}

        stored: dict[str, Any] = await self.memory.update(f"person-memory:{person}", put)
        return stored

    # --- forgetting ---------------------------------------------------------------------
    # ``hub memory forget --person`` writes a journal entry (``forgetting:<person>``: the
    # identities, and which of the two parts are done) before it deletes anything, and
    # removes it once both parts are: the hub's database (hub/store/_erase.py) and the
    # episodes (hub/memory). A forget cut off is finished from the journal by the next
    # forget, and by the hub's next start (each part by whoever holds its store).

    async def begin_forgetting(self, person: str) -> list[str]:
        """Journal that ``person`` is being forgotten; its identities (with those of an
        earlier forget of it that was cut off), every one of which is to be erased."""
        pending = (await self.forgetting()).get(person, [])
        ids = sorted(set(await self.identities(person)) | set(pending))
        # both parts to do, again: each finds only what is left, and an identity may be new
        await self.memory.set(f"{FORGETTING}{person}", {"identities": ids, "episodes": False, "database": False})
        return ids

    async def forgetting(self, *, part: str | None = None) -> dict[str, list[str]]:
        """The people whose forgetting is under way (or was cut off), with their identities;
        ``part`` (``"episodes"`` or ``"database"``): only those whose part is still to do."""
        out: dict[str, list[str]] = {}
        for key in await self.memory.keys(FORGETTING):
            journal = await self.memory.get(key)
            if isinstance(journal, dict) and (part is None or not journal.get(part)):
                out[key.removeprefix(FORGETTING)] = [str(i) for i in journal.get("identities", [])]
        return out

    async def forgotten(self, person: str, part: str) -> bool:
        """Mark ``part`` of forgetting ``person`` done; once both are, the journal entry goes.
        Whether the person is now forgotten whole."""
        key = f"{FORGETTING}{person}"

        def mark(cur: Any) -> Any:
            return {**cur, part: True} if isinstance(cur, dict) else cur

        if not isinstance(await self.memory.get(key), dict):
            return True
        journal = await self.memory.update(key, mark)
        if isinstance(journal, dict) and journal.get("episodes") and journal.get("database"):
            await self.memory.delete(key)
            return True
        return journal is None

    async def forget(self, person: str, ids: list[str] | None = None) -> list[str]:
        """Remove ``person``: its memory, every identity's link, and what its identities said in
        every conversation's kept history (``working-memory:``). Runs, episodes and search
        indexes are the caller's (hub/store/_erase.py, ``hub memory forget --person``).
        ``ids``: the identities it had (a forget resumed from the journal, its links gone
        already); by default, those linked now. The identities."""
        ids = await self.identities(person) if ids is None else ids
        for key in await self.memory.keys("working-memory:"):
            platform = key.removeprefix("working-memory:").split(":", 1)[0]
            users = {u for p, _, u in (i.partition(":") for i in ids) if p == platform}
            if users:
                await self.memory.update(key, functools.partial(_without, users=users))
        for who in ids:
            key = f"person-of:{who}"
            if await self.memory.get(key) == person:
                await self.memory.delete(key)
            await self.memory.delete(f"link-tries:{who}")
        await self.memory.delete(f"person-memory:{person}")
        await self.memory.delete(f"person-name-taken:{person}")  # nobody has that name now
        return ids


def _without(history: Any, users: set[str]) -> Any:
    """A conversation's kept history without the inputs of ``users`` (answers to them stay:
    they are the bot's, and say nothing once the question is gone)."""
    if not isinstance(history, list):
        return history
    return [e for e in history if not (isinstance(e, dict) and e.get("kind") == "input" and e.get("user") in users)]
