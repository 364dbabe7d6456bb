"""``dm_policy`` as every platform applies it to a private message."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from ..features import Access, Decision
from ._audience import AllowList
from ._send import SendFailed

if TYPE_CHECKING:
    from ._settings import PlatformSettings

__all__ = ["admit_private", "private_access", "send_pairing_code"]

log = logging.getLogger("hub.platform")


async def private_access(
    access: Access,
    platform: str,
    settings: PlatformSettings,
    user: Any,
    *aliases: Any,
    user_name: str | None = None,
    user_handle: str | None = None,
) -> Decision:
    """Whether the author of a private message may reach the model, under ``settings.dm_policy``.

    ``access`` is the hub's (``hub.access``), which keeps the pairings.
    ``user`` is the platform's stable user id (pairings are kept under it); ``aliases`` are
    other names ``allowed_users`` may list (a username, ``@username``). Under ``"open"`` this
    allows everyone: the platform's ``allowed_users`` filter applies as it always has. Under
    ``"allowlist"`` and ``"pairing"`` it replaces that filter in private: ``allowed_users``
    are allowed, and the rest are denied (``"allowlist"``) or asked to pair (``"pairing"``:
    the platform sends ``decision.message``, with its one-time code, and nothing else).
    ``user_name`` and ``user_handle`` (the display name and @username) are kept with a new
    code, so the operator approving it sees who asked (the dashboard's Access page).
    """
    policy = settings.dm_policy
    if policy == "open":
        return Decision("allow")
    listed = AllowList(settings.allowed_users)
    if listed and listed.allows(user, *aliases):
        return Decision("allow")
    return await access.check(platform, str(user), policy, (), user_name=user_name, user_handle=user_handle)


def send_pairing_code(
    access: Access,
    create_task: Callable[..., Any],
    platform: str,
    user: Any,
    decision: Decision,
    send: Callable[[str], Awaitable[Any]],
) -> None:
    """Send ``decision.message`` (a pairing code, once per code) in the background through
    ``send`` (the platform's paced, retried sender), never on the intake path: a poller or a
    webhook is not held up by the pacing of replies to strangers. A code that cannot be
    delivered is retracted, so the user's next message draws a new one.

    ``create_task`` is the hub's (``hub.create_task``): the send is tracked and ends with the hub.
    """
    text, code = decision.message, decision.code
    if text is None or code is None:
        return

    async def deliver() -> None:
        try:
            await send(text)
        except SendFailed as e:
            log.warning(
                "%s: the pairing code for user %s was not sent (%s): the next message draws another", platform, user, e
            )
            await access.retract(platform, str(user), code)

    task: Coroutine[Any, Any, None] = deliver()
    create_task(task, name=f"{platform}: pairing code for user {user}")


async def admit_private(
    access: Access,
    create_task: Callable[..., Any],
    platform: str,
    settings: PlatformSettings,
    user: Any,
    *aliases: Any,
    send: Callable[[str], Awaitable[Any]] | None,
    user_name: str | None = None,
    user_handle: str | None = None,
) -> bool:
    """[`private_access()`][hub.platform.private_access] as each platform acts on it: True when the private message may
    reach the model; else why not is logged and, under ``"pairing"``, the user's code is sent
    once through ``send`` (the platform's paced sender; None: no way to answer right now)."""
    decision = await private_access(
        access, platform, settings, user, *aliases, user_name=user_name, user_handle=user_handle
    )
    if decision.allowed:
        return True
    if decision.verdict != "pair":
        log.info("%s: user %s is not on allowed_users (dm_policy = %s): ignored", platform, user, settings.dm_policy)
    elif decision.message is None:
        log.info("%s: user %s is not paired and was told their code already: ignored", platform, user)
    elif send is not None:
        log.info("%s: user %s is not paired: sending them a pairing code", platform, user)
        send_pairing_code(access, create_task, platform, user, decision, send)
    return False
