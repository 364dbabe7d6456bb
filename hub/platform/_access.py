"""``dm_policy`` as every platform applies it to a private message."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..features import Access, Decision
from ._audience import AllowList

if TYPE_CHECKING:
    from ._settings import PlatformSettings

__all__ = ["private_access"]


async def private_access(
    access: Access, platform: str, settings: PlatformSettings, user: Any, *aliases: Any
) -> Decision:
    """Whether the author of a private message may reach the model, under ``settings.dm_policy``.

    ``access`` is the hub's (``hub.access``), which keeps the pairings.
    ``user`` is the platform's stable user id (pairings are kept under it); ``aliases`` are
    other names ``allowed_users`` may list (a username, ``@username``). Under ``"open"`` this
    allows everyone: the platform's ``allowed_users`` filter applies as it always has. Under
    ``"allowlist"`` and ``"pairing"`` it replaces that filter in private: ``allowed_users``
    are allowed, and the rest are denied (``"allowlist"``) or asked to pair (``"pairing"``:
    the platform sends ``decision.message``, with its one-time code, and nothing else).
    """
    policy = settings.dm_policy
    if policy == "open":
        return Decision("allow")
    listed = AllowList(settings.allowed_users)
    if listed and listed.allows(user, *aliases):
        return Decision("allow")
    return await access.check(platform, str(user), policy, ())
