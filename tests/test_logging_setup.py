"""Structured logs: every line logged during a run names its run and context; JSON as an option."""

from __future__ import annotations

import io
import json
import logging

import pytest

from hub import Extension, NoArgs, action
from hub.logging_setup import setup_logging


@action(name="work", description="Logs while it works.")
async def work(args: NoArgs, ctx) -> dict:
    logging.getLogger("tests.work").info("working for %s", ctx.user, extra={"items": 3})
    return {"done": True}


@pytest.mark.parametrize("fmt", ["json", "text"])
async def test_lines_logged_in_a_run_carry_its_ids(make_rig, fmt):
    stream = io.StringIO()
    setup_logging("INFO", fmt, stream)
    rig = make_rig(
        ['<response><action_call name="work">{}</action_call></response>'], extensions=[Extension("t", actions=[work])]
    )
    async with rig.hub:
        result = await rig.say("go")
    lines = stream.getvalue().splitlines()
    if fmt == "json":
        records = [json.loads(line) for line in lines]
        mine = next(r for r in records if r["logger"] == "tests.work")
        assert mine["message"] == "working for ann" and mine["items"] == 3
        assert mine["run_id"] == result.run_id and mine["context_id"] == "cli:session:ann"
        assert {"ts", "level"} <= set(mine)
    else:
        mine = next(line for line in lines if "working for ann" in line)
        assert f"run={result.run_id[:8]}" in mine and "context=cli:session:ann" in mine
