"""Skills: ``skills/NAME/SKILL.md`` (the Agent Skills format), read again when edited.

A skill is a folder with a ``SKILL.md``: YAML front matter with ``name`` (the folder's name)
and ``description``, then Markdown instructions; files beside it come with it. The model
sees only the names and descriptions, and calls ``load_skill`` to read one (or one of its
files) when it needs it. Skills are versioned like personas: every accepted version is a
revision (``skill:NAME`` in the revision store), an edit that does not validate keeps the
previous version in force, and ``hub skill rollback`` puts one back. Their text is checked
by the injection scanner as a persona's is.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field

from ..definitions import Action, Extension, RunContext
from ..errors import ActionError, ConfigError, HubError
from ..protocol import PERSONA_CAP, scan
from ..store import Revision, RevisionStore
from ._revisions import _write_atomic

__all__ = ["Skill", "SkillSet", "parse_skill", "rollback_skill", "SKILL_FILE", "REVISION_PREFIX"]

log = logging.getLogger("hub.personas")

SKILL_FILE = "SKILL.md"
REVISION_PREFIX = "skill:"
"""Skills' revisions share the persona revision store, under ``skill:NAME``."""
MAX_SKILL_BYTES = 256_000
MAX_FILE_CHARS = 40_000
"""Characters of a skill's file ``load_skill`` returns (then cut, with a marker)."""
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
_FRONT = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)(.*)\Z", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Skill:
    """One accepted version of a skill."""

    name: str
    description: str
    instructions: str
    folder: Path
    text: str
    """The whole SKILL.md, as a revision keeps it."""


def parse_skill(text: str, path: Path) -> Skill:
    """Validate a SKILL.md's text (``path`` is where it is, or will be). Raises ConfigError
    naming the file and what is wrong."""
    m = _FRONT.match(text)
    if m is None:
        raise ConfigError(
            "no front matter: start with a '---' line, name: and description:, then '---'", path=str(path)
        )
    try:
        meta = yaml.safe_load(m.group(1))
    except yaml.YAMLError as e:
        raise ConfigError(f"the front matter is not valid YAML: {e}", path=str(path)) from e
    if not isinstance(meta, dict):
        raise ConfigError("the front matter must be a mapping (name: ..., description: ...)", path=str(path))
    name, about = meta.get("name"), meta.get("description")
    folder = path.parent
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(
            "name: lowercase letters, digits and '-', at most 64 (and the folder's name)", path=str(path), key="name"
        )
    if name != folder.name:
        raise ConfigError(f"name: {name!r} is not the folder's name {folder.name!r}", path=str(path), key="name")
    if not isinstance(about, str) or not about.strip():
        raise ConfigError(
            "description: must say what the skill is for and when to use it", path=str(path), key="description"
        )
    if len(about) > 1024:
        raise ConfigError(f"description: {len(about)} characters, at most 1024", path=str(path), key="description")
    instructions = m.group(2).strip()
    if not instructions:
        raise ConfigError("no instructions after the front matter", path=str(path))
    # operator-written text that reaches the prompt: injection markers neutralised, size capped
    about = scan(about.strip(), source=f"{path} description", cap=1024).text
    instructions = scan(instructions, source=f"{path} instructions", cap=PERSONA_CAP).text
    return Skill(name, about, instructions, folder, text)


def _moved(folders: dict[str, int]) -> bool:
    """Whether any of these folders changed (an entry added, removed or renamed) or went."""
    for top, mtime in folders.items():
        try:
            if os.stat(top).st_mtime_ns != mtime:
                return True
        except OSError:
            return True
    return False


def _regular(path: Path, root: Path) -> bool:
    """A regular file inside ``root`` (a symlink leading outside it, a FIFO or a device is not)."""
    try:
        if not path.resolve().is_relative_to(root.resolve()):
            return False
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, RuntimeError):
        return False


