"""The SQL of the smaller stores: key-value memory, leases, usage (tokens and money), stop
requests, schedule ticks, persona revisions, pairings and held posts. Each is one class for SQLite and PostgreSQL alike: the statements are
the same (``?`` placeholders, ``ON CONFLICT`` upserts), and the database translates them. The
seams are hub/store's modules of the same names.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import Any

from .._conversations import FORGOTTEN_PREFIXES, Forgotten, Generation, conversation_keys, new_generation
from .._leases import Clock, Lease, LeaseStore, check_lease
from .._memory import MemoryStore
from .._pairings import Pairing, PairingStore
from .._reviews import Approved, Listening, Review, ReviewStore
from .._revisions import Revision, RevisionStore, text_hash
from .._schedules import ScheduleStore, Tick
from .._stops import StopStore
from .._usage import UsageStore
from ._conversations import prune_conversations
from ._sql_store import SqlStore
from ._sqlite import SqlDatabase
from ._values import dumps, loads

__all__ = [
    "SqlLeaseStore",
    "SqlMemoryStore",
    "SqlPairingStore",
    "SqlReviewStore",
    "SqlRevisionStore",
    "SqlScheduleStore",
    "SqlStopStore",
    "SqlUsageStore",
]


# --- key-value memory -----------------------------------------------------------------------


class SqlMemoryStore(SqlStore, MemoryStore, store="memory"):
    """Values stored as JSON text (table ``kv``). ``set`` returns once the value is committed.
    Each conversation's activity and generation are a row of ``conversations``; a write
    under a generation checks it in the write's own statement (hub/store/_conversations.py)."""

    def __init__(self, db: SqlDatabase, *, clock: Clock = time.time) -> None:
        super().__init__(db)
        self.clock = clock

    def _current_sql(self) -> str:
        # PostgreSQL: FOR SHARE holds the row until the write commits, so a /new that bumps
        # the generation waits for it (and its delete, the next statement, sees the write)
        lock = " FOR SHARE" if self.db.dialect == "postgres" else ""
        return f"EXISTS (SELECT 1 FROM conversations WHERE id = ? AND generation = ?{lock})"

    async def get(self, key: str) -> Any | None:
        row = await self.db.fetchone("SELECT value FROM kv WHERE key = ?", (key,))
        return loads(row[0]) if row is not None else None

    async def set(self, key: str, value: Any) -> None:
        await self.db.write(
            "INSERT INTO kv (key, value, updated) VALUES (?, ?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value, updated = excluded.updated",
            (key, _text(key, value), self.clock()),
        )

    async def get_versioned(self, key: str) -> tuple[Any | None, Any]:
        # the stored text is the version: a compare-and-set on it is exact across workers
        row = await self.db.fetchone("SELECT value FROM kv WHERE key = ?", (key,))
        return (loads(row[0]), row[0]) if row is not None else (None, None)

    async def set_if_unchanged(
        self, key: str, value: Any, version: Any, *, generation: Generation | None = None
    ) -> Any | None:
        text = _text(key, value)
        guard, extra = "", tuple[Any, ...]()
        if generation is not None:
            guard, extra = f" AND {self._current_sql()}", (generation.conversation, generation.number)
        if version is None:
            row = await self.db.fetchone(  # one short statement: inline on SQLite when its thread is idle
                f"INSERT INTO kv (key, value, updated) SELECT ?, ?, ? WHERE true{guard} "
                "ON CONFLICT(key) DO NOTHING RETURNING key",
                (key, text, self.clock(), *extra),
            )
        else:
            row = await self.db.fetchone(
                f"UPDATE kv SET value = ?, updated = ? WHERE key = ? AND value = ?{guard} RETURNING key",
                (text, self.clock(), key, version, *extra),
            )
        if row is None and generation is not None and not await self.current(generation):
            raise Forgotten(generation)
        return text if row is not None else None

    # --- conversations ----------------------------------------------------------------------

    async def begin(self, conversation: str, *, keep: bool = False) -> Generation:
        # through the group commit (shared with the run's other writes), then a point read
        await self.db.write(
            "INSERT INTO conversations (id, generation, active, keep) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(id) DO UPDATE SET "
            "active = CASE WHEN excluded.active > conversations.active "
            "THEN excluded.active ELSE conversations.active END, "
            "keep = CASE WHEN excluded.keep = 1 THEN 1 ELSE conversations.keep END",
            (conversation, new_generation(), self.clock(), 1 if keep else 0),
        )
        row = await self.db.fetchone("SELECT generation FROM conversations WHERE id = ?", (conversation,))
        if row is None:  # retention pruned it between the two: begin its next life
            return await self.begin(conversation, keep=keep)
        return Generation(conversation, int(row[0]))

    async def current(self, generation: Generation) -> bool:
        row = await self.db.fetchone("SELECT generation FROM conversations WHERE id = ?", (generation.conversation,))
        return row is not None and int(row[0]) == generation.number

    async def set_if_current(self, key: str, value: Any, generation: Generation) -> bool:
        # through the group commit, the check in the write's statement; then whether it
        # landed: a generation never comes back, so one still current was current at the write
        await self.db.write(
            f"INSERT INTO kv (key, value, updated) SELECT ?, ?, ? WHERE {self._current_sql()} "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value, updated = excluded.updated",
            (key, _text(key, value), self.clock(), generation.conversation, generation.number),
        )
        return await self.current(generation)

    async def forget(self, conversation: str) -> None:
        # the generation first: from its commit on, no write of the old life lands; then the keys
        await self.db.write(
            "INSERT INTO conversations (id, generation, active, keep) VALUES (?, ?, ?, 0) "
            "ON CONFLICT(id) DO UPDATE SET generation = conversations.generation + 1, active = excluded.active",
            (conversation, new_generation(), self.clock()),
        )
        keys = conversation_keys(conversation, FORGOTTEN_PREFIXES)
        await self.db.write(f"DELETE FROM kv WHERE key IN ({','.join('?' * len(keys))})", keys)

    async def prune_idle(self, before: float, *, dry_run: bool = False) -> int:
        return await prune_conversations(self.db, before, batch=500, dry_run=dry_run)

    async def delete(self, key: str) -> None:
        await self.db.write("DELETE FROM kv WHERE key = ?", (key,))

    async def clear(self, prefix: str = "") -> None:
        if prefix:
            await self.db.write("DELETE FROM kv WHERE substr(key, 1, ?) = ?", (len(prefix), prefix))
        else:
            await self.db.write("DELETE FROM kv")

    async def keys(self, prefix: str = "") -> list[str]:
        if prefix and prefix[-1] != "\U0010ffff":
            # a range of the primary key, not a scan of every key: the keys that start with
            # the prefix are those from it to it with its last character the next one
            # (code point order is SQLite's BINARY and PostgreSQL's "C" collation)
            after = ord(prefix[-1]) + 1
            end = prefix[:-1] + chr(0xE000 if 0xD800 <= after <= 0xDFFF else after)  # no surrogate
            rows = await self.db.fetchall(
                "SELECT key FROM kv WHERE key >= ? AND key < ? AND substr(key, 1, ?) = ? ORDER BY key",
                (prefix, end, len(prefix), prefix),
            )
        else:
            rows = await self.db.fetchall(
                "SELECT key FROM kv WHERE substr(key, 1, ?) = ? ORDER BY key", (len(prefix), prefix)
            )
        return [r[0] for r in rows]


