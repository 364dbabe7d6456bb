"""A loopback fake of Meta's WhatsApp Cloud API, both ways: the Graph API the bot calls
(messages, read receipts and typing, media upload and download) and the webhooks Meta sends
(signed with ``X-Hub-Signature-256``, the GET verification).

The real client (``pywa_async``) is pointed at it through the extension's ``base_url``: its
requests to ``graph.facebook.com`` go to `FakeWhatsApp.base_url` instead. Media are
served at ``lookaside.fbsbx.com`` on the fake's port, so the extension's download goes
through its real host rules with only that name resolved here (`loopback_resolver()`).

As Meta does, the fake accepts a free-form message to a user who has not written within 24
hours (200, with a message id) and then fails it with a ``failed`` status webhook carrying
error 131047; `FakeWhatsApp.fail_code()` makes the next calls answer a Graph error
(131056 pair rate limit, 130429 throughput, ...).

Run it alone for the quick start: ``python -m hub.testing.whatsapp --port 8090
--webhook http://127.0.0.1:8080/whatsapp`` serves the Graph API and prints each message the
bot sends; lines typed on its standard input are delivered to the bot as a user's messages.
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

import aiohttp
from aiohttp import web

from .fakes import Failure, FakeServer, Recorded

__all__ = [
    "FakeWhatsApp",
    "WhatsAppState",
    "sign",
    "PHONE_NUMBER_ID",
    "TOKEN",
    "APP_SECRET",
    "VERIFY_TOKEN",
    "USER",
    "MEDIA_HOST",
    "WINDOW",
]

PHONE_NUMBER_ID = "106540352242922"
TOKEN = "EAAG-fake-whatsapp-access-token-0123456789"
APP_SECRET = "fake-app-secret-0123456789abcdef"
VERIFY_TOKEN = "fake-verify-token-0123456789"
USER = "15550001111"
MEDIA_HOST = "lookaside.fbsbx.com"
WINDOW = 24 * 3600.0
"""Seconds after a user's last message in which a free-form message is delivered."""


