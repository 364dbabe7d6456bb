"""The config reference page, generated from the pydantic models that validate ``config.toml``.

An mkdocs hook (``hooks:`` in mkdocs.yml): on ``reference/config.md`` it replaces the marker
``<!-- config-reference -->`` with one table per section, built from ``hub.config.HubConfig``
and from each installed platform's settings model (found through the ``hub.extensions``
entry points, as the hub finds them). A key added to a model appears here at the next build;
nothing is written by hand, so the page cannot drift from the code.
"""

from __future__ import annotations

import ast
import importlib.metadata
import inspect
import re
import textwrap
import types
import typing
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

MARKER = "<!-- config-reference -->"
PAGE = "reference/config.md"
# each table in a block that docs/assets/stylesheets/extra.css lays out (md_in_html)
OPEN, CLOSE = '<div class="hub-reference" markdown>', "</div>"


def attribute_docstrings(model: type[BaseModel]) -> dict[str, str]:
    """The string under each field of ``model`` and its bases (the ``PlatformSettings`` style)."""
    docs: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)) or cls is BaseModel:
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
        except (OSError, TypeError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for node, after in zip(body, body[1:], strict=False):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[node.target.id] = inspect.cleandoc(after.value.value)
    return docs


def _type_name(annotation: Any) -> str:
    if annotation is type(None):
        return "none"
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return " \\| ".join(f'"{a}"' if isinstance(a, str) else repr(a) for a in typing.get_args(annotation))
    if origin is typing.Annotated:
        return _type_name(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(_type_name(a) for a in typing.get_args(annotation))
    if origin in (list, dict, tuple, set):
        return f"{origin.__name__}[{', '.join(_type_name(a) for a in typing.get_args(annotation))}]"
    names = {str: "string", int: "integer", float: "number", bool: "boolean"}
    if isinstance(annotation, type):
        if annotation.__name__ == "SecretStr":
            return "string (secret)"
        if issubclass(annotation, BaseModel):
            return "table"
        return names.get(annotation, annotation.__name__)
    return str(annotation).replace("typing.", "")


def _default(field: FieldInfo) -> str:
    if field.default_factory is not None:
        try:
            value = field.default_factory()  # type: ignore[call-arg]
        except TypeError:
            return "(computed)"
        if isinstance(value, BaseModel):
            return "(table)"
    elif field.default is PydanticUndefined:
        return "**required**"
    else:
        value = field.default
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f'`"{value}"`' if len(value) < 60 else f'`"{value[:57]}..."`'
    if hasattr(value, "get_secret_value"):
        return "(secret)"
    return f"`{value!r}`".replace("'", '"')


def _limits(field: FieldInfo) -> str:
    out = []
    for meta in field.metadata:
        for attr, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<"), ("min_length", "length ≥")):
            value = getattr(meta, attr, None)
            if value is not None:
                out.append(f"{sign} {value}")
    return f" ({', '.join(out)})" if out else ""


def _cell(text: str) -> str:
    """One table cell from a docstring: on one line, reST roles and ``literals`` as Markdown."""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"`\1`", " ".join(text.split()))
    return text.replace("``", "`").replace("|", "\\|")


def section_table(title: str, model: type[BaseModel], intro: str = "") -> str:
    """One markdown table: every field of ``model`` with its type, default and meaning."""
    docs = attribute_docstrings(model)
    rows = [f"### `{title}`", ""]
    lead = intro or inspect.cleandoc(model.__doc__ or "")
    if lead and not lead.startswith(("Usage docs", "A base class")):
        rows += [_cell(lead), ""]
    rows += [OPEN, "", "| key | type | default | meaning |", "|---|---|---|---|"]
    for name, field in model.model_fields.items():
        if field.exclude:
            continue
        key = field.alias or name
        meaning = field.description or docs.get(name, "")
        inner = _nested(field.annotation)
        if not meaning and inner is not None:
            meaning = f"the table `[{title.strip('[]')}.{key}{inner[0]}]`, below"
        rows.append(
            f"| `{key}` | {_type_name(field.annotation)}{_limits(field)} | {_default(field)} | {_cell(meaning)} |"
        )
    return "\n".join([*rows, "", CLOSE]) + "\n"


def _nested(annotation: Any) -> tuple[str, type[BaseModel]] | None:
    """``("", M)`` for a table of model M, ``(".NAME", M)`` for a dict of them, else None."""
    origin = typing.get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "", annotation
    if origin in (typing.Union, types.UnionType):
        models = [a for a in typing.get_args(annotation) if isinstance(a, type) and issubclass(a, BaseModel)]
        return ("", models[0]) if len(models) == 1 else None
    if origin is dict:
        value = typing.get_args(annotation)[1]
        if isinstance(value, type) and issubclass(value, BaseModel):
            return ".NAME", value
    return None


def extension_models() -> list[tuple[str, type[BaseModel]]]:
    """Each installed extension's settings model, by entry-point name (the factory's first parameter)."""
    from hub.definitions import ENTRY_POINT_GROUP

    found = []
    for ep in sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        factory = getattr(ep.load(), "extension", None)
        if not callable(factory):
            continue
        params = list(inspect.signature(factory).parameters.values())
        if not params:
            continue
        model = typing.get_type_hints(factory).get(params[0].name)
        if isinstance(model, type) and issubclass(model, BaseModel):
            found.append((ep.name, model))
    return found


def config_reference() -> str:
    """The whole reference: the core's sections in file order, then each platform's table."""
    from hub.config import HubConfig

    parts: list[str] = ["## The core", ""]
    plain: list[str] = []
    for name, field in HubConfig.model_fields.items():
        if field.exclude:
            continue
        nested = _nested(field.annotation)
        listed = typing.get_args(field.annotation) if typing.get_origin(field.annotation) is list else ()
        if listed and isinstance(listed[0], type) and issubclass(listed[0], BaseModel):  # [[NAME]]: an array of tables
            parts.append(section_table(f"[[{name}]]", listed[0], intro=field.description or ""))
            continue
        if nested is None:
            plain.append(f"| `[{name}]` | {_type_name(field.annotation)} | {_cell(field.description or '')} |")
            continue
        suffix, model = nested
        parts.append(section_table(f"[{name}{suffix}]", model))
        for sub, subfield in model.model_fields.items():
            inner = _nested(subfield.annotation)
            if inner is not None:
                parts.append(section_table(f"[{name}{suffix}.{sub}{inner[0]}]", inner[1]))
    if plain:
        parts += [
            "### Tables of free keys",
            "",
            "| table | type | meaning |",
            "|---|---|---|",
            *plain,
            "",
        ]
    parts += [
        "## The platforms",
        "",
        "Every `[extensions.NAME]` table also takes `enabled` (an extension is on when its table is "
        "present, unless `enabled = false`) and `module` (an operator's module instead of the "
        "installed package). The other keys are the extension's own:",
        "",
    ]
    for name, model in extension_models():
        parts.append(section_table(f"[extensions.{name}]", model))
    return "\n".join(parts)


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if page.file.src_uri == PAGE:
        if MARKER not in markdown:
            raise ValueError(f"{PAGE} has lost its marker {MARKER}")
        return markdown.replace(MARKER, config_reference())
    return markdown
