"""parse_command: ``/name args`` in a message's text, for the platforms whose client does not
parse commands itself (the terminal)."""

from __future__ import annotations

from hub import CommandCall
from hub.platform import parse_command

NAMES = {"help", "weather", "stop"}


def test_a_command_and_its_arguments() -> None:
    assert parse_command("/help", NAMES) == CommandCall("help")
    assert parse_command("  /weather   Paris, France \n", NAMES) == CommandCall("weather", "Paris, France")
    assert parse_command("/weather line one\nline two", NAMES) == CommandCall("weather", "line one\nline two")
    assert parse_command("/HELP", NAMES) == CommandCall("help")  # as Telegram, case-insensitively


def test_what_is_not_a_command_stays_text() -> None:
    for text in ("help", "/frobnicate", "please /help", "/", "/ help", "//help", "/help-me", "/" + "a" * 33):
        assert parse_command(text, NAMES) is None, text


def test_a_command_addressed_to_a_bot() -> None:
    assert parse_command("/help@hub_bot", NAMES, bot_name="hub_bot") == CommandCall("help")
    assert parse_command("/help@Hub_Bot now", NAMES, bot_name="@hub_bot") == CommandCall("help", "now")
    assert parse_command("/help@other_bot", NAMES, bot_name="hub_bot") is None  # another bot's
    assert parse_command("/help@hub_bot", NAMES) is None  # no name of ours to match
