"""Inbound pictures, PDFs and voice notes, and spoken replies, decoded in worker processes of their own, each bounded.

Decoding is where a small file costs the most: a 140 KB PNG is 144 MB of pixels, a 16 KB
PDF whose pages share one 4 MB content stream is minutes of CPU. Done in the default thread
pool, such files stalled episodic recall and the embedder, which share it, went on after their
run was killed, and had no bound across runs. Here each file is decoded by a process of its
own (forked from multiprocessing's fork server, which has the decoders loaded), and:

- at most ``[media] decode_workers`` run at once, a pool separate from every thread pool;
- each has ``decode_timeout`` seconds of wall clock (then it is killed) and as many of CPU
  (the kernel's ``RLIMIT_CPU``), ``decode_memory`` bytes of address space more than it
  started with (``RLIMIT_AS``), and a lower priority than the hub (``nice``);
- the pixels being decoded at once, across all runs, stay within ``decode_pixels``: a
  picture's worker tells its size (after the JPEG draft) and waits for room before it decodes;
- a run that ends (killed, stopped, cancelled) kills its worker, and the hub's stop kills all.

The pool is the engine's: only the engine's `Attachments`
decodes. It has a lifecycle (workers to end when the hub stops), so it is a component built
by the composition root and handed to the engine, as a feature is. The decoding itself is
`hub.media`'s, pure functions of bytes and limits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import multiprocessing
import os
import signal
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from typing import Any

from ..audio import AudioClip, for_transcription, to_voice
from ..errors import MediaError, MediaRefused
from ..media import MediaFile, MediaLimits, extract_text, image_for_model

__all__ = ["Decoder"]

log = logging.getLogger("hub.engine")

# what the fork server loads once, so that every worker starts with it (copy-on-write). The
# program's main module comes first, as multiprocessing does by default: a worker then finds
# it loaded instead of running it again (a script that embeds the hub guards its start with
# ``if __name__ == "__main__":``, as every program using multiprocessing does)
_PRELOAD = [
    "__main__",
    "hub.engine._decoding",
    "PIL.Image",
    "PIL.PngImagePlugin",
    "PIL.JpegImagePlugin",
    "PIL.GifImagePlugin",
    "PIL.WebPImagePlugin",
    "PIL.BmpImagePlugin",
    "pypdf",
]


def _context() -> Any:
    """A fork server where the platform has one (a fresh, single-threaded process to fork
    from, not the hub with its threads), else spawn."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(_PRELOAD)
        return ctx
    return multiprocessing.get_context("spawn")


# --- in the worker ----------------------------------------------------------------------------


def _limit(cpu: float, memory: int) -> None:
    """The worker's own bounds: CPU seconds (SIGXCPU past them), address space, priority."""
    import resource

    seconds = max(1, math.ceil(cpu))
    resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))
    if memory > 0:
        try:
            with open("/proc/self/statm") as f:
                size = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError):
            size = None  # no /proc: no address-space bound, the other bounds hold
        if size is not None:
            resource.setrlimit(resource.RLIMIT_AS, (size + memory, size + memory))
    with contextlib.suppress(OSError):
        os.nice(10)


def _work(conn: Connection, kind: str, payload: Any, limits: MediaLimits) -> None:
    """A worker's whole life: one file decoded, the answer sent (with the memory the decoding
    added to what the worker started with), then exit."""
    import resource

    start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        _limit(limits.decode_timeout, limits.decode_memory)
        if kind == "image":
            data, name = payload

            def admit(pixels: int) -> None:  # wait for room in the pixel budget
                conn.send(("pixels", pixels))
                conn.recv()

            answer: tuple[str, Any] = ("ok", image_for_model(data, limits=limits, name=name, admit=admit))
        elif kind == "audio":  # a voice note: measured (refused past max_seconds) and made WAV
            data, name, max_seconds = payload
            answer = ("ok", for_transcription(data, name=name, max_seconds=max_seconds))
        elif kind == "voice":  # a spoken reply: made OGG/Opus
            data, name, max_seconds = payload
            answer = ("ok", to_voice(data, name=name, max_seconds=max_seconds))
        else:
            deadline = time.monotonic() + limits.decode_timeout / 2  # then what was read so far
            answer = ("ok", extract_text(payload, limits=limits, deadline=deadline))
    except MediaError as e:
        answer = ("refused", e.reason)
    except MemoryError:
        answer = ("refused", f"decoding it needs more than the {limits.decode_memory // 1_000_000} MB allowed")
    except BaseException as e:  # the parent says what failed; the worker exits anyway
        answer = ("error", f"{type(e).__name__}: {e}"[:300])
    added = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - start) * 1024  # kilobytes on Linux
    try:
        conn.send((*answer, added))
    except (OSError, ValueError):
        pass  # the parent is gone (it killed the job, or stopped)


