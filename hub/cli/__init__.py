"""The ``hub`` command: one module per command group."""

from __future__ import annotations

from ._check import check_config
from ._follow import follow_run
from ._main import HEARTBEAT, cmd_check, cmd_runs, main
from ._store import cmd_prune
from ._trace import render_trace

__all__ = [
    "HEARTBEAT",
    "check_config",
    "cmd_check",
    "cmd_prune",
    "cmd_runs",
    "follow_run",
    "main",
    "render_trace",
]
