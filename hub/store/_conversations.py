"""A conversation's record in the store: its last activity and its generation.

Retention judges a conversation by its last activity (a run of it, a command in it, its
``/new``), never by when one of its keys last changed: memory that did not change is not
rewritten, and pruning it key by key deleted what an active user's bot remembered. Its keys
(`CONVERSATION_PREFIXES`) are pruned together, and a conversation marked ``keep`` (the
bot's own context) never.

The generation says which life of the conversation a run belongs to. A run takes it when it
starts ([`hub.store.MemoryStore.begin()`][hub.MemoryStore.begin]); ``/new`` ([`forget()`][hub.MemoryStore.forget])
and retention end that life, and every write a run makes of the conversation's keys is
conditional on its generation still being current, in the same statement as the write. A
run that loaded the old history before ``/new`` therefore cannot save it back (its writes are
dropped: `Forgotten`), whatever order the awaits land in, on any worker.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

__all__ = [
    "CONVERSATION_PREFIXES",
    "FORGOTTEN_PREFIXES",
    "Forgotten",
    "Generation",
    "conversation_keys",
    "new_generation",
]

CONVERSATION_PREFIXES = ("context:", "memory:", "working-memory:")
"""The key prefixes of one conversation's state (``PREFIX + conversation id``): pruned together."""

FORGOTTEN_PREFIXES = ("memory:", "working-memory:")
"""What ``/new`` deletes: what the user said and what the bot remembered (the ``context:``
record says only which conversation it is)."""


@dataclass(frozen=True, slots=True)
class Generation:
    """One life of a conversation, as a run took it: writes under it are refused once
    ``/new`` or retention ended that life."""

    conversation: str
    number: int


class Forgotten(Exception):  # noqa: N818 - what happened, not an error of the caller's
    """A write of a conversation's state from a life that ``/new`` or retention has ended:
    nothing was written."""

    def __init__(self, generation: Generation) -> None:
        super().__init__(
            f"conversation {generation.conversation} was forgotten (/new or retention) since this run began"
        )
        self.generation = generation


def conversation_keys(conversation: str, prefixes: tuple[str, ...] = CONVERSATION_PREFIXES) -> list[str]:
    return [p + conversation for p in prefixes]


def new_generation() -> int:
    """A fresh generation number: random, so a conversation pruned and begun again never
    reuses the number of a run from its earlier life."""
    return secrets.randbits(62)
