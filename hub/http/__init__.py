"""The hub's HTTP endpoint: the server and its webhooks, run events over SSE, and its connection defences."""

from __future__ import annotations

from ._server import HttpServer, http_component, signature

__all__ = [
    "HttpServer",
    "http_component",
    "signature",
]
