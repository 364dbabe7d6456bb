"""The versioned schema of both backends: SQLite (``data/hub.db``) and PostgreSQL (``[store] url``).

Every store's tables are created here, in ordered steps, recorded in a ``schema_version``
table (one row per step applied). The steps run when the database is opened, each once:
:func:`migrate_sqlite` inside one ``BEGIN IMMEDIATE`` transaction (a second process waits
for the write lock), :func:`migrate_postgres` inside one transaction holding an advisory
lock, so workers starting together migrate once and never see half a schema.

A database written before versions existed (no ``schema_version`` table) is version 0: step
1 is exactly the tables those releases created (``IF NOT EXISTS``, and the inbox columns
that were added to an existing table at open), so it is a no-op on such a database and
brings it under versioning. A step is never edited once released; a change is a new step.

PostgreSQL differs where SQLite would mislead: ``DOUBLE PRECISION`` for times (``REAL`` is
four bytes there), ``BIGINT`` for counters, and ``COLLATE "C"`` on keys and ids so that
sorting and prefix ranges are by code point, as in SQLite.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ...errors import StoreError

__all__ = ["SCHEMA_VERSION", "Step", "SQLITE_STEPS", "POSTGRES_STEPS", "migrate_sqlite", "migrate_postgres"]

MIGRATION_LOCK = 0x6875625F736368  # "hub_sch": the advisory lock key PostgreSQL migrations hold


@dataclass(frozen=True, slots=True)
class Step:
    """One schema change: ``sql`` statements (``;``-separated, none inside a literal), then
    ``extra`` (a function of the open connection, for a change that depends on what is there)."""

    version: int
    description: str
    sql: str
    extra: Callable[[Any], Awaitable[None]] | None = None

    def statements(self) -> list[str]:
        return [s.strip() for s in self.sql.split(";") if s.strip()]


# --- SQLite ---------------------------------------------------------------------------

_SQLITE_V1 = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    context TEXT NOT NULL,
    state TEXT NOT NULL,
    reason TEXT,
    steps INTEGER NOT NULL DEFAULT 0,
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    started REAL NOT NULL,
    ended REAL,
    parent_id TEXT,
    user TEXT
);
CREATE INDEX IF NOT EXISTS runs_started ON runs (started);
CREATE INDEX IF NOT EXISTS runs_state ON runs (state);
CREATE INDEX IF NOT EXISTS runs_context ON runs (context, started);
CREATE INDEX IF NOT EXISTS runs_parent ON runs (parent_id);
CREATE TABLE IF NOT EXISTS run_events (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    ts REAL NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS inbox (
    id TEXT PRIMARY KEY,
    context TEXT NOT NULL,
    platform_id TEXT UNIQUE,
    data TEXT NOT NULL,
    state TEXT NOT NULL,
    run_id TEXT,
    received REAL NOT NULL,
    handled REAL
);
CREATE INDEX IF NOT EXISTS inbox_state ON inbox (state, received);
CREATE TABLE IF NOT EXISTS kv (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS schedules (
    name TEXT PRIMARY KEY,
    last_fire REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS persona_revisions (
    name TEXT NOT NULL,
    rev INTEGER NOT NULL,
    ts REAL NOT NULL,
    sha TEXT NOT NULL,
    note TEXT NOT NULL DEFAULT '',
    text TEXT NOT NULL,
    PRIMARY KEY (name, rev)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS token_usage (
    scope TEXT NOT NULL,
    day TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    PRIMARY KEY (scope, day)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS pairings (
    platform TEXT NOT NULL,
    user TEXT NOT NULL,
    state TEXT NOT NULL,
    code TEXT UNIQUE,
    created REAL NOT NULL,
    expires REAL,
    approved REAL,
    PRIMARY KEY (platform, user)
)
"""

# the inbox columns added after its first release (an older table lacks them)
_INBOX_V1_COLUMNS = {"failures": "INTEGER NOT NULL DEFAULT 0", "failed_run": "TEXT", "error": "TEXT"}


async def _sqlite_inbox_columns(conn: Any) -> None:
    have = {r[1] for r in await conn.execute_fetchall("PRAGMA table_info(inbox)")}
    for name, decl in _INBOX_V1_COLUMNS.items():
        if name not in have:
            await conn.execute(f"ALTER TABLE inbox ADD COLUMN {name} {decl}")


