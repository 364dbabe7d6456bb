"""``config.toml``: reading it, ``${VAR}`` substitution, and one pydantic model per section."""

from __future__ import annotations

from ._load import MAX_FILE_BYTES, config_from_dict, format_validation_error, load_config, loads_toml, read_toml
from ._sections import (
    MIN_SECRET_LENGTH,
    PRIMARY_MODEL,
    ApprovalsSection,
    CommandsSection,
    HttpSection,
    HubConfig,
    LimitsSection,
    McpServerSection,
    MemorySection,
    ModelSection,
    RetentionSection,
    RouteSection,
    ScheduleSection,
    StoreSection,
    VoiceSection,
    WebhookSection,
    check_secret_length,
)

__all__ = [
    "ApprovalsSection",
    "CommandsSection",
    "HttpSection",
    "HubConfig",
    "LimitsSection",
    "MAX_FILE_BYTES",
    "MIN_SECRET_LENGTH",
    "McpServerSection",
    "MemorySection",
    "ModelSection",
    "PRIMARY_MODEL",
    "RetentionSection",
    "RouteSection",
    "ScheduleSection",
    "StoreSection",
    "VoiceSection",
    "WebhookSection",
    "check_secret_length",
    "config_from_dict",
    "format_validation_error",
    "load_config",
    "loads_toml",
    "read_toml",
]
