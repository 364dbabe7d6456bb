"""The hub's chat commands on Telegram (``hub.commands``): registered with ``setMyCommands`` at
start, and recognised in messages with python-telegram-bot's ``CommandHandler``.

The menus, by scope: private chats get every command anyone may use; groups the same but
``/start`` (Telegram's button for beginning a private chat); each user whom ``[roles]`` gives
more commands gets a menu of their own in their private chat with the bot. With ``[commands]
enabled = false`` the menus are deleted, so Telegram shows none.

A message is a command when ``CommandHandler`` says so: it begins with ``/name`` or
``/name@thisbot`` (``/name@otherbot`` is another bot's) and names a command that is on; the
rest of the text is its arguments. Any other ``/word`` stays text, for the model.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from telegram import (
    BotCommand,
    BotCommandScope,
    BotCommandScopeAllGroupChats,
    BotCommandScopeAllPrivateChats,
    BotCommandScopeChat,
    Update,
)
from telegram.error import TelegramError
from telegram.ext import CommandHandler

from hub import CommandCall, ExtensionError
from hub.platform import Backoff, parse_command

from ._client import TelegramClient

if TYPE_CHECKING:
    from hub import Hub

__all__ = ["TelegramCommands", "MAX_COMMANDS", "PRIVATE_ONLY"]

log = logging.getLogger("hub_telegram")

MAX_COMMANDS = 100
"""Telegram keeps at most this many commands per menu."""
PRIVATE_ONLY = frozenset({"start"})
"""Commands left out of the groups' menu (still answered there when typed)."""


async def _never_called(update: Any, context: Any) -> None:
    """CommandHandler's callback: only its ``check_update`` is used here."""


class TelegramCommands:
    """The commands of one bot: its menus (`register()`) and recognising one (`parse()`)."""

    def __init__(self, client: TelegramClient, hub: Hub) -> None:
        self.client = client
        self.hub = hub
        self._handlers: dict[str, CommandHandler[Any, None]] = {}

    # --- recognising one ----------------------------------------------------------------

    def parse(self, update: Update) -> CommandCall | None:
        """The command this update's message is, or None (not one, another bot's, or off)."""
        msg = update.message
        if msg is None or not msg.text or not msg.entities:
            return None
        names = self.hub.commands.names()
        group = msg.chat.type != "private"  # [commands] group_roles apply in groups and channels
        try:
            msg.get_bot()
        except RuntimeError:  # an update made without the bot (CommandHandler needs its name)
            me = self.client.me
            return parse_command(msg.text, names, bot_name=me.username if me is not None else None, group=group)
        for name in sorted(names):
            handler = self._handlers.get(name)
            if handler is None:
                handler = self._handlers[name] = CommandHandler(name, _never_called)
            if isinstance(handler.check_update(update), tuple):  # (args, filters): it is this command
                return CommandCall(name, msg.text[msg.entities[0].length :].strip(), group=group)
        return None

    # --- the menus ----------------------------------------------------------------------

    def menus(self) -> list[tuple[BotCommandScope, list[BotCommand]]]:
        """Each scope's menu, as `register()` sets them."""
        everyone, own = self.hub.commands.menus("telegram")

        def menu(infos: Any, *, group: bool = False) -> list[BotCommand]:
            cmds = [BotCommand(i.name, i.description) for i in infos if not (group and i.name in PRIVATE_ONLY)]
            if len(cmds) > MAX_COMMANDS:
                log.warning("telegram: %d commands; the menu shows the first %d", len(cmds), MAX_COMMANDS)
            return cmds[:MAX_COMMANDS]

        scopes: list[tuple[BotCommandScope, list[BotCommand]]] = [
            (BotCommandScopeAllPrivateChats(), menu(everyone)),
            (BotCommandScopeAllGroupChats(), menu(everyone, group=True)),
        ]
        for user, infos in own.items():
            if not user.lstrip("-").isdigit():
                log.info("telegram: [roles] names user %r: a menu of their own needs their numeric id", user)
                continue
            scopes.append((BotCommandScopeChat(int(user)), menu(infos)))
        return scopes

    async def register(self) -> None:
        """Set (or, with no command on, delete) every scope's menu; raises what Telegram raised."""
        bot = self.client.bot
        for scope, commands in self.menus():
            if commands:
                await bot.set_my_commands(commands, scope=scope)
            else:
                await bot.delete_my_commands(scope=scope)
        log.info(
            "telegram: command menus registered (%s)",
            ", ".join(f"/{n}" for n in sorted(self.hub.commands.names())) or "none",
        )

    async def keep_registering(self) -> None:
        """`register()` until it succeeds, after a failure waiting a growing delay (logged)."""
        backoff = Backoff(first=1.0, most=60.0, jitter=0.2)
        while True:
            try:
                await self.register()
                return
            except (TelegramError, ExtensionError) as e:
                delay = backoff.next()
                log.warning("telegram: registering the command menus failed (%s); retrying in %.0fs", e, delay)
                await asyncio.sleep(delay)
