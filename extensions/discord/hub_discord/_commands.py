"""The hub's chat commands on Discord (``hub.commands``), as application (slash) commands
through discord.py's ``app_commands``.

At start every command that is on is added to a ``CommandTree`` and synced: to each guild of
``guild_ids`` (they appear at once), else globally. A sync that fails (Discord down, a
network error, a missing ``applications.commands`` scope) is tried again, after 1 s doubling
up to a minute, until Discord takes it, as Telegram's menus are; the bot answers messages
meanwhile. A command that takes arguments has one
optional text option, ``text``. Commands limited to ``[roles]`` are registered too (Discord
cannot show a command to some users only): someone without the role who runs one is told
they may not, and ``/help`` lists only what each user may use.

Each interaction is answered, within Discord's 3-second window: the command goes to the hub
(recorded, answered without the model), and its answer goes back through the interaction:
the response itself when it comes in time, else the interaction is deferred after
``DEFER_AFTER`` seconds ("thinking...") and the answer edits that response in; more
messages are followups. A run the command starts answers through the same interaction, for
as long as its token lives. An interaction nothing answered is told "Done." (to the user
only), so none is left hanging.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import aiohttp
import discord
from discord import app_commands

from hub import CommandCall
from hub.platform import Backoff, CommandInfo, SendFailed, account_key, private_access, split_message

from ._messages import CONTEXT, MAX_LENGTH, SAFE_MENTIONS

if TYPE_CHECKING:
    from hub import RunContext

    from ._bot import DiscordBot

__all__ = ["DiscordCommands", "DEFER_AFTER"]

log = logging.getLogger(__name__)

DEFER_AFTER = 1.5
"""Seconds an interaction may wait for its answer before it is deferred (Discord gives 3)."""
TOKEN_LIFETIME = 14 * 60.0
"""Seconds an interaction's token is used for answers (Discord's lives 15 minutes)."""
DONE = "Done."
NOT_TAKEN = "Sorry, that did not go through. Please try again in a moment."


@dataclass(eq=False)
class _Pending:
    """An interaction being answered: one answer at a time (``lock``), and how far it got."""

    interaction: discord.Interaction
    received: float = field(default_factory=time.monotonic)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    deferred: bool = False
    original_used: bool = False  # the response (or the deferred one, edited) shows an answer
    answered: bool = False
    timer: asyncio.Task[None] | None = None


class DiscordCommands:
    """The slash commands of one bot: its trees (one per gateway connection), their sync, each
    interaction taken into the hub, and answers sent back through it."""

    def __init__(self, bot: DiscordBot) -> None:
        self.bot = bot
        self._pending: dict[int, _Pending] = {}

    # --- registering ------------------------------------------------------------------------

    def tree(self, client: discord.Client) -> app_commands.CommandTree[Any]:
        """A tree of the hub's commands on ``client``: it dispatches the interactions that
        client's gateway connection receives."""
        hub = self.bot._hub
        assert hub is not None
        tree: app_commands.CommandTree[Any] = app_commands.CommandTree(client)
        guilds = [discord.Object(g) for g in self.bot.settings.guild_ids]
        for info in hub.commands.available():
            if guilds:
                tree.add_command(self._command(info), guilds=guilds)
            else:
                tree.add_command(self._command(info))

        @tree.error
        async def on_error(interaction: discord.Interaction, error: app_commands.AppCommandError) -> None:
            log.error("discord: /%s failed: %s", getattr(interaction.command, "name", "?"), error, exc_info=error)

        return tree

    def _command(self, info: CommandInfo) -> app_commands.Command[Any, ..., None]:
        name = info.name
        if info.arguments:

            @app_commands.describe(text=info.arguments[:100])
            async def with_text(interaction: discord.Interaction, text: str | None = None) -> None:
                await self.invoked(interaction, name, text or "")

            return app_commands.Command(name=name, description=info.description, callback=with_text)

        async def plain(interaction: discord.Interaction) -> None:
            await self.invoked(interaction, name, "")

        return app_commands.Command(name=name, description=info.description, callback=plain)

    async def sync(self, tree: app_commands.CommandTree[Any]) -> None:
        """Register the tree's commands with Discord: per guild of ``guild_ids``, else globally,
        each target tried again after a failure, with a growing delay (logged), until it is
        taken. The bot answers messages meanwhile."""
        guild_ids = self.bot.settings.guild_ids
        targets: list[discord.Object | None] = [discord.Object(gid) for gid in guild_ids] if guild_ids else [None]
        backoff = Backoff(first=1.0, most=60.0, jitter=0.2)
        while targets:
            target = targets[0]
            where = f"guild {target.id}" if target is not None else "globally"
            try:
                synced = await tree.sync(guild=target)
            except (discord.HTTPException, app_commands.AppCommandError, aiohttp.ClientError, OSError) as e:
                delay = backoff.next()
                client_error = isinstance(e, discord.HTTPException) and 400 <= e.status < 500
                log.log(
                    logging.ERROR if client_error else logging.WARNING,
                    "discord: syncing the application commands %s failed (%s); retrying in %.0fs%s",
                    where,
                    e,
                    delay,
                    " (was the bot invited with the applications.commands scope?)" if client_error else "",
                )
                await asyncio.sleep(delay)
                continue
            log.info("discord: %d commands synced %s", len(synced), f"to {where}" if target is not None else where)
            targets.pop(0)
            backoff.reset()

    # --- an interaction comes in --------------------------------------------------------------

    async def invoked(self, interaction: discord.Interaction, name: str, text: str) -> None:
        """Take ``/name text`` into the hub and see that the interaction is answered."""
        hub, send = self.bot._hub, self.bot._send
        if hub is None or send is None:
            await interaction.response.send_message("Not ready yet: try again in a moment.", ephemeral=True)
            return
        refusal = await self._refusal(interaction)
        if refusal is not None:
            log.info("discord: /%s from %s refused: %s", name, interaction.user.id, refusal)
            await interaction.response.send_message(refusal, ephemeral=True)
            return
        self._forget_old()
        pending = self._pending[interaction.id] = _Pending(interaction)
        pending.timer = hub.create_task(self._defer_later(pending), name=f"discord:defer:{interaction.id}")
        channel_id = interaction.channel_id or 0
        done = DONE
        try:
            sub = await send(
                CONTEXT,
                {"channel_id": channel_id, "account": self.bot.account},
                f"/{name} {text}".strip(),
                user=str(interaction.user.id),
                platform_id=f"discord:interaction:{account_key(self.bot.account, str(interaction.id))}",
                meta={
                    "interaction_id": str(interaction.id),
                    "channel_id": str(channel_id),
                    "guild_id": str(interaction.guild_id) if interaction.guild_id else None,
                    "author_name": interaction.user.display_name,
                    "user_name": interaction.user.display_name,
                    "user_handle": interaction.user.name,
                    "author_bot": False,
                },
                command=CommandCall(name, text, group=interaction.guild_id is not None),
            )
            if not sub.duplicate:
                await sub.wait()
        except Exception:  # not taken (the store failed, the hub is stopping): the user is told
            done = NOT_TAKEN
            raise
        finally:
            await self._settle(pending, done)

    async def _refusal(self, interaction: discord.Interaction) -> str | None:
        """Why this user may not use the bot here (None: they may), as the bot's messages are
        filtered: ``dms`` and ``dm_policy`` in DMs, the allow-lists in guilds."""
        bot, settings, user = self.bot, self.bot.settings, interaction.user.id
        if interaction.guild_id is None:
            if not settings.dms:
                return "This bot does not answer direct messages."
            assert bot._hub is not None
            decision = await private_access(
                bot._hub.access,
                "discord",
                settings,
                user,
                user_name=interaction.user.display_name,
                user_handle=interaction.user.name,
            )
            return None if decision.allowed else (decision.message or "You may not use this bot.")
        channel = interaction.channel
        parent = getattr(channel, "parent_id", None)
        if (
            not bot._guilds.allows(interaction.guild_id)
            or not (
                bot._channels.allows(interaction.channel_id) or (parent is not None and bot._channels.allows(parent))
            )
            or not bot._users.allows(user)
        ):
            return "This bot does not answer here."
        return None

    async def _defer_later(self, pending: _Pending) -> None:
        """Defer the interaction if nothing answered it within ``DEFER_AFTER`` seconds."""
        await asyncio.sleep(DEFER_AFTER)
        async with pending.lock:
            if not pending.interaction.response.is_done():
                try:
                    await pending.interaction.response.defer(thinking=True)
                    pending.deferred = True
                except discord.HTTPException as e:
                    log.warning("discord: deferring interaction %s failed: %s", pending.interaction.id, e)

    async def _settle(self, pending: _Pending, text: str = DONE) -> None:
        """The command is done: an interaction nothing answered is told ``text`` (to its user only)."""
        if pending.timer is not None:
            pending.timer.cancel()
        async with pending.lock:
            if pending.answered:
                return
            pending.answered = True
            interaction = pending.interaction
            try:
                if not interaction.response.is_done():
                    await interaction.response.send_message(text, ephemeral=True)
                elif pending.deferred and not pending.original_used:
                    await interaction.edit_original_response(content=text)
                    pending.original_used = True
            except discord.HTTPException as e:
                log.warning("discord: interaction %s was left unanswered: %s", interaction.id, e)

    def _forget_old(self) -> None:
        now = time.monotonic()
        for iid in [i for i, p in self._pending.items() if now - p.received > TOKEN_LIFETIME]:
            del self._pending[iid]

    # --- answers going back ---------------------------------------------------------------------

    def pending_for(self, ctx: RunContext) -> _Pending | None:
        """The interaction a run's reply goes back through: its newest input's, while its token lives."""
        for entry in reversed(ctx.inputs):
            iid = (entry.meta or {}).get("interaction_id")
            pending = self._pending.get(int(iid)) if iid else None
            if pending is not None and time.monotonic() - pending.received < TOKEN_LIFETIME:
                return pending
        return None

    async def answer(self, pending: _Pending, content: str, ctx: RunContext) -> dict[str, Any]:
        """Send ``content`` through the interaction: the response (or the deferred one, edited),
        then followups, split at 2000 characters.

        Raises:
            SendFailed: Discord refused a part (the error says how many went out).
        """
        interaction = pending.interaction
        ids: list[str] = []
        async with pending.lock:
            if pending.timer is not None:
                pending.timer.cancel()
            for i, part in enumerate(split_message(content, MAX_LENGTH)):
                try:
                    ids.append(str(await self._send_part(pending, part)))
                except discord.HTTPException as e:
                    sent = f" (parts sent: {', '.join(ids)})" if ids else ""
                    raise SendFailed("discord", interaction.channel_id or 0, f"{e.status} {e.text}{sent}") from e
                await ctx.part_sent(i, ids[-1])
            pending.answered = True
        return {"message_ids": ids, "interaction": str(interaction.id)}

    async def _send_part(self, pending: _Pending, part: str) -> int:
        interaction = pending.interaction
        if not interaction.response.is_done():
            callback = await interaction.response.send_message(part, allowed_mentions=SAFE_MENTIONS)
            pending.original_used = True
            return callback.message_id or 0
        if pending.deferred and not pending.original_used:
            message = await interaction.edit_original_response(content=part, allowed_mentions=SAFE_MENTIONS)
            pending.original_used = True
            return message.id
        followup = await interaction.followup.send(part, wait=True, allowed_mentions=SAFE_MENTIONS)
        return followup.id
