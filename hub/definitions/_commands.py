"""Chat commands: what an extension declares ([`Command`][hub.Command], made by ``@command``), what a
platform hands the hub when someone sends one ([`CommandCall`][hub.CommandCall]), and what a command's
handler gets ([`CommandContext`][hub.CommandContext]).

A command is answered without asking the model: the hub's intake sees it before any run
(`hub.engine`). The built-in ones (``/start``, ``/help``, ``/new``, ``/stop``) are the
engine's; an extension adds its own with ``@command("name", description=...)``.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._command_call import CommandCall

if TYPE_CHECKING:
    from ._hub_api import HubAPI, Queued
    from ._run_context import Conversation

__all__ = ["Command", "CommandCall", "CommandContext", "COMMAND_NAME", "MAX_DESCRIPTION"]

COMMAND_NAME = re.compile(r"[a-z0-9_]{1,32}")
"""What every platform takes as a command's name: Telegram's rule, which Discord's includes."""
MAX_DESCRIPTION = 100
"""Discord's limit on a command's description (Telegram takes 256)."""


def check_command_name(name: str) -> str:
    """``name`` if it is a command's name, else ValueError saying what one is."""
    if not COMMAND_NAME.fullmatch(name):
        raise ValueError(f"command name {name!r} must be 1 to 32 of a-z, 0-9 and _ (no slash, no capitals)")
    return name


@dataclass(slots=True, eq=False)
class Command:
    """A chat command: ``/name args``. ``handler(cmd)`` gets a [`CommandContext`][hub.CommandContext] and
    returns the answer's text (or None when it answered itself, started a run, or has nothing
    to say). ``arguments`` describes the text it takes after its name ("": none; platforms
    with typed options offer one optional text option then). ``roles``: only users holding
    one of these ``[roles]`` may use it (and see it in ``/help``)."""

    name: str
    """The command, without its slash: ``/name``."""
    handler: Callable[[CommandContext], Awaitable[str | None]]
    """``await handler(cmd)``: answers the command (see above)."""
    description: str
    """What it does, in ``/help`` and the platforms' command menus."""
    arguments: str = ""
    """What text it takes after its name, for ``/help`` ("": none)."""
    roles: Sequence[str] = ()
    """Only users holding one of these roles may use it; empty: everyone."""

    def __post_init__(self) -> None:
        check_command_name(self.name)
        text = self.description.strip()
        if not text:
            raise ValueError(f"command {self.name!r} needs a description (shown in /help and the platforms' menus)")
        if len(text) > MAX_DESCRIPTION:
            raise ValueError(f"command {self.name!r}: the description is over {MAX_DESCRIPTION} characters")
        self.description = text
        self.roles = tuple(self.roles)


class CommandContext:
    """What a command's handler gets: the conversation, the user, the arguments, and two ways
    to act: [`reply()`][hub.CommandContext.reply] (through the conversation's usual output) and
    [`run()`][hub.CommandContext.run] (the model answers ``text`` as a message from this user, in a run of its own)."""

    __slots__ = ("name", "args", "context", "user", "platform", "roles", "run_id", "hub", "_reply", "_run")

    def __init__(
        self,
        *,
        name: str,
        args: str,
        context: Conversation,
        user: str | None,
        platform: str | None,
        roles: frozenset[str],
        run_id: str,
        hub: HubAPI,
        reply: Callable[[str], Awaitable[None]],
        run: Callable[[str], Awaitable[Queued]],
    ) -> None:
        self.name = name
        """The command, without its slash."""
        self.args = args
        """The text after the command's name (stripped; "" when none)."""
        self.context = context
        """The conversation (a [`ContextInstance`][hub.ContextInstance]: ``.id``, ``.args``, ``.key``);
        its memory is not loaded: a command does not run the conversation."""
        self.user = user
        """Who sent it (the platform's user id), or None."""
        self.platform = platform
        """The extension the conversation belongs to (``telegram``, ``cli``, ...)."""
        self.roles = roles
        """The ``[roles]`` this user holds on this platform."""
        self.run_id = run_id
        """The command's own run (``hub trace RUN_ID`` shows its input and answer)."""
        self.hub = hub
        """The hub, for a handler that uses its public API."""
        self._reply = reply
        self._run = run

    @property
    def conversation(self) -> str:
        """The conversation's id, ``TYPE:KEY``."""
        return self.context.id

    async def reply(self, text: str) -> None:
        """Answer in the conversation (its reply output); recorded in the command's trace."""
        await self._reply(text)

    async def run(self, text: str | None = None) -> Queued:
        """Hand ``text`` (default: the arguments) to the model as this user's message in this
        conversation; returns at once with its submission (``await .wait()`` for the run)."""
        return await self._run(self.args if text is None else text)

    def __repr__(self) -> str:
        return f"CommandContext(/{self.name} {self.args!r} in {self.context.id} from {self.user})"


def command_handler_result(value: Any) -> str | None:
    """A handler's return value as the answer's text (None: nothing to send)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"a command handler returns the answer's text or None, not {type(value).__name__}")
    return value
