"""Posting in public (X, Mastodon, Bluesky): the safety every public timeline shares.

A mistake in public costs most: a reply loop with another bot, a flood that gets the account
suspended, an answer nobody checked under the operator's name. So each public extension's
settings derive from [`PublicSettings`][hub.platform.PublicSettings] (``dry_run`` on by default, ``review``, the
caps), and it posts through these pieces:

- [`reserve_posts()`][hub.platform.reserve_posts]: the daily cap (``max_posts_per_day``), counted in the hub's memory
  store with a compare-and-set, so that workers sharing it never pass it together;
- [`admit_reply()`][hub.platform.admit_reply]: at most ``replies_per_account`` answers to one account in
  ``replies_window`` seconds (the same compare-and-set), checked before a mention reaches
  the model;
- [`ReviewQueue`][hub.platform.ReviewQueue]: with ``review = true`` a post is held in the store's review queue
  ([`hub.store.Review`][hub.platform.Review]) instead; an operator approves (maybe edits) or rejects it
  (``hub review``, ``POST /reviews/{id}``, the dashboard), and the extension's worker that
  claims the approved post (a compare-and-set on its state) posts it, once; an approval
  wakes it at once (in this process, and from others on PostgreSQL), a slow poll
  (``review_poll``) catching the rest;
- [`check_length()`][hub.platform.check_length]: the last check before a post leaves, counted the platform's way;
- [`PictureAttributes`][hub.platform.PictureAttributes], [`picture_names()`][hub.platform.picture_names] and [`refuse_pictures()`][hub.platform.refuse_pictures]: a post
  that names pictures where they cannot go with it (held for review, whose queue keeps text
  only; a platform whose extension posts text only) is refused, saying why, never posted or
  held without them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, NoReturn

from pydantic import BaseModel, Field, field_validator

from ..store import Listening, MemoryStore, Review, ReviewStore
from ._send import SendFailed
from ._settings import PlatformSettings

__all__ = [
    "PublicSettings",
    "PictureAttributes",
    "ReviewQueue",
    "admit_reply",
    "check_length",
    "picture_names",
    "refuse_pictures",
    "reserve_posts",
    "DAY",
]

log = logging.getLogger("hub.platform")

DAY = 86400.0
"""Seconds in a day: the window of ``max_posts_per_day`` ([`reserve_posts`][hub.platform.reserve_posts])."""
REVIEW_POLL = 10.0
"""Seconds between two looks for approved posts when nothing wakes the queue (``review_poll``)."""


class PublicSettings(PlatformSettings):
    """The keys every public timeline shares (``[extensions.twitter]``, ``.mastodon``,
    ``.bluesky``), beside every platform's ([`PlatformSettings`][hub.platform.PlatformSettings])."""

    dry_run: bool = True
    """Log what would be posted instead of posting it."""
    review: bool = False
    """Hold each post for an operator (``hub review list | approve ID | reject ID``)."""
    review_expiry: float = Field(86400.0, gt=0)
    """Seconds a held post waits for an operator; after it, it can no longer be approved."""
    max_posts_per_day: int = Field(100, ge=1)
    """Posts in any 24 hours, over every worker; over it, answers fail (recorded as not sent)."""
    replies_per_account: int = Field(5, ge=0)
    """Answers to one account within ``replies_window`` (0: no cap); its further mentions are
    not answered until the window has room again."""
    replies_window: float = Field(3600.0, gt=0)
    """Seconds ``replies_per_account`` counts over."""
    review_poll: float = Field(REVIEW_POLL, gt=0)
    """Seconds between two looks for approved posts. An approval in this process (the
    dashboard, ``POST /reviews/{id}``) or, on PostgreSQL, in any process wakes the poster at
    once; this poll finds the others (``hub review approve`` in another process on SQLite)."""
    ignored_users: list[str] = Field(default_factory=list)
    """Never answer these accounts (known bots, say)."""
    backlog_max_age: float = Field(3600.0, ge=0)
    """First start only (no saved position yet): mentions older than this are not answered."""
    max_thread: int = Field(8, ge=1, le=25)
    """Longest thread one answer may become; a longer answer is refused, not cut."""
    post_interval: float = Field(1.0, ge=0)
    """Seconds between two posts in one conversation (the parts of a thread)."""
    posts_per_minute: int = Field(10, ge=1)
    """Posts per minute over all conversations."""
    lease_ttl: float = Field(30.0, ge=1, le=3600)
    """Seconds the mention reader's lease lasts unrenewed: how long a dead worker's reader
    stays unowned before another worker sharing the store takes over."""

    timeline_name: ClassVar[str] = "a public timeline"
    """The platform as the refusal of ``dm_policy = "pairing"`` names it (``"X"``)."""

    @field_validator("dm_policy")
    @classmethod
    def _no_public_pairing(cls, v: str) -> str:
        if v == "pairing":
            raise ValueError(
                f'"pairing" is not available on {cls.timeline_name}: the bot reads mentions, which are public, '
                'so the one-time code would be posted for everyone to see; use "allowlist" (only '
                'allowed_users\' mentions are answered) or "open"'
            )
        return v


