"""A platform's quick start, followed as the docs write it (README.md and the platform's page).

The quick-start tests read the section (`doc_section`), its TOML block (`toml_of`,
laid over the shipped ``config.toml`` by `shipped_config`), the variables its ``export``
lines set (`exports`), the variable a ``${NAME}`` value reads (`variable_of`) and the
command that starts the fake (`command_line`, ``.venv/bin/python -m hub.testing.<platform>
...``); then they start that fake as a real process (`start_program`, ended by
`end_program`) or in the test, and a hub on the section's config with only what a test must
change (`quickstart_config`: a temporary data folder, episodic memory off, the terminal off,
and the fake's address, ports or secrets the test picked). `Finished` waits for the answer of
a quick start that only logs it (dry run).
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
from ..definitions import RunResult
from ..engine import Plugin
from .processes import SOURCE_ROOT, end_program

__all__ = [
    "Finished",
    "command_line",
    "doc_section",
    "end_program",
    "exports",
    "merged",
    "quickstart_config",
    "shipped_config",
    "start_program",
    "toml_of",
    "variable_of",
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
    """The variables the ``export NAME="value"`` lines of ``text`` set (one line may set
    several: ``export A="a" B="b"``)."""
    lines = [line for line in text.splitlines() if line.strip().startswith("export ")]
    return dict(re.findall(r'(\w+)="([^"]*)"', "\n".join(lines)))


def variable_of(value: str) -> str:
    """The name of the environment variable a config value of the form ``${NAME}`` reads
    (an assertion error if the value is not that: the secret is written in the config)."""
    match = re.fullmatch(r"\$\{(\w+)\}", value)
    assert match, f"{value!r} does not come from the environment (${{NAME}})"
    return match.group(1)


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


def quickstart_config(text: str, data: Path, changes: dict[str, Any], env: dict[str, str] | None = None) -> HubConfig:
    """The section's config (`shipped_config`, its exported variables) with only what a
    test changes: the data in ``data``, episodic memory off (Chroma takes seconds to start),
    the terminal off (a test has no terminal), ``changes`` (the fake's address, the ports it
    picked) and ``env`` over the exported variables (the fake's secrets, where the reader
    pastes theirs)."""
    raw = merged(
        shipped_config(text),
        {
            "hub": {"data_dir": str(data), "contexts_dir": str(SOURCE_ROOT / "contexts")},
            "memory": {"episodes": False},
            "extensions": {"cli": {"enabled": False}},
        },
    )
    return config_from_dict(
        merged(raw, changes), path=data.parent / "config.toml", env={**exports(text), **(env or {})}
    )


class Finished(Plugin):
    """A plugin that keeps each run's result (`results`) and sets `done` when one ends: the
    wait of a quick start whose answer is logged, not sent (dry run)."""

    name = "finished"

    def __init__(self) -> None:
        self.results: list[RunResult] = []
        self.done = asyncio.Event()

    async def after_run(self, result: RunResult, ctx: Any) -> None:
        self.results.append(result)
        self.done.set()


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
