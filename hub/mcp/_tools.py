"""An MCP server's tool as an action (`McpAction`), named ``SERVER__TOOL``.

Its arguments are checked against the tool's own JSON schema (``jsonschema``) before the
call, so an invalid call goes back to the model as an action error, as for any action. Its
result becomes what the model sees: text (cut at the server's ``max_result_chars``, with a
marker), structured content, resource links; pictures join the run's files (``media:N``
handles). A result with ``isError`` is an action error. A tool whose schema is not a valid
JSON schema is left out, with the reason, rather than offered broken; so is one whose
description or schema carries an injection or is over its cap (`vet_tool()`).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator, SchemaError, validators

from ..definitions import Action, RunContext
from ..errors import ActionError
from ..media import Media
from ..protocol import scan

__all__ = [
    "DESCRIPTION_CAP",
    "SCHEMA_CAP",
    "McpAction",
    "ToolSpec",
    "action_name",
    "result_for_model",
    "vet_tool",
]

SEPARATOR = "__"
_CUT = "[... {n} more characters cut]"
DESCRIPTION_CAP = 2_000
"""Characters of a tool's description: it enters every prompt of every conversation."""
SCHEMA_CAP = 8_000
"""Characters of a tool's input schema as JSON, for the same reason."""
_REFUSED = {"override": "an instruction to ignore the system prompt", "forged_tag": "a forged protocol tag"}


def action_name(server: str, tool: str) -> str:
    return f"{server}{SEPARATOR}{tool}"


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as the server lists it: what the model is told about it."""

    name: str
    description: str
    input_schema: dict[str, Any]


Call = Callable[[str, dict[str, Any]], Awaitable[Any]]
"""Calls a tool of the server by name with arguments: its CallToolResult."""


@dataclass(slots=True, eq=False)
class McpAction(Action):
    """An MCP tool as an action: its JSON schema is the arguments' schema."""

    input_schema: dict[str, Any] = field(default_factory=dict)
    _validator: Any = field(default=None, init=False, repr=False)

    def json_schema(self) -> dict[str, Any]:
        return self.input_schema

    def parse_arguments(self, raw: Any) -> Any:
        if not isinstance(raw, dict):
            raise ActionError(self.name, f"invalid arguments: expected a JSON object, not {type(raw).__name__}")
        if self._validator is None:
            self._validator = _validator_for(self.input_schema)
        problems = sorted(self._validator.iter_errors(raw), key=lambda e: list(e.absolute_path))[:5]
        if problems:
            text = "; ".join(f"{'.'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}" for e in problems)
            raise ActionError(self.name, "invalid arguments: " + text)
        return raw


def _validator_for(schema: dict[str, Any]) -> Any:
    cls = validators.validator_for(schema, default=Draft202012Validator)
    return cls(schema)


def schema_problem(schema: Any) -> str | None:
    """Why ``schema`` cannot be offered as a tool's input schema (None: it can)."""
    if not isinstance(schema, dict):
        return f"its input schema is a {type(schema).__name__}, not an object"
    try:
        validators.validator_for(schema, default=Draft202012Validator).check_schema(schema)
    except SchemaError as e:
        return f"its input schema is not a valid JSON schema: {e.message}"
    if schema.get("type", "object") != "object":
        return f"its input schema's type is {schema.get('type')!r}, not 'object'"
    return None


def vet_tool(server: str, name: str, description: str, schema: dict[str, Any]) -> tuple[ToolSpec | None, str]:
    """The tool as the model may be told of it, or None and why it is left out.

    What a server says of its tools enters every prompt, so it is held to what a persona is:
    every string of the description and the schema goes through the injection scanner, and a
    tool with an instruction to ignore the prompt or a forged protocol tag is left out, as is
    one whose description or schema is over its cap (a megabyte would crowd out the prompt).
    Invisible characters are removed and the tool kept.
    """
    if len(description) > DESCRIPTION_CAP:
        return None, f"its description is {len(description)} characters, over the cap of {DESCRIPTION_CAP}"
    size = len(json.dumps(schema, ensure_ascii=False, default=str))
    if size > SCHEMA_CAP:
        return None, f"its input schema is {size} characters as JSON, over the cap of {SCHEMA_CAP}"
    problems: list[str] = []

    def clean(value: Any, where: str) -> Any:
        if isinstance(value, str):
            found = scan(value, source=f"mcp {server} tool {name!r} {where}", cap=SCHEMA_CAP)
            problems.extend(f"its {where} has {_REFUSED[f.kind]}" for f in found.findings if f.kind in _REFUSED)
            return found.text
        if isinstance(value, dict):
            return {clean(k, where): clean(v, where) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v, where) for v in value]
        return value

    text = clean(description, "description")
    cleaned = clean(schema, "input schema")
    if problems:
        return None, "; ".join(dict.fromkeys(problems))
    return ToolSpec(name, text, cleaned), ""


