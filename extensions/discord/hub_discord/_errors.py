"""Discord's errors as the bot reports them: the one line an operator reads when the bot
cannot log in or connect (`start_error()`), and the wait a rate limit asks for.
"""

from __future__ import annotations

import discord


class DiscordStartError(Exception):
    """The bot could not log in or connect; ``hub run`` stops with this one line."""


def _retry_after(e: discord.HTTPException) -> float:
    headers = e.response.headers if e.response is not None else {}
    for name in ("Retry-After", "X-RateLimit-Reset-After"):
        try:
            return float(headers[name])
        except (KeyError, TypeError, ValueError):
            continue
    return 1.0


def start_error(e: BaseException) -> DiscordStartError:
    """The one line an operator reads when the bot cannot log in or connect."""
    if isinstance(e, discord.LoginFailure) or (isinstance(e, discord.ConnectionClosed) and e.code == 4004):
        return DiscordStartError(
            "Discord rejected the bot token: set DISCORD_BOT_TOKEN to the token from the "
            "developer portal (Bot > Reset Token)"
        )
    if isinstance(e, discord.PrivilegedIntentsRequired):
        return DiscordStartError(
            "the Message Content intent is not enabled for this bot: turn it on in the "
            "developer portal (Bot > Privileged Gateway Intents > Message Content Intent)"
        )
    if isinstance(e, discord.ConnectionClosed):
        return DiscordStartError(f"the Discord gateway closed the connection: {e.code} {e.reason}")
    return DiscordStartError(f"cannot connect to the Discord gateway: {type(e).__name__}: {e}")
