"""A fake Discord API (REST v10 + gateway websocket) for discord.py.

    async with FakeDiscord() as dc:
        dc.attach(monkeypatch)            # Route.BASE and DEFAULT_GATEWAY -> the fake
        client = discord.Client(intents=intents, guild_ready_timeout=0.05)
        ...
        dc.push_message(dc.channel_id, "hi <@BOT>", author_id=dc.user_id)

The world: one guild (``guild_id``) with a text channel (``channel_id``), a user
(``user_id``, "alice") and a DM channel with her (``dm_channel_id``). The gateway speaks
plain-text JSON frames: HELLO -> IDENTIFY -> READY (``resume_gateway_url`` is this server's
``/resume``) -> GUILD_CREATE, heartbeat ACKs, RESUME with replay of missed events, op 8
member chunks. REST answers carry Discord's rate-limit headers; JSON has Content-Type
exactly ``application/json`` (discord.py parses nothing else).

Endpoint names for ``fail_next`` and ``calls``: ``GET /users/@me``,
``GET /oauth2/applications/@me``, ``GET /gateway``, ``GET /gateway/bot``,
``GET /channels/{channel_id}``, ``POST /channels/{channel_id}/messages``,
``POST /channels/{channel_id}/typing``, ``POST /users/@me/channels``, and for application
commands and interactions ``PUT``/``GET /applications/{application_id}/commands``,
``PUT``/``GET /applications/{application_id}/guilds/{guild_id}/commands``,
``POST /interactions/{interaction_id}/{token}/callback``,
``POST /webhooks/{application_id}/{token}`` (a followup),
``PATCH``/``GET``/``DELETE /webhooks/{application_id}/{token}/messages/@original``.

Interactions are as Discord has them: ``push_interaction(name, ...)`` dispatches an
INTERACTION_CREATE for a registered command; its callback must come within 3 seconds (later:
``404 Unknown interaction``), once (again: ``400 already acknowledged``); a deferred one
(type 5) is completed by editing the original response or with followups, within 15 minutes.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import re
import time
import uuid
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from .fakes import Failure, FakeServer, Recorded, loopback_resolver

CDN_HOST = "cdn.discordapp.com"
"""Attachments are served under Discord's own CDN name, on this fake's port: the extension
under test gets ``FakeDiscord.resolve`` (that name, and only it, is 127.0.0.1)."""
IS_VOICE_MESSAGE = 1 << 13
"""The message flag of a voice message."""

__all__ = ["FakeDiscord", "DiscordState", "GatewaySession", "CDN_HOST", "IS_VOICE_MESSAGE"]

MAX_CONTENT = 2000
DISCORD_EPOCH_MS = 1420070400000
API_PREFIX = "/api/v10"
# Default @everyone permissions of a new guild (view, send, read history, embed, ...).
EVERYONE_PERMISSIONS = "2248473465835073"

# op codes
DISPATCH, HEARTBEAT, IDENTIFY, PRESENCE, RESUME, RECONNECT, REQUEST_MEMBERS = 0, 1, 2, 3, 6, 7, 8
INVALID_SESSION, HELLO, HEARTBEAT_ACK = 9, 10, 11


@dataclass
class GatewaySession:
    """One identified gateway session; ``events`` are kept so a RESUME can replay them."""

    session_id: str
    seq: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)
    ws: web.WebSocketResponse | None = None
    identify: dict[str, Any] = field(default_factory=dict)
    resumed: int = 0


@dataclass
class DiscordState:
    """Everything the fake knows. ``sent`` holds one dict per message the bot created:
    ``channel_id``, ``content``, ``reply_to`` (message id or None), ``id``, ``payload``."""

    bot_id: int
    bot_name: str
    guilds: dict[int, dict[str, Any]] = field(default_factory=dict)
    channels: dict[int, dict[str, Any]] = field(default_factory=dict)
    users: dict[int, dict[str, Any]] = field(default_factory=dict)
    messages: dict[int, dict[str, Any]] = field(default_factory=dict)
    sent: list[dict[str, Any]] = field(default_factory=list)
    requests: list[Recorded] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    sessions: dict[str, GatewaySession] = field(default_factory=dict)
    gateway_log: list[dict[str, Any]] = field(default_factory=list)
    typing: list[int] = field(default_factory=list)
    counter: int = 0
    attachments: dict[int, bytes] = field(default_factory=dict)
    """Attachment id → the bytes its CDN URL serves."""
    downloads: list[int] = field(default_factory=list)
    """Attachment ids fetched from the CDN, in order."""
    metadata_reads: list[str] = field(default_factory=list)
    """Paths read under ``/latest/meta-data/``: a cloud's metadata service, which no
    attachment URL may reach."""
    edits: list[dict[str, Any]] = field(default_factory=list)
    """Each edit of a bot message: ``channel_id``, ``id``, ``content`` after it."""
    deleted: list[int] = field(default_factory=list)
    commands: dict[int | None, list[dict[str, Any]]] = field(default_factory=dict)
    """Registered application commands: guild id (None: global) → the list the last bulk
    overwrite left."""
    interactions: dict[int, Interaction] = field(default_factory=dict)
    no_voice_messages: set[int] = field(default_factory=set)
    """Channels where the bot may not send voice messages (error 50173, as Discord answers
    without the SEND_VOICE_MESSAGES permission)."""


@dataclass
class Interaction:
    """One interaction the fake dispatched, and how the bot answered it: ``callbacks`` (each
    callback's ``type`` and ``data``), the response message's id, and the followups' ids."""

    id: int
    token: str
    channel_id: int
    name: str
    created: float
    callbacks: list[dict[str, Any]] = field(default_factory=list)
    original: int | None = None
    followups: list[int] = field(default_factory=list)

    @property
    def deferred(self) -> bool:
        return any(c["type"] == 5 for c in self.callbacks)


class FakeDiscord(FakeServer):
    """Fake Discord. Attributes: ``bot_id``, ``guild_id``, ``channel_id``, ``user_id``,
    ``dm_channel_id``, ``state``, ``sent``, ``requests``, ``gateway_log`` (every frame the
    client sent: op, d), ``identifies``, ``connections`` (gateway URLs the client opened).

    Helpers: ``attach(monkeypatch)`` / ``patched()``, ``push_message(...)``,
    ``push_interaction(name, ...)``, ``answers(interaction_id)``,
    ``dispatch(event, data)``, ``disconnect(code)``, ``send_reconnect()``,
    ``invalidate_session(resumable)``, ``fail_next(name, ...)``, ``wait_sent(n)``,
    ``wait_ready()``.
    """

    def __init__(
        self,
        *,
        bot_id: int = 1100000000000000001,
        bot_name: str = "HubBot",
        token: str | None = None,
        heartbeat_interval_ms: int = 41250,
    ) -> None:
        super().__init__()
        self.state = DiscordState(bot_id=bot_id, bot_name=bot_name)
        self.token = token
        self.bots: dict[str, int] = {}
        """Other bots on this fake, by token (``add_bot``): a hub's second account."""
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.connections: list[str] = []
        self._tasks: set[asyncio.Future[None]] = set()
        self._sockets: set[web.WebSocketResponse] = set()
        self.bot_id = bot_id
        self.state.users[bot_id] = _user(bot_id, bot_name, bot=True)
        self.user_id = self._snowflake()
        self.add_user(self.user_id, "alice")
        self.guild_id = self.add_guild("Test Guild")
        self.channel_id = self.add_text_channel(self.guild_id, "general")
        self.dm_channel_id = self.add_dm_channel(self.user_id)
        self.resolve = loopback_resolver(CDN_HOST)

    def add_bot(self, token: str, name: str) -> int:
        """Another bot in the same guild, signed in with ``token`` (a hub's second account):
        it sees every gateway event, and its REST calls act as it. Returns its user id."""
        bot_id = self._snowflake()
        self.state.users[bot_id] = _user(bot_id, name, bot=True)
        self.bots[token] = bot_id
        return bot_id

    def _bot_by_token(self, token: str | None) -> int | None:
        """The bot a token signs in (None: refused, where the fake checks tokens)."""
        if token is not None and token in self.bots:
            return self.bots[token]
        return self.bot_id if self.token is None or token == self.token else None

    def _bot_of(self, request: web.Request) -> int:
        header = request.headers.get("Authorization", "")
        return self._bot_by_token(header.removeprefix("Bot ")) or self.bot_id

    @property
    def cdn_url(self) -> str:
        return f"http://{CDN_HOST}:{self.port}"

    # -- world building -----------------------------------------------------------------------

    def _snowflake(self) -> int:
        self.state.counter += 1
        ms = int(time.time() * 1000) - DISCORD_EPOCH_MS
        return (ms << 22) | (self.state.counter & 0xFFF)

    def add_user(self, user_id: int, name: str, *, bot: bool = False) -> int:
        self.state.users[user_id] = _user(user_id, name, bot=bot)
        return user_id

    def add_guild(self, name: str, *, guild_id: int | None = None) -> int:
        """A guild the bot is in (sent in GUILD_CREATE after READY)."""
        gid = guild_id or self._snowflake()
        self.state.guilds[gid] = {"id": str(gid), "name": name, "channels": []}
        return gid

    def add_text_channel(self, guild_id: int, name: str, *, channel_id: int | None = None) -> int:
        cid = channel_id or self._snowflake()
        channel = {
            "id": str(cid),
            "type": 0,
            "guild_id": str(guild_id),
            "name": name,
            "position": len(self.state.guilds[guild_id]["channels"]),
            "permission_overwrites": [],
            "topic": None,
            "nsfw": False,
            "parent_id": None,
            "rate_limit_per_user": 0,
            "last_message_id": None,
            "flags": 0,
        }
        self.state.channels[cid] = channel
        self.state.guilds[guild_id]["channels"].append(cid)
        return cid

    def add_dm_channel(self, user_id: int, *, channel_id: int | None = None) -> int:
        for cid, ch in self.state.channels.items():
            if ch["type"] == 1 and ch["recipients"][0]["id"] == str(user_id):
                return cid
        cid = channel_id or self._snowflake()
        self.state.channels[cid] = {
            "id": str(cid),
            "type": 1,
            "last_message_id": None,
            "flags": 0,
            "recipients": [self.state.users[user_id]],
        }
        return cid

    # -- client wiring ------------------------------------------------------------------------

    @property
    def api_base(self) -> str:
        return f"{self.base_url}{API_PREFIX}"

    @property
    def gateway_url(self) -> str:
        return f"ws://{self.host}:{self.port}/gateway"

    def attach(self, monkeypatch: Any) -> None:
        """Point discord.py at this fake for one test (pytest's ``monkeypatch``)."""
        import discord.gateway
        import discord.http
        import yarl

        monkeypatch.setattr(discord.http.Route, "BASE", self.api_base)
        monkeypatch.setattr(discord.gateway.DiscordWebSocket, "DEFAULT_GATEWAY", yarl.URL(self.gateway_url))

    @contextlib.contextmanager
    def patched(self) -> Iterator[None]:
        """Like ``attach`` without pytest: restores discord.py's URLs on exit."""
        import discord.gateway
        import discord.http
        import yarl

        route, ws = discord.http.Route, discord.gateway.DiscordWebSocket
        saved = route.BASE, ws.DEFAULT_GATEWAY
        route.BASE, ws.DEFAULT_GATEWAY = self.api_base, yarl.URL(self.gateway_url)
        try:
            yield
        finally:
            route.BASE, ws.DEFAULT_GATEWAY = saved

    # -- inspection ---------------------------------------------------------------------------

    @property
    def gateway_log(self) -> list[dict[str, Any]]:
        """Every frame a client sent on the gateway, in order (``op``, ``d``)."""
        return self.state.gateway_log

    @property
    def identifies(self) -> list[dict[str, Any]]:
        """The ``d`` of every IDENTIFY (token, intents, properties, ...)."""
        return [f["d"] for f in self.gateway_log if f.get("op") == IDENTIFY]

    @property
    def resumes(self) -> list[dict[str, Any]]:
        return [f["d"] for f in self.gateway_log if f.get("op") == RESUME]

    @property
    def typing(self) -> list[int]:
        """Channel ids the bot sent a typing indicator to, in order."""
        return self.state.typing

    def live_sessions(self) -> list[GatewaySession]:
        return [s for s in self.state.sessions.values() if s.ws is not None and not s.ws.closed]

    async def wait_ready(self, timeout: float = 5) -> GatewaySession:
        """Wait until a client identified (or resumed) and holds a live session."""
        await self.wait_for(lambda: bool(self.live_sessions()), timeout)
        return self.live_sessions()[-1]

    # -- inbound events -----------------------------------------------------------------------

    def push_message(
        self,
        channel_id: int,
        content: str,
        author_id: int | None = None,
        *,
        author_is_bot: bool = False,
        author_name: str | None = None,
        guild_id: int | None = None,
        mentions: list[int] | None = None,
        reply_to: int | None = None,
    ) -> int:
        """A MESSAGE_CREATE from ``author_id`` (default: alice) in ``channel_id``.

        The guild comes from the channel unless given; an unknown channel becomes a DM
        channel with the author. ``mentions`` defaults to the ``<@id>`` in ``content``, as
        Discord fills it. Returns the message id.
        """
        author_id = self.user_id if author_id is None else author_id
        if author_id not in self.state.users:
            self.add_user(author_id, author_name or f"user{author_id}", bot=author_is_bot)
        elif author_is_bot or author_name:
            self.state.users[author_id]["bot"] = author_is_bot
            if author_name:
                self.state.users[author_id]["username"] = author_name
        if channel_id not in self.state.channels:
            self.add_dm_channel(author_id, channel_id=channel_id)
        channel = self.state.channels[channel_id]
        if guild_id is None and "guild_id" in channel:
            guild_id = int(channel["guild_id"])
        if mentions is None:
            mentions = [int(m) for m in re.findall(r"<@!?(\d+)>", content)]
        message = self._message_payload(
            channel_id,
            content,
            author_id,
            guild_id=guild_id,
            mentions=mentions,
            reply_to=reply_to,
        )
        self.dispatch("MESSAGE_CREATE", message)
        return int(message["id"])

    def push_attachments(
        self,
        channel_id: int,
        files: list[tuple[str, str, bytes]],
        content: str = "",
        author_id: int | None = None,
        *,
        size: int | None = None,
        url: str | None = None,
        voice: bool = False,
    ) -> int:
        """A MESSAGE_CREATE carrying ``files`` (``(name, content_type, bytes)``), served at
        their CDN URLs on this fake; ``size`` overrides the size Discord reports, ``url`` the
        URL (a hostile one); ``voice`` makes it a voice message (flag IS_VOICE_MESSAGE, each
        attachment with ``duration_secs`` and ``waveform``). Returns the message id."""
        author_id = self.user_id if author_id is None else author_id
        if author_id not in self.state.users:
            self.add_user(author_id, f"user{author_id}")
        if channel_id not in self.state.channels:
            self.add_dm_channel(author_id, channel_id=channel_id)
        channel = self.state.channels[channel_id]
        guild_id = int(channel["guild_id"]) if "guild_id" in channel else None
        mentions = [int(m) for m in re.findall(r"<@!?(\d+)>", content)]
        message = self._message_payload(channel_id, content, author_id, guild_id=guild_id, mentions=mentions)
        attachments = []
        for name, content_type, data in files:
            aid = self._snowflake()
            self.state.attachments[aid] = data
            where = url or f"{self.cdn_url}/attachments/{channel_id}/{aid}/{name}"
            attachments.append(
                {
                    "id": str(aid),
                    "filename": name,
                    "size": len(data) if size is None else size,
                    "url": where,
                    "proxy_url": where,
                    "content_type": content_type,
                    **({"duration_secs": 1.0, "waveform": "AAAA"} if voice else {}),
                }
            )
        if voice:
            message["flags"] = int(message.get("flags") or 0) | IS_VOICE_MESSAGE
        message["attachments"] = attachments
        self.state.messages[int(message["id"])]["attachments"] = attachments
        self.dispatch("MESSAGE_CREATE", message)
        return int(message["id"])

    async def _attachment(self, request: web.Request) -> web.Response:
        aid = int(request.match_info["attachment_id"])
        self.state.downloads.append(aid)
        self._notify()
        if aid not in self.state.attachments:
            return web.Response(status=404, text="Not Found")
        return web.Response(body=self.state.attachments[aid], content_type="application/octet-stream")

    async def _metadata(self, request: web.Request) -> web.Response:
        self.state.metadata_reads.append(request.match_info["tail"])
        self._notify()
        return web.Response(text="AccessKeyId=AKIAFAKEMETADATA SecretAccessKey=metadata-secret-0123")

    def _message_payload(
        self,
        channel_id: int,
        content: str,
        author_id: int,
        *,
        guild_id: int | None,
        mentions: list[int],
        reply_to: int | None = None,
        embeds: list[Any] | None = None,
    ) -> dict[str, Any]:
        mid = self._snowflake()
        msg: dict[str, Any] = {
            "id": str(mid),
            "type": 0,
            "channel_id": str(channel_id),
            "content": content,
            "author": self.state.users[author_id],
            "attachments": [],
            "embeds": embeds or [],
            "mentions": [self.state.users.get(u) or _user(u, f"user{u}") for u in mentions],
            "mention_roles": [],
            "mention_everyone": False,
            "pinned": False,
            "tts": False,
            "timestamp": _now_iso(),
            "edited_timestamp": None,
            "flags": 0,
            "components": [],
        }
        if guild_id is not None:
            msg["guild_id"] = str(guild_id)
            msg["member"] = _member(None)
            for m in msg["mentions"]:
                m["member"] = _member(None)
        if reply_to is not None:
            msg["type"] = 19
            msg["message_reference"] = {
                "type": 0,
                "message_id": str(reply_to),
                "channel_id": str(channel_id),
                **({"guild_id": str(guild_id)} if guild_id else {}),
            }
            msg["referenced_message"] = self.state.messages.get(reply_to)
        self.state.messages[mid] = {k: v for k, v in msg.items() if k != "referenced_message"}
        self.state.channels[channel_id]["last_message_id"] = str(mid)
        return msg

    def dispatch(self, event: str, data: dict[str, Any]) -> None:
        """Send a DISPATCH to every session (kept for replay if its socket is down); a
        sharded session gets only its shard's guilds' events (DMs go to shard 0)."""
        guild = data.get("guild_id")
        for session in self.state.sessions.values():
            if not _in_shard(session.identify, int(guild) if guild else None):
                continue
            session.seq += 1
            frame = {"op": DISPATCH, "t": event, "s": session.seq, "d": data}
            session.events.append(frame)
            if session.ws is not None and not session.ws.closed:
                task = asyncio.ensure_future(_send(session.ws, frame))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        self._notify()

    async def disconnect(self, code: int = 4000) -> None:
        """Close every gateway socket with ``code``; discord.py then RESUMEs (4000)."""
        for ws in list(self._sockets):
            await ws.close(code=code, message=b"fake disconnect")

    async def send_reconnect(self) -> None:
        """Op 7: the client should reconnect and RESUME."""
        for ws in list(self._sockets):
            await _send(ws, {"op": RECONNECT, "d": None})

    async def invalidate_session(self, *, resumable: bool = False) -> None:
        """Op 9; with ``resumable=False`` the client must IDENTIFY afresh.

        discord.py sleeps 5 s before every non-initial IDENTIFY (``before_identify_hook``)
        and reconnects to the last gateway URL it used, so expect the new IDENTIFY ~5 s later.
        """
        for ws in list(self._sockets):
            await _send(ws, {"op": INVALID_SESSION, "d": resumable})
        if not resumable:
            self.state.sessions.clear()

    # -- server -------------------------------------------------------------------------------

    def _build_app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/gateway", self._gateway)
        app.router.add_get("/resume", self._gateway)
        app.router.add_get("/attachments/{channel_id}/{attachment_id}/{filename}", self._attachment)
        app.router.add_get("/latest/meta-data/{tail:.*}", self._metadata)
        routes = [
            ("GET", "/users/@me", self._get_me),
            ("GET", "/oauth2/applications/@me", self._get_application),
            ("GET", "/gateway", self._get_gateway),
            ("GET", "/gateway/bot", self._get_gateway_bot),
            ("GET", "/channels/{channel_id}", self._get_channel),
            ("POST", "/channels/{channel_id}/messages", self._create_message),
            ("POST", "/channels/{channel_id}/typing", self._typing),
            ("POST", "/users/@me/channels", self._create_dm),
            *self._edit_routes(),
            *self._command_routes(),
        ]
        for method, path, handler in routes:
            authed = not path.startswith(("/interactions/", "/webhooks/"))  # the token is the credential
            app.router.add_route(method, API_PREFIX + path, self._rest(f"{method} {path}", handler, authed=authed))
        app.router.add_route("*", API_PREFIX + "/{tail:.*}", self._rest("unknown", self._unknown))
        return app

    async def _before_cleanup(self) -> None:
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=1)
        for ws in list(self._sockets):
            await ws.close(code=1001, message=b"server shutting down")

    def _rest(self, name: str, handler: Any, *, authed: bool = True) -> Any:
        async def wrapped(request: web.Request) -> web.Response:
            params: dict[str, Any] = dict(request.query)
            if request.content_type == "application/json":
                body = await request.json()
                if isinstance(body, list):  # a bulk overwrite sends a list
                    params["_list"] = body
                else:
                    params.update(body)
            elif request.content_type == "multipart/form-data":
                form = await request.post()
                if "payload_json" in form:
                    params.update(json.loads(str(form["payload_json"])))
                params["_files"] = [v.filename for v in form.values() if isinstance(v, web.FileField)]
                params["_uploads"] = {v.filename: v.file.read() for v in form.values() if isinstance(v, web.FileField)}
            rec = self._record_request(
                name if name != "unknown" else f"{request.method} {request.path}", request, params
            )
            bucket = _bucket(name)
            try:
                token = request.headers.get("Authorization", "").removeprefix("Bot ")
                if authed and self._bot_by_token(token) is None:
                    response = _json({"message": "401: Unauthorized", "code": 0}, 401)
                elif (failure := self._take_failure(name)) is not None:
                    response = _failure_response(failure, bucket)
                else:
                    response = await handler(request, params)
                    _ratelimit_headers(response, bucket, remaining=4, reset_after=1.0)
            except _ApiError as e:
                response = e.response
                _ratelimit_headers(response, bucket, remaining=4, reset_after=1.0)
            rec.status = response.status
            self._notify()
            return response

        return wrapped

    async def _unknown(self, request: web.Request, params: dict[str, Any]) -> web.Response:
        return _json({"message": "404: Not Found", "code": 0}, 404)

    async def _get_me(self, request: web.Request, params: dict[str, Any]) -> web.Response:
        return _json(
            {
                **self.state.users[self._bot_of(request)],
                "verified": True,
                "mfa_enabled": False,
                "flags": 0,
                "email": None,
                "locale": "en-US",
                "premium_type": 0,
            }
        )

    async def _get_application(self, request: web.Request, params: dict[str, Any]) -> web.Response:
        bot_id = self._bot_of(request)
        return _json(
            {
                "id": str(bot_id),
                "name": self.state.bot_name,
                "icon": None,
                "description": "",
                "summary": "",
                "type": None,
                "bot_public": True,
                "bot_require_code_grant": False,
                "verify_key": "0" * 64,
                "flags": 0,
                "owner": self.state.users[self.user_id],
                "team": None,
                "interactions_endpoint_url": None,
                "bot": self.state.users[bot_id],
            }
        )

    async def _get_gateway(self, request: web.Request, params: dict[str, Any]) -> web.Response:
        return _json({"url": self.gateway_url})

    async def _get_gateway_bot(self, request: web.Request, params: dict[str, Any]) -> web.Response:
        return _json(
            {
                "url": self.gateway_url,
                "shards": 1,
                "session_start_limit": {"total": 1000, "remaining": 999, "reset_after": 86400000, "max_concurrency": 1},
            }
        )

    def _channel(self, request: web.Request) -> tuple[int, dict[str, Any]]:
        try:
            cid = int(request.match_info["channel_id"])
            return cid, self.state.channels[cid]
        except (KeyError, ValueError):
            raise _ApiError(_json({"message": "Unknown Channel", "code": 10003}, 404)) from None

    async def _get_channel(self, request: web.Request, params: dict[str, Any]) -> web.Response:
        return _json(self._channel(request)[1])

    async def _typing(self, request: web.Request, params: dict[str, Any]) -> web.Response:
        cid, _ = self._channel(request)
        self.state.typing.append(cid)
        return web.Response(status=204)

    async def _create_dm(self, request: web.Request, params: dict[str, Any]) -> web.Response:
        uid = int(params["recipient_id"])
        if uid not in self.state.users:
            self.add_user(uid, f"user{uid}")
        return _json(self.state.channels[self.add_dm_channel(uid)])

    async def _create_message(self, request: web.Request, params: dict[str, Any]) -> web.Response:
        cid, channel = self._channel(request)
        content = params.get("content") or ""
        if len(content) > MAX_CONTENT:
            return _too_long()
        if (
            not content.strip()
            and not params.get("embeds")
            and not params.get("_files")
            and not params.get("sticker_ids")
        ):
            return _json({"message": "Cannot send an empty message", "code": 50006}, 400)
        refused = self._voice_refused(cid, params, content)
        if refused is not None:
            return refused
        ref = params.get("message_reference") or {}
        reply_to = int(ref["message_id"]) if ref.get("message_id") else None
        if reply_to is not None and reply_to not in self.state.messages and ref.get("fail_if_not_exists", True):
            return _json(
                {
                    "message": "Invalid Form Body",
                    "code": 50035,
                    "errors": {
                        "message_reference": {
                            "_errors": [{"code": "REPLIES_UNKNOWN_MESSAGE", "message": "Unknown message"}]
                        }
                    },
                },
                400,
            )
        guild_id = int(channel["guild_id"]) if "guild_id" in channel else None
        author = self._bot_of(request)
        payload = self._message_payload(
            cid,
            content,
            author,
            guild_id=guild_id,
            mentions=[],
            reply_to=reply_to if reply_to in self.state.messages else None,
            embeds=params.get("embeds"),
        )
        payload.pop("member", None)  # REST responses carry no member for the author
        if params.get("components"):  # buttons stay with the message until an edit replaces them
            payload["components"] = params["components"]
            self.state.messages[int(payload["id"])]["components"] = params["components"]
        if params.get("nonce") is not None:
            payload["nonce"] = params["nonce"]
        self.state.sent.append(
            {
                "channel_id": cid,
                "content": content,
                "reply_to": reply_to,
                "id": int(payload["id"]),
                "payload": params,
                "files": params.get("_uploads") or {},
                "bot_id": author,
            }
        )
        # Discord echoes the bot's own message on the gateway too: bots must ignore it.
        self.dispatch("MESSAGE_CREATE", {**payload, **({"member": _member(None)} if guild_id else {})})
        return _json(payload)

    def _voice_refused(self, cid: int, params: dict[str, Any], content: str) -> web.Response | None:
        """Discord's checks of a voice message (flag IS_VOICE_MESSAGE): no text, one audio
        attachment with its duration and waveform, and the permission to send one here."""
        if not int(params.get("flags") or 0) & IS_VOICE_MESSAGE:
            return None
        if cid in self.state.no_voice_messages:
            return _json({"message": "Cannot send voice messages in this channel", "code": 50173}, 403)
        if content.strip():
            return _json({"message": "Voice messages do not support additional content", "code": 50161}, 400)
        files = params.get("_uploads") or {}
        meta = params.get("attachments") or []
        if len(files) != 1 or len(meta) != 1:
            return _json({"message": "Voice messages must have a single audio attachment", "code": 50159}, 400)
        if "duration_secs" not in meta[0] or "waveform" not in meta[0]:
            return _json({"message": "Voice messages must have supporting metadata", "code": 50160}, 400)
        return None

    # -- editing and deleting the bot's messages (live replies) -------------------------------

    def _edit_routes(self) -> list[tuple[str, str, Any]]:
        return [
            ("PATCH", "/channels/{channel_id}/messages/{message_id}", self._edit_message),
            ("DELETE", "/channels/{channel_id}/messages/{message_id}", self._delete_message),
        ]

    def _own_message(self, request: web.Request) -> tuple[int, int, dict[str, Any]]:
        cid, _ = self._channel(request)
        mid = int(request.match_info["message_id"])
        msg = self.state.messages.get(mid)
        if msg is None or int(msg["channel_id"]) != cid:
            raise _ApiError(_json({"message": "Unknown Message", "code": 10008}, 404))
        if int(msg["author"]["id"]) != self.bot_id:
            raise _ApiError(_json({"message": "Cannot edit a message authored by another user", "code": 50005}, 403))
        return cid, mid, msg

    async def _edit_message(self, request: web.Request, params: dict[str, Any]) -> web.Response:
        cid, mid, msg = self._own_message(request)
        content = params.get("content")
        if content is not None:
            if len(content) > MAX_CONTENT:
                return _too_long()
            msg["content"] = content
        if "components" in params:
            msg["components"] = params["components"] or []
        msg["edited_timestamp"] = _now_iso()
        self.state.edits.append({"channel_id": cid, "id": mid, "content": msg["content"]})
        return _json(msg)

    async def _delete_message(self, request: web.Request, params: dict[str, Any]) -> web.Response:
        cid, mid, _ = self._own_message(request)
        del self.state.messages[mid]
        self.state.deleted.append(mid)
        return web.Response(status=204)

    def shown(self, channel_id: int) -> list[str]:
        """The bot's messages in ``channel_id`` as they read now (after edits), oldest first."""
        return [
            m["content"]
            for mid, m in sorted(self.state.messages.items())
            if int(m["channel_id"]) == channel_id and int(m["author"]["id"]) == self.bot_id
        ]

    # -- application commands and interactions --------------------------------------------

    def _command_routes(self) -> list[tuple[str, str, Any]]:
        return [
            ("PUT", "/applications/{application_id}/commands", self._put_commands),
            ("GET", "/applications/{application_id}/commands", self._get_commands),
            ("PUT", "/applications/{application_id}/guilds/{guild_id}/commands", self._put_commands),
            ("GET", "/applications/{application_id}/guilds/{guild_id}/commands", self._get_commands),
            ("POST", "/interactions/{interaction_id}/{token}/callback", self._callback),
            ("POST", "/webhooks/{application_id}/{token}", self._followup),
            ("GET", "/webhooks/{application_id}/{token}/messages/@original", self._get_original),
            ("PATCH", "/webhooks/{application_id}/{token}/messages/@original", self._edit_original),
            ("DELETE", "/webhooks/{application_id}/{token}/messages/@original", self._delete_original),
        ]

    def command_names(self, guild_id: int | None = None) -> list[str]:
        """The names of the commands registered globally (or in ``guild_id``), in order."""
        return [c["name"] for c in self.state.commands.get(guild_id, [])]

    def _app_id(self, request: web.Request) -> int:
        bot_id = self._bot_of(request)
        if int(request.match_info["application_id"]) != bot_id:  # the application is the bot's
            raise _ApiError(_json({"message": "Unknown Application", "code": 10002}, 404))
        return bot_id

    async def _put_commands(self, request: web.Request, params: dict[str, Any]) -> web.Response:
        """A bulk overwrite: the list given replaces the scope's commands."""
        self._app_id(request)
        gid = int(request.match_info["guild_id"]) if "guild_id" in request.match_info else None
        if gid is not None and gid not in self.state.guilds:
            return _json({"message": "Missing Access", "code": 50001}, 403)
        body = params.get("_list")
        if not isinstance(body, list):
            return _json({"message": "Invalid Form Body", "code": 50035}, 400)
        registered = []
        for c in body:
            name, description = str(c.get("name", "")), str(c.get("description", ""))
            if not re.fullmatch(r"[-_\w]{1,32}", name) or name != name.lower() or not 1 <= len(description) <= 100:
                return _json({"message": "Invalid Form Body", "code": 50035, "errors": {"name": name}}, 400)
            registered.append(
                {
                    "id": str(self._snowflake()),
                    "application_id": str(self.bot_id),
                    "version": str(self._snowflake()),
                    "type": c.get("type", 1),
                    "name": name,
                    "description": description,
                    "options": c.get("options", []),
                    "default_member_permissions": c.get("default_member_permissions"),
                    "dm_permission": c.get("dm_permission", True),
                    "nsfw": c.get("nsfw", False),
                    "contexts": c.get("contexts"),
                    "integration_types": c.get("integration_types", [0]),
                    **({"guild_id": str(gid)} if gid is not None else {}),
                }
            )
        self.state.commands[gid] = registered
        return _json(registered)

    async def _get_commands(self, request: web.Request, params: dict[str, Any]) -> web.Response:
        self._app_id(request)
        gid = int(request.match_info["guild_id"]) if "guild_id" in request.match_info else None
        return _json(self.state.commands.get(gid, []))

    def push_interaction(
        self,
        name: str,
        *,
        text: str | None = None,
        channel_id: int | None = None,
        user_id: int | None = None,
    ) -> int:
        """A user (default: alice) runs the slash command ``/name`` in ``channel_id`` (default:
        the guild's text channel; a DM channel is a DM), with ``text`` as its one option:
        an INTERACTION_CREATE, as Discord sends it. The command must be registered (in that
        guild, or globally). Returns the interaction's id."""
        user_id = self.user_id if user_id is None else user_id
        cid = self.channel_id if channel_id is None else channel_id
        channel = self.state.channels[cid]
        gid = int(channel["guild_id"]) if "guild_id" in channel else None
        scope = gid if gid is not None and any(c["name"] == name for c in self.state.commands.get(gid, [])) else None
        registered = next((c for c in self.state.commands.get(scope, []) if c["name"] == name), None)
        if registered is None:
            raise KeyError(f"no registered command {name!r} (guild {gid} or global)")
        data: dict[str, Any] = {"id": registered["id"], "name": name, "type": 1}
        if scope is not None:
            data["guild_id"] = str(scope)
        if text is not None:
            data["options"] = [{"name": "text", "type": 3, "value": text}]
        return self._interact(2, {"data": data}, cid, user_id, name)

    def push_press(self, message_id: int, custom_id: str, *, user_id: int | None = None) -> int:
        """A user (default: alice) presses the button ``custom_id`` of the bot's message
        ``message_id``: an INTERACTION_CREATE of type 3 (MESSAGE_COMPONENT), as Discord sends it.
        Returns the interaction's id (its answer is in ``state.interactions``)."""
        user_id = self.user_id if user_id is None else user_id
        message = dict(self.state.messages[message_id])
        buttons = [c for row in message.get("components") or [] for c in row.get("components", [])]
        if not any(b.get("custom_id") == custom_id for b in buttons):
            raise KeyError(f"message {message_id} has no button {custom_id!r}")
        payload = {"data": {"custom_id": custom_id, "component_type": 2}, "message": message}
        return self._interact(3, payload, int(message["channel_id"]), user_id, custom_id)

    def _interact(self, kind: int, fields: dict[str, Any], cid: int, user_id: int, name: str) -> int:
        """Dispatch an INTERACTION_CREATE of type ``kind`` (2: a command, 3: a button) with
        ``fields``, by ``user_id`` in channel ``cid``, as Discord sends it; its id."""
        channel = self.state.channels[cid]
        gid = int(channel["guild_id"]) if "guild_id" in channel else None
        iid = self._snowflake()
        token = f"aW50ZXJhY3Rpb246{uuid.uuid4().hex}"
        payload: dict[str, Any] = {
            "id": str(iid),
            "application_id": str(self.bot_id),
            "type": kind,
            **fields,
            "channel_id": str(cid),
            "channel": {k: v for k, v in channel.items() if k != "recipients"} | {"id": str(cid)},
            "token": token,
            "version": 1,
            "locale": "en-US",
            "app_permissions": EVERYONE_PERMISSIONS,
            "entitlements": [],
            "attachment_size_limit": 10485760,
            "authorizing_integration_owners": {"0": str(gid)} if gid is not None else {"1": str(user_id)},
            "context": 0 if gid is not None else 1,
        }
        if gid is not None:
            payload["guild_id"] = str(gid)
            payload["guild_locale"] = "en-US"
            payload["member"] = {**_member(self.state.users[user_id]), "permissions": EVERYONE_PERMISSIONS}
        else:
            payload["user"] = self.state.users[user_id]
        self.state.interactions[iid] = Interaction(iid, token, cid, name, time.monotonic())
        self.dispatch("INTERACTION_CREATE", payload)
        return iid

    def answers(self, interaction_id: int) -> list[str]:
        """What the user sees of an interaction's answer: the response's text (once a
        deferred response is edited), then each followup's, in order."""
        it = self.state.interactions[interaction_id]
        ids = ([it.original] if it.original is not None else []) + it.followups
        return [self.state.messages[i]["content"] for i in ids if i in self.state.messages]

    def _interaction(self, request: web.Request) -> Interaction:
        token = request.match_info["token"]
        found = next((i for i in self.state.interactions.values() if i.token == token), None)
        if found is None or (
            "interaction_id" in request.match_info and found.id != int(request.match_info["interaction_id"])
        ):
            raise _ApiError(_json({"message": "Unknown interaction", "code": 10062}, 404))
        if time.monotonic() - found.created > 15 * 60:  # the token lives 15 minutes
            raise _ApiError(_json({"message": "Invalid Webhook Token", "code": 50027}, 401))
        return found

    def _interaction_message(self, it: Interaction, content: str, *, loading: bool = False) -> dict[str, Any]:
        channel = self.state.channels[it.channel_id]
        gid = int(channel["guild_id"]) if "guild_id" in channel else None
        msg = self._message_payload(it.channel_id, content, self.bot_id, guild_id=gid, mentions=[])
        msg.update({"type": 20, "webhook_id": str(self.bot_id), "application_id": str(self.bot_id)})
        msg["interaction_metadata"] = {
            "id": str(it.id),
            "type": 2,
            "name": it.name,
            "user": self.state.users[self.user_id],
        }
        msg["flags"] = 128 if loading else 0
        msg.pop("member", None)
        self.state.messages[int(msg["id"])].update(msg)
        return msg

    async def _callback(self, request: web.Request, params: dict[str, Any]) -> web.Response:
        it = self._interaction(request)
        if it.callbacks:
            return _json({"message": "Interaction has already been acknowledged.", "code": 40060}, 400)
        if time.monotonic() - it.created > 3.0:  # Discord's window for the first answer
            return _json({"message": "Unknown interaction", "code": 10062}, 404)
        kind = int(params.get("type", 0))
        data = params.get("data") or {}
        if kind not in (4, 5):
            return _json({"message": "Invalid Form Body", "code": 50035, "errors": {"type": kind}}, 400)
        content = str(data.get("content") or "")
        if kind == 4 and (not content.strip() or len(content) > MAX_CONTENT):
            return _json({"message": "Invalid Form Body", "code": 50035, "errors": {"data": "content"}}, 400)
        it.callbacks.append({"type": kind, "data": data})
        msg = self._interaction_message(it, content if kind == 4 else "", loading=kind == 5)
        it.original = int(msg["id"])
        if kind == 4:
            self.state.sent.append(
                {
                    "channel_id": it.channel_id,
                    "content": content,
                    "reply_to": None,
                    "id": it.original,
                    "payload": params,
                    "files": {},
                    "interaction": it.id,
                }
            )
        if request.query.get("with_response") not in ("1", "true", "True"):
            return web.Response(status=204)
        flags = int(data.get("flags") or 0)
        return _json(
            {
                "interaction": {
                    "id": str(it.id),
                    "type": 2,
                    "response_message_id": msg["id"],
                    "response_message_loading": kind == 5,
                    "response_message_ephemeral": bool(flags & 64),
                },
                "resource": {"type": kind, "message": msg},
            }
        )

    async def _followup(self, request: web.Request, params: dict[str, Any]) -> web.Response:
        it = self._interaction(request)
        if not it.callbacks:
            return _json({"message": "Unknown Webhook", "code": 10015}, 404)
        content = str(params.get("content") or "")
        if not content.strip() or len(content) > MAX_CONTENT:
            return _json({"message": "Invalid Form Body", "code": 50035, "errors": {"content": content[:20]}}, 400)
        msg = self._interaction_message(it, content)
        it.followups.append(int(msg["id"]))
        self.state.sent.append(
            {
                "channel_id": it.channel_id,
                "content": content,
                "reply_to": None,
                "id": int(msg["id"]),
                "payload": params,
                "files": {},
                "interaction": it.id,
            }
        )
        if request.query.get("wait") in ("true", "1", "True"):
            return _json(msg)
        return web.Response(status=204)

    def _original(self, request: web.Request) -> tuple[Interaction, dict[str, Any]]:
        it = self._interaction(request)
        if it.original is None or it.original not in self.state.messages:
            raise _ApiError(_json({"message": "Unknown Message", "code": 10008}, 404))
        return it, self.state.messages[it.original]

    async def _get_original(self, request: web.Request, params: dict[str, Any]) -> web.Response:
        return _json(self._original(request)[1])

    async def _edit_original(self, request: web.Request, params: dict[str, Any]) -> web.Response:
        it, msg = self._original(request)
        content = params.get("content")
        if content is not None:
            if len(content) > MAX_CONTENT:
                return _json({"message": "Invalid Form Body", "code": 50035, "errors": {"content": "too long"}}, 400)
            msg["content"] = content
        msg["flags"] = int(msg.get("flags", 0)) & ~128  # no longer "thinking"
        msg["edited_timestamp"] = _now_iso()
        self.state.edits.append({"channel_id": it.channel_id, "id": it.original, "content": msg["content"]})
        return _json(msg)

    async def _delete_original(self, request: web.Request, params: dict[str, Any]) -> web.Response:
        it, _ = self._original(request)
        assert it.original is not None
        del self.state.messages[it.original]
        self.state.deleted.append(it.original)
        return web.Response(status=204)

    # -- gateway ------------------------------------------------------------------------------

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self.connections.append(str(request.rel_url))
        self._sockets.add(ws)
        session: GatewaySession | None = None
        try:
            await _send(
                ws, {"op": HELLO, "d": {"heartbeat_interval": self.heartbeat_interval_ms, "_trace": ["fake-gateway"]}}
            )
            async for msg in ws:
                if msg.type != WSMsgType.TEXT:
                    continue
                frame = json.loads(msg.data)
                self.state.gateway_log.append(frame)
                op, d = frame.get("op"), frame.get("d")
                if op == HEARTBEAT:
                    await _send(ws, {"op": HEARTBEAT_ACK, "d": None})
                elif op == IDENTIFY:
                    session = await self._identify(ws, d)
                elif op == RESUME:
                    session = await self._resume(ws, d)
                elif op == REQUEST_MEMBERS:
                    await self._members_chunk(session, d)
                self._notify()
        finally:
            self._sockets.discard(ws)
            if session is not None and session.ws is ws:
                session.ws = None
            self._notify()
        return ws

    async def _identify(self, ws: web.WebSocketResponse, d: dict[str, Any]) -> GatewaySession | None:
        bot_id = self._bot_by_token(d.get("token"))
        if bot_id is None:
            await ws.close(code=4004, message=b"Authentication failed.")
            return None
        session = GatewaySession(session_id=uuid.uuid4().hex, identify=d)
        self.state.sessions[session.session_id] = session
        session.ws = ws
        ready = {
            "v": 10,
            "user": {
                **self.state.users[bot_id],
                "verified": True,
                "mfa_enabled": False,
                "flags": 0,
                "email": None,
            },
            "guilds": [{"id": str(g), "unavailable": True} for g in self.state.guilds if _in_shard(d, g)],
            "session_id": session.session_id,
            "session_type": "normal",
            "resume_gateway_url": f"ws://{self.host}:{self.port}/resume",
            "application": {"id": str(bot_id), "flags": 0},
            "private_channels": [],
            "relationships": [],
            "user_settings": {},
            "presences": [],
            "geo_ordered_rtc_regions": [],
            "_trace": ["fake-gateway"],
        }
        if d.get("shard"):
            ready["shard"] = d["shard"]
        await self._dispatch_to(session, "READY", ready)
        for gid in self.state.guilds:
            if _in_shard(d, gid):
                await self._dispatch_to(session, "GUILD_CREATE", self._guild_create(gid))
        return session

    async def _resume(self, ws: web.WebSocketResponse, d: dict[str, Any]) -> GatewaySession | None:
        session = self.state.sessions.get(d.get("session_id", ""))
        if session is None:
            await _send(ws, {"op": INVALID_SESSION, "d": False})
            return None
        session.ws = ws
        session.resumed += 1
        for frame in session.events:
            if frame["s"] > (d.get("seq") or 0):
                await _send(ws, frame)
        await self._dispatch_to(session, "RESUMED", {"_trace": ["fake-gateway"]})
        return session

    async def _members_chunk(self, session: GatewaySession | None, d: dict[str, Any]) -> None:
        if session is None:
            return
        gid = int(d["guild_id"])
        await self._dispatch_to(
            session,
            "GUILD_MEMBERS_CHUNK",
            {
                "guild_id": str(gid),
                "members": [_member(self.state.users[self.bot_id])],
                "chunk_index": 0,
                "chunk_count": 1,
                "not_found": [],
                "presences": [],
                **({"nonce": d["nonce"]} if d.get("nonce") else {}),
            },
        )

    async def _dispatch_to(self, session: GatewaySession, event: str, data: Any) -> None:
        session.seq += 1
        frame = {"op": DISPATCH, "t": event, "s": session.seq, "d": data}
        session.events.append(frame)
        if session.ws is not None:
            await _send(session.ws, frame)

    def _guild_create(self, gid: int) -> dict[str, Any]:
        guild = self.state.guilds[gid]
        return {
            "id": str(gid),
            "name": guild["name"],
            "icon": None,
            "splash": None,
            "discovery_splash": None,
            "banner": None,
            "description": None,
            "owner_id": str(self.user_id),
            "afk_channel_id": None,
            "afk_timeout": 300,
            "verification_level": 0,
            "default_message_notifications": 0,
            "explicit_content_filter": 0,
            "mfa_level": 0,
            "nsfw_level": 0,
            "premium_tier": 0,
            "premium_progress_bar_enabled": False,
            "preferred_locale": "en-US",
            "system_channel_id": None,
            "system_channel_flags": 0,
            "rules_channel_id": None,
            "public_updates_channel_id": None,
            "vanity_url_code": None,
            "features": [],
            "roles": [
                {
                    "id": str(gid),
                    "name": "@everyone",
                    "permissions": EVERYONE_PERMISSIONS,
                    "position": 0,
                    "color": 0,
                    "hoist": False,
                    "managed": False,
                    "mentionable": False,
                    "flags": 0,
                    "icon": None,
                    "unicode_emoji": None,
                }
            ],
            "emojis": [],
            "stickers": [],
            "joined_at": _now_iso(),
            "large": False,
            "unavailable": False,
            "member_count": 1,
            "members": [_member(self.state.users[self.bot_id])],
            "channels": [self.state.channels[c] for c in guild["channels"]],
            "threads": [],
            "presences": [],
            "voice_states": [],
            "stage_instances": [],
            "guild_scheduled_events": [],
            "soundboard_sounds": [],
        }


