"""Chat commands on a platform: recognising ``/name args`` in a message's text
([`parse_command()`][hub.platform.parse_command]), for a platform whose client does not parse commands itself.

The commands themselves are the hub's (``hub.commands``: the built-in ``/start``, ``/help``,
``/new``, ``/stop`` and the extensions' ``@command``s, as ``[commands]`` leaves them on):
``hub.commands.names()`` is what counts as a command, ``hub.commands.menu(platform, user)``
what a platform registers in its command menu (with each description). A platform maps its
client's command event (Telegram's ``/cmd@bot``, a Discord application command, a typed
line) onto [`CommandCall`][hub.CommandCall] and passes it to ``send(..., command=call)``, with the
message's text as the data; the hub answers it without a model call. A ``/word`` that is
not a command stays text for the model.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from ..definitions import CommandCall

__all__ = ["parse_command"]

_COMMAND = re.compile(r"/([A-Za-z0-9_]{1,32})(?:@([A-Za-z0-9_]{1,64}))?(?:\s+(.*))?", re.DOTALL)


def parse_command(
    text: str, names: Collection[str], *, bot_name: str | None = None, group: bool = False
) -> CommandCall | None:
    """``text`` as a command among ``names`` (``/help``, ``/weather Paris``), or None.
    ``group``: sent where several people talk (``[commands] group_roles`` apply).

    ``/name@bot`` counts only when ``bot`` is ``bot_name`` (case-insensitive): in a group,
    a command meant for another bot is not this one's. Names are matched case-insensitively;
    the arguments are the rest of the text, stripped.
    """
    m = _COMMAND.fullmatch(text.strip())
    if m is None:
        return None
    name, target, rest = m.group(1).lower(), m.group(2), m.group(3)
    if target is not None and (bot_name is None or target.lower() != bot_name.lower().lstrip("@")):
        return None
    if name not in names:
        return None
    return CommandCall(name, (rest or "").strip(), group=group)
