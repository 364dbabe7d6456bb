"""Prompt-injection markers in text that reaches the system prompt unescaped or trusted.

Persona files and recalled episodes are scanned before they reach the prompt for three
kinds of marker: instructions to ignore the system prompt, forged protocol tags (the
``<response>``/``<action_call>``/``<output>`` elements the parser acts on), and invisible
Unicode (zero-width characters, bidi overrides, tag characters). Every finding is logged
and neutralised: invisible characters are removed, a forged tag's ``<`` becomes a visible
``‹``, an instruction to ignore the prompt is replaced by a marker. Text over its cap is
cut, and that is a finding too. Nothing is passed silently.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["Finding", "Scan", "scan", "scan_all", "PERSONA_CAP", "EPISODE_CAP"]

log = logging.getLogger("hub.protocol")

PERSONA_CAP = 20_000
"""Characters of one persona text (instructions, or one example) that reach the prompt."""
EPISODE_CAP = 4_000
"""Characters of one recalled episode."""

# zero-width and joiners, word joiner, BOM; bidi embeddings, overrides and isolates; marks;
# the TAG block (invisible ASCII look-alikes); interlinear annotation; Mongolian vowel separator
# (ZWNJ and ZWJ are kept between two non-ASCII characters: emoji sequences, Persian, Indic scripts)
_INVISIBLE = re.compile(
    "[\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff\u180e\ufff9-\ufffb\U000e0000-\U000e007f]"
    "|(?<![^\\x00-\\x7f])[\u200c\u200d]|[\u200c\u200d](?![^\\x00-\\x7f])"
)
_TAGS = (
    "response",
    "action_call",
    "action_result",
    "output",
    "reasoning",
    "think",
    "input",
    "system",
    "instructions",
    "protocol",
    "episode",
    "episodes",
    "memory",
)
_FORGED = re.compile(r"<\s*/?\s*(?:" + "|".join(_TAGS) + r")\b", re.IGNORECASE)
_OVERRIDE = re.compile(
    r"\b(?:ignore|disregard|forget|override|bypass)\s+(?:(?:all|any|every|the|of|these|those)\s+){0,3}"
    r"(?:(?:your|my)\s+(?:(?:previous|prior|earlier|original|initial)\s+)?"
    r"|(?:previous|prior|above|earlier|preceding|system|original|initial)\s+)"
    r"(?:instructions?|prompts?|rules|directives|guidelines|system\s+prompt)\b"
    r"|\b(?:new|updated|real)\s+system\s+prompt\b"
    r"|\byou\s+are\s+now\s+(?:in\s+)?(?:developer|DAN|jailbreak|unrestricted)\b",
    re.IGNORECASE,
)
NEUTRALISED = "[removed: an instruction to ignore the system prompt]"


@dataclass(frozen=True, slots=True)
class Finding:
    kind: str
    """``override``, ``forged_tag``, ``invisible`` or ``too_long``."""
    count: int
    sample: str = ""


@dataclass(slots=True)
class Scan:
    text: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.findings


def scan(text: str, *, source: str, cap: int) -> Scan:
    """``text`` neutralised, with what was found; each finding is logged, naming ``source``."""
    findings: list[Finding] = []
    if len(text) > cap:
        findings.append(Finding("too_long", len(text) - cap, f"{len(text)} characters, cap {cap}"))
        text = text[:cap]
    text, n = _INVISIBLE.subn("", text)
    if n:
        findings.append(Finding("invisible", n))
    forged = _FORGED.findall(text)
    if forged:
        text = _FORGED.sub(lambda m: "‹" + m.group(0)[1:], text)
        findings.append(Finding("forged_tag", len(forged), forged[0]))
    overrides = _OVERRIDE.findall(text)
    if overrides:
        text = _OVERRIDE.sub(NEUTRALISED, text)
        findings.append(Finding("override", len(overrides), overrides[0]))
    for f in findings:
        log.warning(
            "prompt injection marker in %s: %s x%d%s (neutralised)",
            source,
            f.kind,
            f.count,
            f": {f.sample[:60]!r}" if f.sample else "",
        )
    return Scan(text, findings)


def scan_all(texts: Iterable[str], *, source: str, cap: int) -> list[str]:
    """Each of ``texts`` neutralised (findings logged)."""
    return [scan(t, source=source, cap=cap).text for t in texts]
