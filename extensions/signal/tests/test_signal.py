"""The Signal extension against the loopback fake of signal-cli-rest-api
(``hub.testing.signal.FakeSignal``): a real websocket for receiving and real HTTP for
everything the bot sends; only the model is scripted. Negative cases ("this message is not
answered") are proven with a sentinel: the intake takes frames one at a time, in order, so
once a later message is answered the earlier one was decided.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from hub import Extension, ExtensionFailed, Hub, HubConfig, OutputLog, ScriptedModel
from hub.engine import Plugin
from hub.models import Model
from hub.testing import temp_config
from hub.testing.signal import NUMBER, USER, USER_UUID, FakeSignal
from hub_signal import SignalSettings, extension


def answer(text: str, **attrs: str) -> str:
    extra = "".join(f' {k}="{v}"' for k, v in attrs.items())
    return f'<response><output type="signal:message"{extra}>{text}</output></response>'


class Running:
    """A started hub with the Signal extension, its fake, and what its outputs did."""

    def __init__(self, hub: Hub, sig: FakeSignal, model: Any) -> None:
        self.hub = hub
        self.sig = sig
        self.model = model
        self.outputs: list[OutputLog] = []
        outputs = self.outputs

        class Observe(Plugin):
            def on_output(self, run: Any, out: OutputLog) -> None:
                outputs.append(out)

        hub.plugins.add(Observe())

    async def say(self, text: str | None = None, **kw: Any) -> int:
        """A user's message written to the websocket; returns its timestamp."""
        frame, stamp = self.sig.message(text, **kw)
        assert await self.sig.deliver(frame) == 1
        return stamp

    async def wait_outputs(self, n: int, timeout: float = 5) -> list[OutputLog]:
        deadline = time.monotonic() + timeout
        while len(self.outputs) < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(self.outputs)} of {n} outputs: {self.outputs!r}")
            await asyncio.sleep(0.01)
        return self.outputs


def settings_for(sig: FakeSignal, **settings: Any) -> SignalSettings:
    settings.setdefault("number", NUMBER)
    return SignalSettings(url=sig.base_url, **settings)


@contextlib.asynccontextmanager
async def running(
    tmp_path: Path,
    responses: Any = (),
    *,
    sig: FakeSignal | None = None,
    default: str | None = answer("pong"),
    model: Model | None = None,
    config: HubConfig | None = None,
    extensions: Sequence[Extension] = (),
    inbox: Any = None,
    **settings: Any,
) -> AsyncIterator[Running]:
    """A started hub with the Signal extension against ``sig`` (default: a fresh fake), its
    websocket connected; answered by ``model`` (default: a ScriptedModel of ``responses``,
    then ``default``); ``settings`` go to SignalSettings."""
    async with contextlib.AsyncExitStack() as stack:
        if sig is None:
            sig = await stack.enter_async_context(FakeSignal())
        cfg = config or temp_config(tmp_path)
        cfg.hub.shutdown_grace = 1.0
        model = model or ScriptedModel(responses, default=default)
        ext = extension(settings_for(sig, **settings))
        hub = Hub(cfg, model=model, load_extensions=False, extensions=[ext, *extensions], inbox=inbox)
        async with hub:
            await sig.wait_connected()
            yield Running(hub, sig, model)


# --- in and out ---------------------------------------------------------------------------


async def test_a_direct_message_is_answered_after_a_read_receipt_and_typing(tmp_path: Path) -> None:
    async with running(tmp_path, [answer("hello **there**")]) as r:
        stamp = await r.say("hi bot")
        (sent,) = await r.sig.wait_sent(1)
        assert sent["to"] == USER and sent["text"] == "hello **there**" and sent["text_mode"] == "styled"
        assert "quote" not in sent  # direct chats are not quoted by default
        (out,) = await r.wait_outputs(1)
        assert out.sent and out.data["timestamps"] == [sent["timestamp"]]
        assert "hi bot" in str(r.model.requests[0].messages[-1]["content"])
        runs = await r.hub.runs.list(limit=5)
        assert [run.context for run in runs] == [f"signal:chat:{USER}"]
        await r.sig.wait_for(lambda: bool(r.sig.state.receipts))
        assert r.sig.state.receipts == [{"receipt_type": "read", "recipient": USER, "timestamp": stamp}]
        assert r.sig.state.typing and r.sig.state.typing[0] == USER


async def test_a_user_who_hides_their_number_is_known_and_answered_by_their_uuid(tmp_path: Path) -> None:
    async with running(tmp_path) as r:
        stamp = await r.say("hello", frm=None)
        (sent,) = await r.sig.wait_sent(1)
        assert sent["to"] == USER_UUID
        assert await r.hub.received(f"signal:{USER_UUID}:{stamp}")


