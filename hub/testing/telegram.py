"""A fake Telegram Bot API server for python-telegram-bot.

Point the real client at it (the extension's ``base_url`` is ``f"{tg.base_url}/bot"``)::

    async with FakeTelegram() as tg:
        app = (Application.builder().token("123456:TEST")
               .base_url(f"{tg.base_url}/bot").base_file_url(f"{tg.base_url}/file/bot").build())
        tg.push_message(chat_id=42, text="hi")
        await tg.wait_sent(1)

Requests go to ``/bot{token}/{method}`` as form-urlencoded, JSON or multipart POSTs (GET
query strings work too); non-string form values are JSON-encoded by the client. Answers are
``{"ok": true, "result": ...}`` or Telegram's error shape. ``sendMessage`` checks
``parse_mode`` markup and the 4096-character limit the way Telegram does, so formatting
bugs fail in tests. All state is in ``TelegramState``: pass it to a new ``FakeTelegram`` to
simulate a server that outlives the bot (restart tests).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from .fakes import Failure, FakeServer, Recorded

__all__ = ["FakeTelegram", "TelegramState", "check_markup", "MarkupError"]

MAX_MESSAGE_LENGTH = 4096
# Form fields python-telegram-bot sends as plain strings: never JSON-decode these.
_STRING_FIELDS = {"text", "caption", "parse_mode", "action", "url", "title", "description"}


@dataclass
class TelegramState:
    """Everything the fake knows; plain data, so it survives a server restart.

    ``updates``: every update pushed, in order. ``confirmed_offset``: updates with a lower
    ``update_id`` were confirmed by a later ``getUpdates`` and are never delivered again.
    ``sent``: messages the bot sent (``chat_id``, ``text``, ``parse_mode``, ``reply_to``,
    ``message_id``, ``method``). ``chat_actions``: ``(chat_id, action)``.
    ``token``: when set, other tokens answer 401 like Telegram.
    """

    bot_id: int = 123456
    voice_forbidden: set[int] = field(default_factory=set)
    """Chats whose user's privacy settings refuse voice messages (sendVoice answers
    ``VOICE_MESSAGES_FORBIDDEN``, as Telegram does)."""
    bot_username: str = "test_bot"
    bot_first_name: str = "Test Bot"
    token: str | None = None
    updates: list[dict[str, Any]] = field(default_factory=list)
    confirmed_offset: int = 0
    next_update_id: int = 1000
    next_message_id: int = 1
    messages: dict[tuple[int, int], dict[str, Any]] = field(default_factory=dict)
    modes: dict[tuple[int, int], str | None] = field(default_factory=dict)
    """The parse_mode each message's text was last shown with (an edit that changes only
    the markup modifies the message, as Telegram compares text and entities)."""
    chats: dict[int, dict[str, Any]] = field(default_factory=dict)
    sent: list[dict[str, Any]] = field(default_factory=list)
    chat_actions: list[tuple[int, str]] = field(default_factory=list)
    commands: list[dict[str, Any]] = field(default_factory=list)
    command_menus: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    """``(scope as canonical JSON, language_code)`` → the commands ``setMyCommands`` set for it."""
    requests: list[Recorded] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    webhook_deleted: int = 0
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    """file_id → ``{"data", "path", "size"}``: what ``getFile`` and downloads serve."""
    downloads: list[str] = field(default_factory=list)
    """The file paths downloaded from ``/file/bot{token}/...``, in order."""
    streamed: int = 0
    """Bytes of streamed files (``add_file(stream=N)``) the client took before it hung up."""
    # webhook mode: what the last setWebhook registered (url "" = none), and how often it was called
    webhook_url: str = ""
    webhook_secret: str | None = None
    webhook_allowed_updates: list[str] | None = None
    webhook_set: int = 0
    callback_answers: list[dict[str, Any]] = field(default_factory=list)
    """``answerCallbackQuery`` calls: ``callback_query_id``, ``text``, ``show_alert``."""


class MarkupError(ValueError):
    """Text that Telegram would refuse for its ``parse_mode``; the message is Telegram's."""


