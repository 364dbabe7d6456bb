"""The SQL databases under the stores: SQLite and PostgreSQL, their migrations and the group commit they share."""

from __future__ import annotations

from ._migrations import SCHEMA_VERSION
from ._postgres import PgDatabase, inspect
from ._sqlite import INLINE_MAX, Database, SqlDatabase
from ._values import dumps

__all__ = [
    "Database",
    "INLINE_MAX",
    "PgDatabase",
    "SCHEMA_VERSION",
    "SqlDatabase",
    "dumps",
    "inspect",
]