def _text(key: str, value: Any) -> str:
    try:
        return dumps(value, default=None)  # NaN/Infinity become null, lone surrogates U+FFFD
    except (TypeError, ValueError) as e:
        raise TypeError(f"value for {key!r} is not JSON-serialisable: {e}") from e


# --- leases ------------------------------------------------------------------------------


@dataclass(slots=True)
class _Row:
    holder: str
    expires: float
    token: int


# One statement decides: a free (never taken), expired or already-ours lease becomes ours;
# a live lease of another holder is left alone (the WHERE of DO UPDATE). The token grows
# unless the holder is extending a live holding of its own.
_ACQUIRE = """
INSERT INTO leases (name, holder, expires, token) VALUES (?1, ?2, ?3, 1)
ON CONFLICT (name) DO UPDATE SET
    holder = excluded.holder,
    expires = excluded.expires,
    token = CASE WHEN leases.holder = excluded.holder AND leases.expires > ?4
                 THEN leases.token ELSE leases.token + 1 END
WHERE leases.holder = excluded.holder OR leases.expires <= ?4
"""
_RENEW = "UPDATE leases SET expires = ?3 WHERE name = ?1 AND holder = ?2 AND expires > ?4"
_RELEASE = "UPDATE leases SET holder = '', expires = 0 WHERE name = ?1 AND holder = ?2 AND expires > ?3"


