"""``hub trace --follow RUN_ID`` and ``hub runs --follow``: runs' events as they arrive.

They follow the database (``data/hub.db``), not the HTTP endpoint: it works beside any
running hub, with or without ``[http]``, and sees exactly what ``hub trace`` shows later. A
poll every ``interval`` seconds reads the event rows after the last one printed (the hub
commits its writes within milliseconds). Text is redacted and its control characters
escaped, as ``hub trace`` does (``--raw`` prints them as they are).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from ..config import HubConfig
from ..errors import HubError
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
    to_dict,
)
from ..store import RunRecord, RunStore

__all__ = ["Followed", "follow_run", "follow_runs", "event_line", "INTERVAL"]

INTERVAL = 0.2


@dataclass(slots=True)
class Followed:
    """One step of following: a log entry of ``run``, or (``entry`` None) the run's start or end."""

    run: RunRecord
    entry: Log | None
    what: str  # "started", "entry" or "ended"

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "kind": {"started": "run_started", "ended": "run_ended"}.get(
                self.what, self.entry.kind if self.entry else ""
            )
        }
        d.update(run_id=self.run.id, context=self.run.context)
        if self.entry is not None:
            d["entry"] = to_dict(self.entry)
        if self.what == "ended":
            d.update(
                state=str(self.run.state),
                reason=self.run.reason,
                steps=self.run.steps,
                prompt_tokens=self.run.prompt_tokens,
                completion_tokens=self.run.completion_tokens,
            )
        return d


async def follow_run(runs: RunStore, run_id: str, *, interval: float = INTERVAL) -> AsyncIterator[Followed]:
    """The run's entries, those already recorded first, until its end (then ``ended``)."""
    seq = 0
    while True:
        run = await runs.get(run_id)
        if run is None:
            return
        for n, entry in await runs.events_after(run_id, seq):
            seq = n  # the cursor: the last entry shown
            yield Followed(run, entry, "entry")
        if run.ended is not None:
            for _, entry in await runs.events_after(run_id, seq):  # written just before the row's end
                yield Followed(run, entry, "entry")
            yield Followed(run, None, "ended")
            return
        await asyncio.sleep(interval)


async def follow_runs(
    runs: RunStore, *, context: str | None = None, since: float | None = None, interval: float = INTERVAL
) -> AsyncIterator[Followed]:
    """Every run that starts from ``since`` (default: now) on, and those running then: their
    start, entries and end, interleaved as they arrive. Runs until cancelled."""
    since = time.time() if since is None else since
    cursors: dict[str, int] = {}
    done: set[str] = set()
    while True:
        for run in await runs.active(since=since, context=context):
            if run.id in done:
                continue
            if run.id not in cursors:
                cursors[run.id] = 0
                yield Followed(run, None, "started")
            for seq, entry in await runs.events_after(run.id, cursors[run.id]):
                cursors[run.id] = seq
                yield Followed(run, entry, "entry")
            if run.ended is not None:
                done.add(run.id)
                del cursors[run.id]
                yield Followed(run, None, "ended")
        await asyncio.sleep(interval)


def _short(value: Any, limit: int = 400) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text) - limit} more)"


def event_line(f: Followed, *, with_run: bool = True) -> str:
    """One line for one step of following (what ``hub trace`` shows for the entry)."""
    run, e = f.run, f.entry
    head = time.strftime("%H:%M:%S", time.localtime(e.ts if e is not None else (run.ended or run.started)))
    head += f"  {run.id[:10]}" if with_run else ""
    if f.what == "started":
        return f"{head}  started  {run.context}" + (f" by {run.user}" if run.user else "")
    if f.what == "ended":
        reason = f" ({run.reason})" if run.reason else ""
        return f"{head}  ended    {run.state}{reason}  steps {run.steps}  tokens {run.prompt_tokens}+{run.completion_tokens}"
    match e:
        case InputLog():
            return f"{head}  input    [{e.type}{' from ' + e.user if e.user else ''}] {_short(e.content)}"
        case ThoughtLog():
            return f"{head}  thought  {_short(e.content)}"
        case ActionCallLog():
            return f"{head}  call #{e.index} {e.name}({_short(e.args)})"
        case ActionResultLog():
            status = "ok" if e.ok else ("DENIED" if e.denied else "ERROR")
            return f"{head}  result   {e.name} {status} in {e.duration * 1000:.0f}ms: {_short(e.data if e.ok else e.error)}"
        case OutputLog():
            status = "sent" if e.sent else f"NOT SENT ({e.error})" if e.error else "pending"
            return f"{head}  output   [{e.type}] {status}: {_short(e.content)}"
        case StepLog():
            by = f", answered by {e.model}" if e.model else ""
            return (
                f"{head}  step {e.step}   {e.duration * 1000:.0f}ms, "
                f"tokens {e.prompt_tokens} prompt + {e.completion_tokens} completion{by}"
            )
        case ErrorLog():
            return f"{head}  error    [{e.where}] {e.message}"
        case StateLog():
            return f"{head}  state    {e.state}" + (f" ({e.reason})" if e.reason else "")
        case SummaryLog():
            return f"{head}  summary  of {e.entries} history entries: {_short(e.content)}"
        case VoiceLog():
            return f"{head}  voice    {e.direction} {e.seconds:.1f}s by {e.model}: {_short(e.text)}"
    return f"{head}  {getattr(e, 'kind', '?')}"


async def print_followed(
    source: AsyncIterator[Followed], *, as_json: bool, clean: Callable[[str], str], with_run: bool = True
) -> None:
    """Print each step as it arrives (flushed: the reader may be a pipe)."""
    async for f in source:
        if as_json:  # ASCII: no control character reaches the terminal
            print(clean(json.dumps(f.to_json(), default=str)), flush=True)
        else:
            print(clean(event_line(f, with_run=with_run)), flush=True)


async def cmd_follow(config: HubConfig, args: argparse.Namespace) -> int:
    """``hub runs --follow`` (every run from now on) or ``hub trace --follow RUN_ID``."""
    from ..redact import Redactor
    from ..store import open_stores
    from ._trace import escape_terminal

    stores = open_stores(config, missing="no runs yet")
    redactor = Redactor.from_config(config)

    def clean(text: str) -> str:
        text = redactor.redact(text)
        return text if args.raw or args.json else escape_terminal(text)

    async with stores:
        runs = stores.runs
        if args.command == "runs":
            # "from now" is fixed before the banner: a run started once it is shown is followed
            since = time.time()
            if not args.json:
                print(
                    clean(f"following runs{' of ' + args.context if args.context else ''} (Ctrl-C stops)"), flush=True
                )
            await print_followed(follow_runs(runs, context=args.context, since=since), as_json=args.json, clean=clean)
            return 0
        run = await runs.find(args.run_id)
        if run is None:
            raise HubError(f"no run matches {args.run_id!r} (give more characters if several do)")
        if not args.json:
            print(
                clean(f"run {run.id}  context {run.context}" + (f"  parent {run.parent_id}" if run.parent_id else "")),
                flush=True,
            )
        await print_followed(follow_run(runs, run.id), as_json=args.json, clean=clean, with_run=False)
    return 0
