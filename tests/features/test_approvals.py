"""Approvals: an action listed in [approvals] actions (globs) or declared confirm=True waits for
a person's yes; approving runs it once, denying or no answer tells the model, and only the
person who asked or an operator may answer, once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import BaseModel

from hub import Extension, Hub, RunState, action
from hub.store import Approval, ApprovalState
from hub_cli import converse
from tests._support.processes import hub_cmd

calls: list[dict[str, Any]] = []


class PathArgs(BaseModel):
    path: str


@action(name="delete", description="Delete a file.", confirm=True)
async def delete(args: PathArgs, ctx: Any) -> dict[str, Any]:
    calls.append({"delete": args.path})
    return {"deleted": args.path}


@action(name="github__merge", description="Merge a pull request.")
async def merge(args: PathArgs, ctx: Any) -> dict[str, Any]:
    calls.append({"merge": args.path})
    return {"merged": args.path}


@action(name="look", description="Harmless.")
async def look(args: PathArgs, ctx: Any) -> dict[str, Any]:
    calls.append({"look": args.path})
    return {"seen": args.path}


TOOLS = Extension("tools", actions=[delete, merge, look])
DELETE = '<response><action_call name="delete">{"path": "/tmp/x"}</action_call></response>'
DONE = "<response><output>done</output></response>"


@pytest.fixture(autouse=True)
def _fresh(config: Any) -> None:
    calls.clear()
    config.approvals.actions = ["github__*"]
    config.roles = {"operator": {"cli": ["olga"]}}


async def question(hub: Hub, n: int = 1) -> Approval:
    """The n-th open question, once the run has asked it (read from the store, as any worker would)."""
    for _ in range(2000):
        waiting = await hub.approvals.waiting()
        if len(waiting) >= n:
            return waiting[n - 1]
        await asyncio.sleep(0.005)
    raise AssertionError("no approval was asked")


def results(result: Any) -> list[Any]:
    return [e for e in result.logs if e.kind == "action_result"]


async def test_approving_runs_the_action_once_and_a_second_press_is_refused(make_rig: Any) -> None:
    rig = make_rig([DELETE, DONE], extensions=[TOOLS])
    async with rig.hub:
        rig.hub.approvals.poll = 0.01
        run = asyncio.create_task(rig.say("delete /tmp/x"))
        q = await question(rig.hub)
        assert q.action == "delete" and q.args == {"path": "/tmp/x"} and q.user == "ann" and q.platform == "cli"
        assert calls == []  # waits
        first = await rig.hub.approvals.answer(q.id, approve=True, user="ann", platform="cli")
        second = await rig.hub.approvals.answer(q.id, approve=False, user="ann", platform="cli")
        result = await run
        row = await rig.hub.approvals.store.get(q.id)
    assert first.accepted and not second.accepted and "already answered" in second.message
    assert f'Approve delete {{"path": "/tmp/x"}}? (approval {q.id}) [y/n]' in rig.out.getvalue()
    assert result.state == RunState.COMPLETED and calls == [{"delete": "/tmp/x"}]
    assert [r.ok for r in results(result)] == [True]
    assert row is not None and row.state == ApprovalState.DONE and row.answered_by == "cli:ann"


async def test_denying_tells_the_model_and_runs_nothing(make_rig: Any) -> None:
    rig = make_rig([DELETE, DONE], extensions=[TOOLS])
    async with rig.hub:
        rig.hub.approvals.poll = 0.01
        run = asyncio.create_task(rig.say("delete /tmp/x"))
        q = await question(rig.hub)
        assert (await rig.hub.approvals.answer(q.id, approve=False, user="ann", platform="cli")).accepted
        result = await run
    assert calls == [] and result.state == RunState.COMPLETED
    (denied,) = results(result)
    assert denied.denied and "did not approve 'delete'" in denied.error
    assert 'status="denied"' in rig.model.requests[1].messages[0]["content"]


async def test_only_who_asked_or_an_operator_may_answer(make_rig: Any) -> None:
    rig = make_rig([DELETE, DONE], extensions=[TOOLS])
    async with rig.hub:
        rig.hub.approvals.poll = 0.01
        run = asyncio.create_task(rig.say("delete /tmp/x"))
        q = await question(rig.hub)
        stranger = await rig.hub.approvals.answer(q.id, approve=True, user="eve", platform="cli")
        elsewhere = await rig.hub.approvals.answer(q.id, approve=True, user="ann", platform="telegram")
        assert not stranger.accepted and not elsewhere.accepted and "only the person who asked" in stranger.message
        assert (await rig.hub.approvals.store.get(q.id)).state == ApprovalState.PENDING  # type: ignore[union-attr]
        operator = await rig.hub.approvals.answer(q.id, approve=True, user="olga", platform="cli")
        result = await run
    assert operator.accepted and calls == [{"delete": "/tmp/x"}] and result.ok


async def test_no_answer_in_time_is_denied_and_a_late_press_changes_nothing(make_rig: Any) -> None:
    rig = make_rig([DELETE, DONE], extensions=[TOOLS])
    async with rig.hub:
        rig.hub.approvals.poll = 0.01
        run = asyncio.create_task(rig.say("delete /tmp/x"))
        q = await question(rig.hub)
        rig.hub.approvals.clock = lambda: time.time() + 601  # the timeout (600 s) has passed
        result = await run
        late = await rig.hub.approvals.answer(q.id, approve=True, user="ann", platform="cli")
    assert calls == [] and not late.accepted and late.state == "expired"
    (denied,) = results(result)
    assert denied.denied and "within 600s" in denied.error


async def test_a_glob_in_the_config_asks_and_other_actions_do_not(make_rig: Any) -> None:
    merge_call = '<response><action_call name="github__merge">{"path": "pr/7"}</action_call></response>'
    look_call = '<response><action_call name="look">{"path": "a"}</action_call></response>'
    rig = make_rig([look_call, merge_call, DONE], extensions=[TOOLS])
    async with rig.hub:
        rig.hub.approvals.poll = 0.01
        run = asyncio.create_task(rig.say("merge it"))
        q = await question(rig.hub)
        assert q.action == "github__merge" and calls == [{"look": "a"}]  # look ran without asking
        await rig.hub.approvals.answer_as_operator(q.id, approve=True)
        result = await run
    assert result.ok and calls == [{"look": "a"}, {"merge": "pr/7"}]


async def test_the_wait_is_neither_a_stall_nor_the_runs_time(make_rig: Any, config: Any) -> None:
    config.agent.heartbeat_timeout = 0.2
    config.agent.run_timeout = 0.3
    rig = make_rig([DELETE, DONE], extensions=[TOOLS])
    async with rig.hub:
        rig.hub.approvals.poll = 0.01
        run = asyncio.create_task(rig.say("delete /tmp/x"))
        q = await question(rig.hub)
        # longer than both limits, measured by the run's own clock: the run still waits
        await asyncio.wait({run}, timeout=0.5)
        assert not run.done()
        await rig.hub.approvals.answer(q.id, approve=True, user="ann", platform="cli")
        result = await run
    assert result.ok and calls == [{"delete": "/tmp/x"}]


async def _lines(items: list[str], gate: asyncio.Event) -> AsyncIterator[str]:
    yield items[0]
    await gate.wait()
    for line in items[1:]:
        yield line


async def test_the_terminal_asks_y_n_and_the_answer_never_reaches_the_model(make_rig: Any) -> None:
    rig = make_rig([DELETE, DONE], extensions=[TOOLS])
    cli = rig.hub.extensions["cli"]
    gate = asyncio.Event()
    async with rig.hub:
        rig.hub.approvals.poll = 0.01
        talk = asyncio.create_task(
            converse(
                rig.hub.submit,
                rig.hub.commands.names,
                "ann",
                _lines(["delete /tmp/x", "y"], gate),
                approver=cli.approver,
            )
        )
        await question(rig.hub)
        async with asyncio.timeout(10):  # the question is on the screen before the person answers it
            while "[y/n]" not in rig.out.getvalue():
                await asyncio.sleep(0.005)
        gate.set()
        await talk
    assert calls == [{"delete": "/tmp/x"}]
    assert len(rig.model.requests) == 2  # "y" answered the question: no run of its own
    assert "(delete: approved" in rig.out.getvalue()


async def test_the_operators_command_answers_a_run_waiting_in_another_process(
    make_rig: Any, config: Any, tmp_path: Any
) -> None:
    (tmp_path / "config.toml").write_text(f'[hub]\ndata_dir = "{config.data_dir}"\n', encoding="utf-8")
    rig = make_rig([DELETE, DONE], extensions=[TOOLS])
    async with rig.hub:
        rig.hub.approvals.poll = 0.01  # what another process writes is read this often
        run = asyncio.create_task(rig.say("delete /tmp/x"))
        q = await question(rig.hub)
        rc, out, err = await hub_cmd("approvals", "list", cwd=tmp_path)
        assert rc == 0 and q.id in out and "pending" in out and 'delete {"path": "/tmp/x"}' in out, err
        rc, out, err = await hub_cmd("runs", cwd=tmp_path)  # the run shows what it waits for
        assert rc == 0 and "waiting" in out and f"approval {q.id}: delete" in out, err
        rc, out, err = await hub_cmd("approvals", "approve", q.id, cwd=tmp_path)
        assert rc == 0 and "approved: delete" in out, err
        result = await run
        rc, out, err = await hub_cmd("approvals", "deny", q.id, cwd=tmp_path)
        assert rc == 2 and "already answered" in err
    assert result.ok and calls == [{"delete": "/tmp/x"}]


async def test_post_approvals_answers_once_behind_the_token(make_rig: Any, config: Any) -> None:
    import aiohttp

    from hub.config import HttpSection

    token = "approvals-token-0123456789"
    auth = {"Authorization": f"Bearer {token}"}
    config.http = HttpSection(port=0, token=token)
    rig = make_rig([DELETE, DONE], extensions=[TOOLS])
    async with rig.hub, aiohttp.ClientSession() as session:
        rig.hub.approvals.poll = 0.01
        base = f"http://127.0.0.1:{rig.hub.http.port}"
        run = asyncio.create_task(rig.say("delete /tmp/x"))
        q = await question(rig.hub)
        async with session.post(f"{base}/approvals/{q.id}", json={"approve": True}) as resp:
            assert resp.status == 401
        async with session.get(f"{base}/approvals", headers=auth) as resp:
            assert resp.status == 200 and [a["id"] for a in (await resp.json())["approvals"]] == [q.id]
        async with session.post(f"{base}/approvals/{q.id}", json={"approve": "yes"}, headers=auth) as resp:
            assert resp.status == 400 and '{"approve": true}' in (await resp.json())["error"]
        async with session.post(f"{base}/approvals/nope", json={"approve": True}, headers=auth) as resp:
            assert resp.status == 404
        async with session.post(f"{base}/approvals/{q.id}", json={"approve": False}, headers=auth) as resp:
            assert resp.status == 200 and (await resp.json())["state"] == "denied"
        async with session.post(f"{base}/approvals/{q.id}", json={"approve": True}, headers=auth) as resp:
            assert resp.status == 409 and "already answered" in (await resp.json())["message"]
        result = await run
    assert calls == [] and [r.denied for r in results(result)] == [True]


async def test_a_run_stopped_while_it_waits_closes_its_question(make_rig: Any) -> None:
    rig = make_rig([DELETE, DONE], extensions=[TOOLS])
    async with rig.hub:
        rig.hub.approvals.poll = 0.01
        run = asyncio.create_task(rig.say("delete /tmp/x"))
        q = await question(rig.hub)
        await rig.hub.stop_run(q.run_id)
        result = await run
        async with asyncio.timeout(10):  # closed by the run's end (its after_run hook)
            while await rig.hub.approvals.waiting():
                await asyncio.sleep(0.005)
        late = await rig.hub.approvals.answer(q.id, approve=True, user="ann", platform="cli")
    assert (result.state, result.reason) == (RunState.KILLED, "stopped by operator")
    assert not late.accepted and late.state == "expired" and calls == []
