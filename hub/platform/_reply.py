"""Which message a reply answers: the newest input of the run that names one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..logs import OutputLog

if TYPE_CHECKING:
    from ..definitions import RunContext

__all__ = ["reply_target"]


def reply_target(
    ctx: RunContext, key: str, *, where: dict[str, Any] | None = None, once_for: str | None = None
) -> dict[str, Any] | None:
    """The metadata of the newest input of this run that carries ``key`` (a message id).

    ``where`` narrows it to inputs whose metadata has those values (compared as strings:
    ids arrive as ints or strings). With ``once_for`` (an output type), a message that a
    sent output of that type already answered (its data's ``reply_to``) is not a target
    again: only the first reply of a run quotes the message it answers.
    """
    found = None
    for entry in reversed(ctx.inputs):
        meta = entry.meta or {}
        if meta.get(key) is None:
            continue
        if where and any(str(meta.get(k)) != str(v) for k, v in where.items()):
            continue
        found = meta
        break
    if found is None:
        return None
    if once_for is not None:
        target = str(found[key])
        for e in ctx.logs:
            if isinstance(e, OutputLog) and e.type == once_for and e.sent and isinstance(e.data, dict):
                if str(e.data.get("reply_to")) == target:
                    return None
    return found
