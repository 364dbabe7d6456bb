"""The shared platform layer: splitting that never truncates, the governor, the loop guard."""

import asyncio
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hub.platform import (
    AllowList,
    Governor,
    LoopGuard,
    PermanentSendError,
    RateLimit,
    RateLimited,
    SendFailed,
    TransientSendError,
    split_message,
    utf16_len,
)


def words(text: str) -> list[str]:
    return [w for w in re.split(r"\s+", text.replace("```", " ")) if w]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=0, max_size=300),
            st.builds(lambda code: f"```py\n{code}\n```", st.text(alphabet="abc xyz=()\n", max_size=400)),
        ),
        max_size=12,
    ).map("\n\n".join),
    st.integers(min_value=40, max_value=400),
)
def test_split_never_truncates_and_respects_the_limit(text: str, limit: int) -> None:
    parts = split_message(text, limit)
    assert all(len(p) <= limit for p in parts)
    # nothing lost: every character but whitespace, in order (split code blocks only add
    # their fences back, so the text is a subsequence of the parts)
    it = iter("".join("".join(parts).split()))
    assert all(c in it for c in "".join(text.split()))
    # and every word that fits in a message stays whole, in order (a longer one is hard-cut)
    it = iter(words("\n".join(parts)))
    assert all(any(w == got for got in it) for w in words(text) if len(w) <= limit)


def test_split_prefers_paragraphs_and_keeps_code_whole() -> None:
    code = "```python\n" + "\n".join(f"print({i})" for i in range(20)) + "\n```"
    text = "Intro paragraph.\n\n" + "A" * 150 + "\n\n" + code + "\n\nThe end."
    parts = split_message(text, 300)
    assert parts[0] == "Intro paragraph.\n\n" + "A" * 150
    assert parts[1] == code + "\n\nThe end."  # the block whole, packed with what fits after it


def test_a_code_block_longer_than_the_limit_is_split_with_balanced_fences() -> None:
    code = "```js\n" + "\n".join(f"console.log({i});" for i in range(200)) + "\n```"
    parts = split_message(code, 500)
    assert len(parts) > 1
    for p in parts:
        assert len(p) <= 500 and p.startswith("```js\n") and p.endswith("\n```")
        assert p.count("```") == 2
    body = "\n".join(p[len("```js\n") : -len("\n```")] for p in parts)
    assert body == "\n".join(f"console.log({i});" for i in range(200))


def test_telegram_length_counts_utf16() -> None:
    text = "😀" * 3000  # 6000 UTF-16 units
    parts = split_message(text, 4096, length=utf16_len)
    assert all(utf16_len(p) <= 4096 for p in parts) and "".join(parts) == text


def test_short_and_blank() -> None:
    assert split_message("hi", 100) == ["hi"]
    assert split_message("  \n ", 100) == []


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, d: float) -> None:
        self.sleeps.append(d)
        self.now += d
        await asyncio.sleep(0)


async def test_governor_honours_retry_after_then_succeeds() -> None:
    clock = FakeClock()
    calls = []

    async def send() -> str:
        calls.append(clock.now)
        if len(calls) == 1:
            raise RateLimited(3)
        return "ok"

    gov = Governor("t", clock=clock, sleep=clock.sleep)
    assert await gov.send(1, send) == "ok"
    assert len(calls) == 2 and calls[1] - calls[0] >= 3
    assert gov.sent == 1 and gov.rate_limited == 1


async def test_governor_paces_per_chat_and_globally() -> None:
    clock = FakeClock()
    times: list[tuple[int, float]] = []

    def sender(chat: int):
        async def send() -> None:
            times.append((chat, clock.now))

        return send

    gov = Governor("t", per_chat=RateLimit(1, 1.0), global_=RateLimit(3, 1.0), clock=clock, sleep=clock.sleep)
    for _ in range(3):
        await gov.send(1, sender(1))
    chat1 = [t for c, t in times if c == 1]
    assert chat1[1] - chat1[0] >= 1.0 and chat1[2] - chat1[1] >= 1.0
    await asyncio.gather(*(gov.send(c, sender(c)) for c in range(10, 16)))
    burst = sorted(t for c, t in times if c >= 10)
    # at most 3 sends in any 1-second window
    for i in range(len(burst) - 3):
        assert burst[i + 3] - burst[i] >= 1.0


async def test_governor_gives_up_and_says_why() -> None:
    clock = FakeClock()

    async def always_5xx() -> None:
        raise TransientSendError("HTTP 502")

    gov = Governor("t", max_attempts=3, clock=clock, sleep=clock.sleep)
    with pytest.raises(SendFailed, match="gave up after 3 attempts: HTTP 502"):
        await gov.send(1, always_5xx)

    async def forbidden() -> None:
        raise PermanentSendError("403 bot was blocked by the user")

    with pytest.raises(SendFailed, match="blocked"):
        await gov.send(1, forbidden)
    assert gov.failed == 2