# -- helpers ------------------------------------------------------------------------------------


class _ApiError(Exception):
    def __init__(self, response: web.Response) -> None:
        self.response = response


def _json(body: Any, status: int = 200) -> web.Response:
    # Exactly "application/json": discord.py's json_or_text compares the header verbatim.
    return web.Response(body=json.dumps(body).encode(), status=status, content_type="application/json")


def _too_long() -> web.Response:
    """Discord's 400 for a message's content past ``MAX_CONTENT`` characters."""
    error = {"code": "BASE_TYPE_MAX_LENGTH", "message": f"Must be {MAX_CONTENT} or fewer in length."}
    return _json({"message": "Invalid Form Body", "code": 50035, "errors": {"content": {"_errors": [error]}}}, 400)


def _bucket(name: str) -> str:
    return uuid.uuid5(uuid.NAMESPACE_URL, name).hex[:16]


def _ratelimit_headers(response: web.Response, bucket: str, *, remaining: int, reset_after: float) -> None:
    response.headers.update(
        {
            "X-RateLimit-Limit": "5",
            "X-RateLimit-Remaining": str(remaining),
            "X-RateLimit-Reset": f"{time.time() + reset_after:.3f}",
            "X-RateLimit-Reset-After": f"{reset_after:.3f}",
            "X-RateLimit-Bucket": bucket,
            "Via": "1.1 google",
        }
    )


