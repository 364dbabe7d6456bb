"""The X extension with the real tweepy AsyncClient against the loopback fake X API."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sqlite3
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

import hub.testing.twitter as fake_twitter
from hub import ConfigError, Hub, RunResult, ScriptedModel
from hub.config import config_from_dict
from hub.definitions import load_extension
from hub.engine import Plugin
from hub.testing import temp_config
from hub.testing.twitter import FakeTwitter, weighted_length
from hub_twitter import (
    SINCE_ID_KEY,
    TwitterBot,
    TwitterSettings,
    extension,
    make_client,
    split_tweets,
    weighted_len,
)

ROOT = Path(__file__).resolve().parents[3]
MENTIONS = "GET /2/users/:id/mentions"
POST = "POST /2/tweets"


# -- helpers -----------------------------------------------------------------------------------


def settings_for(tw: FakeTwitter, **kw: Any) -> TwitterSettings:
    values: dict[str, Any] = {
        "bearer_token": "app-bearer",
        "api_key": "ck",
        "api_secret": "cs",
        "access_token": f"{tw.user_id}-at",
        "access_token_secret": "ats",
        "dry_run": False,
        "post_interval": 0,
    }
    values.update(kw)
    return TwitterSettings(**values)


def routed(tw: FakeTwitter) -> Callable[[TwitterSettings], Any]:
    def factory(settings: TwitterSettings) -> Any:
        client = make_client(settings)
        tw.patch_async_client(client)
        return client

    return factory


class Bot:
    """A started hub with the X extension, and what its runs produced."""

    def __init__(self, hub: Hub, bot: TwitterBot, model: ScriptedModel) -> None:
        self.hub = hub
        self.bot = bot
        self.model = model
        self.results: list[RunResult] = []

    async def runs(self, n: int, timeout: float = 5) -> list[RunResult]:
        await until(lambda: len(self.results) >= n, timeout)
        return self.results


async def until(predicate: Callable[[], bool], timeout: float = 5) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met in time")
        await asyncio.sleep(0.01)


def inputs(result: RunResult) -> list[Any]:
    """The inputs a run took."""
    return [e for e in result.logs if e.kind == "input"]


def numbered(prefix: str = "Thanks") -> ScriptedModel:
    """A model that answers each request with a distinct text (X refuses duplicates)."""
    count = 0

    def answer(request: Any) -> str:
        nonlocal count
        count += 1
        return f"{prefix}, answer {count}."

    return ScriptedModel(answer)


@asynccontextmanager
async def bot(
    tw: FakeTwitter, data: Path, model: ScriptedModel | None = None, *, first_poll: bool = True, **kw: Any
) -> AsyncIterator[Bot]:
    """A hub with the X extension on ``data``; entered once the first poll is done."""
    page_size = kw.pop("page_size", 100)
    settings = settings_for(tw, **kw)
    twitter = TwitterBot(settings, client_factory=routed(tw), page_size=page_size, resolve=tw.resolve)
    cfg = temp_config(data)
    cfg.hub.shutdown_grace = 2
    model = model or numbered()
    hub = Hub(cfg, model=model, load_extensions=False, extensions=[extension(settings, bot=twitter)])
    b = Bot(hub, twitter, model)

    class Collect(Plugin):
        async def after_run(self, result: RunResult, ctx: Any) -> None:
            b.results.append(result)

    hub.plugins.add(Collect())
    async with hub:
        if first_poll:
            await until(lambda: twitter.polls >= 1)
        yield b


# -- a mention in, a reply out -------------------------------------------------------------------


async def test_mention_gets_a_reply_and_since_id_is_saved(tmp_path: Path) -> None:
    async with FakeTwitter() as tw:
        mid = tw.push_mention("@hubbot what's up?", author_id="42", author_username="alice", author_name="Alice A.")
        async with bot(tw, tmp_path, ScriptedModel(["All good here!"])) as b:
            sent = await tw.wait_sent(1)
            assert sent[0]["text"] == "All good here!" and sent[0]["in_reply_to"] == mid
            (result,) = await b.runs(1)
            assert result.ok and result.context == f"twitter:conversation:{mid}"
            (out,) = result.outputs
            assert out.type == "twitter:reply" and out.sent and out.data["tweet_ids"] == [sent[0]["id"]]
            assert await b.hub.memory.get(SINCE_ID_KEY) == mid
            assert b.bot.username == "hubbot" and b.bot.user_id == tw.user_id
            prompt = json.dumps([m for r in b.model.requests for m in r.messages])
            assert "up?" in prompt and "@alice" in prompt
            (run,) = await b.hub.runs.page(limit=1)  # who, as the dashboard shows them
            assert (run.user_name, run.user_handle, run.message) == ("Alice A.", "alice", "@hubbot what's up?")
        # reading with the bearer token, posting (and /users/me) as the bot
        kinds = {r.name: _auth(r) for r in tw.requests}
        assert kinds == {"GET /2/users/me": "oauth1", MENTIONS: "bearer", POST: "oauth1"}
        assert (
            tw.calls(MENTIONS)[0].params["expansions"] == "author_id,attachments.media_keys"
        )  # pictures come with mentions


def _auth(r: Any) -> str:
    return "oauth1" if r.headers.get("Authorization", "").startswith("OAuth") else "bearer"


async def test_dry_run_logs_and_posts_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="hub_twitter")
    async with FakeTwitter() as tw:
        mid = tw.push_mention("@hubbot hello", author_id="42", author_username="alice")
        # dry run with the read token only: posting keys absent, the account named by id
        async with bot(
            tw,
            tmp_path,
            ScriptedModel(["Hello there!"]),
            dry_run=True,
            api_key="",
            api_secret="",
            access_token="",
            access_token_secret="",
            user_id=tw.user_id,
        ) as b:
            (result,) = await b.runs(1)
            (out,) = result.outputs
            assert out.sent and out.data["dry_run"] is True
            assert out.data["tweets"] == [{"text": "Hello there!", "weighted_length": 12}]
            assert out.data["in_reply_to"] == mid
            assert await b.hub.memory.get(SINCE_ID_KEY) == mid
        assert tw.calls(POST) == [] and tw.sent == []
        assert tw.calls("GET /2/users/me") == []
        assert any(
            "would post 1/1 in reply to " + mid in r.getMessage() and "Hello there!" in r.getMessage()
            for r in caplog.records
            if r.levelno == logging.INFO
        )


async def test_mentions_over_several_pages_are_taken_oldest_first(tmp_path: Path) -> None:
    async with FakeTwitter() as tw:
        ids = [
            tw.push_mention(f"@hubbot number {i}", author_id=str(100 + i), author_username=f"u{i}") for i in range(12)
        ]
        async with bot(tw, tmp_path, page_size=5, posts_per_minute=20) as b:
            await b.runs(12)
            assert await b.hub.memory.get(SINCE_ID_KEY) == ids[-1]
        assert len(tw.calls(MENTIONS)) == 3  # pages of 5, 5 and 2
        assert sorted(s["in_reply_to"] for s in tw.sent) == ids
        with sqlite3.connect(tmp_path / "data" / "hub.db") as db:
            recorded = [r[0] for r in db.execute("SELECT platform_id FROM inbox ORDER BY received")]
        assert recorded == [f"twitter:{i}" for i in ids]


async def test_restart_on_the_same_data_does_not_reply_again(tmp_path: Path) -> None:
    async with FakeTwitter() as tw:
        first = tw.push_mention("@hubbot one", author_id="42", author_username="alice")
        async with bot(tw, tmp_path) as b:
            await tw.wait_sent(1)
            await b.runs(1)
        async with bot(tw, tmp_path, numbered("Welcome back")) as b:
            assert await b.bot.poll() == 0  # after the start's own poll: nothing new
            second = tw.push_mention("@hubbot two", author_id="43", author_username="bob")
            assert await b.bot.poll() == 1
            await tw.wait_sent(2)
            await b.runs(1)
            assert len(b.model.requests) == 1
        assert [s["in_reply_to"] for s in tw.sent] == [first, second]
        assert tw.calls(MENTIONS)[-1].params["since_id"] == first


async def test_redelivered_mention_is_not_answered_twice(tmp_path: Path) -> None:
    async with FakeTwitter() as tw:
        first = tw.push_mention("@hubbot hi", author_id="42", author_username="alice")
        async with bot(tw, tmp_path) as b:
            await tw.wait_sent(1)
            await b.runs(1)
            await b.hub.memory.delete(SINCE_ID_KEY)  # the cursor is lost: X sends it again
            assert await b.bot.poll() == 0
            assert await b.hub.memory.get(SINCE_ID_KEY) is not None
            # the sentinel, in the same conversation: a redelivery taken as new would be answered
            # before it, or taken with it by the sentinel's run
            sentinel = tw.push_mention(
                "@hubbot still there?", author_id="42", author_username="alice", in_reply_to=first
            )
            assert await b.bot.poll() == 1
            await b.runs(2)
            assert [s["in_reply_to"] for s in tw.sent] == [first, sentinel]
            assert len(b.model.requests) == 2 and [len(inputs(r)) for r in b.results] == [1, 1]


async def test_resumed_run_does_not_post_an_answer_already_posted(tmp_path: Path) -> None:
    """The crash window between posting and recording the output: the resumed run finds the
    marker committed before posting and does not post again."""
    async with FakeTwitter() as tw:
        mid = tw.push_mention("@hubbot hi", author_id="42", author_username="alice")
        async with bot(tw, tmp_path) as b:
            await tw.wait_sent(1)
            await b.runs(1)
        with sqlite3.connect(tmp_path / "data" / "hub.db") as db:  # as if killed before the run's end was saved
            db.execute("UPDATE inbox SET state = 'taken', run_id = NULL")
        async with bot(tw, tmp_path) as b:
            (result,) = await b.runs(1)  # the input is handled again...
            (out,) = result.outputs
            assert out.sent and out.data["already_posted"] is True
            assert out.data["tweet_ids"] == [tw.sent[0]["id"]]
        assert len(tw.sent) == 1 and tw.sent[0]["in_reply_to"] == mid  # ...and not posted twice


# -- what is not answered --------------------------------------------------------------------


async def test_own_tweets_are_ignored(tmp_path: Path) -> None:
    async with FakeTwitter() as tw:
        tw.push_mention("@hubbot talking to myself", author_id=tw.user_id, author_username="hubbot")
        mid = tw.push_mention("@hubbot hi", author_id="42", author_username="alice")
        async with bot(tw, tmp_path) as b:
            await b.bot.poll()
            await tw.wait_sent(1)
            await b.runs(1)
            assert len(b.model.requests) == 1
            assert [s["in_reply_to"] for s in tw.sent] == [mid]
            assert await b.hub.memory.get(SINCE_ID_KEY) == mid


async def test_allow_list(tmp_path: Path) -> None:
    async with FakeTwitter() as tw:
        alice = tw.push_mention("@hubbot hi", author_id="42", author_username="Alice")
        bob = tw.push_mention("@hubbot hi too", author_id="43", author_username="bob")
        carol = tw.push_mention("@hubbot and me", author_id="44", author_username="carol")
        async with bot(tw, tmp_path, allowed_users=["@alice", "44"]) as b:
            await b.runs(2)
            await b.bot.poll()
            assert sorted(s["in_reply_to"] for s in tw.sent) == [alice, carol]
            assert await b.hub.memory.get(SINCE_ID_KEY) == carol
            assert len(b.model.requests) == 2 and bob


async def test_loop_guard_caps_answers_per_conversation(tmp_path: Path) -> None:
    async with FakeTwitter() as tw:
        root = tw.push_mention("@hubbot hi", author_id="666", author_username="otherbot")
        mentions = [root]
        for i in range(3):
            mentions.append(
                tw.push_mention(
                    f"@hubbot reply {i}", author_id="666", author_username="otherbot", in_reply_to=mentions[-1]
                )
            )
        async with bot(tw, tmp_path, loop_guard_turns=2) as b:
            await b.runs(1)
            await b.bot.poll()
            assert await b.hub.memory.get(SINCE_ID_KEY) == mentions[-1]
            # the guard decides as a poll records each mention: the first 2 were let in, and no
            # later poll takes the others
            assert [await b.hub.inbox.seen(f"twitter:{m}") for m in mentions] == [True, True, False, False]
            # 4 mentions in one conversation, taken by at most 2 runs
            await until(lambda: sum(len(inputs(r)) for r in b.results) == 2)
            assert len(b.results) <= 2


# -- posting ---------------------------------------------------------------------------------


async def test_long_reply_posts_as_a_thread_in_order(tmp_path: Path) -> None:
    text = " ".join(f"Sentence number {i} of a long answer about the weather." for i in range(11))
    assert 580 < len(text) < 640
    async with FakeTwitter() as tw:
        mid = tw.push_mention("@hubbot tell me everything", author_id="42", author_username="alice")
        async with bot(tw, tmp_path, ScriptedModel([text])) as b:
            (result,) = await b.runs(1)
        sent = tw.sent
        assert len(sent) == 3
        assert all(weighted_length(s["text"]) <= 280 for s in sent)
        assert sent[0]["in_reply_to"] == mid
        assert [s["in_reply_to"] for s in sent[1:]] == [s["id"] for s in sent[:-1]]
        assert " ".join(s["text"] for s in sent) == text
        assert result.outputs[0].data["tweet_ids"] == [s["id"] for s in sent]


async def test_timeline_post_and_a_scheduled_follow_up(tmp_path: Path) -> None:
    async with FakeTwitter() as tw:
        model = ScriptedModel(
            [
                "Good morning, everyone!",
                '<response><output type="twitter:post">Not here</output><output>Any news?</output></response>',
            ],
            default="<response></response>",
        )
        async with bot(tw, tmp_path, model) as b:
            result = await b.hub.send("twitter:timeline:home", data="Write the morning post.")
            assert result is not None and result.ok and result.outputs[0].type == "twitter:post"
            # a run with no mention (a schedule into a conversation) answers the conversation's
            # root; a timeline post is not available from a conversation
            root = tw.push_mention("@hubbot morning", author_id="42", author_username="alice")
            tw.state.mentions.remove(root)  # only the conversation exists, no mention to poll
            result = await b.hub.send(f"twitter:conversation:{root}", data="Follow up on this thread.")
            assert result is not None
            (refused, answered) = result.outputs
            assert not refused.sent and "unknown output type 'twitter:post'" in (refused.error or "")
            assert answered.sent and answered.type == "twitter:reply"
        assert [(s["text"], s["in_reply_to"]) for s in tw.sent] == [
            ("Good morning, everyone!", None),
            ("Any news?", root),
        ]


async def test_429_on_post_then_success(tmp_path: Path) -> None:
    async with FakeTwitter() as tw:
        tw.fail_next(POST, status=429, retry_after=0)
        mid = tw.push_mention("@hubbot hi", author_id="42", author_username="alice")
        async with bot(tw, tmp_path) as b:
            (result,) = await b.runs(1, timeout=8)
            assert result.outputs[0].sent
            assert b.bot.governor is not None and b.bot.governor.rate_limited == 1
            metrics = b.hub.metrics.render()[0].decode()
            assert 'hub_platform_rate_limited_total{platform="twitter"} 1.0' in metrics
            assert 'hub_platform_sends_total{platform="twitter",result="ok"} 1.0' in metrics
        assert [r.status for r in tw.calls(POST)] == [429, 201]
        assert len(tw.sent) == 1 and tw.sent[0]["in_reply_to"] == mid


@pytest.mark.parametrize(
    "failure",
    [
        {"status": 403, "description": "You are not allowed to create a Tweet with duplicate content."},
        {"status": 429, "retry_after": 3600},  # a reset an hour away: give up now, not in an hour
    ],
)
async def test_final_failure_is_recorded_as_not_sent(tmp_path: Path, failure: dict[str, Any]) -> None:
    async with FakeTwitter() as tw:
        tw.fail_next(POST, **failure)
        tw.push_mention("@hubbot hi", author_id="42", author_username="alice")
        async with bot(tw, tmp_path) as b:
            (result,) = await b.runs(1)
            (out,) = result.outputs
            assert not out.sent and "SendFailed" in (out.error or "")
            assert ("duplicate" if failure["status"] == 403 else "429") in out.error
            assert result.text == ""
        assert tw.sent == []


@pytest.mark.parametrize("limit", [{"max_thread": 2}, {"max_posts_per_day": 3}])
async def test_reply_over_a_posting_limit_is_refused_not_cut(tmp_path: Path, limit: dict[str, int]) -> None:
    async with FakeTwitter() as tw:
        tw.push_mention("@hubbot essay please", author_id="42", author_username="alice")
        async with bot(tw, tmp_path, ScriptedModel(["word " * 200]), **limit) as b:  # 4 posts
            (result,) = await b.runs(1)
            (out,) = result.outputs
            assert not out.sent and next(iter(limit)) in (out.error or "") and "nothing was posted" in out.error
        assert tw.sent == []


# -- polling discipline ----------------------------------------------------------------------


async def test_mentions_rate_limit_is_waited_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fake_twitter, "WINDOW_S", 1)  # a 1-second rate-limit window
    async with FakeTwitter(rate_limits={MENTIONS: 1}) as tw:
        async with bot(tw, tmp_path) as b:
            await tw.wait_calls(MENTIONS, 1)
            await b.bot.poll()  # remaining 0 after the first poll: waits for the reset
            mid = tw.push_mention("@hubbot hi", author_id="42", author_username="alice")
            tw.fail_next(MENTIONS, status=429, retry_after=0)  # and a 429 is waited out too
            assert await b.bot.poll() == 1
            await tw.wait_sent(1)
        statuses = [r.status for r in tw.calls(MENTIONS)]
        assert statuses == [200, 200, 429, 200]  # never a request into a spent window
        assert tw.sent[0]["in_reply_to"] == mid


async def test_stop_is_quick_while_waiting_for_a_rate_limit(tmp_path: Path) -> None:
    async with FakeTwitter() as tw:
        tw.fail_next(MENTIONS, status=429, retry_after=600)
        async with bot(tw, tmp_path, first_poll=False) as b:
            await tw.wait_calls(MENTIONS, 1)
            await asyncio.sleep(0.05)
            started = time.monotonic()
            await b.hub.stop()
            assert time.monotonic() - started < 1.0
        assert len(tw.calls(MENTIONS)) == 1


# -- settings --------------------------------------------------------------------------------


def test_missing_credentials_name_the_key_and_the_variable() -> None:
    with pytest.raises(ConfigError, match=r"extensions\.twitter\.api_key: .*TWITTER_API_KEY"):
        extension(TwitterSettings(bearer_token="b", dry_run=False))
    with pytest.raises(ConfigError, match=r"extensions\.twitter\.bearer_token: .*TWITTER_BEARER_TOKEN"):
        extension(TwitterSettings(user_id="1"))
    with pytest.raises(ConfigError, match=r"extensions\.twitter\.user_id"):
        extension(TwitterSettings(bearer_token="b"))
    with pytest.raises(ConfigError, match=r"extensions\.twitter\.access_token_secret: .*only together"):
        extension(TwitterSettings(bearer_token="b", api_key="k", api_secret="s", access_token="1-t"))
    ext = extension(TwitterSettings(bearer_token="b", user_id="1"))  # a dry run reads with the bearer only
    assert {o.type for o in ext.outputs} == {"twitter:reply", "twitter:post"}
    assert {c.type: c.reply_output for c in ext.contexts} == {
        "twitter:conversation": "twitter:reply",
        "twitter:timeline": "twitter:post",
    }


def test_config_is_validated_through_the_loader(tmp_path: Path) -> None:
    def load(table: dict[str, Any]) -> Any:
        cfg = config_from_dict({"extensions": {"twitter": table}}, env={"TWITTER_BEARER_TOKEN": "secret-b"})
        return load_extension("twitter", cfg.extensions["twitter"], cfg)

    with pytest.raises(ConfigError, match=r"extensions\.twitter\.poll_interval.*at least 15"):
        load({"bearer_token": "${TWITTER_BEARER_TOKEN}", "user_id": "1", "poll_interval": 5})
    with pytest.raises(ConfigError, match=r"extensions\.twitter\.pol_interval"):
        load({"bearer_token": "${TWITTER_BEARER_TOKEN}", "user_id": "1", "pol_interval": 90})
    with pytest.raises(ConfigError, match=r"TWITTER_API_KEY"):
        load({"bearer_token": "${TWITTER_BEARER_TOKEN}", "api_key": "${TWITTER_API_KEY}", "dry_run": False})
    with pytest.raises(ConfigError, match=r"extensions\.twitter\.api_base_url.*not an absolute http\(s\) URL"):
        load({"bearer_token": "${TWITTER_BEARER_TOKEN}", "user_id": "1", "api_base_url": "x-proxy.local:8080"})
    ext = load({"bearer_token": "${TWITTER_BEARER_TOKEN}", "user_id": "1"})
    assert ext.name == "twitter" and "secret-b" not in repr(ext)


def test_weighted_length_matches_x_and_splitting_respects_it() -> None:
    samples = ["a" * 280, "日本語のテキスト", "see https://example.com/a/very/long/path/indeed", "héllo 👍", ""]
    for s in samples:
        assert weighted_len(s) == weighted_length(s)
    assert weighted_len("a (https://x.co).") >= weighted_length("a (https://x.co).")
    assert weighted_len("example.com") == 23  # X may link it: count it as a link
    cjk = "漢字" * 200  # 800 weighted
    parts = split_tweets(cjk)
    assert "".join(parts) == cjk and all(weighted_length(p) <= 280 for p in parts) and len(parts) == 3
    urls = " ".join(f"https://example.com/{'x' * 60}/{i}" for i in range(20))
    parts = split_tweets(urls)
    assert " ".join(parts) == urls and all(weighted_length(p) <= 280 for p in parts)
    assert split_tweets("short") == ["short"]


async def test_a_reply_with_a_long_private_link_is_threaded_as_x_counts_it(tmp_path: Path) -> None:
    # X does not link a private address: its characters count, and the fake refuses (403)
    # a post over 280 exactly as X does
    text = "Deployed. Logs: http://10.0.0.5:8080/logs/" + "/".join(f"step-{i:03d}" for i in range(40))
    async with FakeTwitter() as tw:
        tw.push_mention("@hubbot deploy", author_id="42", author_username="alice")
        async with bot(tw, tmp_path, ScriptedModel([text])) as b:
            (result,) = await b.runs(1)
        sent = tw.sent
        assert len(sent) >= 2 and all(weighted_length(s["text"]) <= 280 for s in sent)
        assert result.outputs[0].data["tweet_ids"] == [s["id"] for s in sent]


# -- a hub killed mid-run --------------------------------------------------------------------


def _write_script(path: Path, n: int) -> None:
    rules = [{"contains": f"question {i}", "in": "all", "pick": i} for i in range(1, n)]
    responses = [f"Answer to question {i}." for i in range(n)]
    path.write_text(json.dumps({"default": "hub", "clients": {"hub": {"responses": responses, "rules": rules}}}))


async def _model_requests(port: int, n: int, timeout: float) -> None:
    import aiohttp

    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as session:
        while True:
            async with session.get(f"http://127.0.0.1:{port}/stats") as response:
                if (await response.json())["count"] >= n:
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(f"the model got fewer than {n} requests in {timeout}s")
            await asyncio.sleep(0.02)


async def _all_handled(db: Path, timeout: float = 20) -> None:
    """Until the hub (another process) has handled every input it recorded and no run of it
    is going, read from its SQLite file."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
            (open_inputs,) = conn.execute("SELECT count(*) FROM inbox WHERE state IN ('received', 'taken')").fetchone()
            (running,) = conn.execute("SELECT count(*) FROM runs WHERE state = 'running'").fetchone()
        if open_inputs == 0 and running == 0:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{open_inputs} input(s) not handled, {running} run(s) going after {timeout}s")
        await asyncio.sleep(0.05)