# v2: the inbox lease (which worker holds an input, until when), for several workers
_SQLITE_V2 = """
ALTER TABLE inbox ADD COLUMN claimed_by TEXT;
ALTER TABLE inbox ADD COLUMN lease_until REAL
"""

# v3: listeners and schedule ticks across workers: a schedule's tick is claimed by one
# worker (compare-and-set of last_fire, marked by the claim) and done once its input is
# recorded (a row from before was done); leases for what must run on one worker at a time
_SQLITE_V3 = """
ALTER TABLE schedules ADD COLUMN done INTEGER NOT NULL DEFAULT 1;
ALTER TABLE schedules ADD COLUMN claim TEXT;
CREATE TABLE IF NOT EXISTS leases (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    expires REAL NOT NULL,
    token INTEGER NOT NULL
)
"""

# v4: whether the store failed a run, as a flag: such a run's inputs are retried, never parked,
# and nothing decides that from the reason's words. The runs recorded before it say so in their
# reason (it began "store_error"), read once here.
_V4 = """
ALTER TABLE runs ADD COLUMN store_failed INTEGER NOT NULL DEFAULT 0;
UPDATE runs SET store_failed = 1 WHERE state = 'failed' AND substr(reason, 1, 11) = 'store_error'
"""

# v5: money. What a run's model calls cost (runs.cost) and what each budget scope spent per
# day (token_usage.cost), at [model] prices; and the stop requests a worker's runs are
# polled against (an operator's stop, a user's /stop, reaching whichever worker holds the run)
_SQLITE_V5 = """
ALTER TABLE runs ADD COLUMN cost REAL NOT NULL DEFAULT 0;
ALTER TABLE token_usage ADD COLUMN cost REAL NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS run_stops (
    run_id TEXT PRIMARY KEY,
    reason TEXT NOT NULL,
    requested REAL NOT NULL
)
"""

# v8: who and what, on the run's row: the sender's display name and @username, and one-line
# previews of the message and of the reply, so that the dashboard lists and searches runs
# and conversations without reading their logs; and who asked for each pairing code
_V8 = """
ALTER TABLE runs ADD COLUMN user_name TEXT;
ALTER TABLE runs ADD COLUMN user_handle TEXT;
ALTER TABLE runs ADD COLUMN message TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN reply TEXT NOT NULL DEFAULT '';
ALTER TABLE pairings ADD COLUMN user_name TEXT;
ALTER TABLE pairings ADD COLUMN user_handle TEXT
"""

# v50: which named models answered a run's steps ("model" for [model], else [models.NAME]),
# in the order they first answered, so that `hub runs` and the dashboard list them unread
_V50 = """
ALTER TABLE runs ADD COLUMN models TEXT NOT NULL DEFAULT ''
"""

# v60: the prompt tokens of a run the provider served from its prompt cache (runs.cached_tokens),
# priced at [model] price_cached_input
_V60 = """
ALTER TABLE runs ADD COLUMN cached_tokens INTEGER NOT NULL DEFAULT 0
"""

# the review queue of public timelines: posts held for an operator (hub/store/_reviews.py)
_V140 = """
CREATE TABLE IF NOT EXISTS reviews (
    id TEXT PRIMARY KEY,
    platform TEXT NOT NULL,
    output TEXT NOT NULL,
    chat TEXT NOT NULL,
    text TEXT NOT NULL,
    state TEXT NOT NULL,
    created REAL NOT NULL,
    expires REAL NOT NULL,
    in_reply_to TEXT,
    decided REAL,
    result TEXT,
    extra TEXT
);
CREATE INDEX IF NOT EXISTS reviews_state ON reviews (state, created)
"""

SQLITE_STEPS: tuple[Step, ...] = (
    Step(1, "the tables of the releases before versioning", _SQLITE_V1, _sqlite_inbox_columns),
    Step(2, "inbox leases (claimed_by, lease_until)", _SQLITE_V2),
    Step(3, "schedule tick claims (done, claim) and leases", _SQLITE_V3),
    Step(4, "runs failed by the store (store_failed)", _V4),
    Step(5, "cost of runs and budgets (runs.cost, token_usage.cost), stop requests (run_stops)", _SQLITE_V5),
    Step(8, "who and what of runs (user_name, user_handle, message, reply) and of pairings", _V8),
    Step(50, "the models that answered a run's steps (runs.models)", _V50),
    Step(60, "cached prompt tokens of runs (runs.cached_tokens)", _V60),
    Step(140, "posts held for review (reviews)", _V140),
)

