"""Who may talk to the bot in private: ``dm_policy`` and the pairing store.

A platform extension asks, for each direct message, ``await hub.access.check(platform, user,
policy, allowed_users)`` and acts on the [`Decision`][hub.Decision]: ``allow`` (hand the message to
the hub), ``pair`` (send ``decision.message``, which carries a one-time code, and nothing
else: the message never reaches the model) or ``deny`` (drop it). An unknown user is told a
code once per code lifetime: ``decision.message`` is None while the code they were given is
still valid, so unpaired users cannot make the bot send for them; a platform that could not
deliver the code calls `Access.retract()`, and the next message draws a new one. The
operator approves a code with ``hub pairing approve CODE``; approvals are kept by a `PairingStore`
(SQLite in ``data/hub.db`` by default), so they survive restarts, and codes expire.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Literal

from ..errors import ConfigError, HubError
from ..store import Pairing, PairingStore, People

__all__ = [
    "POLICIES",
    "Decision",
    "Access",
    "normalize_code",
    "PairingError",
]

POLICIES = ("open", "allowlist", "pairing")
"""``dm_policy`` values: everyone; only ``allowed_users``; ``allowed_users`` and paired users."""

_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: read aloud or retyped
CODE_LENGTH = 8


def new_code() -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(CODE_LENGTH))


def normalize_code(code: str) -> str:
    """A code as typed (any case, with spaces or dashes) in the form it is stored."""
    return re.sub(r"[\s-]", "", code).upper()


class PairingError(HubError):
    """A code that no pending pairing has, or one that expired."""


@dataclass(frozen=True, slots=True)
class Decision:
    """What `hub.access.check(...)` decides about a private message (``[extensions.NAME]
    dm_policy``): answer it, ask the sender to pair, or drop it. A platform extension gets it
    through [`admit_private`][hub.platform.admit_private], which also writes the log lines.
    """

    verdict: Literal["allow", "pair", "deny"]
    """`allow`: hand the message to the hub; `pair`: send [`message`][hub.Decision.message] and nothing else;
    `deny`: drop it."""
    code: str | None = None
    """For `pair`: the one-time code the user must have approved (`hub pairing approve CODE`)."""
    fresh: bool = False
    """For ``pair``: the code was drawn for this message; the user has not been told it yet."""

    @property
    def allowed(self) -> bool:
        """Whether the message goes to the hub (``verdict == "allow"``)."""
        return self.verdict == "allow"

    @property
    def message(self) -> str | None:
        """What the platform sends back to a user who must pair: once per code, with the
        message that drew it (None otherwise: the user was told it already)."""
        if self.verdict != "pair" or not self.fresh:
            return None
        return f"I don't know you yet. Ask my operator to run: hub pairing approve {self.code}"


class Access:
    """Decides who may talk to the bot in private (``dm_policy``), over a pairing store."""

    def __init__(
        self,
        store: PairingStore,
        *,
        code_ttl: float = 3600.0,
        redact: Callable[[str], str] | None = None,
        people: People | None = None,
    ) -> None:
        self.store = store
        self.people = people
        """Pairing is per person: an identity linked to an approved one is approved too."""
        self.code_ttl = code_ttl
        self.redact = redact  # who asked is kept redacted, as a run's log is

    async def check(
        self,
        platform: str,
        user: str,
        policy: str = "open",
        allowed_users: Iterable[str] = (),
        *,
        user_name: str | None = None,
        user_handle: str | None = None,
    ) -> Decision:
        """Whether ``user`` of ``platform`` may talk to the bot under ``policy``.

        Under ``pairing`` an unknown user gets a code (the same one until it expires), and a
        message to send only with the message that drew it. ``user_name`` and ``user_handle``
        (the display name and @username the platform gave) are kept with the code, so the
        operator approving it sees who asked.

        Raises:
            ConfigError: ``policy`` is not one of `POLICIES`.
        """
        if policy not in POLICIES:
            raise ConfigError(f"dm_policy must be one of {', '.join(POLICIES)}, not {policy!r}")
        if policy == "open" or str(user) in {str(u) for u in allowed_users}:
            return Decision("allow")
        if policy == "allowlist":
            return Decision("deny")
        now = time.time()
        known = await self.store.get(platform, str(user))
        if known is not None and known.state == "approved":
            return Decision("allow")
        if await self._paired_person(platform, str(user)):
            return Decision("allow")
        if known is not None and not known.expired(now) and known.code:
            return Decision("pair", known.code)  # told already: nothing to send
        for _ in range(5):  # a clash with another pending code is rare; draw again
            code = new_code()
            if await self.store.by_code(code) is None:
                break
        name, handle = self._clean(user_name), self._clean(user_handle)
        await self.store.put(
            Pairing(platform, str(user), "pending", code, now, now + self.code_ttl, None, name, handle)
        )
        return Decision("pair", code, fresh=True)

    async def _paired_person(self, platform: str, user: str) -> bool:
        """Whether another identity of this user's person is approved: one read for a stranger
        (who was never linked), the approved pairings (the operator's few) for the others."""
        if self.people is None:
            return False
        person = await self.people.lookup(platform, user)
        if person is None:
            return False
        for p in await self.store.list():
            if p.state == "approved" and await self.people.lookup(p.platform, p.user) == person:
                return True
        return False

    def _clean(self, value: str | None) -> str | None:
        if not value or not value.strip():
            return None
        value = value.strip().removeprefix("@")[:100]
        return self.redact(value) if self.redact is not None else value

    async def retract(self, platform: str, user: str, code: str) -> None:
        """The code could not be delivered: it expires now, so the user's next message draws
        (and is told) a new one. Nothing changes if the user was approved meanwhile."""
        known = await self.store.get(platform, str(user))
        if known is not None and known.state == "pending" and known.code == code:
            await self.store.put(replace(known, expires=time.time()))

    async def approve(self, code: str) -> Pairing:
        """Approve the pending pairing with ``code``.

        Raises:
            PairingError: no pending pairing has this code, or it expired (naming which).
        """
        code = normalize_code(code)
        pending = await self.store.by_code(code)
        if pending is None or pending.state != "pending":
            raise PairingError(f"no pending pairing has the code {code!r} (see `hub pairing list`)")
        if pending.expired():
            raise PairingError(
                f"the code {code!r} of {pending.platform} user {pending.user} expired; "
                "the user gets a new one with their next message"
            )
        approved = replace(pending, state="approved", code=None, expires=None, approved=time.time())
        await self.store.put(approved)
        return approved

    async def revoke(self, user: str, *, platform: str | None = None) -> int:
        return await self.store.delete(str(user), platform=platform)

    async def list(self) -> list[Pairing]:
        return await self.store.list()
