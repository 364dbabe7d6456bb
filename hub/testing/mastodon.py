"""A loopback fake of a Mastodon instance's client API, enough for Mastodon.py 2.3 to drive it:
``GET /api/v1/instance`` and ``/api/v2/instance`` (the character limit and the characters
reserved per URL), ``GET /api/v1/accounts/verify_credentials``, ``GET /api/v1/notifications``
(newest first; ``since_id``, ``min_id``, ``max_id``, ``limit``, ``types[]``), ``POST
/api/v1/statuses`` (``Idempotency-Key`` honoured: a repeated key answers the status it made,
posts nothing new; over the limit 422 as Mastodon answers) and the streaming API's ``GET
/api/v1/streaming/user`` (server-sent events: ``event: notification``).

Rate limits are in every answer's ``X-RateLimit-*`` headers; ``fail_next("POST /api/v1/statuses",
status=429)`` answers 429 with them spent, ``status=503`` a server error. `FakeMastodon.mention()`
adds a mention (and streams it to the connected clients); `drop_streams()` ends the streams
from the server's side.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from .fakes import FakeServer, Recorded

__all__ = ["FakeMastodon", "MastodonState", "mastodon_length"]

_URL = re.compile(r"https?://\S+")
_REMOTE_MENTION = re.compile(r"(^|[^/\w])@(([a-z0-9_]+)@[a-z0-9\.\-]+[a-z0-9]+)", re.IGNORECASE)


def mastodon_length(text: str, *, per_url: int = 23) -> int:
    """Characters as Mastodon counts them: graphemes, a URL as ``per_url``, a remote mention as
    its local part (an independent count, to check the extension's)."""
    import grapheme

    counted = _REMOTE_MENTION.sub(r"\1@\3", _URL.sub("x" * per_url, text))
    return int(grapheme.length(counted))


@dataclass
class MastodonState:
    bot_id: str = "100"
    username: str = "hubbot"
    max_characters: int = 500
    per_url: int = 23
    requests: list[Recorded] = field(default_factory=list)
    sent: list[dict[str, Any]] = field(default_factory=list)
    failures: list[Any] = field(default_factory=list)
    notifications: list[dict[str, Any]] = field(default_factory=list)
    statuses: dict[str, dict[str, Any]] = field(default_factory=dict)
    by_key: dict[str, str] = field(default_factory=dict)


def _when(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _account(aid: str, username: str, *, bot: bool = False) -> dict[str, Any]:
    return {
        "id": aid,
        "username": username,
        "acct": username,
        "display_name": username.title(),
        "bot": bot,
        "url": f"https://mastodon.example/@{username}",
        "created_at": _when(0),
        "note": "",
        "avatar": "",
        "header": "",
        "followers_count": 0,
        "following_count": 0,
        "statuses_count": 0,
        "locked": False,
        "emojis": [],
        "fields": [],
    }


class FakeMastodon(FakeServer):
    """A Mastodon instance on 127.0.0.1 (``base_url``): one bot account, mentions, statuses."""

    def __init__(self, *, max_characters: int = 500, per_url: int = 23) -> None:
        super().__init__()
        self.state = MastodonState(max_characters=max_characters, per_url=per_url)
        self._ids = itertools.count(1000)
        self._streams: list[asyncio.Queue[dict[str, Any] | None]] = []

    def _new_id(self) -> str:
        return str(next(self._ids))

    # -- what the test does ------------------------------------------------------------------

    def mention(
        self,
        text: str,
        *,
        username: str = "alice",
        account_id: str = "42",
        bot: bool = False,
        in_reply_to: str | None = None,
        spoiler_text: str = "",
        visibility: str = "public",
    ) -> dict[str, Any]:
        """A status from ``username`` that mentions the bot; its mention notification is added
        and streamed. Returns the notification."""
        status = self._status(
            f"<p>@{self.state.username} {text}</p>",
            _account(account_id, username, bot=bot),
            in_reply_to=in_reply_to,
            spoiler_text=spoiler_text,
            visibility=visibility,
        )
        status["mentions"] = [
            {"id": self.state.bot_id, "username": self.state.username, "acct": self.state.username, "url": ""}
        ]
        note = {
            "id": self._new_id(),
            "type": "mention",
            "created_at": _when(time.time()),
            "account": status["account"],
            "status": status,
        }
        self.state.notifications.append(note)
        for q in self._streams:
            q.put_nowait(note)
        self._notify()
        return note

    def drop_streams(self) -> None:
        """End every open stream from the server's side (a restarted instance)."""
        for q in self._streams:
            q.put_nowait(None)

    @property
    def streams(self) -> int:
        """Streams open now."""
        return len(self._streams)

    async def wait_sent(self, n: int, timeout: float = 5.0) -> list[dict[str, Any]]:
        await self.wait_for(lambda: len(self.state.sent) >= n, timeout)
        return self.state.sent

    # -- the API ---------------------------------------------------------------------------

    def _status(
        self,
        content: str,
        account: dict[str, Any],
        *,
        in_reply_to: str | None,
        spoiler_text: str = "",
        visibility: str = "public",
    ) -> dict[str, Any]:
        sid = self._new_id()
        status = {
            "id": sid,
            "uri": f"https://mastodon.example/statuses/{sid}",
            "url": f"https://mastodon.example/@{account['username']}/{sid}",
            "created_at": _when(time.time()),
            "account": account,
            "content": content,
            "visibility": visibility,
            "sensitive": bool(spoiler_text),
            "spoiler_text": spoiler_text,
            "in_reply_to_id": in_reply_to,
            "in_reply_to_account_id": None,
            "media_attachments": [],
            "mentions": [],
            "tags": [],
            "emojis": [],
            "reblogs_count": 0,
            "favourites_count": 0,
            "replies_count": 0,
            "reblog": None,
        }
        self.state.statuses[sid] = status
        return status

    def _build_app(self) -> web.Application:
        app = web.Application()
        routes = [
            ("GET", "/api/v1/instance", self._instance_v1),
            ("GET", "/api/v2/instance", self._instance_v2),
            ("GET", "/api/v2/instance/", self._instance_v2),
            ("GET", "/api/v1/accounts/verify_credentials", self._me),
            ("GET", "/api/v1/notifications", self._notifications),
            ("POST", "/api/v1/statuses", self._post_status),
            ("GET", "/api/v1/statuses/{id}/context", self._context),
        ]
        for method, path, handler in routes:
            app.router.add_route(method, path, self._wrap(f"{method} {path}", handler))
        app.router.add_get("/api/v1/streaming/user", self._stream)
        return app

    async def _before_cleanup(self) -> None:
        self.drop_streams()

    def _wrap(self, name: str, handler: Any) -> Any:
        async def wrapped(request: web.Request) -> web.StreamResponse:
            params: dict[str, Any] = dict(request.query)
            for key in set(request.query):
                if key.endswith("[]"):
                    params[key] = request.query.getall(key)
            if request.method == "POST":
                if request.content_type == "application/json":
                    params.update(await request.json())
                else:
                    params.update(dict(await request.post()))
            rec = self._record_request(name, request, params)
            failure = self._take_failure(name)
            if failure is not None:
                rec.status = failure.status
                response = web.json_response({"error": failure.description or "failed"}, status=failure.status)
                if failure.status == 429:
                    self._limits(response, remaining=0, reset_in=failure.retry_after or 1)
                self._notify()
                return response
            if request.headers.get("Authorization") != "Bearer test-token":
                rec.status = 401
                return web.json_response({"error": "The access token is invalid"}, status=401)
            response = await handler(request, params)
            rec.status = response.status
            self._limits(response, remaining=299, reset_in=300)
            self._notify()
            return response

        return wrapped

    @staticmethod
    def _limits(response: web.StreamResponse, *, remaining: int, reset_in: float) -> None:
        response.headers["X-RateLimit-Limit"] = "300"
        response.headers["X-RateLimit-Remaining"] = str(remaining)
        response.headers["X-RateLimit-Reset"] = _when(time.time() + reset_in)

    async def _instance_v1(self, request: web.Request, params: dict[str, Any]) -> web.Response:
        return web.json_response(
            {"uri": "mastodon.example", "title": "Fake", "version": "4.3.0", "urls": {}, "description": ""}
        )

    async def _instance_v2(self, request: web.Request, params: dict[str, Any]) -> web.Response:
        s = self.state
        return web.json_response(
            {
                "domain": "mastodon.example",
                "title": "Fake",
                "version": "4.3.0",
                "configuration": {
                    "urls": {},
                    "statuses": {
                        "max_characters": s.max_characters,
                        "max_media_attachments": 4,
                        "characters_reserved_per_url": s.per_url,
                    },
                },
            }
        )

    async def _me(self, request: web.Request, params: dict[str, Any]) -> web.Response:
        return web.json_response(_account(self.state.bot_id, self.state.username, bot=True))

    async def _notifications(self, request: web.Request, params: dict[str, Any]) -> web.Response:
        notes = list(self.state.notifications)
        types = params.get("types[]")
        if types:
            notes = [n for n in notes if n["type"] in types]
        limit = min(int(params.get("limit", 40)), 80)
        if "max_id" in params:
            notes = [n for n in notes if int(n["id"]) < int(params["max_id"])]
        if "min_id" in params:  # the page just after min_id (oldest first), shown newest first
            notes = [n for n in notes if int(n["id"]) > int(params["min_id"])][:limit]
        else:
            if "since_id" in params:
                notes = [n for n in notes if int(n["id"]) > int(params["since_id"])]
            notes = notes[-limit:]
        return web.json_response(list(reversed(notes)))

    async def _context(self, request: web.Request, params: dict[str, Any]) -> web.Response:
        statuses = self.state.statuses
        sid = request.match_info["id"]
        if sid not in statuses:
            return web.json_response({"error": "Record not found"}, status=404)
        ancestors: list[dict[str, Any]] = []
        parent = statuses[sid].get("in_reply_to_id")
        while parent and parent in statuses:
            ancestors.insert(0, statuses[parent])
            parent = statuses[parent].get("in_reply_to_id")
        return web.json_response({"ancestors": ancestors, "descendants": []})

    async def _post_status(self, request: web.Request, params: dict[str, Any]) -> web.Response:
        s = self.state
        key = request.headers.get("Idempotency-Key")
        if key and key in s.by_key:  # Mastodon keeps a key for an hour: the same status again
            return web.json_response(s.statuses[s.by_key[key]])
        text = str(params.get("status", ""))
        spoiler = str(params.get("spoiler_text", ""))
        n = mastodon_length(text, per_url=s.per_url) + mastodon_length(spoiler, per_url=s.per_url)
        if n > s.max_characters:
            return web.json_response({"error": "Validation failed: Text character limit of 500 exceeded"}, status=422)
        reply = params.get("in_reply_to_id")
        status = self._status(
            text,
            _account(s.bot_id, s.username, bot=True),
            in_reply_to=str(reply) if reply else None,
            spoiler_text=spoiler,
            visibility=str(params.get("visibility") or "public"),
        )
        if key:
            s.by_key[key] = status["id"]
        s.sent.append(
            {
                "id": status["id"],
                "text": text,
                "in_reply_to": status["in_reply_to_id"],
                "visibility": status["visibility"],
                "spoiler_text": spoiler,
                "idempotency_key": key,
            }
        )
        return web.json_response(status)

    async def _stream(self, request: web.Request) -> web.StreamResponse:
        self._record_request("GET /api/v1/streaming/user", request, {})
        if request.headers.get("Authorization") != "Bearer test-token":
            return web.json_response({"error": "The access token is invalid"}, status=401)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        q: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._streams.append(q)
        self._notify()
        try:
            await response.write(b":)\n\n")
            while (note := await q.get()) is not None:
                await response.write(f"event: notification\ndata: {json.dumps(note)}\n\n".encode())
        finally:
            self._streams.remove(q)
            self._notify()
        return response
