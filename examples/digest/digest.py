"""The digest example's extension: ``newItems``, the items the last digest did not have.

The ids already posted are the action's memory (``memory="posted"``, one value for the whole
hub with ``scope="global"``), so each digest has only what is new, across restarts too.
"""

from __future__ import annotations

import json

from pydantic import BaseModel

from hub import Extension, RunContext, action


class DigestSettings(BaseModel):
    items_file: str = "items.json"


class NoArgs(BaseModel):
    pass


class Item(BaseModel):
    id: str
    title: str
    source: str


def extension(settings: DigestSettings) -> Extension:
    @action(name="newItems", description="The items since the last digest.", memory="posted", scope="global")
    async def new_items(args: NoArgs, ctx: RunContext) -> list[Item]:
        path = ctx.hub.config.resolve(settings.items_file)  # relative to config.toml, as other paths are
        items = [Item.model_validate(i) for i in json.loads(path.read_text())]
        posted = set(ctx.action_memory or [])
        new = [i for i in items if i.id not in posted]
        ctx.action_memory = sorted(posted | {i.id for i in new})  # saved when the action returns
        return new

    return Extension(name="digest", actions=[new_items])
