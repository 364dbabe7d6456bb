"""Which database the stores share: SQLite in ``data_dir`` (``[store] url`` empty, the
default) or PostgreSQL at ``[store] url``, which several ``hub run`` workers use at once.

The hub, its composition root and the command line (``hub runs``, ``hub inbox``, ``hub
pairing``, ...) all open the database through :func:`database_for`, so they agree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import HubError
from ._run_records import PostgresRunStore, RunStore, SQLiteRunStore
from .sql import Database, PgDatabase, SqlDatabase

if TYPE_CHECKING:
    from ..config import HubConfig

__all__ = ["database_for", "describe", "existing_database", "run_store"]


def database_for(config: HubConfig) -> SqlDatabase:
    """The database ``config`` names (not opened)."""
    s = config.store
    if s.url:
        return PgDatabase(
            s.url, pool_size=s.pool_size, lock_connections=s.lock_connections, connect_timeout=s.connect_timeout
        )
    return Database(config.data_dir / "hub.db")


def describe(config: HubConfig) -> str:
    """Where the state lives, in words (no password)."""
    if config.store.url:
        return f"PostgreSQL {PgDatabase(config.store.url).path}"
    return f"SQLite {config.data_dir / 'hub.db'}"


def existing_database(config: HubConfig, *, missing: str) -> SqlDatabase:
    """The database for a command that reads what a hub wrote (``hub runs``, ``hub inbox``,
    ...): PostgreSQL at ``[store] url``, or ``data_dir/hub.db``, which must exist.

    Raises:
        HubError: SQLite and no ``hub.db`` yet (``missing`` says what that means).
    """
    if config.store.url:
        return database_for(config)
    path = config.data_dir / "hub.db"
    if not path.exists():
        raise HubError(f"{missing}: {path} does not exist")
    return Database(path)


def run_store(db: SqlDatabase) -> RunStore:
    """The run store over ``db``, for a command that reads runs without a hub."""
    return PostgresRunStore(db) if db.dialect == "postgres" else SQLiteRunStore(db)
