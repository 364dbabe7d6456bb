"""Personas: one TOML file per persona under ``contexts/``, read again when edited.

A persona file holds ``name``, ``instructions`` (the text that reaches the prompt), optional
``examples``, which conversations use it (``contexts``: context types or instance ids,
``extensions``: extension names), and what it says outside the model: ``greeting`` (the
answer to ``/start``) and ``failure_reply`` (when a run fails). An edit that does not validate keeps the previous version
in force and logs why; nothing is lost.

Only regular files inside the folder are read: a symlink leading outside it, or a special
file (a FIFO, a device), is skipped with a warning, never opened in a way that could block.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import stat
import time
import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..config import ScheduleSection, format_validation_error, loads_toml, read_toml
from ..errors import ConfigError
from ..protocol import PERSONA_CAP, scan

__all__ = ["Persona", "PersonaSet", "load_persona", "parse_persona", "persona_files"]

log = logging.getLogger("hub.personas")


class Persona(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    instructions: str = Field(min_length=1)
    examples: list[str] = Field(default_factory=list)
    contexts: list[str] = Field(default_factory=list, description="context types or TYPE:KEY ids (globs allowed)")
    extensions: list[str] = Field(default_factory=list, description="extension names whose contexts use this persona")
    schedules: dict[str, ScheduleSection] = Field(
        default_factory=dict, description="[schedules.NAME] tables, as in config.toml (hub/features/_schedules.py)"
    )
    child_runs: list[str] = Field(
        default_factory=list,
        description="TYPE:KEY instances (globs allowed) this persona's runs may start child runs in (hub/features/_children.py)",
    )
    greeting: str | None = Field(
        None, description="the answer to /start (default: a line made from the persona's name)"
    )
    failure_reply: str | None = Field(
        None, description='what the user gets when a run fails (default: [agent] failure_reply; "": nothing)'
    )
    busy: Literal["steer", "queue", "collect", "interrupt"] | None = Field(
        None, description="a message arriving during a run of this persona (default: [agent] busy)"
    )
    timezone: str | None = Field(
        None,
        description="the time zone its reminders are read in until a person names their own (default: [agent] timezone)",
    )

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                zoneinfo.ZoneInfo(v)
            except (zoneinfo.ZoneInfoNotFoundError, ValueError) as e:
                raise ValueError(f"unknown time zone {v!r} (an IANA name, e.g. Europe/Paris or UTC)") from e
        return v

    @field_validator("instructions")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be blank")
        return v


def load_persona(path: Path) -> Persona:
    """Parse and validate one persona file. Raises ConfigError naming the file and key."""
    return _validated(read_toml(path), path)


def parse_persona(text: str, path: Path) -> Persona:
    """Validate the text of a persona file before it is written to ``path``, exactly as
    `load_persona()` would read it (the dashboard's editor). Raises ConfigError."""
    return _validated(loads_toml(text.encode("utf-8"), path=path), path)


def _validated(raw: dict[str, Any], path: Path) -> Persona:
    raw.setdefault("name", path.stem)
    try:
        persona = Persona.model_validate(raw)
    except ValidationError as e:
        key, msg = format_validation_error(e)
        raise ConfigError(msg, path=str(path), key=key) from e
    return _scanned(persona, path)


def _scanned(persona: Persona, path: Path) -> Persona:
    """The persona with prompt-injection markers neutralised and sizes capped (hub/protocol/_injection.py)."""
    instructions = scan(persona.instructions, source=f"{path} instructions", cap=PERSONA_CAP)
    examples = [scan(x, source=f"{path} examples[{i}]", cap=PERSONA_CAP) for i, x in enumerate(persona.examples)]
    if instructions.clean and all(x.clean for x in examples):
        return persona
    return persona.model_copy(update={"instructions": instructions.text, "examples": [x.text for x in examples]})


def persona_files(folder: Path) -> tuple[list[Path], dict[Path, str]]:
    """The ``*.toml`` files of ``folder`` that may be read, and why each other one is skipped.

    A symlink is followed only when it leads to a file inside the folder; anything that is
    not a regular file (a FIFO, a socket, a device, a folder) is skipped.
    """
    files: list[Path] = []
    skipped: dict[Path, str] = {}
    try:
        root = folder.resolve()
        candidates = sorted(folder.glob("*.toml"))
    except OSError:
        return files, skipped
    for path in candidates:
        try:
            if path.is_symlink():
                target = path.resolve()
                if not target.is_relative_to(root):
                    skipped[path] = f"a symlink leading outside {folder} (to {target})"
                    continue
            mode = os.stat(path).st_mode
        except (OSError, RuntimeError) as e:  # RuntimeError: a symlink loop
            skipped[path] = f"cannot stat: {getattr(e, 'strerror', None) or e}"
            continue
        if not stat.S_ISREG(mode):
            skipped[path] = "not a regular file (a FIFO, a device or a folder)"
            continue
        files.append(path)
    return files, skipped


@dataclass(slots=True)
class _Entry:
    persona: Persona
    mtime_ns: int
    size: int


class PersonaSet:
    """The personas in a folder. ``get`` re-reads a file whose mtime or size changed.

    ``on_change(name, persona, text)`` is called for each accepted new version (the revision
    store keeps them). Checks cost one ``stat`` per file and are rate-limited by ``interval``.
    """

    def __init__(
        self,
        folder: Path,
        *,
        default: str = "default",
        on_change: Callable[[str, Persona, str], None] | None = None,
        interval: float = 0.0,
    ) -> None:
        self.folder = Path(folder)
        self.default = default
        self.on_change = on_change
        self.interval = interval
        self._entries: dict[str, _Entry] = {}
        self._errors: dict[str, str] = {}
        self._failed: dict[str, tuple[int, int]] = {}
        self._skipped: dict[Path, str] = {}
        self._last_scan = -1.0

    def _files(self) -> list[Path]:
        files, skipped = persona_files(self.folder)
        for path, why in skipped.items():
            if self._skipped.get(path) != why:
                log.warning("persona %s: skipped: %s", path, why)
        self._skipped = skipped
        return files

    def skipped(self) -> dict[Path, str]:
        """Files of the folder that are not read, and why (see `persona_files()`)."""
        return dict(self._skipped)

    def load_all(self, *, strict: bool = False) -> list[ConfigError]:
        """Load every persona; returns the errors (raises the first one when ``strict``)."""
        errors = []
        for path in self._files():
            try:
                self._load(path, force=True)
            except ConfigError as e:
                if strict:
                    raise
                self._errors[path.stem] = str(e)
                errors.append(e)
        self._last_scan = time.monotonic()
        return errors

    def _load(self, path: Path, *, force: bool = False) -> None:
        name = path.stem
        try:
            st = path.stat()
        except FileNotFoundError:
            return  # a deleted file keeps its last version in force
        entry = self._entries.get(name)
        if not force and entry is not None and entry.mtime_ns == st.st_mtime_ns and entry.size == st.st_size:
            return
        try:
            persona = load_persona(path)
        except ConfigError as e:
            if entry is None:
                self._failed[name] = (st.st_mtime_ns, st.st_size)
                raise
            if self._errors.get(name) != str(e):
                self._errors[name] = str(e)
                log.error("persona %s: edit rejected, keeping the previous version: %s", name, e)
            entry.mtime_ns, entry.size = st.st_mtime_ns, st.st_size
            return
        self._errors.pop(name, None)
        changed = entry is None or entry.persona != persona
        self._entries[name] = _Entry(persona, st.st_mtime_ns, st.st_size)
        if changed:
            if entry is not None:
                log.info("persona %s: reloaded from %s", name, path)
            if self.on_change is not None:
                self.on_change(name, persona, path.read_text(encoding="utf-8"))

    def refresh(self, *, force: bool = False) -> None:
        """Pick up edited and new files (``force``: even within ``interval`` of the last look,
        as after the dashboard wrote a file)."""
        now = time.monotonic()
        if not force and self.interval and now - self._last_scan < self.interval:
            return
        self._last_scan = now
        if not self.folder.is_dir():
            return
        for path in self._files():
            name = path.stem
            if name not in self._entries and name in self._failed:
                try:
                    st = path.stat()
                except FileNotFoundError:
                    continue
                if self._failed[name] == (st.st_mtime_ns, st.st_size):
                    continue  # still the same broken file
            try:
                self._load(path)
                self._failed.pop(name, None)
            except ConfigError as e:
                if self._errors.get(name) != str(e):
                    self._errors[name] = str(e)
                    log.error("persona %s: not loaded: %s", name, e)

    def names(self) -> list[str]:
        return sorted(self._entries)

    def get(self, name: str) -> Persona | None:
        self.refresh()
        entry = self._entries.get(name)
        return entry.persona if entry else None

    def errors(self) -> dict[str, str]:
        return dict(self._errors)

    def set(self, name: str, persona: Persona) -> None:
        """Put a version in force (rollback); the file on disk is rewritten by the caller."""
        entry = self._entries.get(name)
        self._entries[name] = _Entry(persona, entry.mtime_ns if entry else 0, entry.size if entry else 0)

    def for_context(
        self, context_type: str, context_id: str, extension: str | None = None, *, override: str | None = None
    ) -> Persona | None:
        """The persona for a conversation: an explicit override, then a persona naming the
        instance id, the context type or the extension, then the default."""
        self.refresh()
        if override:
            p = self.get(override)
            if p is not None:
                return p
        for scope in (context_id, context_type):
            for entry in self._entries.values():
                if any(fnmatch.fnmatchcase(scope, pat) for pat in entry.persona.contexts):
                    return entry.persona
        if extension:
            for entry in self._entries.values():
                if extension in entry.persona.extensions:
                    return entry.persona
        default = self._entries.get(self.default)
        return default.persona if default else None
