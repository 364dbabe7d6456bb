"""The operators' dashboard at ``/ui/``: pages, sessions, the health history, templates and static files."""

from __future__ import annotations

from ._chat import web_chat_extension
from ._pages import Dashboard
from ._sessions import LoginThrottle, Sessions, token_matches

__all__ = [
    "Dashboard",
    "LoginThrottle",
    "Sessions",
    "token_matches",
    "web_chat_extension",
]
