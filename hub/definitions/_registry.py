"""What a hub knows by name: its extensions and the contexts, actions, outputs and inputs
they declare (`Registry`), and the resolution of a ``TYPE:KEY`` name to a context."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from ..errors import ExtensionError, RunError
from ._commands import Command
from ._context_names import split_context_name
from ._types import Action, Context, Extension, Input, Output, Route

__all__ = ["Registry"]


class Registry:
    """One hub's registries (contexts, actions, outputs, inputs, routes, commands). Names are unique across extensions; each item remembers the
    extension that registered it (for personas per extension and error messages)."""

    def __init__(self) -> None:
        self.extensions: dict[str, Extension] = {}
        self.contexts: dict[str, Context] = {}
        self.actions: dict[str, Action] = {}
        self.outputs: dict[str, Output] = {}
        self.inputs: dict[str, Input] = {}
        self.routes: dict[str, Route] = {}  # by path, served on [http]
        self.commands: dict[str, Command] = {}  # chat commands by name (hub.engine answers them)
        # id -> (the object, its owner): the object is held, so its id() is never reused while listed
        self._owners: dict[int, tuple[Any, str]] = {}

    def register(self, ext: Extension) -> None:
        """Add an extension's definitions; a name already taken is an ExtensionError naming both."""
        if ext.name in self.extensions:
            raise ExtensionError(ext.name, "registered twice")
        item: Any  # a context, action, output or input: each registry below keeps its own kind
        for route in ext.routes:
            route.check(ext.name)
        for registry, items, attr, what in (
            (self.contexts, ext.contexts, "type", "context"),
            (self.actions, ext.actions, "name", "action"),
            (self.outputs, ext.outputs, "type", "output"),
            (self.inputs, ext.inputs, "type", "input"),
            (self.routes, ext.routes, "path", "route"),
            (self.commands, ext.commands, "name", "command"),
        ):
            for item in items:
                name = getattr(item, attr)
                if name in registry:
                    other = self.owner_of(registry[name]) or "?"
                    raise ExtensionError(ext.name, f"{what} {name!r} is already defined by extension {other!r}")
        for registry, items, attr in (
            (self.contexts, ext.contexts, "type"),
            (self.actions, ext.actions, "name"),
            (self.outputs, ext.outputs, "type"),
            (self.inputs, ext.inputs, "type"),
            (self.routes, ext.routes, "path"),
            (self.commands, ext.commands, "name"),
        ):
            for item in items:
                registry[getattr(item, attr)] = item
                self._owners[id(item)] = (item, ext.name)
        self.extensions[ext.name] = ext

    def replace_actions(self, owner: str, actions: Sequence[Action]) -> list[str]:
        """Put ``actions`` in place of those ``owner`` contributed before: tools that come and go
        while the hub runs (an MCP server's, as it lists them). Returns why each one that was
        left out was (a name another owner has); the next step of every run sees the change."""
        for name, a in list(self.actions.items()):
            if self.owner_of(a) == owner:
                del self.actions[name]
                del self._owners[id(a)]
        refused = []
        for a in actions:
            other = self.actions.get(a.name)
            if other is not None:
                refused.append(f"action {a.name!r} is already defined by {self.owner_of(other) or '?'!r}")
                continue
            self.actions[a.name] = a
            self._owners[id(a)] = (a, owner)
        return refused

    def owner_of(self, item: Any) -> str | None:
        held = self._owners.get(id(item))
        return held[1] if held is not None and held[0] is item else None

    def split(self, name: str) -> tuple[str, str] | None:
        """``(TYPE, KEY)`` of an instance name by the registered context types (the longest
        that prefixes it), so that a key may hold colons; None when no type does."""
        return split_context_name(name, self.contexts)

    def context_type_of(self, name: str) -> str:
        """The context type of a type or instance name; "" when no registered type names it."""
        if name in self.contexts:
            return name
        split = self.split(name)
        return split[0] if split is not None else ""

    def resolve(self, context: str | Context, args: Any = None) -> tuple[Context, Any, str]:
        """A context type (with args) or a ``TYPE:KEY`` instance name → (definition, args, key)."""
        if isinstance(context, Context):
            definition = context
            key = None
        elif context in self.contexts:
            definition, key = self.contexts[context], None
        else:
            split = self.split(context)
            if split is None:
                known = ", ".join(sorted(self.contexts)) or "none"
                raise RunError(f"unknown context {context!r}; known context types: {known}")
            ctype, key = split
            definition = self.contexts[ctype]
        try:
            if args is None:
                if key is None:
                    raise RunError(f"context {definition.type!r} needs args (or name an instance as TYPE:KEY)")
                parsed = definition.args_from_key(key)
            elif isinstance(args, BaseModel):
                parsed = args
            else:
                parsed = definition.schema.model_validate(args)
        except (ValidationError, ValueError) as e:
            raise RunError(f"invalid args for context {definition.type!r}: {e}") from e
        return definition, parsed, definition.key_of(parsed)
