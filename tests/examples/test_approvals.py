"""examples/approvals: restartService waits for a person; the operator approves over the HTTP
endpoint (``POST /approvals/{id}``) or denies with ``hub approvals deny``, and the action
runs once, or never."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp

from hub import Hub, RunState, ScriptedModel
from hub.testing.telegram import FakeTelegram
from tests._support.processes import hub_cmd
from tests.examples._examples import ENV, example_config

RESTART = '<response><action_call name="restartService">{"service": "api"}</action_call></response>'
AUTH = {"Authorization": f"Bearer {ENV['HUB_HTTP_TOKEN']}"}


def reply(text: str) -> str:
    return f'<response><output type="telegram:send">{text}</output></response>'


def setup(tmp_path: Path, tg: FakeTelegram) -> Any:
    return example_config(
        "approvals",
        tmp_path,
        extensions={"telegram": {"base_url": f"{tg.base_url}/bot"}, "ops": {"journal": str(tmp_path / "restarts.log")}},
        http={"port": 0},
    )


async def test_an_approved_restart_runs_once(tmp_path: Path) -> None:
    async with FakeTelegram() as tg:
        model = ScriptedModel([RESTART, reply("Restarted api.")])
        async with Hub(setup(tmp_path, tg), model=model) as hub, hub.events(kinds=["run_ended"]) as ended:
            tg.push_message(chat_id=7, text="please restart the api")
            (question,) = await tg.wait_sent(1, timeout=30)  # asked in the chat, with buttons
            assert "restartService" in question["text"] and question["params"].get("reply_markup")
            assert not (tmp_path / "restarts.log").exists()  # nothing ran on the model's word alone
            (waiting,) = await hub.approvals.waiting()
            base = f"http://127.0.0.1:{hub.http.port}"
            async with aiohttp.ClientSession(headers=AUTH) as http:
                async with http.post(f"{base}/approvals/{waiting.id}", json={"approve": True}) as r:
                    assert r.status == 200
                end = await anext(aiter(ended))
                async with http.post(f"{base}/approvals/{waiting.id}", json={"approve": True}) as r:
                    assert r.status == 409  # answered already: the action does not run again
            await tg.wait_sent(2, timeout=30)
    assert end.state == RunState.COMPLETED.value
    assert (tmp_path / "restarts.log").read_text().count("restarted api for 7") == 1
    assert tg.sent[-1]["text"] == "Restarted api."


async def test_a_denied_restart_never_runs_and_the_model_is_told(tmp_path: Path) -> None:
    async with FakeTelegram() as tg:
        cfg = setup(tmp_path, tg)
        model = ScriptedModel([RESTART, reply("The restart was refused.")])
        async with Hub(cfg, model=model) as hub, hub.events(kinds=["run_ended"]) as ended:
            tg.push_message(chat_id=7, text="please restart the api")
            await tg.wait_sent(1, timeout=30)
            (waiting,) = await hub.approvals.waiting()
            # the operator's command, run beside the hub on the same data folder, as `hub run` would have it
            config = tmp_path / "config.toml"
            config.write_text(f'[hub]\ndata_dir = "{cfg.hub.data_dir}"\n')
            code, out, err = await hub_cmd("approvals", "deny", waiting.id, "--config", str(config), cwd=tmp_path)
            assert code == 0, err
            end = await anext(aiter(ended))
            events = await hub.runs.events(end.run_id)
    assert not (tmp_path / "restarts.log").exists()
    (result,) = [e for e in events if e.kind == "action_result"]
    assert result.denied and not result.ok
    assert "denied" in str(model.requests[1]).lower()