class FakeTelegram(FakeServer):
    """Fake Bot API. ``tg.base_url`` is the server root; give the client ``base_url + "/bot"``.

    Helpers: ``push_message(...)``, ``push_update(dict)``, ``fail_next(method, ...)``,
    ``wait_sent(n)``, ``wait_calls(method, n)``; state: ``sent``, ``requests``,
    ``confirmed_offset``, ``pending_updates``, ``chat_actions``, ``commands``, ``menu(scope)``, ``state``.
    """

    def __init__(self, state: TelegramState | None = None, **bot: Any) -> None:
        super().__init__()
        self.state = state or TelegramState(**bot)
        self._poll_generation = 0

    # -- inspection ----------------------------------------------------------------------

    @property
    def confirmed_offset(self) -> int:
        """The highest ``offset`` a ``getUpdates`` sent: every update below it is confirmed."""
        return self.state.confirmed_offset

    @property
    def pending_updates(self) -> list[dict[str, Any]]:
        """Updates not yet confirmed (they would be delivered by the next poll)."""
        return [u for u in self.state.updates if u["update_id"] >= self.state.confirmed_offset]

    @property
    def chat_actions(self) -> list[tuple[int, str]]:
        return self.state.chat_actions

    @property
    def commands(self) -> list[dict[str, Any]]:
        """The last ``setMyCommands`` list."""
        return self.state.commands

    @property
    def bot_user(self) -> dict[str, Any]:
        s = self.state
        return {
            "id": s.bot_id,
            "is_bot": True,
            "first_name": s.bot_first_name,
            "username": s.bot_username,
        }

    # -- inbound events --------------------------------------------------------------------

    def push_update(self, update: dict[str, Any]) -> int:
        """Queue a raw update (``update_id`` is assigned); returns its ``update_id``."""
        update = {"update_id": self.state.next_update_id, **update}
        self.state.next_update_id += 1
        self.state.updates.append(update)
        self._notify()
        return update["update_id"]

    def push_message(
        self,
        *,
        chat_id: int,
        text: str,
        from_id: int | None = None,
        from_is_bot: bool = False,
        chat_type: str = "private",
        reply_to: int | None = None,
        entities: list[dict[str, Any]] | None = None,
        first_name: str | None = None,
        username: str | None = None,
        chat_title: str | None = None,
    ) -> tuple[int, int]:
        """A user's message arrives in ``chat_id``; returns ``(update_id, message_id)``.

        ``from_id`` defaults to ``chat_id`` (in a private chat they are the same). Without
        ``entities``, mentions (``@name``) and commands (``/cmd``) get entities like
        Telegram adds them. ``reply_to`` is a message id in that chat (the bot's or a user's).
        """
        from_id = chat_id if from_id is None else from_id
        user = {
            "id": from_id,
            "is_bot": from_is_bot,
            "first_name": first_name or f"User{from_id}",
            "username": username or f"user{from_id}",
        }
        if not from_is_bot:
            user["language_code"] = "en"
        if chat_type == "private":
            chat = {"id": chat_id, "type": "private", "first_name": user["first_name"], "username": user["username"]}
        else:
            chat = {"id": chat_id, "type": chat_type, "title": chat_title or f"Chat {chat_id}"}
        self.state.chats.setdefault(chat_id, chat)
        message: dict[str, Any] = {
            "message_id": self._new_message_id(),
            "from": user,
            "chat": self.state.chats[chat_id],
            "date": int(time.time()),
            "text": text,
        }
        ents = _auto_entities(text) if entities is None else entities
        if ents:
            message["entities"] = ents
        if reply_to is not None:
            message["reply_to_message"] = self._message(chat_id, reply_to)
        self.state.messages[(chat_id, message["message_id"])] = message
        return self.push_update({"message": message}), message["message_id"]

    def push_callback(self, *, chat_id: int, message_id: int, data: str, from_id: int | None = None) -> str:
        """A user presses an inline button (its ``callback_data`` is ``data``) under the bot's
        message ``message_id``; returns the callback query's id (``answerCallbackQuery`` takes it)."""
        from_id = chat_id if from_id is None else from_id
        query_id = f"cq{self.state.next_update_id}"
        user = {"id": from_id, "is_bot": False, "first_name": f"User{from_id}", "username": f"user{from_id}"}
        query = {
            "id": query_id,
            "from": user,
            "chat_instance": str(chat_id),
            "message": self._message(chat_id, message_id),
            "data": data,
        }
        self.push_update({"callback_query": query})
        return query_id

    def _m_answercallbackquery(self, params: dict[str, Any]) -> bool:
        self.state.callback_answers.append(
            {
                "callback_query_id": params.get("callback_query_id"),
                "text": params.get("text"),
                "show_alert": bool(params.get("show_alert")),
            }
        )
        return True

    def _new_message_id(self) -> int:
        self.state.next_message_id += 1
        return self.state.next_message_id - 1

    def _message(self, chat_id: int, message_id: int) -> dict[str, Any]:
        try:
            found = dict(self.state.messages[(chat_id, message_id)])
        except KeyError:
            raise KeyError(f"no message {message_id} in chat {chat_id}") from None
        found.pop("reply_to_message", None)  # Telegram nests one level only
        return found

    # -- server ---------------------------------------------------------------------------

    def _build_app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/bot{token}/{method}", self._handle)
        app.router.add_route("*", "/file/bot{token}/{path:.*}", self._download)
        return app

    async def _before_cleanup(self) -> None:
        self._poll_generation += 1
        self._notify()

    async def _not_found(self, request: web.Request) -> web.Response:
        return _error(404, "Not Found")

    async def _handle(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params: dict[str, Any] = dict(request.query)
        files: dict[str, str] = {}
        if request.content_type == "application/json":
            params.update(await request.json())
        elif request.can_read_body:
            form = await request.post()
            for key, value in form.items():
                if isinstance(value, web.FileField):
                    files[key] = value.filename
                    params.setdefault("_uploads", {})[key] = (value.filename, value.file.read())
                else:
                    params[key] = value
        params = {k: _decode(k, v) for k, v in params.items()}
        if files:
            params["_files"] = files
        rec = self._record_request(method, request, params)
        try:
            response = await self._answer(request.match_info["token"], method, params)
        except asyncio.CancelledError:
            rec.status = 499  # the client hung up (e.g. a cancelled long poll)
            raise
        rec.status = response.status
        self._notify()
        return response

    async def _answer(self, token: str, method: str, params: dict[str, Any]) -> web.Response:
        if self.state.token is not None and token != self.state.token:
            return _error(401, "Unauthorized")
        failure = self._take_failure(method)
        if failure is not None:
            return _failure_response(failure)
        handler = getattr(self, f"_m_{method.lower()}", None)
        if handler is None:
            return _error(404, "Not Found")
        try:
            result = handler(params)
            if asyncio.iscoroutine(result):
                result = await result
        except _ApiError as e:
            return e.response
        if isinstance(result, web.Response):
            return result
        return _ok(result)

    # -- methods (named _m_<method lowercased>) -------------------------------------------

    def _m_getme(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            **self.bot_user,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
            "can_connect_to_business": False,
            "has_main_web_app": False,
        }

    def _m_deletewebhook(self, params: dict[str, Any]) -> bool:
        self.state.webhook_deleted += 1
        self.state.webhook_url, self.state.webhook_secret = "", None
        if params.get("drop_pending_updates"):
            self.state.confirmed_offset = self.state.next_update_id
        return True

    def _m_getwebhookinfo(self, params: dict[str, Any]) -> dict[str, Any]:
        info: dict[str, Any] = {
            "url": self.state.webhook_url,
            "has_custom_certificate": False,
            "pending_update_count": len(self.pending_updates),
        }
        if self.state.webhook_allowed_updates is not None:
            info["allowed_updates"] = self.state.webhook_allowed_updates
        return info

    def _m_setwebhook(self, params: dict[str, Any]) -> bool:
        url = str(params.get("url") or "")
        secret = params.get("secret_token")
        if secret is not None and not re.fullmatch(r"[A-Za-z0-9_-]{1,256}", str(secret)):
            raise _ApiError(_error(400, "Bad Request: secret token contains unallowed characters"))
        if url and not url.startswith(("https://", "http://")):
            raise _ApiError(_error(400, "Bad Request: bad webhook: An HTTPS URL must be provided for webhook"))
        self.state.webhook_set += 1
        self.state.webhook_url = url
        self.state.webhook_secret = None if secret is None else str(secret)
        allowed = params.get("allowed_updates")
        self.state.webhook_allowed_updates = list(allowed) if isinstance(allowed, list) else None
        if params.get("drop_pending_updates"):
            self.state.confirmed_offset = self.state.next_update_id
        return True

    async def deliver(
        self,
        update_id: int,
        *,
        url: str | None = None,
        secret: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        """POST one pushed update to the webhook as Telegram does: JSON, with the secret the
        last setWebhook registered in ``X-Telegram-Bot-Api-Secret-Token`` (``secret`` to send
        another; ``""`` to send none). A 2xx answer confirms it (and every update before it);
        returns the status and the JSON answer. Call it again to redeliver."""
        import aiohttp

        target = url or self.state.webhook_url
        if not target:
            raise RuntimeError("no webhook is set: call setWebhook first, or pass url=")
        update = next(u for u in self.state.updates if u["update_id"] == update_id)
        sent = self.state.webhook_secret if secret is None else secret
        head = {"Content-Type": "application/json", **(headers or {})}
        if sent:
            head["X-Telegram-Bot-Api-Secret-Token"] = sent
        async with aiohttp.ClientSession() as session:
            async with session.post(target, data=json.dumps(update), headers=head) as resp:
                try:
                    body = await resp.json(content_type=None)
                except ValueError:
                    body = await resp.text()
                if 200 <= resp.status < 300:
                    self.state.confirmed_offset = max(self.state.confirmed_offset, update_id + 1)
                return resp.status, body

    async def _m_getupdates(self, params: dict[str, Any]) -> Any:
        if self.state.webhook_url:
            return _error(
                409,
                "Conflict: can't use getUpdates method while webhook is active; "
                "use deleteWebhook to delete the webhook first",
            )
        offset = int(params.get("offset") or 0)
        timeout = float(params.get("timeout") or 0)
        limit = int(params.get("limit") or 100)
        if offset > 0:
            self.state.confirmed_offset = max(self.state.confirmed_offset, offset)
        self._poll_generation += 1
        generation = self._poll_generation
        self._notify()  # an older poll still waiting is now terminated (409 below)

        def pending() -> list[dict[str, Any]]:
            if offset < 0:
                return self.pending_updates[offset:][:limit]
            return self.pending_updates[:limit]

        if not pending() and timeout > 0 and not self.closing:
            try:
                await self.wait_for(
                    lambda: bool(pending()) or self._poll_generation != generation or self.closing,
                    timeout,
                )
            except TimeoutError:
                pass
        if self._poll_generation != generation and not self.closing:
            return _error(
                409,
                "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running",
            )
        return pending()

    def _m_sendmessage(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = _chat_id(params)
        text = str(params.get("text", ""))
        parse_mode = params.get("parse_mode")
        _check_text(text, parse_mode)
        reply_to = self._reply_target(chat_id, params)
        chat = self.state.chats.setdefault(
            chat_id,
            {"id": chat_id, "type": "private", "first_name": f"User{chat_id}"}
            if chat_id > 0
            else {"id": chat_id, "type": "supergroup", "title": f"Chat {chat_id}"},
        )
        message: dict[str, Any] = {
            "message_id": self._new_message_id(),
            "from": self.bot_user,
            "chat": chat,
            "date": int(time.time()),
            "text": text,  # Telegram returns the parsed text; close enough for clients
        }
        if params.get("reply_markup"):  # an inline keyboard stays with the message until an edit drops it
            message["reply_markup"] = params["reply_markup"]
        if reply_to is not None:
            message["reply_to_message"] = self._message(chat_id, reply_to)
        self.state.messages[(chat_id, message["message_id"])] = message
        self.state.modes[(chat_id, message["message_id"])] = parse_mode
        self.state.sent.append(
            {
                "method": "sendMessage",
                "chat_id": chat_id,
                "text": text,
                "parse_mode": parse_mode,
                "reply_to": reply_to,
                "message_id": message["message_id"],
                "params": params,
            }
        )
        return message

    def _m_editmessagetext(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = _chat_id(params)
        text = str(params.get("text", ""))
        _check_text(text, params.get("parse_mode"))
        key = (chat_id, int(params["message_id"]))
        if key not in self.state.messages:
            raise _ApiError(_error(400, "Bad Request: message to edit not found"))
        message = self.state.messages[key]
        if message.get("text") == text and self.state.modes.get(key) == params.get("parse_mode"):
            raise _ApiError(
                _error(
                    400,
                    "Bad Request: message is not modified: specified new message content and reply "
                    "markup are exactly the same as a current content and reply markup of the message",
                )
            )
        message.update(text=text, edit_date=int(time.time()))
        if params.get("reply_markup"):
            message["reply_markup"] = params["reply_markup"]
        else:  # Telegram: an edit without reply_markup removes the inline keyboard
            message.pop("reply_markup", None)
        self.state.modes[key] = params.get("parse_mode")
        self.state.sent.append(
            {
                "method": "editMessageText",
                "chat_id": chat_id,
                "text": text,
                "parse_mode": params.get("parse_mode"),
                "reply_to": None,
                "message_id": key[1],
                "params": params,
            }
        )
        return message

    # -- files: getFile, downloads, sendPhoto / sendDocument uploads ------------------------

    def _m_getfile(self, params: dict[str, Any]) -> dict[str, Any]:
        found = self.state.files.get(str(params.get("file_id")))
        if found is None:
            raise _ApiError(_error(400, "Bad Request: invalid file_id"))
        if found["size"] > 20_000_000:  # the cloud Bot API's limit for bots
            raise _ApiError(_error(400, "Bad Request: file is too big"))
        return {
            "file_id": params["file_id"],
            "file_unique_id": f"u{params['file_id']}",
            "file_size": found["size"],
            "file_path": found["path"],
        }

    def _m_sendphoto(self, params: dict[str, Any]) -> dict[str, Any]:
        return self._send_file("sendPhoto", "photo", params, limit=10_000_000)

    def _m_senddocument(self, params: dict[str, Any]) -> dict[str, Any]:
        return self._send_file("sendDocument", "document", params, limit=50_000_000)

    def _m_sendvoice(self, params: dict[str, Any]) -> dict[str, Any]:
        """A voice message: Telegram shows OGG/Opus as one (refused where the user's privacy
        settings forbid voice messages); the fake checks the upload is real OGG/Opus."""
        if _chat_id(params) in self.state.voice_forbidden:
            raise _ApiError(_error(400, "Bad Request: VOICE_MESSAGES_FORBIDDEN"))
        upload = next(iter((params.get("_uploads") or {}).values()), None)
        if upload is not None and not _is_ogg_opus(upload[1]):
            raise _ApiError(_error(400, "Bad Request: wrong file type for a voice message"))
        return self._send_file("sendVoice", "voice", params, limit=50_000_000)

    def _send_file(self, method: str, field_name: str, params: dict[str, Any], *, limit: int) -> dict[str, Any]:
        chat_id = _chat_id(params)
        uploads = params.get("_uploads") or {}
        upload = uploads.get(field_name) or next(iter(uploads.values()), None)
        if upload is None:
            raise _ApiError(_error(400, f"Bad Request: there is no {field_name} in the request"))
        filename, data = upload
        if len(data) > limit:
            raise _ApiError(_error(413, "Request Entity Too Large"))
        caption = params.get("caption")
        if caption is not None:
            plain = check_markup(str(caption), params.get("parse_mode"))
            if len(plain.encode("utf-16-le")) // 2 > 1024:
                raise _ApiError(_error(400, "Bad Request: message caption is too long"))
        file_id = self.add_file(data, path=f"{field_name}s/upload_{len(self.state.files)}")
        message: dict[str, Any] = {
            "message_id": self._new_message_id(),
            "from": self.bot_user,
            "chat": self.state.chats.get(chat_id, {"id": chat_id, "type": "private"}),
            "date": int(time.time()),
        }
        if field_name == "voice":
            message["voice"] = {
                "file_id": file_id,
                "file_unique_id": f"u{file_id}",
                "duration": int(params.get("duration") or 0),
                "mime_type": "audio/ogg",
                "file_size": len(data),
            }
        elif field_name == "photo":
            message["photo"] = [
                {"file_id": file_id, "file_unique_id": f"u{file_id}", "width": 1, "height": 1, "file_size": len(data)}
            ]
        else:
            message["document"] = {
                "file_id": file_id,
                "file_unique_id": f"u{file_id}",
                "file_name": filename,
                "file_size": len(data),
            }
        if caption:
            message["caption"] = caption
        self.state.messages[(chat_id, message["message_id"])] = message
        self.state.sent.append(
            {
                "method": method,
                "chat_id": chat_id,
                "text": caption or "",
                "caption": caption,
                "filename": filename,
                "data": data,
                "reply_to": None,
                "message_id": message["message_id"],
                "params": params,
            }
        )
        return message

    async def _download(self, request: web.Request) -> web.StreamResponse:
        if self.state.token is not None and request.match_info["token"] != self.state.token:
            return _error(401, "Unauthorized")
        path = request.match_info["path"]
        self.state.downloads.append(path)
        self._notify()
        for found in self.state.files.values():
            if found["path"] == path:
                if found.get("stream"):
                    return await self._stream(request, found["stream"])
                return web.Response(body=found["data"], content_type="application/octet-stream")
        return _error(404, "Not Found")

    async def _stream(self, request: web.Request, total: int) -> web.StreamResponse:
        """``total`` bytes of text, chunked (no Content-Length), for as long as the client reads."""
        resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await resp.prepare(request)
        chunk = b"x" * 65536
        try:
            while self.state.streamed < total:
                await resp.write(chunk)
                self.state.streamed += len(chunk)
        except ConnectionError:
            return resp
        await resp.write_eof()
        return resp

    def add_file(self, data: bytes, *, path: str | None = None, size: int | None = None, stream: int = 0) -> str:
        """Store a file ``getFile`` will serve; returns its file_id. ``size`` overrides the
        size getFile reports (a file Telegram would refuse, without holding its bytes; or a
        lie); ``stream`` serves that many bytes instead of ``data``, as fast as they are read."""
        file_id = f"FILE{len(self.state.files) + 1}"
        self.state.files[file_id] = {
            "data": data,
            "path": path or f"documents/{file_id}",
            "size": len(data) if size is None else size,
            "stream": stream,
        }
        return file_id

    def push_media(
        self,
        *,
        chat_id: int,
        photo: bytes | None = None,
        document: tuple[str, str, bytes] | None = None,
        sticker: bytes | None = None,
        voice: bytes | None = None,
        audio: tuple[str, str, bytes] | None = None,
        video_note: bytes | None = None,
        caption: str | None = None,
        size: int | None = None,
        file_path: str | None = None,
        stream: int = 0,
        **message: Any,
    ) -> tuple[int, int]:
        """A message carrying a photo (``bytes``), a document (``(name, mime, bytes)``), a
        static sticker, a voice note (OGG/Opus ``bytes``), an audio file (``(name, mime,
        bytes)``) or a round video note, with an optional caption; the other keywords as ``push_message``.
        ``size`` is the file size the message and getFile claim (default: the real one);
        a document's ``file_path`` is what getFile names it by, ``stream`` (bytes) what its
        download serves instead (a hostile server's)."""
        update_id, message_id = self.push_message(chat_id=chat_id, text=caption or "", **message)
        msg = self.state.messages[(chat_id, message_id)]
        msg.pop("text", None)
        entities = msg.pop("entities", None)
        if caption:
            msg["caption"] = caption
            if entities:
                msg["caption_entities"] = entities
        if photo is not None:
            fid = self.add_file(photo, path=f"photos/file_{message_id}.jpg")
            small = self.add_file(photo[:100], path=f"photos/thumb_{message_id}.jpg")
            msg["photo"] = [
                {"file_id": small, "file_unique_id": f"u{small}", "width": 90, "height": 90, "file_size": 100},
                {
                    "file_id": fid,
                    "file_unique_id": f"u{fid}",
                    "width": 800,
                    "height": 600,
                    "file_size": len(photo) if size is None else size,
                },
            ]
        if document is not None:
            name, mime, data = document
            fid = self.add_file(data, path=file_path or f"documents/file_{message_id}", size=size, stream=stream)
            msg["document"] = {
                "file_id": fid,
                "file_unique_id": f"u{fid}",
                "file_name": name,
                "mime_type": mime,
                "file_size": len(data) if size is None else size,
            }
        if sticker is not None:
            fid = self.add_file(sticker, path=f"stickers/file_{message_id}.webp")
            msg["sticker"] = {
                "file_id": fid,
                "file_unique_id": f"u{fid}",
                "type": "regular",
                "width": 512,
                "height": 512,
                "is_animated": False,
                "is_video": False,
                "emoji": "😀",
                "file_size": len(sticker),
            }
        if voice is not None:
            fid = self.add_file(voice, path=f"voice/file_{message_id}.oga", size=size)
            msg["voice"] = {
                "file_id": fid,
                "file_unique_id": f"u{fid}",
                "duration": 1,
                "mime_type": "audio/ogg",
                "file_size": len(voice) if size is None else size,
            }
        if audio is not None:
            name, mime, data = audio
            fid = self.add_file(data, path=f"music/file_{message_id}", size=size)
            msg["audio"] = {
                "file_id": fid,
                "file_unique_id": f"u{fid}",
                "duration": 1,
                "file_name": name,
                "mime_type": mime,
                "file_size": len(data) if size is None else size,
            }
        if video_note is not None:
            fid = self.add_file(video_note, path=f"video_notes/file_{message_id}.mp4", size=size)
            msg["video_note"] = {
                "file_id": fid,
                "file_unique_id": f"u{fid}",
                "length": 240,
                "duration": 1,
                "file_size": len(video_note) if size is None else size,
            }
        return update_id, message_id

    def _m_deletemessage(self, params: dict[str, Any]) -> bool:
        chat_id = _chat_id(params)
        key = (chat_id, int(params["message_id"]))
        if self.state.messages.pop(key, None) is None:
            raise _ApiError(_error(400, "Bad Request: message to delete not found"))
        self.state.sent.append(
            {
                "method": "deleteMessage",
                "chat_id": chat_id,
                "text": None,
                "parse_mode": None,
                "reply_to": None,
                "message_id": key[1],
                "params": params,
            }
        )
        return True

    def shown(self, chat_id: int) -> list[str]:
        """The bot's messages in ``chat_id`` as they read now (after edits), oldest first."""
        bot = self.state.bot_id
        return [
            m.get("text", m.get("caption", ""))
            for (c, _), m in sorted(self.state.messages.items())
            if c == chat_id and m.get("from", {}).get("id") == bot
        ]

    def _m_sendchataction(self, params: dict[str, Any]) -> bool:
        self.state.chat_actions.append((_chat_id(params), str(params.get("action"))))
        return True

    def _m_setmycommands(self, params: dict[str, Any]) -> bool:
        commands = list(params.get("commands") or [])
        if len(commands) > 100:
            raise _ApiError(_error(400, "Bad Request: BOT_COMMANDS_TOO_MUCH"))
        for c in commands:
            if not isinstance(c, dict) or not re.fullmatch(r"[a-z0-9_]{1,32}", str(c.get("command", ""))):
                raise _ApiError(_error(400, "Bad Request: BOT_COMMAND_INVALID"))
            if not 1 <= len(str(c.get("description", ""))) <= 256:
                raise _ApiError(_error(400, "Bad Request: BOT_COMMAND_DESCRIPTION_INVALID"))
        self.state.commands = commands
        self.state.command_menus[_scope_key(params)] = commands
        return True

    def _m_getmycommands(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        return self.state.command_menus.get(_scope_key(params), [])

    def _m_deletemycommands(self, params: dict[str, Any]) -> bool:
        self.state.command_menus.pop(_scope_key(params), None)
        return True

    def menu(self, scope: str = "default", chat_id: int | None = None) -> list[str]:
        """The command names of one scope's menu (``all_private_chats``, ``all_group_chats``,
        ``chat`` with ``chat_id``, ...), as the last ``setMyCommands`` for it left it."""
        key = json.dumps({"type": scope, **({"chat_id": chat_id} if chat_id is not None else {})}, sort_keys=True)
        return [c["command"] for c in self.state.command_menus.get((key, ""), [])]

    def _reply_target(self, chat_id: int, params: dict[str, Any]) -> int | None:
        reply = params.get("reply_parameters")
        if isinstance(reply, dict):
            target = reply.get("message_id")
            allow = bool(reply.get("allow_sending_without_reply"))
        else:
            target = params.get("reply_to_message_id")
            allow = bool(params.get("allow_sending_without_reply"))
        if target is None:
            return None
        if (chat_id, int(target)) not in self.state.messages:
            if allow:
                return None
            raise _ApiError(_error(400, "Bad Request: message to be replied not found"))
        return int(target)


# -- responses -------------------------------------------------------------------------------


class _ApiError(Exception):
    def __init__(self, response: web.Response) -> None:
        self.response = response


def _ok(result: Any) -> web.Response:
    return web.json_response({"ok": True, "result": result})


def _error(code: int, description: str, **parameters: Any) -> web.Response:
    body: dict[str, Any] = {"ok": False, "error_code": code, "description": description}
    if parameters:
        body["parameters"] = parameters
    return web.json_response(body, status=code)


def _failure_response(failure: Failure) -> web.Response:
    if failure.status == 429:
        retry_after = int(failure.retry_after or 1)
        return _error(
            429,
            failure.description or f"Too Many Requests: retry after {retry_after}",
            retry_after=retry_after,
        )
    default = {
        400: "Bad Request",
        401: "Unauthorized",
        403: "Forbidden: bot was blocked by the user",
        404: "Not Found",
        409: "Conflict",
        502: "Bad Gateway",
    }
    return _error(failure.status, failure.description or default.get(failure.status, "Internal Server Error"))


def _decode(key: str, value: Any) -> Any:
    """Undo the client's JSON encoding of non-string form values."""
    if not isinstance(value, str) or key in _STRING_FIELDS:
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value  # e.g. chat_id "@channelname"


def _is_ogg_opus(data: bytes) -> bool:
    """Whether ``data`` is an OGG container whose first stream is Opus (its ``OpusHead``)."""
    return data[:4] == b"OggS" and b"OpusHead" in data[:200]


def _chat_id(params: dict[str, Any]) -> int:
    try:
        return int(params["chat_id"])
    except (KeyError, TypeError, ValueError):
        raise _ApiError(_error(400, "Bad Request: chat not found")) from None


def _check_text(text: str, parse_mode: str | None) -> None:
    try:
        plain = check_markup(text, parse_mode)
    except MarkupError as e:
        raise _ApiError(_error(400, f"Bad Request: can't parse entities: {e}")) from None
    if not plain.strip():
        raise _ApiError(_error(400, "Bad Request: message text is empty"))
    if len(plain.encode("utf-16-le")) // 2 > MAX_MESSAGE_LENGTH:
        raise _ApiError(_error(400, "Bad Request: message is too long"))


def _scope_key(params: dict[str, Any]) -> tuple[str, str]:
    """Where Telegram keeps a menu: its scope (default: ``default``) and language."""
    scope = params.get("scope") or {"type": "default"}
    if isinstance(scope, str):
        scope = json.loads(scope)
    return json.dumps(scope, sort_keys=True), str(params.get("language_code") or "")


def _auto_entities(text: str) -> list[dict[str, Any]]:
    """Entities Telegram adds by itself: @mentions and /commands (offsets in UTF-16 units)."""
    ents = []
    for m in re.finditer(r"(?<![\w/@])(@[A-Za-z]\w{3,31}|/[A-Za-z0-9_]{1,32}(?:@\w+)?)", text):
        kind = "mention" if m.group(0).startswith("@") else "bot_command"
        if kind == "bot_command" and m.start() != 0:
            continue  # only a leading /command is a bot command in practice
        ents.append({"type": kind, "offset": _u16(text[: m.start()]), "length": _u16(m.group(0))})
    return ents


def _u16(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


# -- markup checks --------------------------------------------------------------------------


def check_markup(text: str, parse_mode: str | None) -> str:
    """Parse ``text`` as Telegram would for ``parse_mode``; return the plain text.

    Raises:
        MarkupError: with Telegram's wording (the part after "can't parse entities: ").
    """
    if not parse_mode:
        return text
    mode = parse_mode.lower()
    if mode == "markdown":
        return _markdown_v1(text)
    if mode == "markdownv2":
        return _markdown_v2(text)
    if mode == "html":
        return _html(text)
    raise MarkupError(f"Unsupported parse_mode {parse_mode!r}")


def _at(text: str, i: int) -> int:
    return len(text[:i].encode("utf-8"))


def _markdown_v1(text: str) -> str:
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n and text[i + 1] in "_*`[":
            out.append(text[i + 1])
            i += 2
            continue
        marker = "```" if text.startswith("```", i) else c
        if marker in ("*", "_", "`", "```"):
            end = text.find(marker, i + len(marker))
            if end < 0:
                raise MarkupError(f"Can't find end of the entity starting at byte offset {_at(text, i)}")
            out.append(text[i + len(marker) : end])
            i = end + len(marker)
            continue
        if c == "[":
            close = text.find("]", i + 1)
            if close < 0:
                raise MarkupError(f"Can't find end of the entity starting at byte offset {_at(text, i)}")
            if text.startswith("(", close + 1):
                paren = text.find(")", close + 2)
                if paren < 0:
                    raise MarkupError(f"Can't find end of the entity starting at byte offset {_at(text, i)}")
                out.append(text[i + 1 : close])
                i = paren + 1
                continue
        out.append(c)
        i += 1
    return "".join(out)


_V2_RESERVED = set("_*[]()~`>#+-=|{}.!")
_V2_NAMES = {"*": "Bold", "_": "Italic", "__": "Underline", "~": "Strikethrough", "||": "Spoiler", "[": "TextUrl"}


def _markdown_v2(text: str) -> str:
    return _MarkdownV2(text).plain()


class _MarkdownV2:
    """A MarkdownV2 text as the Bot API reads it: its plain text, or the MarkupError it gives
    (an unescaped reserved character, an entity left open)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.out: list[str] = []
        self.stack: list[tuple[str, int]] = []  # open entities: marker and offset

    def plain(self) -> str:
        i, n = 0, len(self.text)
        while i < n:
            i = self._step(i)
        if self.stack:
            marker, pos = self.stack[-1]
            raise MarkupError(f"Can't find end of {_V2_NAMES[marker]} entity at byte offset {_at(self.text, pos)}")
        return "".join(self.out)

    def _step(self, i: int) -> int:
        """Read what starts at ``i``; returns where the next thing starts."""
        text, stack = self.text, self.stack
        c = text[i]
        if c == "\\":
            if i + 1 < len(text):
                self.out.append(text[i + 1])
            return i + 2
        if c == "`":
            return self._code(i)
        if c in "*_~" or text.startswith("||", i):
            return self._emphasis(i)
        if c == "[":
            stack.append(("[", i))
            return i + 1
        if c == "]" and stack and stack[-1][0] == "[":
            stack.pop()
            return self._url(i + 1)
        if c == ">" and (i == 0 or text[i - 1] == "\n"):
            return i + 1  # blockquote
        if c in _V2_RESERVED:
            raise MarkupError(f"Character '{c}' is reserved and must be escaped with the preceding '\\'")
        self.out.append(c)
        return i + 1

    def _code(self, i: int) -> int:
        """Inline code or a pre block: its text as written, only \\` and \\\\ unescaped."""
        text = self.text
        marker = "```" if text.startswith("```", i) else "`"
        end = self._find_unescaped(marker, i + len(marker))
        if end < 0:
            kind = "Pre" if marker == "```" else "Code"
            raise MarkupError(f"Can't find end of {kind} entity at byte offset {_at(text, i)}")
        self.out.append(text[i + len(marker) : end].replace("\\`", "`").replace("\\\\", "\\"))
        return end + len(marker)

    def _emphasis(self, i: int) -> int:
        """A bold, italic, underline, strikethrough or spoiler marker: opens its entity, or
        closes it (and any opened inside it)."""
        text, stack = self.text, self.stack
        c = text[i]
        marker = "__" if text.startswith("__", i) else "||" if c == "|" else c
        if stack and stack[-1][0] == marker:
            stack.pop()
        elif any(m == marker for m, _ in stack):
            while stack and stack[-1][0] != marker:
                stack.pop()
            stack.pop()
        else:
            stack.append((marker, i))
        return i + len(marker)

    def _url(self, i: int) -> int:
        """After a link's text: its ``(url)``, if there is one."""
        if not self.text.startswith("(", i):
            return i
        end = self._find_unescaped(")", i + 1)
        if end < 0:
            raise MarkupError(f"Can't find end of a URL at byte offset {_at(self.text, i)}")
        return end + 1

    def _find_unescaped(self, needle: str, start: int) -> int:
        text = self.text
        j = start
        while j < len(text):
            if text[j] == "\\":
                j += 2
                continue
            if text.startswith(needle, j):
                return j
            j += 1
        return -1


_HTML_TAGS = {
    "b",
    "strong",
    "i",
    "em",
    "u",
    "ins",
    "s",
    "strike",
    "del",
    "a",
    "code",
    "pre",
    "span",
    "tg-spoiler",
    "tg-emoji",
    "blockquote",
}
_TAG = re.compile(r"<(/?)([a-zA-Z0-9-]*)((?:\s+[^>]*)?)>")
_ENTITY = re.compile(r"&(lt|gt|amp|quot|#\d+|#x[0-9a-fA-F]+);")


def _html(text: str) -> str:
    out: list[str] = []
    stack: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "<":
            m = _TAG.match(text, i)
            if m is None:
                raise MarkupError(f"Unclosed start tag at byte offset {_at(text, i)}")
            closing, name = m.group(1), m.group(2).lower()
            if not closing:
                if name not in _HTML_TAGS:
                    raise MarkupError(f'Unsupported start tag "{name}" at byte offset {_at(text, i)}')
                stack.append(name)
            else:
                if not stack:
                    raise MarkupError(f"Unexpected end tag at byte offset {_at(text, i)}")
                if name and stack[-1] != name:
                    raise MarkupError(f'Can\'t find end tag corresponding to start tag "{stack[-1]}"')
                stack.pop()
            i = m.end()
            continue
        if c == "&":
            m = _ENTITY.match(text, i)
            if m:
                out.append("&")  # one character, whatever it stands for
                i = m.end()
                continue
        out.append(c)
        i += 1
    if stack:
        raise MarkupError(f'Can\'t find end tag corresponding to start tag "{stack[-1]}"')
    return "".join(out)
