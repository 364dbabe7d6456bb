"""A fixed text sent to a conversation outside the step loop: the answer to a command, the
limit reply, the failure reply. It goes through the conversation's usual output (its
context's ``reply_output``), as the model's plain-text reply would, and is recorded in the
run's log as an [`OutputLog`][hub.OutputLog] whose ``data`` says what it was.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ..config import HubConfig
from ..definitions import Output, RunContext
from ..logs import OutputLog, jsonable
from ..store import RunStore
from ._live_output import LiveText

if TYPE_CHECKING:
    from ..personas import Persona

__all__ = ["failure_text", "reply_output", "send_reply"]

log = logging.getLogger("hub.engine")


def failure_text(config: HubConfig, persona: Persona | None) -> str:
    """What a user gets when their run failed: the persona's ``failure_reply``, else ``[agent]
    failure_reply`` ("" for nothing). A fixed text: never the error, which may hold internals."""
    if persona is not None and persona.failure_reply is not None:
        return persona.failure_reply
    return config.agent.failure_reply


def reply_output(ctx: RunContext, outputs: Mapping[str, Output]) -> Output | None:
    """The text output a plain reply in ``ctx``'s conversation goes through (its context's
    ``reply_output``, declared with it or by any extension), or None when it has none."""
    definition = ctx.context.definition
    otype = definition.reply_output
    out = next((o for o in definition.outputs if o.type == otype), None) or outputs.get(otype or "")
    return out if out is not None and out.is_text else None


async def send_reply(
    ctx: RunContext,
    text: str,
    *,
    outputs: Mapping[str, Output],
    runs: RunStore,
    data: dict[str, Any],
    step: int = 0,
) -> OutputLog | None:
    """Send ``text`` through the conversation's reply output and record it in the run's log;
    the entry (``sent``, or ``error`` saying why not), or None when the conversation has no
    text reply output (logged). ``data`` says what the reply is (``{"limit_reply": reason}``);
    what the platform answered is added under ``result``. Never raises for the output's sake."""
    out = reply_output(ctx, outputs)
    if out is None:
        log.warning("run %s: context %s has no text reply output for %s", ctx.run.id[:8], ctx.context.type, data)
        return None
    entry = OutputLog(type=out.type, content=text, step=step, data=dict(data))
    try:
        attributes = out.attributes.model_validate({})
        content: Any = LiveText.whole(text) if out.live else text  # a live output's handler reads a LiveText
        answer: Any = await out.handler(content, ctx.derive(attributes=attributes, output=entry))
    except ValidationError as e:
        entry.error = f"the reply output needs attributes: {e.errors()[0]['loc']}"
    except Exception as e:
        entry.error = f"{type(e).__name__}: {e}"
        log.error("run %s: a reply (%s) was not sent: %s", ctx.run.id[:8], ", ".join(data), entry.error)
    else:
        entry.sent = True
        if answer is not None:
            entry.data = {**entry.data, "result": jsonable(answer)}
    try:
        runs.append(ctx.run, entry)
    except Exception:
        log.exception("run %s: recording a reply failed", ctx.run.id[:8])
    return entry