def _times(stored: Any, now: float, window: float) -> list[float]:
    return [float(t) for t in (stored or []) if now - float(t) < window]


async def reserve_posts(
    memory: MemoryStore, n: int, *, platform: str, limit: int, chat: str, now: float | None = None
) -> list[float]:
    """Count ``n`` posts of ``platform`` against ``limit`` a day in ``memory`` (the hub's store,
    shared by every worker; key ``<platform>:posts``), or refuse them all; the times counted
    now. A compare-and-set (``memory.update``): two workers never both take the last post.

    Raises:
        SendFailed: the day's posts and ``n`` more would pass ``limit``; nothing is counted.
    """
    at = time.time() if now is None else now

    def take(stored: Any) -> list[float]:
        times = _times(stored, at, DAY)
        if len(times) + n > limit:
            raise SendFailed(
                platform,
                chat,
                f"max_posts_per_day = {limit} reached ({len(times)} in the last 24 h, {n} more asked): nothing was posted",
            )
        return times + [at] * n

    taken: list[float] = await memory.update(f"{platform}:posts", take)
    return taken


async def admit_reply(
    memory: MemoryStore, account: str, *, platform: str, limit: int, window: float, now: float | None = None
) -> bool:
    """Whether the bot may answer ``account`` once more (and if so, that answer is counted):
    at most ``limit`` in ``window`` seconds over every worker (key
    ``<platform>:replies:<account>``, a compare-and-set). ``limit`` 0: always."""
    if limit <= 0:
        return True
    at = time.time() if now is None else now
    admitted = False

    def take(stored: Any) -> list[float]:
        nonlocal admitted
        times = _times(stored, at, window)
        admitted = len(times) < limit
        return times + [at] if admitted else times

    await memory.update(f"{platform}:replies:{account}", take)
    return admitted


def check_length(platform: str, chat: str, text: str, *, measure: Callable[[str], int], limit: int, unit: str) -> None:
    """Refuse a post longer than the platform takes, counted its way (``measure``).

    Raises:
        SendFailed: ``text`` measures over ``limit``; nothing was posted.
    """
    n = measure(text)
    if n > limit:
        raise SendFailed(platform, chat, f"a post of {n} {unit} is over {platform}'s {limit}: nothing was posted")


class PictureAttributes(BaseModel):
    """The ``media`` attribute of a public timeline's output (``media="media:1"``)."""

    media: str = Field(
        "",
        description="pictures to add, comma-separated: media handles from action results (media:1)",
    )
    """The pictures the model names for the post, comma-separated media handles (``media:1``)."""


def picture_names(ctx: Any) -> list[str]:
    """The pictures the output being handled names in its ``media`` attribute (none: [])."""
    raw = getattr(getattr(ctx, "attributes", None), "media", "") or ""
    return [name.strip() for name in str(raw).split(",") if name.strip()]


def refuse_pictures(platform: str, chat: str, names: list[str], *, why: str) -> NoReturn:
    """Refuse a post naming pictures that cannot go with it: a warning in the log (what the
    operator reads beside ``hub review list``) and the output failed with the same reason.

    Raises:
        SendFailed: always, naming the pictures and ``why``.
    """
    reason = f"the post names {len(names)} picture(s) ({', '.join(names)}): {why}; nothing was posted or held"
    log.warning("%s: %s: %s", platform, chat, reason)
    raise SendFailed(platform, chat, reason)


Poster = Callable[[Review], Awaitable[Any]]
"""Posts a held post as approved (its text maybe edited); returns what it posted (JSON-able)."""


