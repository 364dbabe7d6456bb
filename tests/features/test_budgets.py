"""Each limit kills a run with its reason, and the user gets the configured reply."""

from __future__ import annotations

import asyncio

import pytest

from hub import Extension, NoArgs, RunState, action
from hub.store import InMemoryUsageStore
from hub.store.sql import Database, SqlUsageStore

LOOP = '<response><action_call name="tick">{}</action_call></response>'
REPLY = "Limit reached, talk later."


@action(name="tick", description="Does nothing, so the model has to look again.")
async def tick(args: NoArgs, ctx) -> dict:
    return {"ticked": True}


TOOLS = Extension("tools", actions=[tick])


def assert_killed_with_reply(rig, result, reason_prefix: str) -> None:
    assert result.state == RunState.KILLED
    assert result.reason.startswith(reason_prefix), result.reason
    assert rig.out.getvalue().rstrip().endswith(REPLY)
    reply = result.logs[-1]
    assert reply.kind == "output" and reply.sent and reply.content == REPLY


@pytest.fixture(autouse=True)
def _reply(config):
    config.limits.reply = REPLY


async def test_max_steps(make_rig, config):
    config.agent.max_steps = 3
    rig = make_rig(default=LOOP, extensions=[TOOLS])
    async with rig.hub:
        result = await rig.say("loop forever")
    assert_killed_with_reply(rig, result, "max_steps (3)")
    assert result.steps == 3


async def test_max_tokens_per_run(make_rig, config):
    config.agent.max_run_tokens = 400
    rig = make_rig(default=LOOP, extensions=[TOOLS])
    async with rig.hub:
        result = await rig.say("loop forever")
    assert_killed_with_reply(rig, result, "max_tokens (400)")
    assert result.prompt_tokens + result.completion_tokens > 400
    assert result.steps < config.agent.max_steps


async def test_seconds_per_run(make_rig, config):
    config.agent.run_timeout = 0.3
    rig = make_rig(default=LOOP, extensions=[TOOLS], delay=0.2)
    async with rig.hub:
        result = await rig.say("slow")
    assert_killed_with_reply(rig, result, "timeout")
    assert result.duration < 1.5


async def test_conversation_tokens_per_day(make_rig, config):
    config.limits.conversation_tokens_per_day = 600
    rig = make_rig()  # each answer costs about 350 tokens of prompt
    async with rig.hub:
        first = await rig.say("one")
        assert first.ok
        second = await rig.say("two")  # crosses the budget during its step
        assert_killed_with_reply(rig, second, "conversation_tokens_per_day (600)")
        assert second.steps == 1
        asked = len(rig.model.requests)
        third = await rig.say("three")  # spent: killed before any model call
        assert_killed_with_reply(rig, third, "conversation_tokens_per_day (600)")
        assert third.steps == 0 and len(rig.model.requests) == asked
        other = await rig.say("hello", user="bob")  # another conversation has its own budget
        assert other.ok


async def test_user_tokens_per_day_survives_a_restart(make_rig, config):
    config.limits.user_tokens_per_day = 500
    rig = make_rig()
    async with rig.hub:
        assert (await rig.say("one")).ok
        result = await rig.say("two")
        assert_killed_with_reply(rig, result, "user_tokens_per_day (500)")
        assert rig.hub.budgets.used("user:cli:ann") > 500
    rig2 = make_rig()
    async with rig2.hub:
        again = await rig2.say("after a restart")
        assert again.steps == 0 and again.reason == "user_tokens_per_day (500)"
        assert rig2.model.requests == []
        assert (await rig2.say("me too", user="bob")).ok


async def test_linked_identities_share_one_user_budget(make_rig, config):
    """Issue 38: limits apply per person, so linking a second account does not double them."""
    from hub.store import People

    config.limits.user_tokens_per_day = 500
    rig = make_rig()
    async with rig.hub:
        people = People(rig.hub.memory)
        await people.redeem(await people.new_code("cli", "ann"), "cli", "bob")
        assert (await rig.say("one")).ok
        assert_killed_with_reply(rig, await rig.say("two", user="bob"), "user_tokens_per_day (500)")
        assert rig.hub.budgets.used("user:cli:ann") > 500 and rig.hub.budgets.used("user:cli:bob") == 0
        assert (await rig.say("hello", user="carl")).ok
        await people.unlink("cli", "bob")  # on their own again: a budget of their own
        assert (await rig.say("three", user="bob")).ok


async def test_the_reply_can_be_turned_off_and_shutdown_is_not_a_limit(make_rig, config):
    config.agent.max_steps = 1
    config.limits.reply = ""
    rig = make_rig(default=LOOP, extensions=[TOOLS])
    async with rig.hub:
        result = await rig.say("loop")
    assert result.reason == "max_steps (1)"
    assert rig.out.getvalue() == ""