# --- PostgreSQL -----------------------------------------------------------------------

_PG_V1 = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT COLLATE "C" PRIMARY KEY,
    context TEXT COLLATE "C" NOT NULL,
    state TEXT NOT NULL,
    reason TEXT,
    steps BIGINT NOT NULL DEFAULT 0,
    prompt_tokens BIGINT NOT NULL DEFAULT 0,
    completion_tokens BIGINT NOT NULL DEFAULT 0,
    started DOUBLE PRECISION NOT NULL,
    ended DOUBLE PRECISION,
    parent_id TEXT COLLATE "C",
    "user" TEXT
);
CREATE INDEX IF NOT EXISTS runs_started ON runs (started);
CREATE INDEX IF NOT EXISTS runs_state ON runs (state);
CREATE INDEX IF NOT EXISTS runs_context ON runs (context, started);
CREATE INDEX IF NOT EXISTS runs_parent ON runs (parent_id);
CREATE TABLE IF NOT EXISTS run_events (
    run_id TEXT COLLATE "C" NOT NULL,
    seq BIGINT NOT NULL,
    kind TEXT NOT NULL,
    ts DOUBLE PRECISION NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE TABLE IF NOT EXISTS inbox (
    id TEXT COLLATE "C" PRIMARY KEY,
    context TEXT COLLATE "C" NOT NULL,
    platform_id TEXT COLLATE "C" UNIQUE,
    data TEXT NOT NULL,
    state TEXT NOT NULL,
    run_id TEXT COLLATE "C",
    received DOUBLE PRECISION NOT NULL,
    handled DOUBLE PRECISION,
    failures BIGINT NOT NULL DEFAULT 0,
    failed_run TEXT COLLATE "C",
    error TEXT
);
CREATE INDEX IF NOT EXISTS inbox_state ON inbox (state, received);
CREATE TABLE IF NOT EXISTS kv (
    key TEXT COLLATE "C" PRIMARY KEY,
    value TEXT NOT NULL,
    updated DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS schedules (
    name TEXT COLLATE "C" PRIMARY KEY,
    last_fire DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS persona_revisions (
    name TEXT COLLATE "C" NOT NULL,
    rev BIGINT NOT NULL,
    ts DOUBLE PRECISION NOT NULL,
    sha TEXT NOT NULL,
    note TEXT NOT NULL DEFAULT '',
    text TEXT NOT NULL,
    PRIMARY KEY (name, rev)
);
CREATE TABLE IF NOT EXISTS token_usage (
    scope TEXT COLLATE "C" NOT NULL,
    day TEXT COLLATE "C" NOT NULL,
    tokens BIGINT NOT NULL,
    PRIMARY KEY (scope, day)
);
CREATE TABLE IF NOT EXISTS pairings (
    platform TEXT COLLATE "C" NOT NULL,
    "user" TEXT COLLATE "C" NOT NULL,
    state TEXT NOT NULL,
    code TEXT COLLATE "C" UNIQUE,
    created DOUBLE PRECISION NOT NULL,
    expires DOUBLE PRECISION,
    approved DOUBLE PRECISION,
    PRIMARY KEY (platform, "user")
)
"""

_PG_V2 = """
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS claimed_by TEXT COLLATE "C";
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS lease_until DOUBLE PRECISION;
CREATE INDEX IF NOT EXISTS inbox_claims ON inbox (claimed_by) WHERE state IN ('received', 'taken')
"""

_PG_V3 = """
ALTER TABLE schedules ADD COLUMN IF NOT EXISTS done INTEGER NOT NULL DEFAULT 1;
ALTER TABLE schedules ADD COLUMN IF NOT EXISTS claim TEXT COLLATE "C";
CREATE TABLE IF NOT EXISTS leases (
    name TEXT COLLATE "C" PRIMARY KEY,
    holder TEXT COLLATE "C" NOT NULL,
    expires DOUBLE PRECISION NOT NULL,
    token BIGINT NOT NULL
)
"""

_PG_V5 = """
ALTER TABLE runs ADD COLUMN IF NOT EXISTS cost DOUBLE PRECISION NOT NULL DEFAULT 0;
ALTER TABLE token_usage ADD COLUMN IF NOT EXISTS cost DOUBLE PRECISION NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS run_stops (
    run_id TEXT COLLATE "C" PRIMARY KEY,
    reason TEXT NOT NULL,
    requested DOUBLE PRECISION NOT NULL
)
"""

POSTGRES_STEPS: tuple[Step, ...] = (
    Step(1, "the tables of the first release", _PG_V1),
    Step(2, "inbox leases (claimed_by, lease_until)", _PG_V2),
    Step(3, "schedule tick claims (done, claim) and leases", _PG_V3),
    Step(4, "runs failed by the store (store_failed)", _V4.replace("ADD COLUMN", "ADD COLUMN IF NOT EXISTS")),
    Step(5, "cost of runs and budgets (runs.cost, token_usage.cost), stop requests (run_stops)", _PG_V5),
    Step(
        8,
        "who and what of runs (user_name, user_handle, message, reply) and of pairings",
        _V8.replace("ADD COLUMN", "ADD COLUMN IF NOT EXISTS"),
    ),
    Step(
        50,
        "the models that answered a run's steps (runs.models)",
        _V50.replace("ADD COLUMN", "ADD COLUMN IF NOT EXISTS"),
    ),
    Step(
        60,
        "cached prompt tokens of runs (runs.cached_tokens)",
        _V60.replace("ADD COLUMN", "ADD COLUMN IF NOT EXISTS").replace("INTEGER", "BIGINT"),
    ),
    Step(
        140,
        "posts held for review (reviews)",
        _V140.replace("REAL", "DOUBLE PRECISION").replace("id TEXT PRIMARY KEY", 'id TEXT COLLATE "C" PRIMARY KEY'),
    ),
)

SCHEMA_VERSION = SQLITE_STEPS[-1].version
assert SCHEMA_VERSION == POSTGRES_STEPS[-1].version, "both backends are at the same version"

_VERSION_TABLE = (
    "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied {real} NOT NULL, "
    "description TEXT NOT NULL)"
)


def _too_new(where: str, found: int) -> StoreError:
    return StoreError(
        f"{where}: the database's schema is version {found}, newer than this hub's {SCHEMA_VERSION}; "
        "upgrade the hub (every worker sharing the database runs the same release)",
        store="schema_version",
        operation="migrate",
    )


async def migrate_sqlite(conn: Any, *, where: str) -> int:
    """Bring an aiosqlite connection (autocommit mode) to :data:`SCHEMA_VERSION`; returns the
    version it found. ``where`` names the database in errors.

    Raises:
        StoreError: the schema is newer than this code knows.
    """
    await conn.execute("BEGIN IMMEDIATE")
    try:
        await conn.execute(_VERSION_TABLE.format(real="REAL"))
        rows = await conn.execute_fetchall("SELECT MAX(version) FROM schema_version")
        found = int(rows[0][0] or 0) if rows else 0
        if found > SCHEMA_VERSION:
            raise _too_new(where, found)
        for step in SQLITE_STEPS:
            if step.version <= found:
                continue
            for statement in step.statements():
                await conn.execute(statement)
            if step.extra is not None:
                await step.extra(conn)
            await conn.execute(
                "INSERT INTO schema_version (version, applied, description) VALUES (?, ?, ?)",
                (step.version, time.time(), step.description),
            )
        await conn.execute("COMMIT")
    except BaseException:
        await conn.execute("ROLLBACK")
        raise
    return found


async def migrate_postgres(conn: Any, *, where: str) -> int:
    """Bring an asyncpg connection's schema (its ``search_path``) to :data:`SCHEMA_VERSION`,
    holding an advisory lock so concurrent workers migrate once; returns the version found.

    Raises:
        StoreError: the schema is newer than this code knows.
    """
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
        await conn.execute(_VERSION_TABLE.format(real="DOUBLE PRECISION"))
        found = int(await conn.fetchval("SELECT COALESCE(MAX(version), 0) FROM schema_version"))
        if found > SCHEMA_VERSION:
            raise _too_new(where, found)
        for step in POSTGRES_STEPS:
            if step.version <= found:
                continue
            for statement in step.statements():
                await conn.execute(statement)
            if step.extra is not None:
                await step.extra(conn)
            await conn.execute(
                "INSERT INTO schema_version (version, applied, description) VALUES ($1, $2, $3)",
                step.version,
                time.time(),
                step.description,
            )
    return found
