"""MCP servers as actions: each ``[mcp.NAME]`` server's tools are actions named ``NAME__TOOL``,
through the official ``mcp`` SDK (stdio or streamable HTTP), kept up while the hub runs."""

from __future__ import annotations

from ._connection import McpServer, ServerStatus
from ._servers import LOG_MAX_BYTES, McpServers, cap_log, probe
from ._tools import McpAction, ToolSpec, action_name, result_for_model

__all__ = [
    "LOG_MAX_BYTES",
    "cap_log",
    "McpAction",
    "McpServer",
    "McpServers",
    "ServerStatus",
    "ToolSpec",
    "action_name",
    "probe",
    "result_for_model",
]
