"""Live outputs: the engine hands an open <output>'s content to its handler as it arrives,
the platform helper (hub.platform.LiveMessage) edits one message in place, and events."""

from __future__ import annotations

import asyncio
import re

import pytest

from hub import Context, Extension, LiveText, OutputLog, OutputPartial, RunEvent, RunState, ScriptedModel, output
from hub.platform import LiveMessage, SendFailed, balance_fences

CTX = ("live:chat", {"id": 1})


class Args:
    pass


def make_ext(seen: list, *, live: bool = True) -> Extension:
    """An output that records each version of the text it was shown, and its final text."""

    @output(type="live:say", live=live, description="say")
    async def say(content: LiveText, ctx) -> dict:
        versions = [text async for text in content]
        seen.append((versions, content.cut_off))
        return {"final": versions[-1]}

    from pydantic import BaseModel

    class ChatArgs(BaseModel):
        id: int

    chat = Context(type="live:chat", schema=ChatArgs, key=lambda a: str(a.id), reply_output="live:say")
    return Extension(name="live", contexts=[chat], outputs=[say])


def resp(body: str) -> str:
    return f'<response><reasoning>hm</reasoning><output type="live:say">{body}</output></response>'


async def test_a_live_output_sees_its_content_grow_then_the_whole_text(make_hub) -> None:
    seen: list = []
    words = " ".join(f"word{i}" for i in range(60))
    model = ScriptedModel([resp(words)], chunk=7, chunk_delay=0.002)
    async with make_hub(model, make_ext(seen)) as hub:
        result = await hub.send(*CTX, "hi")
    assert result.state == RunState.COMPLETED
    ((versions, cut),) = seen
    assert not cut and versions[-1] == words
    assert len(versions) > 3, "the handler saw the text grow"
    for v in versions[:-1]:  # every version is a prefix made of whole words
        assert words.startswith(v) and (words[len(v) :][:1] in ("", " "))
    (entry,) = result.outputs
    assert entry.sent and entry.live and entry.content == words and entry.data == {"final": words}


async def test_a_live_output_the_stream_ends_inside_is_marked_cut(make_hub) -> None:
    seen: list = []
    model = ScriptedModel(['<response><output type="live:say">half of a reply'], chunk=5)
    async with make_hub(model, make_ext(seen)) as hub:
        result = await hub.send(*CTX, "hi")
    ((versions, cut),) = seen
    assert cut and versions[-1] == "half of a reply […]"
    assert any(isinstance(e, OutputLog) and e.content == "half of a reply […]" for e in result.logs)


async def test_outputs_keep_their_order_and_non_live_ones_get_whole_text(make_hub) -> None:
    seen: list = []
    got: list[str] = []

    @output(type="live:note", description="note")
    async def note(content: str, ctx) -> None:
        got.append(content)

    ext = make_ext(seen)
    ext.outputs.append(note)
    body = (
        '<response><output type="live:note">first</output><output type="live:say">second one</output>'
        '<output type="live:note">third</output></response>'
    )
    async with make_hub(ScriptedModel([body], chunk=3), ext) as hub:
        result = await hub.send(*CTX, "hi")
    assert [e.content for e in result.outputs] == ["first", "second one", "third"]
    assert got == ["first", "third"] and seen[0][0][-1] == "second one"


async def test_partial_and_final_events_reach_subscribers(make_hub) -> None:
    seen: list = []
    words = " ".join(f"w{i}" for i in range(40))
    model = ScriptedModel([resp(words)], chunk=4, chunk_delay=0.01)  # about 0.4 s: several 50 ms batches
    async with make_hub(model, make_ext(seen)) as hub:
        async with hub.events(kinds=["output_partial", "output"]) as events:
            result = await hub.send(*CTX, "hi")
            got = []
            async with asyncio.timeout(5):
                async for e in events:
                    got.append(e)
                    if isinstance(e, RunEvent) and e.entry.sent:
                        break
    partials = [e for e in got if isinstance(e, OutputPartial)]
    assert len(partials) > 3 and "".join(p.text for p in partials) == words
    assert all(p.run_id == result.run_id and p.type == "live:say" for p in partials)
    assert got.index(partials[-1]) < len(got) - 1  # the final output event comes after


def test_live_needs_text_content() -> None:
    with pytest.raises(TypeError, match="live=True needs text"):

        @output(type="x:y", live=True)
        async def bad(content: str, ctx) -> None: ...

        from hub import Output

        Output(type="x:z", handler=bad.handler, schema=int, live=True)


# --- the platform helper, against in-process primitives ------------------------------------


