"""A loopback fake of a Bluesky PDS's XRPC API, enough for the atproto SDK 0.0.73
(``AsyncClient(base_url=...)``) to drive it: ``com.atproto.server.createSession`` (an app
password), ``com.atproto.server.refreshSession`` (the refresh token; ``revoke()`` makes it
answer ``ExpiredToken`` as a revoked app password does), ``app.bsky.actor.getProfile``,
``app.bsky.notification.listNotifications`` (newest first, ``cursor`` pages back) and
``com.atproto.repo.createRecord`` (a post: its text checked at 300 graphemes, as the AppView
does). Access tokens are JWTs whose ``exp`` the test sets (``access_ttl``): a short one makes
the SDK refresh its session by itself.
"""

from __future__ import annotations

import base64
import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from .fakes import FakeServer, Recorded

__all__ = ["FakeBluesky", "BlueskyState", "BOT_DID", "BOT_HANDLE", "APP_PASSWORD"]

BOT_DID = "did:plc:hubbot000000000000000000"
BOT_HANDLE = "hub.bsky.social"
APP_PASSWORD = "abcd-efgh-ijkl-mnop"


def _b64(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def _jwt(scope: str, ttl: float, n: int) -> str:
    header = {"typ": "at+jwt" if scope != "refresh" else "refresh+jwt", "alg": "ES256K"}
    payload = {
        "scope": f"com.atproto.{scope}",
        "sub": BOT_DID,
        "iat": int(time.time()),
        "exp": int(time.time() + ttl),
        "jti": str(n),
    }
    return f"{_b64(header)}.{_b64(payload)}.c2ln"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())


@dataclass
class BlueskyState:
    requests: list[Recorded] = field(default_factory=list)
    sent: list[dict[str, Any]] = field(default_factory=list)
    failures: list[Any] = field(default_factory=list)
    notifications: list[dict[str, Any]] = field(default_factory=list)
    access: set[str] = field(default_factory=set)
    refresh: set[str] = field(default_factory=set)
    revoked: bool = False
    refreshes: int = 0


