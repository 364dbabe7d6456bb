"""A platform's quick start, followed as the docs write it (README.md and the platform's page).

The quick-start tests read the section (`doc_section`), its TOML block (`toml_of`,
laid over the shipped ``config.toml`` by `shipped_config`), the variables its ``export``
lines set (`exports`) and the command that starts the fake (`command_line`,
``.venv/bin/python -m hub.testing.<platform> ...``); then they start that fake as a real
process (`start_program`, ended by `end_program`) and a hub on the section's
config with only what a test must change (`quickstart_config`: a temporary data
folder, episodic memory off, the terminal off, and the ports the test picked).
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import tomllib
from pathlib import Path
from typing import Any

from ..config import HubConfig, config_from_dict
from .processes import SOURCE_ROOT

__all__ = [
    "command_line",
    "doc_section",
    "end_program",
    "exports",
    "merged",
    "quickstart_config",
    "shipped_config",
    "start_program",
    "toml_of",
]


def doc_section(source: str, heading: str) -> str:
    """The text under the heading that matches ``heading`` (a regular expression of the
    heading's text, without its ``## ``) in ``source`` (a path from the checkout's root), up
    to the next ``## `` heading."""
    text = (SOURCE_ROOT / source).read_text()
    match = re.search(rf"^## {heading}\n(.*?)^## ", text, re.S | re.M)
    assert match, f"{source} has no section {heading!r}"
    return match.group(1)


def toml_of(text: str) -> dict[str, Any]:
    """The one ```toml block of ``text``, read (its indentation, a list item's, removed)."""
    (block,) = re.findall(r"```toml\n(.*?)```", text, re.S)
    return tomllib.loads(re.sub(r"^ +", "", block, flags=re.M))


def exports(text: str) -> dict[str, str]:
    """The variables the ``export NAME="value"`` lines of ``text`` set."""
    return dict(re.findall(r'^\s*export (\w+)="([^"]*)"', text, re.M))


def command_line(text: str, module: str) -> list[str]:
    """The one command line of ``text`` that runs ``-m module``, split into words."""
    (line,) = [ln.strip() for ln in text.splitlines() if f"-m {module}" in ln]
    return line.split()


def merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` laid over ``base``, tables merged key by key."""
    out = dict(base)
    for key, value in over.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def shipped_config(text: str) -> dict[str, Any]:
    """The shipped ``config.toml`` with the section's TOML over it, as a reader would have it."""
    return merged(tomllib.loads((SOURCE_ROOT / "config.toml").read_text()), toml_of(text))


def quickstart_config(text: str, data: Path, changes: dict[str, Any]) -> HubConfig:
    """The section's config (`shipped_config`, its exported variables) with only what a
    test changes: the data in ``data``, episodic memory off (Chroma takes seconds to start),
    the terminal off (a test has no terminal), and ``changes`` (the ports it picked)."""
    raw = merged(
        shipped_config(text),
        {
            "hub": {"data_dir": str(data), "contexts_dir": str(SOURCE_ROOT / "contexts")},
            "memory": {"episodes": False},
            "extensions": {"cli": {"enabled": False}},
        },
    )
    return config_from_dict(merged(raw, changes), path=data.parent / "config.toml", env=exports(text))


async def start_program(command: list[str]) -> asyncio.subprocess.Process:
    """``command`` (``.venv/bin/python -m ...`` as the docs write it) run with this Python in
    the checkout, its stdin and stdout (stderr with it) piped."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        *command[1:],
        cwd=SOURCE_ROOT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": str(SOURCE_ROOT)},
    )
    assert proc.stdin is not None and proc.stdout is not None
    return proc


async def end_program(proc: asyncio.subprocess.Process, *, terminate: bool = False) -> None:
    """End it: killed, or (``terminate``) asked to end, so that it cleans up after itself
    (killed if it has not within 10 s)."""
    if proc.returncode is None:
        if not terminate:
            proc.kill()
        else:
            proc.terminate()
            try:
                async with asyncio.timeout(10):
                    await proc.wait()
            except TimeoutError:
                proc.kill()
    await proc.wait()
