"""``hub run`` as a real process, for the tests that kill it and start it again.

A platform's SIGKILL test writes a config (`write_hub_config`: the data folder, the
model at a `hub.testing.FakeOpenAI`, episodic memory off, and the platform's own
table), starts the hub (`start_hub`), waits until a message is recorded and the model
is writing (`until_model_asked`; the fake model holds its answer with ``latency``),
kills it (`stop_hub`, SIGKILL by default; SIGTERM for a clean end whose exit code the
test checks) and starts it again on the same folder: the inbox resumes the message, and
the test asserts it is answered once. `until` waits for any other sign (failing if the hub
ends first), `until_exited` for a hub that ends by itself (a run that takes the process
down), `store_rows` reads its SQLite store beside it, and `hub_command` runs another
``hub`` command (``inbox``) on the same config. `end_program` ends any other program a test
started with asyncio (a quick start's fake, Dovecot).

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
import sqlite3
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

__all__ = [
    "SOURCE_ROOT",
    "end_program",
    "free_port",
    "hub_command",
    "start_hub",
    "stop_hub",
    "store_rows",
    "until",
    "until_exited",
    "until_model_asked",
    "write_hub_config",
]

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


def _environment(env: dict[str, str] | None) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(SOURCE_ROOT), **(env or {})}


def start_hub(folder: Path, config: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """``python -m hub.cli run --config CONFIG`` in ``folder``, with ``env`` added to this
    process's environment; its stdout and stderr on one pipe."""
    return subprocess.Popen(
        [sys.executable, "-m", "hub.cli", "run", "--config", str(config)],
        cwd=folder,
        env=_environment(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


async def hub_command(folder: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """``python -m hub.cli ARGS`` (``inbox --json --config CONFIG``) in ``folder``, with ``env``
    added as `start_hub` adds it, run to its end: its exit code, stdout and stderr."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "hub.cli",
        *args,
        cwd=folder,
        env=_environment(env),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")


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


async def until_exited(proc: subprocess.Popen[bytes], *, timeout: float = 20) -> str:
    """Until the hub ends by itself (a run took it down, or it was asked to end), waited for
    in a thread so that the test's fakes go on answering; what it wrote. Its exit code is
    ``proc.returncode``."""
    out, _ = await asyncio.to_thread(proc.communicate, timeout=timeout)
    return out.decode(errors="replace")


async def until(
    check: Callable[[], bool | Awaitable[bool]],
    proc: subprocess.Popen[bytes] | None = None,
    *,
    timeout: float = 30,
) -> None:
    """Until ``check()`` (a function, or a coroutine function) is true, asked every 50 ms.
    Fails with the hub's output if ``proc`` ends first."""
    async with asyncio.timeout(timeout):
        while True:
            if proc is not None and proc.poll() is not None:
                raise AssertionError(f"the hub exited ({proc.returncode}): {stop_hub(proc)}")
            done = check()
            if done if isinstance(done, bool) else await done:
                return
            await asyncio.sleep(0.05)


async def until_model_asked(model: Any, proc: subprocess.Popen[bytes] | None = None, *, timeout: float = 30) -> None:
    """Until ``model`` (a `hub.testing.FakeOpenAI`) has a request: the message was
    recorded and the model is writing. Fails with the hub's output if ``proc`` ends first."""
    await until(lambda: bool(model.bodies), proc, timeout=timeout)


def store_rows(folder: Path, sql: str, *params: Any) -> list[Any]:
    """The rows ``sql`` selects from the SQLite store of the hub run in ``folder``
    (``data/hub.db``), read-only beside the running hub; none before it made its tables
    or while it holds the file locked (a wait asks again), an error for anything else."""
    db = folder / "data" / "hub.db"
    if not db.exists():
        return []
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        try:
            return conn.execute(sql, params).fetchall()
        except sqlite3.OperationalError as e:
            if "no such table" in str(e) or "locked" in str(e):
                return []
            raise


async def end_program(proc: asyncio.subprocess.Process, *, terminate: bool = False) -> None:
    """End it: killed, or (``terminate``) asked to end, so that it cleans up after itself
    (killed if it has not within 10 s)."""
    if proc.returncode is None:
        if not terminate:
            proc.kill()
        else:
            proc.terminate()
            try:
                async with asyncio.timeout(10):
                    await proc.wait()
            except TimeoutError:
                proc.kill()
    await proc.wait()