class ReviewQueue:
    """One platform's side of the review queue: holding posts, and posting the approved ones.

    ``poster`` is the platform's way to post a held post;
    [`post_approved()`][hub.platform.ReviewQueue.post_approved] claims each
    approved post (approved -> posting, a compare-and-set) before it posts it, so of several
    workers one posts it; a worker cut off while posting leaves it ``posting``, never posted
    twice. [`run()`][hub.platform.ReviewQueue.run] posts an approved post as soon as the store tells of it (an approval
    in this process; on PostgreSQL, in any), and looks every ``poll`` seconds besides.

    Attributes:
        store: Where held posts are kept, shared by every worker.
        platform: The platform's name.
        expiry: Seconds a held post stays postable.
        poster: The platform's way to post a held post.
        poll: Seconds between two looks for approved posts when nothing wakes the queue
            (``review_poll``).
    """

    def __init__(
        self, store: ReviewStore, platform: str, *, expiry: float, poster: Poster, poll: float = REVIEW_POLL
    ) -> None:
        self.store = store
        self.platform = platform
        self.expiry = expiry
        self.poster = poster
        self.poll = poll
        self._wake = asyncio.Event()
        self.listening: Listening | None = None
        """The subscription to other processes' approvals (None: this store cannot tell; polling)."""
        self.looks = 0
        """Looks for approved posts done by `run` (tests wait for the first)."""

    async def hold(
        self, text: str, *, output: str, chat: str, in_reply_to: str | None, extra: dict[str, Any] | None = None
    ) -> Review:
        """Keep ``text`` for an operator; what the output reports instead of posting."""
        now = time.time()
        review = Review(
            id=secrets.token_hex(4),
            platform=self.platform,
            output=output,
            chat=chat,
            text=text,
            state="pending",
            created=now,
            expires=now + self.expiry,
            in_reply_to=in_reply_to,
            extra=json.dumps(extra) if extra else None,
        )
        await self.store.add(review)
        log.info(
            "%s: post held for review as %s (hub review approve %s): %s", self.platform, review.id, review.id, text
        )
        return review

    def poke(self) -> None:
        """Look for approved posts now rather than at the next poll (an approval in this process)."""
        self._wake.set()

    def _approved(self, platform: str) -> None:
        if platform in (self.platform, ""):  # "": the store's subscription was cut; listen again
            self._wake.set()

    async def post_approved(self) -> int:
        """Post every approved post of this platform that this worker claims; how many were posted."""
        posted = 0
        for review in await self.store.list(platform=self.platform, state="approved"):
            claimed = await self.store.move(review.id, "approved", "posting")
            if claimed is None:
                continue  # another worker claimed it
            try:
                result = await self.poster(claimed)
            except SendFailed as e:
                await self.store.move(claimed.id, "posting", "failed", result=e.reason)
                log.warning("%s: approved post %s failed: %s", self.platform, claimed.id, e.reason)
                continue
            except Exception as e:
                # left "posting": it may have gone out; posting it again could duplicate it
                log.exception("%s: approved post %s: %s; left as posting, not retried", self.platform, claimed.id, e)
                continue
            await self.store.move(claimed.id, "posting", "posted", result=json.dumps(result, default=str))
            posted += 1
        return posted

    async def _listen(self) -> None:
        """Subscribe (again, after a cut) to other processes' approvals; polling covers a failure."""
        if self.listening is not None and self.listening.alive:
            return
        try:
            self.listening = await self.store.listen(self._approved)
        except Exception as e:
            self.listening = None
            log.warning("%s: approvals from other processes are found by polling (%s)", self.platform, e)

    async def run(self) -> None:
        """Post approved posts as they come, until cancelled."""
        stop = self.store.on_approved(self._approved)
        try:
            while True:
                await self._listen()
                self._wake.clear()  # before looking: an approval while posting wakes the next look
                try:
                    await self.post_approved()
                except Exception as e:  # the store briefly away: look again next time
                    log.warning("%s: looking for approved posts failed: %s", self.platform, e)
                self.looks += 1
                try:
                    await asyncio.wait_for(self._wake.wait(), self.poll)
                except TimeoutError:
                    pass
        finally:
            stop()
            if self.listening is not None:
                listening, self.listening = self.listening, None
                await listening.close()
