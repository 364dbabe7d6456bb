"""What a started hub holds before its first turn: the shipped config.toml (terminal chat,
SQLite, episodic memory) imports no library that only a feature in use needs. Each of them
is imported when that feature is first used (issue 41: resident memory before the first
turn under 75 MB)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Imported on first use: the vector maths and the embedder (numpy, onnxruntime), Chroma, the
#: dashboard's templates, Markdown fences, pictures, MCP, and the openai SDK (the chat
#: stream does not use it; its exceptions are built on the first error).
LAZY = ("numpy", "onnxruntime", "chromadb", "jinja2", "markdown_it", "PIL", "mcp", "openai", "httpx2", "httpx")

PROBE = """
import asyncio, json, sys
from hub import Hub
from hub.config import load_config

async def main():
    hub = Hub(load_config("config.toml"), load_extensions=False)
    async with hub:
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in LAZY)
    print(json.dumps(loaded))

LAZY = set(json.loads(sys.argv[1]))
asyncio.run(main())
"""


def test_a_started_hub_has_imported_no_feature_library(tmp_path: Path) -> None:
    shutil.copy(ROOT / "config.toml", tmp_path)
    shutil.copytree(ROOT / "contexts", tmp_path / "contexts")
    env = {**os.environ, "OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "x"}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(LAZY)], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


FIRST_ERROR = """
import asyncio, json, sys, threading
from hub import ModelError, ModelRequest
from hub.models.openai import OpenAIModel
from hub.testing import FakeOpenAI

where = []
def hook(event, args):
    if event == "import" and args[0] == "openai":
        where.append(threading.current_thread() is threading.main_thread())
sys.addaudithook(hook)

async def main():
    async with FakeOpenAI(["never"]) as fake:
        fake.fail_next("chat", status=503, retry_after=None)
        model = OpenAIModel("m", base_url=fake.url, api_key="k")
        try:
            async for _ in model.stream(ModelRequest(system="s", messages=[])):
                pass
        except ModelError as e:
            kind = type(e.__cause__).__name__
        await model.close()
    print(json.dumps({"kind": kind, "on_the_loop": where}))

asyncio.run(main())
"""


def test_the_sdk_is_imported_off_the_loop_on_the_first_error() -> None:
    # the chat stream does not import the openai SDK; the first error does, in a worker
    # thread, so the other conversations' streams go on while it loads
    out = subprocess.run([sys.executable, "-c", FIRST_ERROR], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"kind": "InternalServerError", "on_the_loop": [False]}


#: The platforms' fakes in hub.testing, each imported by name, and the client libraries of the
#: platforms they fake (a fake serves the wire format; only what measures text loads one, when used).
FAKES = ("telegram", "discord", "slack", "matrix", "twitter", "whatsapp", "signal", "email", "mastodon", "bluesky")
CLIENTS = ("telegram", "discord", "slack_sdk", "slack_bolt", "nio", "tweepy", "twitter_text", "pywa_async", "grapheme")

FAKES_PROBE = """
import importlib, json, sys
FAKES, CLIENTS = json.loads(sys.argv[1]), set(json.loads(sys.argv[2]))
import hub.testing
loaded = {"hub.testing": sorted(m for m in sys.modules if m.startswith("hub.testing.") and m.split(".")[2] in FAKES)}
for name in FAKES:
    importlib.import_module(f"hub.testing.{name}")
    loaded[name] = sorted(m for m in sys.modules if m.split(".")[0] in CLIENTS)
print(json.dumps(loaded))
"""


def test_hub_testing_loads_no_platform_fake_and_a_fake_no_client_library() -> None:
    out = subprocess.run(
        [sys.executable, "-c", FAKES_PROBE, json.dumps(FAKES), json.dumps(CLIENTS)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"hub.testing": [], **{name: [] for name in FAKES}}
