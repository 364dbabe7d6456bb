"""The bot's connection: matrix-nio's ``AsyncClient``, the login, and everything outbound.

The login: an ``access_token`` is used as given; else a ``password`` logs in once and the
device it makes (its id and token) is kept in ``<data_dir>/matrix/``, so a restart is the
same device. Outbound events go through the [`Governor`][hub.platform.Governor] (per-room and
global pacing; ``M_LIMIT_EXCEEDED``'s ``retry_after_ms`` honoured), each with one
transaction id across its retries, so a send retried after a timeout is not posted twice.
nio's own retries are off: the governor is the one place that waits and retries.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import re
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import aiohttp
from nio import (
    AsyncClient,
    AsyncClientConfig,
    ErrorResponse,
    JoinResponse,
    LoginResponse,
    RoomLeaveResponse,
    RoomSendResponse,
    UploadResponse,
    WhoamiResponse,
)

from hub import ExtensionError, MediaFile, MediaPart, MediaRefused, MediaTooLarge
from hub.platform import (
    Governor,
    PermanentSendError,
    RateLimit,
    RateLimited,
    SendFailed,
    TransientSendError,
    fetch_url,
    human_size,
    split_message,
)

from ._content import MAX_LENGTH, edit_content, message_content, wire_len
from ._settings import MatrixSettings

if TYPE_CHECKING:
    from hub import Hub

__all__ = ["MatrixClient", "map_error", "MXC", "DEFAULT_UPLOAD_BYTES"]

log = logging.getLogger("hub_matrix")

MXC = re.compile(r"mxc://([A-Za-z0-9.\-]+(?::[0-9]{1,5})?|\[[0-9A-Fa-f:.]+\](?::[0-9]{1,5})?)/([A-Za-z0-9_\-]+)")
"""A content URI: ``mxc://server.name/mediaId``, as the spec allows its two parts."""
DEFAULT_UPLOAD_BYTES = 50 * 1024 * 1024
"""The upload limit assumed when the homeserver does not say its own (``m.upload.size``)."""
_CONNECTION_ERRORS = (aiohttp.ClientError, asyncio.TimeoutError, TimeoutError, OSError)


def map_error(resp: ErrorResponse) -> Exception:
    """A homeserver's error answer → what the governor does with it (wait, retry, give up)."""
    code = str(resp.status_code or "")
    transport = getattr(resp, "transport_response", None)
    status = getattr(transport, "status", 0) or 0
    text = f"{code or status}: {resp.message}"
    if code == "M_LIMIT_EXCEEDED" or status == 429:
        retry_ms = getattr(resp, "retry_after_ms", None) or 1000
        # a homeserver limits an account, not a room: every room waits
        return RateLimited(retry_ms / 1000, scope="global", message=text)
    if status >= 500 or status == 0 and not code:
        return TransientSendError(text)
    return PermanentSendError(text)


