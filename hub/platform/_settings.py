"""The settings every platform shares, declared once."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..features import POLICIES
from ._audience import LoopGuard

__all__ = ["PlatformSettings"]


class PlatformSettings(BaseModel):
    """The settings every platform shares, declared once with one set of defaults.

    A platform's ``[extensions.NAME]`` model subclasses it and adds its own keys (the token,
    its allow-lists by chat or channel). Unknown keys are errors.
    """

    model_config = ConfigDict(extra="forbid")

    allowed_users: list[int | str] = Field(default_factory=list)
    """Users the bot answers (ids, or usernames where the platform has them); empty: everyone."""
    dm_policy: Literal["open", "allowlist", "pairing"] = "open"
    """Who may talk to the bot in private: ``"open"`` (everyone ``allowed_users`` lets in),
    ``"allowlist"`` (only ``allowed_users``; empty: nobody) or ``"pairing"`` (``allowed_users``
    and users the operator approved with ``hub pairing approve CODE``; others get the code)."""
    loop_guard_turns: int = Field(3, ge=0)
    """Answers to other bots per chat within ``loop_guard_window`` before the bot stops (0: no guard)."""
    loop_guard_window: float = Field(600.0, gt=0)
    """Seconds; a message from a human in the chat resets the count."""
    send_attempts: int = Field(5, ge=1, le=20)
    """Attempts per message (429s and network errors are retried)."""
    send_max_wait: float = Field(120.0, ge=0)
    """Seconds of retry_after and backoff one message may wait in all before it is given up."""

    @field_validator("dm_policy", mode="before")
    @classmethod
    def _known_policy(cls, v: Any) -> Any:
        if v not in POLICIES:
            raise ValueError(f"dm_policy must be one of {', '.join(map(repr, POLICIES))}, not {v!r}")
        return v

    def loop_guard(self, *, clock: Callable[[], float] = time.monotonic) -> LoopGuard | None:
        """The loop guard these settings ask for (None when ``loop_guard_turns`` is 0)."""
        if not self.loop_guard_turns:
            return None
        return LoopGuard(max_turns=self.loop_guard_turns, window=self.loop_guard_window, clock=clock)