def make_action(
    server: str, spec: ToolSpec, call: Call, *, timeout: float, max_chars: int, roles: list[str]
) -> McpAction:
    """The action for ``spec``: its handler calls the tool through ``call``."""
    name = action_name(server, spec.name)

    async def handler(args: dict[str, Any], ctx: RunContext) -> Any:
        result = await call(spec.name, args)
        return result_for_model(name, result, max_chars=max_chars)

    return McpAction(
        name=name,
        handler=handler,
        description=spec.description or f"The {spec.name} tool of the {server} MCP server.",
        # the server's own limit comes first, with its own message; the engine's is a backstop
        timeout=timeout + 5.0,
        roles=tuple(roles),
        input_schema=spec.input_schema,
    )


def result_for_model(action: str, result: Any, *, max_chars: int) -> Any:
    """A CallToolResult as the model sees it; ``isError`` raises [`ActionError`][hub.ActionError]."""
    texts: list[str] = []
    extra: dict[str, Any] = {}
    for block in getattr(result, "content", None) or ():
        _block(block, texts, extra)
    structured = getattr(result, "structured_content", None)
    if getattr(result, "is_error", False):
        message = "\n".join(texts) or "the tool reported an error"
        raise ActionError(action, "the tool failed: " + _cut(message, max_chars))
    text = _cut("\n".join(texts), max_chars)
    if structured is not None:
        dumped = json.dumps(structured, ensure_ascii=False, default=str)
        if len(dumped) > max_chars:  # a structure cannot be cut in place: its text stands for it
            structured = None
        elif dumped == json.dumps({"result": text}, ensure_ascii=False) or _same(structured, text):
            structured = None  # the text already says it
    if not extra and structured is None:
        return _parsed(text)
    out: dict[str, Any] = {}
    if text:
        out["text"] = text
    if structured is not None:
        out["structured"] = structured
    out.update(extra)
    return out


def _parsed(text: str) -> Any:
    """A text that is a JSON object or array, as that structure (templates can then reach into
    it: ``{{calls[0].datetime}}``); any other text as it is."""
    if text[:1] in ("{", "[") and not text.endswith("cut]"):
        try:
            return json.loads(text)
        except ValueError:
            pass
    return text


def _same(structured: Any, text: str) -> bool:
    try:
        return bool(json.loads(text) == structured)
    except ValueError:
        return False


def _block(block: Any, texts: list[str], extra: dict[str, Any]) -> None:
    """One content block of a result: text kept, a picture as a run file, links listed."""
    kind = getattr(block, "type", None)
    if kind == "text":
        texts.append(str(block.text))
    elif kind in ("image", "audio"):
        try:
            data = base64.b64decode(block.data, validate=True)
        except (binascii.Error, ValueError, TypeError):
            texts.append(f"[{kind} that is not valid base64, left out]")
            return
        ext = str(getattr(block, "mime_type", "") or "").rsplit("/", 1)[-1] or "bin"
        # a Media: the run keeps the bytes (checked as any file) and the model sees a handle
        extra.setdefault("files", []).append(Media(data=data, name=f"{kind}-{len(extra.get('files', [])) + 1}.{ext}"))
    elif kind == "resource_link":
        link = {"uri": str(block.uri), "name": block.name}
        if getattr(block, "mime_type", None):
            link["type"] = block.mime_type
        extra.setdefault("links", []).append(link)
    elif kind == "resource":
        res = block.resource
        if getattr(res, "text", None) is not None:
            texts.append(str(res.text))
        else:
            extra.setdefault("links", []).append({"uri": str(res.uri), "type": getattr(res, "mime_type", None)})


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    keep = max(0, limit - 40)
    return text[:keep] + _CUT.format(n=len(text) - keep)
