"""``hub check``: everything that can be validated without connecting to anything.

Each problem names where it is (the file and the dotted key, or the persona file) and what
is wrong. Errors stop ``hub run`` from working as configured; warnings are probably
mistakes (a role nobody holds, a persona mapping for a context that does not exist).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..config import HubConfig
from ..definitions import Extension, load_extension
from ..errors import HubError
from ..personas import PersonaSet

__all__ = ["CheckReport", "check_config"]


@dataclass(slots=True)
class CheckReport:
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    extensions: list[str] = field(default_factory=list)
    personas: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def check_config(config: HubConfig) -> CheckReport:  # noqa: C901 - split under issue 23
    """Validate extension settings, personas, persona mappings, roles, limits and the model."""
    report = CheckReport()
    where = f"{config.path}: " if config.path else ""
    report.warnings.extend(config.unset_warnings())

    exts: list[Extension] = []
    for name, table in config.enabled_extensions().items():
        try:
            exts.append(load_extension(name, table, config))
        except HubError as e:
            report.errors.append(str(e))
    report.extensions = [e.name for e in exts]
    context_types = {c.type for e in exts for c in e.contexts}
    ext_names = {e.name for e in exts}

    folder = config.contexts_dir
    personas = PersonaSet(folder)
    if not folder.is_dir():
        report.errors.append(f"{folder}: personas folder not found ([hub] contexts_dir)")
    else:
        report.errors.extend(str(e) for e in personas.load_all())
        report.warnings.extend(f"{path}: skipped: {why}" for path, why in personas.skipped().items())
        if personas.get(personas.default) is None and f"{personas.default}.toml" not in {
            p.name for p in folder.glob("*.toml")
        }:
            report.warnings.append(f"{folder}: no {personas.default}.toml: conversations with no persona get none")
    report.personas = personas.names()
    on_disk = {p.stem for p in folder.glob("*.toml")} if folder.is_dir() else set()

    for scope, name in config.personas.items():
        if name not in on_disk:
            report.errors.append(f"{where}personas.{scope}: persona {name!r} has no file {folder / (name + '.toml')}")
        if exts and not _scope_known(scope, context_types, ext_names):
            report.warnings.append(
                f"{where}personas.{scope}: no enabled extension has this context type or name "
                f"(context types: {', '.join(sorted(context_types)) or 'none'})"
            )
    for pname in personas.names():
        p = personas.get(pname)
        if p is not None:
            for ext_name in p.extensions:
                if exts and ext_name not in ext_names:
                    report.warnings.append(f"{folder / (pname + '.toml')}: extensions: {ext_name!r} is not enabled")

    for role, by_platform in config.roles.items():
        for platform in by_platform:
            if exts and platform not in ext_names:
                report.warnings.append(f"{where}roles.{role}.{platform}: no enabled extension is named {platform!r}")
    for ext in exts:
        for action in ext.actions:
            for role in action.roles:
                if role not in config.roles:
                    report.warnings.append(
                        f"extension {ext.name!r}: action {action.name!r} requires role {role!r}, which no one holds "
                        f"(add [roles.{role}]): every call will be denied"
                    )

    if exts and config.agent.context and config.agent.context not in context_types:
        report.errors.append(
            f"{where}agent.context: {config.agent.context!r} names no context type of an enabled extension "
            f"(context types: {', '.join(sorted(context_types)) or 'none'})"
        )

    for section in ("webhooks", "schedules"):
        for name, item in getattr(config, section).items():
            ctype, sep, _ = item.context.rpartition(":")
            if exts and not (sep and ctype in context_types) and item.context not in context_types:
                report.errors.append(
                    f"{where}{section}.{name}.context: {item.context!r} names no context of an enabled extension "
                    f"(TYPE:KEY; context types: {', '.join(sorted(context_types)) or 'none'})"
                )

    routes = sorted(f"{e.name} ({r.path})" for e in exts for r in e.routes)
    if routes and config.http is None:  # e.g. Telegram's webhook mode
        report.errors.append(
            f"{where}http: extension routes need the [http] endpoint, which is not configured: {', '.join(routes)}"
        )

    m = config.model
    if m.resolved_provider() == "local":
        if m.model_path:
            path = Path(m.model_path).expanduser()  # as the provider opens it
            if not path.is_file():
                report.errors.append(f"{where}model.model_path: file not found: {path}")
        else:
            from ..models.local import default_gguf

            try:
                default_gguf()
            except HubError as e:
                report.errors.append(f"{where}model: {e}")
        try:
            import xllamacpp  # noqa: F401
        except ImportError:
            report.errors.append(f"{where}model.provider: local needs xllamacpp (pip install 'hub[local]')")
    elif m.provider == "openai" and not m.api_key and not m.base_url:
        report.warnings.append(f"{where}model.api_key: empty (is OPENAI_API_KEY set?)")
    if config.http is not None and not config.http.token:  # the run-event routes and the dashboard need it
        report.warnings.append(
            f"{where}http.token: empty: /events and /runs/{{id}} are off, the dashboard at /ui/ is off, /metrics is open"
        )
    return report


def _scope_known(scope: str, context_types: set[str], ext_names: set[str]) -> bool:
    if scope in context_types or scope in ext_names:
        return True
    ctype, sep, _ = scope.rpartition(":")
    return bool(sep) and ctype in context_types
