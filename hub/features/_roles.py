"""Role guardrails: an action that declares ``roles`` runs only for users who hold one.

Roles come from config, per platform (the extension that owns the conversation)::

    [roles.admin]
    telegram = ["42"]          # user ids as the platform gives them
    cli = ["alice"]            # "*" would grant the role to every user of that platform

A call is allowed when every user whose input the run is handling holds one of the
action's roles (per person: an identity linked with ``/link`` to a listed one holds its roles): in a group chat, a message from someone else taken in the same run cannot
borrow an admin's rights. Inputs with no user (schedules, webhooks) hold no role. A denial
is an `ActionResultLog` with ``denied`` set, which the model sees as
``<action_result status="denied">``; for an action marked ``critical`` it ends the run
``rejected``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..definitions import Action, RunContext
from ..engine import Plugin
from ..store import People

__all__ = ["RoleGuard"]


class RoleGuard(Plugin):
    """A plugin whose ``authorize(action, ctx)`` is None or a denial the model sees."""

    name = "roles"

    def __init__(self, roles: Mapping[str, Mapping[str, Sequence[str]]]) -> None:
        # role -> platform -> ids, kept as sets for the lookup
        self.roles = {role: {p: set(ids) for p, ids in by_platform.items()} for role, by_platform in roles.items()}

    def roles_of(self, platform: str, user: str | None) -> set[str]:
        held = set()
        for role, by_platform in self.roles.items():
            ids = by_platform.get(platform, set())
            if "*" in ids or (user is not None and user in ids):
                held.add(role)
        return held

    async def person_roles(self, people: People, platform: str, user: str | None) -> set[str]:
        """The roles ``user`` holds on ``platform`` as a person: its own (`roles_of`) and
        those of every identity linked to it with ``/link`` (unlinked, they are withdrawn).
        Only the listed ids are looked up, and none when the roles are held already."""
        held = self.roles_of(platform, user)
        if user is None:
            return held
        person: str | None = None
        for role, by_platform in self.roles.items():
            if role in held:
                continue
            for listed_platform, ids in by_platform.items():
                for listed in ids - {"*"}:
                    if (listed_platform, listed) == (platform, user):
                        continue
                    if person is None:
                        person = await people.lookup(platform, user)
                        if person is None:  # never seen, so linked to nobody
                            return held
                    if await people.lookup(listed_platform, listed) == person:
                        held.add(role)
                        break
                if role in held:
                    break
        return held

    async def authorize(self, action: Action, ctx: RunContext) -> str | None:
        if not action.roles:
            return None
        platform = ctx.context.extension or ctx.context.type.split(":", 1)[0]
        users = list(dict.fromkeys(e.user for e in ctx.inputs)) or [ctx.user]
        needed = set(action.roles)
        wanted = " or ".join(sorted(needed))
        for user in users:
            if not self.roles_of(platform, user) & needed and not await self._person_holds(ctx, user, needed):
                who = f"user {user} on {platform}" if user is not None else f"an input with no user on {platform}"
                return (
                    f"permission denied: action {action.name!r} requires the role {wanted}, which {who} does not have"
                )
        return None

    async def _person_holds(self, ctx: RunContext, user: str | None, needed: set[str]) -> bool:
        """Roles are per person: the speaker holds a role one of their linked identities is
        listed for. Only the listed ids are looked up (the operator's few), never every person."""
        if user is None or user != ctx.user or ctx.person is None:
            return False
        people = People(ctx.hub.memory)
        for role in needed:
            for platform, ids in self.roles.get(role, {}).items():
                for listed in ids - {"*"}:
                    if await people.lookup(platform, listed) == ctx.person:
                        return True
        return False
