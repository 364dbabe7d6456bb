"""The dashboard's chat panel: the operator talks to the bot in a conversation of their own,
``web:chat:<session>``, and watches the reply as the model writes it.

`web_chat_extension()` is the conversation's definition (context ``web:chat``, live output
``web:reply``), registered by the hub when the dashboard is on. A message posted at
``/ui/chat`` is submitted as any platform's input (the persona, tools and budgets of that
conversation apply: the quickest way to try a persona edit or a new MCP tool). The reply
reaches the browser through the run events (hub/events.py), as ``GET /events`` streams them,
on ``/ui/chat/events``, a Server-Sent Events stream behind the dashboard's session: the
partial output as it is written, then the whole output once delivered, then the run's end.
``static/chat.js`` draws them; without it the page still works (post, then the page shows the
transcript from the run store).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any

from aiohttp import web
from pydantic import BaseModel, Field

from ...definitions import CommandCall, Context, Extension, output
from ...engine import LiveText
from ...events import event_dict
from ...logs import InputLog, OutputLog, StateLog

__all__ = ["CHAT", "REPLY", "WebChatArgs", "web_chat_extension", "ChatPanel"]

log = logging.getLogger("hub.http.dashboard")

CHAT = "web:chat"
REPLY = "web:reply"
OPERATOR = "operator"
"""The user id the chat panel's messages carry (the dashboard's login is the operator's)."""
TRANSCRIPT_RUNS = 30
"""The most recent runs of the conversation its page shows."""
MAX_MESSAGE = 8000
KINDS = ("input", "output", "output_partial", "run_ended")
KEEPALIVE = 15.0


class WebChatArgs(BaseModel):
    session: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")


def web_chat_extension() -> Extension:
    chat: Context[WebChatArgs, dict[str, Any]] = Context(
        type=CHAT,
        schema=WebChatArgs,
        key=lambda a: a.session,
        description="The dashboard's chat panel: the operator trying the bot.",
        reply_output=REPLY,
    )

    @output(type=REPLY, description="Answer the operator in the dashboard's chat panel.", context=CHAT, live=True)
    async def reply(content: LiveText, ctx: Any) -> None:
        # the browser reads the reply from the run events as it is written, and the run's log
        # keeps the whole of it: delivering it is reading it to its end
        async for _ in content:
            pass

    return Extension(name="web", contexts=[chat], outputs=[reply], description="The dashboard's chat panel.")


class ChatPanel:
    """The chat panel's routes, for one dashboard. ``clean`` is how the dashboard cleans what
    it shows (secrets masked, server paths shortened)."""

    def __init__(self, hub: Any, clean: Callable[[str], str]) -> None:
        self.hub = hub
        self.clean = clean
        self._streams: set[Any] = set()

    def close(self) -> None:
        for stream in tuple(self._streams):
            stream.close()

    @staticmethod
    def context_of(chat_id: str) -> str:
        return f"{CHAT}:{chat_id}"

    @property
    def available(self) -> bool:
        return CHAT in self.hub.contexts

    async def transcript(self, chat_id: str) -> list[dict[str, Any]]:
        """What was said in the conversation, oldest first, from the run store."""
        runs = await self.hub.runs.page(limit=TRANSCRIPT_RUNS, context=self.context_of(chat_id))
        lines: list[dict[str, Any]] = []
        for run in reversed(runs):
            for e in await self.hub.runs.events(run.id):
                if isinstance(e, InputLog):
                    lines.append({"role": "user", "id": f"in-{e.id}", "text": _text(e.content)})
                elif isinstance(e, OutputLog) and (e.sent or e.error):
                    text = _text(e.content) if e.sent else f"not sent: {e.error}"
                    lines.append({"role": "bot", "id": f"out-{e.id}", "text": text, "run": run.id})
                elif isinstance(e, StateLog) and e.state not in ("completed", "running"):
                    why = f": {e.reason}" if e.reason else ""
                    lines.append({"role": "note", "id": f"end-{run.id}", "text": f"run {e.state}{why}", "run": run.id})
        return lines

    async def send(self, chat_id: str, text: str) -> None:
        """Hand ``text`` to the hub as the operator's message; ``/name args`` naming one of the
        hub's chat commands goes as that command, as a platform sends it."""
        name, _, rest = text[1:].partition(" ") if text.startswith("/") else ("", "", "")
        command = CommandCall(name.lower(), rest.strip()) if name.lower() in self.hub.commands.names() else None
        await self.hub.submit(
            CHAT,
            {"session": chat_id},
            text,
            type="web:message",
            user=OPERATOR,
            meta={"user_name": "Operator (dashboard)", "user_handle": None},
            command=command,
        )

    async def events(self, request: web.Request, chat_id: str) -> web.StreamResponse:
        """The conversation's run events as Server-Sent Events, as ``GET /events`` sends them."""
        stream = self.hub.events(context=self.context_of(chat_id), kinds=KINDS)
        self._streams.add(stream)
        try:
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"})
            await resp.prepare(request)
            await resp.write(b": the chat panel's events\n\n")
            it = aiter(stream)
            try:
                while True:
                    try:
                        event = await asyncio.wait_for(anext(it), KEEPALIVE)
                    except TimeoutError:
                        await resp.write(b": keepalive\n\n")
                        continue
                    except StopAsyncIteration:
                        break
                    body: Any = json.loads(json.dumps(event_dict(event), default=str))
                    if self.hub.redactor:
                        body = self.hub.redactor.redact_tree(body)
                    data = self.clean(json.dumps(body, ensure_ascii=False))
                    await resp.write(f"event: {event.kind}\ndata: {data}\n\n".encode())
                await resp.write_eof()
            except ConnectionError:  # the browser left (a page change, a closed tab)
                pass
            return resp
        finally:
            stream.close()
            self._streams.discard(stream)


def _text(content: Any) -> str:
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False, default=str)
