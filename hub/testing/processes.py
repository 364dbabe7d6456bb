"""``hub run`` as a real process, for the tests that kill it and start it again.

A platform's SIGKILL test writes a config (`write_hub_config`: the data folder, the
model at a `hub.testing.FakeOpenAI`, episodic memory off, and the platform's own
table), starts the hub (`start_hub`), waits until a message is recorded and the model
is writing (`until_model_asked`; the fake model holds its answer with ``latency``),
kills it (`stop_hub`, SIGKILL by default; SIGTERM for a clean end whose exit code the
test checks) and starts it again on the same folder: the inbox resumes the message, and
the test asserts it is answered once.

Each process imports the checkout this package belongs to (``PYTHONPATH``), reads its
secrets from ``env`` as an operator's would, and writes its log to one pipe that
`stop_hub` returns, for the assertion messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["SOURCE_ROOT", "free_port", "start_hub", "stop_hub", "until_model_asked", "write_hub_config"]

SOURCE_ROOT = Path(__file__).resolve().parents[2]
"""The folder holding the ``hub`` package (the checkout), put on the child's ``PYTHONPATH``."""

_COMMON = """
[hub]
data_dir = "data"
contexts_dir = "contexts"
shutdown_grace = 1
{hub}
{http}
[model]
provider = "openai"
name = "hub"
base_url = "{model_url}"
api_key = "x"
max_retries = 0

[memory]
episodes = false
"""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_hub_config(
    folder: Path, *, model_url: str, extension: str, http_port: int | None = None, hub: str = ""
) -> Path:
    """``folder/config.toml``: the data in ``folder/data``, ``hub`` (more ``[hub]`` keys, TOML
    lines), the model at ``model_url``, episodic memory off, ``[http]`` on ``http_port`` when
    given, and ``extension`` (the platform's table, TOML text, ``${VAR}`` for its secrets)
    after it; its path."""
    (folder / "contexts").mkdir(exist_ok=True)
    http = f'\n[http]\nhost = "127.0.0.1"\nport = {http_port}\n' if http_port is not None else ""
    config = folder / "config.toml"
    config.write_text(_COMMON.format(hub=hub, http=http, model_url=model_url) + "\n" + extension.strip() + "\n")
    return config


def start_hub(folder: Path, config: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """``python -m hub.cli run --config CONFIG`` in ``folder``, with ``env`` added to this
    process's environment; its stdout and stderr on one pipe."""
    return subprocess.Popen(
        [sys.executable, "-m", "hub.cli", "run", "--config", str(config)],
        cwd=folder,
        env={**os.environ, "PYTHONPATH": str(SOURCE_ROOT), **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def stop_hub(proc: subprocess.Popen[bytes], sig: int = signal.SIGKILL) -> str:
    """Send ``sig`` (SIGKILL: a crash; SIGTERM: a clean end) unless it has ended, wait for it
    (killed after 15 s), and return what it wrote."""
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        out, _ = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate(timeout=5)
    return out.decode(errors="replace")


async def until_model_asked(model: Any, proc: subprocess.Popen[bytes] | None = None, *, timeout: float = 30) -> None:
    """Until ``model`` (a `hub.testing.FakeOpenAI`) has a request: the message was
    recorded and the model is writing. Fails with the hub's output if ``proc`` ends first."""
    async with asyncio.timeout(timeout):
        while not model.bodies:
            if proc is not None and proc.poll() is not None:
                raise AssertionError(f"the hub exited ({proc.returncode}): {stop_hub(proc)}")
            await asyncio.sleep(0.05)
