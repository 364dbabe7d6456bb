"""The approvals example's extension: ``restartService``, a sensitive action.

config.toml lists it under ``[approvals] actions``, so the hub asks a person before each
call runs; the handler itself does not know. Restarting is played by a line in a journal.
"""

from __future__ import annotations

import time
from typing import Literal

from pydantic import BaseModel

from hub import Extension, RunContext, action


class OpsSettings(BaseModel):
    journal: str = "restarts.log"


class RestartArgs(BaseModel):
    service: Literal["api", "worker", "web"]


def extension(settings: OpsSettings) -> Extension:
    @action(name="restartService", description="Restart one of the team's services.", queue="restarts")
    async def restart_service(args: RestartArgs, ctx: RunContext) -> dict[str, str]:
        journal = ctx.hub.config.resolve(settings.journal)
        with journal.open("a", encoding="utf-8") as f:
            f.write(f"{time.time():.0f} restarted {args.service} for {ctx.run.user or 'someone'}\n")
        return {"service": args.service, "state": "restarted"}

    return Extension(name="ops", actions=[restart_service])
