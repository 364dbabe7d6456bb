"""Several real ``hub run`` workers on one PostgreSQL schema, and the load balancer in front.

Shared by the crash test (``tests/workers/test_crash.py``) and the benchmark
(``bench/workers_bench.py``). Each :class:`Worker` is a ``python -m hub.cli run`` process
with a data dir and a config of its own, Telegram in webhook mode on its ``[http]``
endpoint (port 0: the bound port is read from its log line ``http: listening on``), the
fake Telegram for ``sendMessage`` and the fake OpenAI server as its model.
:class:`Balancer` plays Telegram and the load balancer: it POSTs an update to a worker
chosen round-robin, with the secret header, and re-posts it to the next worker on a
connection error or a 5xx, as Telegram retries.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

TOKEN = "123456:TEST-workers"
SECRET = "workers_secret-1"
PUBLIC_URL = "https://bot.example.com/telegram/updates"
_LISTENING = re.compile(rb"http: listening on [^:]+:(\d+)")
_INPUT = re.compile(r"<input [^>]*new=\"true\"[^>]*>(.*?)</input>", re.S)


def ack(body: dict[str, Any]) -> str:
    """The model's answer: ``ack`` and every new input's text, in order (inputs a run takes
    together are answered in one reply, so the reply says which messages it answers)."""
    content = body["messages"][-1]["content"]
    if not isinstance(content, str):
        content = " ".join(p.get("text", "") for p in content)
    texts = " ".join(t.strip() for t in _INPUT.findall(content))
    return f'<response><output type="telegram:send">ack {texts}</output></response>'


def config_text(
    *,
    url: str,
    data_dir: Path,
    contexts_dir: Path,
    model_url: str,
    telegram_url: str,
    lease: float = 3.0,
    concurrency: int = 64,
    chat_rate: float = 20.0,
    pool_size: int = 3,
    lock_connections: int = 12,
    extra: str = "",
) -> str:
    return f"""
[hub]
data_dir = {json.dumps(str(data_dir))}
contexts_dir = {json.dumps(str(contexts_dir))}
shutdown_grace = 5
log_level = "INFO"

[store]
url = {json.dumps(url)}
lease = {lease}
pool_size = {pool_size}
lock_connections = {lock_connections}

[model]
provider = "openai"
name = "fake"
base_url = {json.dumps(model_url)}
api_key = "x"
concurrency = {concurrency}
max_retries = 2

[memory]
episodes = false

[http]
host = "127.0.0.1"
port = 0

[extensions.telegram]
token = "{TOKEN}"
base_url = {json.dumps(telegram_url)}
webhook_url = "{PUBLIC_URL}"
webhook_secret = "{SECRET}"
typing = false
chat_rate = {chat_rate}
global_rate = 1000.0
{extra}
"""


@dataclass
class Worker:
    """One ``hub run`` process; ``port`` is its ``[http]`` port while it runs."""

    name: str
    config: Path
    log: Path
    proc: asyncio.subprocess.Process | None = None
    port: int | None = None
    _reader: asyncio.Task[None] | None = field(default=None, repr=False)

    async def start(self, *, timeout: float = 60.0) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.port = None
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "hub.cli",
            "run",
            "--config",
            str(self.config),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        listening = asyncio.get_running_loop().create_future()
        self._reader = asyncio.create_task(self._read(listening))
        try:
            self.port = await asyncio.wait_for(asyncio.shield(listening), timeout)
        except (TimeoutError, EOFError) as e:
            raise AssertionError(f"worker {self.name} did not start; its log:\n{self.tail()}") from e

    async def _read(self, listening: asyncio.Future[int]) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        with self.log.open("ab") as out:
            while line := await self.proc.stderr.readline():
                out.write(line)
                out.flush()
                if not listening.done() and (m := _LISTENING.search(line)):
                    listening.set_result(int(m.group(1)))
        if not listening.done():
            listening.set_exception(EOFError("the worker exited"))

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def kill(self) -> None:
        """SIGKILL: no clean stop, nothing given back, connections cut by the OS."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.port = None

    async def stop(self, *, timeout: float = 30.0) -> int:
        """SIGTERM and wait; the exit status."""
        if self.proc is None:
            return 0
        self.port = None
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = await asyncio.wait_for(self.proc.wait(), timeout)
        except TimeoutError:
            self.proc.kill()
            rc = await self.proc.wait()
        if self._reader is not None:
            await self._reader
        return rc

    def rss_kb(self) -> int:
        """Resident memory now (``VmRSS``), 0 when it is gone."""
        try:
            for line in Path(f"/proc/{self.proc.pid if self.proc else 0}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        except OSError:
            pass
        return 0

    def cpu_seconds(self) -> float:
        """User + system CPU time so far (``/proc/PID/stat``)."""
        try:
            fields = Path(f"/proc/{self.proc.pid if self.proc else 0}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def make_workers(root: Path, n: int, **config: Any) -> list[Worker]:
    contexts = root / "contexts"
    contexts.mkdir(parents=True, exist_ok=True)
    workers = []
    for i in range(n):
        cfg = root / f"w{i}.toml"
        cfg.write_text(config_text(data_dir=root / f"w{i}", contexts_dir=contexts, **config))
        workers.append(Worker(f"w{i}", cfg, root / f"w{i}.log"))
    return workers


@dataclass
class Balancer:
    """Telegram's side of webhook mode plus the load balancer: each update is POSTed to a
    live worker, round-robin, and re-posted to the next on a connection error or a 5xx."""

    workers: list[Worker]
    session: aiohttp.ClientSession
    retries: int = 0  # re-posts after a failure (a dead worker, a 5xx)
    _turn: itertools.count[int] = field(default_factory=itertools.count)

    async def post(self, update: dict[str, Any], *, deadline: float = 60.0) -> None:
        loop = asyncio.get_running_loop()
        until = loop.time() + deadline
        data = json.dumps(update)
        while True:
            worker = self.workers[next(self._turn) % len(self.workers)]
            if worker.port is not None:
                try:
                    async with self.session.post(
                        f"http://127.0.0.1:{worker.port}/telegram/updates",
                        data=data,
                        headers={"Content-Type": "application/json", "X-Telegram-Bot-Api-Secret-Token": SECRET},
                    ) as resp:
                        await resp.read()
                        if resp.status == 200:
                            return
                        if resp.status < 500:
                            raise AssertionError(
                                f"worker {worker.name} refused update {update['update_id']}: {resp.status}"
                            )
                except (TimeoutError, aiohttp.ClientConnectionError):
                    pass
                self.retries += 1
            if loop.time() > until:
                raise AssertionError(f"no worker took update {update['update_id']} within {deadline:.0f}s")
            await asyncio.sleep(0.05)  # Telegram waits before it retries too
