"""The XML protocol: the streaming parser and its scanner, the prompt builder (with the native tool-calling style), and the injection scan of trusted text."""

from __future__ import annotations

from ._injection import EPISODE_CAP, NEUTRALISED, PERSONA_CAP, scan, scan_all
from ._parser import ElementParser, LiveParser, StreamParser, parse
from ._prompt import PromptBuilder, PromptParts, count_tokens, escape
from ._scanner import DEFAULT_TAGS, RAW_TAGS, Element, EndEvent, Partial, StartEvent, TextEvent
from ._tools_prompt import ToolNames, ToolsPrompt, ToolTarget, new_tool_call_id, output_tool_name

__all__ = [
    "DEFAULT_TAGS",
    "EPISODE_CAP",
    "Element",
    "ElementParser",
    "EndEvent",
    "LiveParser",
    "NEUTRALISED",
    "PERSONA_CAP",
    "Partial",
    "PromptBuilder",
    "PromptParts",
    "RAW_TAGS",
    "StartEvent",
    "StreamParser",
    "TextEvent",
    "ToolNames",
    "ToolTarget",
    "ToolsPrompt",
    "count_tokens",
    "escape",
    "new_tool_call_id",
    "output_tool_name",
    "parse",
    "scan",
    "scan_all",
]
