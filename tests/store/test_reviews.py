"""``ReviewStore``: posts held for an operator move by compare-and-set on their state, so that
of two workers (or an operator and a worker) racing on one post exactly one move wins: an
approved post is claimed for posting once. A hypothesis state machine drives two workers
(two connections to one database) through generated interleavings, on every backend."""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from hub.store import REVIEW_MOVES, InMemoryReviewStore, Review, ReviewStore
from hub.store.sql import SqlReviewStore
from tests._support.backends import BACKENDS, drive, two_workers

_ids = itertools.count()


def held(review_id: str, *, expires_in: float = 3600.0, text: str = "hello") -> Review:
    now = time.time()
    return Review(
        id=review_id,
        platform="twitter",
        output="twitter:reply",
        chat="c1",
        text=text,
        state="pending",
        created=now,
        expires=now + expires_in,
        in_reply_to="99",
    )


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_held_post_survives_and_moves_once(backend: str, tmp_path: Path) -> None:
    async with two_workers(backend, tmp_path, SqlReviewStore, InMemoryReviewStore) as (a, b):
        await a.add(held("r1", text="draft"))
        approved = await b.move("r1", "pending", "approved", text="edited")
        assert approved is not None and approved.text == "edited" and approved.decided is not None
        assert await a.move("r1", "pending", "rejected") is None  # already decided
        claims = await asyncio.gather(a.move("r1", "approved", "posting"), b.move("r1", "approved", "posting"))
        assert sum(c is not None for c in claims) == 1, "two workers claimed one held post"
        done = await a.move("r1", "posting", "posted", result='["1"]')
        assert done is not None and done.result == '["1"]' and done.text == "edited"
        assert [r.id for r in await b.list(state="posted")] == ["r1"]
        assert await b.list(platform="mastodon") == []


@pytest.mark.parametrize("backend", BACKENDS)
async def test_an_expired_post_is_never_approved(backend: str, tmp_path: Path) -> None:
    async with two_workers(backend, tmp_path, SqlReviewStore, InMemoryReviewStore) as (a, _):
        await a.add(held("old", expires_in=-1.0))
        assert await a.move("old", "pending", "approved") is None
        r = await a.get("old")
        assert r is not None and r.shown_state == "expired"
        assert await a.prune(time.time() + 1) == 1
        assert await a.get("old") is None


async def test_a_move_no_post_makes_is_refused() -> None:
    with pytest.raises(ValueError, match="does not move from 'posting' to 'approved'"):
        await InMemoryReviewStore().move("x", "posting", "approved")


class Queue(RuleBasedStateMachine):
    """The model: each post's state, moved only by a move from the state it is in."""

    loop: asyncio.AbstractEventLoop
    workers: tuple[ReviewStore, ReviewStore]

    @initialize()
    def fresh(self) -> None:
        self.states: dict[str, str] = {}

    def run(self, coro):  # type: ignore[no-untyped-def]
        return self.loop.run_until_complete(coro)

    @rule()
    def hold(self) -> None:
        rid = f"r{next(_ids)}"
        self.run(self.workers[0].add(held(rid)))
        self.states[rid] = "pending"

    @rule(data=st.data(), old=st.sampled_from(sorted(REVIEW_MOVES)))
    def race(self, data: st.DataObject, old: str) -> None:
        """Both workers try moves from ``old`` on one post at once: at most one wins, and only
        where the post was in ``old``."""
        if not self.states or not REVIEW_MOVES[old]:
            return
        rid = data.draw(st.sampled_from(sorted(self.states)))
        news = [data.draw(st.sampled_from(sorted(REVIEW_MOVES[old]))) for _ in range(2)]

        async def together() -> list[Review | None]:
            return await asyncio.gather(*(w.move(rid, old, n) for w, n in zip(self.workers, news, strict=True)))  # type: ignore[arg-type]

        got = self.run(together())
        won = [r for r in got if r is not None]
        assert len(won) <= 1, f"two moves from {old} won on {rid}"
        if self.states[rid] == old:
            assert len(won) == 1
            self.states[rid] = won[0].state
        else:
            assert not won

    @invariant()
    def both_see_the_model(self) -> None:
        if not hasattr(self, "states"):
            return
        for store in self.workers:
            for rid, state in self.states.items():
                r = self.run(store.get(rid))
                assert r is not None and r.state == state


@pytest.mark.parametrize("backend", BACKENDS)
def test_moves_win_once_across_workers(backend: str, tmp_path: Path) -> None:
    drive(Queue, two_workers(backend, tmp_path, SqlReviewStore, InMemoryReviewStore), max_examples=20, steps=15)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_prune_forgets_only_posts_done_with(backend: str, tmp_path: Path) -> None:
    async with two_workers(backend, tmp_path, SqlReviewStore, InMemoryReviewStore) as (a, _):
        for rid in ("wait", "ok", "busy", "done", "no", "bad"):
            await a.add(held(rid))
        await a.move("ok", "pending", "approved")
        for rid in ("busy", "done", "bad"):
            await a.move(rid, "pending", "approved")
            await a.move(rid, "approved", "posting")
        await a.move("done", "posting", "posted")
        await a.move("bad", "posting", "failed")
        await a.move("no", "pending", "rejected")
        assert await a.prune(time.time() + 1) == 3
        assert {r.id for r in await a.list()} == {"wait", "ok", "busy"}  # waiting, approved, maybe posted