async def _start(args: list[str], env: dict[str, str], log: Path) -> asyncio.subprocess.Process:
    with log.open("ab") as stderr:  # the child keeps its own handle
        return await asyncio.create_subprocess_exec(
            *args,
            cwd=ROOT,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
        )


async def test_sigkill_mid_run_then_restart_answers_each_mention_once(tmp_path: Path) -> None:
    n = 4
    script = tmp_path / "script.json"
    _write_script(script, n)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TWITTER_BEARER_TOKEN": "app-bearer"}
    model = await _start(
        [sys.executable, "-m", "hub.testing.openai", "--port", "0", "--latency", "1.0", "--script", str(script)],
        env,
        tmp_path / "model.log",
    )
    hub_proc: asyncio.subprocess.Process | None = None
    try:
        assert model.stdout is not None
        line = (await asyncio.wait_for(model.stdout.readline(), 10)).decode()
        model_port = int(line.strip().split("=")[1])
        async with FakeTwitter() as tw:
            config = tmp_path / "config.toml"
            config.write_text(f"""
[hub]
data_dir = "{tmp_path / "data"}"
contexts_dir = "{tmp_path / "contexts"}"
shutdown_grace = 1

[model]
provider = "openai"
name = "hub"
base_url = "http://127.0.0.1:{model_port}/v1"
api_key = "x"
max_retries = 0

[extensions.twitter]
bearer_token = "${{TWITTER_BEARER_TOKEN}}"
api_key = "ck"
api_secret = "cs"
access_token = "{tw.user_id}-at"
access_token_secret = "ats"
dry_run = false
poll_interval = 15
post_interval = 0
api_base_url = "{tw.base_url}"
""")
            mentions = [
                tw.push_mention(f"@hubbot question {i}", author_id=str(100 + i), author_username=f"user{i}")
                for i in range(n - 1)
            ]
            cmd = [sys.executable, "-m", "hub.cli", "run", "--config", str(config), "--log-format", "json"]
            hub_proc = await _start(cmd, env, tmp_path / "hub.log")
            # the model takes 1 s to answer: kill the hub as soon as a run is waiting for it
            await _model_requests(model_port, 1, timeout=20)
            assert tw.sent == []
            hub_proc.send_signal(signal.SIGKILL)
            await hub_proc.wait()
            mentions.append(tw.push_mention(f"@hubbot question {n - 1}", author_id="200", author_username="late"))

            hub_proc = await _start(cmd, env, tmp_path / "hub.log")
            try:
                await tw.wait_sent(n, timeout=20)
            except TimeoutError as e:
                raise AssertionError((tmp_path / "hub.log").read_text()[-4000:]) from e
            # once every input the hub recorded is handled and no run goes on, nothing is left
            # that could answer a mention again: the next poll is poll_interval away
            await _all_handled(tmp_path / "data" / "hub.db")
            hub_proc.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(hub_proc.wait(), 10) == 0
            replies = sorted((s["in_reply_to"], s["text"]) for s in tw.sent)
            assert replies == sorted((m, f"Answer to question {i}.") for i, m in enumerate(mentions)), (
                tmp_path / "hub.log"
            ).read_text()[-3000:]
            assert all(r.status < 400 for r in tw.calls(POST))
    finally:
        for proc in (hub_proc, model):
            if proc is not None and proc.returncode is None:
                proc.kill()
                await proc.wait()


