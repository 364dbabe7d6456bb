"""The terminal: context ``cli:session`` (one conversation per OS user), output ``cli:message``.

``hub chat`` drives it line by line; under ``hub run`` its input reads stdin when
``stdin = true`` (and stops quietly at EOF, e.g. in a container with no terminal).
When standard output is a terminal, a reply is printed as the model writes it (a live
output); to a pipe or a file, whole replies are written, a line each, as before.

The hub's chat commands work here as on every platform (``/help`` lists them): a line
``/name args`` that names one is answered without the model (`converse()`). Lines are
answered one at a time, in order, but ``/stop`` goes at once, while an answer is still
being written, and ends it.

An action that needs a person's yes (``[approvals]``) is asked here as a line ending in
``[y/n]``; the next line ``y`` or ``n`` (``yes``, ``no``) answers it, and does not reach the
model (`TerminalApprover`).
"""

from __future__ import annotations

import asyncio
import codecs
import getpass
import logging
import os
import stat
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TextIO

from pydantic import BaseModel, ConfigDict

from hub import CommandCall, Context, Extension, Input, LiveText, RunResult, output
from hub.platform import ApprovalDesk, ApprovalRequest, Approver, parse_command

__all__ = [
    "CliSettings",
    "CliArgs",
    "CONTEXT",
    "TerminalApprover",
    "extension",
    "read_lines",
    "os_user",
    "converse",
]

CONTEXT = "cli:session"
AT_ONCE = frozenset({"stop"})
"""Commands sent as soon as they are typed, not after the answer being written (which they end)."""

log = logging.getLogger(__name__)


class CliSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    stdin: bool = True
    """Under `hub run`, read messages from standard input."""
    prefix: str = ""
    """Printed before each reply (e.g. "bot> ")."""


class CliArgs(BaseModel):
    user: str


def os_user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry (some containers)
        return "user"


async def read_lines(stream: TextIO | None = None) -> AsyncIterator[str]:
    """Lines of a pipe, a terminal or a file, of any length, without blocking the loop; ends at EOF.

    Invalid UTF-8 becomes U+FFFD. A line is gathered from chunks, so no line is too long
    for the reader and none after a long one is lost.
    """
    stream = stream or sys.stdin
    if stream is None:  # started with no standard input at all
        return
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 16)
    try:
        mode = os.fstat(stream.fileno()).st_mode
        pollable = stream.isatty() or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)
    except (OSError, ValueError, AttributeError):
        pollable = False
    transport = None
    if pollable:
        try:
            transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stream)
        except (ValueError, OSError):
            transport = None
    if transport is None:
        # a regular file or /dev/null (epoll cannot watch them): reading never blocks for long
        while True:
            line = await asyncio.to_thread(stream.readline)
            if not line:
                return
            yield line
        return
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending: list[str] = []
    try:
        while True:
            chunk = await reader.read(1 << 16)
            text = decoder.decode(chunk, final=not chunk)
            while (nl := text.find("\n")) >= 0:
                yield "".join(pending) + text[: nl + 1]
                pending.clear()
                text = text[nl + 1 :]
            if text:
                pending.append(text)
            if not chunk:
                if pending:
                    yield "".join(pending)
                return
    finally:
        transport.close()


Send = Callable[..., Awaitable[Any]]

_YES = frozenset({"y", "yes"})
_NO = frozenset({"n", "no"})


class TerminalApprover(Approver):
    """The terminal's way to ask: a ``[y/n]`` line; the user's next ``y`` or ``n`` answers
    the oldest open question (`take()`, called by `converse()` for each line)."""

    def __init__(self, settings: CliSettings, out: TextIO | None = None) -> None:
        self._settings = settings
        self._out = out
        self._open: dict[str, list[tuple[str, ApprovalDesk]]] = {}  # user -> (approval id, desk), oldest first

    def _say(self, text: str) -> None:
        stream = self._out or sys.stdout
        stream.write(f"{self._settings.prefix}{text}\n")
        stream.flush()

    async def ask(self, request: ApprovalRequest, ctx: Any) -> None:
        user = ctx.user or ctx.context.key
        self._open.setdefault(user, []).append((request.id, ctx.hub.approvals))
        self._say(f"{request.text} [y/n]")

    async def settled(self, request: ApprovalRequest, message: str, ctx: Any) -> None:
        for user, questions in list(self._open.items()):
            questions[:] = [q for q in questions if q[0] != request.id]
            if not questions:
                del self._open[user]
        self._say(f"({request.action}: {message})")

    async def take(self, line: str, user: str) -> bool:
        """Whether ``line`` answered one of ``user``'s open questions (then it is not a message)."""
        word = line.strip().lower()
        questions = self._open.get(user)
        if not questions or word not in _YES | _NO:
            return False
        approval_id, desk = questions[0]
        answer = await desk.answer(approval_id, approve=word in _YES, user=user, platform="cli")
        if not answer.accepted:
            self._say(answer.message)
            if answer.state != "pending":  # answered elsewhere or too late: the next question is next
                questions.pop(0)
        return True


