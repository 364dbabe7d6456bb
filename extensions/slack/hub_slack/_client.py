"""Everything the bot sends to Slack's Web API (slack-sdk's ``AsyncWebClient``), paced and
retried by [`Governor`][hub.platform.Governor]\\ s under Slack's rate tiers, and the files it
downloads.

Messages go out as a ``section`` block of mrkdwn with the plain text beside it (what a
notification shows); when Slack refuses the block the part is sent again as plain text alone.
A 429 pauses the channel for its ``Retry-After``; 5xx and network errors are retried with
backoff; other errors are final. ``chat.postMessage`` is paced per channel (Slack allows
about one a second) and ``chat.update`` on a governor of its own (Tier 3: about 50 a minute).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError, SlackRequestError
from slack_sdk.web.async_client import AsyncWebClient

from hub import MediaError, MediaFile, MediaPart
from hub.platform import (
    DEFAULT_ACCOUNT,
    Governor,
    MediaHosts,
    PermanentSendError,
    RateLimit,
    RateLimited,
    Resolve,
    SendFailed,
    TransientSendError,
    fetch_url,
    human_size,
)

from ._mrkdwn import to_mrkdwn, to_plain
from ._settings import MEDIA_HOSTS, SlackSettings

__all__ = ["SlackClient", "SlackStartError", "Identity", "MAX_LENGTH", "MAX_FILES", "mrkdwn_len", "mapped"]

log = logging.getLogger("hub_slack")
T = TypeVar("T")

MAX_LENGTH = 3000
"""Characters of mrkdwn in one message's section block: Slack's limit for a block's text."""
MAX_FILES = 10
"""Files in one upload (``files.completeUploadExternal``)."""
MAX_UPLOAD_BYTES = 1024 * 1024 * 1024  # Slack's limit for one file
_FALLBACK_ERRORS = {"invalid_blocks", "invalid_blocks_format", "msg_blocks_too_long"}


class SlackStartError(Exception):
    """The bot could not sign in; ``hub run`` stops with this one line."""


@dataclass(frozen=True, slots=True)
class Identity:
    """Who the bot is, from ``auth.test``."""

    user_id: str
    bot_id: str | None
    team_id: str | None
    name: str


def mrkdwn_len(text: str) -> int:
    """A part's length as Slack counts it: its mrkdwn, escapes and all."""
    return len(to_mrkdwn(text))


def _retry_after(e: SlackApiError) -> float:
    headers = getattr(e.response, "headers", None) or {}
    for name in ("Retry-After", "retry-after"):
        value = headers.get(name)
        if isinstance(value, list):
            value = value[0] if value else None
        try:
            return float(str(value))
        except (TypeError, ValueError):
            continue
    return 1.0


def _error_code(e: SlackApiError) -> str:
    try:
        return str(e.response.get("error") or "")
    except (AttributeError, TypeError):
        return ""


async def mapped(request: Awaitable[T]) -> T:
    """One Web API call; slack-sdk's errors mapped onto the Governor's."""
    try:
        return await request
    except SlackApiError as e:
        status = getattr(e.response, "status_code", 0) or 0
        code = _error_code(e)
        if status == 429 or code == "ratelimited":
            raise RateLimited(_retry_after(e), message=f"rate limited by Slack ({code or status})") from e
        if status >= 500 or code in ("internal_error", "fatal_error", "service_unavailable", "request_timeout"):
            raise TransientSendError(f"{status} {code}".strip()) from e
        raise PermanentSendError(code or f"HTTP {status}") from e
    except (TimeoutError, aiohttp.ClientError, OSError) as e:
        raise TransientSendError(f"{type(e).__name__}: {e}") from e
    except SlackRequestError as e:  # an upload to the file URL that did not take
        raise TransientSendError(str(e)) from e


