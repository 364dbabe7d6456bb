"""Typed contexts: ``Context[Args, Memory]`` with a pydantic memory, and ``RunContext[...]``
that lets a type checker see ``ctx.memory.count``."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from pydantic import BaseModel

from hub import Context, Extension, RunContext, ScriptedModel, action
from hub.definitions import TextArgs
from hub.store import RunState


class Counter(BaseModel):
    count: int = 0
    names: list[str] = []


class NoArgs(BaseModel):
    pass


@action(name="bump")
async def bump(args: NoArgs, ctx: RunContext[TextArgs, Counter]) -> int:
    ctx.memory.count += 1
    ctx.memory.names.append(ctx.args.id)
    return ctx.memory.count


counted: Context[TextArgs, Counter] = Context(
    type="t:counted", memory_schema=Counter, actions=[bump], reply_output="cli:message"
)


async def test_memory_is_loaded_into_its_schema_and_saved_as_json(make_hub) -> None:
    call = '<response><action_call name="bump">{}</action_call></response>'
    model = ScriptedModel([call, "<response></response>", call, "<response></response>"])
    async with make_hub(model, Extension("t", contexts=[counted])) as hub:
        for _ in range(2):
            result = await hub.send("t:counted:ann", None, "bump")
            assert result.state == RunState.COMPLETED, result.reason
        assert await hub.memory.get("memory:t:counted:ann") == {"count": 2, "names": ["ann", "ann"]}
    # the prompt shows it as JSON
    assert (
        "{&quot;count&quot;: 1" in model.requests[2].messages[0]["content"]
        or '"count": 1' in model.requests[2].messages[0]["content"]
    )


def test_a_memory_schema_must_be_a_pydantic_model() -> None:
    with pytest.raises(TypeError, match="memory_schema must be a pydantic BaseModel"):
        Context(type="t:bad", memory_schema=dict)  # type: ignore[arg-type]


def test_ctx_memory_type_checks(tmp_path: Path) -> None:
    from mypy import api

    src = tmp_path / "typed.py"
    src.write_text(
        textwrap.dedent("""
        from pydantic import BaseModel
        from hub import Context, RunContext
        from hub.definitions import TextArgs

        class Counter(BaseModel):
            count: int = 0

        def on_run(ctx: RunContext[TextArgs, Counter]) -> None:
            total: int = ctx.memory.count + 1
            who: str = ctx.args.id
            ctx.memory.cuont = total

        chat: Context[TextArgs, Counter] = Context(type="t:chat", memory_schema=Counter, on_run=on_run)
        wrong: Context[TextArgs, Counter] = Context(type="t:wrong", memory_schema=TextArgs)
    """)
    )
    # hub and pydantic are read; every other package is skipped (Any), which keeps this fast
    config = tmp_path / "mypy.ini"
    config.write_text(
        "[mypy]\nfollow_imports = skip\nignore_missing_imports = True\nincremental = False\n"
        "[mypy-hub.*]\nfollow_imports = silent\n[mypy-pydantic.*]\nfollow_imports = silent\n"
        "[mypy-pydantic_core.*]\nfollow_imports = silent\n"
    )
    stdout, _, status = api.run([str(src), "--config-file", str(config)])
    errors = [line for line in stdout.splitlines() if ": error:" in line]
    assert status == 1
    # exactly the two mistakes: a misspelt memory field, a memory schema of the wrong type
    assert len(errors) == 2, stdout
    assert '"Counter" has no attribute "cuont"' in errors[0]
    assert "typed.py:15:" in errors[1]
