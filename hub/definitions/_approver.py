"""The seam through which a platform asks a person to approve an action in its own way
(Telegram's inline keyboard, Discord's buttons, the terminal's y/n): [`Approver`][hub.platform.Approver],
declared by an extension as ``Extension(approver=...)``, and what it is given and answers.

The core never names a platform: the approvals feature (hub/features/_approvals.py) hands the
extension that owns the conversation an [`ApprovalRequest`][hub.platform.ApprovalRequest]; the extension shows it, and
when the person answers (a button pressed, a line typed) it calls
``hub.approvals.answer(id, approve=..., user=..., platform=...)`` and shows the
[`ApprovalAnswer`][hub.platform.ApprovalAnswer]'s ``message`` to whoever answered.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["ApprovalAnswer", "ApprovalDesk", "ApprovalRequest", "Approver"]


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """One question to show: its ``id`` (what a button carries back), the action and its
    arguments, ``text`` (the question as the core words it) and when it ``expires``."""

    id: str
    """The question's id: what an answer button carries back to ``hub.approvals.answer``."""
    action: str
    """The action that waits for the answer."""
    args: Any
    """Its arguments, as the model gave them."""
    text: str
    """The question, as the core words it."""
    expires: float
    """When an unanswered question counts as denied (seconds since the epoch)."""


@dataclass(frozen=True, slots=True)
class ApprovalAnswer:
    """What an answer did: ``accepted`` when it was the one answer; ``message`` for whoever
    answered (approved, denied, too late, not yours to answer)."""

    accepted: bool
    """Whether this was the one answer that counts (the first, from someone allowed)."""
    state: str
    """Where the question stands now (``approved``, ``denied``, ``expired``, ...)."""
    message: str
    """What to show whoever answered."""


class ApprovalDesk(Protocol):
    """``hub.approvals`` as an extension answers through it."""

    async def answer(
        self, approval_id: str, *, approve: bool, user: str | None = None, platform: str | None = None
    ) -> ApprovalAnswer:
        """Answer the question ``approval_id`` for ``user`` of ``platform``: approve or deny.
        The first allowed answer counts; what it did is in the [`ApprovalAnswer`][hub.platform.ApprovalAnswer]."""
        ...


class Approver(ABC):
    """How one platform asks in the conversation (see the module doc)."""

    @abstractmethod
    async def ask(self, request: ApprovalRequest, ctx: Any) -> None:
        """Show ``request`` in ``ctx``'s conversation (``ctx``: the run's [`RunContext`][hub.RunContext])
        with a way to approve or deny it.

        Raises:
            Exception: it could not be shown (the approval still waits; an operator can answer).
        """

    async def settled(self, request: ApprovalRequest, message: str, ctx: Any) -> None:  # noqa: B027
        """The question was answered or timed out (``message`` says how): a platform may take
        its buttons away. Optional."""
