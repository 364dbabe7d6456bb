"""Logging set-up: text for terminals, JSON lines for log collectors.

Run and context ids travel in context variables set by the engine, so every line logged
while a run is going names it. Given a redactor, every record is cleaned of secrets before
any formatter sees it.
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .redact import Redactor

__all__ = ["setup_logging", "quiet_loggers", "run_id_var", "context_id_var"]

run_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("hub_run_id", default=None)
context_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("hub_context_id", default=None)


class _Ids(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.run_id = run_id_var.get()
        record.context_id = context_id_var.get()
        return True


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        base = super().format(record)
        ids = []
        if context_id := getattr(record, "context_id", None):
            ids.append(f"context={context_id}")
        if run_id := getattr(record, "run_id", None):
            ids.append(f"run={run_id[:8]}")
        return f"{base} [{' '.join(ids)}]" if ids else base


# attributes every LogRecord has; anything else was passed with ``extra=`` and is data
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "run_id",
    "context_id",
}


class JsonFormatter(logging.Formatter):
    """One JSON object a line: ts, level, logger, message, run_id, context_id, extras, exc."""

    def format(self, record: logging.LogRecord) -> str:
        data = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in ("run_id", "context_id"):
            if getattr(record, key, None):
                data[key] = getattr(record, key)
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                data.setdefault(key, value)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            data["exc"] = record.exc_text
        return json.dumps(data, ensure_ascii=False, default=str)


def setup_logging(
    level: str = "INFO",
    fmt: str = "text",
    stream=None,  # noqa: ANN001
    *,
    redactor: Redactor | None = None,
) -> logging.Handler:
    """Send every log record to ``stream`` (stderr) as text or JSON lines; returns the handler.

    ``redactor`` (a `Redactor`) masks secrets in every record.
    """
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.addFilter(_Ids())
    if redactor is not None:
        from .redact import RedactingFilter

        handler.addFilter(RedactingFilter(redactor))
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%H:%M:%S"))
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(level)
    quiet_loggers(*_CORE_LIBRARIES)
    return handler


# the core's own client libraries; an extension quiets its own (hub.platform.quiet_loggers)
_CORE_LIBRARIES = ("httpx", "httpcore", "openai", "aiosqlite", "chromadb")


def quiet_loggers(*names: str) -> None:
    """Keep client libraries' chatter out of the log: the loggers ``names`` log warnings and
    above, or only what the root logger's level lets through when that is stricter."""
    level = max(logging.WARNING, logging.getLogger().level)
    for name in names:
        logging.getLogger(name).setLevel(level)