class SqlLeaseStore(SqlStore, LeaseStore, store="leases"):
    """Leases in the hub's database (table ``leases``), shared by every worker on it: the
    processes beside a SQLite file, or the workers of one PostgreSQL database.

    Each change is one conditional statement committed through the database's writer; what
    it did is read back (the row is then ours until it expires, so the read cannot race).
    """

    def __init__(self, db: SqlDatabase, *, clock: Clock = time.time) -> None:
        super().__init__(db)
        self.clock = clock

    async def _row(self, name: str) -> _Row | None:
        row = await self.db.fetchone("SELECT holder, expires, token FROM leases WHERE name = ?", (name,))
        return _Row(str(row[0]), float(row[1]), int(row[2])) if row else None

    async def _mine(self, name: str, holder: str, expires: float) -> Lease | None:
        row = await self._row(name)
        if row is None or row.holder != holder or row.expires != expires:
            return None
        return Lease(name, holder, row.expires, row.token)

    async def acquire(self, name: str, holder: str, ttl: float) -> Lease | None:
        check_lease(name, holder, ttl)
        now = self.clock()
        expires = now + ttl
        await self.db.write(_ACQUIRE, (name, holder, expires, now))
        return await self._mine(name, holder, expires)

    async def renew(self, name: str, holder: str, ttl: float) -> Lease | None:
        check_lease(name, holder, ttl)
        now = self.clock()
        expires = now + ttl
        await self.db.write(_RENEW, (name, holder, expires, now))
        return await self._mine(name, holder, expires)

    async def release(self, name: str, holder: str) -> bool:
        check_lease(name, holder)
        before = await self.holder(name)
        if before is None or before.holder != holder:
            return False
        await self.db.write(_RELEASE, (name, holder, self.clock()))
        after = await self._row(name)
        return after is not None and after.holder != holder

    async def holder(self, name: str) -> Lease | None:
        row = await self._row(name)
        if row is None or not row.holder or row.expires <= self.clock():
            return None
        return Lease(name, row.holder, row.expires, row.token)


# --- usage, schedules, revisions, pairings ------------------------------------------------


class SqlUsageStore(SqlStore, UsageStore, store="usage"):
    """Tokens per scope and day (table ``token_usage``), added up in the database, so workers
    sharing it count into the same totals."""

    def add(self, scope: str, day: str, tokens: int) -> None:
        self.db.write_soon(
            "INSERT INTO token_usage (scope, day, tokens) VALUES (?, ?, ?) "
            "ON CONFLICT (scope, day) DO UPDATE SET tokens = token_usage.tokens + excluded.tokens",
            (scope, day, tokens),
        )

    async def get(self, scope: str, day: str) -> int:
        await self.db.flush()
        row = await self.db.fetchone("SELECT tokens FROM token_usage WHERE scope = ? AND day = ?", (scope, day))
        return int(row[0]) if row else 0

    def add_cost(self, scope: str, day: str, cost: float) -> None:
        self.db.write_soon(
            "INSERT INTO token_usage (scope, day, tokens, cost) VALUES (?, ?, 0, ?) "
            "ON CONFLICT (scope, day) DO UPDATE SET cost = token_usage.cost + excluded.cost",
            (scope, day, cost),
        )

    async def cost(self, scope: str, day: str) -> float:
        await self.db.flush()
        row = await self.db.fetchone("SELECT cost FROM token_usage WHERE scope = ? AND day = ?", (scope, day))
        return float(row[0]) if row else 0.0

    async def reserve(self, scope: str, day: str, amount: float, limit: float) -> bool:
        if amount > limit or limit <= 0:
            return False
        await self.db.flush()  # this worker's queued costs count first
        # one conditional upsert: the check and the add are one statement, atomic on both
        # backends, so two workers can never both pass a check the other's add would fail
        row = await self.db.fetchone(
            "INSERT INTO token_usage (scope, day, tokens, cost) VALUES (?, ?, 0, ?) "
            "ON CONFLICT (scope, day) DO UPDATE SET cost = token_usage.cost + excluded.cost "
            "WHERE token_usage.cost < ? AND token_usage.cost + excluded.cost <= ? RETURNING cost",
            (scope, day, amount, limit, limit),
        )
        return row is not None


