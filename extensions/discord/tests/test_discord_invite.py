"""The invite asks for what the bot does: the permissions the README and the Discord page name,
and the number in the page's link, are discord.py's flags of the same names, Attach Files
among them (files and voice notes go out as attachments); a bot in no server logs its link."""

from __future__ import annotations

import logging
import re
import warnings
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from hub import Hub, ScriptedModel
from hub.testing import temp_config
from hub.testing.discord import FakeDiscord
from hub_discord import INVITE_PERMISSIONS, DiscordSettings, extension, invite_url

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # discord imports audioop
    import discord

ROOT = Path(__file__).resolve().parents[3]
# What the bot needs, in Discord's own words (the portal's URL Generator), and why
NEEDED = {
    "View Channels": "see the channels and read their messages",
    "Send Messages": "answer",
    "Send Messages in Threads": "answer in threads",
    "Read Message History": "quote the message it answers",
    "Attach Files": "send pictures, files and voice notes",
}


def flags(names: list[str]) -> discord.Permissions:
    """The permissions the portal calls ``names`` ("View Channels" is discord.py's
    ``view_channel``); an unknown name fails."""
    perms = discord.Permissions.none()
    for name in names:
        flag = name.lower().replace(" ", "_")
        flag = flag if flag in discord.Permissions.VALID_FLAGS else flag.removesuffix("s")
        assert flag in discord.Permissions.VALID_FLAGS, f"no Discord permission is called {name!r}"
        setattr(perms, flag, True)
    return perms


def test_the_invite_permissions_are_the_needed_ones_attach_files_included() -> None:
    assert INVITE_PERMISSIONS == flags(list(NEEDED))
    assert INVITE_PERMISSIONS.attach_files and INVITE_PERMISSIONS.value & 32768
    # nothing more than that: no administrator, no managing anything
    assert not INVITE_PERMISSIONS.administrator and not INVITE_PERMISSIONS.manage_messages


def test_the_readme_names_the_invite_permissions() -> None:
    readme = (ROOT / "README.md").read_text()
    quick = re.search(r"^## Quick start: Discord\n(.*?)^## ", readme, re.S | re.M)
    assert quick
    named = re.search(r"permissions (.*?); open", " ".join(quick.group(1).split()))
    assert named, "the Discord quick start names the invite's permissions"
    assert flags(named.group(1).split(", ")) == INVITE_PERMISSIONS


def test_the_discord_page_names_them_and_its_link_carries_their_number() -> None:
    page = (ROOT / "docs/platforms/discord.md").read_text()
    invite = page.split("## 2. Invite it to a server", 1)[1].split("\n## ", 1)[0]
    assert flags(re.findall(r"\*\*([A-Z][\w ]+)\*\*", invite)) == INVITE_PERMISSIONS
    (link,) = re.findall(r"https://discord\.com/oauth2/authorize\S+", invite)
    query = parse_qs(urlsplit(link).query)
    assert query["permissions"] == [str(INVITE_PERMISSIONS.value)] and query["scope"] == ["bot"]


def test_the_invite_url_has_the_permissions_and_the_application() -> None:
    query = parse_qs(urlsplit(invite_url(1234)).query)
    assert query["client_id"] == ["1234"] and query["scope"] == ["bot"]
    assert discord.Permissions(int(query["permissions"][0])) == INVITE_PERMISSIONS


async def test_a_bot_in_no_server_logs_its_invite_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async with FakeDiscord(token="fake-token") as dc:
        dc.attach(monkeypatch)
        dc.state.guilds.clear()  # a new bot, invited nowhere yet
        ext = extension(DiscordSettings(token="fake-token"), resolve=dc.resolve)
        with caplog.at_level(logging.WARNING, logger="hub_discord"):
            async with Hub(temp_config(tmp_path), model=ScriptedModel([]), load_extensions=False, extensions=[ext]):
                pass
    (line,) = [r.getMessage() for r in caplog.records if "invite it" in r.getMessage()]
    assert line.endswith(invite_url(dc.bot_id))


async def test_a_bot_in_a_server_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async with FakeDiscord(token="fake-token") as dc:
        dc.attach(monkeypatch)
        ext = extension(DiscordSettings(token="fake-token"), resolve=dc.resolve)
        with caplog.at_level(logging.INFO, logger="hub_discord"):
            async with Hub(temp_config(tmp_path), model=ScriptedModel([]), load_extensions=False, extensions=[ext]):
                pass
    messages = [r.getMessage() for r in caplog.records]
    assert any("connected as" in m for m in messages) and not any("invite it" in m for m in messages)
