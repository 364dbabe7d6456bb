"""The fake Discord, proven against the real client (discord.py).

No mocks: the test runs a real client against the loopback fake, so what passes here is what
the extension can rely on.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import warnings
from collections.abc import AsyncIterator

import aiohttp
import pytest

from hub.testing.discord import FakeDiscord

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # discord imports audioop
    import discord

# -- Discord -----------------------------------------------------------------------------------


class EchoClient(discord.Client):
    """Replies "echo: <content>" to every message not its own."""

    def __init__(self) -> None:
        intents = discord.Intents.default()
        intents.message_content = True
        super().__init__(intents=intents, guild_ready_timeout=0.05)
        self.ready = asyncio.Event()
        self.seen: list[discord.Message] = []

    async def on_ready(self) -> None:
        self.ready.set()

    async def on_message(self, message: discord.Message) -> None:
        assert self.user is not None
        if message.author.id == self.user.id:
            return
        self.seen.append(message)
        await message.channel.send(f"echo: {message.content}", reference=message)


@contextlib.asynccontextmanager
async def discord_client(dc: FakeDiscord, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[EchoClient]:
    dc.attach(monkeypatch)
    client = EchoClient()
    task = asyncio.ensure_future(client.start("fake-token"))
    try:
        await asyncio.wait_for(client.ready.wait(), 5)
        yield client
    finally:
        await client.close()
        await asyncio.wait_for(task, 2)


async def test_discord_login_message_reply_and_retried_429(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with FakeDiscord() as dc:
        async with discord_client(dc, monkeypatch) as client:
            assert [r.name for r in dc.requests[:2]] == ["GET /users/@me", "GET /oauth2/applications/@me"]
            assert dc.identifies[0]["token"] == "fake-token"
            assert client.get_channel(dc.channel_id) is not None

            dc.fail_next("POST /channels/{channel_id}/messages", status=429, retry_after=0.1)
            message_id = dc.push_message(dc.channel_id, f"<@{dc.bot_id}> hi")
            sent = await dc.wait_sent(1)
            seen = client.seen[0]
            assert seen.guild is not None and seen.guild.id == dc.guild_id
            assert [m.id for m in seen.mentions] == [dc.bot_id]
            assert sent[0]["content"] == f"echo: <@{dc.bot_id}> hi"
            assert sent[0]["reply_to"] == message_id
            # discord.py retried the 429 itself; the message landed once.
            calls = dc.calls("POST /channels/{channel_id}/messages")
            assert [c.status for c in calls] == [429, 200]
            assert calls[0].headers["Authorization"] == "Bot fake-token"

            dc.push_message(dc.dm_channel_id, "in a DM")
            await dc.wait_sent(2)
            assert client.seen[1].guild is None
            assert isinstance(client.seen[1].channel, discord.DMChannel)

            with pytest.raises(discord.HTTPException) as caught:
                await client.get_channel(dc.channel_id).send("x" * 2001)  # type: ignore[union-attr]
            assert caught.value.code == 50035 and caught.value.status == 400

            started = time.monotonic()
        assert time.monotonic() - started < 1.0


async def test_discord_resumes_and_replays_missed_events(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with FakeDiscord() as dc:
        async with discord_client(dc, monkeypatch) as client:
            await dc.disconnect(code=4000)
            dc.push_message(dc.channel_id, "sent while disconnected")
            await dc.wait_sent(1)
            assert dc.resumes and dc.resumes[0]["token"] == "fake-token"
            assert dc.connections[-1].startswith("/resume?")
            assert len(dc.identifies) == 1
            assert [m.content for m in client.seen] == ["sent while disconnected"]

            # (FakeDiscord.invalidate_session(resumable=False) works too, but discord.py
            # sleeps 5 s before any non-initial IDENTIFY: too slow for this suite.)


async def test_interactions_as_discord_has_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """discord.py's own CommandTree against the fake: a global command synced, an interaction
    dispatched to it and answered in its callback; a second answer is refused, and a first
    one after Discord's 3-second window finds the interaction gone."""
    from discord import app_commands

    async with FakeDiscord() as dc, discord_client(dc, monkeypatch) as client:
        tree = app_commands.CommandTree(client)
        answered = asyncio.Event()
        errors: list[BaseException] = []

        @tree.command(name="ping", description="Answers pong")
        async def ping(interaction: discord.Interaction, text: str | None = None) -> None:
            response = await interaction.response.send_message(f"pong {text or ''}".strip())
            assert response.message_id is not None
            try:
                await interaction.response.send_message("twice")  # discord.py refuses it itself
            except discord.InteractionResponded as e:
                errors.append(e)
            await interaction.followup.send("and a followup", wait=True)
            answered.set()

        synced = await tree.sync()
        assert [c.name for c in synced] == ["ping"] and dc.command_names() == ["ping"]
        iid = dc.push_interaction("ping", text="there")
        await asyncio.wait_for(answered.wait(), 5)
        assert dc.answers(iid) == ["pong there", "and a followup"] and len(errors) == 1

        late = dc.push_interaction("ping")
        dc.state.interactions[late].created -= 4  # as if it arrived four seconds ago
        token = dc.state.interactions[late].token
        async with aiohttp.ClientSession() as s:
            url = f"{dc.api_base}/interactions/{late}/{token}/callback"
            async with s.post(url, json={"type": 4, "data": {"content": "too late"}}) as resp:
                assert resp.status == 404 and (await resp.json())["code"] == 10062
            url = f"{dc.api_base}/interactions/{iid}/{dc.state.interactions[iid].token}/callback"
            async with s.post(url, json={"type": 4, "data": {"content": "again"}}) as resp:
                assert resp.status == 400 and (await resp.json())["code"] == 40060