class MatrixClient:
    """Owns the nio client from service start to stop; sends, edits, uploads, downloads."""

    def __init__(self, settings: MatrixSettings) -> None:
        self.settings = settings
        self.hub: Hub | None = None
        self._nio: AsyncClient | None = None
        self._ready = False
        self._login_lock = asyncio.Lock()
        self._upload_limit: int | None = None
        self.device_id = ""
        self.governor = Governor(
            "matrix",
            per_chat=RateLimit(*settings.room_rate),
            global_=RateLimit(*settings.global_rate),
            max_attempts=settings.send_attempts,
            max_wait=settings.send_max_wait,
            bot=settings.user_id,
        )

    # --- lifecycle -----------------------------------------------------------------------

    @property
    def nio(self) -> AsyncClient:
        if self._nio is None:
            raise ExtensionError("matrix", "the Matrix client is not started")
        return self._nio

    @property
    def user_id(self) -> str:
        return self.settings.user_id

    def session_path(self) -> Path:
        """Where a password login's device is kept: ``<data_dir>/matrix/<user id>.json``."""
        assert self.hub is not None
        return Path(self.hub.config.data_dir) / "matrix" / (quote(self.settings.user_id, safe="") + ".json")

    async def start(self, hub: Hub) -> None:
        """Make the client and log in. An unreachable homeserver is retried by the sync loop;
        a refused login is an error now.

        Raises:
            ExtensionError: the homeserver refused the token or the password.
        """
        self.hub = hub
        self.governor.report_to(hub)
        config = AsyncClientConfig(
            max_limit_exceeded=0,  # a 429 comes back to us (the governor, the sync loop) at once
            max_timeouts=0,
            request_timeout=self.settings.sync_timeout + 30,
        )
        self._nio = AsyncClient(self.settings.homeserver, self.settings.user_id, config=config)
        try:
            async with asyncio.timeout(self.settings.ready_timeout):
                await self.ensure_ready()
        except (*_CONNECTION_ERRORS, TransientSendError, RateLimited) as e:
            # unreachable, busy (5xx) or rate limiting logins: the sync loop logs in when it can
            log.warning("matrix: cannot log in yet (%s); retrying in the background", e)

    async def ensure_ready(self) -> None:
        """Log in once (see the module doc).

        Raises:
            ExtensionError: the homeserver refused the token or the password.
            aiohttp.ClientError, TimeoutError: the homeserver could not be reached.
        """
        if self._ready:
            return
        async with self._login_lock:
            if not self._ready:
                await self._login()
                self._ready = True

    async def _login(self) -> None:
        nio, s = self.nio, self.settings
        kept = self._kept_session()
        token = s.access_token.get_secret_value() or kept.get("access_token", "")
        if token:
            nio.restore_login(
                s.user_id, kept.get("device_id", "") if not s.access_token.get_secret_value() else "", token
            )
            who = await nio.whoami()
            if isinstance(who, WhoamiResponse):
                if who.user_id != s.user_id:
                    raise ExtensionError(
                        "matrix", f"the access token is {who.user_id}'s, not {s.user_id}'s: set user_id to match"
                    )
                self.device_id = who.device_id or ""
                nio.device_id = self.device_id
                log.info("matrix: signed in as %s (device %s)", s.user_id, self.device_id or "?")
                return
            if who.status_code == "M_UNKNOWN_TOKEN" and kept and s.password.get_secret_value():
                log.warning("matrix: the kept device's token was refused (logged out?); logging in again")
                self._forget_session()
            elif who.status_code in ("M_UNKNOWN_TOKEN", "M_FORBIDDEN", "M_MISSING_TOKEN"):
                raise ExtensionError(
                    "matrix", f"the homeserver refused the access token ({who.status_code}): check MATRIX_ACCESS_TOKEN"
                )
            else:
                raise map_error(who)
        resp = await nio.login(password=s.password.get_secret_value(), device_name=s.device_name)
        if not isinstance(resp, LoginResponse):
            if resp.status_code in ("M_FORBIDDEN", "M_USER_DEACTIVATED", "M_INVALID_USERNAME"):
                raise ExtensionError(
                    "matrix", f"the homeserver refused the password login ({resp.status_code}: {resp.message})"
                )
            raise map_error(resp)
        self.device_id = resp.device_id
        self._keep_session(resp.device_id, resp.access_token)
        log.info("matrix: logged in as %s; device %s kept in %s", s.user_id, resp.device_id, self.session_path())

    def _kept_session(self) -> dict[str, str]:
        try:
            data = json.loads(self.session_path().read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            log.warning("matrix: the kept device in %s cannot be read (%s): logging in anew", self.session_path(), e)
            return {}
        if not isinstance(data, dict) or data.get("user_id") != self.settings.user_id:
            return {}
        return {k: str(v) for k, v in data.items() if k in ("device_id", "access_token")}

    def _keep_session(self, device_id: str, token: str) -> None:
        path = self.session_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        # the token is a password's equal: readable by the hub's user only
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"user_id": self.settings.user_id, "device_id": device_id, "access_token": token}, f)
        os.replace(tmp, path)

    def _forget_session(self) -> None:
        self.session_path().unlink(missing_ok=True)

    async def stop(self) -> None:
        client, self._nio = self._nio, None
        self._ready = False
        if client is not None:
            await client.close()

    # --- rooms ---------------------------------------------------------------------------

    async def join(self, room_id: str) -> None:
        """Join ``room_id`` (an invite accepted). Raises SendFailed."""

        async def attempt() -> None:
            resp = await self._call(self.nio.join(room_id))
            if not isinstance(resp, JoinResponse):
                raise map_error(resp)

        await self.governor.send(room_id, attempt)

    async def decline(self, room_id: str) -> None:
        """Decline an invite (leave the room). Best effort: logged."""
        try:
            resp = await self._call(self.nio.room_leave(room_id))
        except Exception as e:
            log.warning("matrix: declining the invite to %s failed: %s", room_id, e)
            return
        if not isinstance(resp, RoomLeaveResponse):
            log.warning("matrix: declining the invite to %s failed: %s", room_id, resp.message)

    async def typing(self, room_id: str) -> None:
        """Show "typing..." for 30 s. Best effort."""
        try:
            await self.nio.room_typing(room_id, typing_state=True, timeout=30_000)
        except Exception as e:
            log.debug("matrix: typing in %s failed: %s", room_id, e)

    # --- sending -------------------------------------------------------------------------

    async def _call(self, coro: Awaitable[Any]) -> Any:
        try:
            return await coro
        except _CONNECTION_ERRORS as e:
            raise TransientSendError(f"{type(e).__name__}: {e}") from e

    async def send_content(self, room_id: str, content: dict[str, Any], event_type: str = "m.room.message") -> str:
        """Send one event; returns its id. Raises SendFailed."""
        txn = uuid.uuid4().hex  # the same across retries: the homeserver posts it once

        async def attempt() -> str:
            resp = await self._call(
                self.nio.room_send(room_id, event_type, content, tx_id=txn, ignore_unverified_devices=True)
            )
            if not isinstance(resp, RoomSendResponse):
                raise map_error(resp)
            return str(resp.event_id)

        return await self.governor.send(room_id, attempt)

    async def send_text(
        self,
        room_id: str,
        text: str,
        *,
        reply_to: str | None = None,
        mention: str | None = None,
        on_part: Callable[[int, str], Awaitable[None]] | None = None,
    ) -> list[str]:
        """Send ``text`` in parts of at most `MAX_LENGTH`, in order; the first part
        replies to ``reply_to``. ``on_part(index, event_id)`` is awaited after each part went
        out (the output handler records it, so a restart never sends it again).

        Raises:
            SendFailed: a part was given up on (the message says which parts went out).
        """
        parts = split_message(text, MAX_LENGTH, length=wire_len)
        sent: list[str] = []
        for i, part in enumerate(parts):
            first = i == 0
            content = self.content(part, reply_to=reply_to if first else None, mention=mention if first else None)
            try:
                event_id = await self.send_content(room_id, content)
            except SendFailed as e:
                if not sent:
                    raise
                raise SendFailed(
                    "matrix",
                    room_id,
                    f"part {i + 1} of {len(parts)} failed after {len(sent)} sent (events {sent}): {e.reason}",
                ) from e
            sent.append(event_id)
            if on_part is not None:
                await on_part(i, event_id)
        return sent

    def content(self, text: str, *, reply_to: str | None = None, mention: str | None = None) -> dict[str, Any]:
        s = self.settings
        return message_content(text, markdown=s.markdown, notice=s.notice, reply_to=reply_to, mention=mention)

    async def edit_text(self, room_id: str, event_id: str, text: str) -> None:
        """Show ``text`` in the bot's message ``event_id`` (an ``m.replace`` edit). Raises SendFailed."""
        s = self.settings
        await self.send_content(room_id, edit_content(event_id, text, markdown=s.markdown, notice=s.notice))

    async def redact(self, room_id: str, event_id: str) -> None:
        """Remove one of the bot's messages (a live reply's part made redundant). Raises SendFailed."""

        async def attempt() -> None:
            resp = await self._call(self.nio.room_redact(room_id, event_id))
            if isinstance(resp, ErrorResponse):
                raise map_error(resp)

        await self.governor.send(room_id, attempt)

    # --- files ---------------------------------------------------------------------------

    def download_url(self, mxc: str) -> str:
        """The authenticated download URL of a content URI on our homeserver.

        Raises:
            MediaRefused: not a well-formed ``mxc://server/mediaId``.
        """
        m = MXC.fullmatch(mxc)
        if m is None:
            raise MediaRefused("its content URI is not mxc://server/mediaId")
        server, media_id = m.group(1), m.group(2)
        return f"{self.settings.homeserver}/_matrix/client/v1/media/download/{quote(server)}/{media_id}"

    async def fetch(self, part: MediaPart, max_bytes: int) -> bytes:
        """The bytes of a file a message carried, from the content repository through the
        bot's homeserver, streamed under ``max_bytes`` whatever size the message claimed.

        Raises:
            MediaTooLarge: the message says it is over ``max_bytes``, or it is found so while read.
            MediaRefused: its content URI is malformed.
            MediaError: the homeserver refused or could not be reached.
        """
        name = part.name
        if part.size is not None and part.size > max_bytes:
            raise MediaTooLarge(
                f"it is {human_size(part.size)}, over the {human_size(max_bytes)} limit per file", name=name
            )
        try:
            url = self.download_url(part.ref)
        except MediaRefused as e:
            raise MediaRefused(e.reason, name=name) from None
        await self.ensure_ready()
        # the homeserver is the operator's own (configured): fetched as it is, with the token
        headers = {"Authorization": f"Bearer {self.nio.access_token}"}
        return await fetch_url(url, max_bytes=max_bytes, headers=headers, name=name)

    async def upload_limit(self) -> int:
        """The homeserver's largest upload (``m.upload.size``), asked once."""
        if self._upload_limit is None:
            limit = DEFAULT_UPLOAD_BYTES
            try:
                resp = await self._call(self.nio.send("GET", "/_matrix/client/v1/media/config", headers=self._auth()))
                if resp.status == 200:
                    limit = int((await resp.json()).get("m.upload.size") or limit)
            except (TransientSendError, ValueError, TypeError) as e:
                log.debug("matrix: the media config could not be read (%s); assuming %s", e, human_size(limit))
            self._upload_limit = limit
        return self._upload_limit

    def _auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.nio.access_token}"}

    async def check_upload(self, room_id: str, file: MediaFile) -> None:
        """Raises SendFailed when ``file`` is over the homeserver's upload limit."""
        limit = await self.upload_limit()
        if file.size > limit:
            raise SendFailed(
                "matrix", room_id, f"{file.name} is {human_size(file.size)}, over the homeserver's {human_size(limit)}"
            )

    async def send_file(self, room_id: str, file: MediaFile, *, reply_to: str | None = None) -> str:
        """Upload ``file`` to the content repository and post it (``m.image`` for a picture,
        else ``m.file``/``m.audio``/``m.video``); returns the event id.

        Raises:
            SendFailed: over the homeserver's upload limit, refused, or given up after retries.
        """
        await self.check_upload(room_id, file)

        async def upload() -> str:
            resp, _ = await self._call(
                self.nio.upload(io.BytesIO(file.data), content_type=file.mime, filename=file.name, filesize=file.size)
            )
            if not isinstance(resp, UploadResponse):
                raise map_error(resp)
            return str(resp.content_uri)

        uri = await self.governor.send(room_id, upload)
        major = file.mime.split("/", 1)[0]
        msgtype = {"image": "m.image", "audio": "m.audio", "video": "m.video"}.get(major, "m.file")
        content: dict[str, Any] = {
            "msgtype": msgtype,
            "body": file.name,
            "filename": file.name,
            "url": uri,
            "info": {"mimetype": file.mime, "size": file.size},
            "m.mentions": {},
        }
        if reply_to:
            content["m.relates_to"] = {"m.in_reply_to": {"event_id": reply_to}}
        return await self.send_content(room_id, content)
