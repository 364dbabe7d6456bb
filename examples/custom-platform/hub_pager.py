"""Pager as a platform of the hub: a chat service with a JSON API.

``GET /messages?after=ID`` answers the messages after ``ID`` (oldest first), ``POST /messages``
with ``{"room", "text", "reply_to"}`` sends one; every request carries ``Authorization:
Bearer TOKEN``. Only ``hub`` and ``hub.platform`` are imported, as in every extension.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

import aiohttp
from pydantic import BaseModel, SecretStr

from hub import Context, Extension, Input, RunContext, Service, output
from hub.platform import (
    AllowList,
    Backoff,
    Governor,
    PermanentSendError,
    PlatformSettings,
    RateLimited,
    TransientSendError,
    reply_target,
    split_message,
)

MAX_TEXT = 1000  # Pager refuses a longer message: a longer reply goes as several


class PagerSettings(PlatformSettings):  # allowed_users, loop_guard_*, send_* come with it
    base_url: str
    token: SecretStr
    poll_interval: float = 1.0


class PagerRoom(BaseModel):
    room: str


async def _post(
    http: dict[str, aiohttp.ClientSession], settings: PagerSettings, room: str, text: str, reply_to: int | None
) -> dict[str, Any]:
    """One message sent; Pager's refusals raised as the governor reads them (wait, retry, give up)."""
    body = {"room": room, "text": text, "reply_to": reply_to}
    async with http["session"].post(f"{settings.base_url}/messages", json=body) as r:
        if r.status == 429:
            raise RateLimited(float(r.headers.get("Retry-After", "1")))
        if r.status >= 500:
            raise TransientSendError(f"HTTP {r.status}")
        if r.status >= 400:
            raise PermanentSendError(f"HTTP {r.status}: {await r.text()}")
        return await r.json()


def extension(settings: PagerSettings) -> Extension:
    http: dict[str, aiohttp.ClientSession] = {}
    governor = Governor("pager", max_attempts=settings.send_attempts, max_wait=settings.send_max_wait)
    users = AllowList(settings.allowed_users)

    async def start(hub: Any) -> None:
        auth = {"Authorization": f"Bearer {settings.token.get_secret_value()}"}
        http["session"] = aiohttp.ClientSession(headers=auth)

    async def stop() -> None:
        await http.pop("session").close()

    @output(type="pager:send", context="pager:room", description="Send a message to this Pager room.")
    async def send(content: str, ctx: RunContext) -> dict[str, Any]:
        room = ctx.context.args.room
        target = reply_target(ctx, "message_id", where={"room": room}, once_for="pager:send")
        reply_to = target["message_id"] if target else None
        ids = []
        for i, part in enumerate(split_message(content, MAX_TEXT)):
            quote = reply_to if i == 0 else None
            sent = await governor.send(room, partial(_post, http, settings, room, part, quote))
            ids.append(sent["id"])
            await ctx.part_sent(i, {"message_id": sent["id"]})  # a restart does not send it again
        return {"message_ids": ids, "reply_to": reply_to}

    async def subscribe(send_input: Any, hub: Any) -> Any:
        async def poll() -> None:
            after, backoff = 0, Backoff(first=1.0, most=60.0)
            while True:
                try:
                    url = f"{settings.base_url}/messages"
                    async with http["session"].get(url, params={"after": after}) as r:
                        r.raise_for_status()
                        messages = await r.json()
                except aiohttp.ClientError:
                    await asyncio.sleep(backoff.next())  # never a tight loop
                    continue
                backoff.reset()
                for m in messages:
                    after = m["id"]
                    if m.get("bot") or not users.allows(m["user"]):
                        continue
                    await send_input(
                        "pager:room",
                        {"room": m["room"]},
                        m["text"],
                        user=m["user"],
                        platform_id=f"pager:{m['id']}",  # a redelivery is not answered twice
                        meta={"room": m["room"], "message_id": m["id"]},
                    )
                await asyncio.sleep(settings.poll_interval)

        task = hub.create_task(poll(), name="pager:poll")

        async def unsubscribe() -> None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

        return unsubscribe

    pager_room: Context[PagerRoom, dict[str, Any]] = Context(
        type="pager:room",
        schema=PagerRoom,
        key=lambda a: a.room,
        description="A room on Pager.",
        reply_output="pager:send",
    )
    return Extension(
        name="pager",
        contexts=[pager_room],
        outputs=[send],
        inputs=[Input(type="pager:message", subscribe=subscribe, description="Messages on Pager.")],
        services=[Service(name="pager", start=start, stop=stop)],
    )