# --- in the hub -------------------------------------------------------------------------------


class _PixelBudget:
    """Pixels being decoded at once, across all runs; a picture larger than the whole budget
    takes all of it (alone)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.used = 0
        self.peak = 0
        self._changed = asyncio.Condition()

    @contextlib.asynccontextmanager
    async def take(self, pixels: int) -> AsyncIterator[None]:
        share = min(pixels, self.total)
        async with self._changed:
            await self._changed.wait_for(lambda: self.used + share <= self.total)
            self.used += share
            self.peak = max(self.peak, self.used)
        try:
            yield
        finally:
            async with self._changed:
                self.used -= share
                self._changed.notify_all()


class _Job:
    """One worker process and the pipe to it."""

    def __init__(self, ctx: Any, kind: str, payload: Any, limits: MediaLimits) -> None:
        self.parent, child = ctx.Pipe()
        self._child = child
        self.process = ctx.Process(target=_work, args=(child, kind, payload, limits), daemon=True)
        self.reaped = False
        self.code: int | None = None

    def start(self) -> None:
        """Blocking (the fork server's round trip, the payload's transfer): run in a thread."""
        self.process.start()
        self._child.close()

    async def receive(self) -> Any:
        """The worker's next message; raises EOFError when it died without one."""
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        fds = (self.parent.fileno(), self.process.sentinel)

        def wake() -> None:
            if not ready.done():
                ready.set_result(None)

        for fd in fds:
            loop.add_reader(fd, wake)
        try:
            await ready
        finally:
            for fd in fds:
                loop.remove_reader(fd)
        if self.parent.poll():
            return self.parent.recv()
        raise EOFError

    @property
    def pid(self) -> int | None:
        return None if self.reaped else self.process.pid

    def kill(self) -> None:
        with contextlib.suppress(Exception):
            if self.process.is_alive():
                self.process.kill()

    def reap(self) -> int | None:
        """Blocking until the worker is gone (killed first if it is not): its exit code.
        Idempotent."""
        if self.reaped:
            return self.code
        self.kill()
        with contextlib.suppress(Exception):
            self.process.join(5)
        self.code = self.process.exitcode
        self.reaped = True
        with contextlib.suppress(Exception):
            self.parent.close()
            self.process.close()
        return self.code


