"""Finding and validating extensions: an operator's module, or an installed package's entry point.

``[extensions.NAME]`` loads, in order of preference: ``module = "..."`` (importable, or a
``.py`` path relative to config.toml), or the entry point named NAME in the group
``hub.extensions``. The platforms that ship with the hub (``hub-telegram``, ...) are found
that way too, exactly like a third-party package: the core names none of them. The
module's ``extension``
attribute is an [`Extension`][hub.Extension], or a factory whose first parameter is annotated
with a pydantic model: the table's other keys are validated against it (an unknown key or
a wrong type is a ConfigError naming ``extensions.NAME.KEY``).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import inspect
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, get_type_hints

from pydantic import BaseModel, ValidationError

from ..config import HubConfig, format_validation_error
from ..errors import ConfigError, ExtensionError, ExtensionFailed
from ._types import Extension

__all__ = ["load_extensions", "load_extension", "import_extension", "ENTRY_POINT_GROUP", "RESERVED_KEYS"]

ENTRY_POINT_GROUP = "hub.extensions"
RESERVED_KEYS = frozenset({"enabled", "module"})


def load_extensions(config: HubConfig) -> list[Extension]:
    return [load_extension(name, table, config) for name, table in config.enabled_extensions().items()]


def _import(name: str, table: dict[str, Any], config: HubConfig) -> ModuleType:
    module = table.get("module")
    if module is not None:
        if not isinstance(module, str) or not module:
            raise ConfigError("must be a module name or a .py path", path=_p(config), key=f"extensions.{name}.module")
        return _import_operator_module(name, module, config)
    return import_extension(name)


def import_extension(name: str) -> ModuleType:
    """The module of the extension an installed package registers as ``name``.

    Raises:
        ExtensionError: no package registers ``name`` in ``hub.extensions``, or its module
            needs a package that is not installed.
        ExtensionFailed: importing it raised.
    """
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP, name=name):
        try:
            obj = ep.load()
        except ModuleNotFoundError as e:
            if e.name and e.name != ep.module and not ep.module.startswith(f"{e.name}."):
                raise ExtensionError(
                    name, f"its module {ep.module!r} needs the package {e.name!r}, which is not installed"
                ) from e
            raise ExtensionFailed(name, e) from e
        except Exception as e:
            raise ExtensionFailed(name, e) from e
        return obj if isinstance(obj, ModuleType) else _wrap(obj)
    hint = f" (it installs with pip install 'hub[{name}]')" if name in _extras() else ""
    raise ExtensionError(
        name,
        f"no such extension: no installed package registers {name!r} in the entry-point group "
        f"{ENTRY_POINT_GROUP!r}{hint}, and no module = is set",
    )


def _extras() -> set[str]:
    """The extras the installed hub distribution offers (``hub[telegram]`` pulls in hub-telegram)."""
    try:
        return set(importlib.metadata.metadata("hub").get_all("Provides-Extra") or ())
    except importlib.metadata.PackageNotFoundError:
        return set()


def _wrap(obj: Any) -> ModuleType:
    mod = ModuleType("hub_entry_point")
    mod.extension = obj  # type: ignore[attr-defined]
    return mod


def _import_operator_module(name: str, module: str, config: HubConfig) -> ModuleType:
    base = config.base_dir
    candidate = Path(module)
    if module.endswith(".py") or "/" in module:
        path = candidate if candidate.is_absolute() else base / candidate
        if not path.is_file():
            raise ConfigError(f"file not found: {path}", path=_p(config), key=f"extensions.{name}.module")
        return _from_path(name, f"hub_ext_{name}", path)
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name != module.split(".")[0] and e.name != module:
            raise ExtensionFailed(name, e) from e
        local = base / (module.replace(".", "/") + ".py")
        if local.is_file():
            return _from_path(name, module, local)
        raise ConfigError(
            f"module {module!r} not found (not importable, and no {local})",
            path=_p(config),
            key=f"extensions.{name}.module",
        ) from e
    except Exception as e:
        raise ExtensionFailed(name, e) from e


def _from_path(name: str, modname: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(modname, path)
    if spec is None or spec.loader is None:
        raise ExtensionError(name, f"cannot load {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[modname] = mod
    try:
        spec.loader.exec_module(mod)
    except Exception as e:
        sys.modules.pop(modname, None)
        raise ExtensionFailed(name, e) from e
    return mod


def _p(config: HubConfig) -> str | None:
    return str(config.path) if config.path else None


def settings_model(factory: Any) -> type[BaseModel] | None:
    """The pydantic model annotating a factory's first parameter, if any."""
    params = list(inspect.signature(factory).parameters.values())
    if not params:
        return None
    try:
        ann = get_type_hints(factory).get(params[0].name)
    except Exception:
        ann = params[0].annotation
    return ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None


def load_extension(name: str, table: dict[str, Any], config: HubConfig) -> Extension:
    mod = _import(name, table, config)
    obj = getattr(mod, "extension", None)
    if obj is None:
        raise ExtensionError(
            name, f"module {mod.__name__} has no `extension` (an Extension, or a factory returning one)"
        )
    settings = {k: v for k, v in table.items() if k not in RESERVED_KEYS}
    if isinstance(obj, Extension):
        if settings:
            key = sorted(settings)[0]
            raise ConfigError(
                "unknown key (this extension takes no settings)", path=_p(config), key=f"extensions.{name}.{key}"
            )
        ext = obj
    elif callable(obj):
        model = settings_model(obj)
        try:
            if model is not None:
                try:
                    validated = model.model_validate(settings)
                except ValidationError as e:
                    key, msg = format_validation_error(e, prefix=f"extensions.{name}")
                    raise ConfigError(msg, path=_p(config), key=key) from e
                ext = obj(validated)
            else:
                ext = obj(settings) if inspect.signature(obj).parameters else obj()
        except (ConfigError, ExtensionError):
            raise
        except Exception as e:
            raise ExtensionFailed(name, e) from e
        if not isinstance(ext, Extension):
            raise ExtensionError(name, f"its factory returned {type(ext).__name__}, not an Extension")
    else:
        raise ExtensionError(name, f"`extension` is a {type(obj).__name__}, not an Extension or a factory")
    return ext
