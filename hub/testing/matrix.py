"""A fake Matrix homeserver (client-server API) for matrix-nio.

Point the real client at it with ``nio.AsyncClient(hs.base_url, ...)`` (the extension's
``homeserver``)::

    async with FakeMatrix() as hs:
        room = hs.create_room(members=["@ann:example.org"], bot_joined=True)
        hs.push_text(room, "@ann:example.org", "hi")
        await hs.wait_sent(1)

It serves what the bot uses: ``/login`` (password, m.login.password), ``/account/whoami``,
``/sync`` (long-polled, tokens ``s<position>``: an incremental sync returns the events after
its token, each room with its state and member summary), ``/rooms/{id}/send`` (one event per
transaction id, as a homeserver does), ``/redact``, ``/join``, ``/leave``, ``/typing``, the
media API (``/_matrix/media/v3/upload``, ``/_matrix/client/v1/media/download``, ``/config``)
and Matrix's error shapes: ``fail_next(name, status=429)`` answers ``M_LIMIT_EXCEEDED`` with
``retry_after_ms``. Events over 65,536 bytes are refused (``M_TOO_LARGE``) like Synapse does.
All state is in `MatrixState`: pass it to a new ``FakeMatrix`` to simulate a server
that outlives the bot.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from .fakes import Failure, FakeServer, Recorded

__all__ = ["FakeMatrix", "MatrixState", "BOT", "SERVER"]

SERVER = "example.org"
BOT = f"@hubbot:{SERVER}"
MAX_EVENT_BYTES = 65_536


@dataclass
class MatrixState:
    """Everything the fake knows; plain data, so it survives a server restart.

    ``stream``: every timeline event, ``(position, room_id, event)``. ``sent``: events the
    bot sent (``room_id``, ``type``, ``content``, ``event_id``, ``txn``). ``invites``:
    ``room_id -> (inviter, is_direct, position)`` for the bot. ``media``: content by media id.
    """

    user_id: str = BOT
    password: str = "secret-password"
    tokens: dict[str, str] = field(default_factory=dict)  # access token -> device id
    stream: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)
    position: int = 0
    rooms: dict[str, dict[str, Any]] = field(default_factory=dict)
    invites: dict[str, tuple[str, bool, int]] = field(default_factory=dict)
    sent: list[dict[str, Any]] = field(default_factory=list)
    txns: dict[tuple[str, str], str] = field(default_factory=dict)
    typing: list[str] = field(default_factory=list)
    joined: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)
    media: dict[str, tuple[bytes, str, str]] = field(default_factory=dict)
    upload_limit: int = 1_000_000
    syncs: list[str | None] = field(default_factory=list)
    requests: list[Recorded] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    poison: list[str] = field(default_factory=list)


class FakeMatrix(FakeServer):
    def __init__(self, state: MatrixState | None = None) -> None:
        super().__init__()
        self.state = state or MatrixState()
        self._changed = asyncio.Condition()

    # -- test API -------------------------------------------------------------------------

    def token(self, device_id: str = "TESTDEVICE") -> str:
        """An access token for the bot's account (what an operator pastes from a client)."""
        token = "syt_" + secrets.token_hex(8)
        self.state.tokens[token] = device_id
        return token

    def create_room(
        self,
        members: list[str],
        *,
        room_id: str | None = None,
        bot_joined: bool = True,
        encrypted: bool = False,
        name: str = "",
    ) -> str:
        """A room of ``members`` (and the bot, when ``bot_joined``); returns its id."""
        room_id = room_id or f"!{secrets.token_hex(6)}:{SERVER}"
        joined = list(members) + ([self.state.user_id] if bot_joined else [])
        self.state.rooms[room_id] = {"members": joined, "encrypted": encrypted, "name": name}
        return room_id

    def invite(self, room_id: str, inviter: str, *, direct: bool = False) -> None:
        """``inviter`` invites the bot to ``room_id`` (the room exists, without the bot)."""
        self.state.position += 1
        self.state.invites[room_id] = (inviter, direct, self.state.position)
        self._changed_now()

    def push_event(self, room_id: str, event: dict[str, Any]) -> dict[str, Any]:
        """Append a raw timeline event to ``room_id`` (an ``event_id`` and a timestamp are
        added when missing); returns it."""
        self.state.position += 1
        event = dict(event)
        event.setdefault("event_id", f"${secrets.token_urlsafe(12)}")
        event.setdefault("origin_server_ts", int(time.time() * 1000))
        self.state.stream.append((self.state.position, room_id, event))
        self._changed_now()
        return event

    def push_text(
        self, room_id: str, sender: str, body: str, *, mention: bool = False, **content: Any
    ) -> dict[str, Any]:
        """A text message from ``sender``; ``mention`` names the bot in ``m.mentions``."""
        c: dict[str, Any] = {"msgtype": "m.text", "body": body, **content}
        if mention:
            c["m.mentions"] = {"user_ids": [self.state.user_id]}
        return self.push_event(room_id, {"type": "m.room.message", "sender": sender, "content": c})

    def put_media(self, data: bytes, mime: str, name: str) -> str:
        """Store a file in the content repository; returns its ``mxc://`` URI."""
        media_id = secrets.token_hex(8)
        self.state.media[media_id] = (data, mime, name)
        return f"mxc://{SERVER}/{media_id}"

    def texts(self, room_id: str | None = None) -> list[str]:
        """The ``body`` of each message the bot sent (edits excluded), in order."""
        return [
            s["content"]["body"]
            for s in self.sent
            if s["type"] == "m.room.message"
            and (room_id is None or s["room_id"] == room_id)
            and s["content"].get("m.relates_to", {}).get("rel_type") != "m.replace"
        ]

    def shown(self, event_id: str) -> str:
        """The text the bot's message ``event_id`` shows now, its edits applied."""
        text = None
        for s in self.sent:
            c = s["content"]
            if s["event_id"] == event_id:
                text = c["body"]
            elif c.get("m.relates_to", {}).get("rel_type") == "m.replace" and c["m.relates_to"]["event_id"] == event_id:
                text = c["m.new_content"]["body"]
        assert text is not None, f"no message {event_id}"
        return text

    # -- app ------------------------------------------------------------------------------

    def _build_app(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware])
        c = "/_matrix/client/v3"
        app.router.add_get("/_matrix/client/versions", self._versions)
        app.router.add_post(f"{c}/login", self._login)
        app.router.add_get(f"{c}/account/whoami", self._whoami)
        app.router.add_get(f"{c}/sync", self._sync)
        app.router.add_put(f"{c}/rooms/{{room}}/send/{{type}}/{{txn}}", self._send)
        app.router.add_put(f"{c}/rooms/{{room}}/redact/{{event}}/{{txn}}", self._redact)
        app.router.add_put(f"{c}/rooms/{{room}}/typing/{{user}}", self._typing)
        app.router.add_post(f"{c}/join/{{room}}", self._join)
        app.router.add_post(f"{c}/rooms/{{room}}/leave", self._leave)
        app.router.add_post("/_matrix/media/v3/upload", self._upload)
        app.router.add_get("/_matrix/client/v1/media/download/{server}/{media}", self._download)
        app.router.add_get("/_matrix/client/v1/media/config", self._media_config)
        return app

    _NAMES = {
        "_login": "login",
        "_whoami": "whoami",
        "_sync": "sync",
        "_send": "send",
        "_redact": "redact",
        "_typing": "typing",
        "_join": "join",
        "_leave": "leave",
        "_upload": "upload",
        "_download": "download",
        "_media_config": "media_config",
        "_versions": "versions",
    }

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        name = self._NAMES.get(getattr(handler, "__name__", ""), request.path)
        params: dict[str, Any] = dict(request.query)
        if request.can_read_body and request.content_type == "application/json":
            try:
                params.update(await request.json())
            except ValueError:
                pass
        rec = self._record_request(name, request, params)
        if name not in ("login", "versions") and not self._authorized(request):
            resp = _error(401, "M_UNKNOWN_TOKEN", "Unknown access token")
        else:
            failure = self._take_failure(name)
            if failure is not None:
                if failure.status == 429:
                    retry_ms = int((failure.retry_after or 0) * 1000)
                    resp = _error(429, "M_LIMIT_EXCEEDED", "Too many requests", retry_after_ms=retry_ms)
                else:
                    resp = _error(failure.status, "M_UNKNOWN", failure.description or "Internal error")
            else:
                resp = await handler(request)
        rec.status = resp.status
        self._notify()
        return resp

    def _authorized(self, request: web.Request) -> bool:
        header = request.headers.get("Authorization", "")
        token = header[7:] if header.startswith("Bearer ") else request.query.get("access_token", "")
        return token in self.state.tokens

    def _changed_now(self) -> None:
        self._notify()
        asyncio.get_event_loop().create_task(self._wake())

    async def _wake(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def _before_cleanup(self) -> None:
        await self._wake()

    # -- handlers -------------------------------------------------------------------------

    async def _versions(self, request: web.Request) -> web.Response:
        return web.json_response({"versions": ["v1.11"]})

    async def _login(self, request: web.Request) -> web.Response:
        body = await request.json()
        ident = body.get("identifier", {}).get("user") or body.get("user")
        if body.get("type") != "m.login.password" or body.get("password") != self.state.password:
            return _error(403, "M_FORBIDDEN", "Invalid username or password")
        if ident not in (self.state.user_id, self.state.user_id[1:].split(":")[0]):
            return _error(403, "M_FORBIDDEN", "Invalid username or password")
        device = body.get("device_id") or "DEV" + secrets.token_hex(4).upper()
        token = self.token(device)
        return web.json_response({"user_id": self.state.user_id, "access_token": token, "device_id": device})

    async def _whoami(self, request: web.Request) -> web.Response:
        token = request.headers.get("Authorization", "")[7:]
        return web.json_response(
            {"user_id": self.state.user_id, "device_id": self.state.tokens.get(token), "is_guest": False}
        )

    def _room_block(self, room_id: str, events: list[dict[str, Any]]) -> dict[str, Any]:
        room = self.state.rooms[room_id]
        state = [
            {
                "type": "m.room.member",
                "state_key": m,
                "sender": m,
                "event_id": f"$member-{m}-{room_id}",
                "origin_server_ts": 0,
                "content": {"membership": "join", "displayname": m[1:].split(":")[0]},
            }
            for m in room["members"]
        ]
        if room["encrypted"]:
            state.append(
                {
                    "type": "m.room.encryption",
                    "state_key": "",
                    "sender": room["members"][0],
                    "event_id": f"$enc-{room_id}",
                    "origin_server_ts": 0,
                    "content": {"algorithm": "m.megolm.v1.aes-sha2"},
                }
            )
        return {
            "summary": {"m.joined_member_count": len(room["members"]), "m.invited_member_count": 0},
            "state": {"events": state},
            "timeline": {"events": events, "limited": False, "prev_batch": "p0"},
            "ephemeral": {"events": []},
            "account_data": {"events": []},
            "unread_notifications": {"highlight_count": 0, "notification_count": 0},
        }

    def _since(self, request: web.Request) -> int:
        since = request.query.get("since")
        if since is None:
            return -1
        if not since.startswith("s") or not since[1:].isdigit():
            raise web.HTTPBadRequest(text='{"errcode":"M_INVALID_PARAM"}')
        return int(since[1:])

    def _news(self, since: int) -> bool:
        return any(p > since for p, _, _ in self.state.stream) or any(
            p > since for _, _, p in self.state.invites.values()
        )

    async def _sync(self, request: web.Request) -> web.Response:
        since = self._since(request)
        self.state.syncs.append(request.query.get("since"))
        self._notify()
        timeout = int(request.query.get("timeout", "0")) / 1000
        if since >= 0 and timeout > 0 and not self._news(since):
            async with self._changed:
                try:
                    await asyncio.wait_for(
                        self._changed.wait_for(lambda: self._news(since) or self.closing), min(timeout, 30)
                    )
                except TimeoutError:
                    pass
        position = self.state.position
        bot = self.state.user_id
        joined: dict[str, Any] = {}
        for room_id, room in self.state.rooms.items():
            if bot not in room["members"]:
                continue
            events = [e for p, r, e in self.state.stream if r == room_id and (since < 0 or since < p <= position)]
            if since < 0 or events:
                joined[room_id] = self._room_block(room_id, events)
        invite: dict[str, Any] = {}
        for room_id, (inviter, direct, p) in self.state.invites.items():
            if (since < 0 or p > since) and bot not in self.state.rooms[room_id]["members"]:
                content: dict[str, Any] = {"membership": "invite"}
                if direct:
                    content["is_direct"] = True
                invite[room_id] = {
                    "invite_state": {
                        "events": [
                            {"type": "m.room.member", "state_key": bot, "sender": inviter, "content": content},
                            {
                                "type": "m.room.member",
                                "state_key": inviter,
                                "sender": inviter,
                                "content": {"membership": "join"},
                            },
                        ]
                    }
                }
        return web.json_response(
            {
                "next_batch": f"s{position}",
                "rooms": {"join": joined, "invite": invite, "leave": {}},
                "presence": {"events": []},
                "account_data": {"events": []},
                "to_device": {"events": []},
                "device_lists": {"changed": [], "left": []},
                "device_one_time_keys_count": {},
            }
        )

    async def _send(self, request: web.Request) -> web.Response:
        room_id, etype, txn = request.match_info["room"], request.match_info["type"], request.match_info["txn"]
        if room_id not in self.state.rooms or self.state.user_id not in self.state.rooms[room_id]["members"]:
            return _error(403, "M_FORBIDDEN", "User not in room")
        raw = await request.read()
        if len(raw) > MAX_EVENT_BYTES:
            return _error(413, "M_TOO_LARGE", "event too large")
        token = request.headers.get("Authorization", "")[7:]
        key = (token, txn)
        if key in self.state.txns:  # a retried transaction: the same event, posted once
            return web.json_response({"event_id": self.state.txns[key]})
        content = json.loads(raw)
        event = self.push_event(room_id, {"type": etype, "sender": self.state.user_id, "content": content})
        self.state.txns[key] = event["event_id"]
        self.state.sent.append(
            {"room_id": room_id, "type": etype, "content": content, "event_id": event["event_id"], "txn": txn}
        )
        self._notify()
        return web.json_response({"event_id": event["event_id"]})

    async def _redact(self, request: web.Request) -> web.Response:
        room_id, event_id = request.match_info["room"], request.match_info["event"]
        self.state.sent.append(
            {
                "room_id": room_id,
                "type": "m.room.redaction",
                "content": {"redacts": event_id},
                "event_id": "",
                "txn": "",
            }
        )
        return web.json_response({"event_id": f"${secrets.token_urlsafe(12)}"})

    async def _typing(self, request: web.Request) -> web.Response:
        self.state.typing.append(request.match_info["room"])
        return web.json_response({})

    async def _join(self, request: web.Request) -> web.Response:
        room_id = request.match_info["room"]
        if room_id not in self.state.rooms:
            return _error(404, "M_NOT_FOUND", "No such room")
        members = self.state.rooms[room_id]["members"]
        if self.state.user_id not in members:
            members.append(self.state.user_id)
        self.state.invites.pop(room_id, None)
        self.state.joined.append(room_id)
        # the join is in the room's timeline: the room shows in the next sync's joined rooms
        me = self.state.user_id
        self.push_event(
            room_id, {"type": "m.room.member", "state_key": me, "sender": me, "content": {"membership": "join"}}
        )
        return web.json_response({"room_id": room_id})

    async def _leave(self, request: web.Request) -> web.Response:
        room_id = request.match_info["room"]
        self.state.invites.pop(room_id, None)
        self.state.left.append(room_id)
        return web.json_response({})

    async def _upload(self, request: web.Request) -> web.Response:
        data = await request.read()
        if len(data) > self.state.upload_limit:
            return _error(413, "M_TOO_LARGE", "Upload too large")
        media_id = secrets.token_hex(8)
        self.state.media[media_id] = (data, request.content_type, request.query.get("filename", ""))
        return web.json_response({"content_uri": f"mxc://{SERVER}/{media_id}"})

    async def _download(self, request: web.Request) -> web.StreamResponse:
        found = self.state.media.get(request.match_info["media"])
        if found is None or request.match_info["server"] != SERVER:
            return _error(404, "M_NOT_FOUND", "Not found")
        data, mime, _ = found
        return web.Response(body=data, content_type=mime)

    async def _media_config(self, request: web.Request) -> web.Response:
        return web.json_response({"m.upload.size": self.state.upload_limit})


def _error(status: int, errcode: str, message: str, **extra: Any) -> web.Response:
    return web.json_response({"errcode": errcode, "error": message, **extra}, status=status)
