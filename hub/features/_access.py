"""Who may talk to the bot in private: ``dm_policy`` and the pairing store.

A platform extension asks, for each direct message, ``await hub.access.check(platform, user,
policy, allowed_users)`` and acts on the :class:`Decision`: ``allow`` (hand the message to
the hub), ``pair`` (send ``decision.message``, which carries a one-time code, and nothing
else: the message never reaches the model) or ``deny`` (drop it). The operator approves a
code with ``hub pairing approve CODE``; approvals are kept by a :class:`PairingStore`
(SQLite in ``data/hub.db`` by default), so they survive restarts, and codes expire.
"""

from __future__ import annotations

import re
import secrets
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from ..errors import ConfigError, HubError

if TYPE_CHECKING:
    from ..store.sql import SqlDatabase

__all__ = [
    "POLICIES",
    "Decision",
    "Pairing",
    "PairingStore",
    "InMemoryPairingStore",
    "SQLitePairingStore",
    "PostgresPairingStore",
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
class Pairing:
    """One user of one platform: ``pending`` with a code until ``expires``, or ``approved``."""

    platform: str
    user: str
    state: Literal["pending", "approved"]
    code: str | None
    created: float
    expires: float | None = None
    approved: float | None = None

    def expired(self, now: float | None = None) -> bool:
        return self.state == "pending" and self.expires is not None and self.expires <= (now or time.time())


@dataclass(frozen=True, slots=True)
class Decision:
    verdict: Literal["allow", "pair", "deny"]
    code: str | None = None

    @property
    def allowed(self) -> bool:
        return self.verdict == "allow"

    @property
    def message(self) -> str | None:
        """What the platform sends back to a user who must pair (None otherwise)."""
        if self.verdict != "pair":
            return None
        return f"I don't know you yet. Ask my operator to run: hub pairing approve {self.code}"


class PairingStore(ABC):
    """Pairings, kept so that they survive restarts."""

    async def open(self) -> None:  # noqa: B027 - stores without a connection need nothing
        pass

    async def close(self) -> None:  # noqa: B027
        pass

    @abstractmethod
    async def get(self, platform: str, user: str) -> Pairing | None: ...

    @abstractmethod
    async def put(self, pairing: Pairing) -> None:
        """Insert or replace the pairing of ``(platform, user)``."""

    @abstractmethod
    async def by_code(self, code: str) -> Pairing | None: ...

    @abstractmethod
    async def delete(self, user: str, *, platform: str | None = None) -> int:
        """Forget ``user`` (on ``platform``, or on every platform); how many were removed."""

    @abstractmethod
    async def list(self) -> list[Pairing]: ...


class InMemoryPairingStore(PairingStore):
    def __init__(self) -> None:
        self._rows: dict[tuple[str, str], Pairing] = {}

    async def get(self, platform: str, user: str) -> Pairing | None:
        return self._rows.get((platform, user))

    async def put(self, pairing: Pairing) -> None:
        self._rows[(pairing.platform, pairing.user)] = pairing

    async def by_code(self, code: str) -> Pairing | None:
        return next((p for p in self._rows.values() if p.code == code), None)

    async def delete(self, user: str, *, platform: str | None = None) -> int:
        gone = [k for k in self._rows if k[1] == user and (platform is None or k[0] == platform)]
        for k in gone:
            del self._rows[k]
        return len(gone)

    async def list(self) -> list[Pairing]:
        return sorted(self._rows.values(), key=lambda p: p.created)


# "user" quoted: a reserved word in PostgreSQL (SQLite takes the quoted spelling alike)
_COLUMNS = 'platform, "user", state, code, created, expires, approved'


class SQLitePairingStore(PairingStore):
    """Pairings in the hub's database (``hub pairing`` opens it beside a running hub)."""

    def __init__(self, db: SqlDatabase) -> None:
        self.db = db

    async def open(self) -> None:
        await self.db.open()

    async def get(self, platform: str, user: str) -> Pairing | None:
        row = await self.db.fetchone(
            f'SELECT {_COLUMNS} FROM pairings WHERE platform = ? AND "user" = ?', (platform, user)
        )
        return Pairing(*row) if row else None

    async def put(self, pairing: Pairing) -> None:
        await self.db.write(
            f"INSERT INTO pairings ({_COLUMNS}) VALUES (?,?,?,?,?,?,?) "
            'ON CONFLICT (platform, "user") DO UPDATE SET state = excluded.state, code = excluded.code, '
            "created = excluded.created, expires = excluded.expires, approved = excluded.approved",
            (
                pairing.platform,
                pairing.user,
                pairing.state,
                pairing.code,
                pairing.created,
                pairing.expires,
                pairing.approved,
            ),
        )

    async def by_code(self, code: str) -> Pairing | None:
        row = await self.db.fetchone(f"SELECT {_COLUMNS} FROM pairings WHERE code = ?", (code,))
        return Pairing(*row) if row else None

    async def delete(self, user: str, *, platform: str | None = None) -> int:
        where, params = '"user" = ?', [user]
        if platform is not None:
            where, params = where + " AND platform = ?", [user, platform]
        n = await self.db.fetchone(f"SELECT COUNT(*) FROM pairings WHERE {where}", params)
        await self.db.write(f"DELETE FROM pairings WHERE {where}", params)
        return int(n[0]) if n else 0

    async def list(self) -> list[Pairing]:
        rows = await self.db.fetchall(f"SELECT {_COLUMNS} FROM pairings ORDER BY created")
        return [Pairing(*r) for r in rows]


class PostgresPairingStore(SQLitePairingStore):
    """The same PairingStore on PostgreSQL (``[store] url``): the SQL is shared, the database
    is a :class:`hub.store.sql.PgDatabase` that several workers use at once."""


class Access:
    """Decides who may talk to the bot in private (``dm_policy``), over a pairing store."""

    def __init__(self, store: PairingStore, *, code_ttl: float = 3600.0) -> None:
        self.store = store
        self.code_ttl = code_ttl

    async def check(
        self, platform: str, user: str, policy: str = "open", allowed_users: Iterable[str] = ()
    ) -> Decision:
        """Whether ``user`` of ``platform`` may talk to the bot under ``policy``.

        Under ``pairing`` an unknown user gets a code (the same one until it expires).

        Raises:
            ConfigError: ``policy`` is not one of :data:`POLICIES`.
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
        if known is not None and not known.expired(now) and known.code:
            return Decision("pair", known.code)
        for _ in range(5):  # a clash with another pending code is rare; draw again
            code = new_code()
            if await self.store.by_code(code) is None:
                break
        await self.store.put(Pairing(platform, str(user), "pending", code, now, now + self.code_ttl))
        return Decision("pair", code)

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