async def converse(
    send: Send,
    commands: Callable[[], set[str]],
    user: str,
    lines: AsyncIterator[str],
    *,
    answered: Callable[[RunResult | None], None] | None = None,
    approver: TerminalApprover | None = None,
) -> None:
    """Hand each line to the hub as ``user``'s message in ``cli:session``, one answer at a
    time and in order; a line naming a command (``commands()``: the hub's) goes as that
    command, and ``/stop`` at once, even while an answer is being written. ``send`` is
    ``hub.submit`` or an input's sender; ``answered(result)`` is called after each answer.
    A ``y``/``n`` line while ``approver`` has a question open for ``user`` answers it.
    Returns at the end of ``lines``, once every line is answered."""
    queue: asyncio.Queue[tuple[str, CommandCall | None] | None] = asyncio.Queue()

    async def one(text: str, call: CommandCall | None) -> None:
        sub = await send(CONTEXT, {"user": user}, text, user=user, command=call)
        result = None if sub.duplicate else await sub.wait()
        if answered is not None:
            answered(result)

    at_once: set[asyncio.Task[None]] = set()

    async def in_order() -> None:
        while (item := await queue.get()) is not None:
            if at_once:  # a /stop typed before this line is answered before it
                await asyncio.wait(set(at_once))
            await one(*item)

    async with asyncio.TaskGroup() as tasks:  # every answer awaited, all cancelled together
        tasks.create_task(in_order())
        async for line in lines:
            text = line.strip()
            if not text:
                continue
            if approver is not None and await approver.take(text, user):
                continue
            call = parse_command(text, commands())
            if call is not None and call.name in AT_ONCE:
                task = tasks.create_task(one(text, call))
                at_once.add(task)
                task.add_done_callback(at_once.discard)
            else:
                queue.put_nowait((text, call))
        queue.put_nowait(None)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or unusual stream: treated as a pipe
        return False


def extension(settings: CliSettings, *, out: TextIO | None = None) -> Extension:
    approver = TerminalApprover(settings, out)
    session: Context[CliArgs, dict[str, Any]] = Context(
        type=CONTEXT,
        schema=CliArgs,
        key=lambda a: a.user,
        description="A conversation in the terminal with the operator.",
        reply_output="cli:message",
    )

    @output(type="cli:message", description="Say something to the user in the terminal.", context="cli:session")
    async def message(content: str, ctx: Any) -> None:
        stream = out or sys.stdout
        stream.write(f"{settings.prefix}{content}\n")
        stream.flush()

    stream = out or sys.stdout
    if _is_terminal(stream):  # a person watching: the reply appears as it is written

        @output(
            type="cli:message",
            description="Say something to the user in the terminal.",
            context="cli:session",
            live=True,
        )
        async def message(content: LiveText, ctx: Any) -> None:  # noqa: F811
            printed: str | None = None  # nothing yet: an empty reply prints nothing, as before
            async for text in content:
                if not text and printed is None:
                    continue
                if printed is None:
                    stream.write(f"{settings.prefix}{text}")
                elif text.startswith(printed):
                    stream.write(text[len(printed) :])
                else:  # masking changed what was shown: the whole text again, on its own line
                    stream.write(f"\n{settings.prefix}{text}")
                printed = text
                stream.flush()
            if printed is not None:
                stream.write("\n")
                stream.flush()

    async def subscribe(send: Callable[..., Awaitable[Any]], hub: Any) -> Callable[[], Awaitable[None]]:
        user = os_user()

        async def pump() -> None:
            await converse(send, hub.commands.names, user, read_lines(), approver=approver)
            log.info("cli: end of standard input; the terminal input stops")

        task = hub.create_task(pump(), name="cli:stdin")

        async def stop() -> None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

        return stop

    inputs = [Input(type="cli:stdin", subscribe=subscribe, description="Lines typed in the terminal.")]
    return Extension(
        name="cli",
        contexts=[session],
        outputs=[message],
        inputs=inputs if settings.stdin else [],
        description="Terminal chat.",
        approver=approver,
    )
