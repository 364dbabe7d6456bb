"""Slack's events into the hub, however they arrive (a Socket Mode envelope or an Events API
POST): which to answer (`classify()`), who may talk to the bot (``dm_policy``,
``allowed_users``), the loop guard, then the message recorded in the hub's inbox.

An event is acknowledged to Slack only once it is recorded (or deliberately ignored): the
bolt app runs with ``process_before_response``, so its ack follows this intake's return. A
failure to record raises, nothing is acknowledged, and Slack delivers the event again; a
redelivery (a new envelope, the same message ``ts``) is refused by the inbox and is not
answered twice.

An event that fails to be taken for a reason of its own (a bug in reading it, a shape the
intake does not expect) is not acknowledged either, so Slack delivers it again; at its
`PARK_AFTER`-th failure it is parked in the inbox (``hub inbox``) and acknowledged,
and intake goes on. A store failure is never counted: Slack delivers the event until the
store takes it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from hub import RunError
from hub.platform import (
    DEFAULT_ACCOUNT,
    AllowList,
    PoisonUpdates,
    account_key,
    admit_private,
    is_transient,
    marker,
    prune_markers,
)

from ._client import SlackClient
from ._events import CHANNEL, THREAD, Ignored, Inbound, classify, is_dm
from ._settings import SlackSettings

if TYPE_CHECKING:
    from hub import Hub

__all__ = ["Intake", "thread_key", "event_key", "PARK_AFTER", "LAST_RETRY"]

log = logging.getLogger("hub_slack")

PARK_AFTER = 3
"""Failures (not the store's) after which an event is parked instead of retried: Slack
delivers an unacknowledged event three more times, so the third failure is one it sends."""
LAST_RETRY = 3
"""Slack's last retry of an event it was not acknowledged (``X-Slack-Retry-Num``): an event
that fails then is parked whatever its count here (another worker may have had the others)."""


THREAD_PREFIX = "slack:thread:"
THREAD_MARKER_DAYS = 90.0
"""Days a thread's marker is kept after its last message when ``[hub.retention] days`` is 0:
a thread idle that long needs a mention again."""
PRUNE_EVERY = 3600.0
"""Seconds between prunes of idle threads' markers (from the intake, while messages come)."""


def thread_key(channel: str, thread_ts: str, account: str = DEFAULT_ACCOUNT) -> str:
    """The memory key that marks a thread the bot (of ``account``) answers in: its replies need no mention."""
    return f"{THREAD_PREFIX}{account_key(account, channel)}/{thread_ts}"


class Intake:
    """Takes each message event into the hub; one per subscribed input."""

    def __init__(
        self, client: SlackClient, settings: SlackSettings, hub: Hub, send: Callable[..., Awaitable[Any]]
    ) -> None:
        self.client = client
        self.settings = settings
        self.hub = hub
        self.send = send
        self.channels = AllowList(settings.allowed_channels)
        self.users = AllowList(settings.allowed_users)
        self.guard = settings.loop_guard()
        # Socket Mode hands envelopes over concurrently: one at a time keeps a channel's order
        self._lock = asyncio.Lock()
        self.poison = PoisonUpdates(client.label, hub.inbox, park_after=PARK_AFTER, redactor=hub.redactor)
        self.account = client.account
        self._pruned = 0.0  # time.monotonic() of the last prune of idle threads' markers

    async def take_or_park(self, event: dict[str, Any], *, last: bool = False) -> None:
        """`take()`, or park ``event`` once it has failed `PARK_AFTER` times (at
        once when ``last``: Slack will not deliver it again); returns when it may be
        acknowledged to Slack. Raises (not acknowledged: Slack delivers it again) while it
        has failed fewer times, or whenever the store failed."""
        key = self.scoped(event_key(event))
        try:
            await self.take(event)
        except Exception as e:
            context, kind, content, meta = self._what_it_was(event)
            parked = await self.poison.failed(key, e, context=context, type=kind, content=content, meta=meta, last=last)
            if not parked:
                if is_transient(e):
                    self._not_recorded(event, e, last=last)
                raise
        else:
            self.poison.succeeded(key)

    def _not_recorded(self, event: dict[str, Any], e: Exception, *, last: bool) -> None:
        """Say that the store did not take ``event``; whole, at Slack's last retry (it is lost then)."""
        where = f"slack: event {event.get('ts')} in {event.get('channel')} was not recorded ({type(e).__name__}: {e})"
        if last:
            raw = json.dumps(event, default=repr, sort_keys=True)
            log.error("%s at Slack's last retry: Slack will not deliver it again; the event: %s", where, raw)
        else:
            log.warning("%s: not acknowledged, Slack delivers it again", where)

    def _what_it_was(self, event: dict[str, Any]) -> tuple[str, str, Any, dict[str, Any]]:
        """A poison event as a parked input: the conversation it would have been in, as far
        as its channel and ts can be read, and its text (the event's JSON when it has none)."""
        raw = json.dumps(event, default=repr, sort_keys=True)
        text = event.get("text")
        content = text if isinstance(text, str) and text.strip() else raw
        channel, ts, thread = event.get("channel"), event.get("ts"), event.get("thread_ts")
        meta: dict[str, Any] = {"event": raw}
        if not isinstance(channel, str) or not channel:
            return "slack", CHANNEL, content, meta
        meta["channel_id"] = channel
        thread = thread if isinstance(thread, str) and thread else None
        dm = is_dm(event)
        if isinstance(ts, str) and ts:
            meta["ts"] = ts
            if not dm and thread is None and self.settings.reply_in_thread:
                thread = ts  # a mention at the top of a channel is answered in a thread under it
        meta["thread_ts"], meta["dm"] = thread, dm  # where `hub inbox retry` answers it
        where = account_key(self.account, channel)
        if dm or thread is None:
            return f"{CHANNEL}:{where}", CHANNEL, content, meta
        return f"{THREAD}:{where}/{thread}", THREAD, content, meta

    def scoped(self, platform_id: str) -> str:
        """``platform_id`` (``slack:...``) as the inbox knows it on this intake's account."""
        return platform_id.replace("slack:", f"slack:{self.account}/", 1) if self.account else platform_id

    async def take(self, event: dict[str, Any]) -> None:
        """Record ``event`` in the inbox, or ignore it (logged why); raises when recording fails."""
        async with self._lock:
            await self._take(event)

    async def _take(self, event: dict[str, Any]) -> None:
        me = self.client.identity
        if me is None:  # not the event's fault: never counted towards parking it
            raise RunError("the slack service is not started")
        known = False
        thread = event.get("thread_ts")
        if isinstance(thread, str) and thread and isinstance(event.get("channel"), str):
            known = bool(await self.hub.memory.get(thread_key(event["channel"], thread, self.account)))
        verdict = classify(
            event,
            bot_user=me.user_id,
            bot_id=me.bot_id,
            settings=self.settings,
            channels=self.channels,
            users=self.users,
            known_thread=known,
        )
        if isinstance(verdict, Ignored):
            log.debug("slack: event %s ignored: %s", event.get("ts"), verdict.reason)
            return
        if verdict.from_bot:
            # a replayed bot message must not use up one of the loop guard's turns
            if await self.hub.received(self.scoped(verdict.platform_id)):
                return
        if self.guard is not None and not self.guard.allow(verdict.channel_id, from_bot=verdict.from_bot):
            log.info(
                "slack: %s: loop guard: not answering bot %s (%d answers to bots in %.0fs)",
                verdict.channel_id,
                verdict.user,
                self.settings.loop_guard_turns,
                self.settings.loop_guard_window,
            )
            return
        if verdict.is_dm and self.settings.dm_policy != "open" and not await self._private_allows(verdict):
            return
        if verdict.thread_ts is not None and not verdict.is_dm:
            # the time of the thread's last message: a thread idle past retention is forgotten
            await self.hub.memory.set(thread_key(verdict.channel_id, verdict.thread_ts, self.account), marker())
            self._prune_soon()
        sub = await self.send(
            verdict.context,
            {**verdict.args, "account": self.account},
            verdict.text,
            user=verdict.user,
            # two bots in one channel see the same message: each account answers its own copy
            platform_id=self.scoped(verdict.platform_id),
            meta=verdict.meta(),
            media=[dataclasses.replace(m, ref=account_key(self.account, m.ref)) for m in verdict.media],
        )
        if sub.duplicate:
            # a mention comes as `message` and `app_mention` both; a redelivery comes again
            log.debug("slack: message %s was recorded before: not answered again", verdict.platform_id)

    def _prune_soon(self) -> None:
        if time.monotonic() - self._pruned < PRUNE_EVERY and self._pruned:
            return
        self._pruned = time.monotonic()
        self.hub.create_task(self.prune_threads(), name="slack:prune-threads")

    async def prune_threads(self, *, now: float | None = None) -> int:
        """Forget the markers of threads idle for ``[hub.retention] days`` (else
        `THREAD_MARKER_DAYS`); how many."""
        days = self.hub.config.hub.retention.days or THREAD_MARKER_DAYS
        gone = await prune_markers(self.hub.memory, THREAD_PREFIX, max_age=days * 86_400, now=now)
        if gone:
            log.info("slack: %d idle threads' markers forgotten", gone)
        return gone

    async def _private_allows(self, verdict: Inbound) -> bool:
        """``dm_policy`` in a DM; an unknown user under ``"pairing"`` is sent the code, once, in
        the background (the events go on meanwhile)."""
        channel = verdict.channel_id
        return await admit_private(
            self.hub.access,
            self.hub.create_task,
            "slack",
            self.settings,
            verdict.user,
            send=lambda text: self.client.post(channel, text),  # through the governor: paced, retried
        )


def event_key(event: dict[str, Any]) -> str:
    """The id a failing event is known by: its message's, as the inbox knows a message (a
    redelivery, or the same message as ``app_mention``, is then one event), else its JSON's hash."""
    channel, ts = event.get("channel"), event.get("ts")
    if isinstance(channel, str) and channel and isinstance(ts, str) and ts:
        return f"slack:{channel}:{ts}"
    raw = json.dumps(event, default=repr, sort_keys=True).encode()
    return f"slack:event:{hashlib.sha256(raw).hexdigest()[:32]}"
