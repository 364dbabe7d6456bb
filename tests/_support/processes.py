"""The ``hub`` command as a user runs it: a real process on this checkout, and a project
folder for it (a config, a persona and an operator's tool module)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


async def spawn_hub(
    *args: str,
    cwd: Path,
    stdin: int | None = asyncio.subprocess.PIPE,
    env: dict[str, str] | None = None,
) -> asyncio.subprocess.Process:
    """``python -m hub.cli ARGS`` in ``cwd``, importing this checkout; its stdout and stderr piped."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "hub.cli",
        *args,
        cwd=cwd,
        stdin=stdin,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
    )


async def kill_when_ready(script: str, *args: str, ready: Path, timeout: float = 60) -> None:
    """Run ``python -c SCRIPT ARGS``, wait for it to create ``ready`` (its own sign that it is
    where the test wants it), then SIGKILL it: a crash at a chosen point, not after a sleep."""
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", script, *args, cwd=os.getcwd())
    try:
        async with asyncio.timeout(timeout):
            while not ready.exists():
                if proc.returncode is not None:
                    raise AssertionError(f"the child hub exited early ({proc.returncode})")
                await asyncio.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        await proc.wait()


async def hub_cmd(*args: str, cwd: Path, stdin: str = "", env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Run ``hub ARGS`` to its end with ``stdin`` as its input: its exit code, stdout and stderr."""
    proc = await spawn_hub(*args, cwd=cwd, env=env)
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


TOOLS = """
from pydantic import BaseModel
from hub import Extension, action

class WeatherArgs(BaseModel):
    location: str

@action(name="getWeather", description="Current weather for a location.")
async def get_weather(args: WeatherArgs, ctx) -> dict:
    return {"temperature": 72, "condition": "sunny", "location": args.location}

extension = Extension(name="weather", actions=[get_weather])
"""


def setup_dir(tmp_path: Path, base_url: str) -> Path:
    """A project in ``tmp_path``: the model at ``base_url`` (key in ``$TEST_KEY``), the terminal
    and a weather tool module; returns its config file."""
    (tmp_path / "my_tools.py").write_text(TOOLS)
    (tmp_path / "contexts").mkdir()
    (tmp_path / "contexts" / "default.toml").write_text('name = "Wendy"\ninstructions = "You report the weather."\n')
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        textwrap.dedent(f"""
        [model]
        provider = "openai"
        name = "test-model"
        base_url = "{base_url}"
        api_key = "${{TEST_KEY}}"
        [extensions.cli]
        [extensions.weather]
        module = "my_tools"
    """)
    )
    return cfg
