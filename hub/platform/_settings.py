"""The settings every platform shares, declared once."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from ..features import POLICIES
from ._audience import LoopGuard

__all__ = ["PlatformSettings", "DEFAULT_ACCOUNT", "account_key", "split_account_key"]

DEFAULT_ACCOUNT = ""
"""The account the platform table itself describes: its conversations' names carry no account."""
_ACCOUNT_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


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
    accounts: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """More accounts (bots) on the same platform, ``[extensions.NAME.accounts.ACCOUNT]``: each
    table takes this table's keys, and takes what it leaves out from this table. A second
    account's conversations carry its name (``telegram:chat:support/42``)."""

    _accounts: dict[str, Self] = PrivateAttr(default_factory=dict)
    shared_by_accounts: ClassVar[tuple[str, ...]] = ()
    """Keys an account cannot set apart from the platform table (what the extension's one
    output or context reads, such as ``live``): a different value is refused, not ignored."""

    @field_validator("accounts")
    @classmethod
    def _account_names(cls, v: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for name, table in v.items():
            if not _ACCOUNT_NAME.fullmatch(name):
                raise ValueError(f"account name {name!r} must be 1 to 64 of A-Z a-z 0-9 _ - (it is part of names)")
            if "accounts" in table:
                raise ValueError(f"account {name!r} cannot have accounts of its own")
        return v

    @model_validator(mode="after")
    def _merge_accounts(self) -> Self:
        """Each account validated as this model: its own keys over the ones this table set."""
        inherited = self.model_dump(exclude={"accounts"}, exclude_unset=True)
        for name, table in self.accounts.items():
            try:
                account = self._accounts[name] = type(self).model_validate({**inherited, **table})
            except ValidationError as e:  # named where the operator wrote it: accounts.NAME.key
                raise ValidationError.from_exception_data(
                    e.title, [_under(err, ("accounts", name)) for err in e.errors()]
                ) from None
            for key in self.shared_by_accounts:
                if getattr(account, key) != getattr(self, key):
                    raise ValueError(
                        f"accounts.{name}.{key}: every account takes the platform table's {key} "
                        f"({getattr(self, key)!r}): set it there"
                    )
        return self

    def every_account(self) -> list[tuple[str, Self]]:
        """The default account ([`DEFAULT_ACCOUNT`][hub.platform.DEFAULT_ACCOUNT], this table) first, then each
        ``accounts`` table merged over it, in the order the config gives them."""
        return [(DEFAULT_ACCOUNT, self), *self._accounts.items()]

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


def _under(err: Any, prefix: tuple[str, ...]) -> Any:
    """One error of an account's table (pydantic's ``ErrorDetails``), as the details of a new
    error whose location is under ``accounts.NAME``."""
    details = {"type": err["type"], "loc": (*prefix, *err["loc"]), "input": err["input"]}
    if "ctx" in err:
        details["ctx"] = err["ctx"]
    return details


def account_key(account: str, key: str) -> str:
    """A conversation's key on ``account``: ``key`` itself on the default account (names
    stored before accounts existed stay as they are), ``ACCOUNT/key`` on another."""
    return f"{account}/{key}" if account else key


def split_account_key(key: str) -> tuple[str, str]:
    """``(account, key)`` of a key [`account_key()`][hub.platform.account_key] made (``("", key)`` without
    an account)."""
    account, sep, rest = key.partition("/")
    return (account, rest) if sep and _ACCOUNT_NAME.fullmatch(account) else (DEFAULT_ACCOUNT, key)
