"""A circuit breaker per model: a model that keeps failing is skipped for a cooldown.

A small explicit state machine rather than a library: purgatory, aiobreaker and pybreaker
read the wall clock themselves (``time.time()``, ``datetime.now()``), which jumps with the
system clock and which a test can only move by patching; here the clock is an argument.

::

    CLOSED --(``failures`` failures in a row)--> OPEN --(``cooldown`` passed)--> HALF_OPEN
    HALF_OPEN: one trial request at a time; its success --> CLOSED, its failure --> OPEN

The invariant: while open, nothing is let through before the cooldown has passed; while
half-open, at most one trial is out. Every permission is a `Ticket` stamped with the
circuit's generation, which changes at every transition: the late result of a request let
through before a transition (a slow request that fails after the circuit opened) moves
nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Circuit", "CircuitState", "Ticket"]


class CircuitState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True, slots=True)
class Ticket:
    """Permission for one request: hand it back with `Circuit.success()`,
    `Circuit.failure()` or `Circuit.release()` (neither: cancelled, or not the model's fault)."""

    generation: int
    trial: bool


class Circuit:
    """One model's breaker (see the module doc). ``clock``: seconds, monotonic."""

    __slots__ = ("failures", "cooldown", "clock", "_state", "_in_a_row", "_opened_at", "_generation", "_trial_out")

    def __init__(self, *, failures: int = 3, cooldown: float = 60.0, clock: Callable[[], float] = time.monotonic):
        if failures < 1 or cooldown <= 0:
            raise ValueError(f"Circuit: failures ({failures}) must be at least 1 and cooldown ({cooldown}) positive")
        self.failures = failures
        self.cooldown = cooldown
        self.clock = clock
        self._state = CircuitState.CLOSED
        self._in_a_row = 0
        self._opened_at = 0.0
        self._generation = 0
        self._trial_out = False

    @property
    def state(self) -> CircuitState:
        """The state now: an open circuit whose cooldown has passed is half-open."""
        if self._state is CircuitState.OPEN and self.clock() - self._opened_at >= self.cooldown:
            self._move(CircuitState.HALF_OPEN)
        return self._state

    def reopens_in(self) -> float:
        """Seconds until an open circuit lets a trial through (0 when it would now)."""
        if self.state is not CircuitState.OPEN:
            return 0.0
        # the same arithmetic as ``state``'s test, so that open always means more than 0 left
        return self.cooldown - (self.clock() - self._opened_at)

    def acquire(self) -> Ticket | None:
        """Permission for one request, or None: open, or half-open with its trial out."""
        state = self.state
        if state is CircuitState.CLOSED:
            return Ticket(self._generation, trial=False)
        if state is CircuitState.HALF_OPEN and not self._trial_out:
            self._trial_out = True
            return Ticket(self._generation, trial=True)
        return None

    def force(self) -> Ticket:
        """A ticket whatever the state, for a model asked anyway (the only one there is): its
        result still moves the circuit, which then only reports."""
        return Ticket(self._generation, trial=False)

    def success(self, ticket: Ticket) -> bool:
        """The request answered. True when this closed the circuit (a trial, or a forced
        request, that worked)."""
        if ticket.generation != self._generation:
            return False
        if self._state is not CircuitState.CLOSED:
            self._move(CircuitState.CLOSED)
            return True
        self._in_a_row = 0
        return False

    def failure(self, ticket: Ticket) -> bool:
        """The request failed in a way that is the model's (5xx, timeout, refused connection).
        True when this opened the circuit."""
        if ticket.generation != self._generation:
            return False
        if self._state is not CircuitState.CLOSED:  # a trial, or a forced request: open again
            self._open()
            return True
        self._in_a_row += 1
        if self._in_a_row >= self.failures:
            self._open()
            return True
        return False

    def release(self, ticket: Ticket) -> None:
        """The request ended with no verdict on the model (cancelled, a bad request): a
        trial's slot is free again."""
        if ticket.trial and ticket.generation == self._generation:
            self._trial_out = False

    def _open(self) -> None:
        self._move(CircuitState.OPEN)
        self._opened_at = self.clock()

    def _move(self, state: CircuitState) -> None:
        self._state = state
        self._generation += 1
        self._in_a_row = 0
        self._trial_out = False
