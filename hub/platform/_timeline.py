"""The runtime every public timeline's bot shares (Mastodon, Bluesky): `PublicTimeline`.

A bot owns one and keeps only what its platform does differently (its client, how it reads
mentions, how it posts). The timeline brings, from the settings every public timeline shares
(`hub.platform.PublicSettings`):

- at start, the outbound `Governor` (``post_interval``, ``posts_per_minute``, the
  ``send_*`` keys) and, with ``review = true``, the `ReviewQueue` task;
- the mention reader run under a lease (`PublicTimeline.read_under_lease`), so that
  of the workers sharing a store one reads;
- the guards a mention passes before it reaches the model (`PublicTimeline.admit`):
  the bot's own posts, ``allowed_users`` / ``ignored_users``, ``backlog_max_age`` on a
  first start, the bot-to-bot loop guard, ``replies_per_account``; each refusal logged;
- for an answer: its thread checked against ``max_thread`` (`PublicTimeline.thread`),
  pictures refused where they cannot go (`PublicTimeline.no_pictures`), the hand-off
  to the review queue (`PublicTimeline.hold`), the dry run's log lines
  (`PublicTimeline.dry_run`) and the daily cap (`PublicTimeline.reserve`).

`timeline_extension` builds such a bot's extension: the context ``<platform>:thread``,
the output ``<platform>:reply`` (its ``media`` attribute declared, so that pictures named are
refused rather than dropped unseen), the input ``<platform>:mention`` and the service.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..definitions import Context, Extension, Input, Service, TextArgs, output
from ..logging_setup import quiet_loggers
from ._audience import AllowList
from ._public import (
    PictureAttributes,
    PublicSettings,
    ReviewQueue,
    admit_reply,
    picture_names,
    refuse_pictures,
    reserve_posts,
)
from ._send import Governor, RateLimit, SendFailed

if TYPE_CHECKING:
    from ..store import LeaseKeeper, Review

Hub = Any  # the running hub (hub.Hub): the platform layer sits below it, so it is not imported

__all__ = ["PublicTimeline", "TimelineBot", "norm_user", "timeline_extension"]


def norm_user(user: str) -> str:
    """An allow-list entry or an author as compared: ids as they are, ``@name`` without its
    ``@``, lower case."""
    return str(user).strip().lstrip("@").lower()


class PublicTimeline:
    """One public timeline bot's shared runtime (see the module). ``poster`` posts a held post
    an operator approved; ``log`` is the extension's logger, so its lines keep its name.

    Attributes:
        platform: The platform's name (``mastodon``, ``bluesky``).
        settings: The extension's settings, a [`PublicSettings`][hub.platform.PublicSettings].
        log: The extension's logger.
        allow: ``allowed_users``, compared as [`norm_user()`][hub.platform.norm_user] writes them.
        ignore: ``ignored_users``, compared the same way.
        hub: The hub, once [`start()`][hub.platform.PublicTimeline.start] has run (None before).
        governor: The outbound [`Governor`][hub.platform.Governor] every post goes through
            (None before start).
        reviews: The [`ReviewQueue`][hub.platform.ReviewQueue] with ``review = true`` (else None).
        keeper: The lease the mention reader holds (None until
            [`read_under_lease()`][hub.platform.PublicTimeline.read_under_lease]).
        tasks: The background tasks [`stop()`][hub.platform.PublicTimeline.stop] cancels.
    """

    def __init__(
        self,
        platform: str,
        settings: PublicSettings,
        *,
        poster: Callable[[Review], Awaitable[Any]],
        log: logging.Logger,
    ) -> None:
        self.platform = platform
        self.settings = settings
        self.log = log
        self._poster = poster
        self.allow = AllowList(norm_user(str(u)) for u in settings.allowed_users)
        self.ignore = AllowList(norm_user(str(u)) for u in settings.ignored_users)
        self.hub: Hub | None = None
        self.governor: Governor | None = None
        self.reviews: ReviewQueue | None = None
        self.keeper: LeaseKeeper | None = None
        self.tasks: list[asyncio.Task[None]] = []

    # --- lifecycle ----------------------------------------------------------------------

    def start(self, hub: Hub) -> None:
        """The governor, and with ``review = true`` the review queue's task."""
        s = self.settings
        self.hub = hub
        self.governor = Governor(
            self.platform,
            per_chat=RateLimit(1, s.post_interval) if s.post_interval > 0 else None,
            global_=RateLimit(s.posts_per_minute, 60.0),
            max_attempts=s.send_attempts,
            max_wait=s.send_max_wait,
        )
        self.governor.report_to(hub)
        if s.review:
            self.reviews = ReviewQueue(
                hub.stores.reviews, self.platform, expiry=s.review_expiry, poster=self._poster, poll=s.review_poll
            )
            self.tasks.append(hub.create_task(self.reviews.run(), name=f"{self.platform}:reviews"))

    def mode(self, posting: str = "posting") -> str:
        """How it posts, for the start-up log line."""
        s = self.settings
        mode = "dry run: nothing is posted" if s.dry_run else posting
        return mode + ("; each post is held for review (hub review list)" if s.review else "")

    async def stop(self) -> None:
        """Cancel the review queue's and the mention reader's tasks, and wait for them."""
        tasks, self.tasks = self.tasks, []
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def read_under_lease(
        self, hub: Hub, lease: str, reader: Callable[[], Awaitable[None]]
    ) -> Callable[[], Awaitable[None]]:
        """Run ``reader`` while this worker holds the lease ``lease`` (one worker reads); what
        stops it (the input's unsubscribe)."""
        self.keeper = hub.lease(lease, ttl=self.settings.lease_ttl)
        task = hub.create_task(self.keeper.hold(reader), name=f"{self.platform}:mentions")
        self.tasks.append(task)

        async def unsubscribe() -> None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

        return unsubscribe

    def connected(self, up: bool) -> None:
        """Report the platform's connection up or down (the ``hub_platform_connected`` gauge)."""
        if self.hub is not None:
            self.hub.metrics.platform_connected(self.platform, up)

    # --- mentions in ----------------------------------------------------------------------

    async def admit(
        self,
        ref: str,
        *,
        who: str,
        ids: tuple[str, ...],
        account: str,
        own: bool,
        created: float | None,
        first_start: bool,
        now: float,
        bot_thread: str | None = None,
    ) -> bool:
        """Whether the mention ``ref`` by ``who`` (``ids``: its author's id and handle, as
        ``allowed_users`` may name them; ``account``: the id the reply cap counts) goes to the
        model; each refusal is logged. ``own``: the bot's own post; ``created``: when it was
        written (epoch seconds, None: unknown); ``bot_thread``: the thread, when the author is
        a bot (the loop guard counts answers to bots in it)."""
        assert self.hub is not None
        s, name = self.settings, self.platform
        if own:
            self.log.debug("%s: %s is the bot's own post: ignored", name, ref)
            return False
        if first_start and created is not None and created < now - s.backlog_max_age:
            self.log.info("%s: first start: %s from %s is older than backlog_max_age: not answered", name, ref, who)
            return False
        keys = tuple(norm_user(i) for i in ids)
        listed = bool(self.allow) and self.allow.allows(*keys)
        restricted = bool(self.allow) or s.dm_policy == "allowlist"
        if (restricted and not listed) or (self.ignore and self.ignore.allows(*keys)):
            self.log.info("%s: %s from %s: not on allowed_users (or on ignored_users): ignored", name, ref, who)
            return False
        # a bot-to-bot exchange stops after loop_guard_turns answers in a thread, over every worker
        if (
            bot_thread is not None
            and s.loop_guard_turns
            and not await admit_reply(
                self.hub.memory,
                f"bots:{bot_thread}",
                platform=name,
                limit=s.loop_guard_turns,
                window=s.loop_guard_window,
            )
        ):
            self.log.warning(
                "%s: %s is a bot, and thread %s had %d answers to bots (loop guard): not answered",
                name,
                who,
                bot_thread,
                s.loop_guard_turns,
            )
            return False
        if not await admit_reply(
            self.hub.memory, account, platform=name, limit=s.replies_per_account, window=s.replies_window
        ):
            self.log.warning(
                "%s: %s had %d answers in %.0fs (replies_per_account): %s not answered",
                name,
                who,
                s.replies_per_account,
                s.replies_window,
                ref,
            )
            return False
        return True

    # --- answers out ----------------------------------------------------------------------

    def thread(self, parts: list[str], chat: str, *, unit: str) -> list[str]:
        """``parts`` (an answer split the platform's way) when they may go out as one thread.

        Raises:
            SendFailed: nothing to post, or more than ``max_thread`` parts.
        """
        if not parts:
            raise SendFailed(self.platform, chat, "nothing to post: the text is empty")
        if len(parts) > self.settings.max_thread:
            raise SendFailed(
                self.platform,
                chat,
                f"the text needs {len(parts)} {unit}, over max_thread = {self.settings.max_thread}: nothing was posted",
            )
        return parts

    def no_pictures(self, ctx: Any, chat: str, *, label: str) -> None:
        """Refuse an answer naming pictures: this extension posts text only, and a held post
        is text only; never posted or held without them.

        Raises:
            SendFailed: the output names pictures.
        """
        names = picture_names(ctx)
        if names:
            why = (
                "a post held for review keeps its text only, and the pictures would be lost"
                if self.reviews is not None
                else f"{label} replies carry text only here, and the pictures would be lost"
            )
            refuse_pictures(self.platform, chat, names, why=why)

    async def hold(
        self, text: str, *, output: str, chat: str, in_reply_to: str, extra: dict[str, Any]
    ) -> dict[str, Any]:
        """Hold the answer for an operator; what the output reports."""
        assert self.reviews is not None
        held = await self.reviews.hold(text, output=output, chat=chat, in_reply_to=in_reply_to, extra=extra)
        return {"held_for_review": held.id, "in_reply_to": in_reply_to, "expires": held.expires}

    def dry_run(self, parts: list[str], *, in_reply_to: str, how: str = "") -> None:
        """Log what a dry run would post."""
        for i, part in enumerate(parts, 1):
            self.log.info(
                "%s (dry run): would post %d/%d in reply to %s%s: %s",
                self.platform,
                i,
                len(parts),
                in_reply_to,
                f" ({how})" if how else "",
                part,
            )

    async def reserve(self, n: int, chat: str) -> None:
        """Count ``n`` posts against ``max_posts_per_day`` over every worker.

        Raises:
            SendFailed: the day's cap would be passed; nothing was counted.
        """
        assert self.hub is not None
        await reserve_posts(
            self.hub.memory, n, platform=self.platform, limit=self.settings.max_posts_per_day, chat=chat
        )


