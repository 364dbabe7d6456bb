"""Every ``[mcp.*]`` server of a config (`McpServers`): a component of the hub.

At start each enabled server is started at once, in parallel; the hub waits for each first
attempt (up to its ``connect_timeout``) so that its tools are there for the first message,
and a server that will not start is named in the log while the hub runs without it (it is
tried again with backoff). Its tools are published to the registry as actions
``SERVER__TOOL`` as they come and go. At stop every server ends (a stdio server's process
group is terminated, then killed).

`probe()` starts a config's servers only to ask them for their tools (``hub check``,
``hub mcp list``), then stops them.
"""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO, cast

from ..config import HubConfig
from ..definitions import Action
from ._connection import McpServer, ServerStatus

__all__ = ["LOG_MAX_BYTES", "McpServers", "cap_log", "probe"]

log = logging.getLogger("hub.mcp")

LOG_MAX_BYTES = 5_000_000
"""A stdio server's ``data_dir/mcp/NAME.log`` past this is moved to ``NAME.log.1`` (the one
before it dropped) and started again: at most about twice this on disk per server."""
LOG_CHECK_EVERY = 30.0
"""Seconds between checks of the servers' logs' sizes."""


def cap_log(path: Path, max_bytes: int = LOG_MAX_BYTES) -> bool:
    """Keep ``path`` under ``max_bytes``: past it, its content goes to ``PATH.1`` and the file
    is emptied in place (the server writes to it in append mode, so it goes on at the new
    end). True when it was cut."""
    try:
        if path.stat().st_size <= max_bytes:
            return False
        with open(path, "rb") as src, open(path.with_name(path.name + ".1"), "wb") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
        os.truncate(path, 0)  # what the server wrote between the copy and this line is lost
    except OSError as e:
        log.warning("mcp: cannot keep %s short: %s", path, e)
        return False
    return True


class McpServers:
    """The config's MCP servers; ``publish(owner, actions)`` puts a server's actions in the
    registry (``Registry.replace_actions``) and returns why any was refused."""

    def __init__(
        self,
        config: HubConfig,
        *,
        publish: Callable[[str, Sequence[Action]], list[str]] | None = None,
        log_dir: Path | None = None,
    ) -> None:
        self.config = config
        self.publish = publish
        self.log_dir = log_dir
        self._logs: list[TextIO] = []
        self._capping: asyncio.Task[None] | None = None
        self.servers: dict[str, McpServer] = {
            name: McpServer(name, section, base_dir=config.base_dir, on_tools=self._tools)
            for name, section in config.mcp.items()
            if section.enabled
        }

    def _tools(self, server: str, actions: list[Action]) -> None:
        if self.publish is None:
            return
        for problem in self.publish(f"mcp.{server}", actions):
            log.error("mcp %s: a tool is left out: %s", server, problem)

    def statuses(self) -> list[ServerStatus]:
        return [s.status for s in self.servers.values()]

    async def start(self, hub: Any = None) -> None:
        if not self.servers:
            return
        for server in self.servers.values():
            server.errlog = self._errlog(server.name)
            server.start()
        if self.log_dir is not None and self._capping is None:
            self._capping = asyncio.create_task(self._cap_logs(), name="mcp:logs")
        ups = await asyncio.gather(*(s.wait_started(s.section.connect_timeout + 1) for s in self.servers.values()))
        for server, up in zip(self.servers.values(), ups, strict=True):
            if not up:
                log.error(
                    "mcp %s: the server did not start (%s); the hub runs without its tools and tries again",
                    server.name,
                    server.status.error or "no answer",
                )

    def _errlog(self, name: str) -> TextIO | None:
        """Where a stdio server's stderr goes: ``data_dir/mcp/NAME.log`` (the terminal stays the chat's)."""
        if self.log_dir is None:
            return None
        try:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            cap_log(self.log_dir / f"{name}.log")
            f = open(self.log_dir / f"{name}.log", "a", encoding="utf-8")  # noqa: SIM115 - closed at stop
        except OSError as e:
            log.warning("mcp %s: cannot open its log in %s (%s): its stderr goes to the hub's", name, self.log_dir, e)
            return None
        self._logs.append(f)
        return f

    async def _cap_logs(self) -> None:
        assert self.log_dir is not None
        while True:
            await asyncio.sleep(LOG_CHECK_EVERY)
            for name in self.servers:
                await asyncio.to_thread(cap_log, self.log_dir / f"{name}.log")

    async def stop(self) -> None:
        if self._capping is not None:
            self._capping.cancel()
            await asyncio.gather(self._capping, return_exceptions=True)
            self._capping = None
        await asyncio.gather(*(s.stop() for s in self.servers.values()), return_exceptions=True)
        for f in self._logs:
            f.close()
        self._logs.clear()


async def probe(config: HubConfig, *, timeout: float | None = None) -> list[ServerStatus]:
    """Start each enabled server of ``config``, ask it for its tools, stop it: their statuses
    (``down`` with the reason for one that would not start). Nothing is published."""
    servers = McpServers(config)
    logs: list[Any] = []
    try:
        for s in servers.servers.values():
            # each server's stderr in a file of its own: a server that will not start says why there
            errlog = tempfile.NamedTemporaryFile("w+", encoding="utf-8", prefix=f"hub-mcp-{s.name}-", suffix=".log")
            logs.append(errlog)
            s.errlog = cast(TextIO, errlog)
            s.start()
        await asyncio.gather(
            *(s.wait_started(timeout or s.section.connect_timeout + 1) for s in servers.servers.values())
        )
        return [
            ServerStatus(st.name, st.transport, st.state, st.error, list(st.tools), dict(st.skipped), st.restarts)
            for st in servers.statuses()
        ]
    finally:
        await servers.stop()
        for f in logs:
            f.close()
