"""The Bluesky client at work: notifications in, replies (and threads) out, through the atproto
SDK's ``AsyncClient``.

Inbound, ``listNotifications`` is read newest first, page by page back to the newest one
already handled (its ``indexedAt`` and uri, kept in the store as ``bluesky:cursor``), then
the new mentions and replies are handed to the hub oldest first, the position saved after
each is recorded: a crash repeats a read, never loses or re-answers a mention (the inbox
knows each post's uri). A first start reads back as far as ``backlog_max_age``, and saves a
position even when it found nothing, so that a storm right after start is read whole.

Outbound, a reply carries ``reply {root, parent}`` strong references (uri and cid); text over
300 graphemes becomes a thread, each post replying to the last; mentions and links are facets
with UTF-8 byte offsets, built by the SDK's ``client_utils.TextBuilder``.

The SDK refreshes the session before the access token expires. A refresh refused (the app
password was revoked) stops reading, logs a clear error, and the hub's health says so.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import grapheme
from atproto import AsyncClient, client_utils, models
from atproto_client.exceptions import (
    BadRequestError,
    InvokeTimeoutError,
    NetworkError,
    RequestErrorBase,
    UnauthorizedError,
)

from hub import RunContext, RunError
from hub.platform import (
    PermanentSendError,
    PublicTimeline,
    RateLimited,
    Review,
    SendFailed,
    TransientSendError,
    check_length,
    reply_target,
    split_message,
)

if TYPE_CHECKING:
    from hub import Hub

    from . import BlueskySettings

__all__ = ["BlueskyBot", "CURSOR_KEY", "PLATFORM", "MAX_GRAPHEMES", "SessionRevoked", "build_text", "split_post"]

log = logging.getLogger("hub_bluesky")

PLATFORM = "bluesky"
CURSOR_KEY = "bluesky:cursor"
MAX_GRAPHEMES = 300
PAGE = 50
_REASONS = ("mention", "reply")
_LINK = re.compile(r"https?://[^\s]+")

Send = Callable[..., Awaitable[Any]]
ClientFactory = Callable[["BlueskySettings"], AsyncClient]


class SessionRevoked(RuntimeError):
    """Bluesky refused the session and its refresh: the app password was revoked or changed."""


def graphemes(text: str) -> int:
    return int(grapheme.length(text))


def split_post(text: str, *, prefix: str = "") -> list[str]:
    """``text`` as posts of at most 300 graphemes each (with ``prefix``, the mention of the
    person answered, on the first); Bluesky's text is plain."""
    parts = split_message(text, MAX_GRAPHEMES - graphemes(prefix), length=graphemes, markdown=False)
    return [prefix + p if i == 0 else p for i, p in enumerate(parts)]


def build_text(text: str, mentions: dict[str, str]) -> client_utils.TextBuilder:
    """``text`` with its links and ``@handle`` mentions (``mentions``: handle -> did) as facets."""
    builder = client_utils.TextBuilder()
    pattern = re.compile(
        "|".join([_LINK.pattern, *(re.escape(f"@{h}") for h in sorted(mentions, key=len, reverse=True))])
    )
    at = 0
    for m in pattern.finditer(text):
        builder.text(text[at : m.start()])
        token = m.group(0)
        if token.startswith("@"):
            builder.mention(token, mentions[token[1:]])
        else:
            builder.link(token, token)
        at = m.end()
    builder.text(text[at:])
    return builder


def make_client(settings: BlueskySettings) -> AsyncClient:
    """The SDK's client for ``base_url`` (the PDS; its ``/xrpc`` path added when left out)."""
    url = settings.base_url.rstrip("/")
    if url and not url.endswith("/xrpc"):
        url += "/xrpc"
    return AsyncClient(base_url=url or None)


def _send_error(e: Exception) -> Exception:
    if isinstance(e, RequestErrorBase) and e.response is not None:
        status = e.response.status_code
        if status == 429:
            reset = (e.response.headers or {}).get("ratelimit-reset")
            return RateLimited(max(0.5, float(reset) - time.time()) if reset else 5.0, scope="global")
        if status >= 500:
            return TransientSendError(str(e))
        return PermanentSendError(f"{status}: {getattr(e.response.content, 'message', e)}")
    if isinstance(e, NetworkError | InvokeTimeoutError):
        return TransientSendError(str(e))
    return e


def _revoked(e: Exception) -> bool:
    """Whether the server refused the session itself (not one request)."""
    if not isinstance(e, BadRequestError | UnauthorizedError) or e.response is None:
        return False
    error = getattr(e.response.content, "error", None)
    return error in ("ExpiredToken", "InvalidToken", "AuthenticationRequired", "AccountTakedown")


