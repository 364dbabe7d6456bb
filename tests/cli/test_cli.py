"""The command line, as a user runs it: real processes, a loopback model server."""

import asyncio
import json
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from hub.cli import main
from hub.testing import FakeOpenAI
from tests._support.processes import hub_cmd, setup_dir, spawn_hub


async def test_chat_answers_calls_an_operator_action_and_uses_its_result(tmp_path: Path) -> None:
    def second(body):
        last = body["messages"][-1]["content"]
        assert '"temperature": 72' in last  # the action's result is fed into the next step
        return "<response><output>It is 72°F and sunny in NYC.</output></response>"

    responses = [
        '<response><reasoning>weather</reasoning><action_call name="getWeather">{"location": "NYC"}</action_call></response>',
        second,
        "Bye!",
    ]
    async with FakeOpenAI(responses) as fake:
        setup_dir(tmp_path, fake.url)
        code, out, err = await hub_cmd(
            "chat", cwd=tmp_path, stdin="weather in NYC?\nbye\n", env={"TEST_KEY": "sk-test"}
        )
    assert code == 0, err
    assert out == "It is 72°F and sunny in NYC.\nBye!\n"
    assert len(fake.bodies) == 3
    assert "You are Wendy." in fake.bodies[0]["messages"][0]["content"]
    assert "You report the weather." in fake.bodies[0]["messages"][0]["content"]
    assert fake.requests[0].headers["Authorization"] == "Bearer sk-test"
    # the conversation and its runs are on disk: `hub runs` and `hub trace` read them
    code, out, err = await hub_cmd("runs", "--json", cwd=tmp_path)
    runs = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [r["state"] for r in runs] == ["completed", "completed"]
    code, out, err = await hub_cmd("trace", runs[-1]["id"][:8], cwd=tmp_path)
    assert code == 0 and 'getWeather({"location": "NYC"})' in out and "It is 72°F" in out


async def test_chat_goes_on_across_sessions(tmp_path: Path) -> None:
    async with FakeOpenAI(["Hello Ann.", "You are Ann."]) as fake:
        setup_dir(tmp_path, fake.url)
        await hub_cmd("chat", cwd=tmp_path, stdin="I am Ann\n")
        code, out, _ = await hub_cmd("chat", cwd=tmp_path, stdin="who am I?\n")
    assert code == 0 and out == "You are Ann.\n"
    assert "I am Ann" in fake.prompt(1) and "Hello Ann." in fake.prompt(1)


async def test_unreachable_model_is_one_clear_line(tmp_path: Path) -> None:
    setup_dir(tmp_path, "http://127.0.0.1:9/v1")
    cfg = tmp_path / "config.toml"
    text = cfg.read_text().replace(
        'api_key = "${TEST_KEY}"', 'api_key = "x"\nmax_retries = 1\nretry_base_delay = 0.01\ntimeout = 2'
    )
    cfg.write_text(text)
    code, out, err = await hub_cmd("chat", cwd=tmp_path, stdin="hello\n")
    # the user is told, in words without internals ([agent] failure_reply); the operator gets the reason
    assert code == 0 and out == "Sorry, something went wrong on my side. Please try again in a moment.\n"
    lines = [ln for ln in err.splitlines() if ln.startswith("[run")]
    assert len(lines) == 1 and "failed: model unavailable after 2 attempts" in lines[0]


async def test_config_error_is_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("[model]\nprovider = 'gpt'\n")
    code, out, err = await hub_cmd("chat", cwd=tmp_path)
    assert code == 2
    assert err.strip().count("\n") == 0
    assert "config.toml: model.provider: Input should be 'openai', 'local' or 'auto'" in err


async def test_check_reports_problems_where_they_are(tmp_path: Path) -> None:
    setup_dir(tmp_path, "http://127.0.0.1:9/v1")
    code, out, err = await hub_cmd("check", cwd=tmp_path)
    assert code == 0 and "extensions: cli, weather" in out and "personas: default" in out
    (tmp_path / "contexts" / "default.toml").write_text("name = 'x'\ninstructions = 3\n")
    code, out, err = await hub_cmd("check", cwd=tmp_path)
    assert code == 2 and "default.toml: instructions: Input should be a valid string" in err


FAILURE = "Sorry, something went wrong on my side. Please try again in a moment."


async def _chat_waiting_on_the_model(tmp_path: Path, fake_url: str, asked: asyncio.Event) -> Any:
    setup_dir(tmp_path, fake_url)
    chat = await spawn_hub("chat", cwd=tmp_path, env={"TEST_KEY": "x"})
    assert chat.stdin is not None
    chat.stdin.write(b"tell me a long story\n")
    await chat.stdin.drain()
    await asyncio.wait_for(asked.wait(), 30)  # its run is asking the model, which takes its time
    return chat


async def test_hub_stop_ends_a_run_another_process_holds(tmp_path: Path) -> None:
    asked = asyncio.Event()

    def slow(body: Any) -> str:
        asked.set()
        return "never shown"

    async with FakeOpenAI([slow], latency=60) as fake:
        chat = await _chat_waiting_on_the_model(tmp_path, fake.url, asked)
        code, out, err = await hub_cmd("runs", "--json", "--state", "running", cwd=tmp_path)
        (run,) = [json.loads(line) for line in out.splitlines()]
        code, out, err = await hub_cmd("stop", run["id"][:8], cwd=tmp_path)
        assert code == 0, err
        assert out == f"run {run['id'][:10]} {run['context']}: killed (stopped by operator)\n"
        code, _, err = await hub_cmd("stop", run["id"][:8], cwd=tmp_path)
        assert code == 2 and "is not running: it ended killed (stopped by operator)" in err
        chat.stdin.close()
        said, log = await asyncio.wait_for(chat.communicate(), 30)
    assert said.decode() == FAILURE + "\n"  # the user is told, not left waiting
    assert f"[run {run['id'][:8]} killed: stopped by operator]" in log.decode()


async def test_stop_typed_in_hub_chat_ends_the_answer_being_written(tmp_path: Path) -> None:
    asked = asyncio.Event()

    def slow(body: Any) -> str:
        asked.set()
        return "never shown"

    async with FakeOpenAI([slow], latency=60) as fake:
        chat = await _chat_waiting_on_the_model(tmp_path, fake.url, asked)
        chat.stdin.write(b"/stop\n/help\n")
        chat.stdin.close()
        said, log = await asyncio.wait_for(chat.communicate(), 30)
        asked_model = len(fake.bodies)
    lines = said.decode().splitlines()
    assert lines[0] == "Stopped." and lines[1] == "Commands:" and "/stop — Stop the answer I am writing" in lines
    assert FAILURE not in said.decode() and asked_model == 1  # the commands asked no model
    assert "killed: stopped by user]" in log.decode()


def test_version_is_the_installed_distributions(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"hub {version('hub')}\n"
