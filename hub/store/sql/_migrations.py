"""The versioned schema of both backends: SQLite (``data/hub.db``) and PostgreSQL (``[store] url``).

Every store's tables are created here, in ordered steps, recorded in a ``schema_version``
table (one row per step applied). The steps run when the database is opened, each once:
`migrate_sqlite()` inside one ``BEGIN IMMEDIATE`` transaction (a second process waits
for the write lock), `migrate_postgres()` inside one transaction holding an advisory
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

# One row per conversation (hub/store/_conversations.py). Existing conversations get their
# newest key's time as last activity; ids ending ":bot" (the bot's own context) are kept.
_CONVERSATIONS_BACKFILL = """
INSERT INTO conversations (id, generation, active, keep)
SELECT id, {random}, MAX(updated), CASE WHEN id LIKE '%:bot' THEN 1 ELSE 0 END FROM (
    SELECT substr(key, 9) AS id, updated FROM kv WHERE substr(key, 1, 8) = 'context:'
    UNION ALL SELECT substr(key, 8) AS id, updated FROM kv WHERE substr(key, 1, 7) = 'memory:'
    UNION ALL SELECT substr(key, 16) AS id, updated FROM kv WHERE substr(key, 1, 15) = 'working-memory:'
) AS keyed GROUP BY id
"""

_SQLITE_V10 = """
CREATE TABLE IF NOT EXISTS conversations (
    id TEXT PRIMARY KEY,
    generation INTEGER NOT NULL,
    active REAL NOT NULL,
    keep INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS conversations_idle ON conversations (active) WHERE keep = 0;
""" + _CONVERSATIONS_BACKFILL.format(random="abs(random() % 4611686018427387903)")

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

# one row per question; state moves forward by compare-and-set (hub/store/_approvals.py)
_V120 = """
CREATE TABLE IF NOT EXISTS approvals (
    id TEXT{c} PRIMARY KEY,
    key TEXT{c} NOT NULL UNIQUE,
    run_id TEXT{c} NOT NULL,
    context TEXT{c} NOT NULL,
    platform TEXT,
    user_id TEXT,
    action TEXT NOT NULL,
    args TEXT NOT NULL,
    state TEXT NOT NULL,
    created {real} NOT NULL,
    expires {real} NOT NULL,
    answered {real},
    answered_by TEXT
);
CREATE INDEX IF NOT EXISTS approvals_state ON approvals (state, created)
"""

# v150: reminders set in a conversation (hub/features/_reminders.py). ``due`` is the next
# nominal fire, ``pending`` a claimed fire whose input is not recorded yet (resent, once);
# ``slot`` (0 up to the cap, unique per person; NULL once a one-off fired) holds the cap.
_V150 = """
CREATE TABLE IF NOT EXISTS reminders (
    id TEXT PRIMARY KEY,
    context TEXT NOT NULL,
    user_id TEXT NOT NULL,
    text TEXT NOT NULL,
    cron TEXT NOT NULL DEFAULT '',
    timezone TEXT NOT NULL DEFAULT 'UTC',
    due REAL NOT NULL,
    active INTEGER NOT NULL DEFAULT 1,
    pending REAL,
    created REAL NOT NULL,
    slot INTEGER
);
CREATE INDEX IF NOT EXISTS reminders_due ON reminders (active, due);
CREATE INDEX IF NOT EXISTS reminders_user ON reminders (user_id, active);
CREATE UNIQUE INDEX IF NOT EXISTS reminders_slot ON reminders (user_id, slot)
"""

# v151: what people said and the bot answered them, one row a message, for search_history
# and the dashboard's search: FTS5 over ``text`` on SQLite (kept in sync by triggers),
# a tsvector with a GIN index on PostgreSQL. ``user_id``: whose conversation it is.
_SQLITE_V151 = """
CREATE TABLE IF NOT EXISTS history (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    context TEXT NOT NULL,
    user_id TEXT NOT NULL,
    role TEXT NOT NULL,
    text TEXT NOT NULL,
    ts REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS history_user ON history (user_id, ts);
CREATE INDEX IF NOT EXISTS history_run ON history (run_id);
CREATE VIRTUAL TABLE IF NOT EXISTS history_fts USING fts5(
    text, content='history', content_rowid='id', tokenize='unicode61 remove_diacritics 2'
)
"""


async def _sqlite_history_triggers(conn: Any) -> None:
    # a trigger's body holds ";": not splittable as the step's SQL is
    await conn.execute(
        "CREATE TRIGGER IF NOT EXISTS history_added AFTER INSERT ON history BEGIN "
        "INSERT INTO history_fts (rowid, text) VALUES (new.id, new.text); END"
    )
    await conn.execute(
        "CREATE TRIGGER IF NOT EXISTS history_deleted AFTER DELETE ON history BEGIN "
        "INSERT INTO history_fts (history_fts, rowid, text) VALUES ('delete', old.id, old.text); END"
    )


_PG_V151 = """
CREATE TABLE IF NOT EXISTS history (
    id BIGSERIAL PRIMARY KEY,
    run_id TEXT COLLATE "C" NOT NULL,
    context TEXT COLLATE "C" NOT NULL,
    user_id TEXT COLLATE "C" NOT NULL,
    role TEXT NOT NULL,
    text TEXT NOT NULL,
    ts DOUBLE PRECISION NOT NULL,
    doc tsvector GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED
);
CREATE INDEX IF NOT EXISTS history_user ON history (user_id, ts);
CREATE INDEX IF NOT EXISTS history_run ON history (run_id);
CREATE INDEX IF NOT EXISTS history_doc ON history USING GIN (doc)
"""

# v152: the dashboard's search (RunStore.search, conversations) through a full-text index of
# each run's who and what, not a LIKE over every row: FTS5 over runs kept by triggers (an
# update only when a searched column changed), a generated tsvector with a GIN index on PostgreSQL.
_RUNS_FTS_COLUMNS = 'context, "user", user_name, user_handle, message, reply'
_RUNS_FTS_TOKENIZE = "tokenize='unicode61 remove_diacritics 2'"  # the search of runs under way uses it too
_SQLITE_V152 = f"""
CREATE VIRTUAL TABLE IF NOT EXISTS runs_fts USING fts5(
    {_RUNS_FTS_COLUMNS}, content='runs', content_rowid='rowid', {_RUNS_FTS_TOKENIZE}
)
"""


async def _sqlite_runs_fts(conn: Any) -> None:
    new = ", ".join(f"new.{c.strip()}" for c in _RUNS_FTS_COLUMNS.split(","))
    old = ", ".join(f"old.{c.strip()}" for c in _RUNS_FTS_COLUMNS.split(","))
    changed = " OR ".join(f"old.{c.strip()} IS NOT new.{c.strip()}" for c in _RUNS_FTS_COLUMNS.split(","))
    await conn.execute(
        "CREATE TRIGGER IF NOT EXISTS runs_fts_added AFTER INSERT ON runs BEGIN "
        f"INSERT INTO runs_fts (rowid, {_RUNS_FTS_COLUMNS}) VALUES (new.rowid, {new}); END"
    )
    await conn.execute(
        "CREATE TRIGGER IF NOT EXISTS runs_fts_deleted AFTER DELETE ON runs BEGIN "
        f"INSERT INTO runs_fts (runs_fts, rowid, {_RUNS_FTS_COLUMNS}) VALUES ('delete', old.rowid, {old}); END"
    )
    await conn.execute(
        f"CREATE TRIGGER IF NOT EXISTS runs_fts_changed AFTER UPDATE ON runs WHEN {changed} BEGIN "
        f"INSERT INTO runs_fts (runs_fts, rowid, {_RUNS_FTS_COLUMNS}) VALUES ('delete', old.rowid, {old}); "
        f"INSERT INTO runs_fts (rowid, {_RUNS_FTS_COLUMNS}) VALUES (new.rowid, {new}); END"
    )
    await conn.execute("INSERT INTO runs_fts (runs_fts) VALUES ('rebuild')")  # the runs already there


# v181: the runs' index holds ended runs only. A run is written 3-4 times as it goes (its
# start, each step's progress, its end), and re-indexing it at each change of its reply cost
# about a millisecond of a turn (docs/benchmarks/history.md); it is indexed once, when it
# ends, and the few runs under way are matched at search time (`SqlRunStore`'s live index).
_RUNS_FTS_LIVE = "'running'"


async def _sqlite_runs_fts_at_end(conn: Any) -> None:
    cols = [c.strip() for c in _RUNS_FTS_COLUMNS.split(",")]
    new = ", ".join(f"new.{c}" for c in cols)
    old = ", ".join(f"old.{c}" for c in cols)
    changed = " OR ".join(f"old.{c} IS NOT new.{c}" for c in cols)
    ended_old, ended_new = f"old.state != {_RUNS_FTS_LIVE}", f"new.state != {_RUNS_FTS_LIVE}"
    for name in ("runs_fts_added", "runs_fts_deleted", "runs_fts_changed"):
        await conn.execute(f"DROP TRIGGER IF EXISTS {name}")
    await conn.execute(
        f"CREATE TRIGGER runs_fts_added AFTER INSERT ON runs WHEN {ended_new} BEGIN "
        f"INSERT INTO runs_fts (rowid, {_RUNS_FTS_COLUMNS}) VALUES (new.rowid, {new}); END"
    )
    await conn.execute(
        f"CREATE TRIGGER runs_fts_deleted AFTER DELETE ON runs WHEN {ended_old} BEGIN "
        f"INSERT INTO runs_fts (runs_fts, rowid, {_RUNS_FTS_COLUMNS}) VALUES ('delete', old.rowid, {old}); END"
    )
    # one trigger for both halves, in this order: an ended run's old words out, then its new
    # ones in (two triggers would fire in an order SQLite does not promise)
    await conn.execute(
        f"CREATE TRIGGER runs_fts_changed AFTER UPDATE ON runs "
        f"WHEN ({ended_old}) IS NOT ({ended_new}) OR ({ended_old} AND ({changed})) BEGIN "
        f"INSERT INTO runs_fts (runs_fts, rowid, {_RUNS_FTS_COLUMNS}) SELECT 'delete', old.rowid, {old} "
        f"WHERE {ended_old}; "
        f"INSERT INTO runs_fts (rowid, {_RUNS_FTS_COLUMNS}) SELECT new.rowid, {new} WHERE {ended_new}; END"
    )
    # the runs under way that the earlier triggers indexed (their words as the index holds them)
    await conn.execute(
        f"INSERT INTO runs_fts (runs_fts, rowid, {_RUNS_FTS_COLUMNS}) "
        f"SELECT 'delete', rowid, {_RUNS_FTS_COLUMNS} FROM runs WHERE state = {_RUNS_FTS_LIVE}"
    )


_PG_V152 = """
ALTER TABLE runs ADD COLUMN IF NOT EXISTS search tsvector GENERATED ALWAYS AS (to_tsvector('simple',
    COALESCE(context, '') || ' ' || COALESCE("user", '') || ' ' || COALESCE(user_name, '') || ' ' ||
    COALESCE(user_handle, '') || ' ' || COALESCE(message, '') || ' ' || COALESCE(reply, ''))) STORED;
CREATE INDEX IF NOT EXISTS runs_search ON runs USING GIN (search)
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
    Step(10, "conversations: last activity, generation, keep (retention by conversation, /new)", _SQLITE_V10),
    Step(50, "the models that answered a run's steps (runs.models)", _V50),
    Step(60, "cached prompt tokens of runs (runs.cached_tokens)", _V60),
    Step(120, "approvals runs wait on before an action (approvals)", _V120.format(real="REAL", c="")),
    Step(140, "posts held for review (reviews)", _V140),
    Step(150, "reminders", _V150),
    Step(151, "message history and its full-text index (history, history_fts)", _SQLITE_V151, _sqlite_history_triggers),
    Step(152, "the runs' full-text index for the dashboard's search (runs_fts)", _SQLITE_V152, _sqlite_runs_fts),
    Step(181, "the runs' full-text index holds ended runs only (runs_fts)", "", _sqlite_runs_fts_at_end),
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

_PG_V10 = """
CREATE TABLE IF NOT EXISTS conversations (
    id TEXT COLLATE "C" PRIMARY KEY,
    generation BIGINT NOT NULL,
    active DOUBLE PRECISION NOT NULL,
    keep INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS conversations_idle ON conversations (active) WHERE keep = 0;
""" + _CONVERSATIONS_BACKFILL.format(random="(random() * 4611686018427387903)::bigint")

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
    Step(10, "conversations: last activity, generation, keep (retention by conversation, /new)", _PG_V10),
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
        120,
        "approvals runs wait on before an action (approvals)",
        _V120.format(real="DOUBLE PRECISION", c=' COLLATE "C"'),
    ),
    Step(
        140,
        "posts held for review (reviews)",
        _V140.replace("REAL", "DOUBLE PRECISION").replace("id TEXT PRIMARY KEY", 'id TEXT COLLATE "C" PRIMARY KEY'),
    ),
    Step(
        150,
        "reminders",
        _V150.replace("TEXT PRIMARY KEY", 'TEXT COLLATE "C" PRIMARY KEY').replace("REAL", "DOUBLE PRECISION"),
    ),
    Step(151, "message history and its full-text index (history, doc tsvector)", _PG_V151),
    Step(152, "the runs' full-text index for the dashboard's search (runs.search)", _PG_V152),
    # SQLite's v181 (its index of ended runs only): PostgreSQL's generated column is unchanged
    Step(181, "the runs' full-text index holds ended runs only (SQLite's; nothing here)", ""),
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
    """Bring an aiosqlite connection (autocommit mode) to `SCHEMA_VERSION`; returns the
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
    """Bring an asyncpg connection's schema (its ``search_path``) to `SCHEMA_VERSION`,
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