def _failure_response(failure: Failure, bucket: str) -> web.Response:
    if failure.status == 429:
        retry_after = float(failure.retry_after if failure.retry_after is not None else 1)
        response = _json(
            {
                "message": failure.description or "You are being rate limited.",
                "retry_after": retry_after,
                "global": False,
            },
            429,
        )
        _ratelimit_headers(response, bucket, remaining=0, reset_after=retry_after)
        # discord.py retries a 429 only when "Via" is present: a 429 without it comes from
        # Cloudflare (a ban), not from the API.
        response.headers["Retry-After"] = str(max(1, round(retry_after)))
        response.headers["X-RateLimit-Scope"] = "user"
        return response
    messages = {400: "400: Bad Request", 403: "Missing Permissions", 404: "404: Not Found"}
    codes = {403: 50013}
    response = _json(
        {
            "message": failure.description or messages.get(failure.status, f"{failure.status}: Internal Server Error"),
            "code": codes.get(failure.status, 0),
        },
        failure.status,
    )
    _ratelimit_headers(response, bucket, remaining=4, reset_after=1.0)
    return response


_send_locks: weakref.WeakKeyDictionary[web.WebSocketResponse, asyncio.Lock] = weakref.WeakKeyDictionary()


async def _send(ws: web.WebSocketResponse, frame: dict[str, Any]) -> None:
    """Send one frame; frames to one socket go out in the order they were queued."""
    lock = _send_locks.setdefault(ws, asyncio.Lock())
    async with lock:
        if not ws.closed:
            with contextlib.suppress(ConnectionError, RuntimeError):
                await ws.send_str(json.dumps(frame))


def _now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat()


def _user(user_id: int, name: str, *, bot: bool = False) -> dict[str, Any]:
    user = {
        "id": str(user_id),
        "username": name,
        "discriminator": "0",
        "global_name": name,
        "avatar": None,
        "public_flags": 0,
    }
    if bot:
        user["bot"] = True
    return user


def _member(user: dict[str, Any] | None) -> dict[str, Any]:
    member: dict[str, Any] = {
        "roles": [],
        "joined_at": _now_iso(),
        "deaf": False,
        "mute": False,
        "flags": 0,
        "pending": False,
        "nick": None,
        "avatar": None,
        "premium_since": None,
    }
    if user is not None:
        member["user"] = user
    return member


def _in_shard(identify: dict[str, Any] | None, guild_id: int | None) -> bool:
    """Whether a session IDENTIFYed with ``shard: [i, n]`` gets this guild's events, by
    Discord's rule ``(guild_id >> 22) % n == i``; DMs (no guild) go to shard 0."""
    shard = (identify or {}).get("shard")
    if not shard:
        return True
    i, n = int(shard[0]), int(shard[1])
    return (0 if guild_id is None else (guild_id >> 22) % n) == i
