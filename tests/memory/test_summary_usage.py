"""An episode summary is a model call like a run's step: its tokens and cost count in the
daily budgets, the usage store and the token metrics (issue 40, item 20)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

import hub_cli
from hub import Hub, HubConfig, ScriptedModel
from hub.features import utc_day
from hub.logs import StepLog
from hub.memory import HashEmbedder, InMemoryVectorStore
from hub_cli import CliSettings

SUMMARY = "Ann said hello and was greeted back."


def metric(hub: Hub, name: str, **labels: str) -> float:
    text = hub.metrics.render()[0].decode()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    raise KeyError(name)


async def test_an_episode_summary_is_counted_like_a_step(tmp_path: Path) -> None:
    summaries: list[Any] = []

    def reply(request: Any) -> str:
        if request.metadata.get("purpose") == "episode-summary":
            summaries.append(request)
            return SUMMARY
        return "<response><output>Hello, Ann!</output></response>"

    cfg = HubConfig()
    cfg.hub.data_dir = str(tmp_path)
    cfg.hub.contexts_dir = str(tmp_path)
    cfg.memory.summarize = True
    cfg.model.price_input, cfg.model.price_output = 1.0, 2.0  # per million tokens
    cfg.limits.conversation_tokens_per_day = 1_000_000
    cfg.limits.cost_per_day = 100.0
    cli = hub_cli.extension(CliSettings(stdin=False), out=io.StringIO())
    hub = Hub(cfg, model=ScriptedModel(reply), load_extensions=False, extensions=[cli])
    assert hub.episodes is not None
    hub.episodes.store = InMemoryVectorStore(HashEmbedder())
    async with hub:
        result = await hub.send("cli:session", {"user": "ann"}, "hello", user="ann")
        await hub.episodes.flush()
        assert summaries and (await hub.episodes.episodes())[0].summary == SUMMARY
        steps = [e for e in result.logs if isinstance(e, StepLog)]
        run_tokens = sum(s.prompt_tokens + s.completion_tokens for s in steps)
        run_cost = sum(s.cost for s in steps)
        await hub.runs.sync()
        day = utc_day()
        counted = await hub.stores.usage.get("conversation:cli:session:ann", day)
        spent = await hub.stores.usage.cost("bot", day)
        tokens = metric(hub, "hub_tokens_total", kind="prompt") + metric(hub, "hub_tokens_total", kind="completion")
        cost = metric(hub, "hub_cost_total")
    assert run_tokens > 0 and counted > run_tokens, "the summary's tokens are not in the conversation's budget"
    assert tokens == counted, "the token metrics and the budget disagree"
    assert spent > run_cost and abs(cost - spent) < 1e-9, "the summary's cost is not counted"
