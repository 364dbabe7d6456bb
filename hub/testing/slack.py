"""A fake Slack for slack-sdk and slack-bolt: the Web API and the Socket Mode websocket.

Point the real clients at it with ``AsyncWebClient(base_url=f"{fake.api_url}")`` (the
extension's ``base_url``); ``apps.connections.open`` answers this server's websocket URL, so
bolt's ``AsyncSocketModeHandler`` connects here as it would to Slack.

- Web API methods are ``POST /api/<method>`` (form, JSON, or nothing; ``files.info`` is a
  GET); answers are ``{"ok": true, ...}`` or Slack's ``{"ok": false, "error": ...}``, and a
  429 carries ``Retry-After``. ``chat.postMessage`` and ``chat.update`` check the bot token,
  the block's 3000-character limit and that a thread exists, as Slack does.
- Socket Mode: each connection gets ``hello``; `FakeSlack.push_message` and
  `FakeSlack.push_command` send envelopes to the newest connection; an envelope the app
  does not acknowledge is sent again, with a new envelope id and the same event, when a new
  connection opens (Slack redelivers unacknowledged events).
- Files: ``files.info`` gives a ``url_private_download`` on ``files.slack.com`` (served here,
  reached through the test's resolver) that needs the bot token; uploads go through
  ``files.getUploadURLExternal``, a POST to the upload URL and ``files.completeUploadExternal``.
- Slash commands' ``response_url`` is ``/respond/<trigger id>`` here.

All state is in `SlackState`, so it outlives one server (restart tests).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import web

from .fakes import FakeServer, Recorded

__all__ = ["FakeSlack", "SlackState", "BOT_TOKEN", "APP_TOKEN", "SIGNING_SECRET", "sign"]

BOT_TOKEN = "xoxb-test-token"
APP_TOKEN = "xapp-test-token"
SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
FILES_HOST = "files.slack.com"
MAX_BLOCK_TEXT = 3000


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """Slack's request signature: ``v0=`` and the HMAC-SHA256 of ``v0:TS:BODY``."""
    base = f"v0:{timestamp}:".encode() + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


@dataclass
class SlackState:
    """Everything the fake knows; plain data, so it survives a server restart.

    ``sent``: messages the bot posted (``channel``, ``ts``, ``text`` (the plain fallback),
    ``mrkdwn`` (the section block's text, or None), ``thread_ts``). ``messages``: every
    message by ``(channel, ts)`` as it is now (edits applied). ``envelopes``: every envelope
    pushed, with ``acked`` and the ack's ``payload``. ``responses``: what was posted to
    command response URLs.
    """

    team: str = "T0001"
    bot_token: str = BOT_TOKEN
    """The tokens this fake's app accepts (another app, a hub's second account, has its own)."""
    app_token: str = APP_TOKEN
    bot_user: str = "UBOT0001"
    bot_id: str = "BBOT0001"
    user: str = "UHUMAN01"
    channel: str = "C0000001"
    dm: str = "D0000001"
    requests: list[Recorded] = field(default_factory=list)
    sent: list[dict[str, Any]] = field(default_factory=list)
    failures: list[Any] = field(default_factory=list)
    messages: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    envelopes: list[dict[str, Any]] = field(default_factory=list)
    responses: list[dict[str, Any]] = field(default_factory=list)
    edits: list[dict[str, Any]] = field(default_factory=list)
    deleted: list[tuple[str, str]] = field(default_factory=list)
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    uploads: list[dict[str, Any]] = field(default_factory=list)
    downloads: list[dict[str, Any]] = field(default_factory=list)
    connections: int = 0
    clock: int = 1_700_000_000
    counter: itertools.count = field(default_factory=lambda: itertools.count(1))

    def next_ts(self) -> str:
        return f"{self.clock + next(self.counter)}.000100"


