"""The Mastodon client at work: mentions in, replies (and threads) out, through Mastodon.py.

Inbound, the notifications of type ``mention`` newer than the saved position are read oldest
first (``min_id`` pages) and each is recorded (``send``) before the position moves past it:
a crash can repeat a read but never lose or re-answer a mention. A first start (no saved
position) reads back from the newest (``max_id`` pages) as far as ``backlog_max_age``, and
saves a position even when it found none, so that a storm right after start is read whole. The streaming API
(``stream_user``) only wakes the reader at once; when the stream drops, the reader polls every
``poll_interval`` seconds while it reconnects, so nothing waits on the stream being up.

Outbound, a reply is a status with ``in_reply_to_id``, the mention of the person answered, a
visibility never more public than the mention's, and its content warning; a longer one is a
thread within the instance's limit (``/api/v2/instance``). Each status carries an
``Idempotency-Key`` made from the run's input, the output and the part: a retry after a 429,
a 5xx or a restart gets the status the first attempt made, never a second one.

Mastodon.py is synchronous: each call runs in a thread.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from mastodon import (
    Mastodon,
    MastodonAPIError,
    MastodonNetworkError,
    MastodonRatelimitError,
    MastodonServerError,
    MastodonUnauthorizedError,
    StreamListener,
)

from hub import OutputLog, RunContext, RunError
from hub.platform import (
    Backoff,
    PermanentSendError,
    PublicTimeline,
    RateLimited,
    Review,
    SendFailed,
    TransientSendError,
    check_length,
    reply_target,
)

from ._text import split_status, status_length

if TYPE_CHECKING:
    from hub import Hub

    from . import MastodonSettings

__all__ = ["MastodonBot", "SINCE_ID_KEY", "PLATFORM", "make_client"]

log = logging.getLogger("hub_mastodon")

PLATFORM = "mastodon"
SINCE_ID_KEY = "mastodon:since_id"
ROOT_PREFIX = "mastodon:root:"
PAGE = 40  # notifications per request (Mastodon allows 80)
_VISIBILITY = ("public", "unlisted", "private", "direct")  # from most to least public

Send = Callable[..., Awaitable[Any]]
ClientFactory = Callable[["MastodonSettings"], Mastodon]


def make_client(settings: MastodonSettings) -> Mastodon:
    """Mastodon.py's client for ``base_url``; rate limits are thrown, and the Governor waits."""
    return Mastodon(
        access_token=settings.access_token.get_secret_value(),
        api_base_url=settings.base_url,
        ratelimit_method="throw",
        request_timeout=settings.request_timeout,
    )


def _send_error(e: Exception, client: Mastodon) -> Exception:
    """A Mastodon.py error as the Governor's kinds: 429 waits for the window's reset."""
    if isinstance(e, MastodonRatelimitError):
        reset = getattr(client, "ratelimit_reset", None)
        return RateLimited(max(0.5, float(reset) - time.time()) if reset else 5.0, scope="global")
    if isinstance(e, MastodonServerError | MastodonNetworkError):
        return TransientSendError(str(e))
    if isinstance(e, MastodonAPIError):
        return PermanentSendError(str(e))
    return e


def more_private(a: str, b: str) -> str:
    """The less public of two visibilities: a reply never shows further than what it answers."""
    return _VISIBILITY[max(_VISIBILITY.index(a), _VISIBILITY.index(b))]


class _Wake(StreamListener):
    """The stream's events, from its thread: a mention wakes the reader; the end is reported."""

    def __init__(self, loop: asyncio.AbstractEventLoop, wake: asyncio.Event) -> None:
        self.loop, self.wake = loop, wake

    def on_notification(self, notification: Any) -> None:
        self.loop.call_soon_threadsafe(self.wake.set)

    def on_abort(self, err: Exception) -> None:
        self.loop.call_soon_threadsafe(self.wake.set)


