"""MCP servers as actions, against servers nobody on the project wrote (mcp-server-time and
mcp-server-git from the package index) and a server built with the SDK that misbehaves on
request (fault_server.py): every failure path of a server is injected here."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from hub import ActionCallLog, ActionResultLog, RunState
from hub.models.openai import OpenAIModel
from hub.testing import FakeOpenAI, tool_turn
from tests.mcp.conftest import fault_server, mcp_children, time_server

CLI = ("cli:session", {"user": "ann"})


def call(name: str, args: str = "{}") -> str:
    return f'<response><action_call name="{name}">{args}</action_call></response>'


def reply(text: str) -> str:
    return f"<response><output>{text}</output></response>"


def results(result) -> list[ActionResultLog]:
    return [e for e in result.logs if isinstance(e, ActionResultLog)]


async def test_a_bot_answers_what_time_it_is_in_tokyo_with_the_real_time_server(make_hub, config, out) -> None:
    """The issue's "done when": a tools-style bot calls mcp-server-time, its trace shows the
    call and the result, and no process is left once the hub stops."""
    config.mcp = {"time": time_server()}
    config.model.prompt_style = "tools"
    fake = FakeOpenAI(
        [
            tool_turn(None, ("time__get_current_time", {"timezone": "Asia/Tokyo"})),
            lambda body: "It is " + re.search(r"T(\d\d:\d\d)", body["messages"][-1]["content"]).group(1) + " in Tokyo.",
        ]
    )
    async with fake, make_hub(OpenAIModel("m", base_url=fake.url, api_key="k"), cfg=config) as hub:
        assert {"time__get_current_time", "time__convert_time"} <= set(hub.actions)
        assert mcp_children(), "the server runs as the hub's child"
        result = await hub.send(*CLI, "what time is it in Tokyo?")
        events = await hub.runs.events(result.run_id)
    tool = next(t for t in fake.bodies[0]["tools"] if t["function"]["name"] == "time__get_current_time")
    assert "timezone" in tool["function"]["parameters"]["properties"]
    (res,) = results(result)
    assert res.ok and res.data["timezone"] == "Asia/Tokyo" and res.data["datetime"].endswith("+09:00")
    assert any(isinstance(e, ActionCallLog) and e.name == "time__get_current_time" for e in events)
    assert any(isinstance(e, ActionResultLog) and e.ok for e in events), "the trace holds the result"
    assert re.fullmatch(r"It is \d\d:\d\d in Tokyo\.\n", out.getvalue())
    assert mcp_children() == []


@pytest.mark.skipif(shutil.which("git") is None, reason="mcp-server-git needs the git program")
async def test_the_git_server_reads_a_repository(make_hub, config, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "README.md").write_text("hello\n")
    config.mcp = {"git": config.mcp.get("git") or _git(repo)}
    model = [call("git__git_status", f'{{"repo_path": "{repo}"}}'), reply("there is an untracked file")]
    async with make_hub(model, cfg=config) as hub:
        assert "git__git_log" in hub.actions
        result = await hub.send(*CLI, "what is the state of the repo?")
    (res,) = results(result)
    assert res.ok and "README.md" in str(res.data)


def _git(repo: Path):
    from hub.config import McpServerSection

    return McpServerSection(command=["mcp-server-git", "--repository", str(repo)])


async def test_arguments_are_checked_against_the_tool_schema_before_the_call(make_hub, config) -> None:
    config.mcp = {"f": fault_server()}
    model = [call("f__echo", '{"text": 42}'), call("f__echo", '{"words": "x"}'), reply("ok")]
    async with make_hub(model, cfg=config) as hub:
        result = await hub.send(*CLI, "echo")
    first, second = results(result)[:2]
    assert not first.ok and "invalid arguments" in first.error and "text: 42 is not of type 'string'" in first.error
    assert not second.ok and "'text' is a required property" in second.error


async def test_a_server_that_will_not_start_is_named_and_the_hub_runs_without_it(make_hub, config, caplog) -> None:
    config.mcp = {"broken": fault_server("nostart"), "f": fault_server()}
    async with make_hub([call("f__echo", '{"text": "hi"}'), reply("hi")], cfg=config) as hub:
        assert "f__echo" in hub.actions and not any(a.startswith("broken__") for a in hub.actions)
        (status,) = [s for s in hub.mcp.statuses() if s.name == "broken"]
        assert status.state == "down" and "refusing to start" in status.error
        result = await hub.send(*CLI, "say hi")
    assert result.state == RunState.COMPLETED and results(result)[0].data == "hi"
    assert any("mcp broken: the server did not start" in r.getMessage() for r in caplog.records)


async def test_a_crash_fails_the_call_in_flight_and_the_server_is_started_again(make_hub, config) -> None:
    config.mcp = {"f": fault_server()}
    model = [call("f__pid"), call("f__crash"), reply("it crashed")]
    async with make_hub(model, cfg=config) as hub:
        server = hub.mcp.servers["f"]
        server.backoff.first = 0.05
        first = await hub.send(*CLI, "crash it")
        pid_before = results(first)[0].data
        crashed = results(first)[1]
        async with asyncio.timeout(30):  # restarted with backoff
            while server.status.state != "up" or server.status.restarts < 1:
                await asyncio.sleep(0.05)
        hub.model.add(call("f__pid"), reply("back"))
        second = await hub.send(*CLI, "and now?")
    assert not crashed.ok and "stopped during the call" in crashed.error
    pid_after = results(second)[0].data
    assert results(second)[0].ok and pid_after != pid_before


async def test_a_call_that_hangs_is_cut_at_the_timeout(make_hub, config) -> None:
    config.mcp = {"f": fault_server(timeout=0.5)}
    async with make_hub([call("f__hang"), reply("too slow")], cfg=config) as hub:
        result = await hub.send(*CLI, "hang")
        hub.model.add(call("f__echo", '{"text": "still up"}'), reply("ok"))
        after = await hub.send(*CLI, "still there?")
    (res,) = results(result)
    assert not res.ok and "timed out after 0.5s" in res.error and res.duration < 5
    assert results(after)[0].data == "still up", "the server serves the next call"


async def test_garbage_on_the_servers_stdout_does_not_break_the_connection(make_hub, config) -> None:
    config.mcp = {"f": fault_server("garbage")}
    model = [call("f__garbage"), call("f__echo", '{"text": "fine"}'), reply("ok")]
    async with make_hub(model, cfg=config) as hub:
        result = await hub.send(*CLI, "go")
    assert [r.data for r in results(result)] == ["still here", "fine"]


async def test_a_huge_answer_is_cut_for_the_model(make_hub, config) -> None:
    config.mcp = {"f": fault_server(max_result_chars=1000)}
    async with make_hub([call("f__huge", '{"size": 3000000}'), reply("big")], cfg=config) as hub:
        result = await hub.send(*CLI, "big one")
    (res,) = results(result)
    assert res.ok and len(res.data) < 1100 and res.data.endswith("more characters cut]")


async def test_a_tool_with_a_schema_that_does_not_validate_is_left_out(make_hub, config) -> None:
    config.mcp = {"f": fault_server("badschema")}
    async with make_hub([call("f__broken", '{"x": 1}'), reply("ok")], cfg=config) as hub:
        assert "f__echo" in hub.actions and "f__broken" not in hub.actions
        assert "not a valid JSON schema" in hub.mcp.servers["f"].status.skipped["broken"]
        result = await hub.send(*CLI, "go")
    assert "unknown action 'f__broken'" in results(result)[0].error


async def test_is_error_is_an_action_error_and_pictures_join_the_run(make_hub, config) -> None:
    from hub.testing import png

    config.mcp = {"f": fault_server(env={"FAULT_PNG_HEX": png(8, 8).hex()})}
    async with make_hub([call("f__fail"), call("f__picture"), reply("ok")], cfg=config) as hub:
        result = await hub.send(*CLI, "go")
    failed, picture = results(result)
    assert not failed.ok and "the tool failed" in failed.error
    assert picture.ok and picture.data["text"] == "a red square"
    (handle,) = picture.data["files"]
    assert handle["media"].startswith("media:") and handle["type"] == "image/png"


async def test_a_tool_the_server_adds_later_is_picked_up(make_hub, config) -> None:
    config.mcp = {"f": fault_server()}
    async with make_hub([call("f__add_tool", '{"name": "late"}'), reply("added")], cfg=config) as hub:
        assert "f__late" not in hub.actions
        await hub.send(*CLI, "add one")
        async with asyncio.timeout(15):
            while "f__late" not in hub.actions:
                await asyncio.sleep(0.02)
        hub.model.add(call("f__late"), reply("ok"))
        result = await hub.send(*CLI, "call it")
    assert results(result)[0].data == "late was added"


async def test_the_tools_allow_list_and_roles(make_hub, config) -> None:
    config.mcp = {"f": fault_server(tools=["echo"], roles=["admin"])}
    async with make_hub([call("f__echo", '{"text": "x"}'), reply("no")], cfg=config) as hub:
        assert [a for a in hub.actions if a.startswith("f__")] == ["f__echo"]
        result = await hub.send(*CLI, "echo")
    (res,) = results(result)
    assert res.denied, "a call is an action: the role guard applies"


async def test_a_server_over_streamable_http_with_its_headers(make_hub, config, unused_tcp_port) -> None:
    import sys

    from hub.config import McpServerSection
    from tests.mcp.conftest import FAULT_SERVER

    proc = await asyncio.create_subprocess_exec(sys.executable, FAULT_SERVER, "http", str(unused_tcp_port))
    try:
        config.mcp = {
            "docs": McpServerSection(
                url=f"http://127.0.0.1:{unused_tcp_port}/mcp", headers={"Authorization": "Bearer sesame"}
            )
        }
        await _listening(unused_tcp_port)
        model = [call("docs__whoami"), call("docs__echo", '{"text": "over http"}'), reply("ok")]
        async with make_hub(model, cfg=config) as hub:
            result = await hub.send(*CLI, "who am I?")
    finally:
        proc.terminate()
        await proc.wait()
    assert [r.data for r in results(result)] == ["Bearer sesame", "over http"]


async def _listening(port: int) -> None:
    async with asyncio.timeout(30):
        while True:
            try:
                _, w = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                await asyncio.sleep(0.05)
                continue
            w.close()
            return


async def test_tool_descriptions_and_schemas_are_capped_and_scanned_and_a_tool_that_fails_is_left_out(
    make_hub, config, caplog
) -> None:
    """Issue 40, finding 16: what a server says of its tools enters every prompt. An injection
    in a description or a schema, a megabyte of description, a schema past its cap: the tool
    is left out, and says why; an invisible character is removed and the tool kept."""
    config.mcp = {"f": fault_server("hostile")}
    model = [call("f__add", '{"a": 2, "b": 3}'), reply("5")]
    async with make_hub(model, cfg=config) as hub:
        offered = {a for a in hub.actions if a.startswith("f__")}
        skipped = hub.mcp.servers["f"].status.skipped
        add = hub.actions["f__add"]
        result = await hub.send(*CLI, "add")
    assert {"f__weather", "f__manual", "f__lookup", "f__options"}.isdisjoint(offered)
    assert {"f__add", "f__echo"} <= offered
    assert "instruction to ignore the system prompt" in skipped["weather"]
    assert "description is" in skipped["manual"] and "characters, over the cap" in skipped["manual"]
    assert "forged protocol tag" in skipped["lookup"]
    assert "input schema is" in skipped["options"] and "over the cap" in skipped["options"]
    assert add.description == "Adds two numbers."
    assert results(result)[0].ok
    assert any("tool 'weather' left out" in r.getMessage() for r in caplog.records)


async def test_a_server_silent_after_list_changed_is_started_again(make_hub, config) -> None:
    """Issue 40, finding 18: the listing that follows ``tools/list_changed`` had no timeout,
    so a server that never answered it held the supervisor (no pings, no restart) for ever."""
    config.mcp = {"f": fault_server(timeout=1)}
    async with make_hub([call("f__go_silent"), reply("ok")], cfg=config) as hub:
        server = hub.mcp.servers["f"]
        server.backoff.first = 0.05
        await hub.send(*CLI, "go silent")
        async with asyncio.timeout(30):
            while server.status.restarts < 1 or server.status.state != "up":
                await asyncio.sleep(0.05)
        hub.model.add(call("f__echo", '{"text": "back"}'), reply("ok"))
        result = await hub.send(*CLI, "there?")
    assert results(result)[0].data == "back"


async def test_an_answer_over_max_message_bytes_is_left_unread_and_the_server_goes_on(make_hub, config) -> None:
    """Issue 40, finding 25: a 50 MB result was held whole (+323 MB) before the cut to 20,000
    characters. What is read of one message is bounded; the call gets an error that says so."""
    config.mcp = {"f": fault_server(max_message_bytes=100_000)}
    model = [call("f__pid"), call("f__huge", '{"size": 5000000}'), call("f__pid"), reply("big")]
    async with make_hub(model, cfg=config) as hub:
        result = await hub.send(*CLI, "big one")
    before, huge, after = results(result)
    assert not huge.ok and "over 100000 bytes" in huge.error, huge.error
    assert after.ok and after.data == before.data, "the same server answers the next call"


async def test_a_server_writing_without_a_newline_is_stopped_and_started_again(make_hub, config) -> None:
    """Issue 40, finding 17: 40 MB without a newline grew the hub by 41 MB. The stream is
    bounded before the SDK reads it, and the server that exceeds it is started again."""
    config.mcp = {"f": fault_server(max_message_bytes=100_000)}
    async with make_hub([call("f__pid"), call("f__flood", '{"size": 5000000}'), reply("ok")], cfg=config) as hub:
        server = hub.mcp.servers["f"]
        server.backoff.first = 0.05
        first = await hub.send(*CLI, "flood")
        async with asyncio.timeout(30):
            while server.status.restarts < 1 or server.status.state != "up":
                await asyncio.sleep(0.05)
        hub.model.add(call("f__pid"), reply("back"))
        second = await hub.send(*CLI, "and now?")
    pid, flooded = results(first)
    assert not flooded.ok and "stopped during the call" in flooded.error
    assert results(second)[0].ok and results(second)[0].data != pid.data


@pytest.mark.parametrize("mode", ["http", "http-json"])
async def test_an_http_answer_over_max_message_bytes_is_an_error(make_hub, config, unused_tcp_port, mode) -> None:
    """The same bound over streamable HTTP, an SSE event or a JSON body alike."""
    import sys

    from hub.config import McpServerSection
    from tests.mcp.conftest import FAULT_SERVER

    proc = await asyncio.create_subprocess_exec(sys.executable, FAULT_SERVER, mode, str(unused_tcp_port))
    try:
        url = f"http://127.0.0.1:{unused_tcp_port}/mcp"
        config.mcp = {"docs": McpServerSection(url=url, max_message_bytes=100_000)}
        await _listening(unused_tcp_port)
        model = [call("docs__huge", '{"size": 500000}'), call("docs__echo", '{"text": "still"}'), reply("ok")]
        async with make_hub(model, cfg=config) as hub:
            result = await hub.send(*CLI, "big")
    finally:
        proc.terminate()
        await proc.wait()
    huge, echo = results(result)
    assert not huge.ok and "100000 byte" in huge.error, huge.error
    assert echo.ok and echo.data == "still"
