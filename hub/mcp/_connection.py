"""One configured MCP server (`McpServer`): its connection, kept up while the hub runs.

A supervisor task connects (stdio: the hub starts the server as its child; or streamable
HTTP), initialises, lists the tools and holds the session until the connection breaks or
the hub stops. A server that will not start, or that crashes, is started again with
exponential backoff; while it is down its tools are not offered, and a call in flight when
it crashed fails as an action error. ``tools/list_changed`` makes it list them again.
Every tool change is published (``on_tools``), which puts the actions in the registry.

The SDK's sessions are anyio task groups: one task (the supervisor) enters and leaves them.
Calls from runs go through the session it holds.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import shutil
import sys
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO

from ..backoff import Backoff
from ..config import McpServerSection
from ..definitions import Action
from ..errors import ActionError
from ..tasks import cancel_and_wait
from ._tools import ToolSpec, make_action, schema_problem, vet_tool

__all__ = ["McpServer", "ServerStatus"]

log = logging.getLogger("hub.mcp")

LAUNCHER = Path(__file__).with_name("_launch.py")
PING_EVERY = 15.0
"""Seconds between pings of an idle server: a server that died is noticed even with no call."""


@dataclass(slots=True)
class ServerStatus:
    """What the hub knows of a server now (``hub mcp list``, ``hub check``, the dashboard)."""

    name: str
    transport: Literal["stdio", "http"]
    state: Literal["starting", "up", "down", "stopped"] = "starting"
    error: str = ""
    tools: list[ToolSpec] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    """Tools the server lists that are not offered, and why (allow-list, a broken schema)."""
    restarts: int = 0


class McpServer:
    """One ``[mcp.NAME]`` server (see the module doc)."""

    def __init__(
        self,
        name: str,
        section: McpServerSection,
        *,
        base_dir: Path,
        on_tools: Callable[[str, list[Action]], None] | None = None,
        errlog: TextIO | None = None,
        backoff: Backoff | None = None,
    ) -> None:
        self.name = name
        self.section = section
        self.base_dir = base_dir
        self.on_tools = on_tools
        self.errlog = errlog
        self.backoff = backoff or Backoff(first=0.5, most=60.0)
        self.status = ServerStatus(name, "stdio" if section.command else "http")
        self.actions: list[Action] = []
        self._session: Any = None
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._broken = asyncio.Event()
        self._relist = asyncio.Event()
        self._first_try = asyncio.Event()

    # --- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._supervise(), name=f"mcp:{self.name}")

    async def wait_started(self, timeout: float) -> bool:
        """Wait until the first attempt to start is over (up, or failed): whether it is up."""
        try:
            await asyncio.wait_for(self._first_try.wait(), timeout)
        except TimeoutError:
            if not self._first_try.is_set():
                self.status.error = self.status.error or f"did not start within {timeout:g}s"
        return self.status.state == "up"

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)
        self._set_tools([])
        self.status.state = "stopped"

    # --- the supervisor -----------------------------------------------------------------

    async def _supervise(self) -> None:
        attempt = 0
        while True:
            try:
                await self._connected()
                attempt = 0  # it was up: the next failure starts the backoff anew
            except asyncio.CancelledError:
                raise
            except BaseException as e:  # anyio wraps failures in exception groups
                self._down(self._why(e))
            else:
                self._down("the connection closed")
            self._first_try.set()
            delay = self.backoff.delay(attempt)
            attempt += 1
            self.status.restarts += 1
            log.warning("mcp %s: down (%s); starting it again in %.1fs", self.name, self.status.error, delay)
            await asyncio.sleep(delay)

    def _why(self, e: BaseException) -> str:
        """Why a connection failed; for a stdio server that exited, the last line it wrote."""
        why = _reason(e)
        if "Connection closed" in why and self.status.transport == "stdio":
            tail = self._stderr_tail()
            why = "the server exited" + (f": {tail}" if tail else f" (its stderr: {self._errlog_path() or 'not kept'})")
        return why

    def _errlog_path(self) -> str | None:
        name = getattr(self.errlog, "name", None)
        return name if isinstance(name, str) and name != os.devnull and os.path.isfile(name) else None

    def _stderr_tail(self) -> str:
        path = self._errlog_path()
        if path is None:
            return ""
        try:
            if self.errlog is not None:
                self.errlog.flush()
            with open(path, "rb") as f:
                f.seek(max(0, os.path.getsize(path) - 2000))
                lines = [ln.strip() for ln in f.read().decode("utf-8", "replace").splitlines() if ln.strip()]
        except OSError:
            return ""
        return lines[-1][:300] if lines else ""

    def _down(self, why: str) -> None:
        self._session = None
        self._ready.clear()
        self.status.state, self.status.error = "down", why
        self._set_tools([])

    async def _connected(self) -> None:
        """One connection: open, initialise, list, then hold it until it breaks."""
        from mcp import ClientSession

        self._broken.clear()
        async with AsyncExitStack() as stack:
            async with asyncio.timeout(self.section.connect_timeout):
                read, write = await stack.enter_async_context(self._transport())
                session = await stack.enter_async_context(ClientSession(read, write, message_handler=self._message))
                await session.initialize()
                self._session = session
                await self._list()
            self.status.state, self.status.error = "up", ""
            self._ready.set()
            self._first_try.set()
            log.info("mcp %s: up with %d tools", self.name, len(self.actions))
            await self._hold(session)

    def _transport(self) -> Any:
        s = self.section
        if s.command:
            from mcp import StdioServerParameters, stdio_client

            program = _which(s.command[0])
            cwd = str(self.base_dir / s.cwd) if s.cwd else str(self.base_dir)
            params = StdioServerParameters(
                command=sys.executable,
                args=["-I", str(LAUNCHER), str(os.getpid()), str(s.max_message_bytes), program, *s.command[1:]],
                env=dict(s.env),
                cwd=cwd,
            )
            return stdio_client(params, errlog=self.errlog or sys.stderr)
        import httpx2  # the mcp SDK's HTTP client, imported with it (a started hub imports neither)

        from ._bounded import BoundedJson

        timeout = httpx2.Timeout(self.section.timeout, read=max(300.0, self.section.timeout))
        transport = BoundedJson(httpx2.AsyncHTTPTransport(), s.max_message_bytes)
        client = httpx2.AsyncClient(headers=dict(s.headers), timeout=timeout, transport=transport)
        return _http(client, s.url, s.max_message_bytes)

    async def _hold(self, session: Any) -> None:
        """Until the connection breaks: list again when told, ping when idle."""
        while True:
            broken = asyncio.ensure_future(self._broken.wait())
            relist = asyncio.ensure_future(self._relist.wait())
            try:
                done, _ = await asyncio.wait({broken, relist}, timeout=PING_EVERY, return_when=asyncio.FIRST_COMPLETED)
            finally:
                broken.cancel()
                relist.cancel()
            if self._broken.is_set():
                return
            if self._relist.is_set():
                self._relist.clear()
                try:  # bounded: a server that never answers is restarted, not waited on for ever
                    async with asyncio.timeout(self.section.timeout):
                        await self._list()
                except TimeoutError:
                    raise ConnectionError(
                        f"it did not list its tools within {self.section.timeout:g}s of tools/list_changed"
                    ) from None
                continue
            if not done:
                async with asyncio.timeout(self.section.timeout):
                    await session.send_ping()

    async def _message(self, message: Any) -> None:
        """Notifications from the server: a changed tool list is listed again."""
        method = getattr(message, "method", None) or getattr(getattr(message, "root", None), "method", None)
        if method == "notifications/tools/list_changed":
            log.info("mcp %s: its tools changed", self.name)
            self._relist.set()

    async def _list(self) -> None:
        """List the tools (every page) and publish the actions for those that can be offered."""
        session = self._session
        specs: list[ToolSpec] = []
        skipped: dict[str, str] = {}
        cursor = None
        for _ in range(100):  # a server that pages forever is cut off
            from mcp.types import PaginatedRequestParams

            page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
            for tool in page.tools:
                self._take(tool, specs, skipped)
            cursor = page.next_cursor
            if not cursor:
                break
        s = self.section
        self.status.tools, self.status.skipped = specs, skipped
        actions: list[Action] = [
            make_action(self.name, spec, self.call, timeout=s.timeout, max_chars=s.max_result_chars, roles=s.roles)
            for spec in specs
        ]
        self._set_tools(actions)

    def _take(self, tool: Any, specs: list[ToolSpec], skipped: dict[str, str]) -> None:
        name = str(tool.name)
        allowed = self.section.tools
        if allowed and name not in allowed:
            skipped[name] = "not in the tools allow-list"
            return
        problem = schema_problem(tool.input_schema)
        if problem is None and not _NAME.match(name):
            problem = "its name is not usable as an action name (letters, digits, _ . : -)"
        spec = None
        if problem is None:
            spec, problem = vet_tool(self.name, name, str(tool.description or ""), dict(tool.input_schema))
        if spec is None:
            skipped[name] = problem
            log.warning("mcp %s: tool %r left out: %s", self.name, name, problem)
            return
        specs.append(spec)

    def _set_tools(self, actions: list[Action]) -> None:
        self.actions = actions
        if self.on_tools is not None:
            self.on_tools(self.name, actions)

    # --- calls --------------------------------------------------------------------------

    async def call(self, tool: str, args: dict[str, Any]) -> Any:
        """Call ``tool``: its CallToolResult. Raises ActionError when the server is down, the
        call fails, the connection breaks under it or it takes longer than ``timeout``."""
        from mcp import MCPError

        name = f"{self.name}__{tool}"
        session = self._session
        if session is None:
            raise ActionError(name, f"the MCP server {self.name!r} is not running ({self.status.error or 'starting'})")
        timeout = self.section.timeout
        try:
            async with asyncio.timeout(timeout):
                return await session.call_tool(tool, args)
        except TimeoutError as e:
            raise ActionError(name, f"timed out after {timeout:g}s") from e
        except MCPError as e:
            if e.code == _CONNECTION_CLOSED and e.message == "Connection closed":
                self._broken.set()  # the supervisor starts it again
                raise ActionError(name, f"the MCP server {self.name!r} stopped during the call") from e
            if e.code == _CONNECTION_CLOSED:  # this call's stream only (an SSE event over the bound)
                raise ActionError(name, f"the call's answer was lost: {e.message}") from e
            raise ActionError(name, f"the MCP server answered an error: {e.message}") from e
        except (OSError, RuntimeError, ValueError) as e:  # a transport that failed, an answer that did not parse
            self._broken.set()
            raise ActionError(name, f"the call failed: {type(e).__name__}: {e}") from e


_CONNECTION_CLOSED = -32000
"""The SDK's error code for a connection that closed under a request (``mcp_types``)."""
_NAME = re.compile(r"^[A-Za-z_][\w.:-]*$")
"""What an action's name may be (``hub.definitions``): a tool named otherwise is left out."""


def _which(program: str) -> str:
    """The program's path: as the hub's PATH finds it, or beside the hub's Python (a server
    installed in the hub's virtualenv, not activated)."""
    found = shutil.which(program) or shutil.which(program, path=str(Path(sys.executable).parent))
    if found is None:
        raise FileNotFoundError(f"{program!r} not found (on PATH or beside {sys.executable})")
    return found


def _http(client: Any, url: str, limit: int) -> Any:
    """The streamable HTTP transport, closing ``client`` with it; an SSE event over ``limit``
    bytes fails its request (the SDK's own bound), as a JSON body does (`hub.mcp._bounded.BoundedJson`)."""
    from contextlib import asynccontextmanager

    from mcp.client.streamable_http import streamable_http_client

    @asynccontextmanager
    async def transport() -> Any:
        async with client, streamable_http_client(url, http_client=client, max_sse_event_size=limit) as streams:
            yield streams

    return transport()


def _reason(e: BaseException) -> str:
    """One line for why a connection failed (the first leaf of an exception group)."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    if isinstance(e, TimeoutError):
        return "did not answer in time"
    text = str(e) or type(e).__name__
    return f"{type(e).__name__}: {text}"[:300]