class FakeBluesky(FakeServer):
    """A PDS on 127.0.0.1 (``base_url``) with the bot's account and users who mention it."""

    def __init__(self, *, access_ttl: float = 7200.0) -> None:
        super().__init__()
        self.state = BlueskyState()
        self.access_ttl = access_ttl
        self._n = itertools.count(1)

    def revoke(self) -> None:
        """The app password is revoked: every token stops working, a refresh is refused."""
        self.state.revoked = True
        self.state.access.clear()
        self.state.refresh.clear()

    def mention(
        self, text: str, *, handle: str = "alice.bsky.social", reply_to: tuple[str, str] | None = None
    ) -> dict[str, Any]:
        """A post by ``handle`` that mentions the bot (``reply_to``: the (root uri, parent uri)
        it replies to, a ``reply`` notification then). Returns the notification."""
        n = next(self._n)
        did = f"did:plc:{handle.split('.')[0]:0<24}"
        uri, cid = f"at://{did}/app.bsky.feed.post/3k{n:010d}", f"bafyrei{n:052d}"
        record: dict[str, Any] = {"$type": "app.bsky.feed.post", "text": text, "createdAt": _now()}
        if reply_to is not None:
            root, parent = reply_to
            record["reply"] = {
                "root": {"uri": root, "cid": "bafyreiroot"},
                "parent": {"uri": parent, "cid": "bafyreiparent"},
            }
        note = {
            "uri": uri,
            "cid": cid,
            "author": {"did": did, "handle": handle, "displayName": handle.split(".")[0].title()},
            "reason": "reply" if reply_to else "mention",
            "record": record,
            "isRead": False,
            "indexedAt": _now(),
            "labels": [],
        }
        self.state.notifications.append(note)
        self._notify()
        return note

    def _build_app(self) -> web.Application:
        app = web.Application()
        for name, method, handler in [
            ("com.atproto.server.createSession", "POST", self._create_session),
            ("com.atproto.server.refreshSession", "POST", self._refresh_session),
            ("app.bsky.actor.getProfile", "GET", self._profile),
            ("app.bsky.notification.listNotifications", "GET", self._notifications),
            ("com.atproto.repo.createRecord", "POST", self._create_record),
        ]:
            app.router.add_route(method, f"/xrpc/{name}", self._wrap(name, handler))
        return app

    def _wrap(self, name: str, handler: Any) -> Any:
        async def wrapped(request: web.Request) -> web.Response:
            params: dict[str, Any] = dict(request.query)
            if request.method == "POST" and request.can_read_body:
                params.update(await request.json())
            rec = self._record_request(name, request, params)
            failure = self._take_failure(name)
            if failure is not None:
                rec.status = failure.status
                headers = (
                    {"ratelimit-reset": str(int(time.time() + (failure.retry_after or 1)))}
                    if failure.status == 429
                    else {}
                )
                response = web.json_response(
                    {
                        "error": "RateLimitExceeded" if failure.status == 429 else "InternalServerError",
                        "message": "failed",
                    },
                    status=failure.status,
                    headers=headers,
                )
            else:
                response = await handler(request, params)
                rec.status = response.status
            self._notify()
            return response

        return wrapped

    def _bearer(self, request: web.Request) -> str:
        return request.headers.get("Authorization", "").removeprefix("Bearer ")

    def _authorised(self, request: web.Request) -> web.Response | None:
        token = self._bearer(request)
        if token in self.state.access:
            payload = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
            if payload["exp"] > time.time():
                return None
            return web.json_response({"error": "ExpiredToken", "message": "Token has expired"}, status=400)
        return web.json_response({"error": "InvalidToken", "message": "Token could not be verified"}, status=401)

    def _session(self) -> dict[str, Any]:
        access, refresh = _jwt("access", self.access_ttl, next(self._n)), _jwt("refresh", 90 * 86400, next(self._n))
        self.state.access.add(access)
        self.state.refresh.add(refresh)
        return {"did": BOT_DID, "handle": BOT_HANDLE, "accessJwt": access, "refreshJwt": refresh, "active": True}

    async def _create_session(self, request: web.Request, params: dict[str, Any]) -> web.Response:
        if (
            self.state.revoked
            or params.get("password") != APP_PASSWORD
            or params.get("identifier") not in (BOT_HANDLE, BOT_DID)
        ):
            return web.json_response(
                {"error": "AuthenticationRequired", "message": "Invalid identifier or password"}, status=401
            )
        return web.json_response(self._session())

    async def _refresh_session(self, request: web.Request, params: dict[str, Any]) -> web.Response:
        token = self._bearer(request)
        if self.state.revoked or token not in self.state.refresh:
            return web.json_response({"error": "ExpiredToken", "message": "Token has been revoked"}, status=400)
        self.state.refresh.discard(token)
        self.state.refreshes += 1
        return web.json_response(self._session())

    async def _profile(self, request: web.Request, params: dict[str, Any]) -> web.Response:
        if (refused := self._authorised(request)) is not None:
            return refused
        return web.json_response({"did": BOT_DID, "handle": BOT_HANDLE, "displayName": "Hub"})

    async def _notifications(self, request: web.Request, params: dict[str, Any]) -> web.Response:
        if (refused := self._authorised(request)) is not None:
            return refused
        limit = int(params.get("limit", 50))
        notes = list(reversed(self.state.notifications))  # newest first
        start = int(params["cursor"]) if params.get("cursor") else 0
        page = notes[start : start + limit]
        cursor = str(start + limit) if start + limit < len(notes) else None
        return web.json_response({"notifications": page, **({"cursor": cursor} if cursor else {})})

    async def _create_record(self, request: web.Request, params: dict[str, Any]) -> web.Response:
        if (refused := self._authorised(request)) is not None:
            return refused
        import grapheme

        record = params["record"]
        if grapheme.length(record["text"]) > 300 or len(record["text"].encode()) > 3000:
            return web.json_response(
                {"error": "InvalidRequest", "message": "Record/text must not be longer than 300 graphemes"}, status=400
            )
        n = next(self._n)
        uri, cid = f"at://{BOT_DID}/app.bsky.feed.post/3b{n:010d}", f"bafyreibot{n:049d}"
        reply = record.get("reply") or {}
        self.state.sent.append(
            {
                "uri": uri,
                "cid": cid,
                "text": record["text"],
                "facets": record.get("facets") or [],
                "root": (reply.get("root") or {}).get("uri"),
                "parent": (reply.get("parent") or {}).get("uri"),
            }
        )
        return web.json_response({"uri": uri, "cid": cid})
