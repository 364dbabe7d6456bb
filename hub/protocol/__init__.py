"""The XML protocol: the streaming parser and its scanner, the prompt builder (with the native tool-calling style), and the injection scan of trusted text."""

from __future__ import annotations

from ._injection import EPISODE_CAP, NEUTRALISED, PERSONA_CAP, scan, scan_all
from ._parser import ElementParser, LiveParser, StreamParser, parse
from ._prompt import HISTORY_CUT, SUMMARY_HEADING, PromptBuilder, PromptParts, count_tokens, escape, summary_block
from ._scanner import DEFAULT_TAGS, RAW_TAGS, Element, EndEvent, Partial, StartEvent, TextEvent
from ._tools_prompt import ToolNames, ToolsPrompt, ToolTarget, new_tool_call_id, output_tool_name

__all__ = [
    "DEFAULT_TAGS",
    "EPISODE_CAP",
    "Element",
    "ElementParser",
    "EndEvent",
    "HISTORY_CUT",
    "LiveParser",
    "NEUTRALISED",
    "PERSONA_CAP",
    "Partial",
    "PromptBuilder",
    "PromptParts",
    "RAW_TAGS",
    "StartEvent",
    "StreamParser",
    "SUMMARY_HEADING",
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
    "summary_block",
]
