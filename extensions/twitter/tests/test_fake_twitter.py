"""The fake X (Twitter), proven against the real client (tweepy).

No mocks: the test runs a real client against the loopback fake, so what passes here is what
the extension can rely on.
"""

from __future__ import annotations

import time

import pytest
import tweepy
from tweepy.asynchronous import AsyncClient

from hub.testing.twitter import FakeTwitter, weighted_length

# -- X / Twitter -------------------------------------------------------------------------------


def _twitter_client(tw: FakeTwitter) -> AsyncClient:
    client = AsyncClient(
        bearer_token="app-bearer",
        consumer_key="ck",
        consumer_secret="cs",
        access_token=f"{tw.user_id}-at",
        access_token_secret="ats",
    )
    tw.patch_async_client(client)
    return client


async def test_twitter_mentions_reply_and_rate_limit() -> None:
    async with FakeTwitter() as tw:
        client = _twitter_client(tw)
        me = await client.get_me(user_auth=True)
        assert me.data.id == int(tw.user_id) and me.data.username == "hubbot"

        old = tw.push_mention("@hubbot old", author_id="42", author_username="alice")
        first = await client.get_users_mentions(tw.user_id, expansions=["author_id"], user_auth=True)
        assert first.meta["newest_id"] == old
        new = tw.push_mention("@hubbot new", author_id="43", author_username="bob")
        page = await client.get_users_mentions(
            tw.user_id, since_id=first.meta["newest_id"], expansions=["author_id"], user_auth=True
        )
        assert [t.id for t in page.data] == [int(new)]
        assert page.data[0].author_id == 43 and page.data[0].edit_history_tweet_ids
        assert [u.username for u in page.includes["users"]] == ["bob"]
        empty = await client.get_users_mentions(tw.user_id, since_id=new)  # bearer works here
        assert empty.data is None and empty.meta["result_count"] == 0

        reply = await client.create_tweet(text="hi bob", in_reply_to_tweet_id=new)
        assert tw.sent[0]["in_reply_to"] == new and tw.sent[0]["id"] == reply.data["id"]
        assert tw.auth_kinds[:3] == ["oauth1", "oauth1", "oauth1"]
        assert tw.auth_kinds[3] == "bearer" and tw.auth_kinds[4] == "oauth1"

        tw.fail_next("GET /2/users/:id/mentions", status=429, retry_after=60)
        with pytest.raises(tweepy.errors.TooManyRequests) as caught:
            await client.get_users_mentions(tw.user_id, user_auth=True)
        reset = int(caught.value.response.headers["x-rate-limit-reset"])
        assert 55 < reset - time.time() <= 62
        assert caught.value.response.headers["x-rate-limit-remaining"] == "0"

        with pytest.raises(tweepy.errors.Forbidden, match="too long"):
            await client.create_tweet(text="x" * 281)
        with pytest.raises(tweepy.errors.Forbidden, match="duplicate"):
            await client.create_tweet(text="hi bob", in_reply_to_tweet_id=new)
        with pytest.raises(tweepy.errors.Forbidden, match="Application-Only"):
            await client.create_tweet(text="as app", user_auth=False)
        await client.session.close()


async def test_twitter_headers_limits_and_session_replacement() -> None:
    import aiohttp

    async with FakeTwitter(rate_limits={"GET /2/users/:id/mentions": 2}) as tw:
        client = _twitter_client(tw)
        client.return_type = aiohttp.ClientResponse  # to read the headers tweepy returns
        response = await client.get_users_mentions(tw.user_id)
        assert response.headers["x-rate-limit-limit"] == "2"
        assert response.headers["x-rate-limit-remaining"] == "1"
        await client.get_users_mentions(tw.user_id)
        with pytest.raises(tweepy.errors.TooManyRequests):
            await client.get_users_mentions(tw.user_id)  # the window is spent
        # The hub (or tweepy) may install its own session: it is wrapped, not bypassed.
        await client.session.close()
        client.session = aiohttp.ClientSession()
        response = await client.get_me()
        assert response.status == 200
        await client.session.close()
    assert weighted_length("a" * 280) == 280
    assert weighted_length("日本") == 4
    assert weighted_length("see https://example.com/a/very/long/path/indeed") == 27