class Platform:
    """A platform's send/edit primitives: messages by id, every request in order."""

    def __init__(self, *, fail_edit_of: int | None = None) -> None:
        self.messages: dict[int, str] = {}
        self.log: list[tuple[str, int, str]] = []
        self.fail_edit_of = fail_edit_of

    async def send(self, text: str) -> int:
        mid = len(self.messages) + 1
        self.messages[mid] = text
        self.log.append(("send", mid, text))
        return mid

    async def edit(self, mid: int, text: str) -> None:
        if mid == self.fail_edit_of:
            raise SendFailed("fake", 1, "message can't be edited")
        self.messages[mid] = text
        self.log.append(("edit", mid, text))


async def feed(live: LiveText, text: str, *, chunk: int = 50, pause: float = 0.0) -> None:
    for i in range(0, len(text), chunk):
        live.append(text[i : i + chunk])
        await asyncio.sleep(pause)
    live.finish(text.strip())


def para(i: int) -> str:
    return f"Paragraph {i}: " + " ".join(f"w{i}.{j}" for j in range(40))


async def test_live_message_grows_by_edits_and_ends_equal() -> None:
    p = Platform()
    recorded: list = []

    async def on_part(i, mid):
        recorded.append((i, mid, dict(p.messages)))

    text = "\n\n".join(para(i) for i in range(5))
    live = LiveText()
    lm = LiveMessage(send=p.send, edit=p.edit, limit=2000, interval=0.0, on_part=on_part)
    result, _ = await asyncio.gather(lm.deliver(live), feed(live, text, pause=0.001))
    assert list(p.messages.values()) == [text]
    assert recorded == [(0, 1, {1: p.log[0][2]})]  # recorded right after it was sent, before any edit
    assert result.message_ids == [1] and result.edits == len(p.log) - 1 >= 3 and not result.fell_back


async def test_live_message_continues_past_the_limit_in_order_with_fences_balanced() -> None:
    p = Platform()
    code = "```python\n" + "\n".join(f"print({i})  # line {i}" for i in range(80)) + "\n```"
    text = "\n\n".join([para(0), para(1), code, para(2)] + [para(i) for i in range(3, 12)])
    live = LiveText()
    lm = LiveMessage(send=p.send, edit=p.edit, limit=1000, interval=0.0)
    result, _ = await asyncio.gather(lm.deliver(live), feed(live, text, chunk=37))
    shown = [p.messages[m] for m in result.message_ids]
    assert len(shown) >= 4 and all(len(s) <= 1000 for s in shown)
    assert all(t.count("```") % 2 == 0 for _, _, t in p.log), "every state shown is balanced"
    no_fences = lambda s: re.sub(r"```python|```|\s+", "", s)  # noqa: E731
    assert no_fences("".join(shown)) == no_fences(text)  # nothing lost, in order
    assert [m for kind, m, _ in p.log if kind == "send"] == result.message_ids  # sent in order, once each


async def test_a_failed_edit_sends_the_remainder_once() -> None:
    p = Platform(fail_edit_of=1)
    text = "\n\n".join(para(i) for i in range(4))
    live = LiveText()
    lm = LiveMessage(send=p.send, edit=p.edit, limit=2000, interval=0.0)
    result, _ = await asyncio.gather(lm.deliver(live), feed(live, text, pause=0.001))
    assert result.fell_back and len(result.message_ids) == 2
    first, rest = p.messages[1], p.messages[2]
    assert [k for k, _, _ in p.log] == ["send", "send"], "one follow-up, no retries of the edit"
    assert re.sub(r"\s+", "", first + rest) == re.sub(r"\s+", "", text)


