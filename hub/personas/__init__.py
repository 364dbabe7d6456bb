"""Personas and skills: the files under ``contexts/`` and ``skills/``, the watcher that re-reads them, and their revisions."""

from __future__ import annotations

from ._persona import Persona, PersonaSet, load_persona, parse_persona
from ._revisions import render_history, rollback, write_persona
from ._skills import REVISION_PREFIX, SKILL_FILE, Skill, SkillSet, parse_skill, rollback_skill
from ._watcher import PersonaWatcher

__all__ = [
    "Persona",
    "PersonaSet",
    "PersonaWatcher",
    "REVISION_PREFIX",
    "SKILL_FILE",
    "Skill",
    "SkillSet",
    "load_persona",
    "parse_persona",
    "parse_skill",
    "render_history",
    "rollback",
    "rollback_skill",
    "write_persona",
]
