"""A run's event log, readable in a terminal, and the tree of child runs below it.

Text from users and models reaches the operator's terminal through here: `escape_terminal()`
shows control characters as escapes, so an ESC sequence in a message cannot retitle, clear
or redraw the terminal.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..logs import (
    ActionCallLog,
    ActionResultLog,
    ErrorLog,
    InputLog,
    Log,
    OutputLog,
    StateLog,
    StepLog,
    SummaryLog,
    ThoughtLog,
    VoiceLog,
)
from ..media import placeholder
from ..store import RunRecord

__all__ = ["render_trace", "render_tree", "RunTree", "escape_terminal"]

# C0 controls but tab and newline, DEL, C1 controls (U+009B is a one-character CSI), and
# the bidirectional overrides and isolates (text that reads differently from how it is stored)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_CONTROL_NL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape_one(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def escape_terminal(text: str, *, newlines: bool = True) -> str:
    """``text`` with control characters written as ``\\x1b``-style escapes, safe to print.

    Tabs are kept, and newlines when ``newlines`` (a one-line field passes False).
    """
    return (_CONTROL if newlines else _CONTROL_NL).sub(_escape_one, text)


RunTree = Mapping[str, Sequence[RunRecord]]
"""Run id -> its child runs, oldest first."""


def _run_line(r: RunRecord) -> str:
    took = f" took {r.duration:.2f}s" if r.duration is not None else ""
    reason = f" ({r.reason})" if r.reason else ""
    return f"run {r.id[:10]} {r.context} {r.state}{reason}  steps {r.steps} tokens {r.tokens}{took}"


def render_tree(root_id: str, tree: RunTree, prefix: str = "") -> list[str]:
    """The runs below ``root_id``, one line each, drawn as a tree."""
    lines = []
    kids = tree.get(root_id, ())
    for i, child in enumerate(kids):
        last = i == len(kids) - 1
        lines.append(f"{prefix}{'└── ' if last else '├── '}{_run_line(child)}")
        lines.extend(render_tree(child.id, tree, prefix + ("    " if last else "│   ")))
    return lines


def _short(value: Any, limit: int = 400) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text) - limit} more)"


def render_trace(
    run: RunRecord, events: Sequence[Log], children: Sequence[RunRecord] = (), *, tree: RunTree | None = None
) -> str:
    """The run's header and events, then its child runs: ``tree`` (all descendants) or ``children``."""
    t0 = run.started
    lines = [
        f"run {run.id}  context {run.context}  state {run.state}" + (f" ({run.reason})" if run.reason else ""),
        f"started {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(run.started))}"
        + (f"  took {run.duration:.2f}s" if run.duration is not None else "")
        + f"  steps {run.steps}  tokens {run.prompt_tokens}+{run.completion_tokens}"
        + (f" ({run.cached_tokens} prompt cached)" if run.cached_tokens else "")
        + (f"  cost {run.cost:.4f}" if run.cost > 0 else "")
        + (f"  parent {run.parent_id}" if run.parent_id else ""),
    ]
    # an output is logged when queued and again when sent (or failed): show its last state
    last_output = {e.id: i for i, e in enumerate(events) if isinstance(e, OutputLog)}
    shown = [e for i, e in enumerate(events) if not isinstance(e, OutputLog) or last_output[e.id] == i]
    # a step entry is written when the step ends but stamped when it began: as a header there
    for e in sorted(shown, key=lambda e: e.ts):
        at = f"+{max(0.0, e.ts - t0):7.3f}s"
        match e:
            case InputLog():
                lines.append(
                    f"{at}  input    [{e.type}{' from ' + e.user if e.user else ''}] {_short(e.formatted or e.content)}"
                )
                for part in e.media:  # files by reference: kind, name, type, size
                    lines.append(f"{at}           {placeholder(part)}")
            case ThoughtLog():
                lines.append(f"{at}  thought  {_short(e.content)}")
            case ActionCallLog():
                lines.append(f"{at}  call #{e.index} {e.name}({_short(e.args)})")
            case ActionResultLog():
                status = "ok" if e.ok else ("DENIED" if e.denied else "ERROR")
                body = e.data if e.ok else e.error
                lines.append(f"{at}  result   {e.name} {status} in {e.duration * 1000:.0f}ms: {_short(body)}")
            case OutputLog():
                status = "sent" if e.sent else f"NOT SENT ({e.error})" if e.error else "pending"
                lines.append(f"{at}  output   [{e.type}] {status}: {_short(e.formatted or e.content)}")
            case StepLog():
                lines.append(
                    f"{at}  step {e.step}   {e.duration * 1000:.0f}ms (first token {e.llm_latency * 1000:.0f}ms), "
                    f"tokens {e.prompt_tokens} prompt + {e.completion_tokens} completion"
                    + (f" ({e.cached_tokens} prompt cached)" if e.cached_tokens else "")
                    + (f", cost {e.cost:.6f}" if e.cost > 0 else "")
                    + (f", answered by {e.model}" if e.model else "")
                )
            case ErrorLog():
                lines.append(f"{at}  error    [{e.where}] {e.message}")
            case StateLog():
                lines.append(f"{at}  state    {e.state}" + (f" ({e.reason})" if e.reason else ""))
            case SummaryLog():
                lines.append(f"{at}  summary  of {e.entries} history entries: {_short(e.content)}")
            case VoiceLog():
                size = f"{e.seconds:.1f}s" + (f", {e.chars} characters" if e.chars else "")
                lines.append(
                    f"{at}  voice    {e.direction} {size} by {e.model}"
                    + (f", cost {e.cost:.6f}" if e.cost > 0 else "")
                    + f": {_short(e.text)}"
                )
    if tree is None:
        tree = {run.id: sorted(children, key=lambda r: r.started)}
    below = render_tree(run.id, tree)
    if below:
        lines.append("child runs:")
        lines.extend(below)
    return "\n".join(lines)