class FlakyPlatform(Platform):
    """Sends of a second message fail ``failures`` times (the platform down for a while)."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    async def send(self, text: str) -> int:
        if self.messages and self.failures:
            self.failures -= 1
            self.log.append(("failed", 0, text))
            raise SendFailed("fake", 1, "502 Bad Gateway (injected)")
        return await super().send(text)


@pytest.mark.parametrize("failures", [1, 4, 7])
async def test_a_continuation_that_fails_to_send_is_sent_again_and_nothing_is_lost(failures: int) -> None:
    p = FlakyPlatform(failures)
    text = "\n\n".join(para(i) for i in range(8))
    live = LiveText()
    lm = LiveMessage(send=p.send, edit=p.edit, limit=1000, interval=0.0, retry_delay=0.01)
    result, _ = await asyncio.gather(lm.deliver(live), feed(live, text, chunk=37, pause=0.001))
    assert p.failures == 0 and lm.unsent == failures
    shown = [p.messages[m] for m in result.message_ids]
    assert re.sub(r"\s+", "", "".join(shown)) == re.sub(r"\s+", "", text)  # all of it, in order, once
    assert [m for kind, m, _ in p.log if kind == "send"] == result.message_ids


async def test_a_continuation_that_never_goes_out_fails_the_reply_saying_what_did() -> None:
    p = FlakyPlatform(10_000)
    live = LiveText()
    lm = LiveMessage(send=p.send, edit=p.edit, limit=1000, interval=0.0, retry_delay=0.01, final_attempts=3)
    text = "\n\n".join(para(i) for i in range(8))
    with pytest.raises(SendFailed, match=r"the first 1 message\(s\) of the reply went out.*after 3 attempts"):
        await asyncio.gather(lm.deliver(live), feed(live, text, chunk=37, pause=0.001))


async def test_adopted_messages_are_edited_not_sent_again() -> None:
    p = Platform()
    p.messages = {1: "half of an old", 2: "draft"}
    live = LiveText()
    deleted: list[int] = []

    async def delete(mid: int) -> None:
        deleted.append(mid)

    lm = LiveMessage(send=p.send, edit=p.edit, limit=100, interval=0.0, adopt=[1, 2], delete=delete)
    live.finish("The whole new reply.")
    result = await lm.deliver(live)
    assert result.message_ids == [1] and p.messages[1] == "The whole new reply." and deleted == [2]
    assert [k for k, _, _ in p.log] == ["edit"]


def test_balance_fences() -> None:
    assert balance_fences("a\n```py\nx = 1") == "a\n```py\nx = 1\n```"
    assert balance_fences("```\nx\n```") == "```\nx\n```"


async def test_a_reply_cut_by_a_shutdown_is_completed_by_the_next_start(config) -> None:
    """A live reply half-written when the hub stopped: its input is handled again at the next
    start, and the new reply edits the same message (its id was in the ledger) to the end."""
    from pydantic import BaseModel

    from hub import Hub
    from hub.platform import live_drafts

    p = Platform()

    class ChatArgs(BaseModel):
        id: int

    def ext() -> Extension:
        @output(type="live:say", live=True)
        async def say(content: LiveText, ctx) -> dict:
            lm = LiveMessage(
                send=p.send,
                edit=p.edit,
                limit=1000,
                interval=0.0,
                first_chars=5,
                on_part=ctx.part_sent,
                adopt=live_drafts(ctx, "live:say"),
            )
            return {"ids": (await lm.deliver(content)).message_ids}

        chat = Context(type="live:chat", schema=ChatArgs, key=lambda a: str(a.id), reply_output="live:say")
        return Extension(name="live", contexts=[chat], outputs=[say])

    words = " ".join(f"word{i}" for i in range(100))
    config.hub.shutdown_grace = 0.1
    slow_model = ScriptedModel([resp(words)], chunk=10, chunk_delay=0.05)
    async with Hub(config, model=slow_model, load_extensions=False, extensions=[ext()]) as hub:
        await hub.submit(*CTX, "hi")
        async with asyncio.timeout(10):
            while sum(k == "edit" for k, _, _ in p.log) < 2:
                await asyncio.sleep(0.01)
    (half,) = p.messages.values()
    assert words.startswith(half) and half != words, "stopped mid-reply"

    # stopped again before the model said anything: the drafts it was handed go on
    async with Hub(
        config, model=ScriptedModel([resp(words)], delay=30), load_extensions=False, extensions=[ext()]
    ) as hub:
        async with asyncio.timeout(10):
            while not hub.runner.running:
                await asyncio.sleep(0.01)
    assert list(p.messages.values()) == [half]

    async with Hub(
        config, model=ScriptedModel([resp(words)], chunk=50), load_extensions=False, extensions=[ext()]
    ) as hub:
        async with asyncio.timeout(10):
            while p.messages[1] != words:
                await asyncio.sleep(0.01)
        async with asyncio.timeout(10):
            while hub.runner.running or hub.runner.queued:
                await asyncio.sleep(0.01)
    assert list(p.messages) == [1] and [k for k, _, _ in p.log].count("send") == 1, "no second copy"


def test_a_secret_being_written_is_never_shown_in_part() -> None:
    from hub.redact import MASK, Redactor

    secret = "sk-live-0123456789abcdef"
    r = Redactor([secret])
    published: list[str] = []
    live = LiveText(redact=r.redact, hold=r.unsafe_tail, on_delta=published.append)
    text = f"my key is {secret}, and {secret}then more words follow here"
    shown = []
    for ch in text:  # a character at a time: every place a chunk can end
        live.append(ch)
        shown.append(live.text)
    live.finish(r.redact(text))
    for s in [*shown, *published, live.text]:
        assert not any(secret[:k] in s for k in range(4, len(secret) + 1)), s
    assert MASK in shown[-1] and "".join(published) == r.redact(text)


def test_text_without_spaces_is_shown_as_it_comes() -> None:
    live = LiveText()
    live.append("你好世界" * 20)
    assert live.text.startswith("你好世界") and len(live.text) > 40


async def test_a_run_that_times_out_inside_a_live_reply_leaves_it_marked_cut(make_hub, config) -> None:
    p = Platform()

    def ext() -> Extension:
        from pydantic import BaseModel

        class ChatArgs(BaseModel):
            id: int

        @output(type="live:say", live=True)
        async def say(content: LiveText, ctx) -> dict:
            lm = LiveMessage(send=p.send, edit=p.edit, limit=4000, interval=0.0, first_chars=5)
            return {"ids": (await lm.deliver(content)).message_ids}

        chat = Context(type="live:chat", schema=ChatArgs, key=lambda a: str(a.id), reply_output="live:say")
        return Extension(name="live", contexts=[chat], outputs=[say])

    config.agent.run_timeout = 3.0
    words = " ".join(f"word{i}" for i in range(400))
    async with make_hub(ScriptedModel([resp(words)], chunk=10, chunk_delay=0.02), ext()) as hub:
        result = await hub.send(*CTX, "hi")
    assert result.state == RunState.KILLED and result.reason == "timeout"
    shown = p.messages[1]
    assert shown.endswith(" […]") and words.startswith(shown[: -len(" […]")]), shown[-40:]
    entry = result.outputs[0]
    assert entry.content == shown and entry.sent
    # then the limits plugin's reply, through the same (live) output: a message of its own
    assert [e.data.get("limit_reply") for e in result.outputs[1:]] == ["timeout"] and len(p.messages) == 2


# --- a live output gets a LiveText on every path (issue 40, item 33) --------------------------


def live_only_ext(got: list) -> Extension:
    """A reply output and a second one, both live, whose handlers iterate what they get (a str
    there raises TypeError, as the dashboard's chat panel did on a plain-text answer)."""

    @output(type="live:say", live=True, description="say")
    async def say(content: LiveText, ctx) -> None:
        got.append(("say", [t async for t in content][-1]))

    @output(type="live:note", live=True, description="a note")
    async def note(content: LiveText, ctx) -> None:
        got.append(("note", [t async for t in content][-1]))

    chat = Context(type="live:chat", reply_output="live:say")
    return Extension(name="live", contexts=[chat], outputs=[say, note])


@pytest.mark.parametrize(
    ("style", "reply"),
    [
        ("xml", '<response><output type="live:say">tagged words</output></response>'),
        ("xml", "plain words with no tags"),
        ("chat", "plain words in a chat turn"),
    ],
    ids=["xml-tagged", "xml-plain", "chat-plain"],
)
async def test_a_live_output_gets_a_live_text_on_every_text_path(make_hub, config, style, reply) -> None:
    config.model.prompt_style = style
    got: list = []
    async with make_hub(ScriptedModel([reply], chunk=4), live_only_ext(got)) as hub:
        result = await hub.send("live:chat", {"id": "1"}, "hi")
    text = re.sub(r"<[^>]+>", "", reply)
    assert got == [("say", text)]
    (entry,) = result.outputs
    assert entry.sent and entry.error is None and result.state == RunState.COMPLETED


@pytest.mark.parametrize("turn", ["tool-call", "plain-text"])
async def test_a_live_output_gets_a_live_text_in_the_tools_style(make_hub, config, turn) -> None:
    from hub.models.openai import OpenAIModel
    from hub.testing import FakeOpenAI, tool_turn

    config.model.prompt_style, config.model.max_retries = "tools", 0
    got: list = []
    script = [tool_turn(None, ("output_live_note", {"content": "a noted thing"})), "done"]
    if turn == "plain-text":
        script = ["a plain answer"]
    fake = FakeOpenAI(script)
    async with fake, make_hub(OpenAIModel("m", base_url=fake.url, api_key="k"), live_only_ext(got)) as hub:
        result = await hub.send("live:chat", {"id": "1"}, "hi")
    want = [("note", "a noted thing"), ("say", "done")] if turn == "tool-call" else [("say", "a plain answer")]
    assert got == want
    assert all(e.sent and e.error is None for e in result.outputs)
