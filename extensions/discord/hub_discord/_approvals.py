"""Approvals on Discord: the question is a message with two buttons (Approve, Deny; message
components); a press is an interaction of type MESSAGE_COMPONENT whose ``custom_id`` names the
approval, answered through ``hub.approvals`` (only the person who asked, or an operator, is
accepted) and acknowledged with an ephemeral reply to the presser. Once settled, the buttons
are taken away. A press never reaches the inbox or the model.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import discord

from hub.platform import ApprovalRequest, Approver, SendFailed

from ._messages import SAFE_MENTIONS

if TYPE_CHECKING:
    from hub import Hub

    from ._bot import DiscordBot

__all__ = ["CUSTOM_ID_PREFIX", "DiscordApprover", "answer_press", "is_press"]

log = logging.getLogger("hub_discord")

CUSTOM_ID_PREFIX = "hub:approval:"
"""``custom_id`` of the buttons: ``hub:approval:yes:ID`` or ``hub:approval:no:ID``."""


def _view(approval_id: str) -> discord.ui.View:
    view = discord.ui.View(timeout=None)
    for label, verdict, style in (
        ("Approve", "yes", discord.ButtonStyle.success),
        ("Deny", "no", discord.ButtonStyle.danger),
    ):
        view.add_item(
            discord.ui.Button(label=label, style=style, custom_id=f"{CUSTOM_ID_PREFIX}{verdict}:{approval_id}")
        )
    return view


class DiscordApprover(Approver):
    """Asks in the channel with two buttons; remembers each question's message to settle it."""

    def __init__(self, bot: DiscordBot) -> None:
        self.bot = bot
        self._shown: dict[str, tuple[int, int, str]] = {}  # approval id -> channel, message, text

    async def ask(self, request: ApprovalRequest, ctx: Any) -> None:
        channel_id = int(ctx.context.args.channel_id)
        client = self.bot.client
        if client is None or client.is_closed():
            raise SendFailed("discord", channel_id, "the Discord client is not connected")
        channel = client.get_partial_messageable(channel_id)
        text = request.text[:1900]
        from ._bot import _mapped  # the bot imports this module: its error mapping is taken when used

        sent = await self.bot.governor.send(
            channel_id,
            lambda: _mapped(channel.send(text, view=_view(request.id), allowed_mentions=SAFE_MENTIONS)),
        )
        self._shown[request.id] = (channel_id, sent.id, text)

    async def settled(self, request: ApprovalRequest, message: str, ctx: Any) -> None:
        shown = self._shown.pop(request.id, None)
        client = self.bot.client
        if shown is None or client is None:  # asked before a restart: its buttons answer "already answered"
            return
        channel_id, message_id, text = shown
        from ._bot import _mapped  # as in ask

        partial = client.get_partial_messageable(channel_id).get_partial_message(message_id)
        try:
            await self.bot.governor.send(
                channel_id, lambda: _mapped(partial.edit(content=f"{text}\n— {message}", view=None))
            )
        except SendFailed as e:
            log.info("discord: approval %s: the question's buttons stay: %s", request.id, e)


def _custom_id(interaction: discord.Interaction) -> str | None:
    data: Any = interaction.data or {}
    custom_id = data.get("custom_id") if isinstance(data, dict) else None
    return custom_id if isinstance(custom_id, str) else None


def is_press(interaction: discord.Interaction) -> bool:
    custom_id = _custom_id(interaction)
    return (
        interaction.type == discord.InteractionType.component
        and isinstance(custom_id, str)
        and custom_id.startswith(CUSTOM_ID_PREFIX)
    )


async def answer_press(interaction: discord.Interaction, hub: Hub) -> None:
    """One press of an approval button: answered through the hub, acknowledged to the presser only."""
    custom_id = _custom_id(interaction) or ""
    verdict, _, approval_id = custom_id.removeprefix(CUSTOM_ID_PREFIX).partition(":")
    answer = await hub.approvals.answer(
        approval_id, approve=verdict == "yes", user=str(interaction.user.id), platform="discord"
    )
    try:
        await interaction.response.send_message(answer.message[:1900], ephemeral=True)
    except discord.HTTPException as e:  # the press is answered in the hub either way
        log.info("discord: answering the press of approval %s failed: %s", approval_id, e)
