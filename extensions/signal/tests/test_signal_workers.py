"""Two workers sharing one store (two hubs on one data dir): only the holder of the lease
``signal:receive:<number>`` connects to the websocket (the API writes every frame to every
socket, so two would take each message twice); when it stops, the other connects, and each
message is answered once, by the worker that received it."""

from __future__ import annotations

from pathlib import Path

from hub import Hub, ScriptedModel
from hub.testing import temp_config
from hub.testing.signal import NUMBER, FakeSignal
from hub_signal import SignalSettings, extension


def worker(tmp_path: Path, sig: FakeSignal, name: str) -> Hub:
    cfg = temp_config(tmp_path)  # the workers share tmp_path's store
    cfg.hub.shutdown_grace = 1.0
    settings = SignalSettings(url=sig.base_url, number=NUMBER, lease_ttl=2, typing=False)
    model = ScriptedModel(lambda request: f'<response><output type="signal:message">{name}</output></response>')
    return Hub(cfg, model=model, load_extensions=False, extensions=[extension(settings)])


async def test_one_worker_receives_and_the_other_takes_over_when_it_stops(tmp_path: Path) -> None:
    async with FakeSignal() as sig:
        a, b = worker(tmp_path, sig, "a"), worker(tmp_path, sig, "b")
        await a.start()
        try:
            await sig.wait_connected(1)
            await b.start()
            frame, _ = sig.message("first")
            assert await sig.deliver(frame) == 1  # one socket: a's
            await sig.wait_sent(1)
        finally:
            await a.stop()
        try:
            await sig.wait_connected(2, timeout=15)  # b took the lease over
            assert sig.connected == 1
            second, _ = sig.message("second", frm="+15550002222", uuid_="9f1d2c3b-0000-4000-8000-00000000000e")
            assert await sig.deliver(second) == 1
            await sig.wait_sent(2, timeout=15)
        finally:
            await b.stop()
        assert [s["text"] for s in sig.sent] == ["a", "b"]
