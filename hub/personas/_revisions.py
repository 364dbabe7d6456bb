"""Persona revisions: every accepted version of every persona file, kept behind a store seam.

The hub records a revision each time :class:`~hub.personas.PersonaSet` accepts a new version
of a file (at start and on every valid edit); a text equal to the latest revision is not
recorded again, so restarts add nothing. ``hub persona history NAME`` lists them with a
diff, ``hub persona rollback NAME REV`` writes one back to ``contexts/NAME.toml``, where
the running hub picks it up like any edit.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import tempfile
import time
import tomllib
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from ..config import format_validation_error
from ..errors import ConfigError, HubError
from ..store.sql import SqlDatabase

__all__ = [
    "Revision",
    "RevisionStore",
    "InMemoryRevisionStore",
    "SQLiteRevisionStore",
    "PostgresRevisionStore",
    "rollback",
    "write_persona",
    "render_history",
    "text_hash",
]


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(slots=True, frozen=True)
class Revision:
    name: str
    rev: int
    text: str
    ts: float
    note: str = ""

    @property
    def sha(self) -> str:
        return text_hash(self.text)


class RevisionStore(ABC):
    """Where persona revisions live. ``record`` never blocks the loop (it is called from a
    persona lookup); ``flush`` waits until what was recorded is durable."""

    @abstractmethod
    def record(self, name: str, text: str, *, note: str = "") -> None:
        """Add a revision, numbered after the latest, unless its text equals the latest's."""

    @abstractmethod
    async def history(self, name: str) -> list[Revision]:
        """Oldest first."""

    @abstractmethod
    async def names(self) -> list[str]: ...

    async def get(self, name: str, rev: int) -> Revision | None:
        for r in await self.history(name):
            if r.rev == rev:
                return r
        return None

    async def flush(self) -> None:  # noqa: B027
        pass

    async def open(self) -> None:  # noqa: B027
        pass

    async def close(self) -> None:  # noqa: B027
        pass


class InMemoryRevisionStore(RevisionStore):
    def __init__(self) -> None:
        self._revs: dict[str, list[Revision]] = {}

    def record(self, name: str, text: str, *, note: str = "") -> None:
        revs = self._revs.setdefault(name, [])
        if revs and revs[-1].text == text:
            return
        revs.append(Revision(name, len(revs) + 1, text, time.time(), note))

    async def history(self, name: str) -> list[Revision]:
        return list(self._revs.get(name, []))

    async def names(self) -> list[str]:
        return sorted(self._revs)


# One statement, so numbering and de-duplication are atomic even with a second process
# (`hub persona rollback` while the hub runs) writing to the same database.
_INSERT = """
INSERT INTO persona_revisions (name, rev, ts, sha, note, text)
SELECT ?1, (SELECT COALESCE(MAX(rev), 0) + 1 FROM persona_revisions WHERE name = ?1), ?2, ?3, ?4, ?5
WHERE COALESCE((SELECT sha FROM persona_revisions WHERE name = ?1 ORDER BY rev DESC LIMIT 1), '') != ?3
ON CONFLICT DO NOTHING
"""


class SQLiteRevisionStore(RevisionStore):
    def __init__(self, db: SqlDatabase) -> None:
        self.db = db

    async def open(self) -> None:
        await self.db.open()

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


class PostgresRevisionStore(SQLiteRevisionStore):
    """The same RevisionStore on PostgreSQL (``[store] url``): the SQL is shared, the database
    is a :class:`hub.store.sql.PgDatabase` that several workers use at once."""


# --- operator commands ------------------------------------------------------------------


async def rollback(store: RevisionStore, folder: Path, name: str, rev: int) -> Revision:
    """Put revision ``rev`` of persona ``name`` back in ``folder/NAME.toml``.

    The file is replaced atomically, so a running hub never reads half of it; it picks the
    file up like any edit. The rollback itself is recorded as a new revision.

    Raises:
        HubError: no such revision.
        ConfigError: the revision no longer validates (the persona format changed since).
    """
    from ._persona import Persona

    target = await store.get(name, rev)
    if target is None:
        revs = [r.rev for r in await store.history(name)]
        known = f"revisions {revs[0]}..{revs[-1]}" if revs else "no revisions"
        raise HubError(f"persona {name!r} has no revision {rev} ({known}; see `hub persona history {name}`)")
    path = Path(folder) / f"{name}.toml"
    try:
        raw = tomllib.loads(target.text)
        raw.setdefault("name", name)
        Persona.model_validate(raw)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"revision {rev} is not valid TOML any more: {e}", path=str(path)) from e
    except ValidationError as e:
        key, msg = format_validation_error(e)
        raise ConfigError(f"revision {rev} does not validate any more: {msg}", path=str(path), key=key) from e
    _write_atomic(path, target.text)
    store.record(name, target.text, note=f"rollback to rev {rev}")
    await store.flush()
    return target


def write_persona(folder: Path, name: str, text: str) -> Path:
    """Replace ``folder/NAME.toml`` with ``text`` atomically (as a rollback does), so a running
    hub never reads half of it and picks it up like any edit. Validate the text first."""
    path = Path(folder) / f"{name}.toml"
    _write_atomic(path, text)
    return path


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def render_history(revisions: list[Revision], *, current: str | None = None, context: int = 2) -> str:
    """Each revision with its date and note, and a unified diff against the one before.

    ``current`` is the text of the file on disk now: the newest revision equal to it is
    marked as the one in force, and a file that differs from every revision is reported.
    """
    if not revisions:
        return "no revisions"
    lines: list[str] = []
    in_force = revisions[-1].rev
    prev: Revision | None = None
    for r in revisions:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.ts))
        mark = "  (in force)" if r.rev == in_force else ""
        lines.append(f"rev {r.rev}  {when}{'  ' + r.note if r.note else ''}{mark}")
        if prev is None:
            lines.extend("    " + line for line in r.text.splitlines())
        else:
            diff = difflib.unified_diff(
                prev.text.splitlines(), r.text.splitlines(), f"rev {prev.rev}", f"rev {r.rev}", n=context, lineterm=""
            )
            lines.extend("    " + line for line in diff)
        lines.append("")
        prev = r
    if current is not None and current != revisions[-1].text:
        lines.append(
            f"the file on disk differs from rev {in_force} (an edit that did not validate, or not yet picked up)"
        )
    return "\n".join(lines).rstrip()
