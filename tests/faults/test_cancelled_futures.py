"""A submission's futures may be cancelled (an input answered without a run row, taken over by
another worker, or dropped as the hub stops): whoever reads them still answers, never a bare
``.result()`` that raises CancelledError into a request handler or an action."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest

from hub import HubConfig, RunResult
from hub.config import HttpSection, WebhookSection
from hub.engine import Submission
from hub.logs import StateLog
from hub.store import RunState
from tests._support.chat import Said

SECRET = "s3cret-token-for-tests"


def taken_over(sub: Submission) -> Submission:
    """What the intake does to an input another worker took over."""
    sub.duplicate = True
    sub.run_id.cancel()
    sub.result.cancel()
    return sub


def answered_without_a_run(sub: Submission) -> Submission:
    """What the intake does to a command: no run row, and its answer."""
    sub.run_id.cancel()
    ended = RunResult("", sub.context, RunState.COMPLETED, None, [StateLog("completed", None)])
    sub.result.set_result(ended)
    return sub


@pytest.fixture
def http_config(config: HubConfig) -> HubConfig:
    config.http = HttpSection(port=0, max_body=1024)
    config.webhooks = {"deploys": WebhookSection(context="test:chat:42", secret=SECRET)}
    return config


@pytest.mark.parametrize("wait", [False, True])
@pytest.mark.parametrize(
    ("fault", "status", "body"),
    [
        (taken_over, 200, {"duplicate": True, "context": "test:chat:42"}),
        (answered_without_a_run, None, None),
    ],
)
async def test_a_webhook_whose_run_id_was_cancelled_still_gets_an_answer(
    http_config: HubConfig, make_chat_hub: Any, fault: Any, status: int | None, body: Any, wait: bool
) -> None:
    async with make_chat_hub() as hub:
        real = hub.submit

        async def submit(*args: Any, **kw: Any) -> Submission:
            sub = await real(*args, **kw)
            fresh = Submission(sub.input, sub.context)
            asyncio.get_running_loop().call_soon(fault, fresh)  # after the handler has it, as the intake does
            return fresh

        hub.submit = submit  # type: ignore[method-assign]
        url = f"http://127.0.0.1:{hub.http.port}/webhooks/deploys" + ("?wait=1" if wait else "")
        async with aiohttp.ClientSession() as session:
            headers = {"Authorization": f"Bearer {SECRET}"}
            async with session.post(url, json={"msg": "hi"}, headers=headers) as resp:
                answer = await resp.json()
        if fault is taken_over:
            assert (resp.status, answer) == (status, body)
        elif wait:
            assert resp.status == 200 and answer["state"] == "completed"
        else:
            assert (resp.status, answer) == (202, {"run_id": None, "context": "test:chat:42"})


@pytest.mark.parametrize("fault", [taken_over, answered_without_a_run])
async def test_start_run_whose_run_id_was_cancelled_still_ends_with_a_result(
    config: HubConfig, make_chat_hub: Any, said: Said, fault: Any
) -> None:
    (config.contexts_dir / "default.toml").write_text(
        'name = "Boss"\ninstructions = "Delegate."\nchild_runs = ["test:chat:*"]\n'
    )
    call = json.dumps({"context": "test:chat:worker", "input": "hello", "wait": True})

    def brain(request: Any) -> str:
        text = request.messages[-1]["content"]
        if '<action_result name="startRun"' in text:
            start = text.rindex('<action_result name="startRun"')
            return f"<response><output>{text[start : text.index('</action_result>', start)]}</output></response>"
        return f'<response><action_call name="startRun">{call}</action_call></response>'

    async with make_chat_hub(brain) as hub:
        real = hub.children._submit

        async def submit(*args: Any, **kw: Any) -> Submission:
            sub = await real(*args, **kw)
            return fault(Submission(sub.input, sub.context))

        hub.children._submit = submit
        result = await asyncio.wait_for(hub.send("test:chat:boss", data="go"), 10)
        assert result is not None and result.state == RunState.COMPLETED, result
        (seen,) = [o.content for o in result.outputs]
        if fault is taken_over:
            assert 'status="error"' in seen and "taken over by another worker" in seen
        else:
            assert 'status="ok"' in seen and '"state": "completed"' in seen
