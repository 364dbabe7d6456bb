"""Slack across workers: one Socket Mode connection, held by the worker that holds the lease
``slack:socket:<bot user id>``; when that worker stops, another connects. Two hubs on one
data dir are two workers sharing one store."""

from __future__ import annotations

from pathlib import Path

from test_slack import settings_for

from hub import Hub, ScriptedModel
from hub.testing import temp_config
from hub.testing.slack import FakeSlack
from hub_slack import extension


def worker(tmp_path: Path, sl: FakeSlack, name: str) -> Hub:
    cfg = temp_config(tmp_path)  # the workers share tmp_path's store
    cfg.hub.shutdown_grace = 1.0
    model = ScriptedModel(lambda request: f'<response><output type="slack:message">{name}</output></response>')
    ext = extension(settings_for(sl, lease_ttl=2))
    return Hub(cfg, model=model, load_extensions=False, extensions=[ext])


def live(sl: FakeSlack) -> int:
    return sum(not ws.closed for ws in sl._sockets)


async def test_one_worker_holds_the_socket_and_another_takes_over_when_it_stops(tmp_path: Path) -> None:
    async with FakeSlack() as sl:
        st = sl.state
        one, two = worker(tmp_path, sl, "one"), worker(tmp_path, sl, "two")
        async with one, two:
            await sl.wait_for(lambda: st.connections == 1, timeout=10)
            holder = await one.leases.holder(f"slack:socket:{st.bot_user}")
            assert holder is not None and holder.holder in (one.worker, two.worker)
            first, second = (one, two) if holder.holder == one.worker else (two, one)
            sl.push_message(st.dm, "who answers?")
            (sent,) = await sl.wait_sent(1)
            assert sent["text"] == ("one" if first is one else "two")
            assert live(sl) == 1 and st.connections == 1
            await first.__aexit__(None, None, None)  # the holder stops: its lease is released
            await sl.wait_for(lambda: st.connections == 2, timeout=10)
            now = await second.leases.holder(f"slack:socket:{st.bot_user}")
            assert now is not None and now.holder == second.worker
            sl.push_message(st.dm, "and now?")
            await sl.wait_sent(2)
            assert sl.sent[1]["text"] == ("one" if second is one else "two")
            assert live(sl) == 1