async def test_governor_bounds_total_wait() -> None:
    clock = FakeClock()

    async def flood() -> None:
        raise RateLimited(100)

    gov = Governor("t", max_wait=30, clock=clock, sleep=clock.sleep)
    with pytest.raises(SendFailed, match="retry after 100s"):
        await gov.send(1, flood)
    assert clock.now < 31


def test_loop_guard_stops_bot_ping_pong_and_a_human_resets_it() -> None:
    now = [0.0]
    guard = LoopGuard(max_turns=3, window=60, clock=lambda: now[0])
    assert [guard.allow("c", from_bot=True) for _ in range(5)] == [True, True, True, False, False]
    assert guard.allow("other", from_bot=True)
    assert guard.allow("c", from_bot=False)
    assert guard.allow("c", from_bot=True)
    now[0] = 1000
    assert [guard.allow("other", from_bot=True) for _ in range(3)] == [True, True, True]


def test_allow_list() -> None:
    assert AllowList().allows(5)
    allow = AllowList([42, "-100"])
    assert allow.allows(42) and allow.allows(-100) and allow.allows(None, "42")
    assert not allow.allows(7) and not allow.allows(None)


def test_the_loop_guard_keeps_only_the_chats_of_its_window() -> None:
    """A chat whose last answer to a bot left the window is forgotten (issue 40, item 21):
    a bot that writes in many chats once does not grow the guard for ever."""
    now = [0.0]
    guard = LoopGuard(max_turns=2, window=10.0, clock=lambda: now[0])
    for chat in range(1000):
        assert guard.allow(chat, from_bot=True)
        now[0] += 0.001
    assert len(guard) == 1000
    now[0] += 11.0
    assert guard.allow("busy", from_bot=True) and guard.allow("busy", from_bot=True)
    assert len(guard) == 1 and not guard.allow("busy", from_bot=True), "the guard still counts within its window"


async def test_markers_older_than_their_age_are_pruned_and_bare_ones_age_from_now() -> None:
    from hub.platform import marker, prune_markers
    from hub.store import InMemoryStore

    memory = InMemoryStore()
    await memory.set("p:old", marker(100.0))
    await memory.set("p:new", marker(1000.0))
    await memory.set("p:bare", True)  # written before markers had a time
    await memory.set("q:other", marker(0.0))
    assert await prune_markers(memory, "p:", max_age=500.0, now=1200.0) == 1
    assert await memory.get("p:old") is None and await memory.get("p:bare") == {"ts": 1200.0}
    assert await memory.get("q:other") is not None


_FENCED = st.lists(
    st.one_of(
        st.sampled_from(["```", "```python with an info string that runs on", "~~~", "````", "\n", "\n\n", ". "]),
        st.text(alphabet="abc xyz\n`~", min_size=1, max_size=60),
    ),
    min_size=1,
    max_size=40,
).map(lambda parts: "\n".join(parts))


@settings(max_examples=150, deadline=None)
@given(_FENCED, st.integers(min_value=16, max_value=200), st.booleans())
def test_every_part_is_within_the_limit_fences_or_not(text: str, limit: int, markdown: bool) -> None:
    parts = split_message(text, limit, markdown=markdown)
    assert all(len(p) <= limit for p in parts), [len(p) for p in parts]
    # nothing lost but the fences a split block is closed and reopened with
    it = iter(re.sub(r"[\s`~]", "", "".join(parts)))
    assert all(c in it for c in re.sub(r"[\s`~]", "", text))
    if not markdown:  # plain text: nothing added, nothing reopened
        assert "".join("".join(parts).split()) == "".join(text.split())


async def test_a_long_split_runs_off_the_event_loop() -> None:
    import threading

    from hub.platform import LONG_SPLIT, split_off_loop

    threads: list[threading.Thread] = []

    def split(text: str) -> list[str]:
        threads.append(threading.current_thread())
        return split_message(text, 100)

    assert await split_off_loop(split, "short") == ["short"]
    long = "word " * (LONG_SPLIT // 5 + 1)
    parts = await split_off_loop(split, long)
    assert " ".join(parts).split() == long.split()
    assert threads[0] is threading.current_thread() and threads[1] is not threading.current_thread()


def test_a_long_paragraph_is_cut_by_bisection_not_measured_at_every_candidate() -> None:
    # a platform's measure may cost milliseconds (mrkdwn rendered, twitter-text's count):
    # a split takes about 2·log2(pieces) measures a message, never one per word or character
    calls = 0

    def length(text: str) -> int:
        nonlocal calls
        calls += 1
        return len(text)

    paragraph = " ".join(f"word{i}" for i in range(8_000))  # about 50,000 characters, one line
    parts = split_message(paragraph, 3_000, length=length)
    assert " ".join(parts).split() == paragraph.split() and all(len(p) <= 3_000 for p in parts)
    assert calls <= 40 * len(parts), (calls, len(parts))
    calls = 0
    unbroken = "x" * 20_000  # no boundary at all: hard cuts
    parts = split_message(unbroken, 3_000, length=length)
    assert "".join(parts) == unbroken and calls <= 40 * len(parts), (calls, len(parts))
