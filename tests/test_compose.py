"""One composition root: features are plugins built with their dependencies, in one order,
and none of them holds the Hub or replaces another's attribute."""

from __future__ import annotations

from typing import Any

from hub import Hub
from hub.engine import Plugin
from hub.http import HttpServer


def test_features_are_plugins_in_one_order_and_none_holds_the_hub(make_rig, config) -> None:
    config.memory.episodes = True
    rig = make_rig()
    hub = rig.hub
    assert [p.name for p in hub.plugins] == [
        "stops",
        "limits",
        "background_spend",
        "failure_reply",
        "roles",
        "approvals",
        "metrics",
        "child_runs",
        "history",
        "episodes",
    ]
    assert all(isinstance(p, Plugin) for p in hub.plugins)
    for attr in (
        "before_run_hooks",
        "after_run_hooks",
        "guards",
        "limit_checks",
        "step_observers",
        "output_observers",
        "ops",
    ):
        assert not hasattr(hub, attr), attr  # the mutable hook lists and ops.py are gone
    for part in (*hub.plugins, *hub.components):
        if isinstance(part, HttpServer):
            continue  # hub/http/_server.py still takes the hub in start(hub)
        held = [name for name, value in _fields(part) if isinstance(value, Hub)]
        assert not held, f"{type(part).__name__} holds the hub in {held}"
    assert hub.runs is hub.features.budgets.runs  # the store it was built with is the hub's, not swapped later


def _fields(obj: Any) -> list[tuple[str, Any]]:
    names = list(getattr(obj, "__dict__", {}))
    for cls in type(obj).__mro__:
        names += [s for s in getattr(cls, "__slots__", ()) if hasattr(obj, s)]
    return [(n, getattr(obj, n)) for n in names]


async def test_every_plugin_sees_the_step_that_spent_a_budget(make_rig, config) -> None:
    config.limits.conversation_tokens_per_day = 600
    rig = make_rig()
    registry = rig.hub.metrics.registry
    async with rig.hub:
        assert (await rig.say("one")).ok
        second = await rig.say("two")  # the budget plugin (first) stops the run after this step
    assert second.reason == "conversation_tokens_per_day (600)"
    steps = registry.get_sample_value("hub_run_steps_total", {"context_type": "cli:session"})
    assert steps == 2  # the metrics plugin (after it) still counted that step
