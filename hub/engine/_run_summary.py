"""Who and what of a run, on its row: the sender's display name and @username (from the input's
``meta``, as the platform gave them) and one-line previews of the message and of the reply.

The dashboard lists and searches runs and conversations by these (hub/http/dashboard), without
reading each run's log; the run store redacts them as it redacts the log (hub/store/_redacting.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..logs import InputLog, OutputLog
from ..store import RunRecord, preview

__all__ = ["describe_input", "note_reply"]


def describe_input(record: RunRecord, entry: InputLog | None) -> RunRecord:
    """Fill ``record``'s user_name, user_handle and message from the input it starts for."""
    if entry is None:
        return record
    meta: dict[str, Any] = entry.meta if isinstance(entry.meta, dict) else {}
    name, handle = meta.get("user_name"), meta.get("user_handle")
    record.user_name = preview(name, 100) if isinstance(name, str) and name.strip() else None
    record.user_handle = preview(handle, 100).removeprefix("@") if isinstance(handle, str) and handle.strip() else None
    record.message = preview(entry.formatted or entry.content) if entry.content not in (None, "") else ""
    return record


def note_reply(record: RunRecord, logs: Iterable[Any]) -> None:
    """``record.reply``: the last reply the run sent (unchanged when it sent none)."""
    for e in reversed(list(logs)):
        if isinstance(e, OutputLog) and e.sent:
            record.reply = preview(e.formatted or e.content)
            return