def sign(body: bytes, secret: str) -> str:
    """``X-Hub-Signature-256`` of ``body``: Meta's HMAC-SHA256 with the app secret."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@dataclass
class WhatsAppState:
    """What the fake remembers (kept across a restart of the fake server)."""

    requests: list[Recorded] = field(default_factory=list)
    sent: list[dict[str, Any]] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    codes: dict[int, int] = field(default_factory=dict)  # id(Failure) -> Graph error code
    reads: list[str] = field(default_factory=list)  # message ids marked read
    typing: list[str] = field(default_factory=list)  # message ids shown "typing" on
    media: dict[str, tuple[bytes, str, str]] = field(default_factory=dict)  # id -> bytes, mime, name
    last_inbound: dict[str, float] = field(default_factory=dict)  # wa_id -> when they last wrote
    statuses: list[dict[str, Any]] = field(default_factory=list)  # status webhooks delivered
    ids: Any = field(default_factory=lambda: itertools.count(1))


class FakeWhatsApp(FakeServer):
    """Meta's Graph API for one phone number, and the webhooks Meta would send to the hub."""

    def __init__(
        self,
        *,
        phone_number_id: str = PHONE_NUMBER_ID,
        token: str = TOKEN,
        app_secret: str = APP_SECRET,
        webhook_url: str = "",
        state: WhatsAppState | None = None,
        clock: Any = time.time,
    ) -> None:
        super().__init__()
        self.phone_number_id = phone_number_id
        self.token = token
        self.app_secret = app_secret
        self.webhook_url = webhook_url
        self.state = state or WhatsAppState()
        self.clock = clock
        self._session: aiohttp.ClientSession | None = None
        self._tasks: set[asyncio.Task[None]] = set()  # status webhooks on their way

    # -- the Graph API ---------------------------------------------------------------------

    def _build_app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/{version}/{phone}/messages", self._messages)
        app.router.add_post("/{version}/{phone}/media", self._upload)
        app.router.add_get("/whatsapp_business/attachments/", self._download)
        app.router.add_get("/{version}/{media_id}", self._media_url)
        return app

    def fail_code(self, code: int, *, name: str = "messages", status: int = 400, count: int = 1) -> Failure:
        """Make the next ``count`` calls of ``name`` (``messages``, ``media``, ``media_url``)
        answer a Graph error with ``code`` (131056, 130429, 131047, ...)."""
        failure = self.fail_next(name, status=status, retry_after=None, count=count, description=f"error {code}")
        self.state.codes[id(failure)] = code
        return failure

    def _authorized(self, request: web.Request) -> bool:
        return hmac.compare_digest(request.headers.get("Authorization", ""), f"Bearer {self.token}")

    def _error(self, rec: Recorded, status: int, code: int, message: str) -> web.Response:
        rec.status = status
        self._notify()
        body = {"error": {"message": message, "type": "OAuthException", "code": code, "fbtrace_id": "AbCdEf"}}
        return web.json_response(body, status=status)

    def _refusal(self, name: str, rec: Recorded, request: web.Request) -> web.Response | None:
        if not self._authorized(request):
            return self._error(rec, 401, 190, "Invalid OAuth access token - Cannot parse access token")
        failure = self._take_failure(name)
        if failure is not None:
            code = self.state.codes.get(id(failure), failure.status)
            return self._error(rec, failure.status, code, failure.description or f"error {code}")
        return None

    async def _messages(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except ValueError:
            body = None
        rec = self._record_request("messages", request, body if isinstance(body, dict) else {})
        if request.match_info["phone"] != self.phone_number_id:
            return self._error(rec, 400, 100, "Unsupported post request: unknown phone number id")
        refused = self._refusal("messages", rec, request)
        if refused is not None:
            return refused
        if not isinstance(body, dict) or body.get("messaging_product") != "whatsapp":
            return self._error(rec, 400, 100, "Invalid parameter: messaging_product")
        if body.get("status") == "read":  # a read receipt, with the typing indicator or not
            message_id = str(body.get("message_id"))
            self.state.reads.append(message_id)
            if body.get("typing_indicator"):
                self.state.typing.append(message_id)
            rec.status = 200
            self._notify()
            return web.json_response({"success": True})
        to, kind = str(body.get("to") or body.get("recipient") or ""), str(body.get("type") or "text")
        if not to or kind not in body:
            return self._error(rec, 400, 100, f"Invalid parameter: {kind}")
        wamid = f"wamid.fake{next(self.state.ids):06d}"
        message = {"id": wamid, "to": to, "type": kind, **_content(kind, body[kind])}
        if body.get("context"):
            message["reply_to"] = body["context"].get("message_id")
        self.state.sent.append(message)
        rec.status = 200
        self._notify()
        outside = self.clock() - self.state.last_inbound.get(to, float("-inf")) > WINDOW
        if outside and kind not in ("template", "reaction"):
            # Meta takes it, then fails it: the message is never delivered
            message["failed"] = 131047
            task = asyncio.get_running_loop().create_task(self._failed_status(wamid, to))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        body_out = {
            "messaging_product": "whatsapp",
            "contacts": [{"input": to, "wa_id": to}],
            "messages": [{"id": wamid}],
        }
        return web.json_response(body_out)

    async def _upload(self, request: web.Request) -> web.Response:
        form = await request.post()
        file = form.get("file")
        rec = self._record_request("media", request, {"type": form.get("type")})
        refused = self._refusal("media", rec, request)
        if refused is not None:
            return refused
        if not isinstance(file, web.FileField):
            return self._error(rec, 400, 100, "Invalid parameter: file")
        media_id = f"{next(self.state.ids) + 900000000000000}"
        mime = str(form.get("type") or file.content_type)
        self.state.media[media_id] = (file.file.read(), mime, file.filename)
        rec.status = 200
        self._notify()
        return web.json_response({"id": media_id})

    async def _media_url(self, request: web.Request) -> web.Response:
        media_id = request.match_info["media_id"]
        if media_id == self.phone_number_id:
            return await self._phone_number(request)
        rec = self._record_request("media_url", request, {"id": media_id})
        refused = self._refusal("media_url", rec, request)
        if refused is not None:
            return refused
        if media_id not in self.state.media:
            return self._error(rec, 404, 100, f"Unsupported get request. Object with ID '{media_id}' does not exist")
        data, mime, _ = self.state.media[media_id]
        rec.status = 200
        url = f"http://{MEDIA_HOST}:{self.port}/whatsapp_business/attachments/?mid={media_id}"
        body = {
            "messaging_product": "whatsapp",
            "url": url,
            "mime_type": mime,
            "sha256": hashlib.sha256(data).hexdigest(),
            "file_size": len(data),
            "id": media_id,
        }
        return web.json_response(body)

    async def _phone_number(self, request: web.Request) -> web.Response:
        rec = self._record_request("phone_number", request, dict(request.query))
        refused = self._refusal("phone_number", rec, request)
        if refused is not None:
            return refused
        rec.status = 200
        body = {
            "id": self.phone_number_id,
            "verified_name": "Hub Test",
            "display_phone_number": "+1 555-078-3881",
            "quality_rating": "GREEN",
            "throughput": {"level": "STANDARD"},
        }
        return web.json_response(body)

    async def _download(self, request: web.Request) -> web.StreamResponse:
        media_id = request.query.get("mid", "")
        rec = self._record_request("download", request, {"mid": media_id})
        if not self._authorized(request):
            rec.status = 401
            return web.Response(status=401)
        if media_id not in self.state.media:
            rec.status = 404
            return web.Response(status=404)
        data, mime, _ = self.state.media[media_id]
        rec.status = 200
        return web.Response(body=data, content_type=mime)

    # -- webhooks, as Meta sends them ------------------------------------------------------

    def _envelope(self, value: dict[str, Any]) -> dict[str, Any]:
        value = {"messaging_product": "whatsapp", "metadata": self._metadata(), **value}
        return {
            "object": "whatsapp_business_account",
            "entry": [{"id": "102290129340398", "changes": [{"value": value, "field": "messages"}]}],
        }

    def _metadata(self) -> dict[str, str]:
        return {"display_phone_number": "15550783881", "phone_number_id": self.phone_number_id}

    def message(
        self,
        text: str | None = None,
        *,
        frm: str = USER,
        name: str = "Ada",
        wamid: str | None = None,
        at: float | None = None,
        kind: str = "text",
        extra: dict[str, Any] | None = None,
    ) -> tuple[dict[str, Any], str]:
        """A ``messages`` webhook from ``frm``; returns it and its message id. The user's
        24-hour window opens at ``at`` (default: now)."""
        wamid = wamid or f"wamid.in{next(self.state.ids):06d}"
        at = self.clock() if at is None else at
        msg: dict[str, Any] = {"from": frm, "id": wamid, "timestamp": str(int(at)), "type": kind}
        if kind == "text":
            msg["text"] = {"body": text or ""}
        msg.update(extra or {})
        value = {"contacts": [{"profile": {"name": name}, "wa_id": frm, "user_id": f"US.{frm}"}], "messages": [msg]}
        self.state.last_inbound[frm] = max(self.state.last_inbound.get(frm, at), at)
        return self._envelope(value), wamid

    def media_message(
        self,
        data: bytes,
        mime: str,
        *,
        kind: str = "image",
        caption: str = "",
        filename: str = "",
        frm: str = USER,
        voice: bool = False,
    ) -> tuple[dict[str, Any], str]:
        """A picture, document or audio message: its bytes kept here, downloadable by its media
        id; ``voice`` marks audio as a voice note recorded in WhatsApp (``"voice": true``)."""
        media_id = f"{next(self.state.ids) + 800000000000000}"
        self.state.media[media_id] = (data, mime, filename)
        part: dict[str, Any] = {"id": media_id, "mime_type": mime, "sha256": hashlib.sha256(data).hexdigest()}
        if voice:
            part["voice"] = True
        if caption:
            part["caption"] = caption
        if filename:
            part["filename"] = filename
        return self.message(frm=frm, kind=kind, extra={kind: part})

    def status(
        self, wamid: str, status: str, *, to: str = USER, errors: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """A ``statuses`` webhook for a message the bot sent."""
        item: dict[str, Any] = {"id": wamid, "status": status, "timestamp": str(int(self.clock())), "recipient_id": to}
        if errors:
            item["errors"] = errors
        return self._envelope({"statuses": [item]})

    async def _failed_status(self, wamid: str, to: str) -> None:
        errors = [
            {
                "code": 131047,
                "title": "Re-engagement message",
                "message": "Re-engagement message",
                "error_data": {"details": "Message failed to send because more than 24 hours have passed"},
            }
        ]
        payload = self.status(wamid, "failed", to=to, errors=errors)
        self.state.statuses.append(payload)
        if self.webhook_url:
            try:
                await self.deliver(payload)
            except (aiohttp.ClientError, OSError):
                pass  # the hub is gone: Meta would retry; the test reads state.statuses
        self._notify()

    async def deliver(
        self, payload: dict[str, Any] | bytes, *, secret: str | None = None, signature: str | None = None
    ) -> tuple[int, str]:
        """POST a webhook to `webhook_url`, signed as Meta signs it; the answer's status and text."""
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        headers = {"Content-Type": "application/json"}
        headers["X-Hub-Signature-256"] = signature if signature is not None else sign(body, secret or self.app_secret)
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
        async with self._session.post(self.webhook_url, data=body, headers=headers) as resp:
            return resp.status, await resp.text()

    async def verify(self, verify_token: str, challenge: str = "1158201444") -> tuple[int, str]:
        """Meta's GET check of the webhook URL; the answer's status and text."""
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
        params = {"hub.mode": "subscribe", "hub.verify_token": verify_token, "hub.challenge": challenge}
        async with self._session.get(self.webhook_url, params=params) as resp:
            return resp.status, await resp.text()

    async def _before_cleanup(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._session is not None:
            await self._session.close()
            self._session = None


def _content(kind: str, value: Any) -> dict[str, Any]:
    """What a sent message carried, flattened for tests to read."""
    if not isinstance(value, dict):
        return {kind: value}
    if kind == "text":
        return {"text": value.get("body")}
    if kind == "reaction":
        return {"emoji": value.get("emoji"), "reply_to": value.get("message_id")}
    if kind == "template":
        return {**value, "template": value.get("name"), "language": (value.get("language") or {}).get("code")}
    return {
        "media_id": value.get("id"),
        "caption": value.get("caption"),
        "filename": value.get("filename"),
        **({"voice": True} if value.get("voice") else {}),
    }


async def _main(port: int, webhook: str) -> None:  # pragma: no cover - a program for the quick start
    import sys

    fake = FakeWhatsApp(webhook_url=webhook)
    fake.port = port
    async with fake:
        print(f"fake Graph API on {fake.base_url}; webhooks to {webhook}; type a message and Enter", flush=True)

        async def show() -> None:
            shown = [0]
            while True:
                await fake.wait_for(lambda: len(fake.sent) > shown[0], timeout=3600)
                for m in fake.sent[shown[0] :]:
                    print(f"bot -> {m['to']}: {m.get('text') or m}", flush=True)
                shown[0] = len(fake.sent)

        shower = asyncio.get_running_loop().create_task(show())
        loop = asyncio.get_running_loop()
        try:
            while line := await loop.run_in_executor(None, sys.stdin.readline):
                if line.strip():
                    payload, _ = fake.message(line.strip())
                    print(f"delivered: {await fake.deliver(payload)}", flush=True)
        finally:
            shower.cancel()


if __name__ == "__main__":  # pragma: no cover
    import argparse

    parser = argparse.ArgumentParser(description="A loopback fake of the WhatsApp Cloud API.")
    parser.add_argument("--port", type=int, default=8090)
    parser.add_argument("--webhook", default="http://127.0.0.1:8080/whatsapp")
    ns = parser.parse_args()
    asyncio.run(_main(ns.port, ns.webhook))
