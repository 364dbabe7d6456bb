"""Held posts: the `ReviewStore` seam, the review queue of public timelines
(``review = true``: each post waits for an operator, ``hub review``, ``POST /reviews/{id}``,
the dashboard's review page).

A held post moves through its states by compare-and-set on the state alone
(`ReviewStore.move()`): of two operators, two workers or a restart racing on one post,
exactly one move from a state wins, so an approved post is claimed for posting once and
posted once. A pending post past its expiry can no longer be approved; it reads
``expired``.

An approval wakes the worker that posts it at once: in this process through
`ReviewStore.on_approved` (``hub review``, ``POST /reviews/{id}`` and the dashboard
decide through the hub's one store object), and from other processes through
`ReviewStore.listen` where the backend can say so (PostgreSQL's LISTEN/NOTIFY); where
it cannot (SQLite), the worker's slow poll finds it.

The backends: `hub.store.InMemoryReviewStore` (hub/store/_in_memory.py) and
`hub.store.sql.SqlReviewStore` (hub/store/sql/_stores.py, table ``reviews``).
"""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal, Protocol

from ..errors import HubError

__all__ = ["Review", "ReviewRefused", "ReviewState", "ReviewStore", "REVIEW_MOVES", "Listening", "Approved"]

log = logging.getLogger("hub.store")

Approved = Callable[[str], None]
"""Told the platform of a post just approved (called on the event loop; it must not block)."""


class Listening(Protocol):
    """A subscription to approvals made in other processes (`ReviewStore.listen`)."""

    @property
    def alive(self) -> bool:
        """False once its connection is gone: listen again (until then, polling finds approvals)."""

    async def close(self) -> None: ...


ReviewState = Literal["pending", "approved", "rejected", "posting", "posted", "failed"]

REVIEW_MOVES: dict[str, frozenset[str]] = {
    "pending": frozenset({"approved", "rejected"}),
    "approved": frozenset({"posting"}),
    "posting": frozenset({"posted", "failed"}),
    "rejected": frozenset(),
    "posted": frozenset(),
    "failed": frozenset(),
}
"""The moves a held post may make. ``posting`` never goes back to ``approved``: a worker cut
off while posting leaves it there, and nobody posts it a second time."""


class ReviewRefused(HubError):
    """An operator's decision on a held post that cannot be made; ``missing``: no post has that id."""

    def __init__(self, message: str, *, missing: bool = False) -> None:
        super().__init__(message)
        self.missing = missing


@dataclass(frozen=True, slots=True)
class Review:
    """One post held for an operator: what it says, where it goes, and where it stands."""

    id: str
    """The post's id in the queue (``hub review approve ID``)."""
    platform: str
    """The platform that would post it."""
    output: str
    """The output that would have posted it (``twitter:reply``, ``mastodon:reply``, ...)."""
    chat: str
    """The conversation (or ``timeline``) it belongs to."""
    text: str
    """What it says (an operator may edit it before approving)."""
    state: ReviewState
    """``pending``, ``approved``, ``rejected``, ``posting``, ``posted`` or ``failed``."""
    created: float
    """When it was held (seconds since the epoch)."""
    expires: float
    """When a pending post stops being postable."""
    in_reply_to: str | None = None
    """The post it answers (None: a new post on the timeline)."""
    decided: float | None = None
    """When an operator approved or rejected it; None while pending."""
    result: str | None = None
    """What posting it gave (the posts' ids as JSON), or why it failed."""
    extra: str | None = None
    """The platform's own details for posting it (JSON text: visibility, a content warning)."""

    def expired(self, now: float | None = None) -> bool:
        """Whether it is pending past its ``expires`` (at ``now``, default: the time now)."""
        return self.state == "pending" and self.expires <= (time.time() if now is None else now)

    @property
    def shown_state(self) -> str:
        """The state as operators see it: ``expired`` for a pending post past its time."""
        return "expired" if self.expired() else self.state


