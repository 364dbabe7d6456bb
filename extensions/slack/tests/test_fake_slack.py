"""The fake Slack answers the real slack-sdk as Slack does, where the extension's tests rely on it."""

from __future__ import annotations

import time

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient

from hub.testing.slack import APP_TOKEN, BOT_TOKEN, SIGNING_SECRET, FakeSlack, sign


async def test_the_web_api_checks_tokens_limits_threads_and_rate_limits() -> None:
    async with FakeSlack() as sl:
        web = AsyncWebClient(token=BOT_TOKEN, base_url=sl.api_url)
        assert (await web.auth_test())["user_id"] == sl.state.bot_user
        with pytest.raises(SlackApiError, match="invalid_auth"):
            await AsyncWebClient(token="xoxb-wrong", base_url=sl.api_url).auth_test()
        opened = await web.apps_connections_open(app_token=APP_TOKEN)
        assert opened["url"].startswith("ws://127.0.0.1:")
        block = {"type": "section", "text": {"type": "mrkdwn", "text": "x" * 3001}}
        with pytest.raises(SlackApiError, match="invalid_blocks"):
            await web.chat_postMessage(channel="C1", text="x", blocks=[block])
        with pytest.raises(SlackApiError, match="thread_not_found"):
            await web.chat_postMessage(channel="C1", text="x", thread_ts="1.1")
        sl.fail_next("chat.postMessage", status=429, retry_after=7)
        with pytest.raises(SlackApiError) as caught:
            await web.chat_postMessage(channel="C1", text="x")
        assert caught.value.response.status_code == 429 and caught.value.response.headers["Retry-After"] == "7"
        sent = await web.chat_postMessage(channel="C1", text="hello")
        await web.chat_update(channel="C1", ts=sent["ts"], text="hello again")
        assert sl.sent == [
            {"channel": "C1", "ts": sent["ts"], "text": "hello again", "mrkdwn": None, "thread_ts": None}
        ]


def test_its_signature_is_the_one_slack_sdk_verifies() -> None:
    body, now = b'{"type":"event_callback"}', int(time.time())
    verifier = SignatureVerifier(SIGNING_SECRET)
    assert verifier.is_valid(body, str(now), sign(SIGNING_SECRET, now, body))
    assert not verifier.is_valid(body, str(now), sign("another", now, body))
