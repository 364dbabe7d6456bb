"""The X client at work: polling mentions into the hub, and posting replies and threads.

Inbound, one poll fetches every mention newer than the saved ``since_id`` (all pages),
then hands them to the hub oldest first; each is recorded (``send``) before ``since_id``
moves past it, so a crash can repeat a fetch but never lose or re-answer a mention.
Rate-limit headers are obeyed before each request: with nothing left, the poll sleeps
until the window resets (cancellable, so the hub stops at once).

Outbound, text over 280 weighted characters becomes a thread, each part replying to the
previous one, sent through a [`Governor`][hub.platform.Governor]. Before the first part, a
marker is committed in the hub's memory; a run that resumes after a crash finds it and
does not post the same answer again.

Of several workers sharing one store, only the holder of the lease ``twitter:poll:<user
id>`` polls; another takes over when it stops or its lease expires.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import tweepy
from tweepy.asynchronous import AsyncClient

from hub import MediaFile, MediaPart, OutputLog, RunContext, RunError
from hub.platform import (
    AllowList,
    Backoff,
    Governor,
    LeaseKeeper,
    MediaHosts,
    RateLimit,
    Resolve,
    Review,
    ReviewQueue,
    SendFailed,
    admit_reply,
    check_length,
    fetch_url,
    human_size,
    refuse_pictures,
    reply_target,
    reserve_posts,
    split_off_loop,
)

from ._client import BaseURLSession, RateLimitState, make_client, reset_in, send_error, upload_media
from ._text import MAX_TWEET, split_tweets, weighted_len

if TYPE_CHECKING:
    from hub import Hub

    from . import TwitterSettings

__all__ = ["TwitterBot", "SINCE_ID_KEY", "PLATFORM"]

log = logging.getLogger("hub_twitter")

PLATFORM = "twitter"
SINCE_ID_KEY = "twitter:since_id"
POSTS_KEY = "twitter:posts"
SENT_PREFIX = "twitter:sent:"
MENTIONS = "GET /2/users/:id/mentions"
MAX_PAGES = 160  # X keeps the 800 most recent mentions: 8 pages of 100 (160 of 5)
MAX_RATE_WAIT = 16 * 60.0  # a reset further away than one window is a wrong clock: cap it
SENT_MARKER_TTL = 7 * 86400.0
_TWEET_FIELDS = [
    "author_id",
    "conversation_id",
    "created_at",
    "referenced_tweets",
    "in_reply_to_user_id",
    "attachments",
]
_MEDIA_FIELDS = ["media_key", "type", "url", "preview_image_url", "width", "height", "alt_text"]
MAX_MEDIA = 4  # pictures on one post
MAX_IMAGE_BYTES = 5_000_000  # X's limit for a picture (GIFs: 15 MB)
_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/webp", "image/gif"})

ClientFactory = Callable[["TwitterSettings"], AsyncClient]

MEDIA_HOSTS = ("pbs.twimg.com",)
"""Where X serves a mention's pictures (and a video's preview): a URL elsewhere is never fetched."""
Send = Callable[..., Awaitable[Any]]


class TwitterBot:
    """One bot account on X: its client, the mention poller and the posting side.

    ``client_factory(settings)`` builds the tweepy client (default:
    `make_client()`); tests give one routed to a loopback fake.
    `poll()` runs one poll now (the loop also calls it every ``poll_interval``).
    """

    def __init__(
        self,
        settings: TwitterSettings,
        *,
        client_factory: ClientFactory | None = None,
        page_size: int = 100,
        resolve: Resolve | None = None,
    ) -> None:
        self.settings = settings
        # pictures come only from X's media hosts (and the config's), at public addresses;
        # ``resolve`` is a test's way to its loopback fake
        hosts = (*MEDIA_HOSTS, *settings.media_hosts)
        self.media_hosts = MediaHosts(hosts) if resolve is None else MediaHosts(hosts, resolve)
        self.page_size = page_size  # mentions per request: X allows 5 to 100
        self._factory = client_factory or make_client
        self.client: AsyncClient | None = None
        self.hub: Hub | None = None
        self.user_id: str | None = settings.user_id or None
        self.username: str | None = None
        self.governor: Governor | None = None
        self.loop_guard = settings.loop_guard()
        self.allow = AllowList(_norm(str(u)) for u in settings.allowed_users)
        self.ignore = AllowList(_norm(u) for u in settings.ignored_users)
        self._session: BaseURLSession | None = None
        self._send: Send | None = None
        self._task: asyncio.Task[None] | None = None
        self.keeper: LeaseKeeper | None = None  # the mention poller's lease, once subscribed
        self.reviews: ReviewQueue | None = None  # with review = true, once started
        self._review_task: asyncio.Task[None] | None = None
        self._poll_lock = asyncio.Lock()
        self._media: dict[str, Any] = {}  # media_key -> tweepy Media of the page being handled
        self.polls = 0
        """Polls completed since start."""

    # --- lifecycle ----------------------------------------------------------------------

    @property
    def read_user_auth(self) -> bool:
        """Mentions are read with the bearer token when there is one, else as the bot (OAuth 1.0a)."""
        return not self.settings.bearer_token.get_secret_value()

    @property
    def can_post(self) -> bool:
        return self.settings.has_posting_keys

    async def start(self, hub: Hub) -> None:
        """Build the client and find out who the bot is (``user_id``, or ``GET /2/users/me``)."""
        # tweepy logs request headers (tokens included) at DEBUG: keep that out of the log.
        logging.getLogger("tweepy").setLevel(max(logging.getLogger("tweepy").getEffectiveLevel(), logging.INFO))
        self.hub = hub
        self.client = client = self._factory(self.settings)
        if client.session is None:
            self._session = BaseURLSession(self.settings.api_base_url)
            client.session = self._session
        s = self.settings
        self.governor = Governor(
            PLATFORM,
            per_chat=RateLimit(1, s.post_interval) if s.post_interval > 0 else None,
            global_=RateLimit(s.posts_per_minute, 60.0),
            max_attempts=s.send_attempts,
            max_wait=s.send_max_wait,
        )
        self.governor.report_to(hub)
        try:
            if self.can_post:
                await self._whoami(client)
            await self._prune_markers()
        except BaseException:
            await self.stop()  # the hub stops only services that started: close the session here
            raise
        if s.review:
            self.reviews = ReviewQueue(
                hub.stores.reviews, PLATFORM, expiry=s.review_expiry, poster=self._post_held, poll=s.review_poll
            )
            self._review_task = hub.create_task(self.reviews.run(), name="twitter:reviews")
        mode = "dry run: nothing is posted" if s.dry_run else "posting"
        if s.review:
            mode += "; each post is held for review (hub review list)"
        log.info(
            "twitter: signed in as %s (%s); %s",
            f"@{self.username}" if self.username else self.user_id,
            self.user_id,
            mode,
        )

    async def _whoami(self, client: AsyncClient) -> None:
        try:
            me = await client.get_me(user_auth=True)
        except (tweepy.Unauthorized, tweepy.Forbidden) as e:
            raise RuntimeError(
                f"X refused the OAuth 1.0a keys (api_key, api_secret, access_token, access_token_secret): {e}"
            ) from e
        except Exception as e:  # X busy or unreachable: the access token starts with the user id
            derived = self.settings.access_token.get_secret_value().partition("-")[0]
            if not (self.user_id or derived.isdigit()):
                raise
            self.user_id = self.user_id or derived
            log.warning("twitter: could not ask X who the bot is (%s); using user id %s", e, self.user_id)
            return
        configured, self.user_id, self.username = self.user_id, str(me.data.id), me.data.username
        if configured and configured != self.user_id:
            log.warning(
                "twitter: user_id = %s in the config, but the keys belong to %s: using %s",
                configured,
                self.user_id,
                self.user_id,
            )

    async def stop(self) -> None:
        await self._stop_polling()
        task, self._review_task = self._review_task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if self._session is not None:
            await self._session.close()
            self._session = None
        self.client = None

    async def subscribe(self, send: Send, hub: Hub) -> Callable[[], Awaitable[None]]:
        """Start the poll loop (its first poll at once) under the lease ``twitter:poll:<user
        id>``, so that of several workers sharing a store one polls; returns how to stop it."""
        self._send = send
        self.keeper = hub.lease(f"twitter:poll:{self.user_id}", ttl=self.settings.lease_ttl)
        self._task = hub.create_task(self.keeper.hold(self._poll_forever), name="twitter:mentions")
        return self._stop_polling

    async def _stop_polling(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    # --- polling ------------------------------------------------------------------------

    async def _poll_forever(self) -> None:
        interval = self.settings.poll_interval
        # after failures in a row: 2, 4, 8, then 16 poll intervals (an hour at most)
        backoff = Backoff(first=interval * 2, most=min(interval * 16, 3600.0), jitter=0.0)
        while True:
            try:
                await self.poll()
                backoff.reset()
                delay = interval
                self._connected(True)
            except asyncio.CancelledError:
                self._connected(False)  # stopped, or the lease went to another worker
                raise
            except Exception as e:
                self._connected(False)
                delay = backoff.next()
                log.warning("twitter: polling mentions failed (%s: %s); next poll in %.0fs", type(e).__name__, e, delay)
            await asyncio.sleep(delay)

    def _connected(self, up: bool) -> None:
        if self.hub is not None:
            self.hub.metrics.platform_connected("twitter", up)

    async def poll(self) -> int:
        """Fetch the mentions newer than ``since_id`` and hand them to the hub, oldest first.

        Returns how many were recorded as new inputs. Waits (cancellably) when X's rate
        limit for mentions is spent.
        """
        if self._send is None or self.hub is None or self.client is None:
            raise RunError("twitter: poll() before the hub started the extension")
        async with self._poll_lock:
            since = await self.hub.memory.get(SINCE_ID_KEY)
            tweets, users = await self._fetch(str(since) if since else None)
            count = 0
            for tweet in sorted(tweets, key=lambda t: int(t.id)):
                if await self._handle(tweet, users, first_start=since is None):
                    count += 1
                # only after send() recorded it: a crash before this line fetches it again,
                # and the inbox refuses the second copy
                await self.hub.memory.set(SINCE_ID_KEY, str(tweet.id))
            self.polls += 1
            return count

    async def _fetch(self, since_id: str | None) -> tuple[list[Any], dict[str, Any]]:
        assert self.client is not None
        params: dict[str, Any] = {
            "expansions": ["author_id", "attachments.media_keys"],
            "tweet_fields": _TWEET_FIELDS,
            "media_fields": _MEDIA_FIELDS,
            "max_results": self.page_size,
            "user_auth": self.read_user_auth,
        }
        if since_id:
            params["since_id"] = since_id
        cutoff = time.time() - self.settings.backlog_max_age
        tweets: list[Any] = []
        users: dict[str, Any] = {}
        token: str | None = None
        for _ in range(MAX_PAGES):
            page = await self._get_mentions(params, token)
            tweets.extend(page.data or [])
            for user in (page.includes or {}).get("users", []):
                users[str(user.id)] = user
            for media in (page.includes or {}).get("media", []):
                self._media[str(media.media_key)] = media
            token = (page.meta or {}).get("next_token")
            if not token:
                break
            if since_id is None and page.data and _created(page.data[-1]) < cutoff:
                break  # first start: older pages are past the backlog anyway
        return tweets, users

    async def _get_mentions(self, params: dict[str, Any], token: str | None) -> Any:
        assert self.client is not None
        for _attempt in range(3):
            await self._respect_limit(MENTIONS)
            try:
                return await self.client.get_users_mentions(self.user_id, pagination_token=token, **params)
            except tweepy.TooManyRequests as e:
                wait = min(reset_in(e), MAX_RATE_WAIT)
                log.warning("twitter: mentions rate limited (429); waiting %.0fs for the window to reset", wait)
                await asyncio.sleep(wait)
        raise RuntimeError("X answered 429 three times in a row for mentions")

    async def _respect_limit(self, name: str) -> None:
        limits: dict[str, RateLimitState] = getattr(self.client, "rate_limits", None) or {}
        state = limits.get(name)
        if state is None or state.remaining != 0 or state.reset is None:
            return
        wait = min(state.reset - time.time() + 1.0, MAX_RATE_WAIT)
        if wait > 0:
            log.info("twitter: %s has no requests left in this window; waiting %.0fs", name, wait)
            await asyncio.sleep(wait)

    async def _handle(self, tweet: Any, users: dict[str, Any], *, first_start: bool) -> bool:
        assert self._send is not None and self.hub is not None
        tid, author = str(tweet.id), str(tweet.author_id)
        user = users.get(author)
        username = getattr(user, "username", None)
        who = f"@{username}" if username else author
        if author == self.user_id:
            log.debug("twitter: %s is the bot's own tweet: ignored", tid)
            return False
        if first_start and _created(tweet) < time.time() - self.settings.backlog_max_age:
            log.info("twitter: first start: mention %s from %s is older than backlog_max_age: not answered", tid, who)
            return False
        ids = (author, _norm(username) if username else None)
        # dm_policy "allowlist": mentions are X's way to talk to the bot, so only allowed_users'
        # reach it, and an empty list lets nobody in (under "open" an empty list is everyone)
        listed = bool(self.allow) and self.allow.allows(*ids)
        restricted = bool(self.allow) or self.settings.dm_policy == "allowlist"
        if (restricted and not listed) or (self.ignore and self.ignore.allows(*ids)):
            log.info("twitter: mention %s from %s: not on allowed_users (or on ignored_users): ignored", tid, who)
            return False
        conversation = str(getattr(tweet, "conversation_id", None) or tid)
        if self.loop_guard is not None and not self.loop_guard.allow(conversation, from_bot=True):
            log.warning(
                "twitter: conversation %s already had %d answers in %.0fs (loop guard): mention %s ignored",
                conversation,
                self.settings.loop_guard_turns,
                self.settings.loop_guard_window,
                tid,
            )
            return False
        s = self.settings
        if not await admit_reply(
            self.hub.memory, author, platform=PLATFORM, limit=s.replies_per_account, window=s.replies_window
        ):
            log.warning(
                "twitter: %s had %d answers in %.0fs (replies_per_account): mention %s not answered",
                who,
                s.replies_per_account,
                s.replies_window,
                tid,
            )
            return False
        sub = await self._send(
            "twitter:conversation",
            {"id": conversation},
            tweet.text,
            user=who,
            platform_id=f"twitter:{tid}",
            meta={
                "tweet_id": tid,
                "author_id": author,
                "author_username": username,
                "conversation_id": conversation,
                # who wrote it, as the dashboard and the prompt show them (X gives both by default)
                "user_name": getattr(user, "name", None) or username,
                "user_handle": username,
            },
            media=self._media_of(tweet),
        )
        if sub.duplicate:
            log.info("twitter: mention %s was recorded before: not answered again", tid)
            return False
        return True

    def _media_of(self, tweet: Any) -> list[MediaPart]:
        """A mention's pictures (their URLs; a video's or GIF's preview picture) as references."""
        keys = ((getattr(tweet, "attachments", None) or {}).get("media_keys")) or []
        parts = []
        for key in keys:
            media = self._media.pop(str(key), None)
            if media is None:
                continue
            kind = "image" if media.type == "photo" else str(media.type)
            url = media.url if media.type == "photo" else media.preview_image_url
            if not url:
                continue
            name = url.rsplit("/", 1)[-1].split("?", 1)[0]
            suffix = name.rsplit(".", 1)[-1].lower() if "." in name else ""
            mime = {
                "jpg": "image/jpeg",
                "jpeg": "image/jpeg",
                "png": "image/png",
                "gif": "image/gif",
                "webp": "image/webp",
            }.get(suffix, "")
            parts.append(
                MediaPart(
                    kind="image" if kind != "video" else "video preview",
                    ref=url,
                    mime=mime,
                    name=name,
                    width=media.width,
                    height=media.height,
                )
            )
        return parts

    async def fetch(self, part: MediaPart, max_bytes: int) -> bytes:
        """A mention's picture from its URL on X's media hosts, at most ``max_bytes`` (capped while read)."""
        return await fetch_url(part.ref, max_bytes=max_bytes, name=part.name, hosts=self.media_hosts)

    # --- posting ------------------------------------------------------------------------

    async def reply(self, text: str, ctx: RunContext) -> dict[str, Any]:
        """Answer the mention this run is handling (the newest one among its inputs)."""
        mention = reply_target(ctx, "tweet_id")
        # no mention in this run (a schedule or webhook into the conversation): answer its root
        target = str(mention["tweet_id"]) if mention else ctx.context.key
        return await self._publish(text, ctx, in_reply_to=target, chat=ctx.context.key, output="twitter:reply")

    async def post(self, text: str, ctx: RunContext) -> dict[str, Any]:
        """A new post (or thread) on the bot's timeline."""
        return await self._publish(text, ctx, in_reply_to=None, chat="timeline", output="twitter:post")

    async def _publish(
        self, text: str, ctx: RunContext, *, in_reply_to: str | None, chat: str, output: str
    ) -> dict[str, Any]:
        parts = await split_off_loop(split_tweets, text)  # twitter-text's count is costly
        if not parts:
            raise SendFailed(PLATFORM, chat, "nothing to post: the text is empty")
        n = len(parts)
        if n > self.settings.max_thread:
            raise SendFailed(
                PLATFORM,
                chat,
                f"the text needs {n} posts, over max_thread = {self.settings.max_thread}: nothing was posted",
            )
        files = await self._pictures(ctx, chat)
        if self.reviews is not None:
            if files:
                refuse_pictures(
                    PLATFORM,
                    chat,
                    [f.name for f in files],
                    why="a post held for review keeps its text only, and the pictures would be lost",
                )
            held = await self.reviews.hold(text, output=output, chat=chat, in_reply_to=in_reply_to)
            return {"held_for_review": held.id, "in_reply_to": in_reply_to, "expires": held.expires}
        if self.settings.dry_run:
            for i, part in enumerate(parts, 1):
                log.info(
                    "twitter (dry run): would post %d/%d%s%s: %s",
                    i,
                    n,
                    f" in reply to {in_reply_to}" if i == 1 and in_reply_to else "",
                    f" with {len(files)} picture(s)" if i == 1 and files else "",
                    part,
                )
            return {
                "dry_run": True,
                "in_reply_to": in_reply_to,
                "tweets": [{"text": p, "weighted_length": weighted_len(p)} for p in parts],
                **({"media": [f.name for f in files]} if files else {}),
            }
        if not self.can_post:  # the config check makes this unreachable; keep the message clear anyway
            raise SendFailed(PLATFORM, chat, "posting needs api_key, api_secret, access_token and access_token_secret")
        assert self.hub is not None and self.governor is not None
        marker = await self._claim(ctx, output, chat)
        if isinstance(marker, dict):
            return marker
        await self._reserve(n, chat)
        ids: list[str] = []
        previous = in_reply_to
        try:
            media_ids = [await self.governor.send(chat, self._uploader(f)) for f in files]
            for i, part in enumerate(parts):
                previous = await self.governor.send(chat, self._poster(part, previous, media_ids if i == 0 else None))
                ids.append(previous)
                await ctx.part_sent(i, previous)  # durable: a restart will not post it again
        except SendFailed as e:
            await self.hub.memory.set(marker, {"state": "failed", "ids": ids, "ts": time.time()})
            if ids:
                raise SendFailed(
                    PLATFORM, chat, f"{e.reason}; {len(ids)} of {n} posts of the thread were posted: {ids}"
                ) from e
            raise
        await self.hub.memory.set(marker, {"state": "posted", "ids": ids, "ts": time.time()})
        log.info("twitter: posted %s%s", ", ".join(ids), f" in reply to {in_reply_to}" if in_reply_to else "")
        return {"tweet_ids": ids, "in_reply_to": in_reply_to}

    async def _post_held(self, review: Review) -> dict[str, Any]:
        """Post a held post an operator approved (its text maybe edited): split again, counted
        against the daily cap, each part checked, as any answer. The review's ``posting``
        state is its marker: a worker cut off here leaves it so, and nobody posts it again."""
        chat = review.chat
        parts = await split_off_loop(split_tweets, review.text)
        if not parts:
            raise SendFailed(PLATFORM, chat, "nothing to post: the text is empty")
        if len(parts) > self.settings.max_thread:
            raise SendFailed(
                PLATFORM, chat, f"the text needs {len(parts)} posts, over max_thread = {self.settings.max_thread}"
            )
        if self.settings.dry_run:
            for i, part in enumerate(parts, 1):
                log.info("twitter (dry run): would post approved %s %d/%d: %s", review.id, i, len(parts), part)
            return {"dry_run": True, "tweets": parts}
        assert self.governor is not None and self.hub is not None
        await reserve_posts(
            self.hub.memory, len(parts), platform=PLATFORM, limit=self.settings.max_posts_per_day, chat=chat
        )
        ids: list[str] = []
        previous = review.in_reply_to
        for part in parts:
            previous = await self.governor.send(chat, self._poster(part, previous))
            ids.append(previous)
        log.info("twitter: posted approved %s: %s", review.id, ", ".join(ids))
        return {"tweet_ids": ids, "in_reply_to": review.in_reply_to}

    async def _pictures(self, ctx: RunContext, chat: str) -> list[MediaFile]:
        """The files the output's ``media`` attribute names, within X's limits for pictures."""
        attrs = ctx.attributes
        names = [s.strip() for s in (getattr(attrs, "media", "") or "").split(",") if s.strip()]
        if len(names) > MAX_MEDIA:
            raise SendFailed(PLATFORM, chat, f"{len(names)} pictures: a post takes at most {MAX_MEDIA}")
        files = [await ctx.media.resolve(name) for name in names]  # a MediaError names the file and why
        for f in files:
            if f.mime not in _IMAGE_TYPES:
                raise SendFailed(PLATFORM, chat, f"{f.name} is {f.mime}: X takes pictures here")
            limit = 15_000_000 if f.mime == "image/gif" else MAX_IMAGE_BYTES
            if f.size > limit:
                raise SendFailed(
                    PLATFORM, chat, f"{f.name} is {human_size(f.size)}, over X's {human_size(limit)} for a picture"
                )
        return files

    def _uploader(self, file: MediaFile) -> Callable[[], Awaitable[str]]:
        async def upload() -> str:
            assert self.client is not None
            try:
                return await upload_media(self.client, file)
            except Exception as e:
                mapped = send_error(e)
                if mapped is e:
                    raise
                raise mapped from e

        return upload

    def _poster(
        self, text: str, in_reply_to: str | None, media_ids: list[str] | None = None
    ) -> Callable[[], Awaitable[str]]:
        # the last check before it leaves: X counts weighted characters (twitter-text)
        check_length(PLATFORM, "post", text, measure=weighted_len, limit=MAX_TWEET, unit="weighted characters")

        async def post() -> str:
            assert self.client is not None
            try:
                response = await self.client.create_tweet(
                    text=text, in_reply_to_tweet_id=in_reply_to, user_auth=True, media_ids=media_ids or None
                )
            except Exception as e:
                mapped = send_error(e)
                if mapped is e:
                    raise
                raise mapped from e
            return str(response.data["id"])

        return post

    async def _claim(self, ctx: RunContext, output: str, chat: str) -> str | dict[str, Any]:
        """The marker key for this output, committed as ``posting``; or, when a run before a
        crash already posted it, what it posted (so it is not posted twice)."""
        assert self.hub is not None
        # the run's newest input identifies the answer across a restart (the inbox hands the
        # same input to the resumed run); the ordinal tells apart several outputs in one run
        source = ctx.inputs[-1].id if ctx.inputs else ctx.run.id
        ordinal = sum(1 for e in ctx.logs if isinstance(e, OutputLog) and e.type == output and e.sent)
        key = f"{SENT_PREFIX}{source}:{output}:{ordinal}"
        previous, version = await self.hub.memory.get_versioned(key)
        if previous is not None:
            if previous.get("state") == "posted":
                log.warning(
                    "twitter: %s was posted before a restart (%s): not posting it again", key, previous.get("ids")
                )
                return {"tweet_ids": previous.get("ids", []), "already_posted": True}
            if previous.get("state") == "posting":
                raise SendFailed(
                    PLATFORM,
                    chat,
                    "a previous attempt was cut off while posting this answer; not posting again, to avoid a duplicate",
                )
        # claimed with a compare-and-set: of two workers handed the same answer, one posts it
        if await self.hub.memory.set_if_unchanged(key, {"state": "posting", "ts": time.time()}, version) is None:
            raise SendFailed(PLATFORM, chat, "another worker is posting this answer; not posting it twice")
        return key

    async def _reserve(self, n: int, chat: str) -> None:
        """Count ``n`` posts against ``max_posts_per_day``, or refuse them all."""
        assert self.hub is not None
        await reserve_posts(self.hub.memory, n, platform=PLATFORM, limit=self.settings.max_posts_per_day, chat=chat)

    async def _prune_markers(self) -> None:
        assert self.hub is not None
        now = time.time()
        for key in await self.hub.memory.keys(SENT_PREFIX):
            value = await self.hub.memory.get(key)
            if not isinstance(value, dict) or now - float(value.get("ts", 0)) > SENT_MARKER_TTL:
                await self.hub.memory.delete(key)


def _norm(user: str) -> str:
    """Allow-list entries: numeric ids as they are, usernames without ``@`` in lower case."""
    return str(user).strip().lstrip("@").lower()


def _created(tweet: Any) -> float:
    created = getattr(tweet, "created_at", None)
    if isinstance(created, dt.datetime):
        return created.timestamp()
    return time.time()  # unknown: treat as new
