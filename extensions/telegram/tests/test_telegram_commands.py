"""The hub's chat commands on Telegram, and the failure reply: the real python-telegram-bot
client against the loopback fake (``hub.testing.telegram``); a real ``hub run`` process for the
failure reply across a SIGKILL."""

from __future__ import annotations

import asyncio
import signal
import subprocess
from pathlib import Path

import pytest
from test_telegram import TOKEN, _start_hub, reply, running, texts

from hub import CommandContext, Extension, command
from hub.testing import FakeOpenAI, temp_config
from hub.testing.telegram import FakeTelegram, TelegramState

pytestmark = [pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")]

FAILURE = "Sorry, something went wrong on my side. Please try again in a moment."
BUILT_IN = ["start", "help", "new", "stop", "link", "unlink"]


@command("weather", description="The weather where you are", arguments="a city")
async def weather(cmd: CommandContext) -> str:
    return f"Sunny in {cmd.args}."


@command("purge", description="Forget everything (admins)", roles=["admin"])
async def purge(cmd: CommandContext) -> str:
    return "Purged."


TOOLS = Extension("tools", commands=[weather, purge])


async def test_the_menus_are_registered_at_start_per_scope(tmp_path: Path) -> None:
    config = temp_config(tmp_path)
    config.roles = {"admin": {"telegram": ["77"]}}
    async with FakeTelegram() as tg, running(tmp_path, tg, config=config, extensions=[TOOLS]):
        await tg.wait_for(lambda: bool(tg.menu("chat", 77)))
        private, groups, admin = tg.menu("all_private_chats"), tg.menu("all_group_chats"), tg.menu("chat", 77)
        (call,) = [c for c in tg.calls("setMyCommands") if c.params["scope"]["type"] == "all_private_chats"]
    assert private == [*BUILT_IN, "weather"]
    assert groups == ["help", "new", "stop", "link", "unlink", "weather"]  # /start begins a private chat
    assert admin == [*BUILT_IN, "weather", "purge"]  # a role's commands, in that user's chat only
    assert call.params["commands"][0] == {"command": "start", "description": "Say hello and what I am"}


async def test_menus_are_deleted_when_commands_are_off(tmp_path: Path) -> None:
    config = temp_config(tmp_path)
    config.commands.enabled = False
    state = TelegramState()
    state.command_menus[('{"type": "all_private_chats"}', "")] = [{"command": "old", "description": "stale"}]
    async with FakeTelegram(state=state) as tg, running(tmp_path, tg, [reply("from the model")], config=config) as h:
        await tg.wait_calls("deleteMyCommands", 2)
        tg.push_message(chat_id=42, text="/start")
        await tg.wait_sent(1)
    assert tg.menu("all_private_chats") == [] and texts(tg) == ["from the model"]
    assert len(h.model.requests) == 1  # not a command: the model read it


async def test_start_is_answered_without_a_model_request(tmp_path: Path) -> None:
    async with FakeTelegram() as tg, running(tmp_path, tg, default=None) as h:
        tg.push_message(chat_id=42, text="/start")
        await tg.wait_sent(1)
        await h.idle()
    assert texts(tg) == ["Hi! Send me a message, or /help to see what I can do."]
    assert h.model.requests == []


async def test_commands_in_groups_with_the_bots_name_and_unknown_words_for_the_model(tmp_path: Path) -> None:
    async with FakeTelegram() as tg, running(tmp_path, tg, [reply("the model read it")], extensions=[TOOLS]) as h:
        tg.push_message(chat_id=-100, text="/weather@test_bot Paris", from_id=5, chat_type="supergroup")
        await tg.wait_sent(1)
        tg.push_message(chat_id=-100, text="/weather@other_bot Rome", from_id=5, chat_type="supergroup")
        tg.push_message(chat_id=42, text="/frobnicate now")  # not a command: text for the model
        await tg.wait_sent(2)
        await h.idle()
    assert texts(tg) == ["Sunny in Paris.", "the model read it"]
    assert len(h.model.requests) == 1 and "/frobnicate now" in h.model.requests[0].messages[-1]["content"]


async def test_in_a_group_new_is_for_admins(tmp_path: Path) -> None:
    config = temp_config(tmp_path)
    config.roles = {"admin": {"telegram": ["77"]}}
    async with FakeTelegram() as tg, running(tmp_path, tg, config=config, default=None):
        tg.push_message(chat_id=-100, text="/new@test_bot", from_id=5, chat_type="supergroup")
        await tg.wait_sent(1)
        tg.push_message(chat_id=-100, text="/new@test_bot", from_id=77, chat_type="supergroup")
        await tg.wait_sent(2)
        tg.push_message(chat_id=5, text="/new", from_id=5)  # in private, anyone starts over
        await tg.wait_sent(3)
    assert texts(tg) == [
        "You may not use /new here: in a group it needs the role admin.",
        "Started a new conversation: what we said before is forgotten.",
        "Started a new conversation: what we said before is forgotten.",
    ]


async def test_command_roles_are_per_person_so_a_linked_account_holds_them_until_unlinked(tmp_path: Path) -> None:
    """Issue 38: [commands] roles (and an extension's own) granted to one identity hold for
    every identity linked to it with /link, and no longer once it is unlinked."""
    config = temp_config(tmp_path)
    config.roles = {"admin": {"telegram": ["77"]}}
    config.commands.roles = {"weather": ["admin"]}
    async with FakeTelegram() as tg, running(tmp_path, tg, config=config, extensions=[TOOLS], default=None):
        sent = 0

        async def say(chat: int, text: str) -> str:
            nonlocal sent
            tg.push_message(chat_id=chat, text=text, from_id=chat)
            sent += 1
            await tg.wait_sent(sent)
            return texts(tg)[-1]

        assert await say(5, "/weather Paris") == "You may not use /weather: it needs the role admin."
        assert await say(5, "/purge") == "You may not use /purge."
        given = await say(77, "/link")
        code = given.split("code: ", 1)[1].split()[0]
        assert (await say(5, f"/link {code}")).startswith("Linked: telegram:5, telegram:77")
        assert await say(5, "/weather Paris") == "Sunny in Paris."
        assert await say(5, "/purge") == "Purged."
        assert "/purge" in await say(5, "/help")
        assert await say(5, "/unlink") == "Unlinked: this account is on its own now."
        assert await say(5, "/weather Paris") == "You may not use /weather: it needs the role admin."
        assert await say(5, "/purge") == "You may not use /purge."
        assert "/purge" not in await say(5, "/help")
        assert await say(77, "/purge") == "Purged."  # the listed identity keeps its role


async def test_new_leaves_the_next_prompt_without_the_earlier_history(tmp_path: Path) -> None:
    answers = [reply("Noted, Ada."), reply("I do not know your name.")]
    async with FakeTelegram() as tg, running(tmp_path, tg, answers) as h:
        tg.push_message(chat_id=42, text="my name is Ada")
        await tg.wait_sent(1)
        tg.push_message(chat_id=42, text="/new")
        await tg.wait_sent(2)
        tg.push_message(chat_id=42, text="what is my name?")
        await tg.wait_sent(3)
    assert texts(tg)[1] == "Started a new conversation: what we said before is forgotten."
    prompt = h.model.requests[-1].messages[-1]["content"]
    assert "what is my name?" in prompt and "my name is Ada" not in prompt and "Noted, Ada." not in prompt


async def test_stop_during_a_slow_answer_kills_the_run_and_sends_nothing_more(tmp_path: Path) -> None:
    slow = '<response><output type="telegram:send">On it.</output><output type="telegram:send">' + (
        "and then " * 400 + "</output></response>"
    )
    from hub import ScriptedModel

    model = ScriptedModel([slow], chunk=4, chunk_delay=0.01)
    async with FakeTelegram() as tg, running(tmp_path, tg, model=model) as h:
        tg.push_message(chat_id=42, text="tell me a long story")
        await tg.wait_sent(1)  # the first output is out; the second is being written
        tg.push_message(chat_id=42, text="/stop")
        (story,) = await h.wait_results(1)  # (a command's run takes no plugin hook)
        await tg.wait_sent(2)
        tg.push_message(chat_id=42, text="/help")  # a sentinel: once it is answered, nothing else is coming
        await tg.wait_sent(3)
    assert (story.state, story.reason) == ("killed", "stopped by user")
    assert texts(tg)[:2] == ["On it.", "Stopped."] and texts(tg)[2].startswith("Commands:")
    assert len(model.requests) == 1


# -- the failure reply, across a SIGKILL -----------------------------------------------------


def _config(tmp_path: Path, tg: FakeTelegram, model_port: int) -> Path:
    config = tmp_path / "config.toml"
    config.write_text(
        f"""
[hub]
data_dir = "data"
contexts_dir = "contexts"
shutdown_grace = 1

[model]
provider = "openai"
base_url = "http://127.0.0.1:{model_port}/v1"
api_key = "x"
name = "hub"
max_retries = 3
retry_base_delay = 0.3
retry_max_delay = 0.6

[extensions.telegram]
token = "${{TELEGRAM_BOT_TOKEN}}"
base_url = "{tg.base_url}/bot"
poll_timeout = 5
""",
        encoding="utf-8",
    )
    return config


async def test_the_failure_reply_is_sent_exactly_once_across_sigkills(tmp_path: Path) -> None:
    model = FakeOpenAI(default="never")
    await model.start()
    model.fail_next("chat", status=500, count=10_000)  # the model server answers 500, always
    state = TelegramState(token=TOKEN)
    log_path = tmp_path / "hub.log"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        async with FakeTelegram(state=state) as tg:
            config = _config(tmp_path, tg, model.port)
            procs.append(_start_hub(config, log_path))
            tg.push_message(chat_id=1, text="hello?")
            # (generous bounds: a loaded machine starts a process slowly) its run is retrying the model
            await model.wait_for(lambda: len(model.requests) >= 2, timeout=60)
            procs[0].send_signal(signal.SIGKILL)
            procs[0].wait(5)
            assert not any(s["chat_id"] == 1 for s in tg.sent), "killed before the run failed"

            procs.append(_start_hub(config, log_path))  # takes the input up again: it fails again
            await tg.wait_for(lambda: any(s["chat_id"] == 1 for s in tg.sent), timeout=60)
            # killed once the reply is recorded sent (no longer owed): its input is done. (Killed
            # between Telegram's answer and that record, it would be sent again: at least once.)
            async with asyncio.timeout(60):
                while "the failure reply was sent" not in log_path.read_text():
                    await asyncio.sleep(0.02)
            procs[1].send_signal(signal.SIGKILL)
            procs[1].wait(5)

            procs.append(_start_hub(config, log_path))
            tg.push_message(chat_id=2, text="a last one")  # a sentinel: answered after anything left over
            await tg.wait_for(lambda: any(s["chat_id"] == 2 for s in tg.sent), timeout=60)
            procs[2].send_signal(signal.SIGTERM)
            assert procs[2].wait(30) == 0
            to_1 = [s["text"] for s in tg.sent if s["chat_id"] == 1]
            assert to_1 == [FAILURE], f"{to_1}\n{log_path.read_text()[-3000:]}"
            assert [s["text"] for s in tg.sent if s["chat_id"] == 2] == [FAILURE]
            assert "model" not in FAILURE and "500" not in " ".join(texts(tg))  # no internals
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(5)
        await model.stop()


async def test_a_failure_reply_waiting_out_a_429_is_sent_after_a_sigkill(tmp_path: Path) -> None:
    """The failure reply is recorded before it is sent: a hub killed while Telegram makes it
    wait (429) sends it once after the restart, though the run and its input are over."""
    model = FakeOpenAI(default="never")
    await model.start()
    model.fail_next("chat", status=500, count=10_000)  # the model server answers 500, always
    log_path = tmp_path / "hub.log"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        async with FakeTelegram(state=TelegramState(token=TOKEN)) as tg:
            config = _config(tmp_path, tg, model.port)
            tg.fail_next("sendMessage", status=429, retry_after=60)  # the reply's first send waits a minute
            procs.append(_start_hub(config, log_path))
            tg.push_message(chat_id=1, text="hello?")
            await tg.wait_calls("sendMessage", 1, timeout=60)  # answered 429: the hub waits it out
            procs[0].send_signal(signal.SIGKILL)
            procs[0].wait(5)
            assert tg.sent == []

            procs.append(_start_hub(config, log_path))
            await tg.wait_for(lambda: any(s["chat_id"] == 1 for s in tg.sent), timeout=60)
            tg.push_message(chat_id=2, text="a last one")  # a sentinel: answered after anything left over
            await tg.wait_for(lambda: any(s["chat_id"] == 2 for s in tg.sent), timeout=60)
            procs[1].send_signal(signal.SIGTERM)
            assert procs[1].wait(30) == 0
            to_1 = [s["text"] for s in tg.sent if s["chat_id"] == 1]
            assert to_1 == [FAILURE], f"{to_1}\n{log_path.read_text()[-3000:]}"
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(5)
        await model.stop()


async def test_a_second_command_arrives_while_the_first_is_answered(tmp_path: Path) -> None:
    async with FakeTelegram() as tg, running(tmp_path, tg, default=None) as h:
        for text in ("/help", "/start", "/stop"):
            tg.push_message(chat_id=7, text=text)
        await tg.wait_sent(3)
        await h.idle()
    assert sorted(t.splitlines()[0] for t in texts(tg)) == sorted(
        ["Commands:", "Hi! Send me a message, or /help to see what I can do.", "Nothing to stop."]
    )
    assert h.model.requests == []


def test_an_update_made_without_the_bot_is_still_parsed() -> None:
    from types import SimpleNamespace

    from telegram import Update

    from hub import CommandCall
    from hub_telegram import TelegramClient, TelegramSettings
    from hub_telegram._commands import TelegramCommands

    hub = SimpleNamespace(commands=SimpleNamespace(names=lambda: {"help", "weather"}))
    parser = TelegramCommands(TelegramClient(TelegramSettings(token=TOKEN)), hub)  # type: ignore[arg-type]

    def update(text: str) -> Update:
        message = {
            "message_id": 1,
            "date": 0,
            "chat": {"id": 42, "type": "private"},
            "from": {"id": 42, "is_bot": False, "first_name": "Ada"},
            "text": text,
            "entities": [{"type": "bot_command", "offset": 0, "length": len(text.split()[0])}],
        }
        return Update.de_json({"update_id": 1, "message": message}, None)

    assert parser.parse(update("/weather Paris")) == CommandCall("weather", "Paris")
    assert parser.parse(update("/frobnicate")) is None
