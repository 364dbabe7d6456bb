"""The caps every public timeline shares (hub/platform/_public.py), raced by two workers (two
connections to one database) on every backend: the per-account cap and the daily cap are each
one compare-and-set, so workers together never pass them."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from hub.platform import PublicSettings, SendFailed, admit_reply, check_length, reserve_posts
from hub.store import InMemoryStore
from hub.store.sql import SqlMemoryStore
from tests._support.backends import BACKENDS, two_workers


@pytest.mark.parametrize("backend", BACKENDS)
async def test_replies_per_account_hold_across_workers(backend: str, tmp_path: Path) -> None:
    async with two_workers(backend, tmp_path, SqlMemoryStore, InMemoryStore) as (a, b):
        got = await asyncio.gather(
            *(admit_reply((a, b)[i % 2], "alice", platform="mastodon", limit=3, window=60) for i in range(10))
        )
        assert sum(got) == 3
        assert await admit_reply(a, "bob", platform="mastodon", limit=3, window=60)  # another account
        assert await admit_reply(a, "alice", platform="mastodon", limit=3, window=60, now=10**12)  # a later window


@pytest.mark.parametrize("backend", BACKENDS)
async def test_the_daily_cap_holds_across_workers_per_platform(backend: str, tmp_path: Path) -> None:
    async with two_workers(backend, tmp_path, SqlMemoryStore, InMemoryStore) as (a, b):

        async def one(i: int) -> bool:
            try:
                await reserve_posts((a, b)[i % 2], 1, platform="bluesky", limit=4, chat="c")
            except SendFailed:
                return False
            return True

        assert sum(await asyncio.gather(*(one(i) for i in range(9)))) == 4
        with pytest.raises(SendFailed, match="max_posts_per_day = 4 reached"):
            await reserve_posts(b, 1, platform="bluesky", limit=4, chat="c")
        assert len(await reserve_posts(a, 4, platform="mastodon", limit=4, chat="c")) == 4  # its own count


def test_a_post_over_the_limit_is_refused_before_it_leaves() -> None:
    check_length("x", "c", "a" * 10, measure=len, limit=10, unit="characters")
    with pytest.raises(SendFailed, match="a post of 11 characters is over x's 10"):
        check_length("x", "c", "a" * 11, measure=len, limit=10, unit="characters")


def test_pairing_is_refused_on_every_public_timeline_naming_it() -> None:
    class PagerSettings(PublicSettings):
        timeline_name = "Pager"

    with pytest.raises(ValueError, match=r'"pairing" is not available on Pager: .*public'):
        PagerSettings(dm_policy="pairing")
    with pytest.raises(ValueError, match=r'"pairing" is not available on a public timeline'):
        PublicSettings(dm_policy="pairing")
    assert PagerSettings(dm_policy="allowlist").dm_policy == "allowlist"
