"""Two workers sharing one store (two hubs on one data dir): one syncs, the holder of the
lease ``matrix:sync:<user id>``; when it stops, the other takes the sync over from the kept
token, and nothing is answered twice."""

from __future__ import annotations

from pathlib import Path

from matrix_harness import ANN

from hub import Hub, ScriptedModel
from hub.testing import temp_config
from hub.testing.matrix import BOT, FakeMatrix
from hub_matrix import MatrixSettings, extension


def worker(tmp_path: Path, hs: FakeMatrix, token: str, name: str) -> Hub:
    cfg = temp_config(tmp_path)  # the workers share tmp_path's store
    cfg.hub.shutdown_grace = 1.0
    settings = MatrixSettings(homeserver=hs.base_url, user_id=BOT, access_token=token, lease_ttl=3, sync_timeout=1)
    model = ScriptedModel(lambda request: f'<response><output type="matrix:message">{name}</output></response>')
    return Hub(cfg, model=model, load_extensions=False, extensions=[extension(settings)])


async def test_one_worker_syncs_and_the_other_takes_over_when_it_stops(tmp_path: Path) -> None:
    async with FakeMatrix() as hs:
        room = hs.create_room([ANN])
        token = hs.token()
        a, b = worker(tmp_path, hs, token, "a"), worker(tmp_path, hs, token, "b")
        await a.start()
        try:
            await hs.wait_for(lambda: len(hs.state.syncs) >= 2)  # a holds the lease and syncs
            await b.start()
            hs.push_text(room, ANN, "first")
            await hs.wait_sent(1)
            assert hs.texts(room) == ["a"]
        finally:
            await a.stop()
        kept = await b.memory.get("matrix:next_batch:" + BOT)
        syncs = len(hs.state.syncs)
        try:
            await hs.wait_for(lambda: len(hs.state.syncs) > syncs, timeout=15)  # b took the lease over
            assert hs.state.syncs[syncs] is not None, "b resumes from the kept token, not from scratch"
            assert int(hs.state.syncs[syncs][1:]) >= int(kept[1:])
            hs.push_text(room, ANN, "second")
            await hs.wait_sent(2, timeout=15)
        finally:
            await b.stop()
        assert hs.texts(room) == ["a", "b"], "each message answered once, by the worker that synced it"