class MastodonBot:
    """One bot account on one instance: its client, the mention reader and the posting side."""

    def __init__(self, settings: MastodonSettings, *, client_factory: ClientFactory | None = None) -> None:
        self.settings = settings
        self._factory = client_factory or make_client
        self.client: Mastodon | None = None
        self.hub: Hub | None = None
        self.timeline = PublicTimeline(PLATFORM, settings, poster=self._post_held, log=log)
        self.account_id = ""
        self.acct = ""
        self.max_characters = 500
        self.per_url = 23
        self._send: Send | None = None
        self._wake = asyncio.Event()
        self._stream: Any = None
        self._lock = asyncio.Lock()
        self.polls = 0
        """Reads of the notifications since start."""
        self.streams = 0
        """Streams opened since start."""

    async def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(fn, *args, **kwargs)

    # --- lifecycle ----------------------------------------------------------------------

    async def start(self, hub: Hub) -> None:
        """Sign in (``verify_credentials``) and read the instance's limits (``/api/v2/instance``)."""
        self.hub = hub
        self.client = client = self._factory(self.settings)
        try:
            me = await self._call(client.account_verify_credentials)
        except MastodonUnauthorizedError as e:
            raise RuntimeError(
                f"mastodon: {self.settings.base_url} refused the access_token (MASTODON_ACCESS_TOKEN): {e}"
            ) from e
        self.account_id, self.acct = str(me["id"]), str(me["acct"])
        try:
            statuses = (await self._call(client.instance_v2))["configuration"]["statuses"]
            self.max_characters = int(statuses["max_characters"])
            self.per_url = int(statuses["characters_reserved_per_url"])
        except (MastodonAPIError, KeyError, TypeError) as e:  # an older instance: Mastodon's defaults
            log.warning("mastodon: no limits from /api/v2/instance (%s); assuming 500 characters, 23 a URL", e)
        s = self.settings
        self.timeline.start(hub)
        log.info(
            "mastodon: signed in as @%s on %s (%d characters a status, %d a URL); %s",
            self.acct,
            s.base_url,
            self.max_characters,
            self.per_url,
            self.timeline.mode(f"posting ({s.visibility})"),
        )

    async def stop(self) -> None:
        self._close_stream()
        await self.timeline.stop()
        self.client = None

    async def subscribe(self, send: Send, hub: Hub) -> Callable[[], Awaitable[None]]:
        """Read mentions under the lease ``mastodon:read:<account id>`` (one worker reads)."""
        self._send = send
        return self.timeline.read_under_lease(hub, f"mastodon:read:{self.account_id}", self._read_forever)

    # --- reading ------------------------------------------------------------------------

    def _open_stream(self, loop: asyncio.AbstractEventLoop) -> None:
        assert self.client is not None
        self._stream = self.client.stream_user(_Wake(loop, self._wake), run_async=True, reconnect_async=False)
        self.streams += 1

    def _close_stream(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            # closing waits for the reading thread to let go of the socket: never on the loop
            threading.Thread(target=stream.close, name="mastodon:stream-close", daemon=True).start()

    def streaming(self) -> bool:
        """Whether the stream is up now."""
        return self._stream is not None and bool(self._stream.is_receiving())

    async def _read_forever(self) -> None:
        """Read at start, at each streamed mention, and every ``poll_interval`` seconds while
        the stream is down (and, as a safety net, while it is up)."""
        s = self.settings
        backoff = Backoff(first=s.poll_interval, most=max(s.poll_interval * 16, 900.0), jitter=0.0)
        try:
            while True:
                if s.stream and not (self._stream is not None and self._stream.is_alive()):
                    if self._stream is not None:
                        log.warning("mastodon: the stream dropped; reading notifications by id until it is back")
                    self._close_stream()
                    try:
                        await self._call(self._open_stream, asyncio.get_running_loop())
                    except Exception as e:
                        log.warning("mastodon: streaming is unavailable (%s); reading notifications by id", e)
                self._wake.clear()
                try:
                    await self.poll()
                    backoff.reset()
                    delay = s.poll_interval if self.streaming() or not s.stream else min(s.poll_interval, 15.0)
                    self._connected(True)
                except asyncio.CancelledError:
                    raise
                except Exception as e:
                    self._connected(False)
                    delay = backoff.next()
                    log.warning(
                        "mastodon: reading mentions failed (%s: %s); again in %.0fs", type(e).__name__, e, delay
                    )
                try:
                    await asyncio.wait_for(self._wake.wait(), delay)
                except TimeoutError:
                    pass
        finally:
            self._close_stream()
            self._connected(False)

    def _connected(self, up: bool) -> None:
        self.timeline.connected(up)

    async def poll(self) -> int:
        """Hand the mentions after the saved position to the hub, oldest first; how many were new."""
        if self._send is None or self.hub is None or self.client is None:
            raise RunError("mastodon: poll() before the hub started the extension")
        async with self._lock:
            since = await self.hub.memory.get(SINCE_ID_KEY)
            new = 0
            if since is None:  # first start: the mentions within backlog_max_age, however many pages
                for note in await self._backlog():
                    if await self._handle(note, first_start=True):
                        new += 1
                    since = str(note["id"])
                    await self.hub.memory.set(SINCE_ID_KEY, since)  # after it is recorded
                if since is None:  # none yet: every mention from now on is new (ids are above 0)
                    since = "0"
                    await self.hub.memory.set(SINCE_ID_KEY, since)
                self.polls += 1
                return new
            while True:
                await self._respect_limit()
                page = await self._call(self.client.notifications, types=["mention"], min_id=since, limit=PAGE)
                notes = sorted(page, key=lambda n: int(n["id"]))
                for note in notes:
                    if await self._handle(note, first_start=False):
                        new += 1
                    since = str(note["id"])
                    await self.hub.memory.set(SINCE_ID_KEY, since)  # after it is recorded
                if len(notes) < PAGE:
                    break
            self.polls += 1
            return new

    async def _backlog(self) -> list[Any]:
        """A first start's mentions, oldest first: pages back (``max_id``) from the newest until
        one is short or reaches past ``backlog_max_age`` (older ones are not answered anyway)."""
        assert self.client is not None
        cutoff = time.time() - self.settings.backlog_max_age
        notes: list[Any] = []
        max_id = None
        while True:
            await self._respect_limit()
            page = await self._call(self.client.notifications, types=["mention"], max_id=max_id, limit=PAGE)
            notes.extend(page)
            if len(page) < PAGE:
                break
            oldest = min(page, key=lambda n: int(n["id"]))
            created = oldest.get("created_at")
            if hasattr(created, "timestamp") and created.timestamp() < cutoff:
                break
            max_id = str(oldest["id"])
        return sorted({str(n["id"]): n for n in notes}.values(), key=lambda n: int(n["id"]))

    async def _respect_limit(self) -> None:
        """Wait (cancellably) when the response headers said the window is spent."""
        c = self.client
        remaining, reset = getattr(c, "ratelimit_remaining", None), getattr(c, "ratelimit_reset", None)
        if remaining == 0 and reset:
            wait = min(float(reset) - time.time(), 300.0)
            if wait > 0:
                log.info("mastodon: no requests left in this window; waiting %.0fs", wait)
                await asyncio.sleep(wait)

    async def _handle(self, note: Any, *, first_start: bool) -> bool:
        assert self._send is not None and self.hub is not None
        status = note.get("status")
        account = note["account"]
        if status is None:
            return False
        sid, author, acct = str(status["id"]), str(account["id"]), str(account["acct"])
        who = f"@{acct}"
        created = status.get("created_at")
        own = author == self.account_id
        root = sid if own else await self._root(status)
        if not await self.timeline.admit(
            f"mention {sid}",
            who=who,
            ids=(author, acct),
            account=author,
            own=own,
            created=created.timestamp() if hasattr(created, "timestamp") else None,
            first_start=first_start,
            now=time.time(),
            bot_thread=root if account.get("bot") else None,
        ):
            return False
        sub = await self._send(
            "mastodon:thread",
            {"id": root},
            _plain(str(status.get("content") or "")),
            user=who,
            platform_id=f"mastodon:{sid}",
            meta={
                "status_id": sid,
                "account_id": author,
                "acct": acct,
                "visibility": str(status.get("visibility") or "public"),
                "spoiler_text": str(status.get("spoiler_text") or ""),
                "user_name": account.get("display_name") or acct,
                "user_handle": acct,
            },
        )
        if sub.duplicate:
            log.info("mastodon: mention %s was recorded before: not answered again", sid)
            return False
        return True

    async def _root(self, status: Any) -> str:
        """The id of the first status of ``status``'s thread: known for the threads the bot
        answered in, else asked of the instance (``/context``)."""
        assert self.hub is not None and self.client is not None
        sid, parent = str(status["id"]), status.get("in_reply_to_id")
        if not parent:
            return sid
        known = await self.hub.memory.get(f"{ROOT_PREFIX}{parent}")
        if known:
            return str(known)
        try:
            context = await self._call(self.client.status_context, parent)
            ancestors = context["ancestors"]
            return str(ancestors[0]["id"]) if ancestors else str(parent)
        except MastodonAPIError:  # the parent is gone or hidden: the thread starts at it
            return str(parent)

    # --- posting ------------------------------------------------------------------------

    async def reply(self, text: str, ctx: RunContext) -> dict[str, Any]:
        """Answer the mention this run is handling (the newest among its inputs)."""
        mention = reply_target(ctx, "status_id")
        meta = mention or {}
        target = str(meta.get("status_id") or ctx.context.key)
        acct = str(meta.get("acct") or "")
        visibility = more_private(self.settings.visibility, str(meta.get("visibility") or "public"))
        spoiler = str(meta.get("spoiler_text") or "")
        chat = ctx.context.key
        prefix = f"@{acct} " if acct and f"@{acct}" not in text else ""
        self.timeline.no_pictures(ctx, chat, label="Mastodon")
        parts = self._split(text, prefix=prefix, spoiler=spoiler, chat=chat)
        if self.timeline.reviews is not None:
            return await self.timeline.hold(
                text,
                output="mastodon:reply",
                chat=chat,
                in_reply_to=target,
                extra={"acct": acct, "visibility": visibility, "spoiler_text": spoiler},
            )
        if self.settings.dry_run:
            self.timeline.dry_run(parts, in_reply_to=target, how=visibility)
            return {"dry_run": True, "in_reply_to": target, "statuses": parts, "visibility": visibility}
        source = ctx.inputs[-1].id if ctx.inputs else ctx.run.id
        ordinal = sum(1 for e in ctx.logs if isinstance(e, OutputLog) and e.type == "mastodon:reply" and e.sent)
        return await self._post(
            parts,
            chat=chat,
            in_reply_to=target,
            visibility=visibility,
            spoiler=spoiler,
            key=f"{source}:mastodon:reply:{ordinal}",
            ctx=ctx,
        )

    def _split(self, text: str, *, prefix: str, spoiler: str, chat: str) -> list[str]:
        limit = self.max_characters - status_length(spoiler, per_url=self.per_url)
        return self.timeline.thread(
            split_status(text, limit=limit, per_url=self.per_url, prefix=prefix), chat, unit="statuses"
        )

    async def _post(
        self,
        parts: list[str],
        *,
        chat: str,
        in_reply_to: str,
        visibility: str,
        spoiler: str,
        key: str,
        ctx: RunContext | None = None,
    ) -> dict[str, Any]:
        assert self.hub is not None and self.timeline.governor is not None
        await self.timeline.reserve(len(parts), chat)
        ids: list[str] = []
        previous = in_reply_to
        try:
            for i, part in enumerate(parts):
                idempotency = hashlib.sha256(f"{key}:{i}".encode()).hexdigest()[:32]
                previous = await self.timeline.governor.send(
                    chat, self._poster(part, previous, visibility, spoiler, idempotency)
                )
                ids.append(previous)
                await self.hub.memory.set(f"{ROOT_PREFIX}{previous}", chat)  # its replies join this thread
                if ctx is not None:
                    await ctx.part_sent(i, previous)
        except SendFailed as e:
            if ids:
                raise SendFailed(
                    PLATFORM, chat, f"{e.reason}; {len(ids)} of {len(parts)} statuses were posted: {ids}"
                ) from e
            raise
        log.info("mastodon: posted %s in reply to %s", ", ".join(ids), in_reply_to)
        return {"status_ids": ids, "in_reply_to": in_reply_to, "visibility": visibility}

    def _poster(
        self, text: str, in_reply_to: str, visibility: str, spoiler: str, idempotency: str
    ) -> Callable[[], Awaitable[str]]:
        # the last check before it leaves, counted as the instance counts
        check_length(
            PLATFORM,
            "status",
            text,
            measure=lambda t: status_length(t, per_url=self.per_url) + status_length(spoiler, per_url=self.per_url),
            limit=self.max_characters,
            unit="characters",
        )

        async def post() -> str:
            client = self.client
            assert client is not None
            try:
                status = await self._call(
                    client.status_post,
                    text,
                    in_reply_to_id=in_reply_to,
                    visibility=visibility,
                    spoiler_text=spoiler or None,
                    idempotency_key=idempotency,  # the same on every retry: posted once
                )
            except Exception as e:
                mapped = _send_error(e, client)
                if mapped is e:
                    raise
                raise mapped from e
            return str(status["id"])

        return post

    async def _post_held(self, review: Review) -> dict[str, Any]:
        """Post a held reply an operator approved (its text maybe edited)."""
        import json

        extra = json.loads(review.extra or "{}")
        acct, spoiler = str(extra.get("acct") or ""), str(extra.get("spoiler_text") or "")
        prefix = f"@{acct} " if acct and f"@{acct}" not in review.text else ""
        parts = self._split(review.text, prefix=prefix, spoiler=spoiler, chat=review.chat)
        if self.settings.dry_run:
            log.info("mastodon (dry run): would post approved %s: %s", review.id, parts)
            return {"dry_run": True, "statuses": parts}
        return await self._post(
            parts,
            chat=review.chat,
            in_reply_to=review.in_reply_to or review.chat,
            visibility=str(extra.get("visibility") or self.settings.visibility),
            spoiler=spoiler,
            key=f"review:{review.id}",
        )


def _plain(html: str) -> str:
    """A status's HTML as text: paragraphs and line breaks kept, tags dropped, entities read."""
    import html as html_lib
    import re

    text = re.sub(r"<br\s*/?>", "\n", html)
    text = re.sub(r"</p>\s*<p>", "\n\n", text)
    return html_lib.unescape(re.sub(r"<[^>]+>", "", text)).strip()