class TimelineBot(Protocol):
    """What `timeline_extension` needs of a public timeline's bot."""

    async def start(self, hub: Hub) -> None:
        """Log in and start its [`PublicTimeline`][hub.platform.PublicTimeline] (at the hub's start)."""
        ...

    async def stop(self) -> None:
        """Stop reading and posting, and close its client (at the hub's stop)."""
        ...

    async def subscribe(self, send: Callable[..., Awaitable[Any]], hub: Hub) -> Callable[[], Awaitable[None]]:
        """Start reading mentions, handing each to ``send``; returns what stops the reading."""
        ...

    async def reply(self, text: str, ctx: Any) -> dict[str, Any]:
        """Post the answer ``text`` to the mention ``ctx`` answers; what was posted (ids, parts)."""
        ...


def timeline_extension(
    platform: str,
    bot: TimelineBot | None = None,
    *,
    thread: str,
    instructions: str,
    reply: str,
    mentions: str,
    description: str,
    settings: PublicSettings | None = None,
    make_bot: Callable[..., TimelineBot] | None = None,
    client_factory: Callable[..., Any] | None = None,
    loggers: Sequence[str] = (),
) -> Extension:
    """The extension of a public timeline's ``bot``: ``<platform>:thread`` (``thread`` describes
    its key; ``instructions`` tell the model how to answer there), ``<platform>:reply``
    (``reply`` describes it), ``<platform>:mention`` (``mentions`` says where they come from)
    and the service that starts and stops the bot.

    With no ``bot``, ``make_bot(settings, client_factory=client_factory)`` builds it (the bot's
    class, say); a ``bot`` given brings its own settings and client. ``loggers`` are the client
    library's, quieted to warnings ([`quiet_loggers`][hub.platform.quiet_loggers]).

    Raises:
        ValueError: a ``bot`` given with a ``client_factory``, or built on other ``settings``.
        TypeError: no ``bot``, and no ``make_bot`` and ``settings`` to build one.
    """
    quiet_loggers(*loggers)
    if bot is not None:
        if client_factory is not None or (settings is not None and getattr(bot, "settings", settings) is not settings):
            raise ValueError("a given bot brings its own settings and client_factory")
    elif make_bot is not None and settings is not None:
        bot = make_bot(settings, client_factory=client_factory)
    else:
        raise TypeError(f"timeline_extension({platform!r}): give a bot, or make_bot and settings to build one")
    running = bot  # (narrowed for the closure below)
    context: Context[TextArgs, dict[str, Any]] = Context(
        type=f"{platform}:thread",
        schema=TextArgs,
        description=thread,
        instructions=instructions,
        reply_output=f"{platform}:reply",
    )

    @output(
        type=f"{platform}:reply",
        context=f"{platform}:thread",
        description=reply,
        attributes=PictureAttributes,  # declared so that pictures named are refused, not dropped unseen
    )
    async def answer(content: str, ctx: Any) -> dict[str, Any]:
        return await running.reply(content, ctx)

    return Extension(
        name=platform,
        contexts=[context],
        outputs=[answer],
        inputs=[Input(type=f"{platform}:mention", subscribe=running.subscribe, description=mentions)],
        services=[Service(name=platform, start=running.start, stop=running.stop)],
        description=description,
    )
