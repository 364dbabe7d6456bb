"""Persona revisions: every accepted version of every persona file, kept in a
`RevisionStore`.

The hub records a revision each time `PersonaSet` accepts a new version
of a file (at start and on every valid edit); a text equal to the latest revision is not
recorded again, so restarts add nothing. ``hub persona history NAME`` lists them with a
diff, ``hub persona rollback NAME REV`` writes one back to ``contexts/NAME.toml``, where
the running hub picks it up like any edit.
"""

from __future__ import annotations

import difflib
import os
import tempfile
import time
import tomllib
from pathlib import Path

from pydantic import ValidationError

from ..config import format_validation_error
from ..errors import ConfigError, HubError
from ..store import Revision, RevisionStore

__all__ = ["rollback", "write_persona", "render_history"]


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
