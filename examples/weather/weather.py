"""The weather example's extension: one action, ``getWeather``, backed by wttr.in's JSON API.

``[extensions.weather]`` in config.toml is validated against :class:`WeatherSettings`; the
HTTP session lives as long as the hub (a service), not one per call.
"""

from __future__ import annotations

from typing import Any

import aiohttp
from pydantic import BaseModel, Field

from hub import Extension, RunContext, Service, action


class WeatherSettings(BaseModel):
    base_url: str = "https://wttr.in"
    timeout: float = Field(10.0, gt=0)


class WeatherArgs(BaseModel):
    location: str = Field(min_length=1, description="A city or place, e.g. 'Paris'.")


class Weather(BaseModel):
    location: str
    temperature_c: float
    condition: str


def extension(settings: WeatherSettings) -> Extension:
    http: dict[str, aiohttp.ClientSession] = {}

    async def start(hub: Any) -> None:
        timeout = aiohttp.ClientTimeout(total=settings.timeout)
        http["session"] = aiohttp.ClientSession(settings.base_url, timeout=timeout)

    async def stop() -> None:
        await http.pop("session").close()

    @action(name="getWeather", description="The current weather at a place.")
    async def get_weather(args: WeatherArgs, ctx: RunContext) -> Weather:
        # wttr.in: GET /PLACE?format=j1 answers JSON; an error status becomes an error result
        async with http["session"].get(f"/{args.location}", params={"format": "j1"}) as r:
            r.raise_for_status()
            data = await r.json()
        now = data["current_condition"][0]
        return Weather(
            location=args.location,
            temperature_c=float(now["temp_C"]),
            condition=now["weatherDesc"][0]["value"],
        )

    return Extension(
        name="weather",
        actions=[get_weather],
        services=[Service(name="weather-http", start=start, stop=stop)],
    )
