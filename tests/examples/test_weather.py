"""examples/weather: a Telegram message asks for the weather, the action asks the weather API
(a fake wttr.in on 127.0.0.1, named by the ``base_url`` key), and its answer goes back."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from hub import Hub, RunState, ScriptedModel
from hub.testing import Failure, FakeServer, Recorded
from hub.testing.telegram import FakeTelegram
from tests.examples._examples import example_config

ASK = '<response><action_call name="getWeather">{"location": "Paris"}</action_call></response>'
ANSWER = '<response><output type="telegram:send">Paris: 18°C and partly cloudy.</output></response>'


@dataclass
class _State:
    requests: list[Recorded] = field(default_factory=list)
    sent: list[dict[str, Any]] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)


class FakeWttr(FakeServer):
    """wttr.in's ``GET /PLACE?format=j1``, the part of its answer the example reads."""

    def __init__(self, weather: dict[str, tuple[int, str]]) -> None:
        super().__init__()
        self.state = _State()
        self.weather = weather

    def _build_app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/{place}", self._current)
        return app

    async def _current(self, request: web.Request) -> web.Response:
        place = request.match_info["place"]
        rec = Recorded("weather", "GET", request.path, dict(request.query), dict(request.headers))
        self.state.requests.append(rec)
        failure = self._take_failure("weather")
        rec.status = failure.status if failure else (200 if place in self.weather else 404)
        self._notify()
        if rec.status != 200:
            return web.json_response({"error": "no such place"}, status=rec.status)
        temp, sky = self.weather[place]
        return web.json_response({"current_condition": [{"temp_C": str(temp), "weatherDesc": [{"value": sky}]}]})


async def run_example(tmp_path: Path, wttr: FakeWttr, model: ScriptedModel) -> tuple[FakeTelegram, Any]:
    async with FakeTelegram() as tg:
        cfg = example_config(
            "weather",
            tmp_path,
            extensions={"telegram": {"base_url": f"{tg.base_url}/bot"}, "weather": {"base_url": wttr.base_url}},
        )
        async with Hub(cfg, model=model) as hub, hub.events(kinds=["run_ended"]) as ended:
            tg.push_message(chat_id=42, text="What's the weather in Paris?")
            end = await anext(aiter(ended))
            await tg.wait_sent(1, timeout=30)
            run = await hub.runs.get(end.run_id)
            events = await hub.runs.events(end.run_id)
    return tg, (run, events)


async def test_the_weather_bot_answers_with_what_the_api_said(tmp_path: Path) -> None:
    model = ScriptedModel([ASK, ANSWER])
    async with FakeWttr({"Paris": (18, "Partly cloudy")}) as wttr:
        tg, (run, events) = await run_example(tmp_path, wttr, model)
    (sent,) = tg.sent
    assert sent["chat_id"] == 42 and sent["text"] == "Paris: 18°C and partly cloudy."
    assert [(r.path, r.params) for r in wttr.calls("weather")] == [("/Paris", {"format": "j1"})]
    assert run.state == RunState.COMPLETED
    (result,) = [e for e in events if e.kind == "action_result"]
    assert result.error is None
    # the API's answer, validated as Weather, is what the model read in its second step
    assert '"temperature_c": 18.0' in str(model.requests[1]) and "Partly cloudy" in str(model.requests[1])


async def test_an_api_failure_reaches_the_model_as_an_error(tmp_path: Path) -> None:
    model = ScriptedModel([ASK, ANSWER])
    async with FakeWttr({"Paris": (18, "Partly cloudy")}) as wttr:
        wttr.fail_next("weather", status=503)
        tg, (run, events) = await run_example(tmp_path, wttr, model)
    (result,) = [e for e in events if e.kind == "action_result"]
    assert result.error and "503" in result.error
    assert "503" in str(model.requests[1])  # the model was told, and did not get a made-up forecast
