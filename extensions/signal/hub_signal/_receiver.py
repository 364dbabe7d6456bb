"""The receive websocket (``/v1/receive/{number}``), kept connected: each text frame queued
as it arrives and handed to the intake in order; after a dropped or refused connection,
reconnected after a growing, jittered delay (0.5 s doubling up to ``reconnect_max``).

signal-cli-rest-api keeps nothing for a client: in json-rpc mode it writes each message
signal-cli receives to the websockets connected at that moment, and drops it when none is
(and signal-cli has acknowledged it to Signal's servers by then). So the socket is read
without pause, whatever the intake is doing: frames wait in this worker's memory, in order,
while a frame is retried (a store outage, a poison frame before it is parked), never in
the API's buffers where it would be lost.

With several workers only the holder of the lease ``signal:receive:<number>`` connects.
"""

from __future__ import annotations

import asyncio
import logging

import aiohttp

from hub.platform import Backoff

from ._client import SignalClient
from ._intake import Intake
from ._settings import SignalSettings

__all__ = ["Receiver", "RETRY_FIRST"]

log = logging.getLogger("hub_signal")

RETRY_FIRST = 0.1
"""Seconds before a frame that failed is tried again (doubling, up to ``reconnect_max``)."""
_STEADY = 10.0
"""Seconds a connection must stay up before the reconnect delay starts again from its first."""
_BACKLOG_WARNING = 1000


class Receiver:
    """Reads the socket until cancelled; takes each frame through ``intake``."""

    def __init__(self, client: SignalClient, settings: SignalSettings, intake: Intake) -> None:
        self.client = client
        self.settings = settings
        self.intake = intake
        self.hub = intake.hub
        self.frames: asyncio.Queue[str] = asyncio.Queue()
        self.taking: str | None = None  # the frame the intake has now

    async def run(self) -> None:
        """Receive and take frames until cancelled (the hub stops, or the lease is lost)."""
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self._read(), name="signal:websocket")
                group.create_task(self._take(), name="signal:intake")
        finally:
            self.hub.metrics.platform_connected("signal", False)
            left = self.frames.qsize() + (self.taking is not None)
            if left:  # the API will not deliver them again: say so, never silently
                log.error(
                    "signal: %d message(s) read from the websocket were not recorded before the receiver stopped",
                    left,
                )

    async def _read(self) -> None:
        backoff = Backoff(first=0.5, most=self.settings.reconnect_max, jitter=0.2)
        loop = asyncio.get_running_loop()
        while True:
            reason = "closed by the API"
            try:
                async with await self.client.connect() as ws:
                    up = loop.time()
                    self.hub.metrics.platform_connected("signal", True)
                    log.info("signal: receiving for %s at %s", self.settings.number, self.client.receive_url())
                    async for msg in ws:
                        if msg.type == aiohttp.WSMsgType.TEXT:
                            self.frames.put_nowait(msg.data)
                            if self.frames.qsize() == _BACKLOG_WARNING:
                                log.warning(
                                    "signal: %d frames wait for the intake (is the store down?)", _BACKLOG_WARNING
                                )
                        elif msg.type == aiohttp.WSMsgType.ERROR:
                            reason = f"error: {ws.exception()}"
                            break
                    if loop.time() - up >= _STEADY:
                        backoff.reset()
            except (aiohttp.ClientError, OSError, TimeoutError) as e:
                reason = f"{type(e).__name__}: {e}"
            self.hub.metrics.platform_connected("signal", False)
            delay = backoff.next()
            log.warning("signal: the receive websocket is down (%s); reconnecting in %.1fs", reason, delay)
            await asyncio.sleep(delay)

    async def _take(self) -> None:
        backoff = Backoff(first=RETRY_FIRST, most=self.settings.reconnect_max, jitter=0.1)
        while True:
            raw = self.taking = await self.frames.get()
            while True:
                try:
                    await self.intake.take_or_park(raw)
                except asyncio.CancelledError:
                    raise
                except Exception as e:  # not taken, not parked yet: the same frame again, in order
                    delay = backoff.next()
                    log.warning(
                        "signal: a frame was not taken (%s: %s); trying it again in %.1fs", type(e).__name__, e, delay
                    )
                    await asyncio.sleep(delay)
                    continue
                backoff.reset()
                break
            self.taking = None
            self.frames.task_done()
