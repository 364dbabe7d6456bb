"""Named models, failover and key pools, above the model seam.

`FailoverModel` is a [`Model`][hub.Model] made of `Candidate` models
(``[model]`` then its ``fallbacks``), each with one client per key. A request goes to the
first candidate whose circuit lets it through, on the next of its keys that is not resting;
a failure another model could serve (`failover_kind()`: 429, 5xx, a timeout, a refused
connection, a 401/403 key) before the first chunk sends it on to the next key, then the
next model, within the same call, so the caller sees one answer. A stream that broke after
its first chunk is not started again anywhere: that output was already acted on.

Anything else (a 400, a context too long for the model, ...) is raised as the client raised
it, the same object: another model would refuse the same request, and the layers above
decide (compaction catches a context too long there). When every candidate failed, one
[`ModelError`][hub.ModelError] says why each did; the engine's bounded retry policy
decides whether to ask again.

Keys are never shown: a key is named by its position (``key 2 of 3``), and the text of an
error a server answered is cleared of the candidate's keys before it goes anywhere.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field

from ..errors import ContextTooLong, ModelError
from . import Circuit, CircuitState, KeyPool, Model, ModelRequest, Ticket, ToolCallDelta, Usage

__all__ = ["Candidate", "FailoverModel", "failover_kind", "OUTCOMES"]

log = logging.getLogger("hub.models")

OUTCOMES = ("ok", "rate_limited", "server_error", "unreachable", "key_refused", "client_error", "skipped")
"""The outcomes ``hub_model_requests_total`` counts per model: an answer, the failures another
model could serve, a failure it could not (``client_error``), and a request not sent because
the model's circuit was open or every key rested (``skipped``)."""

_REST_WITHOUT_RETRY_AFTER = 5.0
"""Seconds a key answered 429 rests when the server did not say how long."""


def failover_kind(e: ModelError) -> str | None:
    """Why another model (or key) could serve a request that failed with ``e``, or None.

    ``"rate_limited"`` (429), ``"key_refused"`` (401, 403), ``"server_error"`` (5xx, 408),
    ``"unreachable"`` (a timeout, a refused or broken connection). None for the rest: a bad
    request, and a context too long for the model, are the request's, not the model's; they
    are raised as they are (the hook for compaction, above the seam).
    """
    if isinstance(e, ContextTooLong):  # whatever status a server gives it (some answer 500)
        return None
    status = e.status
    if status is None:
        return "unreachable" if e.retryable else None
    if status == 429:
        return "rate_limited"
    if status in (401, 403):
        return "key_refused"
    if status == 408 or status >= 500:
        return "server_error"
    return None


@dataclass(slots=True)
class Candidate:
    """One named model: a client per key (in the order of the pool), and its breaker.

    ``keys``: the keys' values, only to clear them from error texts (never shown)."""

    name: str
    clients: Sequence[Model]
    circuit: Circuit
    keys: Sequence[str] = ()
    pool: KeyPool = field(init=False)

    def __post_init__(self) -> None:
        if not self.clients:
            raise ValueError(f"model {self.name!r}: no client")
        self.pool = KeyPool(len(self.clients), clock=self.circuit.clock)

    @property
    def table(self) -> str:
        """The model as the config spells it, for what operators read: ``[model]``, ``[models.NAME]``."""
        return "[model]" if self.name == "model" else f"[models.{self.name}]"

    def scrub(self, text: str) -> str:
        """``text`` with each of this model's keys replaced by its position."""
        for i, key in enumerate(self.keys):
            if key:
                text = text.replace(key, f"[key {i + 1}]")
        return text

    def key_name(self, i: int) -> str:
        return f"key {i + 1} of {len(self.clients)}"

    def problem(self) -> str | None:
        """Why this model is not answering now (circuit open, keys refused or resting), or None."""
        notes = []
        if self.circuit.state is CircuitState.OPEN:
            notes.append(f"circuit open, tried again in {self.circuit.reopens_in():.0f}s")
        refused = self.pool.refused()
        if refused:
            names = ", ".join(str(i + 1) for i in refused)
            notes.append(f"key{'s' if len(refused) > 1 else ''} {names} of {len(self.clients)} refused (401/403)")
        wait = self.pool.ready_in()
        if wait:
            notes.append(f"every usable key rate-limited for {wait:.0f}s more")
        return "; ".join(notes) or None


Observe = Callable[[str, str], None]


