"""A command someone sent, as the platform parsed it ([`CommandCall`][hub.CommandCall]): what a platform
hands ``send(..., command=...)``. Its own module: the hub API's signature names it, and the
commands' module needs that API."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CommandCall"]


@dataclass(frozen=True, slots=True)
class CommandCall:
    """A command someone sent, as the platform parsed it: ``/weather Paris`` is
    ``CommandCall("weather", "Paris")``. A platform passes it to ``send(..., command=...)``
    with the message's text as the data. ``group``: sent in a conversation several people
    share (a group chat, a channel), where ``[commands] group_roles`` apply."""

    name: str
    """The command, without its slash."""
    args: str = ""
    """The text after its name ("": none)."""
    group: bool = False
    """Sent where several people talk (a group chat, a channel)."""
