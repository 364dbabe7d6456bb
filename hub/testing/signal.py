"""A loopback fake of signal-cli-rest-api (``bbernhard/signal-cli-rest-api``) in json-rpc
mode, following its documented endpoints and message shapes (its Swagger's ``receive.*``
schemas): ``GET /v1/about`` and ``/v1/accounts``, ``POST /v2/send`` (recipients, a group as
``group.<base64>``, ``base64_attachments`` as data URIs, quotes, ``text_mode``),
``POST /v1/reactions/{number}``, ``POST /v1/receipts/{number}``,
``PUT /v1/typing-indicator/{number}``, ``GET /v1/attachments/{id}``, ``GET /v1/groups/{number}``
and the receive websocket ``GET /v1/receive/{number}``.

As the real API does, a frame is written to the websockets connected when it is delivered
and dropped when none is (signal-cli has taken it from Signal's servers by then); each frame
is ``{"envelope": {...}, "account": "<number>"}``. `FakeSignal.message()` builds the
envelope of a user's message (text, group, mentions, a quote, attachments, a reaction, an
edit); `FakeSignal.deliver()` writes it; `FakeSignal.drop_connections()` closes the
sockets from the server's side, as a restarted container does. Errors are the API's:
``400 {"error": "..."}``, and 429 with ``challenge_tokens`` for Signal's rate limit
(``fail_next("send", status=429)``).

Run it alone for the quick start: ``python -m hub.testing.signal --port 8080 --number
+15550001111`` serves the API and prints each message the bot sends; lines typed on its
standard input are delivered to the bot as a user's direct messages.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import itertools
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from .fakes import FakeServer, Recorded

__all__ = [
    "FakeSignal",
    "SignalState",
    "NUMBER",
    "BOT_UUID",
    "USER",
    "USER_UUID",
    "GROUP",
    "GROUP_INTERNAL",
    "group_of",
]

NUMBER = "+15550001111"
"""The bot's number, registered on the fake."""
BOT_UUID = "0b6e3a4c-1d2f-4a5b-8c9d-0e1f2a3b4c5d"
USER = "+15557654321"
USER_UUID = "5a1f0c2e-7b3d-4e8f-9a0b-1c2d3e4f5a6b"
GROUP_INTERNAL = base64.b64encode(bytes(range(32))).decode("ascii")
"""A group's internal id, as envelopes carry it (``groupInfo.groupId``: base64 of 32 bytes)."""


def group_of(internal: str) -> str:
    """The id the REST API sends to: ``group.`` and the base64 of the internal id."""
    return "group." + base64.b64encode(internal.encode("ascii")).decode("ascii")


GROUP = group_of(GROUP_INTERNAL)


@dataclass
class SignalState:
    """What the fake remembers (kept across a restart of the fake server)."""

    requests: list[Recorded] = field(default_factory=list)
    sent: list[dict[str, Any]] = field(default_factory=list)
    failures: list[Any] = field(default_factory=list)
    receipts: list[dict[str, Any]] = field(default_factory=list)
    reactions: list[dict[str, Any]] = field(default_factory=list)
    typing: list[str] = field(default_factory=list)  # recipients shown "typing..."
    attachments: dict[str, tuple[bytes, str, str]] = field(default_factory=dict)  # id -> bytes, mime, name
    delivered: list[dict[str, Any]] = field(default_factory=list)  # frames written to a socket
    dropped: list[dict[str, Any]] = field(default_factory=list)  # frames no socket was there for
    connections: int = 0  # websockets accepted, in all
    clock: Any = field(default_factory=lambda: itertools.count(int(time.time() * 1000)))