async def test_a_long_answer_is_split_at_2000_characters_in_order(tmp_path: Path) -> None:
    long = " ".join(f"word{i}" for i in range(900))  # 7,789 characters: four messages
    async with running(tmp_path, [answer(long)]) as r:
        await r.say("tell me everything")
        (out,) = await r.wait_outputs(1)
        parts = [s["text"] for s in r.sig.sent]
        assert len(parts) == 4 and all(len(p) <= 2000 for p in parts)
        assert " ".join(parts) == long
        assert [p["index"] for p in out.parts] == [0, 1, 2, 3]


async def test_a_redelivered_message_is_not_answered_twice(tmp_path: Path) -> None:
    async with running(tmp_path) as r:
        frame, stamp = r.sig.message("once only")
        assert await r.sig.deliver(frame) == 1
        await r.sig.wait_sent(1)
        assert await r.sig.deliver(frame) == 1  # signal-cli delivered it again (same author, same timestamp)
        await r.say("a sentinel")
        await r.sig.wait_sent(2)
        assert len(r.sig.sent) == 2 and len(r.model.requests) == 2
        assert [x["timestamp"] for x in r.sig.state.receipts].count(stamp) == 1  # one receipt for it too


async def test_receipts_typing_and_calls_are_not_messages(tmp_path: Path) -> None:
    async with running(tmp_path) as r:
        await r.sig.deliver(r.sig.receipt(123))
        frame, _ = r.sig.message(None)
        frame["envelope"].pop("dataMessage")
        frame["envelope"]["typingMessage"] = {"action": "STARTED", "timestamp": 1}
        await r.sig.deliver(frame)
        own, _ = r.sig.message(
            "sent from the bot's own phone", frm=NUMBER, uuid_="0b6e3a4c-1d2f-4a5b-8c9d-0e1f2a3b4c5d"
        )
        await r.sig.deliver(own)
        await r.say("a sentinel")
        await r.sig.wait_sent(1)
        assert len(r.model.requests) == 1 and "a sentinel" in str(r.model.requests[0].messages[-1]["content"])


async def test_the_websocket_reconnects_after_the_api_drops_it(tmp_path: Path) -> None:
    async with running(tmp_path, reconnect_max=0.2) as r:
        await r.sig.drop_connections()
        await r.sig.wait_connected(2)
        await r.say("after the reconnect")
        (sent,) = await r.sig.wait_sent(1)
        assert sent["text"] == "pong"


async def test_the_api_restarted_while_the_hub_runs_is_reconnected_to(tmp_path: Path) -> None:
    async with FakeSignal() as sig:
        port = sig.port
        async with running(tmp_path, sig=sig, reconnect_max=0.2) as r:
            await sig.stop()  # the container goes away: the socket drops, reconnects are refused
            sig.port = port
            await sig.start()
            await sig.wait_connected(2, timeout=10)
            await r.say("are you back?")
            await sig.wait_sent(1)


async def test_a_start_against_an_api_not_in_json_rpc_mode_says_what_to_set(tmp_path: Path) -> None:
    async with FakeSignal(mode="normal") as sig:
        with pytest.raises(ExtensionFailed, match="MODE=json-rpc"):
            async with running(tmp_path, sig=sig):
                pass


async def test_a_start_with_a_number_the_api_does_not_have_says_to_register_it(tmp_path: Path) -> None:
    async with FakeSignal() as sig:
        with pytest.raises(ExtensionFailed, match=r"\+15559990000 is not registered or linked"):
            async with running(tmp_path, sig=sig, number="+15559990000"):
                pass


async def test_a_token_is_sent_to_a_guarding_proxy_and_never_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    token = "proxy-token-0123456789abcdef"
    caplog.set_level(logging.DEBUG)
    async with FakeSignal(token=token) as sig, running(tmp_path, sig=sig, token=token) as r:
        sig.fail_next("send", status=429, retry_after=0)
        await r.say("hi")
        await r.sig.wait_sent(1)
    assert all(req.headers.get("Authorization") == f"Bearer {token}" for req in sig.requests)
    assert "rate limited by Signal" in caplog.text  # the log was on
    assert token not in caplog.text


async def test_a_wrong_token_stops_the_start_with_one_line(tmp_path: Path) -> None:
    async with FakeSignal(token="proxy-token-0123456789abcdef") as sig:
        with pytest.raises(ExtensionFailed, match="refused the token"):
            async with running(tmp_path, sig=sig, token="another-token-0123456789"):
                pass