class ReviewStore(ABC):
    """The held posts, kept so that they survive restarts and are shared by every worker."""

    async def open(self) -> None:  # noqa: B027 - stores without a connection need nothing
        pass

    async def close(self) -> None:  # noqa: B027
        pass

    @abstractmethod
    async def add(self, review: Review) -> None:
        """Keep a new held post (its id is new)."""

    @abstractmethod
    async def get(self, review_id: str) -> Review | None: ...

    @abstractmethod
    async def list(self, *, platform: str | None = None, state: str | None = None) -> list[Review]:
        """Held posts, oldest first (of one platform, in one state, when given)."""

    @abstractmethod
    async def _move(
        self, review_id: str, old: str, new: str, *, now: float, text: str | None, result: str | None
    ) -> Review | None:
        """The one conditional write: ``old`` -> ``new`` where the post is still ``old`` (and,
        leaving ``pending``, not expired at ``now``); the post as it is now, or None."""

    async def move(
        self,
        review_id: str,
        old: ReviewState,
        new: ReviewState,
        *,
        text: str | None = None,
        result: str | None = None,
        now: float | None = None,
    ) -> Review | None:
        """Move a held post from ``old`` to ``new`` if it is still ``old``; the post moved, or
        None when another move won (or a pending post expired). ``text`` replaces what it says
        (an operator's edit on approval); ``result`` records what posting gave.

        Raises:
            ValueError: ``old`` -> ``new`` is not a move a held post makes.
        """
        if new not in REVIEW_MOVES.get(old, frozenset()):
            raise ValueError(f"a held post does not move from {old!r} to {new!r}")
        review = await self._move(
            review_id, old, new, now=time.time() if now is None else now, text=text, result=result
        )
        if review is not None and new == "approved":
            await self._approved(review)
        return review

    def on_approved(self, wake: Approved) -> Callable[[], None]:
        """Call ``wake`` with the platform of each post approved through this store object (this process:
        the CLI, ``POST /reviews/{id}`` and the dashboard share the hub's); returns what
        stops it."""
        wakers: list[Approved] = self.__dict__.setdefault("_wakers", [])
        wakers.append(wake)
        return lambda: wakers.remove(wake) if wake in wakers else None

    async def listen(self, wake: Approved) -> Listening | None:
        """Call ``wake`` with the platform of each post approved by another process sharing the store, where
        the backend can tell (PostgreSQL: LISTEN/NOTIFY); None where it cannot (the caller
        polls). When the subscription is cut, ``wake("")``: look, and listen again.

        Raises:
            StoreError: the backend could tell, but the subscription failed (the caller polls).
        """
        return None

    async def _tell_others(self, review: Review) -> None:  # noqa: B027 - a backend that can tell others does
        """Tell the other processes sharing the store that ``review`` was approved."""

    async def _approved(self, review: Review) -> None:
        for wake in list(self.__dict__.get("_wakers", ())):
            wake(review.platform)
        try:
            await self._tell_others(review)
        except Exception as e:  # the approval stands; the other processes' poll finds it
            log.warning("held post %s approved, but other workers could not be told at once: %s", review.id, e)

    async def decide(self, review_id: str, *, approve: bool, text: str | None = None) -> Review:
        """An operator's decision (``hub review``, ``POST /reviews/{id}``, the dashboard): approve
        (with ``text`` instead of what it says, when given) or reject a pending post. The
        extension's worker posts an approved post within seconds.

        Raises:
            ReviewRefused: no held post has that id, the text is empty, or the post is not
                pending any more (decided, or expired): the message says which.
        """
        if text is not None and not text.strip():
            raise ReviewRefused(f"held post {review_id}: the edited text is empty; reject it instead")
        moved = await self.move(review_id, "pending", "approved" if approve else "rejected", text=text)
        if moved is not None:
            return moved
        now = await self.get(review_id)
        if now is None:
            raise ReviewRefused(f"no held post {review_id!r} (hub review list shows them)", missing=True)
        raise ReviewRefused(
            f"held post {review_id} is {now.shown_state}: it can no longer be {'approved' if approve else 'rejected'}"
        )

    async def prune(self, before: float) -> int:
        """Forget the held posts created before ``before`` that are done with (posted,
        rejected, failed, or pending and expired); how many went."""
        gone = 0
        for r in await self.list():
            if r.created < before and (r.state in ("posted", "rejected", "failed") or r.expired(before)):
                gone += await self._delete(r.id)
        return gone

    @abstractmethod
    async def _delete(self, review_id: str) -> int: ...


def moved(review: Review, new: str, *, now: float, text: str | None, result: str | None) -> Review:
    """``review`` after a move (for the in-memory backend)."""
    return replace(
        review,
        state=new,  # type: ignore[arg-type]
        decided=now if review.state == "pending" else review.decided,
        text=text if text is not None else review.text,
        result=result if result is not None else review.result,
    )
