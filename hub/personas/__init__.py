"""Personas: the files under ``contexts/``, the watcher that re-reads them, and their revisions."""

from __future__ import annotations

from ._persona import Persona, PersonaSet, load_persona, parse_persona
from ._revisions import render_history, rollback, write_persona
from ._watcher import PersonaWatcher

__all__ = [
    "Persona",
    "PersonaSet",
    "PersonaWatcher",
    "load_persona",
    "parse_persona",
    "render_history",
    "rollback",
    "write_persona",
]
