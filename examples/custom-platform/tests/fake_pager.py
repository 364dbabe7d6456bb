"""A loopback fake of Pager's API for hub_pager's tests (hub.testing.FakeServer): the messages
people wrote (``push``), the ones the bot sent (``sent``), the token checked on every request,
and failures injected with ``fail_next("send", status=...)``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from hub.testing import Failure, FakeServer, Recorded


@dataclass
class PagerState:
    requests: list[Recorded] = field(default_factory=list)
    sent: list[dict[str, Any]] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)


class FakePager(FakeServer):
    def __init__(self, token: str) -> None:
        super().__init__()
        self.state = PagerState()
        self.token = token

    @property
    def api_url(self) -> str:
        return f"{self.base_url}/api"

    def push(self, room: str, text: str, *, user: str = "ann") -> int:
        """A person writes in ``room``; returns the message's id."""
        mid = len(self.state.messages) + 1
        self.state.messages.append({"id": mid, "room": room, "text": text, "user": user, "bot": False})
        self._notify()
        return mid

    def _build_app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/api/messages", self._list)
        app.router.add_post("/api/messages", self._send)
        return app

    def _authorised(self, request: web.Request) -> bool:
        return request.headers.get("Authorization") == f"Bearer {self.token}"

    async def _list(self, request: web.Request) -> web.Response:
        self.state.requests.append(Recorded("list", "GET", request.path, dict(request.query), dict(request.headers)))
        if not self._authorised(request):
            return web.json_response({"error": "bad token"}, status=401)
        after = int(request.query.get("after", 0))
        return web.json_response([m for m in self.state.messages if m["id"] > after])

    async def _send(self, request: web.Request) -> web.Response:
        body = await request.json()
        rec = Recorded("send", "POST", request.path, body, dict(request.headers))
        self.state.requests.append(rec)
        failure = self._take_failure("send")
        if not self._authorised(request):
            rec.status, error = 401, "bad token"
        elif failure:
            rec.status, error = failure.status, "injected"
        elif len(body["text"]) > 1000:
            rec.status, error = 400, "text over 1000 characters"
        else:
            rec.status, error = 200, ""
        if error:
            self._notify()
            retry = {"Retry-After": str(failure.retry_after or 1)} if failure and rec.status == 429 else {}
            return web.json_response({"error": error}, status=rec.status, headers=retry)
        message = {**body, "id": 10_000 + len(self.state.sent), "bot": True}
        self.state.sent.append(message)
        self._notify()
        return web.json_response(message)