async def test_refused_keys_stop_the_start_with_a_clear_error(tmp_path: Path) -> None:
    from hub import ExtensionFailed

    async with FakeTwitter() as tw:
        tw.fail_next("GET /2/users/me", status=401, description="Unauthorized")
        with pytest.raises(ExtensionFailed, match="X refused the OAuth 1.0a keys"):
            async with bot(tw, tmp_path):
                pass


# -- several workers: one mention poller, under a lease ---------------------------------------


async def test_one_worker_polls_mentions_and_another_takes_over_when_it_stops(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="hub.store")
    async with FakeTwitter() as tw:
        bots = []
        hubs = []
        for n in range(2):  # two workers on one data dir share the store, and its leases
            settings = settings_for(tw, poll_interval=15, lease_ttl=4)
            twitter = TwitterBot(settings, client_factory=routed(tw), resolve=tw.resolve)
            cfg = temp_config(tmp_path)
            cfg.hub.shutdown_grace = 2
            bots.append(twitter)
            hubs.append(
                Hub(
                    cfg,
                    model=numbered(f"Worker {n}"),
                    load_extensions=False,
                    extensions=[extension(settings, bot=twitter)],
                )
            )
        async with hubs[0], hubs[1]:
            await until(lambda: any(s.polls for s in bots))
            polling = next(i for i, s in enumerate(bots) if s.polls)
            standby = 1 - polling
            # the other worker was refused the lease (it says so) and has not polled
            await until(lambda: any("standing by" in r.getMessage() for r in caplog.records))
            first = tw.push_mention("@hubbot first", author_id="42", author_username="alice")
            await bots[polling].poll()  # the holder's next poll, now rather than in 15 s
            await tw.wait_sent(1)
            assert bots[standby].polls == 0 and len(tw.calls(MENTIONS)) == 2
            assert bots[standby].keeper is not None and not bots[standby].keeper.held
            await hubs[polling].stop()
            second = tw.push_mention("@hubbot second", author_id="43", author_username="bob")
            sent = await tw.wait_sent(2, timeout=10)  # the standby's first poll, once it holds the lease
            assert [s["in_reply_to"] for s in sent] == [first, second]
            assert bots[standby].polls == 1
            lease = await hubs[standby].leases.holder(f"twitter:poll:{tw.user_id}")
            assert lease is not None and lease.holder == hubs[standby].worker
