"""``hub check``: everything that can be validated without connecting to anything.

Each problem names where it is (the file and the dotted key, or the persona file) and what
is wrong. Errors stop ``hub run`` from working as configured; warnings are probably
mistakes (a role nobody holds, a persona mapping for a context that does not exist).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..config import HubConfig
from ..definitions import Extension, load_extension, split_context_name
from ..errors import HubError
from ..personas import PersonaSet, SkillSet
from ._tools import mcp_lines, probe_mcp

__all__ = ["CheckReport", "check_config", "check_mcp"]


@dataclass(slots=True)
class CheckReport:
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    extensions: list[str] = field(default_factory=list)
    personas: list[str] = field(default_factory=list)
    skills: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def check_config(config: HubConfig) -> CheckReport:
    """Validate extension settings, personas, persona mappings, roles, limits and the model."""
    return _Checker(config).run()


class _Checker:
    """One ``hub check``: each method checks one part of the config against what the enabled
    extensions declare, and adds what it finds to the report, in the order they run."""

    def __init__(self, config: HubConfig) -> None:
        self.config = config
        self.report = CheckReport()
        self.where = f"{config.path}: " if config.path else ""
        self.exts: list[Extension] = []
        self.folder = config.contexts_dir
        self.personas = PersonaSet(self.folder)

    def run(self) -> CheckReport:
        self.report.warnings.extend(self.config.unset_warnings())
        self._extensions()
        self._personas()
        self._persona_mappings()
        self._conversation_routes()
        self._roles()
        self._contexts_named()
        self._routes()
        self._model()
        self._http()
        self._pairing()
        self._costs()
        self._commands()
        self._skills()
        return self.report

    @property
    def context_types(self) -> set[str]:
        return {c.type for e in self.exts for c in e.contexts}

    @property
    def ext_names(self) -> set[str]:
        return {e.name for e in self.exts}

    def _known_types(self) -> str:
        return ", ".join(sorted(self.context_types)) or "none"

    def _extensions(self) -> None:
        """Each enabled extension loads with its settings."""
        for name, table in self.config.enabled_extensions().items():
            try:
                self.exts.append(load_extension(name, table, self.config))
            except HubError as e:
                self.report.errors.append(str(e))
        self.report.extensions = [e.name for e in self.exts]

    def _personas(self) -> None:
        """The persona files load, and the default persona is there."""
        folder, personas = self.folder, self.personas
        if not folder.is_dir():
            self.report.errors.append(f"{folder}: personas folder not found ([hub] contexts_dir)")
        else:
            self.report.errors.extend(str(e) for e in personas.load_all())
            self.report.warnings.extend(f"{path}: skipped: {why}" for path, why in personas.skipped().items())
            if personas.get(personas.default) is None and f"{personas.default}.toml" not in {
                p.name for p in folder.glob("*.toml")
            }:
                # routes that give every conversation of a context type a persona leave the
                # default unused there: only the types they leave out need it
                bare = sorted(t for t in self.context_types if not self._routed(t))
                if bare or not self.exts:
                    whose = f" ({', '.join(bare)})" if bare else ""
                    self.report.warnings.append(
                        f"{folder}: no {personas.default}.toml: conversations{whose} with no persona get none"
                    )
        self.report.personas = personas.names()

    def _routed(self, context_type: str) -> bool:
        """Whether a route with a persona fits every conversation of ``context_type``: its
        ``match`` is ``PREFIX*`` (no other wildcard) with ``PREFIX`` a prefix of ``TYPE:``,
        and no route before it without a persona takes any of them."""
        whole = f"{context_type}:"
        for route in self.config.routes:
            literal = re.split(r"[*?\[]", route.match, maxsplit=1)[0]
            if route.match == literal + "*" and whole.startswith(literal):
                return bool(route.persona)
            if not route.persona and (literal.startswith(whole) or whole.startswith(literal)):
                return False  # an earlier route without a persona takes some of them
        return False

    def _persona_mappings(self) -> None:
        """``[personas]`` names files that exist and scopes that an extension has; a persona's
        ``extensions`` are enabled ones."""
        where, folder = self.where, self.folder
        on_disk = {p.stem for p in folder.glob("*.toml")} if folder.is_dir() else set()
        for scope, name in self.config.personas.items():
            if name not in on_disk:
                self.report.errors.append(
                    f"{where}personas.{scope}: persona {name!r} has no file {folder / (name + '.toml')}"
                )
            if self.exts and not _scope_known(scope, self.context_types, self.ext_names):
                self.report.warnings.append(
                    f"{where}personas.{scope}: no enabled extension has this context type or name "
                    f"(context types: {self._known_types()})"
                )
        for pname in self.personas.names():
            p = self.personas.get(pname)
            for ext_name in p.extensions if p is not None else ():
                if self.exts and ext_name not in self.ext_names:
                    self.report.warnings.append(
                        f"{folder / (pname + '.toml')}: extensions: {ext_name!r} is not enabled"
                    )

    def _conversation_routes(self) -> None:
        """Each ``[[routes]]`` names a persona that exists and a context of an enabled extension;
        a persona file that declares conversations a route gives another persona is named
        (the route wins)."""
        where, folder = self.where, self.folder
        on_disk = {p.stem for p in folder.glob("*.toml")} if folder.is_dir() else set()
        for i, route in enumerate(self.config.routes, 1):
            at = f"{where}routes #{i} (match {route.match!r})"
            if route.persona and route.persona not in on_disk:
                self.report.errors.append(
                    f"{at}: persona {route.persona!r} has no file {folder / (route.persona + '.toml')}"
                )
            if self.exts and not any(route.match.startswith(t.split(":")[0]) for t in self.context_types):
                if not route.match.startswith(("*", "?", "[")):
                    self.report.warnings.append(
                        f"{at}: matches no context of an enabled extension (context types: {self._known_types()})"
                    )
            if not route.persona:
                continue
            for pname in self.personas.names():
                p = self.personas.get(pname)
                if p is None or pname == route.persona:
                    continue
                for declared in p.contexts:
                    if _overlap(declared, route.match):
                        self.report.warnings.append(
                            f"{folder / (pname + '.toml')}: contexts: {declared!r} overlaps {at}, which gives "
                            f"persona {route.persona!r}: the route wins there"
                        )

    def _roles(self) -> None:
        """``[roles]`` name enabled platforms, and every role an action requires is held."""
        for role, by_platform in self.config.roles.items():
            for platform in by_platform:
                if self.exts and platform not in self.ext_names:
                    self.report.warnings.append(
                        f"{self.where}roles.{role}.{platform}: no enabled extension is named {platform!r}"
                    )
        for ext in self.exts:
            for action in ext.actions:
                for role in (r for r in action.roles if r not in self.config.roles):
                    self.report.warnings.append(
                        f"extension {ext.name!r}: action {action.name!r} requires role {role!r}, which no one holds "
                        f"(add [roles.{role}]): every call will be denied"
                    )
            for cmd in ext.commands:
                if cmd.roles and not set(cmd.roles) & set(self.config.roles):
                    self.report.warnings.append(
                        f"extension {ext.name!r}: command /{cmd.name} requires the role {' or '.join(cmd.roles)}, "
                        "which no one holds: nobody may use it"
                    )

    def _contexts_named(self) -> None:
        """``[agent] context``, each webhook's and each schedule's context are contexts of
        enabled extensions."""
        if not self.exts:
            return
        where, types = self.where, self.context_types
        if self.config.agent.context and self.config.agent.context not in types:
            self.report.errors.append(
                f"{where}agent.context: {self.config.agent.context!r} names no context type of an enabled extension "
                f"(context types: {self._known_types()})"
            )
        for section in ("webhooks", "schedules"):
            for name, item in getattr(self.config, section).items():
                if split_context_name(item.context, types) is None and item.context not in types:
                    self.report.errors.append(
                        f"{where}{section}.{name}.context: {item.context!r} names no context of an enabled extension "
                        f"(TYPE:KEY; context types: {self._known_types()})"
                    )

    def _routes(self) -> None:
        """Extensions that mount routes (Telegram's webhook mode, say) have the [http] endpoint."""
        routes = sorted(f"{e.name} ({r.path})" for e in self.exts for r in e.routes)
        if routes and self.config.http is None:
            self.report.errors.append(
                f"{self.where}http: extension routes need the [http] endpoint, which is not configured: "
                f"{', '.join(routes)}"
            )

    def _model(self) -> None:
        """The local model's file and library are there; the OpenAI provider has a key or a URL."""
        m, where = self.config.model, self.where
        if m.resolved_provider() == "local":
            if m.model_path:
                path = Path(m.model_path).expanduser()  # as the provider opens it
                if not path.is_file():
                    self.report.errors.append(f"{where}model.model_path: file not found: {path}")
            else:
                from ..models.local import default_gguf

                try:
                    default_gguf()
                except HubError as e:
                    self.report.errors.append(f"{where}model: {e}")
            try:
                import xllamacpp  # noqa: F401
            except ImportError:
                self.report.errors.append(f"{where}model.provider: local needs xllamacpp (pip install 'hub[local]')")
        elif m.provider == "openai" and not m.api_key and not m.base_url:
            self.report.warnings.append(f"{where}model.api_key: empty (is OPENAI_API_KEY set?)")

    def _http(self) -> None:
        """An [http] endpoint without a token: the run-event routes and the dashboard are off."""
        if self.config.http is not None and not self.config.http.token:
            self.report.warnings.append(
                f"{self.where}http.token: empty: /events and /runs/{{id}} are off, the dashboard at /ui/ is off, "
                "/metrics is open"
            )

    def _pairing(self) -> None:
        """``dm_policy = "pairing"`` (or ``"allowlist"``) guards private messages only: with
        ``allowed_users`` empty, anyone who mentions the bot in a group is still answered."""
        for name, table in self.config.enabled_extensions().items():
            policy = table.get("dm_policy")
            if policy not in ("pairing", "allowlist") or table.get("allowed_users") or table.get("groups") == "off":
                continue
            self.report.warnings.append(
                f'{self.where}extensions.{name}.dm_policy: "{policy}" applies to private messages only; with '
                "allowed_users empty, anyone who mentions the bot in a group or server channel is answered "
                'without a code: list who may talk to it in allowed_users (or close groups: groups = "off", '
                "where the platform has it)"
            )

    def _costs(self) -> None:
        """A budget in money needs the model's prices: without them nothing is counted."""
        limits, model = self.config.limits, self.config.model
        for key in ("conversation_cost_per_day", "user_cost_per_day", "cost_per_day"):
            if getattr(limits, key) and not model.priced:
                self.report.warnings.append(
                    f"{self.where}limits.{key}: set, but [model] price_input and price_output are 0 (unknown): "
                    "no cost is counted, so this budget never stops anything"
                )

    def _commands(self) -> None:
        """``[commands] disabled`` names commands that exist; an extension's command does not
        take a built-in's name that is on (the hub would refuse to start)."""
        from ..engine import BUILT_IN

        off = set(self.config.commands.disabled)
        declared = {c.name: e.name for e in self.exts for c in e.commands}
        for name in sorted(off - set(BUILT_IN) - set(declared)):
            if self.exts:
                self.report.warnings.append(
                    f"{self.where}commands.disabled: {name!r} is no command (built in: {', '.join(BUILT_IN)}; "
                    f"the extensions': {', '.join(sorted(declared)) or 'none'})"
                )
        for name, ext in sorted(declared.items()):
            if name in BUILT_IN and name not in off:
                self.report.errors.append(
                    f"extension {ext!r}: command /{name} is built in: add {name!r} to [commands] disabled "
                    "to answer it yourself"
                )

    def _skills(self) -> None:
        """Each ``skills/NAME/SKILL.md`` validates (front matter, name, description)."""
        if not self.config.agent.skills_dir:
            return
        skills = SkillSet(self.config.resolve(self.config.agent.skills_dir))
        skills.refresh()
        self.report.errors.extend(skills.errors().values())
        self.report.skills = skills.names()


async def check_mcp(config: HubConfig, report: CheckReport) -> list[str]:
    """Start each ``[mcp.*]`` server and ask it for its tools: the lines ``hub check`` prints;
    a server that will not start is an error of ``report``, naming it."""
    try:
        statuses = await probe_mcp(config)
    except HubError as e:
        report.errors.append(str(e))
        return []
    lines, errors = mcp_lines(statuses)
    where = f"{config.path}: " if config.path else ""
    report.errors.extend(where + e for e in errors)
    return lines


def _overlap(declared: str, match: str) -> bool:
    """Whether a persona's ``contexts`` entry (a context type, or a glob over names) and a
    route's ``match`` may name the same conversation: either glob matches the other, or the
    entry is the context type the route's names begin with."""
    return (
        fnmatch.fnmatchcase(declared, match) or fnmatch.fnmatchcase(match, declared) or match.startswith(declared + ":")
    )


def _scope_known(scope: str, context_types: set[str], ext_names: set[str]) -> bool:
    if scope in context_types or scope in ext_names:
        return True
    return split_context_name(scope, context_types) is not None