class Decoder:
    """Decodes pictures and reads PDFs in bounded worker processes (see the module doc)."""

    def __init__(self, limits: MediaLimits) -> None:
        self.limits = limits
        self._slots = asyncio.Semaphore(limits.decode_workers)
        self._pixels = _PixelBudget(limits.decode_pixels)
        self._threads: ThreadPoolExecutor | None = None
        self._jobs: set[_Job] = set()
        self._ctx: Any = None
        self.killed = 0
        """Workers ended by the wall clock, the CPU limit, a cancelled run or the hub's stop."""
        self.peak_rss = 0
        """The most memory (resident bytes) one decoding added to its worker, as the workers report it."""

    @property
    def running(self) -> int:
        """Workers alive now."""
        return len(self._jobs)

    @property
    def pids(self) -> list[int]:
        """The process ids of the workers alive now."""
        return [pid for job in list(self._jobs) if (pid := job.pid) is not None]

    @property
    def pixels_peak(self) -> int:
        """The most pixels that were being decoded at once."""
        return self._pixels.peak

    async def start(self, hub: Any) -> None:
        """Nothing yet: the fork server and the workers start with the first file."""

    async def stop(self) -> None:
        """End every worker still running (the runs that wanted them are over)."""
        for job in list(self._jobs):
            job.kill()
        threads, self._threads = self._threads, None
        if threads is not None:
            threads.shutdown(wait=False)

    async def image(self, data: bytes, *, name: str) -> tuple[str, bytes]:
        """`hub.media.image_for_model()` in a worker: ``(mime, bytes)``.

        Raises:
            MediaRefused: refused by the decoder, or past a bound (time, CPU, memory).
        """
        result: tuple[str, bytes] = await self._run("image", (data, name), name)
        return result

    async def text(self, file: MediaFile) -> str:
        """`hub.media.extract_text()` in a worker (a PDF past half its time gives what it read).

        Raises:
            MediaRefused: refused by the reader, or past a bound (time, CPU, memory).
        """
        result: str = await self._run("text", file, file.name)
        return result

    async def audio(self, data: bytes, *, name: str, max_seconds: float) -> AudioClip:
        """`hub.audio.for_transcription()` in a worker: the voice note as 16 kHz WAV, measured.

        Raises:
            MediaRefused: not audio, corrupt, longer than ``max_seconds``, or past a bound.
        """
        result: AudioClip = await self._run("audio", (data, name, max_seconds), name)
        return result

    async def voice(self, data: bytes, *, name: str, max_seconds: float | None = None) -> AudioClip:
        """`hub.audio.to_voice()` in a worker: a speech server's answer as OGG/Opus.

        Raises:
            MediaRefused: not audio, corrupt, or past a bound.
        """
        result: AudioClip = await self._run("voice", (data, name, max_seconds), name)
        return result

    async def _run(self, kind: str, payload: Any, name: str) -> Any:
        if self._ctx is None:
            self._ctx = _context()
        if self._threads is None:
            # its own threads: the default pool (recall, the embedder) is never waited on here
            self._threads = ThreadPoolExecutor(max_workers=self.limits.decode_workers, thread_name_prefix="hub-decode")
        threads = self._threads
        async with self._slots:
            job = _Job(self._ctx, kind, payload, self.limits)
            self._jobs.add(job)
            try:
                try:
                    await asyncio.get_running_loop().run_in_executor(threads, job.start)
                except OSError as e:  # no process could be made (a limit on processes, a sandbox)
                    raise MediaError(f"it could not be decoded now (no worker: {e.strerror or e})", name=name) from e
                return await self._converse(job, name)
            except asyncio.CancelledError:
                self.killed += 1  # the run ended (killed, stopped) or the hub stops: so does its decoding
                raise
            finally:
                self._jobs.discard(job)
                job.kill()
                await self._reap(job, threads, name)

    async def _reap(self, job: _Job, threads: ThreadPoolExecutor, name: str) -> None:
        try:
            code = await asyncio.get_running_loop().run_in_executor(threads, job.reap)
        except RuntimeError:  # the pool was shut down (the hub stops): the worker is killed, gone at once
            code = job.reap()
        if code not in (0, None, -signal.SIGKILL):
            log.info("decoder: the worker for %r ended with %s", name, code)

    async def _converse(self, job: _Job, name: str) -> Any:
        """The worker's answer, within the wall clock (time spent waiting for pixels aside)."""
        timeout = self.limits.decode_timeout
        try:
            async with asyncio.timeout(timeout):
                message = await job.receive()
            if message[0] == "pixels":  # a picture: room for its pixels first, then decode
                async with self._pixels.take(message[1]):
                    job.parent.send("go")
                    async with asyncio.timeout(timeout):
                        message = await job.receive()
        except TimeoutError:
            self.killed += 1
            raise MediaRefused(f"reading it took longer than {timeout:g}s: it was stopped", name=name) from None
        except EOFError:
            self.killed += 1
            code = job.reap()  # it is dead already: no wait
            why = "its CPU time" if code in (-signal.SIGXCPU, -signal.SIGKILL) else f"its worker (exit {code})"
            raise MediaRefused(f"reading it used up {why}: it was stopped", name=name) from None
        status, value, peak = message
        self.peak_rss = max(self.peak_rss, peak)
        if status == "ok":
            return value
        if status == "refused":
            raise MediaRefused(value, name=name)
        log.warning("decoder: reading %r failed: %s", name, value)
        raise MediaRefused("it could not be read", name=name)
