"""The circuit breaker's invariant under generated interleavings of requests, results and
time: while open nothing passes before the cooldown; while half-open at most one trial is
out; a result from before a transition moves nothing; failures in a row open it."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from hub.models import Circuit, CircuitState, KeyPool, Ticket

FAILURES, COOLDOWN = 2, 60.0


class CircuitMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0
        self.circuit = Circuit(failures=FAILURES, cooldown=COOLDOWN, clock=lambda: self.now)
        self.out: list[Ticket] = []  # tickets handed out and not yet answered
        # the model of what the circuit must do
        self.opened_at: float | None = None
        self.in_a_row = 0

    @rule()
    def request(self) -> None:
        state = self.circuit.state
        ticket = self.circuit.acquire()
        if state is CircuitState.OPEN:
            assert ticket is None, "an open circuit let a request through"
            assert self.opened_at is not None and self.now - self.opened_at < COOLDOWN
        elif state is CircuitState.HALF_OPEN:
            trials = [t for t in self.out if t.trial and t.generation == ticket_generation(self.circuit)]
            assert (ticket is None) == bool(trials), "half-open: exactly one trial at a time"
        else:
            assert ticket is not None and not ticket.trial
        if ticket is not None:
            self.out.append(ticket)

    @precondition(lambda self: self.out)
    @rule(data=st.data(), verdict=st.sampled_from(["success", "failure", "release"]))
    def answer(self, data: st.DataObject, verdict: str) -> None:
        self._answer(data.draw(st.integers(0, len(self.out) - 1)), verdict)

    def _answer(self, index: int, verdict: str) -> None:
        ticket = self.out.pop(index)
        before, generation = self.circuit.state, ticket_generation(self.circuit)
        stale = ticket.generation != generation
        if verdict == "success":
            self.circuit.success(ticket)
        elif verdict == "failure":
            self.circuit.failure(ticket)
        else:
            self.circuit.release(ticket)
        after = self.circuit.state
        if stale:
            assert after is before, "a result from before a transition moved the circuit"
            return
        if verdict == "success":
            self.in_a_row = 0
            assert after is CircuitState.CLOSED
            self.opened_at = None
        elif verdict == "failure":
            if before is CircuitState.CLOSED:
                self.in_a_row += 1
                if self.in_a_row >= FAILURES:
                    assert after is CircuitState.OPEN
                    self.opened_at, self.in_a_row = self.now, 0
                else:
                    assert after is CircuitState.CLOSED
            else:  # a trial failed
                assert after is CircuitState.OPEN
                self.opened_at, self.in_a_row = self.now, 0
        else:
            assert after is before

    @rule()
    def failing_request(self) -> None:
        """A request that fails at once (the path to open, made likely)."""
        self.request()
        if self.out and self.out[-1].generation == ticket_generation(self.circuit):
            self.out.append(self.out.pop())
            self._answer(len(self.out) - 1, "failure")

    @rule(seconds=st.sampled_from([0.5, 10.0, 59.9, 60.0, 120.0]))
    def time_passes(self, seconds: float) -> None:
        self.now += seconds

    @invariant()
    def open_only_within_the_cooldown(self) -> None:
        if self.circuit.state is CircuitState.OPEN:
            assert self.opened_at is not None and self.now - self.opened_at < COOLDOWN
            assert abs(self.circuit.reopens_in() - (COOLDOWN - (self.now - self.opened_at))) < 1e-9
            assert self.circuit.reopens_in() > 0

    @invariant()
    def at_most_one_trial_out(self) -> None:
        generation = ticket_generation(self.circuit)
        assert len([t for t in self.out if t.trial and t.generation == generation]) <= 1


def ticket_generation(circuit: Circuit) -> int:
    """The generation a ticket handed out now would carry (a forced ticket is never a trial)."""
    return circuit.force().generation


TestCircuit = CircuitMachine.TestCase
TestCircuit.settings = settings(max_examples=120, stateful_step_count=30, deadline=None)


def test_a_key_pool_turns_and_skips_resting_and_refused_keys() -> None:
    now = [0.0]
    pool = KeyPool(3, clock=lambda: now[0])
    assert [pool.ready()[0] for _ in range(4)] == [0, 1, 2, 0]
    pool.rest(1, 30)
    pool.refuse(2)
    assert pool.ready() == [0]  # the turn is at key 1, which rests; key 2 was refused
    assert pool.ready_in() == 0
    pool.refuse(0)
    assert pool.ready() == [] and pool.ready_in() == 30
    now[0] = 30
    assert pool.ready() == [1] and pool.refused() == [0, 2]
    pool.refuse(1)
    assert pool.ready_in() is None  # nothing will answer before a restart