class FailoverModel(Model):
    """The candidates in order, with failover, key pools and breakers (see the module doc).

    ``observe(model, outcome)`` hears of every request tried or skipped (the hub's metrics).
    With one candidate its circuit never skips it (there is nothing else to ask), but its
    keys still take turns.
    """

    def __init__(self, candidates: Sequence[Candidate], *, observe: Observe | None = None) -> None:
        if not candidates:
            raise ValueError("FailoverModel: at least one model")
        self.candidates = list(candidates)
        self.name = self.candidates[0].clients[0].name  # the primary, as its server names it
        self.observe = observe

    async def start(self) -> None:
        for c in self.candidates:
            for client in c.clients:
                await client.start()

    async def close(self) -> None:
        for c in self.candidates:
            for client in c.clients:
                try:
                    await client.close()
                except Exception:  # one client that fails to close leaves the others to close
                    log.exception("%s failed to close", c.table)

    def problems(self) -> dict[str, str]:
        """Each model that is not answering now, and why (``hub health``, ``/healthz``)."""
        return {c.name: p for c in self.candidates if (p := c.problem()) is not None}

    async def stream(self, request: ModelRequest) -> AsyncIterator[str | Usage | ToolCallDelta]:
        failures: list[str] = []
        first: ModelError | None = None
        for n, c in enumerate(self.candidates):
            ticket = self._ticket(c)
            if ticket is None:
                failures.append(f"{c.table}: skipped, circuit open")
                self._count(c.name, "skipped")
                continue
            try:
                keys = c.pool.ready()
                if not keys:
                    failures.append(f"{c.table}: skipped, {c.problem() or 'no usable key'}")
                    self._count(c.name, "skipped")
                    continue
                for key in keys:
                    started = False
                    chunks = c.clients[key].stream(request)
                    try:
                        try:
                            async for chunk in chunks:
                                started = True
                                if isinstance(chunk, Usage):
                                    chunk.model = c.name
                                yield chunk
                        finally:  # closed when our caller stops early: the connection is released now
                            close = getattr(chunks, "aclose", None)
                            if close is not None:
                                await close()
                    except ModelError as e:
                        kind = failover_kind(e)
                        self._count(c.name, kind or "client_error")
                        if kind is None:
                            raise  # the request's fault: the layers above decide (compaction, on_error)
                        reason = f"{c.table}: {self._failed(c, key, ticket, e, kind)}"
                        if started:  # its output was already acted on: never asked again elsewhere
                            raise ModelError(reason, status=e.status, retryable=e.retryable) from e
                        failures.append(reason)
                        first = first or e
                        if kind in ("rate_limited", "key_refused"):
                            continue  # the next key of the same model
                        break  # the model's own failure: the next model
                    else:
                        if c.circuit.success(ticket):
                            log.warning("%s answers again: its circuit is closed", c.table)
                        self._count(c.name, "ok")
                        return
            finally:
                c.circuit.release(ticket)
            if n + 1 < len(self.candidates):
                log.warning("%s; trying %s", failures[-1], self.candidates[n + 1].table)
        raise self._every_one_failed(failures, first)

    def _ticket(self, c: Candidate) -> Ticket | None:
        """Whether ``c`` is asked now: its circuit's ticket. The only model is asked whatever
        its circuit says (there is nothing else to ask): the circuit then only reports."""
        ticket = c.circuit.acquire()
        if ticket is None and len(self.candidates) == 1:
            ticket = c.circuit.force()
        return ticket

    def _failed(self, c: Candidate, key: int, ticket: Ticket, e: ModelError, kind: str) -> str:
        """Record one failure of ``c`` with ``key``; why, clear of keys."""
        text = c.scrub(str(e))
        if kind == "key_refused":
            c.pool.refuse(key)
            log.error(
                "%s: %s was refused (HTTP %s): it is not used again until restart",
                c.table,
                c.key_name(key),
                e.status,
            )
            return f"{c.key_name(key)} refused: {text}"
        if kind == "rate_limited":
            retry_after = getattr(e, "retry_after", None)
            rest = retry_after if isinstance(retry_after, (int, float)) else _REST_WITHOUT_RETRY_AFTER
            c.pool.rest(key, rest)
            if len(c.clients) > 1:
                log.warning("%s: %s rate-limited: it rests %.0fs", c.table, c.key_name(key), rest)
            return text
        if c.circuit.failure(ticket):
            log.warning(
                "%s failed %s time(s) in a row (%s): skipped for %.0fs",
                c.table,
                c.circuit.failures,
                text,
                c.circuit.cooldown,
            )
        return text

    def _every_one_failed(self, failures: list[str], first: ModelError | None) -> ModelError:
        """One error for a call no model answered: retryable when asking again later may work,
        with a ``retry_after`` when every model was skipped (the soonest one is back then)."""
        waits = [w for c in self.candidates if (w := self._back_in(c)) is not None]
        tried = first is not None
        err = ModelError(
            "no model answered: " + "; ".join(failures),
            status=first.status if first is not None else None,
            retryable=bool(waits) or (tried and first is not None and first.retryable),
        )
        err.retry_after = None if tried or not waits else min(waits)  # type: ignore[attr-defined]
        return err

    @staticmethod
    def _back_in(c: Candidate) -> float | None:
        """Seconds until ``c`` can be asked again; None: not before a restart."""
        keys = c.pool.ready_in()
        if keys is None:
            return None
        return max(keys, c.circuit.reopens_in())

    def _count(self, model: str, outcome: str) -> None:
        if self.observe is not None:
            self.observe(model, outcome)

    @property
    def names(self) -> list[str]:
        """The candidates' names, in order."""
        return [c.name for c in self.candidates]
