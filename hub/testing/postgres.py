"""A PostgreSQL schema of its own for a test, dropped after it (``[store] url`` tests).

The server is ``$HUB_TEST_POSTGRES`` (default ``postgresql://postgres@127.0.0.1:5432/test``,
the machine's own). When it does not answer, or asyncpg is not installed, the test is
skipped with the reason, except where ``CI`` is set: CI runs where PostgreSQL is, and
must never pass by skipping, so there the test fails.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

__all__ = ["DEFAULT_URL", "temporary_schema", "server_url"]

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"


def server_url() -> str:
    return os.environ.get("HUB_TEST_POSTGRES") or DEFAULT_URL


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set: PostgreSQL tests must run, not skip)")
    pytest.skip(reason)


@asynccontextmanager
async def temporary_schema(*, url: str | None = None) -> AsyncIterator[str]:
    """A new schema, ``hub_test_<random>``, on the test server; yields a URL whose
    ``search_path`` is that schema (so every connection of the hub uses it), and drops the
    schema with everything in it afterwards."""
    base = url or server_url()
    try:
        import asyncpg
    except ImportError:
        _unavailable("asyncpg is not installed (pip install 'hub[postgres]')")
        raise
    try:
        admin = await asyncpg.connect(base, timeout=5)
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as e:
        _unavailable(f"PostgreSQL at {base} is not reachable: {type(e).__name__}: {e}")
        raise
    name = f"hub_test_{secrets.token_hex(6)}"
    try:
        await admin.execute(f'CREATE SCHEMA "{name}"')
        sep = "&" if "?" in base else "?"
        yield f"{base}{sep}search_path={name}"
    finally:
        try:
            await admin.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        finally:
            await admin.close()