class FakeSignal(FakeServer):
    """signal-cli-rest-api for one registered number, and the messages Signal users send it."""

    def __init__(
        self,
        *,
        number: str = NUMBER,
        mode: str = "json-rpc",
        token: str = "",
        groups: dict[str, str] | None = None,
        state: SignalState | None = None,
    ) -> None:
        super().__init__()
        self.number = number
        self.mode = mode
        self.token = token
        self.groups = groups if groups is not None else {GROUP_INTERNAL: "Hub testers"}
        self.state = state or SignalState()
        self._sockets: set[web.WebSocketResponse] = set()

    # -- the REST API ----------------------------------------------------------------------

    def _build_app(self) -> web.Application:
        app = web.Application(client_max_size=128 * 1024 * 1024)
        app.router.add_get("/v1/about", self._about)
        app.router.add_get("/v1/health", self._health)
        app.router.add_get("/v1/accounts", self._accounts)
        app.router.add_get("/v1/groups/{number}", self._groups)
        app.router.add_post("/v2/send", self._send)
        app.router.add_post("/v1/reactions/{number}", self._reaction)
        app.router.add_post("/v1/receipts/{number}", self._receipt)
        app.router.add_put("/v1/typing-indicator/{number}", self._typing)
        app.router.add_delete("/v1/typing-indicator/{number}", self._typing)
        app.router.add_get("/v1/attachments/{id}", self._attachment)
        app.router.add_get("/v1/receive/{number}", self._receive)
        return app

    async def _record(self, name: str, request: web.Request) -> tuple[Recorded, Any]:
        body: Any = None
        if request.can_read_body:
            try:
                body = await request.json()
            except ValueError:
                body = None
        params = {**request.query, **(body if isinstance(body, dict) else {})}
        rec = self._record_request(name, request, params)
        return rec, body

    def _answer(self, rec: Recorded, status: int, body: Any = None) -> web.Response:
        rec.status = status
        self._notify()
        if body is None:
            return web.Response(status=status)
        return web.json_response(body, status=status)

    def _refusal(self, name: str, rec: Recorded, request: web.Request) -> web.Response | None:
        if self.token and not hmac.compare_digest(request.headers.get("Authorization", ""), f"Bearer {self.token}"):
            return self._answer(rec, 401, {"error": "Unauthorized"})
        failure = self._take_failure(name)
        if failure is None:
            return None
        if failure.status == 429:
            message = (
                "Failed to send message due to rate limiting. Use the attached challenge tokens to lift the "
                "rate limit restrictions via the '/v1/accounts/{number}/rate-limit-challenge' endpoint."
            )
            body = {"error": message, "challenge_tokens": ["a4d3c0f1-fake"], "account": self.number}
            resp = self._answer(rec, 429, body)
            if failure.retry_after is not None:
                resp.headers["Retry-After"] = str(int(failure.retry_after))
            return resp
        return self._answer(rec, failure.status, {"error": failure.description or f"error {failure.status}"})

    def _unknown_number(self, rec: Recorded, number: str) -> web.Response | None:
        if number != self.number:
            return self._answer(rec, 400, {"error": f"User {number} is not registered."})
        return None

    async def _about(self, request: web.Request) -> web.Response:
        rec, _ = await self._record("about", request)
        body = {
            "versions": ["v1", "v2"],
            "build": 2,
            "mode": self.mode,
            "version": "0.97-fake",
            "capabilities": {"v2/send": ["quotes", "mentions"]},
        }
        return self._answer(rec, 200, body)

    async def _health(self, request: web.Request) -> web.Response:
        rec, _ = await self._record("health", request)
        return self._answer(rec, 204)

    async def _accounts(self, request: web.Request) -> web.Response:
        rec, _ = await self._record("accounts", request)
        return self._refusal("accounts", rec, request) or self._answer(rec, 200, [self.number])

    async def _groups(self, request: web.Request) -> web.Response:
        rec, _ = await self._record("groups", request)
        refused = self._refusal("groups", rec, request) or self._unknown_number(rec, request.match_info["number"])
        if refused is not None:
            return refused
        groups = [
            {"name": name, "id": group_of(internal), "internal_id": internal, "members": [self.number, USER]}
            for internal, name in self.groups.items()
        ]
        return self._answer(rec, 200, groups)

    async def _send(self, request: web.Request) -> web.Response:
        rec, body = await self._record("send", request)
        if not isinstance(body, dict):
            return self._answer(rec, 400, {"error": "Couldn't process request - invalid request"})
        refused = self._refusal("send", rec, request)
        if refused is not None:
            return refused
        recipients = list(body.get("recipients") or []) + ([body["recipient"]] if body.get("recipient") else [])
        if not recipients:
            return self._answer(rec, 400, {"error": "Couldn't process request - please provide at least one recipient"})
        if not body.get("number"):
            return self._answer(rec, 400, {"error": "Couldn't process request - please provide a valid number"})
        refused = self._unknown_number(rec, str(body["number"]))
        if refused is not None:
            return refused
        try:
            files = [_attachment_of(a) for a in body.get("base64_attachments") or []]
            for r in recipients:
                self._check_recipient(str(r))
        except ValueError as e:
            return self._answer(rec, 400, {"error": str(e)})
        stamp = next(self.state.clock)
        for r in recipients:
            sent: dict[str, Any] = {
                "to": r,
                "text": body.get("message") or "",
                "timestamp": stamp,
                "text_mode": body.get("text_mode"),
                "files": files,
            }
            if body.get("quote_timestamp") is not None:
                sent["quote"] = {
                    "timestamp": body["quote_timestamp"],
                    "author": body.get("quote_author"),
                    "text": body.get("quote_message"),
                }
            self.state.sent.append(sent)
        return self._answer(rec, 201, {"timestamp": str(stamp)})

    def _check_recipient(self, r: str) -> None:
        """As the REST API tells a group (``group.`` + base64 twice, 32 bytes) from a number."""
        if r.startswith("group."):
            try:
                raw = base64.b64decode(base64.b64decode(r[6:], validate=True), validate=True)
            except (binascii.Error, ValueError):
                raise ValueError(f"Invalid identifier {r}") from None
            if len(raw) != 32:
                raise ValueError(f"Invalid Signal group size ({len(raw)}")
            internal = base64.b64decode(r[6:]).decode("ascii")
            if internal not in self.groups:
                raise ValueError("Unknown group")
            return
        if r.startswith("+") and r[1:].isdigit():
            return
        try:
            uuid.UUID(r)
        except ValueError:
            raise ValueError(f"Invalid recipient {r}") from None

    async def _reaction(self, request: web.Request) -> web.Response:
        rec, body = await self._record("reaction", request)
        refused = self._refusal("reaction", rec, request) or self._unknown_number(rec, request.match_info["number"])
        if refused is not None:
            return refused
        body = body if isinstance(body, dict) else {}
        for key in ("recipient", "reaction", "target_author", "timestamp"):
            if not body.get(key):
                return self._answer(rec, 400, {"error": f"Couldn't process request - {key} missing"})
        self.state.reactions.append(dict(body))
        return self._answer(rec, 204)

    async def _receipt(self, request: web.Request) -> web.Response:
        rec, body = await self._record("receipt", request)
        refused = self._refusal("receipt", rec, request) or self._unknown_number(rec, request.match_info["number"])
        if refused is not None:
            return refused
        body = body if isinstance(body, dict) else {}
        if body.get("receipt_type") not in ("read", "viewed"):
            return self._answer(rec, 400, {"error": "Couldn't process request - receipt type must be read or viewed"})
        if not body.get("recipient") or not body.get("timestamp"):
            return self._answer(rec, 400, {"error": "Couldn't process request - recipient missing"})
        self.state.receipts.append(dict(body))
        return self._answer(rec, 204)

    async def _typing(self, request: web.Request) -> web.Response:
        rec, body = await self._record("typing", request)
        refused = self._refusal("typing", rec, request) or self._unknown_number(rec, request.match_info["number"])
        if refused is not None:
            return refused
        if request.method == "PUT":
            self.state.typing.append(str((body or {}).get("recipient")))
        return self._answer(rec, 204)

    async def _attachment(self, request: web.Request) -> web.Response:
        rec, _ = await self._record("attachment", request)
        refused = self._refusal("attachment", rec, request)
        if refused is not None:
            return refused
        found = self.state.attachments.get(request.match_info["id"])
        if found is None:
            return self._answer(rec, 404, {"error": "No attachment with that name found"})
        rec.status = 200
        self._notify()
        return web.Response(body=found[0], content_type=found[1])

    async def _receive(self, request: web.Request) -> web.StreamResponse:
        rec, _ = await self._record("receive", request)
        refused = self._refusal("receive", rec, request)
        if refused is not None:
            return refused
        if self.mode not in ("json-rpc", "json-rpc-native"):  # a plain GET of queued messages there
            return self._answer(rec, 200, [])
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        rec.status = 101
        self._sockets.add(ws)
        self.state.connections += 1
        self._notify()
        try:
            async for msg in ws:  # the API reads only pings and closes from its clients
                if msg.type == WSMsgType.ERROR:
                    break
        finally:
            self._sockets.discard(ws)
            self._notify()
        return ws

    # -- what Signal users send ------------------------------------------------------------

    @property
    def connected(self) -> int:
        """Websockets connected now."""
        return len(self._sockets)

    async def wait_connected(self, n: int = 1, timeout: float = 5) -> None:
        """Until ``n`` websockets were accepted in all (a reconnect is one more)."""
        await self.wait_for(lambda: self.state.connections >= n and self.connected > 0, timeout)

    def attachment(self, data: bytes, mime: str, *, filename: str = "") -> dict[str, Any]:
        """An attachment signal-cli downloaded, as an envelope lists it (served at its id)."""
        ext = mime.split("/")[-1].split(";")[0]
        att_id = f"{uuid.uuid4().hex[:20]}.{ext}"
        self.state.attachments[att_id] = (data, mime, filename)
        out: dict[str, Any] = {"contentType": mime, "id": att_id, "size": len(data), "uploadTimestamp": 0}
        if filename:
            out["filename"] = filename
        return out

    def message(
        self,
        text: str | None = None,
        *,
        frm: str | None = USER,
        uuid_: str = USER_UUID,
        name: str = "Ada",
        group: str | None = None,
        mention_bot: bool = False,
        mentions: list[dict[str, Any]] | None = None,
        quote: dict[str, Any] | None = None,
        attachments: list[dict[str, Any]] | None = None,
        reaction: dict[str, Any] | None = None,
        edit_of: int | None = None,
        timestamp: int | None = None,
        extra: dict[str, Any] | None = None,
    ) -> tuple[dict[str, Any], int]:
        """A frame of a user's message, and its timestamp (with the author, its id).

        ``frm=None`` is a user who hides their number (known by ``uuid_`` alone); ``group`` an
        internal group id (``GROUP_INTERNAL``); ``mention_bot`` puts a mention of the bot (by
        number and UUID) before the text, as Signal writes it (U+FFFC, offsets in UTF-16).
        """
        stamp = timestamp if timestamp is not None else next(self.state.clock)
        data: dict[str, Any] = {"timestamp": stamp, "expiresInSeconds": 0, "viewOnce": False}
        body = text
        all_mentions = list(mentions or [])
        if mention_bot:
            body = "\ufffc " + (text or "")
            all_mentions.insert(0, {"name": "Hub", "number": self.number, "uuid": BOT_UUID, "start": 0, "length": 1})
        if body is not None:
            data["message"] = body
        if all_mentions:
            data["mentions"] = all_mentions
        if group is not None:
            data["groupInfo"] = {
                "groupId": group,
                "groupName": self.groups.get(group, ""),
                "revision": 3,
                "type": "DELIVER",
            }
        if quote is not None:
            data["quote"] = quote
        if attachments:
            data["attachments"] = attachments
        if reaction is not None:
            data["reaction"] = reaction
        data.update(extra or {})
        envelope: dict[str, Any] = {
            "source": frm or uuid_,
            "sourceNumber": frm,
            "sourceUuid": uuid_,
            "sourceName": name,
            "sourceDevice": 1,
            "timestamp": stamp,
            "serverReceivedTimestamp": stamp + 40,
            "serverDeliveredTimestamp": stamp + 90,
        }
        if edit_of is not None:
            envelope["editMessage"] = {"targetSentTimestamp": edit_of, "dataMessage": data}
        else:
            envelope["dataMessage"] = data
        return {"envelope": envelope, "account": self.number}, stamp

    def quote_of(self, sent: dict[str, Any]) -> dict[str, Any]:
        """A quote of a message the bot sent (one of `sent`), as a user's reply carries it."""
        return {
            "id": sent["timestamp"],
            "author": self.number,
            "authorNumber": self.number,
            "authorUuid": BOT_UUID,
            "text": sent["text"],
            "attachments": [],
        }

    def receipt(self, *timestamps: int, frm: str = USER) -> dict[str, Any]:
        """A delivery receipt a user's phone sends for the bot's messages (not a message)."""
        stamp = next(self.state.clock)
        envelope = {
            "source": frm,
            "sourceNumber": frm,
            "sourceUuid": USER_UUID,
            "sourceName": "Ada",
            "sourceDevice": 1,
            "timestamp": stamp,
            "serverReceivedTimestamp": stamp,
            "serverDeliveredTimestamp": stamp,
            "receiptMessage": {
                "when": stamp,
                "isDelivery": True,
                "isRead": False,
                "isViewed": False,
                "timestamps": list(timestamps),
            },
        }
        return {"envelope": envelope, "account": self.number}

    async def deliver(self, frame: dict[str, Any] | str) -> int:
        """Write a frame to every connected websocket, as the API does; returns how many
        took it (0: dropped, as the real API drops it)."""
        text = frame if isinstance(frame, str) else json.dumps(frame)
        written = 0
        for ws in list(self._sockets):
            try:
                await ws.send_str(text)
                written += 1
            except (ConnectionError, RuntimeError):
                self._sockets.discard(ws)
        record = frame if isinstance(frame, dict) else {"raw": frame}
        (self.state.delivered if written else self.state.dropped).append(record)
        self._notify()
        return written

    async def drop_connections(self) -> None:
        """Close every websocket from the server's side (a restarted container)."""
        for ws in list(self._sockets):
            await ws.close()
        self._sockets.clear()
        self._notify()

    async def _before_cleanup(self) -> None:
        await self.drop_connections()