class SqlStopStore(SqlStore, StopStore, store="stops"):
    """Stop requests (table ``run_stops``), in the database every worker polls."""

    async def request(self, run_id: str, reason: str) -> None:
        await self.db.write(
            "INSERT INTO run_stops (run_id, reason, requested) VALUES (?, ?, ?) ON CONFLICT (run_id) DO NOTHING",
            (run_id, reason, time.time()),
        )

    async def requested(self) -> dict[str, str]:
        rows = await self.db.fetchall("SELECT run_id, reason FROM run_stops")
        return {str(r[0]): str(r[1]) for r in rows}

    async def clear(self, run_ids: list[str]) -> None:
        for run_id in run_ids:
            await self.db.write("DELETE FROM run_stops WHERE run_id = ?", (run_id,))

    async def prune(self, before: float) -> int:
        old = await self.db.fetchall("SELECT run_id FROM run_stops WHERE requested < ?", (before,))
        await self.clear([str(r[0]) for r in old])
        return len(old)


class SqlScheduleStore(SqlStore, ScheduleStore, store="schedules"):
    """Each schedule's last fire (table ``schedules``); a claim is one conditional statement,
    so workers sharing the database fire a tick once."""

    async def tick(self, name: str) -> Tick | None:
        row = await self.db.fetchone("SELECT last_fire, done FROM schedules WHERE name = ?", (name,))
        return Tick(float(row[0]), bool(row[1])) if row else None

    async def record(self, name: str, fired: float) -> None:
        await self.db.write(
            "INSERT INTO schedules (name, last_fire, done) VALUES (?, ?, 1) "
            "ON CONFLICT (name) DO UPDATE SET last_fire = excluded.last_fire, done = 1",
            (name, fired),
        )

    async def start(self, name: str, now: float) -> Tick:
        await self.db.write(
            "INSERT INTO schedules (name, last_fire, done) VALUES (?, ?, 1) ON CONFLICT (name) DO NOTHING",
            (name, now),
        )
        tick = await self.tick(name)
        assert tick is not None
        return tick

    async def finish(self, name: str, fired: float) -> None:
        await self.db.write("UPDATE schedules SET done = 1 WHERE name = ? AND last_fire = ?", (name, fired))

    async def claim(self, name: str, expected: float | None, fired: float) -> bool:
        # One conditional statement (the compare-and-set), then a read of what it left: the
        # row carries this call's own mark only if this claim changed it.
        mark = secrets.token_hex(8)
        if expected is None:
            await self.db.write(
                "INSERT INTO schedules (name, last_fire, done, claim) VALUES (?, ?, 0, ?) "
                "ON CONFLICT (name) DO NOTHING",
                (name, fired, mark),
            )
        else:
            await self.db.write(
                "UPDATE schedules SET last_fire = ?, done = 0, claim = ? WHERE name = ? AND last_fire = ?",
                (fired, mark, name, expected),
            )
        row = await self.db.fetchone("SELECT claim FROM schedules WHERE name = ?", (name,))
        return row is not None and row[0] == mark


# One statement, so numbering and de-duplication are atomic even with a second process
# (`hub persona rollback` while the hub runs) writing to the same database.
_INSERT = """
INSERT INTO persona_revisions (name, rev, ts, sha, note, text)
SELECT ?1, (SELECT COALESCE(MAX(rev), 0) + 1 FROM persona_revisions WHERE name = ?1), ?2, ?3, ?4, ?5
WHERE COALESCE((SELECT sha FROM persona_revisions WHERE name = ?1 ORDER BY rev DESC LIMIT 1), '') != ?3
ON CONFLICT DO NOTHING
"""


class SqlRevisionStore(SqlStore, RevisionStore, store="revisions"):
    """Persona revisions (table ``persona_revisions``); ``record`` writes behind."""

    def record(self, name: str, text: str, *, note: str = "") -> None:
        self.db.write_soon(_INSERT, (name, time.time(), text_hash(text), note, text))

    async def flush(self) -> None:
        await self.db.flush()

    async def history(self, name: str) -> list[Revision]:
        await self.db.flush()
        rows = await self.db.fetchall(
            "SELECT name, rev, text, ts, note FROM persona_revisions WHERE name = ? ORDER BY rev", (name,)
        )
        return [Revision(r[0], r[1], r[2], r[3], r[4]) for r in rows]

    async def names(self) -> list[str]:
        await self.db.flush()
        rows = await self.db.fetchall("SELECT DISTINCT name FROM persona_revisions ORDER BY name")
        return [r[0] for r in rows]


# "user" quoted: a reserved word in PostgreSQL (SQLite takes the quoted spelling alike)
_COLUMNS = 'platform, "user", state, code, created, expires, approved, user_name, user_handle'


