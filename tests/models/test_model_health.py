"""`hub health` names a model that is not answering (its circuit open, its keys refused),
from /healthz with the token and from the heartbeat file, and stays healthy: a fallback
answers meanwhile, and restarting the hub would not bring the provider back."""

from __future__ import annotations

import asyncio
from pathlib import Path

from hub import Hub, ScriptedModel, load_config
from hub.cli import HEARTBEAT, main
from hub.testing import closed_port

TOKEN = "model-health-token-0123456789"


class DownPrimary(ScriptedModel):
    """A model whose primary is reported down, as a FailoverModel reports it."""

    def problems(self) -> dict[str, str]:
        return {"model": "circuit open, tried again in 42s"}


async def wait_for_file(path: Path) -> None:
    async with asyncio.timeout(5):
        while not path.exists():
            await asyncio.sleep(0.01)


def test_hub_health_names_a_model_not_answering_and_stays_healthy(tmp_path: Path, capsys) -> None:
    port = closed_port()
    with_http = tmp_path / "http.toml"
    with_http.write_text(
        f'[hub]\ndata_dir = "data"\n[memory]\nepisodes = false\n[http]\nport = {port}\ntoken = "{TOKEN}"\n'
    )
    beat_only = tmp_path / "beat.toml"
    beat_only.write_text('[hub]\ndata_dir = "data"\n[memory]\nepisodes = false\n')

    async def run() -> None:
        config = load_config(with_http)
        hub = Hub(config, model=DownPrimary([]), load_extensions=False, heartbeat=config.data_dir / HEARTBEAT)
        async with hub:
            await wait_for_file(config.data_dir / HEARTBEAT)
            assert await asyncio.to_thread(main, ["health", "--config", str(with_http)]) == 0
            err = capsys.readouterr().err
            assert "warning: model model: circuit open, tried again in 42s" in err
            # no [http]: the heartbeat file says it
            assert await asyncio.to_thread(main, ["health", "--config", str(beat_only)]) == 0
            assert "warning: model model: circuit open" in capsys.readouterr().err

    asyncio.run(run())