async def test_the_kill_and_the_reply_are_in_the_trace(make_rig, config):
    config.agent.max_steps = 1
    rig = make_rig(default=LOOP, extensions=[TOOLS])
    async with rig.hub:
        result = await rig.say("loop")
        events = await rig.hub.runs.events(result.run_id)
        run = await rig.hub.runs.get(result.run_id)
    assert (run.state, run.reason) == (RunState.KILLED, "max_steps (1)")
    kinds = [e.kind for e in events]
    assert kinds[-2:] == ["state", "output"]
    assert events[-1].content == REPLY and events[-1].sent


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_usage_store_contract(kind, tmp_path):
    db = Database(tmp_path / "hub.db") if kind == "sqlite" else None
    store = SqlUsageStore(db) if db else InMemoryUsageStore()
    await store.open()
    try:
        store.add("user:cli:ann", "2026-01-01", 5)
        store.add("user:cli:ann", "2026-01-01", 7)
        store.add("user:cli:ann", "2026-01-02", 1)
        assert await store.get("user:cli:ann", "2026-01-01") == 12
        assert await store.get("user:cli:ann", "2026-01-02") == 1
        assert await store.get("user:cli:bob", "2026-01-01") == 0
    finally:
        await store.close()
        if db:
            await db.close()


async def test_concurrent_conversations_share_nothing(make_rig, config):
    config.limits.conversation_tokens_per_day = 600
    rig = make_rig()
    async with rig.hub:
        results = await asyncio.gather(*(rig.say("hi", user=f"u{i}") for i in range(5)))
    assert all(r.ok for r in results)


# --- budgets in money ---------------------------------------------------------------------


@pytest.fixture
def priced(config):
    config.model.price_input = 3.0  # per million prompt tokens
    config.model.price_output = 15.0  # per million completion tokens
    return config


async def test_each_step_and_run_costs_what_its_tokens_cost(make_rig, priced):
    rig = make_rig(default=LOOP, extensions=[TOOLS])
    priced.agent.max_steps = 2
    async with rig.hub:
        result = await rig.say("loop twice")
        run = await rig.hub.runs.get(result.run_id)
        steps = [e for e in await rig.hub.runs.events(result.run_id) if e.kind == "step"]
        metric = rig.hub.metrics.registry.get_sample_value("hub_cost_total")
    assert len(steps) == 2
    for s in steps:
        assert s.cost == pytest.approx((s.prompt_tokens * 3.0 + s.completion_tokens * 15.0) / 1e6) and s.cost > 0
    assert run.cost == pytest.approx(sum(s.cost for s in steps))
    assert metric == pytest.approx(run.cost)


async def test_unknown_prices_cost_nothing_and_count_nothing(make_rig, config):
    config.limits.cost_per_day = 0.000001  # set, but the model's prices are unknown (0)
    rig = make_rig()
    async with rig.hub:
        results = [await rig.say("one"), await rig.say("two")]
        runs = [await rig.hub.runs.get(r.run_id) for r in results]
    assert all(r.ok for r in results) and [r.cost for r in runs] == [0.0, 0.0]


@pytest.mark.parametrize(
    ("limit", "scope", "other_user_too"),
    [
        ("conversation_cost_per_day", "conversation:cli:session:ann", False),
        ("user_cost_per_day", "user:cli:ann", False),
        ("cost_per_day", "bot", True),
    ],
)
async def test_a_spent_cost_budget_gets_the_limit_reply_and_costs_no_model_call(
    make_rig, priced, limit, scope, other_user_too
):
    setattr(priced.limits, limit, 0.002)
    rig = make_rig()  # each answer costs about 0.0012 (350 prompt tokens at 3, 11 at 15 per million)
    async with rig.hub:
        assert (await rig.say("one")).ok
        second = await rig.say("two")  # crosses the budget during its step
        assert_killed_with_reply(rig, second, f"{limit} (0.002)")
        assert second.steps == 1
        asked = len(rig.model.requests)
        third = await rig.say("three")  # spent: killed before any model call
        assert_killed_with_reply(rig, third, f"{limit} (0.002)")
        assert third.steps == 0 and len(rig.model.requests) == asked
        other = await rig.say("hello", user="bob")  # another conversation and another user
        assert (other.state == RunState.KILLED) is other_user_too  # the whole bot's budget is everyone's
        assert rig.hub.budgets.spent(scope) > 0.002


async def test_the_bots_cost_budget_survives_a_restart(make_rig, priced):
    priced.limits.cost_per_day = 0.001
    rig = make_rig()
    async with rig.hub:
        assert (await rig.say("one")).reason == "cost_per_day (0.001)"  # spent by its one step
    rig2 = make_rig()
    async with rig2.hub:
        again = await rig2.say("after a restart", user="bob")
    assert again.reason == "cost_per_day (0.001)" and again.steps == 0 and rig2.model.requests == []
