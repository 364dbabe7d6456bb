"""Each Signal message is answered once, under any interleaving of new messages, signal-cli's
redeliveries of earlier ones (the same author and timestamp, the same frame or the user's
number hidden in it) and the API dropping the websocket, on every inbox backend (in memory,
SQLite, PostgreSQL): the inbox's platform id (``signal:<author>:<timestamp>``) holds it.

Each step settles before the next: a redelivery is followed by a new message from another
user, and the intake takes frames in order, so once that one is answered the redelivery was
decided."""

from __future__ import annotations

import asyncio
import copy
import tempfile
import uuid
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from hub import Hub, ScriptedModel
from hub.store import InMemoryInbox
from hub.testing import temp_config
from hub.testing.postgres import temporary_schema
from hub.testing.signal import NUMBER, FakeSignal
from hub_signal import SignalSettings, extension

ANSWER = '<response><output type="signal:message">pong</output></response>'


def machine(backend: str) -> type[RuleBasedStateMachine]:
    class Deliveries(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.loop = asyncio.new_event_loop()
            self.stack = AsyncExitStack()
            self.tmp = tempfile.TemporaryDirectory()
            self.frames: list[dict[str, Any]] = []  # every distinct message delivered, by user
            self.users = 0
            self.sig: FakeSignal = self.run(self._open())

        def run(self, coro: Any) -> Any:
            return self.loop.run_until_complete(asyncio.wait_for(coro, 30))

        async def _open(self) -> FakeSignal:
            sig = await self.stack.enter_async_context(FakeSignal())
            cfg = temp_config(Path(self.tmp.name))
            cfg.hub.shutdown_grace = 0.5
            kw: dict[str, Any] = {}
            if backend == "memory":
                kw["inbox"] = InMemoryInbox()
            elif backend == "postgres":
                cfg.store.url = await self.stack.enter_async_context(temporary_schema())
            settings_ = SignalSettings(url=sig.base_url, number=NUMBER, typing=False, reconnect_max=0.1)
            model = ScriptedModel([], default=ANSWER)
            hub = Hub(cfg, model=model, load_extensions=False, extensions=[extension(settings_)], **kw)
            await self.stack.enter_async_context(hub)
            await sig.wait_connected()
            return sig

        async def _new(self) -> dict[str, Any]:
            self.users += 1
            user = f"+1555{self.users:07d}"
            frame, _ = self.sig.message(f"message {self.users}", frm=user, uuid_=str(uuid.uuid4()))
            self.frames.append(frame)
            assert await self.sig.deliver(frame) == 1
            await self.sig.wait_for(lambda: any(s["to"] == user for s in self.sig.sent), timeout=10)
            return frame

        @rule()
        def a_new_message(self) -> None:
            self.run(self._new())

        @precondition(lambda self: bool(self.frames))
        @rule(which=st.integers(min_value=0), hide_number=st.booleans())
        def a_redelivery(self, which: int, hide_number: bool) -> None:
            frame = copy.deepcopy(self.frames[which % len(self.frames)])
            if hide_number:  # the same author, known by UUID alone this time
                frame["envelope"].update(sourceNumber=None, source=frame["envelope"]["sourceUuid"])

            async def again() -> None:
                assert await self.sig.deliver(frame) == 1
                await self._new()  # the sentinel: the redelivery was decided before it

            self.run(again())

        @rule()
        def the_api_drops_the_websocket(self) -> None:
            async def drop() -> None:
                before = self.sig.state.connections
                await self.sig.drop_connections()
                await self.sig.wait_connected(before + 1, timeout=10)

            self.run(drop())

        @invariant()
        def each_message_is_answered_once(self) -> None:
            answered = [s["to"] for s in self.sig.sent]
            assert sorted(answered) == sorted(f["envelope"]["sourceNumber"] for f in self.frames), answered

        def teardown(self) -> None:
            self.run(self.stack.aclose())
            self.loop.close()
            self.tmp.cleanup()

    return Deliveries


@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres"])
def test_each_message_is_answered_once_under_generated_deliveries(backend: str) -> None:
    cls = machine(backend)
    cls.TestCase.settings = settings(
        max_examples={"memory": 4, "sqlite": 4, "postgres": 2}[backend],
        stateful_step_count=6,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    cls.TestCase().runTest()
