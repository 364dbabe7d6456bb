"""The hub's HTTP endpoint: the server and its webhooks, run events over SSE, and its connection defences."""

from __future__ import annotations

from ._server import HttpServer, http_component, signature
from .dashboard import web_chat_extension

__all__ = [
    "HttpServer",
    "web_chat_extension",
    "http_component",
    "signature",
]
