"""The public API extensions live on: Hub.create_task and Hub.received, and the pieces of
hub.platform every platform shares (typing indicator, reply target, settings base)."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import ValidationError

import hub
from hub import InputLog, OutputLog
from hub.platform import PlatformSettings, TypingIndicator, reply_target


async def test_create_task_logs_errors_and_is_cancelled_on_stop(make_hub, caplog: pytest.LogCaptureFixture) -> None:
    h = make_hub()
    started = asyncio.Event()
    async with h:

        async def fails() -> None:
            raise RuntimeError("listener broke")

        async def forever() -> None:
            started.set()
            await asyncio.Event().wait()

        with caplog.at_level(logging.ERROR):
            failed = h.create_task(fails(), name="ext:fails")
            await asyncio.gather(failed, return_exceptions=True)
            await asyncio.sleep(0)  # the done callback runs on the next loop turn
        assert any("ext:fails" in r.getMessage() and r.exc_info for r in caplog.records)
        long = h.create_task(forever(), name="ext:forever")
        await started.wait()
        assert not long.done()
    assert long.cancelled()  # stopped with the hub, never left behind


async def test_received_tells_a_redelivery(make_hub) -> None:
    async with make_hub(['<response><output type="cli:message">hi</output></response>']) as h:
        assert not await h.received("x:1")
        await h.send("cli:session", {"user": "ann"}, "hello", platform_id="x:1")
        assert await h.received("x:1")
        assert await h.send("cli:session", {"user": "ann"}, "hello", platform_id="x:1") is None


def test_submission_is_public() -> None:
    assert "Submission" in hub.__all__ and hub.Submission.__module__ == "hub.engine._runner"


# -- typing ----------------------------------------------------------------------------------


async def test_typing_repeats_until_every_run_in_the_chat_is_done() -> None:
    shown: list[Any] = []
    tasks: set[asyncio.Task[Any]] = set()
    third = asyncio.Event()

    async def show(chat: Any) -> None:
        shown.append(chat)
        if len(shown) == 3:
            third.set()

    def create_task(coro: Any, *, name: str) -> asyncio.Task[Any]:
        t = asyncio.get_running_loop().create_task(coro, name=name)
        tasks.add(t)
        return t

    typing = TypingIndicator("test", show, create_task=create_task, interval=0.01)
    loop = asyncio.get_running_loop()
    first, second = loop.create_future(), loop.create_future()
    typing.watch(7, first)
    typing.watch(7, second)  # one task per chat
    assert len(tasks) == 1 and typing.chats == [7]
    await asyncio.wait_for(third.wait(), 2)
    first.set_result(None)
    assert typing.chats == [7]  # the second run still goes on
    second.set_result(None)
    await asyncio.wait_for(asyncio.gather(*tasks), 2)
    assert typing.chats == [] and set(shown) == {7}
    await typing.stop()


async def test_a_failing_indicator_ends_quietly_and_stop_cancels() -> None:
    async def refuse(chat: Any) -> None:
        raise PermissionError("no permission to type here")

    async def hang(chat: Any) -> None:
        await asyncio.Event().wait()

    def create_task(coro: Any, *, name: str) -> asyncio.Task[Any]:
        return asyncio.get_running_loop().create_task(coro, name=name)

    loop = asyncio.get_running_loop()
    failing = TypingIndicator("test", refuse, create_task=create_task)
    run = loop.create_future()
    failing.watch(1, run)
    task = next(iter(failing._tasks.values()))
    await asyncio.wait_for(task, 2)  # ended, did not raise
    assert not run.done() and failing.chats == []

    hanging = TypingIndicator("test", hang, create_task=create_task)
    hanging.watch(2, loop.create_future())
    task = next(iter(hanging._tasks.values()))
    await hanging.stop()
    assert task.cancelled() and hanging.chats == []


# -- reply target ----------------------------------------------------------------------------


def _ctx(inputs: list[InputLog], logs: list[Any] = ()) -> Any:
    return SimpleNamespace(inputs=inputs, logs=list(logs))


def test_reply_target_is_the_newest_matching_input() -> None:
    a = InputLog(type="t", content="a", meta={"message_id": 1, "chat_id": 5})
    b = InputLog(type="t", content="b", meta={"message_id": 2, "chat_id": "6"})
    c = InputLog(type="t", content="scheduled", meta={})
    ctx = _ctx([a, b, c])
    assert reply_target(ctx, "message_id")["message_id"] == 2
    assert reply_target(ctx, "message_id", where={"chat_id": 6})["message_id"] == 2  # ids as str or int
    assert reply_target(ctx, "message_id", where={"chat_id": "5"})["message_id"] == 1
    assert reply_target(ctx, "message_id", where={"chat_id": 9}) is None
    assert reply_target(_ctx([c]), "message_id") is None


def test_reply_target_once_for_an_output() -> None:
    a = InputLog(type="t", content="a", meta={"message_id": 1})
    replied = OutputLog(type="x:send", content="hi", sent=True, data={"reply_to": "1"})
    failed = OutputLog(type="x:send", content="hi", sent=False, data={"reply_to": "1"})
    other = OutputLog(type="y:send", content="hi", sent=True, data={"reply_to": "1"})
    assert reply_target(_ctx([a], [replied]), "message_id", once_for="x:send") is None
    assert reply_target(_ctx([a], [failed, other]), "message_id", once_for="x:send")["message_id"] == 1
    assert reply_target(_ctx([a], [replied]), "message_id")["message_id"] == 1


# -- settings --------------------------------------------------------------------------------


class _Acme(PlatformSettings):
    token: str = "t"


def test_platform_settings_declare_the_shared_keys_once() -> None:
    s = _Acme()
    assert (s.send_attempts, s.send_max_wait, s.loop_guard_turns, s.loop_guard_window, s.allowed_users) == (
        5,
        120.0,
        3,
        600.0,
        [],
    )
    guard = s.loop_guard()
    assert guard is not None and guard.max_turns == 3 and guard.window == 600.0
    assert _Acme(loop_guard_turns=0).loop_guard() is None
    with pytest.raises(ValidationError, match="colour"):
        _Acme(colour="red")
    with pytest.raises(ValidationError, match="send_attempts"):
        _Acme(send_attempts=0)


def test_every_platform_shares_the_base() -> None:
    from hub_discord import DiscordSettings
    from hub_matrix import MatrixSettings
    from hub_slack import SlackSettings
    from hub_telegram import TelegramSettings
    from hub_twitter import TwitterSettings

    for cls in (DiscordSettings, TelegramSettings, TwitterSettings, MatrixSettings, SlackSettings):
        assert issubclass(cls, PlatformSettings)
        for key in ("send_attempts", "send_max_wait", "loop_guard_turns", "loop_guard_window", "allowed_users"):
            assert cls.model_fields[key] is PlatformSettings.model_fields[key] or (
                cls.model_fields[key].default == PlatformSettings.model_fields[key].default
                and cls.model_fields[key].default_factory == PlatformSettings.model_fields[key].default_factory
            ), (cls.__name__, key)
            assert key not in cls.__dict__.get("__annotations__", {}), f"{cls.__name__} declares {key} again"