class SkillSet:
    """The skills under a folder; `refresh()` picks up edits (the persona watcher calls it).

    ``on_change(name, text)`` is called for each accepted new version (the revision store
    keeps it, as ``skill:NAME``)."""

    def __init__(self, folder: Path, *, on_change: Callable[[str, str], None] | None = None) -> None:
        self.folder = Path(folder)
        self.on_change = on_change
        self._skills: dict[str, Skill] = {}
        self._seen: dict[str, tuple[int, int]] = {}
        self._errors: dict[str, str] = {}
        # each skill's files, indexed when it loads and again when one of its folders changes
        # (a folder's mtime moves when an entry is added, removed or renamed in it)
        self._files: dict[str, list[str]] = {}
        self._folders: dict[str, dict[str, int]] = {}
        self._changed: list[tuple[str, str]] = []  # accepted versions still to hand to on_change

    def refresh(self) -> None:
        """Read new and edited SKILL.md files; an edit that does not validate keeps the previous
        version in force and logs why, once."""
        self._collect()
        self._notify()

    async def refresh_async(self) -> None:
        """`refresh()` with the files read in a worker thread, off the event loop; the new
        versions are handed to ``on_change`` on the loop."""
        await asyncio.to_thread(self._collect)
        self._notify()

    def _collect(self) -> None:
        if not self.folder.is_dir():
            return
        for path in sorted(self.folder.glob(f"*/{SKILL_FILE}")):
            name = path.parent.name
            if not _regular(path, self.folder):
                self._error(name, f"{path}: skipped: not a regular file inside {self.folder}")
                continue
            try:
                st = path.stat()
            except OSError:
                continue
            if self._seen.get(name) != (st.st_mtime_ns, st.st_size):
                self._seen[name] = (st.st_mtime_ns, st.st_size)
                self._load(name, path, st.st_size)
            skill = self._skills.get(name)
            if skill is not None and (name not in self._files or _moved(self._folders.get(name, {}))):
                self._index(name, skill)

    def _index(self, name: str, skill: Skill) -> None:
        files: list[str] = []
        folders: dict[str, int] = {}
        for top, dirs, names in os.walk(skill.folder):
            dirs.sort()
            with contextlib.suppress(OSError):
                folders[top] = os.stat(top).st_mtime_ns
            for n in sorted(names):
                p = Path(top) / n
                if len(files) < 200 and p != skill.folder / SKILL_FILE and _regular(p, skill.folder):
                    files.append(p.relative_to(skill.folder).as_posix())
        self._files[name], self._folders[name] = sorted(files), folders

    def _notify(self) -> None:
        changed, self._changed = self._changed, []
        if self.on_change is not None:
            for name, text in changed:
                self.on_change(name, text)

    def _load(self, name: str, path: Path, size: int) -> None:
        try:
            if size > MAX_SKILL_BYTES:
                raise ConfigError(f"{size} bytes, at most {MAX_SKILL_BYTES}", path=str(path))
            skill = parse_skill(path.read_text(encoding="utf-8"), path)
        except (ConfigError, OSError, UnicodeDecodeError) as e:
            kept = " keeping the previous version:" if name in self._skills else ""
            self._error(name, f"skill {name}: edit rejected,{kept} {e}" if kept else f"skill {name}: not loaded: {e}")
            return
        self._errors.pop(name, None)
        old = self._skills.get(name)
        self._skills[name] = skill
        self._files.pop(name, None)  # indexed again with the new version
        if old is None or old.text != skill.text:
            if old is not None:
                log.info("skill %s: reloaded from %s", name, path)
            self._changed.append((name, skill.text))

    def _error(self, name: str, message: str) -> None:
        if self._errors.get(name) != message:
            self._errors[name] = message
            log.error("%s", message)

    def names(self) -> list[str]:
        return sorted(self._skills)

    def get(self, name: str) -> Skill | None:
        return self._skills.get(name)

    def errors(self) -> dict[str, str]:
        return dict(self._errors)

    def summaries(self) -> list[tuple[str, str]]:
        """(name, description) of every skill: all the model sees of them until it loads one."""
        return [(s.name, s.description) for s in (self._skills[n] for n in self.names())]

    def files(self, skill: Skill) -> list[str]:
        """The files that come with a skill (relative paths), SKILL.md left out: from the index."""
        if skill.name not in self._files:
            self._index(skill.name, skill)
        return list(self._files[skill.name])

    def read(self, name: str, file: str = "") -> dict[str, Any]:
        """What ``load_skill`` returns: the instructions and the list of files, or one file.
        It reads the skill as last refreshed (the watcher keeps it current) and at most
        what the model may get of a file; it blocks, so ``load_skill`` runs it in a thread.

        Raises:
            ActionError: no such skill or file, or a file outside the skill's folder.
        """
        skill = self._skills.get(name)
        if skill is None:
            known = ", ".join(self.names()) or "none"
            raise ActionError("load_skill", f"no skill named {name!r} (skills: {known})")
        if not file:
            return {"name": skill.name, "instructions": skill.instructions, "files": self.files(skill)}
        path = skill.folder / file
        if file.startswith("/") or not _regular(path, skill.folder) or path.name == SKILL_FILE:
            raise ActionError("load_skill", f"skill {name!r} has no file {file!r} (files: {self.files(skill)})")
        try:
            with open(path, "rb") as f:  # never more than the model may get: UTF-8 has 4 bytes a character at most
                data = f.read(MAX_FILE_CHARS * 4 + 1)
                size = os.fstat(f.fileno()).st_size
        except OSError as e:
            raise ActionError("load_skill", f"skill {name!r}: cannot read {file!r}: {e.strerror or e}") from e
        text = data.decode("utf-8", "replace")
        if len(text) > MAX_FILE_CHARS or size > len(data):
            text = text[:MAX_FILE_CHARS] + f"[... cut: the file has {size} bytes]"
        scanned = scan(text, source=str(path), cap=MAX_FILE_CHARS + 100)
        return {"name": skill.name, "file": file, "content": scanned.text}

    def extension(self) -> Extension:
        """The ``load_skill`` action (offered while there is a skill)."""

        class LoadSkill(BaseModel):
            name: str = Field(description="the skill's name, as listed")
            file: str = Field("", description="a file that comes with the skill (relative path); empty: SKILL.md")

        async def load_skill(args: LoadSkill, ctx: RunContext) -> dict[str, Any]:
            return await asyncio.to_thread(self.read, args.name, args.file)  # files are read off the loop

        action = Action(
            name="load_skill",
            handler=load_skill,
            schema=LoadSkill,
            description="Read a skill's instructions (or one of its files) before doing what it is for.",
            enabled=lambda ctx: bool(self._skills),
        )
        return Extension(name="hub.skills", actions=[action], description="Built-in action: skills.")


async def rollback_skill(store: RevisionStore, folder: Path, name: str, rev: int) -> Revision:
    """Put revision ``rev`` of skill ``name`` back in ``folder/NAME/SKILL.md`` (atomically; a
    running hub picks it up like any edit); recorded as a new revision.

    Raises:
        HubError: no such revision.
        ConfigError: the revision no longer validates.
    """
    key = REVISION_PREFIX + name
    target = await store.get(key, rev)
    if target is None:
        revs = [r.rev for r in await store.history(key)]
        known = f"revisions {revs[0]}..{revs[-1]}" if revs else "no revisions"
        raise HubError(f"skill {name!r} has no revision {rev} ({known}; see `hub skill history {name}`)")
    path = Path(folder) / name / SKILL_FILE
    parse_skill(target.text, path)
    _write_atomic(path, target.text)
    store.record(key, target.text, note=f"rollback to rev {rev}")
    await store.flush()
    return target