class BlueskyBot:
    """One bot account: its client, the notification reader and the posting side."""

    def __init__(self, settings: BlueskySettings, *, client_factory: ClientFactory | None = None) -> None:
        self.settings = settings
        self._factory = client_factory or make_client
        self.client: AsyncClient | None = None
        self.hub: Hub | None = None
        self.timeline = PublicTimeline(PLATFORM, settings, poster=self._post_held, log=log)
        self.did = ""
        self.handle = settings.handle
        self._send: Send | None = None
        self._lock = asyncio.Lock()
        self.problem: str | None = None
        """Why the extension stopped (a revoked session), for the hub's health."""
        self.polls = 0

    async def start(self, hub: Hub) -> None:
        """Log in with the app password."""
        self.hub = hub
        self.client = self._factory(self.settings)
        try:
            await self.client.login(self.settings.handle, self.settings.app_password.get_secret_value())
        except (BadRequestError, UnauthorizedError) as e:
            raise RuntimeError(
                f"bluesky: {self.settings.handle} could not log in with the app password (BLUESKY_APP_PASSWORD): "
                f"{getattr(e.response.content, 'message', e) if e.response else e}"
            ) from e
        self.did = self.client.me.did if self.client.me else ""
        self.timeline.start(hub)
        log.info("bluesky: logged in as %s (%s); %s", self.handle, self.did, self.timeline.mode())

    async def stop(self) -> None:
        await self.timeline.stop()
        self.client = None

    async def subscribe(self, send: Send, hub: Hub) -> Callable[[], Awaitable[None]]:
        """Read notifications under the lease ``bluesky:read:<did>`` (one worker reads)."""
        self._send = send
        return self.timeline.read_under_lease(hub, f"bluesky:read:{self.did}", self._read_forever)

    async def _read_forever(self) -> None:
        delay = self.settings.poll_interval
        while True:
            try:
                await self.poll()
                self._connected(True)
                delay = self.settings.poll_interval
            except SessionRevoked:
                return  # nothing to read with: the operator must give a new app password
            except asyncio.CancelledError:
                raise
            except Exception as e:
                self._connected(False)
                delay = min(delay * 2, 900.0)
                log.warning(
                    "bluesky: reading notifications failed (%s: %s); again in %.0fs", type(e).__name__, e, delay
                )
            await asyncio.sleep(delay)

    def _connected(self, up: bool) -> None:
        self.timeline.connected(up)

    async def poll(self) -> int:
        """Hand the new mentions and replies to the hub, oldest first; how many were new.

        Raises:
            SessionRevoked: the session and its refresh were refused.
        """
        if self._send is None or self.hub is None or self.client is None:
            raise RunError("bluesky: poll() before the hub started the extension")
        async with self._lock:
            seen = await self.hub.memory.get(CURSOR_KEY)  # {"at": indexedAt, "uri": uri} of the newest handled
            fresh: list[Any] = []
            cursor = None
            cutoff = time.time() - self.settings.backlog_max_age
            try:
                while True:
                    page = await self.client.app.bsky.notification.list_notifications(
                        {"limit": PAGE, **({"cursor": cursor} if cursor else {})}
                    )
                    done = False
                    for note in page.notifications:
                        if seen and (note.indexed_at, note.uri) <= (seen["at"], seen["uri"]):
                            done = True
                            break
                        fresh.append(note)
                    cursor = page.cursor
                    # first start: back until a page reaches past backlog_max_age (not answered anyway)
                    past = not seen and fresh and _epoch(fresh[-1].indexed_at) < cutoff
                    if done or not cursor or past:
                        break
            except (BadRequestError, UnauthorizedError) as e:
                if _revoked(e):
                    self.problem = (
                        f"bluesky: the session of {self.handle} was refused and could not be refreshed "
                        "(the app password was revoked?): reading stopped; set a new BLUESKY_APP_PASSWORD and restart"
                    )
                    log.error("%s", self.problem)
                    self._connected(False)
                    self.hub.platform_problem(PLATFORM, self.problem)  # /healthz and `hub health` say so
                    raise SessionRevoked(self.problem) from e
                raise
            new = 0
            for note in sorted(fresh, key=lambda n: (n.indexed_at, n.uri)):
                if note.reason in _REASONS and await self._handle(note, first_start=seen is None):
                    new += 1
                await self.hub.memory.set(CURSOR_KEY, {"at": note.indexed_at, "uri": note.uri})
            if seen is None and not fresh:  # none yet: every notification from now on is new
                await self.hub.memory.set(CURSOR_KEY, {"at": "", "uri": ""})
            self.polls += 1
            return new

    async def _handle(self, note: Any, *, first_start: bool) -> bool:
        assert self._send is not None and self.hub is not None
        author = note.author
        who = f"@{author.handle}"
        record = note.record
        created = getattr(record, "created_at", "") or note.indexed_at
        if not await self.timeline.admit(
            note.uri,
            who=who,
            ids=(author.did, author.handle),
            account=author.did,
            own=author.did == self.did,
            created=_epoch(created),
            first_start=first_start,
            now=time.time(),
        ):
            return False
        reply = getattr(record, "reply", None)
        root_uri, root_cid = (reply.root.uri, reply.root.cid) if reply else (note.uri, note.cid)
        sub = await self._send(
            "bluesky:thread",
            {"id": root_uri},
            str(getattr(record, "text", "")),
            user=who,
            platform_id=f"bluesky:{note.uri}",
            meta={
                "uri": note.uri,
                "cid": note.cid,
                "root_uri": root_uri,
                "root_cid": root_cid,
                "did": author.did,
                "handle": author.handle,
                "user_name": getattr(author, "display_name", None) or author.handle,
                "user_handle": author.handle,
            },
        )
        if sub.duplicate:
            log.info("bluesky: %s was recorded before: not answered again", note.uri)
            return False
        return True

    # --- posting ------------------------------------------------------------------------

    async def reply(self, text: str, ctx: RunContext) -> dict[str, Any]:
        """Answer the post this run is handling, in its thread."""
        target = reply_target(ctx, "uri")
        if not target:
            raise SendFailed(PLATFORM, ctx.context.key, "no post to answer in this run")
        meta = {k: str(target[k]) for k in ("uri", "cid", "root_uri", "root_cid", "did", "handle")}
        chat = ctx.context.key
        self.timeline.no_pictures(ctx, chat, label="Bluesky")
        if self.timeline.reviews is not None:
            return await self.timeline.hold(
                text, output="bluesky:reply", chat=chat, in_reply_to=meta["uri"], extra=meta
            )
        parts = self._split(text, meta, chat)
        if self.settings.dry_run:
            self.timeline.dry_run(parts, in_reply_to=meta["uri"])
            return {"dry_run": True, "in_reply_to": meta["uri"], "posts": parts}
        return await self._post(parts, meta, chat, ctx=ctx)

    def _split(self, text: str, meta: dict[str, str], chat: str) -> list[str]:
        prefix = f"@{meta['handle']} " if meta.get("handle") and f"@{meta['handle']}" not in text else ""
        return self.timeline.thread(split_post(text, prefix=prefix), chat, unit="posts")

    async def _post(
        self, parts: list[str], meta: dict[str, str], chat: str, *, ctx: RunContext | None = None
    ) -> dict[str, Any]:
        assert self.hub is not None and self.timeline.governor is not None
        await self.timeline.reserve(len(parts), chat)
        root = models.ComAtprotoRepoStrongRef.Main(uri=meta["root_uri"], cid=meta["root_cid"])
        parent = models.ComAtprotoRepoStrongRef.Main(uri=meta["uri"], cid=meta["cid"])
        mentions = {meta["handle"]: meta["did"]} if meta.get("handle") else {}
        uris: list[str] = []
        for i, part in enumerate(parts):
            check_length(PLATFORM, chat, part, measure=graphemes, limit=MAX_GRAPHEMES, unit="graphemes")
            ref = await self.timeline.governor.send(chat, self._poster(build_text(part, mentions), root, parent))
            parent = ref
            uris.append(ref.uri)
            if ctx is not None:
                await ctx.part_sent(i, ref.uri)
        log.info("bluesky: posted %s in reply to %s", ", ".join(uris), meta["uri"])
        return {"uris": uris, "in_reply_to": meta["uri"]}

    def _poster(self, text: client_utils.TextBuilder, root: Any, parent: Any) -> Callable[[], Awaitable[Any]]:
        async def post() -> Any:
            client = self.client
            assert client is not None
            try:
                made = await client.send_post(
                    text, profile_identify=self.did, reply_to=models.AppBskyFeedPost.ReplyRef(root=root, parent=parent)
                )
            except Exception as e:
                mapped = _send_error(e)
                if mapped is e:
                    raise
                raise mapped from e
            return models.ComAtprotoRepoStrongRef.Main(uri=made.uri, cid=made.cid)

        return post

    async def _post_held(self, review: Review) -> dict[str, Any]:
        import json

        meta = json.loads(review.extra or "{}")
        parts = self._split(review.text, meta, review.chat)
        if self.settings.dry_run:
            log.info("bluesky (dry run): would post approved %s: %s", review.id, parts)
            return {"dry_run": True, "posts": parts}
        return await self._post(parts, meta, review.chat)


def _epoch(stamp: str) -> float:
    import datetime as dt

    try:
        return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return time.time()
