"""examples/support: one hub on Telegram and Slack; ``[[routes]]`` give each platform its own
persona and its own allow-list of actions."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from hub import Hub, RunState, ScriptedModel
from hub.models import ModelRequest
from hub.testing.slack import FakeSlack
from hub.testing.telegram import FakeTelegram
from tests.examples._examples import example_config


def answers(request: ModelRequest) -> str:
    """The model, as each persona would act: support looks the order up, then answers;
    sales tries a refund (which its route does not allow), then quotes."""
    done = sum(m["role"] == "user" and "action_result" in str(m["content"]) for m in request.messages)
    support = "Sam from support" in request.system
    if support and not done:
        return '<response><action_call name="lookupOrder">{"order_id": "A-1001"}</action_call></response>'
    if support:
        return '<response><output type="telegram:send">Your kettle (A-1001) was delivered.</output></response>'
    if not done:
        return (
            '<response><action_call name="refundOrder">{"order_id": "A-1001"}</action_call>'
            '<action_call name="quotePrice">{"item": "kettle", "quantity": 3}</action_call></response>'
        )
    return '<response><output type="slack:message">3 kettles: 117 euros.</output></response>'


@asynccontextmanager
async def support_hub(tmp_path: Path, model: ScriptedModel) -> AsyncIterator[tuple[Hub, FakeTelegram, FakeSlack]]:
    async with FakeTelegram() as tg, FakeSlack() as sl:
        cfg = example_config(
            "support",
            tmp_path,
            extensions={"telegram": {"base_url": f"{tg.base_url}/bot"}, "slack": {"base_url": sl.api_url}},
        )
        async with Hub(cfg, model=model) as hub:
            await sl.wait_for(lambda: sl.state.connections > 0, timeout=10)  # Socket Mode is up
            yield hub, tg, sl


async def ask(hub: Hub, push: Any) -> tuple[Any, list[Any]]:
    """Push one message and wait for its run to end: the run and its events."""
    async with hub.events(kinds=["run_ended"]) as ended:
        push()
        end = await anext(aiter(ended))
    return await hub.runs.get(end.run_id), await hub.runs.events(end.run_id)


def results(events: list[Any]) -> dict[str, Any]:
    return {e.name: e for e in events if e.kind == "action_result"}


async def test_each_platform_gets_its_routes_persona_and_actions(tmp_path: Path) -> None:
    model = ScriptedModel(answers)
    async with support_hub(tmp_path, model) as (hub, tg, sl):
        run, events = await ask(hub, lambda: tg.push_message(chat_id=42, text="Where is my order A-1001?"))
        assert run.state == RunState.COMPLETED and run.context == "telegram:chat:42"
        assert results(events)["lookupOrder"].error is None
        (sent,) = await tg.wait_sent(1)
        assert sent["text"] == "Your kettle (A-1001) was delivered."

        run, events = await ask(hub, lambda: sl.push_message(sl.state.dm, "Price for 3 kettles? Also refund A-1001."))
        assert run.state == RunState.COMPLETED and run.context.startswith("slack:")
        (slack_sent,) = await sl.wait_sent(1)
        assert slack_sent["text"] == "3 kettles: 117 euros."
    on_telegram, on_slack = model.requests[0], model.requests[2]
    # each route's persona, and only its own actions offered
    assert "Sam from support" in on_telegram.system and "Sally from sales" in on_slack.system
    assert "lookupOrder" in on_telegram.system and "quotePrice" not in on_telegram.system
    assert "quotePrice" in on_slack.system and "refundOrder" not in on_slack.system
    # the sales route's call to refundOrder was refused, and nothing was refunded; its quote ran
    by_name = results(events)
    assert by_name["refundOrder"].error and "unknown" in by_name["refundOrder"].error.lower()
    assert by_name["quotePrice"].error is None and by_name["quotePrice"].data["total"] == 117.0