class SlackClient:
    """The Web API client of one bot: messages, edits, uploads, downloads; ``identity`` once started."""

    def __init__(
        self, settings: SlackSettings, *, resolve: Resolve | None = None, account: str = DEFAULT_ACCOUNT
    ) -> None:
        self.settings = settings
        self.account = account
        # what health, metrics and logs call this bot: "slack", or "slack/ACCOUNT"
        self.label = f"slack/{account}" if account else "slack"
        self.web = AsyncWebClient(token=settings.bot_token.get_secret_value(), base_url=settings.api_url(), timeout=30)
        self.identity: Identity | None = None
        hosts = (*MEDIA_HOSTS, *settings.media_hosts)
        self.media_hosts = MediaHosts(hosts) if resolve is None else MediaHosts(hosts, resolve)
        self.governor = Governor(
            self.label,
            per_chat=RateLimit(*settings.channel_rate),
            global_=RateLimit(*settings.global_rate),
            max_attempts=settings.send_attempts,
            max_wait=settings.send_max_wait,
        )
        # chat.update is Tier 3 across the workspace: live edits get their own window
        self.edits = Governor(
            self.label,
            per_chat=RateLimit(*settings.channel_rate),
            global_=RateLimit(*settings.update_rate),
            max_attempts=settings.send_attempts,
            max_wait=settings.send_max_wait,
        )

    def report_to(self, hub: Any) -> None:
        self.governor.report_to(hub)
        self.edits.report_to(hub)

    async def sign_in(self) -> Identity:
        """``auth.test``: who the bot is.

        Raises:
            SlackStartError: the token was refused, or Slack could not be reached.
        """
        if self.web.session is None or self.web.session.closed:
            # one connection pool for the bot's life (slack-sdk opens a session per call without it)
            self.web.session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.web.timeout))
        try:
            auth = await self.web.auth_test()
        except SlackApiError as e:
            code = _error_code(e)
            if code in ("invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired"):
                raise SlackStartError(
                    f"Slack refused the bot token ({code}): set SLACK_BOT_TOKEN to the app's Bot User "
                    "OAuth Token (OAuth & Permissions > Bot User OAuth Token, xoxb-...)"
                ) from e
            raise SlackStartError(f"Slack refused auth.test: {code or e}") from e
        except (TimeoutError, aiohttp.ClientError, OSError, SlackClientError) as e:
            raise SlackStartError(f"cannot reach Slack's Web API at {self.settings.api_url()}: {e}") from e
        self.identity = Identity(
            user_id=str(auth.get("user_id") or ""),
            bot_id=auth.get("bot_id"),
            team_id=auth.get("team_id"),
            name=str(auth.get("user") or ""),
        )
        # with a limiter shared across workers ([store] redis_url): this bot's windows, and
        # chat.update's own (Slack counts each method's tier apart)
        self.governor.bot = self.identity.user_id
        self.edits.bot = f"{self.identity.user_id}:chat.update"
        return self.identity

    async def check_app_token(self, app_token: str) -> None:
        """``apps.connections.open`` once: Socket Mode's token works (the URL it gives is left
        to expire), so a wrong one stops the start instead of a reconnect loop.

        Raises:
            SlackStartError: the app token was refused, or Slack could not be reached.
        """
        try:
            await self.web.apps_connections_open(app_token=app_token)
        except SlackApiError as e:
            code = _error_code(e)
            if code in ("invalid_auth", "not_authed", "not_allowed_token_type", "token_revoked", "missing_scope"):
                raise SlackStartError(
                    f"Slack refused the app token ({code}): set SLACK_APP_TOKEN to an app-level token with the "
                    "connections:write scope (Basic Information > App-Level Tokens, xapp-...), and turn "
                    "Socket Mode on for the app"
                ) from e
            raise SlackStartError(f"Slack refused apps.connections.open: {code or e}") from e
        except (TimeoutError, aiohttp.ClientError, OSError, SlackClientError) as e:
            raise SlackStartError(f"cannot reach Slack's Web API at {self.settings.api_url()}: {e}") from e

    # --- messages -------------------------------------------------------------------------

    async def post(self, channel: str, text: str, *, thread_ts: str | None = None) -> str:
        """One message (Markdown, at most `MAX_LENGTH` once in mrkdwn); returns its ``ts``."""

        async def once() -> str:
            try:
                resp = await mapped(
                    self.web.chat_postMessage(
                        channel=channel,
                        text=to_plain(text),
                        blocks=[_section(text)],
                        thread_ts=thread_ts,
                        unfurl_links=False,
                    )
                )
            except PermanentSendError as e:
                if str(e) not in _FALLBACK_ERRORS:
                    raise
                log.info("slack: %s refused the mrkdwn block (%s): sent as plain text", channel, e)
                resp = await mapped(
                    self.web.chat_postMessage(
                        channel=channel, text=to_plain(text), mrkdwn=False, thread_ts=thread_ts, unfurl_links=False
                    )
                )
            return str(resp["ts"])

        return await self.governor.send(channel, once)

    async def update(self, channel: str, ts: str, text: str) -> None:
        """Edit a message the bot sent (a live reply)."""

        async def once() -> None:
            try:
                await mapped(self.web.chat_update(channel=channel, ts=ts, text=to_plain(text), blocks=[_section(text)]))
            except PermanentSendError as e:
                if str(e) not in _FALLBACK_ERRORS:
                    raise
                await mapped(self.web.chat_update(channel=channel, ts=ts, text=to_plain(text), blocks=[]))

        await self.edits.send(channel, once)

    async def delete(self, channel: str, ts: str) -> None:
        await self.governor.send(channel, lambda: mapped(self.web.chat_delete(channel=channel, ts=ts)))

    async def upload(self, channel: str, files: Sequence[MediaFile], *, thread_ts: str | None = None) -> list[str]:
        """``files_upload_v2``: the files into the channel (the thread), in one share; their ids.

        Raises:
            SendFailed: too many files, one over Slack's size limit, or the upload failed.
        """
        if len(files) > MAX_FILES:
            raise SendFailed("slack", channel, f"{len(files)} files: one upload takes at most {MAX_FILES}")
        for f in files:
            if f.size > MAX_UPLOAD_BYTES:
                raise SendFailed(
                    "slack", channel, f"{f.name} is {human_size(f.size)}, over Slack's {human_size(MAX_UPLOAD_BYTES)}"
                )
        uploads = [{"file": f.data, "filename": f.name, "title": f.name} for f in files]

        async def once() -> Any:
            return await mapped(self.web.files_upload_v2(file_uploads=uploads, channel=channel, thread_ts=thread_ts))

        resp = await self.governor.send(channel, once)
        return [str(f.get("id")) for f in resp.get("files") or []]

    # --- files in -------------------------------------------------------------------------

    async def fetch(self, part: MediaPart, max_bytes: int) -> bytes:
        """A file's bytes: ``files.info`` for its download URL, then the download with the bot
        token, at most ``max_bytes`` (capped while read), only from Slack's file hosts at
        public addresses, so an event cannot make the hub fetch from elsewhere."""
        try:
            info = await self.web.files_info(file=part.ref)
        except SlackApiError as e:
            raise MediaError(f"Slack's files.info refused it: {_error_code(e) or e}", name=part.name) from e
        except (TimeoutError, aiohttp.ClientError, OSError, SlackClientError) as e:
            raise MediaError(f"files.info failed: {e}", name=part.name) from e
        file = info.get("file") or {}
        url = file.get("url_private_download") or file.get("url_private")
        if not isinstance(url, str) or not url:
            raise MediaError("Slack gave no download URL for it (an external or deleted file)", name=part.name)
        token = self.settings.bot_token.get_secret_value()
        return await fetch_url(
            url,
            max_bytes=max_bytes,
            name=part.name,
            hosts=self.media_hosts,
            headers={"Authorization": f"Bearer {token}"},
        )

    async def close(self) -> None:
        session, self.web.session = self.web.session, None
        if session is not None and not session.closed:
            await session.close()


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": to_mrkdwn(text) or " "}}
