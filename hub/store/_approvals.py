"""Approvals: the `ApprovalStore` seam, the question a run waits on before an action
that needs a person's yes (``[approvals] actions``, ``@action(confirm=True)``).

An approval is one row whose ``state`` moves only forward, each move a compare-and-set in
the store, so that workers, a restart and an operator's command answer it exactly once:

    pending --answer--> approved --claim--> done      (the action ran, once)
    pending --answer--> denied
    pending --expire--> expired                        (no answer within the timeout)

An answer after ``expires`` finds nothing to change (too late). The row is found again by
its ``key`` (the conversation, the inputs the run handles, the action and its arguments): a
run resumed after a crash asks the same question and waits on the same row, instead of
asking twice.

The backends: `hub.store.InMemoryApprovalStore` (hub/store/_in_memory.py) and
`hub.store.sql.SqlApprovalStore` (hub/store/sql/_approvals.py, table ``approvals``).
"""

from __future__ import annotations

import hashlib
import json
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = ["Approval", "ApprovalState", "ApprovalStore", "approval_key"]


class ApprovalState(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    EXPIRED = "expired"
    DONE = "done"


@dataclass(frozen=True, slots=True)
class Approval:
    """One question: may ``action`` run with ``args`` in conversation ``context``?"""

    id: str
    key: str
    run_id: str
    context: str
    action: str
    args: Any
    state: ApprovalState
    created: float
    expires: float
    platform: str | None = None
    """The extension that owns the conversation (who asked answers from there)."""
    user: str | None = None
    """Who started the run, as the platform names them: the one person who may answer in chat."""
    answered: float | None = None
    answered_by: str | None = None

    def overdue(self, now: float | None = None) -> bool:
        return self.state == ApprovalState.PENDING and self.expires <= (time.time() if now is None else now)


def approval_key(context: str, inputs: list[str], action: str, args: Any) -> str:
    """The content key of a question: the same conversation, inputs, action and arguments
    (a run resumed after a crash asks it again) find the same row."""
    text = json.dumps([context, sorted(inputs), action, args], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


class ApprovalStore(ABC):
    """Approvals, kept so that they survive restarts; every state change a compare-and-set."""

    async def open(self) -> None:  # noqa: B027 - stores without a connection need nothing
        pass

    async def close(self) -> None:  # noqa: B027
        pass

    @abstractmethod
    async def ask(self, approval: Approval) -> Approval:
        """Record ``approval`` (pending), or return the row already kept under its ``key``
        (its ``run_id`` moved to this run's, when it is still open)."""

    @abstractmethod
    async def get(self, approval_id: str) -> Approval | None: ...

    @abstractmethod
    async def list(self, *, states: tuple[ApprovalState, ...] = ()) -> list[Approval]:
        """Approvals in these states (all when empty), oldest first."""

    @abstractmethod
    async def move(
        self,
        approval_id: str,
        frm: ApprovalState,
        to: ApprovalState,
        *,
        now: float,
        by: str | None = None,
        before_expiry: bool = False,
    ) -> bool:
        """Compare-and-set: move the row from ``frm`` to ``to`` (recording ``by`` and ``now``
        when it is an answer); with ``before_expiry`` only while ``now < expires``. True when
        this call made the move; False when the row was elsewhere (answered, too late)."""

    @abstractmethod
    async def prune(self, before: float) -> int:
        """Forget the settled approvals created before ``before``; how many."""

    @abstractmethod
    async def forget_user(self, user: str, *, platform: str) -> int:
        """Delete the questions of runs ``user`` started in ``platform``'s conversations (their
        arguments came from that person's messages; ``hub memory forget --person``); how many."""
