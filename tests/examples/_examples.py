"""The examples under ``examples/`` run as a reader runs them: each example's own config.toml,
persona files and modules, loaded by the hub from that folder.

What a test changes, and only that (the quick-start tests do the same): the data folder (a
temporary one), the addresses of the services the example talks to (loopback fakes), the
secrets (from a test environment) and the model (scripted, where the reader has an API key).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from hub import HubConfig
from hub.config import config_from_dict

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

# the secrets each example's config reads from the environment, with values of their shape
ENV = {
    "OPENAI_API_KEY": "sk-example-test",
    "TELEGRAM_BOT_TOKEN": "123456789:AAH-example-test-token",
    "SLACK_BOT_TOKEN": "xoxb-test-token",
    "SLACK_APP_TOKEN": "xapp-test-token",
    "HUB_HTTP_TOKEN": "example-operator-token-0123456789",
}


def merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def example_config(name: str, tmp_path: Path, *, env: dict[str, str] | None = None, **over: Any) -> HubConfig:
    """``examples/NAME/config.toml`` with ``over`` merged in and the data folder in ``tmp_path``.

    The config keeps its own path, so ``module =``, ``contexts_dir`` and MCP servers' ``cwd``
    resolve in the example's folder, as they do for ``hub run --config examples/NAME/config.toml``.
    """
    path = EXAMPLES / name / "config.toml"
    raw = merged(tomllib.loads(path.read_text()), {"hub": {"data_dir": str(tmp_path / "data")}, **over})
    return config_from_dict(raw, path=path, env={**ENV, **(env or {})})
