"""`hub runs`, `hub trace`, `hub check` and `hub persona` against a real data folder."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest
from pydantic import BaseModel

from hub import Extension, Hub, ScriptedModel, action, load_config
from hub.cli import main
from hub_cli import CliSettings
from hub_cli import extension as cli_extension


class Where(BaseModel):
    location: str


@action(name="getWeather", description="Current weather.")
async def get_weather(args: Where, ctx) -> dict:
    return {"temperature": 72, "where": args.location}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "contexts").mkdir()
    (tmp_path / "contexts" / "default.toml").write_text('name = "Hub"\ninstructions = "Be brief."\n')
    (tmp_path / "config.toml").write_text(
        '[hub]\ndata_dir = "data"\n[agent]\nmax_steps = 3\n[extensions.cli]\nstdin = false\n'
    )
    return tmp_path / "config.toml"


def run_hub(
    path: Path,
    responses: list[str],
    messages: list[tuple[str, str]],
    *,
    edit=None,
    default: str = "<response><output>ok</output></response>",
) -> list:
    async def go() -> list:
        config = load_config(path)
        hub = Hub(
            config,
            model=ScriptedModel(responses, default=default),
            load_extensions=False,
            extensions=[
                cli_extension(CliSettings(stdin=False), out=io.StringIO()),
                Extension("w", actions=[get_weather]),
            ],
        )
        hub.personas.interval = 0
        results = []
        async with hub:
            for user, text in messages:
                results.append(await hub.send("cli:session", {"user": user}, text, user=user))
                if edit:
                    edit()
        return results

    return asyncio.run(go())


def cli(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


def test_runs_and_trace(project, capsys):
    results = run_hub(
        project,
        [
            '<response><reasoning>look it up</reasoning><action_call name="getWeather">{"location": "NYC"}</action_call>'
            "</response>",
            "<response><output>72F in NYC</output></response>",
        ],
        [("ann", "weather?"), ("bob", "loop")],
        default='<response><action_call name="getWeather">{"location": "X"}</action_call></response>',
    )
    ok, killed = results
    assert ok.ok and killed.reason == "max_steps (3)"
    cfg = str(project)

    rc, out, _ = cli(capsys, "runs", "--config", cfg)
    assert rc == 0 and ok.run_id[:10] in out and killed.run_id[:10] in out and "max_steps (3)" in out
    rc, out, _ = cli(capsys, "runs", "--config", cfg, "--state", "killed", "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["id"] for r in rows] == [killed.run_id] and rows[0]["reason"] == "max_steps (3)"
    rc, out, _ = cli(capsys, "runs", "--config", cfg, "--context", "cli:session:ann", "--json")
    assert [json.loads(line)["id"] for line in out.splitlines()] == [ok.run_id]

    rc, out, _ = cli(capsys, "trace", ok.run_id[:8], "--config", cfg)
    assert rc == 0
    for needle in (
        "state completed",
        "input    [text from ann] weather?",
        "thought  look it up",
        'call #0 getWeather({"location": "NYC"})',
        "result   getWeather ok in",
        '"temperature": 72',
        "output   [cli:message] sent: 72F in NYC",
        "step 1   ",
        "prompt + 30 completion",
    ):
        assert needle in out, (needle, out)
    rc, out, _ = cli(capsys, "trace", killed.run_id, "--config", cfg, "--json")
    data = json.loads(out)
    kinds = [e["kind"] for e in data["events"]]
    assert data["run"]["state"] == "killed" and kinds.count("step") == 3 and kinds[-2:] == ["state", "output"]

    rc, _, err = cli(capsys, "trace", "nope", "--config", cfg)
    assert rc == 2 and "no run matches 'nope'" in err


def test_runs_and_trace_show_what_a_run_cost(project, capsys):
    project.write_text(project.read_text() + "[model]\nprice_input = 2.5\nprice_output = 10\n")
    (answered,) = run_hub(project, [], [("ann", "hello")])
    cfg = str(project)
    rc, out, _ = cli(capsys, "runs", "--config", cfg, "--json")
    (row,) = [json.loads(line) for line in out.splitlines()]
    cost = (row["prompt_tokens"] * 2.5 + row["completion_tokens"] * 10) / 1e6
    assert rc == 0 and row["cost"] == pytest.approx(cost) and cost > 0
    rc, out, _ = cli(capsys, "runs", "--config", cfg)
    header, line = out.splitlines()
    assert header.split()[5:7] == ["tokens", "cost"] and f" {cost:.4f} " in line
    rc, out, _ = cli(capsys, "trace", answered.run_id, "--config", cfg)
    assert f"cost {cost:.4f}" in out and f"cost {cost:.6f}" in out  # the run's, and its one step's


def test_check_warns_of_a_cost_budget_without_prices_and_unknown_commands(project, capsys):
    project.write_text(project.read_text() + '[limits]\ncost_per_day = 5\n[commands]\ndisabled = ["new", "nope"]\n')
    rc, _, err = cli(capsys, "check", "--config", str(project))
    assert rc == 0
    assert "limits.cost_per_day: set, but [model] price_input and price_output are 0 (unknown)" in err
    assert "commands.disabled: 'nope' is no command (built in: start, help, new, stop" in err
    assert "'new'" not in err


def test_check_says_what_is_wrong_where(project, capsys):
    rc, out, _ = cli(capsys, "check", "--config", str(project))
    assert rc == 0 and "ok:" in out and "personas: default" in out

    (project.parent / "contexts" / "broken.toml").write_text('name = "B"\ninstructions = 3\n')
    project.write_text(
        project.read_text() + '[personas]\n"cli:session" = "pirate"\n[roles.admin]\ndiscord = ["1"]\n'
        "[extensions.nosuch]\n"
    )
    rc, _, err = cli(capsys, "check", "--config", str(project))
    assert rc == 2
    assert f"{project.parent / 'contexts' / 'broken.toml'}: instructions: Input should be a valid string" in err
    assert f"{project}: personas.cli:session: persona 'pirate' has no file" in err
    assert "extension 'nosuch': no such extension" in err
    assert "warning: " in err and "roles.admin.discord: no enabled extension is named 'discord'" in err

    project.write_text(project.read_text() + "[limits]\nuser_tokens_per_day = -1\n")
    rc, _, err = cli(capsys, "check", "--config", str(project))
    assert rc == 2 and "limits.user_tokens_per_day" in err


def test_persona_history_and_rollback(project, capsys):
    persona = project.parent / "contexts" / "default.toml"
    versions = iter(['name = "Hub"\ninstructions = "Version two."\n'])

    def edit() -> None:
        text = next(versions, None)
        if text is not None:
            persona.write_text(text)
            import os

            st = persona.stat()
            os.utime(persona, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))

    run_hub(project, [], [("ann", "one"), ("ann", "two")], edit=edit)
    cfg = str(project)
    rc, out, _ = cli(capsys, "persona", "history", "default", "--config", cfg)
    assert rc == 0 and "rev 1" in out and "rev 2" in out and "(in force)" in out
    assert '-instructions = "Be brief."' in out and '+instructions = "Version two."' in out

    rc, out, _ = cli(capsys, "persona", "rollback", "default", "1", "--config", cfg)
    assert rc == 0 and "rev 1 is back" in out
    assert persona.read_text() == 'name = "Hub"\ninstructions = "Be brief."\n'
    rc, out, _ = cli(capsys, "persona", "history", "default", "--config", cfg, "--json")
    assert [(r["rev"], r["note"]) for r in map(json.loads, out.splitlines())] == [
        (1, ""),
        (2, ""),
        (3, "rollback to rev 1"),
    ]
    rc, out, _ = cli(capsys, "persona", "list", "--config", cfg)
    assert "default" in out and "3 revisions" in out

    rc, _, err = cli(capsys, "persona", "rollback", "default", "9", "--config", cfg)
    assert rc == 2 and "no revision 9 (revisions 1..3" in err
