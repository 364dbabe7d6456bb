"""POST /runs/{id}/stop: the operator's stop over HTTP, behind the [http] token."""

from __future__ import annotations

import asyncio

import aiohttp

from hub import Hub, HubConfig, ScriptedModel
from hub.config import HttpSection
from tests._support.chat import Said, test_extension

TOKEN = "stop-token-for-tests-012345"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class Hanging(ScriptedModel):
    """Starts an answer and never finishes it; ``entered`` once a run asks it."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = asyncio.Event()

    async def stream(self, request):  # type: ignore[no-untyped-def]
        self.entered.set()
        yield "<response><thinking>"
        await asyncio.Event().wait()


async def test_stop_a_run_over_http(config: HubConfig, said: Said) -> None:
    config.http = HttpSection(port=0, token=TOKEN)
    config.hub.shutdown_grace = 0
    model = Hanging()
    hub = Hub(config, model=model, load_extensions=False, extensions=[test_extension(said)])
    async with hub, aiohttp.ClientSession() as session:
        base = f"http://127.0.0.1:{hub.http.port}"
        sub = await hub.submit("test:chat:1", None, "think forever", user="u1")
        run_id = await sub.run_id
        await model.entered.wait()
        async with session.post(f"{base}/runs/{run_id}/stop") as resp:
            assert resp.status == 401 and "Bearer TOKEN" in (await resp.json())["error"]
        async with session.post(f"{base}/runs/nope/stop", headers=AUTH) as resp:
            assert resp.status == 404 and "no run matches 'nope'" in (await resp.json())["error"]
        async with session.post(f"{base}/runs/{run_id[:8]}/stop", headers=AUTH) as resp:
            body = await resp.json()
            assert resp.status == 200, body
        assert (body["run"]["id"], body["run"]["state"], body["run"]["reason"]) == (
            run_id,
            "killed",
            "stopped by operator",
        )
        result = await sub.wait()
        async with session.post(f"{base}/runs/{run_id}/stop", headers=AUTH) as resp:
            again = await resp.json()
            assert resp.status == 409 and "is not running: it ended killed" in again["error"]
    assert result.reason == "stopped by operator"
    assert [text for _, text in said.items] == ["Sorry, something went wrong on my side. Please try again in a moment."]