def _attachment_of(uri: str) -> dict[str, Any]:
    """``data:<mime>;filename=<name>;base64,<data>`` (or bare base64), as ``/v2/send`` takes it."""
    mime, name, b64 = "application/octet-stream", "", uri
    if uri.startswith("data:"):
        head, sep, b64 = uri[5:].partition(",")
        if not sep or not head.endswith(";base64"):
            raise ValueError("Couldn't process request - invalid attachment")
        fields = head[: -len(";base64")].split(";")
        mime = fields[0] or mime
        for f in fields[1:]:
            if f.startswith("filename="):
                name = f[len("filename=") :]
    try:
        data = base64.b64decode(b64, validate=True)
    except binascii.Error:
        raise ValueError("Couldn't process request - invalid base64 attachment") from None
    return {"mime": mime, "name": name, "data": data}


async def _main(port: int, number: str) -> None:  # pragma: no cover - a program for the quick start
    import sys

    fake = FakeSignal(number=number)
    fake.port = port
    async with fake:
        print(
            f"fake signal-cli-rest-api (json-rpc mode) on {fake.base_url} for {number}; type a message and Enter",
            flush=True,
        )

        shown = [0]

        def more() -> bool:
            return len(fake.sent) > shown[0]

        async def show() -> None:
            while True:
                await fake.wait_for(more, timeout=3600)
                for m in fake.sent[shown[0] :]:
                    print(f"bot -> {m['to']}: {m['text']}", flush=True)
                shown[0] = len(fake.sent)

        shower = asyncio.get_running_loop().create_task(show())
        loop = asyncio.get_running_loop()
        try:
            while line := await loop.run_in_executor(None, sys.stdin.readline):
                if line.strip():
                    frame, _ = fake.message(line.strip())
                    print(f"delivered to {await fake.deliver(frame)} websocket(s)", flush=True)
        finally:
            shower.cancel()


if __name__ == "__main__":  # pragma: no cover
    import argparse

    parser = argparse.ArgumentParser(description="A loopback fake of signal-cli-rest-api in json-rpc mode.")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--number", default=NUMBER)
    ns = parser.parse_args()
    asyncio.run(_main(ns.port, ns.number))
