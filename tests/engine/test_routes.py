"""``[[routes]]``: a conversation's persona, model and allowed actions, chosen by the first
route whose glob matches its name."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from pydantic import BaseModel

from hub import ActionResultLog, ConfigError, Extension, Hub, HubConfig, ScriptedModel, action
from hub.config import ModelSection, RouteSection, config_from_dict
from hub.testing import FakeOpenAI
from hub_cli import CliSettings
from hub_cli import extension as cli_extension


class City(BaseModel):
    city: str


@action(name="getWeather", description="Current weather for a city.")
async def get_weather(args: City, ctx) -> dict:  # type: ignore[no-untyped-def]
    return {"city": args.city, "temperature": 20}


@action(name="time__now", description="The time now (as an MCP server's tool is named).")
async def time_now(args: City, ctx) -> str:  # type: ignore[no-untyped-def]
    return "12:00"


@action(name="deleteEverything", description="Not for the support bot.")
async def delete_everything(args: City, ctx) -> str:  # type: ignore[no-untyped-def]
    raise AssertionError("a route that does not allow it must never run it")


TOOLS = Extension(name="tools", actions=[get_weather, time_now, delete_everything])


def resp(*parts: str) -> str:
    return "<response>" + "".join(parts) + "</response>"


def call(name: str) -> str:
    return f'<action_call name="{name}">{{"city": "Oslo"}}</action_call>'


def prompt_of(model: ScriptedModel, i: int) -> str:
    request = model.requests[i]
    return "\n".join([request.system, *(str(m["content"]) for m in request.messages)])


def make(config: HubConfig, model: object, out: io.StringIO) -> Hub:
    cli = cli_extension(CliSettings(stdin=False), out=out)
    return Hub(config, model=model, load_extensions=False, extensions=[cli, TOOLS])  # type: ignore[arg-type]


def persona(config: HubConfig, name: str, text: str, contexts: list[str] | None = None) -> None:
    declared = f"contexts = {contexts!r}\n" if contexts else ""
    (Path(config.hub.contexts_dir) / f"{name}.toml").write_text(
        f'name = "{name}"\ninstructions = "{text}"\n{declared}', encoding="utf-8"
    )


async def test_actions_outside_the_route_are_not_offered_and_refused_if_called(config: HubConfig) -> None:
    config.routes = [RouteSection(match="cli:session:ann", actions=["getWeather", "time__*"])]
    model = ScriptedModel(
        [resp(call("deleteEverything"), call("time__now")), resp("<output>done</output>")], default="ok"
    )
    async with make(config, model, io.StringIO()) as hub:
        result = await hub.send("cli:session", {"user": "ann"}, "clean up")
        prompt = prompt_of(model, 0)
        assert "getWeather" in prompt and "time__now" in prompt
        assert "deleteEverything" not in prompt
        refused, allowed = [e for e in result.logs if isinstance(e, ActionResultLog)]
        assert not refused.ok and "unknown action 'deleteEverything'" in (refused.error or "")
        assert allowed.ok
        # another conversation matches no route: every action is offered
        await hub.send("cli:session", {"user": "bob"}, "hi")
        assert "deleteEverything" in prompt_of(model, -1)


async def test_the_route_gives_the_persona_and_wins_over_a_persona_declaration(config: HubConfig) -> None:
    persona(config, "default", "You are the default bot.")
    persona(config, "sales", "You are the sales bot.", contexts=["cli:session:*"])
    persona(config, "support", "You are the support bot.")
    config.routes = [RouteSection(match="cli:session:ann", persona="support")]
    model = ScriptedModel([], default="ok")
    async with make(config, model, io.StringIO()) as hub:
        await hub.send("cli:session", {"user": "ann"}, "hi")
        await hub.send("cli:session", {"user": "bob"}, "hi")
    assert "You are the support bot." in prompt_of(model, 0)
    # the persona's own declaration still works where no route says otherwise
    assert "You are the sales bot." in prompt_of(model, 1)


async def test_the_route_gives_its_model(config: HubConfig) -> None:
    async with FakeOpenAI(default="<response><output>from the routed model</output></response>") as routed:
        config.models = {"cheap": ModelSection(provider="openai", name="cheap-llm", base_url=routed.url, api_key="x")}
        config.routes = [RouteSection(match="cli:session:ann", model="cheap")]
        hub_model = ScriptedModel([], default="from the hub's model")
        out = io.StringIO()
        async with make(config, hub_model, out) as hub:
            ann = await hub.send("cli:session", {"user": "ann"}, "hi")
            bob = await hub.send("cli:session", {"user": "bob"}, "hi")
        assert ann.outputs[0].content == "from the routed model"
        assert bob.outputs[0].content == "from the hub's model"
        assert len(routed.bodies) == 1 and routed.bodies[0]["model"] == "cheap-llm"
        assert len(hub_model.requests) == 1


def test_first_match_wins() -> None:
    cfg = config_from_dict(
        {
            "routes": [
                {"match": "telegram:chat:support/*", "persona": "support"},
                {"match": "telegram:*", "persona": "general"},
            ]
        }
    )
    assert cfg.route_for("telegram:chat:support/42").persona == "support"  # type: ignore[union-attr]
    assert cfg.route_for("telegram:chat:42").persona == "general"  # type: ignore[union-attr]
    assert cfg.route_for("discord:channel:1") is None


@pytest.mark.parametrize(
    ("route", "says"),
    [
        ({"match": "telegram:*", "model": "nope"}, "model 'nope' is not a [models.NAME]"),
        ({"match": "", "persona": "x"}, "routes.0.match"),
        ({"match": "telegram:*", "actoins": []}, "routes.0.actoins"),
    ],
)
def test_a_bad_route_is_refused_with_a_clear_error(route: dict[str, object], says: str) -> None:
    with pytest.raises(ConfigError) as e:
        config_from_dict({"routes": [route]})
    assert says in str(e.value)
