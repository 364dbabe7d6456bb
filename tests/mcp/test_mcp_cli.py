"""The command line with MCP servers: ``hub check`` and ``hub mcp list`` list each server's
tools and name one that will not start; a real ``hub run`` killed with SIGKILL (or stopped
with SIGTERM) leaves no server process behind."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import textwrap
from pathlib import Path

import pytest

from tests._support.processes import hub_cmd, spawn_hub
from tests.mcp.conftest import FAULT_SERVER, mcp_children


def project(tmp_path: Path, *, broken: bool = False) -> Path:
    (tmp_path / "contexts").mkdir(exist_ok=True)
    (tmp_path / "contexts" / "default.toml").write_text('name = "T"\ninstructions = "Tell the time."\n')
    cfg = tmp_path / "config.toml"
    extra = f'[mcp.broken]\ncommand = ["{sys.executable}", "{FAULT_SERVER}", "nostart"]\n' if broken else ""
    cfg.write_text(
        textwrap.dedent(f"""
        [model]
        provider = "openai"
        base_url = "http://127.0.0.1:9/v1"
        api_key = "x"
        [memory]
        episodes = false
        [mcp.time]
        command = ["mcp-server-time", "--local-timezone", "UTC"]
        [mcp.f]
        command = ["{sys.executable}", "{FAULT_SERVER}"]
        tools = ["echo", "pid"]
        """)
        + extra
    )
    return cfg


async def test_hub_check_lists_each_servers_tools_and_names_one_that_will_not_start(tmp_path: Path) -> None:
    project(tmp_path)
    code, out, err = await hub_cmd("check", cwd=tmp_path)
    assert code == 0, err
    assert "mcp time (stdio): 2 tools: time__get_current_time, time__convert_time" in out
    assert "mcp f (stdio): 2 tools: f__echo, f__pid" in out
    assert "left out: crash: not in the tools allow-list" in out
    project(tmp_path, broken=True)
    code, out, err = await hub_cmd("check", cwd=tmp_path)
    assert code == 2
    assert "mcp.broken: the server did not start: the server exited: fault server: refusing to start" in err


async def test_hub_mcp_list(tmp_path: Path) -> None:
    project(tmp_path)
    code, out, _ = await hub_cmd("mcp", "list", cwd=tmp_path)
    assert code == 0 and "time (stdio): 2 tools" in out and "f__echo" in out
    code, out, _ = await hub_cmd("mcp", "list", "--json", cwd=tmp_path)
    assert code == 0 and '"action": "time__get_current_time"' in out


async def test_hub_mcp_list_shows_a_tool_left_out_by_the_injection_scanner(tmp_path: Path) -> None:
    (tmp_path / "contexts").mkdir(exist_ok=True)
    (tmp_path / "contexts" / "default.toml").write_text('name = "T"\ninstructions = "Help."\n')
    (tmp_path / "config.toml").write_text(
        f'[model]\nprovider = "openai"\nbase_url = "http://127.0.0.1:9/v1"\napi_key = "x"\n'
        f'[memory]\nepisodes = false\n[mcp.f]\ncommand = ["{sys.executable}", "{FAULT_SERVER}", "hostile"]\n'
    )
    code, out, _ = await hub_cmd("mcp", "list", cwd=tmp_path)
    assert code == 0
    assert "left out: weather: its description has an instruction to ignore the system prompt" in out
    assert "f__add" in out and "f__weather" not in out


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
async def test_no_server_outlives_hub_run(tmp_path: Path, sig: signal.Signals) -> None:
    project(tmp_path)
    proc = await spawn_hub("run", cwd=tmp_path, stdin=asyncio.subprocess.DEVNULL)
    try:
        async with asyncio.timeout(60):
            while len(servers := mcp_children(proc.pid)) < 2:
                if proc.returncode is not None:
                    raise AssertionError((await proc.stderr.read()).decode()[-2000:])
                await asyncio.sleep(0.1)
        pids = [p for p, _ in servers]
        proc.send_signal(sig)
        await asyncio.wait_for(proc.wait(), 30)
        async with asyncio.timeout(15):
            while alive := [p for p in pids if _alive(p)]:
                await asyncio.sleep(0.05)
        assert alive == []
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    if sig == signal.SIGTERM:
        assert proc.returncode == 0


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z" and os.path.exists(f"/proc/{pid}")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
async def test_no_helper_a_server_started_outlives_hub_run(tmp_path: Path, sig: signal.Signals) -> None:
    """Issue 40, finding 24: processes a server starts (one that calls setsid too) were left
    running, reparented to PID 1, after the hub's SIGTERM or SIGKILL."""
    pids_file = tmp_path / "family.pids"
    (tmp_path / "contexts").mkdir(exist_ok=True)
    (tmp_path / "contexts" / "default.toml").write_text('name = "T"\ninstructions = "Help."\n')
    (tmp_path / "config.toml").write_text(
        f'[model]\nprovider = "openai"\nbase_url = "http://127.0.0.1:9/v1"\napi_key = "x"\n'
        f'[memory]\nepisodes = false\n[mcp.f]\ncommand = ["{sys.executable}", "{FAULT_SERVER}", "family"]\n'
        f'env = {{ FAMILY_PIDS = "{pids_file}" }}\n'
    )
    proc = await spawn_hub("run", cwd=tmp_path, stdin=asyncio.subprocess.DEVNULL)
    try:
        async with asyncio.timeout(60):
            while not pids_file.exists():
                if proc.returncode is not None:
                    raise AssertionError((await proc.stderr.read()).decode()[-2000:])
                await asyncio.sleep(0.05)
        helpers = [int(p) for p in pids_file.read_text().split()]
        assert all(_alive(p) for p in helpers)
        proc.send_signal(sig)
        await asyncio.wait_for(proc.wait(), 30)
        async with asyncio.timeout(15):
            while alive := [p for p in helpers if _alive(p)]:
                await asyncio.sleep(0.05)
        assert alive == []
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        for pid in [int(p) for p in pids_file.read_text().split()] if pids_file.exists() else []:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)  # what this test found left, not left for the next
