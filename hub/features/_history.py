"""Search over past messages: every run's messages are kept in the
`HistoryStore` when it ends (`HistoryIndex`, a plugin), and with
``[agent] history_search = true`` the model gets the built-in action ``search_history``.

Each message is filed under one person: what they wrote, and the bot's answers in the runs
they started. ``search_history`` searches only the person the bot is talking to (the run's
user), so in a group it finds the asker's own messages and the answers to them, never another
member's. Inputs nobody wrote (schedules, reminders, webhooks, child runs) are not kept; what
is kept is redacted as the run log is. `forget_history()` is what ``hub memory forget``
calls to take a person out of the index.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field

from ..definitions import Action, Extension, RunContext, RunResult
from ..engine import Plugin
from ..logs import InputLog, OutputLog
from ..redact import Redactor
from ..store import HistoryEntry, HistoryStore
from ._background import BACKGROUND_TRIGGERS

__all__ = ["HistoryIndex", "forget_history"]

log = logging.getLogger("hub.features")

MAX_HITS = 20


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


class _SearchHistory(BaseModel):
    query: str = Field(description="words to look for in this person's past messages and your answers to them")
    limit: int = Field(8, ge=1, le=MAX_HITS, description="how many matches, best first")


class HistoryIndex(Plugin):
    """Keeps each run's messages (``after_run``) and offers ``search_history`` (`extension()`)."""

    name = "history"

    def __init__(self, store: HistoryStore, *, redactor: Redactor | None = None) -> None:
        self.store = store
        self.redactor = redactor

    def _clean(self, text: str) -> str:
        return self.redactor.redact(text) if self.redactor else text

    def entries(self, ctx: RunContext) -> list[HistoryEntry]:
        """The messages of a run: each person's inputs, and the replies sent, filed under the run's user."""
        out: list[HistoryEntry] = []
        run_id, context = ctx.run.id, ctx.context.id
        for e in ctx.logs:
            if isinstance(e, InputLog) and e.user and e.type not in BACKGROUND_TRIGGERS:
                text = _text(e.formatted) or _text(e.content)
                if text.strip():
                    out.append(HistoryEntry(run_id, context, e.user, "user", self._clean(text), e.ts))
            elif isinstance(e, OutputLog) and e.sent and ctx.run.user:
                text = _text(e.formatted) or _text(e.content)
                if text.strip():
                    out.append(HistoryEntry(run_id, context, ctx.run.user, "bot", self._clean(text), e.ts))
        return out

    async def after_run(self, result: RunResult, run: RunContext | None) -> None:
        if run is None:
            return
        entries = self.entries(run)
        if entries:
            await self.store.add(entries)

    def extension(self) -> Extension:
        """The ``search_history`` action."""

        async def search_history(args: _SearchHistory, ctx: RunContext) -> dict[str, Any]:
            if not ctx.user:
                return {"matches": [], "note": "this conversation has no person to search the messages of"}
            hits = await self.store.search(ctx.user, args.query, limit=args.limit)
            return {
                "matches": [
                    {
                        "conversation": h.context,
                        "date": datetime.fromtimestamp(h.ts, UTC).strftime("%Y-%m-%d %H:%M UTC"),
                        "from": "the person" if h.role == "user" else "you",
                        "snippet": h.snippet,
                    }
                    for h in hits
                ]
            }

        action = Action(
            name="search_history",
            handler=search_history,
            schema=_SearchHistory,
            description="Search the past messages of the person you are talking to, and your answers to them, "
            "in every conversation: ranked snippets with dates and the conversation.",
        )
        return Extension(name="hub.history", actions=[action], description="Built-in action: search_history.")


async def forget_history(store: HistoryStore, user: str, *, platform: str | None = None) -> int:
    """Take ``user`` out of the message index (``hub memory forget --user [--platform]``);
    returns how many messages went."""
    return await store.forget(user, platform=platform)