class SqlPairingStore(SqlStore, PairingStore, store="pairings"):
    """Pairings in the hub's database (``hub pairing`` opens it beside a running hub)."""

    async def get(self, platform: str, user: str) -> Pairing | None:
        row = await self.db.fetchone(
            f'SELECT {_COLUMNS} FROM pairings WHERE platform = ? AND "user" = ?', (platform, user)
        )
        return Pairing(*row) if row else None

    async def put(self, pairing: Pairing) -> None:
        await self.db.write(
            f"INSERT INTO pairings ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?) "
            'ON CONFLICT (platform, "user") DO UPDATE SET state = excluded.state, code = excluded.code, '
            "created = excluded.created, expires = excluded.expires, approved = excluded.approved, "
            "user_name = excluded.user_name, user_handle = excluded.user_handle",
            (
                pairing.platform,
                pairing.user,
                pairing.state,
                pairing.code,
                pairing.created,
                pairing.expires,
                pairing.approved,
                pairing.user_name,
                pairing.user_handle,
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

    async def prune_pending(self, before: float) -> int:
        where = "state = 'pending' AND expires IS NOT NULL AND expires < ?"
        n = await self.db.fetchone(f"SELECT COUNT(*) FROM pairings WHERE {where}", (before,))
        await self.db.write(f"DELETE FROM pairings WHERE {where}", (before,))
        return int(n[0]) if n else 0


# --- held posts (the review queue) ---------------------------------------------------------

REVIEW_CHANNEL = "hub_reviews"
"""The PostgreSQL channel an approval is notified on (``<schema>\\t<platform>\\t<id>``)."""

_REVIEW_COLUMNS = "id, platform, output, chat, text, state, created, expires, in_reply_to, decided, result, extra"


class SqlReviewStore(SqlStore, ReviewStore, store="reviews"):
    """Held posts in the hub's database (table ``reviews``): ``hub review`` opens it beside a
    running hub, and every worker of one PostgreSQL database shares it."""

    async def add(self, review: Review) -> None:
        await self.db.write(
            f"INSERT INTO reviews ({_REVIEW_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                review.id,
                review.platform,
                review.output,
                review.chat,
                review.text,
                review.state,
                review.created,
                review.expires,
                review.in_reply_to,
                review.decided,
                review.result,
                review.extra,
            ),
        )

    async def get(self, review_id: str) -> Review | None:
        row = await self.db.fetchone(f"SELECT {_REVIEW_COLUMNS} FROM reviews WHERE id = ?", (review_id,))
        return Review(*row) if row else None

    async def list(self, *, platform: str | None = None, state: str | None = None) -> list[Review]:
        where, params = "1 = 1", list[str]()
        if platform is not None:
            where, params = where + " AND platform = ?", [*params, platform]
        if state is not None:
            where, params = where + " AND state = ?", [*params, state]
        rows = await self.db.fetchall(
            f"SELECT {_REVIEW_COLUMNS} FROM reviews WHERE {where} ORDER BY created, id", params
        )
        return [Review(*r) for r in rows]

    async def _move(
        self, review_id: str, old: str, new: str, *, now: float, text: str | None, result: str | None
    ) -> Review | None:
        # one conditional statement: the state it moves from is the compare of the compare-and-set
        row = await self.db.fetchone(
            "UPDATE reviews SET state = ?, text = COALESCE(?, text), result = COALESCE(?, result), "
            "decided = CASE WHEN state = 'pending' THEN ? ELSE decided END "
            "WHERE id = ? AND state = ? AND (state != 'pending' OR expires > ?) "
            f"RETURNING {_REVIEW_COLUMNS}",
            (new, text, result, now, review_id, old, now),
        )
        return Review(*row) if row else None

    async def _delete(self, review_id: str) -> int:
        row = await self.db.fetchone("DELETE FROM reviews WHERE id = ? RETURNING id", (review_id,))
        return 1 if row else 0

    # PostgreSQL tells the other workers (and ``hub review`` in another process) of an approval;
    # one channel for the database, the payload naming the schema, so schemas never wake each other

    async def _tell_others(self, review: Review) -> None:
        if self.db.dialect == "postgres":
            await self.db.notify(REVIEW_CHANNEL, f"{self.db.namespace}\t{review.platform}\t{review.id}")  # type: ignore[union-attr]

    async def listen(self, wake: Approved) -> Listening | None:
        if self.db.dialect != "postgres":
            return None
        namespace = self.db.namespace  # type: ignore[union-attr]

        def told(payload: str) -> None:
            schema, _, rest = payload.partition("\t")
            if schema == namespace:
                wake(rest.partition("\t")[0])

        return await self.db.listen(REVIEW_CHANNEL, told, lost=lambda: wake(""))  # type: ignore[union-attr]
