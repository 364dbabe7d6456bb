"""Which persona each conversation uses, as the engine would pick it for its next run.

The same order as [`hub.Hub.persona_for()`][hub.Hub.persona_for]: the ``[[routes]]`` it matches first, the
``[personas]`` overrides of the config (by
instance, context type or extension), then the context's own ``persona``, then a persona file
naming the instance, its type or its extension, then the default. The dashboard shows it on a
persona's page (the recent conversations that use it) and on each conversation's page.
"""

from __future__ import annotations

from typing import Any

__all__ = ["persona_of"]


def persona_of(hub: Any, context_id: str) -> str | None:
    """The name of the persona conversation ``context_id`` (``TYPE:KEY``) uses; None when its
    context type is not registered (an extension since removed) or no persona applies."""
    ctype = next(
        (t for t in sorted(hub.contexts, key=len, reverse=True) if context_id.startswith(t + ":")),
        None,
    )
    if ctype is None:
        return None
    definition = hub.contexts[ctype]
    extension = hub.owner_of(definition)
    o = hub.persona_overrides
    route = hub.route_for(context_id)
    override = (
        (route.persona if route is not None else "")
        or o.get(context_id)
        or o.get(ctype)
        or (o.get(extension) if extension else None)
        or definition.persona
    )
    persona = hub.personas.for_context(ctype, context_id, extension, override=override)
    if persona is None:
        return None
    # the persona's file name (its revisions' name), not the name written inside it
    for name in hub.personas.names():
        if hub.personas.get(name) is persona:
            return str(name)
    return str(persona.name)