class FakeSlack(FakeServer):
    """The fake server; see the module's docstring."""

    def __init__(self, state: SlackState | None = None) -> None:
        super().__init__()
        self.state = state or SlackState()
        self._sockets: list[web.WebSocketResponse] = []
        self.hold_acks = False  # True: envelopes are taken but their acks ignored (a crash before the ack)

    # -- addresses ------------------------------------------------------------------------

    @property
    def api_url(self) -> str:
        return f"{self.base_url}/api/"

    @property
    def files_base(self) -> str:
        """Where file downloads are served: Slack's file host's name, on this fake's port."""
        return f"http://{FILES_HOST}:{self.port}"

    # -- what a test pushes ---------------------------------------------------------------

    def push_message(
        self,
        channel: str | None = None,
        text: str = "hi",
        *,
        user: str | None = None,
        thread_ts: str | None = None,
        files: list[dict[str, Any]] | None = None,
        bot_id: str | None = None,
        subtype: str | None = None,
        mention_event: bool = True,
    ) -> str:
        """A message posted in ``channel`` (default: the test channel): its ``message`` event,
        and its ``app_mention`` event when it mentions the bot, as Slack sends both; its ``ts``."""
        st = self.state
        channel = channel or st.channel
        ts = st.next_ts()
        event: dict[str, Any] = {
            "type": "message",
            "channel": channel,
            "user": user if user is not None else st.user,
            "text": text,
            "ts": ts,
            "event_ts": ts,
            "team": st.team,
            "channel_type": "im" if channel.startswith("D") else "channel",
        }
        if thread_ts:
            event["thread_ts"] = thread_ts
        if files:
            event["files"] = files
            event["subtype"] = "file_share"
        if bot_id:
            event["bot_id"] = bot_id
            event["subtype"] = "bot_message"
        if subtype:
            event["subtype"] = subtype
        st.messages[(channel, ts)] = dict(event)
        self._push_event(event)
        if mention_event and f"<@{st.bot_user}>" in text and not channel.startswith("D"):
            mention = {k: v for k, v in event.items() if k not in ("channel_type", "subtype")}
            mention["type"] = "app_mention"
            self._push_event(mention)
        return ts

    def _push_event(self, event: dict[str, Any]) -> None:
        st = self.state
        body = {
            "token": "verification-token",
            "team_id": st.team,
            "api_app_id": "A0001",
            "event": event,
            "type": "event_callback",
            "event_id": f"Ev{len(st.envelopes) + 1:08d}",
            "event_time": int(float(event["ts"])),
            "authorizations": [{"team_id": st.team, "user_id": st.bot_user, "is_bot": True}],
        }
        self.push_envelope("events_api", body)

    def push_command(self, command: str, text: str = "", *, channel: str | None = None, user: str | None = None) -> str:
        """A slash command typed in ``channel``; its trigger id."""
        st = self.state
        trigger = f"trig.{next(st.counter)}"
        payload = {
            "token": "verification-token",
            "team_id": st.team,
            "channel_id": channel or st.channel,
            "user_id": user or st.user,
            "user_name": "human",
            "command": command,
            "text": text,
            "api_app_id": "A0001",
            "response_url": f"{self.base_url}/respond/{trigger}",
            "trigger_id": trigger,
        }
        self.push_envelope("slash_commands", payload, accepts_response_payload=True)
        return trigger

    def push_press(self, channel: str, ts: str, action_id: str, *, user: str | None = None) -> str:
        """A user presses the button ``action_id`` of the bot's message ``(channel, ts)``: a
        ``block_actions`` interaction, as Slack sends it; its trigger id (the response, posted
        to its ``response_url``, is in ``state.responses`` under it)."""
        st = self.state
        message = st.messages[(channel, ts)]
        buttons = [e for b in message.get("blocks") or [] if b.get("type") == "actions" for e in b["elements"]]
        button = next((b for b in buttons if b["action_id"] == action_id), None)
        if button is None:
            raise KeyError(f"message {ts} in {channel} has no button {action_id!r}")
        trigger = f"trig.{next(st.counter)}"
        payload = {
            "type": "block_actions",
            "team": {"id": st.team},
            "user": {"id": user or st.user, "team_id": st.team},
            "api_app_id": "A0001",
            "token": "verification-token",
            "container": {"type": "message", "message_ts": ts, "channel_id": channel},
            "trigger_id": trigger,
            "channel": {"id": channel},
            "message": {"type": "message", "ts": ts, "text": message["text"], "blocks": message.get("blocks")},
            "response_url": f"{self.base_url}/respond/{trigger}",
            "actions": [
                {
                    "type": "button",
                    "action_id": action_id,
                    "block_id": next(b["block_id"] for b in message["blocks"] if b.get("type") == "actions"),
                    "value": button["value"],
                    "text": button["text"],
                    "action_ts": st.next_ts(),
                }
            ],
        }
        self.push_envelope("interactive", payload)
        return trigger

    def push_envelope(self, kind: str, payload: dict[str, Any], *, accepts_response_payload: bool = False) -> dict:
        st = self.state
        env = {
            "envelope_id": f"env-{len(st.envelopes) + 1}",
            "type": kind,
            "payload": payload,
            "accepts_response_payload": accepts_response_payload,
            "retry_attempt": 0,
            "retry_reason": "",
            "acked": False,
            "ack": None,
            "sent_to": 0,
        }
        st.envelopes.append(env)
        self._deliver(env)
        return env

    def _deliver(self, env: dict[str, Any]) -> None:
        live = [ws for ws in self._sockets if not ws.closed]
        if not live:
            return  # delivered when an app connects
        env["sent_to"] += 1
        frame = {k: env[k] for k in ("envelope_id", "type", "payload", "accepts_response_payload")}
        frame["retry_attempt"], frame["retry_reason"] = env["retry_attempt"], env["retry_reason"]
        asyncio.ensure_future(live[-1].send_str(json.dumps(frame)))

    def refresh(self) -> None:
        """Ask the connected app to reconnect (Slack's ``disconnect`` message, ``refresh_requested``)."""
        for ws in [ws for ws in self._sockets if not ws.closed]:
            frame = {"type": "disconnect", "reason": "refresh_requested", "debug_info": {"host": "fake"}}
            asyncio.ensure_future(ws.send_str(json.dumps(frame)))

    def acked(self, kind: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.state.envelopes if e["acked"] and (kind is None or e["type"] == kind)]

    def thread(self, channel: str, thread_ts: str) -> list[dict[str, Any]]:
        """The bot's messages in a thread, in order."""
        return [s for s in self.state.sent if s["channel"] == channel and s["thread_ts"] == thread_ts]

    def add_file(self, name: str, data: bytes, mimetype: str, *, url: str | None = None) -> dict[str, Any]:
        """A file someone shared; the dict to put in a message's ``files``."""
        st = self.state
        fid = f"F{len(st.files) + 1:07d}"
        url = url or f"{self.files_base}/files-pri/{st.team}-{fid}/{name}"
        st.files[fid] = {"id": fid, "name": name, "data": data, "mimetype": mimetype, "url": url}
        return {"id": fid, "name": name, "mimetype": mimetype, "size": len(data), "url_private": url}

    # -- the server -----------------------------------------------------------------------

    def _build_app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_get("/link", self._socket)
        app.router.add_post("/upload/{file_id}", self._upload)
        app.router.add_get("/files-pri/{path:.*}", self._download)
        app.router.add_post("/respond/{trigger}", self._respond)
        return app

    async def _before_cleanup(self) -> None:
        for ws in list(self._sockets):
            await ws.close()
        self._sockets.clear()

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        st = self.state
        st.connections += 1
        self._sockets.append(ws)
        await ws.send_str(json.dumps({"type": "hello", "num_connections": 1, "connection_info": {"app_id": "A0001"}}))
        # what was never acknowledged is delivered again, as a retry
        for env in st.envelopes:
            if not env["acked"] and env["sent_to"]:
                env["retry_attempt"] += 1
                env["retry_reason"] = "timeout"
                env["envelope_id"] = f"{env['envelope_id']}-r{env['retry_attempt']}"
                self._deliver(env)
            elif not env["sent_to"]:
                self._deliver(env)
        self._notify()
        try:
            async for msg in ws:
                if msg.type != web.WSMsgType.TEXT:
                    continue
                data = json.loads(msg.data)
                for env in st.envelopes:
                    if env["envelope_id"] == data.get("envelope_id") and not self.hold_acks:
                        env["acked"] = True
                        env["ack"] = data.get("payload")
                self._notify()
        finally:
            if ws in self._sockets:
                self._sockets.remove(ws)
        return ws

    async def _params(self, request: web.Request) -> dict[str, Any]:
        params: dict[str, Any] = dict(request.query)
        if request.content_type == "application/json":
            params.update(await request.json())
        elif request.can_read_body:
            params.update(dict(parse_qsl((await request.read()).decode())))
        for key in ("blocks", "files", "file_uploads"):
            if isinstance(params.get(key), str):
                params[key] = json.loads(params[key])
        return params

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params = await self._params(request)
        rec = self._record_request(method, request, params)
        try:
            failure = self._take_failure(method)
            if failure is not None:
                rec.status = failure.status
                headers = {"Retry-After": str(int(failure.retry_after or 1))} if failure.status == 429 else {}
                error = failure.description or ("ratelimited" if failure.status == 429 else "internal_error")
                return web.json_response({"ok": False, "error": error}, status=failure.status, headers=headers)
            token = request.headers.get("Authorization", "").removeprefix("Bearer ")
            expected = self.state.app_token if method == "apps.connections.open" else self.state.bot_token
            if token != expected:
                rec.status = 200
                return web.json_response({"ok": False, "error": "invalid_auth"})
            handler = getattr(self, "_m_" + method.replace(".", "_"), None)
            if handler is None:
                rec.status = 200
                return web.json_response({"ok": False, "error": "unknown_method"})
            body = handler(params)
            rec.status = 200
            return web.json_response(body)
        finally:
            self._notify()

    # -- Web API methods ------------------------------------------------------------------

    def _m_auth_test(self, p: dict[str, Any]) -> dict[str, Any]:
        st = self.state
        return {
            "ok": True,
            "url": "https://test.slack.com/",
            "team": "Test",
            "user": "hubbot",
            "team_id": st.team,
            "user_id": st.bot_user,
            "bot_id": st.bot_id,
        }

    def _m_apps_connections_open(self, p: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "url": f"ws://{self.host}:{self.port}/link?ticket=t"}

    def _check_message(self, p: dict[str, Any]) -> str | None:
        blocks = p.get("blocks") or []
        for b in blocks:
            text = (b.get("text") or {}).get("text") or ""
            if len(text) > MAX_BLOCK_TEXT:
                return "invalid_blocks"
        if not p.get("text") and not blocks:
            return "no_text"
        return None

    def _m_chat_postMessage(self, p: dict[str, Any]) -> dict[str, Any]:
        st = self.state
        error = self._check_message(p)
        if error:
            return {"ok": False, "error": error}
        channel = p["channel"]
        thread = p.get("thread_ts") or None
        if thread and (channel, thread) not in st.messages:
            return {"ok": False, "error": "thread_not_found"}
        ts = st.next_ts()
        blocks = p.get("blocks") or []
        mrkdwn = blocks[0]["text"]["text"] if blocks else None
        msg = {"channel": channel, "ts": ts, "text": p.get("text", ""), "mrkdwn": mrkdwn, "thread_ts": thread}
        if len(blocks) > 1:  # Block Kit beyond the text (buttons): kept until an update replaces them
            msg["blocks"] = blocks
        st.sent.append(msg)
        st.messages[(channel, ts)] = dict(msg, user=st.bot_user, bot_id=st.bot_id)
        # Slack sends the bot's own message back as an event: the app must ignore it
        echo = {
            "type": "message",
            "channel": channel,
            "user": st.bot_user,
            "bot_id": st.bot_id,
            "text": p.get("text", ""),
            "ts": ts,
        }
        if thread:
            echo["thread_ts"] = thread
        self._push_event(echo)
        return {"ok": True, "channel": channel, "ts": ts, "message": {"text": p.get("text", ""), "ts": ts}}

    def _m_chat_update(self, p: dict[str, Any]) -> dict[str, Any]:
        st = self.state
        error = self._check_message(p)
        if error:
            return {"ok": False, "error": error}
        key = (p["channel"], p["ts"])
        if key not in st.messages:
            return {"ok": False, "error": "message_not_found"}
        blocks = p.get("blocks") or []
        mrkdwn = blocks[0]["text"]["text"] if blocks else None
        st.messages[key].update(text=p.get("text", ""), mrkdwn=mrkdwn, blocks=blocks)
        for s in st.sent:
            if (s["channel"], s["ts"]) == key:
                s.update(text=p.get("text", ""), mrkdwn=mrkdwn)
        st.edits.append({"channel": p["channel"], "ts": p["ts"], "text": p.get("text", ""), "mrkdwn": mrkdwn})
        return {"ok": True, "channel": p["channel"], "ts": p["ts"]}

    def _m_chat_delete(self, p: dict[str, Any]) -> dict[str, Any]:
        st = self.state
        key = (p["channel"], p["ts"])
        if key not in st.messages:
            return {"ok": False, "error": "message_not_found"}
        del st.messages[key]
        st.sent[:] = [s for s in st.sent if (s["channel"], s["ts"]) != key]
        st.deleted.append(key)
        return {"ok": True}

    def _m_files_info(self, p: dict[str, Any]) -> dict[str, Any]:
        f = self.state.files.get(p.get("file", ""))
        if f is None:
            return {"ok": False, "error": "file_not_found"}
        return {
            "ok": True,
            "file": {
                "id": f["id"],
                "name": f["name"],
                "mimetype": f["mimetype"],
                "size": len(f["data"]),
                "url_private": f["url"],
                "url_private_download": f["url"],
            },
        }

    def _m_files_getUploadURLExternal(self, p: dict[str, Any]) -> dict[str, Any]:
        st = self.state
        fid = f"FU{len(st.uploads) + 1:06d}"
        st.uploads.append({"id": fid, "filename": p.get("filename"), "length": int(p.get("length", 0)), "data": None})
        return {"ok": True, "file_id": fid, "upload_url": f"{self.base_url}/upload/{fid}"}

    def _m_files_completeUploadExternal(self, p: dict[str, Any]) -> dict[str, Any]:
        st = self.state
        files = p.get("files") or []
        out = []
        for f in files:
            (up,) = [u for u in st.uploads if u["id"] == f["id"]]
            if up["data"] is None:
                return {"ok": False, "error": "file_upload_not_completed"}
            up.update(channel=p.get("channel_id"), thread_ts=p.get("thread_ts"), title=f.get("title"))
            out.append({"id": up["id"], "name": up["filename"], "title": f.get("title")})
        return {"ok": True, "files": out}

    async def _upload(self, request: web.Request) -> web.Response:
        fid = request.match_info["file_id"]
        data = await request.read()
        for up in self.state.uploads:
            if up["id"] == fid:
                up["data"] = data
        self._notify()
        return web.Response(text="OK - " + str(len(data)))

    async def _download(self, request: web.Request) -> web.StreamResponse:
        st = self.state
        host = request.headers.get("Host", "").split(":")[0]
        auth = request.headers.get("Authorization", "")
        st.downloads.append({"path": request.path, "host": host, "auth": auth})
        self._notify()
        if auth != f"Bearer {self.state.bot_token}":
            # Slack answers a download without the token with its login page, not the file
            return web.Response(text="<html>sign in</html>", content_type="text/html")
        for f in st.files.values():
            if f["url"].endswith(request.path):
                return web.Response(body=f["data"], content_type=f["mimetype"])
        return web.Response(status=404)

    async def _respond(self, request: web.Request) -> web.Response:
        self.state.responses.append({"trigger": request.match_info["trigger"], **(await request.json())})
        self._notify()
        return web.Response(text="ok")

    # -- the Events API (the fake posting to the hub) --------------------------------------

    def signed(self, body: bytes, *, secret: str = SIGNING_SECRET, at: int | None = None) -> dict[str, str]:
        """Headers for a POST of ``body`` to the app's request URL, signed as Slack signs."""
        stamp = int(time.time()) if at is None else at
        return {"X-Slack-Request-Timestamp": str(stamp), "X-Slack-Signature": sign(secret, stamp, body)}
