"""The in-memory backend: every store as plain Python objects, for tests, ``hub chat`` without a
data dir and the hubs of one process that share them (leases). Nothing survives the process.

One class per seam (the bases are hub/store's other modules); each passes the same contract
suite as the SQL backend (tests/store/test_contracts.py and the suites it names).
"""

from __future__ import annotations

import builtins
import dataclasses
import time
from dataclasses import dataclass
from typing import Any

from ..logs import InputLog, Log, from_dict, to_dict
from ._approvals import Approval, ApprovalState, ApprovalStore
from ._inbox import InboxStore, Parked, Pending
from ._leases import Clock, Lease, LeaseStore, check_lease
from ._memory import MemoryStore
from ._pairings import Pairing, PairingStore
from ._reviews import Review, ReviewStore, moved
from ._revisions import Revision, RevisionStore
from ._run_records import RunRecord, RunState, RunStore, descendants, forgotten_input
from ._schedules import ScheduleStore, Tick
from ._stops import StopStore
from ._usage import UsageStore

__all__ = [
    "InMemoryApprovalStore",
    "InMemoryInbox",
    "InMemoryLeaseStore",
    "InMemoryPairingStore",
    "InMemoryReviewStore",
    "InMemoryRevisionStore",
    "InMemoryRunStore",
    "InMemoryScheduleStore",
    "InMemoryStopStore",
    "InMemoryStore",
    "InMemoryUsageStore",
]


# --- runs and the inbox -------------------------------------------------------------------


class InMemoryRunStore(RunStore):
    def __init__(self) -> None:
        self._runs: dict[str, RunRecord] = {}
        self._events: dict[str, list[dict[str, Any]]] = {}

    async def create(self, run: RunRecord) -> None:
        self._runs[run.id] = run
        self._events[run.id] = []

    def append(self, run: RunRecord, entry: Log) -> None:
        run.seq += 1
        self._events.setdefault(run.id, []).append(to_dict(entry))

    def update(self, run: RunRecord) -> None:
        self._runs[run.id] = run

    async def finish(self, run: RunRecord) -> None:
        self._runs[run.id] = run

    async def get(self, run_id: str) -> RunRecord | None:
        return self._runs.get(run_id)

    async def list(
        self, *, limit: int = 20, state: str | None = None, context: str | None = None, parent_id: str | None = None
    ) -> list[RunRecord]:
        runs = [
            r
            for r in self._runs.values()
            if (state is None or r.state == state)
            and (context is None or r.context == context)
            and (parent_id is None or r.parent_id == parent_id)
        ]
        runs.sort(key=lambda r: r.started, reverse=True)
        return runs[:limit]

    async def events(self, run_id: str) -> builtins.list[Log]:
        return [from_dict(d) for d in self._events.get(run_id, [])]

    async def forget_user(self, user: str, *, platform: str) -> tuple[int, int]:
        children: dict[str | None, builtins.list[str]] = {}
        for r in self._runs.values():
            children.setdefault(r.parent_id, []).append(r.id)
        roots = [r.id for r in self._runs.values() if r.user == user and r.context.startswith(platform + ":")]
        doomed = descendants(children, roots)
        for run_id in doomed:
            self._runs.pop(run_id, None)
            self._events.pop(run_id, None)
        blanked = 0
        for run_id, events in self._events.items():
            run = self._runs.get(run_id)
            if run is None or not run.context.startswith(platform + ":"):
                continue
            for i, data in enumerate(events):
                entry = from_dict(data)
                if isinstance(entry, InputLog) and entry.user == user:
                    events[i] = to_dict(forgotten_input(entry))
                    blanked += 1
        return len(doomed), blanked

    async def recover(self) -> builtins.list[RunRecord]:
        found = []
        for r in self._runs.values():
            if r.state == RunState.RUNNING:
                r.state, r.reason, r.ended = RunState.KILLED, "abnormal_exit", time.time()
                found.append(r)
        return found


@dataclass(slots=True)
class _Item:
    context: str
    entry: InputLog
    run_id: str | None = None
    failures: int = 0
    failed_run: str | None = None
    error: str | None = None
    parked: bool = False


class InMemoryInbox(InboxStore):
    def __init__(self) -> None:
        self._items: dict[str, _Item] = {}
        self._platform_ids: set[str] = set()

    async def record(self, context: str, entry: InputLog) -> bool:
        if entry.platform_id is not None:
            if entry.platform_id in self._platform_ids:
                return False
            self._platform_ids.add(entry.platform_id)
        self._items[entry.id] = _Item(context, entry)
        return True

    def take(self, ids: list[str], run_id: str) -> None:
        for i in ids:
            if i in self._items:
                self._items[i].run_id = run_id

    async def done(self, ids: list[str]) -> None:
        for i in ids:
            self._items.pop(i, None)

    async def pending(self) -> list[Pending]:
        return [Pending(it.context, it.entry, it.run_id) for it in self._items.values() if not it.parked]

    async def seen(self, platform_id: str) -> bool:
        return platform_id in self._platform_ids

    async def forget_user(self, user: str, *, platform: str) -> int:
        theirs = [i for i, it in self._items.items() if it.entry.user == user and it.context.startswith(platform + ":")]
        for i in theirs:  # a handled input is not kept here: only those waiting are theirs
            del self._items[i]
        return len(theirs)

    async def failed(self, ids: list[str], run_id: str, error: str, *, park_after: int) -> list[str]:
        parked = []
        for i in ids:
            it = self._items.get(i)
            if it is None or it.parked:
                continue
            if it.failed_run != run_id:
                it.failures, it.failed_run, it.error = it.failures + 1, run_id, error
            if park_after and it.failures >= park_after:
                it.parked = True
                parked.append(i)
        return parked

    async def park(self, context: str, entry: InputLog, error: str, *, failures: int) -> bool:
        if not await self.record(context, entry):
            return False
        item = self._items[entry.id]
        item.parked, item.failures, item.error = True, failures, error
        return True

    async def parked(self) -> list[Parked]:
        return [
            Parked(it.context, it.entry, it.failures, it.error or "", it.run_id)
            for it in self._items.values()
            if it.parked
        ]

    async def retry(self, input_id: str) -> bool:
        it = self._items.get(input_id)
        if it is None or not it.parked:
            return False
        it.parked, it.failures, it.failed_run, it.error, it.run_id = False, 0, None, None, None
        return True

    async def drop(self, input_id: str) -> bool:
        it = self._items.get(input_id)
        if it is None or not it.parked:
            return False
        del self._items[input_id]
        return True

    async def find(self, prefix: str) -> str | None:
        found = [i for i in self._items if i.startswith(prefix)]
        return found[0] if len(found) == 1 else None


# --- key-value memory ------------------------------------------------------------------


class InMemoryStore(MemoryStore):
    """A dict, copying values in and out so callers never share mutable state with the store."""

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}

    async def get(self, key: str) -> Any | None:
        value = self._data.get(key)
        return _copy(value) if value is not None else None

    async def set(self, key: str, value: Any) -> None:
        try:
            stored = _copy(value)
        except _NotJson:
            _check_json(value)  # names where the value is not JSON
            raise
        self._data[key] = stored

    async def delete(self, key: str) -> None:
        self._data.pop(key, None)

    async def clear(self, prefix: str = "") -> None:
        if not prefix:
            self._data.clear()
            return
        for k in [k for k in self._data if k.startswith(prefix)]:
            del self._data[k]

    async def keys(self, prefix: str = "") -> list[str]:
        return sorted(k for k in self._data if k.startswith(prefix))


_JSON_SCALARS = (str, int, float, bool, type(None))
_EXACT_SCALARS = frozenset(_JSON_SCALARS)


def _check_json(value: Any, path: str = "value") -> None:
    if isinstance(value, _JSON_SCALARS):
        return
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check_json(v, f"{path}[{i}]")
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(f"{path}: keys must be strings, got {type(k).__name__}")
            _check_json(v, f"{path}.{k}")
        return
    raise TypeError(f"{path}: {type(value).__name__} is not JSON-serialisable")


class _NotJson(TypeError):
    pass


def _copy(value: Any) -> Any:
    """A copy of a JSON value (containers new, scalars shared: they are immutable), checking
    it on the way. One pass, a fraction of ``copy.deepcopy``'s cost (its memo and dispatch),
    which a turn paid three times when saving memory. Raises `_NotJson`."""
    t = type(value)
    # the exact types first: a dict copied in C and only its containers replaced (a
    # conversation's history, copied in and out at every turn)
    if t is dict:
        out = value.copy()
        for k, v in out.items():  # replacing a key's value does not disturb the iteration
            if type(k) is not str and not isinstance(k, str):
                raise _NotJson(k)
            if type(v) not in _EXACT_SCALARS:
                out[k] = _copy(v)
        return out
    if t is list:
        return [v if type(v) in _EXACT_SCALARS else _copy(v) for v in value]
    if t in _EXACT_SCALARS:
        return value
    # subclasses (an OrderedDict, an IntEnum), tuples, and what is not JSON
    if isinstance(value, dict):
        sub = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise _NotJson(k)
            sub[k] = v if isinstance(v, _JSON_SCALARS) else _copy(v)
        return sub
    if isinstance(value, list):
        return [v if isinstance(v, _JSON_SCALARS) else _copy(v) for v in value]
    if isinstance(value, tuple):
        return tuple(v if isinstance(v, _JSON_SCALARS) else _copy(v) for v in value)
    if isinstance(value, _JSON_SCALARS):
        return value
    raise _NotJson(value)


# --- leases, usage, schedules, revisions, pairings ----------------------------------------


@dataclass(slots=True)
class _Row:
    holder: str
    expires: float
    token: int


class InMemoryLeaseStore(LeaseStore):
    """Leases of the workers (hubs) in one process that share this object."""

    def __init__(self, *, clock: Clock = time.time) -> None:
        self.clock = clock
        self._rows: dict[str, _Row] = {}

    async def acquire(self, name: str, holder: str, ttl: float) -> Lease | None:
        check_lease(name, holder, ttl)
        now = self.clock()
        row = self._rows.get(name)
        if row is None:
            row = self._rows[name] = _Row(holder, now + ttl, 1)
        elif row.holder == holder and row.expires > now:
            row.expires = now + ttl
        elif row.expires <= now:
            row.holder, row.expires, row.token = holder, now + ttl, row.token + 1
        else:
            return None
        return Lease(name, row.holder, row.expires, row.token)

    async def renew(self, name: str, holder: str, ttl: float) -> Lease | None:
        check_lease(name, holder, ttl)
        now = self.clock()
        row = self._rows.get(name)
        if row is None or row.holder != holder or row.expires <= now:
            return None
        row.expires = now + ttl
        return Lease(name, row.holder, row.expires, row.token)

    async def release(self, name: str, holder: str) -> bool:
        check_lease(name, holder)
        row = self._rows.get(name)
        if row is None or row.holder != holder or row.expires <= self.clock():
            return False
        row.holder, row.expires = "", 0.0  # the row stays: its token must keep growing
        return True

    async def holder(self, name: str) -> Lease | None:
        row = self._rows.get(name)
        if row is None or not row.holder or row.expires <= self.clock():
            return None
        return Lease(name, row.holder, row.expires, row.token)


class InMemoryUsageStore(UsageStore):
    def __init__(self) -> None:
        self._used: dict[tuple[str, str], int] = {}
        self._spent: dict[tuple[str, str], float] = {}

    def add(self, scope: str, day: str, tokens: int) -> None:
        self._used[(scope, day)] = self._used.get((scope, day), 0) + tokens

    async def get(self, scope: str, day: str) -> int:
        return self._used.get((scope, day), 0)

    def add_cost(self, scope: str, day: str, cost: float) -> None:
        self._spent[(scope, day)] = self._spent.get((scope, day), 0.0) + cost

    async def cost(self, scope: str, day: str) -> float:
        return self._spent.get((scope, day), 0.0)

    async def reserve(self, scope: str, day: str, amount: float, limit: float) -> bool:
        spent = self._spent.get((scope, day), 0.0)  # no await between the check and the add
        if spent >= limit or spent + amount > limit:
            return False
        self._spent[(scope, day)] = spent + amount
        return True


class InMemoryReviewStore(ReviewStore):
    def __init__(self) -> None:
        self._reviews: dict[str, Review] = {}

    async def add(self, review: Review) -> None:
        if review.id in self._reviews:
            raise ValueError(f"a held post {review.id!r} exists already")
        self._reviews[review.id] = review

    async def get(self, review_id: str) -> Review | None:
        return self._reviews.get(review_id)

    async def list(self, *, platform: str | None = None, state: str | None = None) -> builtins.list[Review]:
        return sorted(
            (
                r
                for r in self._reviews.values()
                if (platform is None or r.platform == platform) and (state is None or r.state == state)
            ),
            key=lambda r: (r.created, r.id),
        )

    async def _move(
        self, review_id: str, old: str, new: str, *, now: float, text: str | None, result: str | None
    ) -> Review | None:
        r = self._reviews.get(review_id)
        if r is None or r.state != old or (old == "pending" and r.expires <= now):
            return None
        self._reviews[review_id] = r = moved(r, new, now=now, text=text, result=result)
        return r

    async def _delete(self, review_id: str) -> int:
        return 1 if self._reviews.pop(review_id, None) is not None else 0


class InMemoryStopStore(StopStore):
    def __init__(self) -> None:
        self._requests: dict[str, tuple[str, float]] = {}

    async def request(self, run_id: str, reason: str) -> None:
        self._requests.setdefault(run_id, (reason, time.time()))

    async def requested(self) -> dict[str, str]:
        return {run_id: reason for run_id, (reason, _) in self._requests.items()}

    async def clear(self, run_ids: list[str]) -> None:
        for run_id in run_ids:
            self._requests.pop(run_id, None)

    async def prune(self, before: float) -> int:
        old = [run_id for run_id, (_, at) in self._requests.items() if at < before]
        await self.clear(old)
        return len(old)


class InMemoryApprovalStore(ApprovalStore):
    """Approvals in a dict: each move is a compare-and-set without an await inside."""

    def __init__(self) -> None:
        self._rows: dict[str, Approval] = {}

    async def ask(self, approval: Approval) -> Approval:
        for row in self._rows.values():
            if row.key == approval.key:
                if row.state in (ApprovalState.PENDING, ApprovalState.APPROVED) and row.run_id != approval.run_id:
                    row = self._rows[row.id] = _replace(row, run_id=approval.run_id)
                return row
        self._rows[approval.id] = approval
        return approval

    async def get(self, approval_id: str) -> Approval | None:
        return self._rows.get(approval_id)

    async def list(self, *, states: tuple[ApprovalState, ...] = ()) -> builtins.list[Approval]:
        rows = [r for r in self._rows.values() if not states or r.state in states]
        return sorted(rows, key=lambda r: (r.created, r.id))

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
        row = self._rows.get(approval_id)
        if row is None or row.state != frm or (before_expiry and now >= row.expires):
            return False
        answer = {"answered": now, "answered_by": by} if frm == ApprovalState.PENDING else {}
        self._rows[approval_id] = _replace(row, state=to, **answer)
        return True

    async def prune(self, before: float) -> int:
        old = [r.id for r in self._rows.values() if r.state != ApprovalState.PENDING and r.created < before]
        for approval_id in old:
            del self._rows[approval_id]
        return len(old)

    async def forget_user(self, user: str, *, platform: str) -> int:
        theirs = [r.id for r in self._rows.values() if r.user == user and r.context.startswith(platform + ":")]
        for approval_id in theirs:
            del self._rows[approval_id]
        return len(theirs)


def _replace(row: Approval, **changes: Any) -> Approval:
    return dataclasses.replace(row, **changes)


class InMemoryScheduleStore(ScheduleStore):
    def __init__(self) -> None:
        self._ticks: dict[str, Tick] = {}

    async def tick(self, name: str) -> Tick | None:
        return self._ticks.get(name)

    async def record(self, name: str, fired: float) -> None:
        self._ticks[name] = Tick(fired, True)

    async def start(self, name: str, now: float) -> Tick:
        return self._ticks.setdefault(name, Tick(now, True))

    async def finish(self, name: str, fired: float) -> None:
        current = self._ticks.get(name)
        if current is not None and current.last == fired:
            self._ticks[name] = Tick(fired, True)

    async def claim(self, name: str, expected: float | None, fired: float) -> bool:
        current = self._ticks.get(name)
        if (current.last if current is not None else None) != expected:
            return False
        self._ticks[name] = Tick(fired, False)
        return True


class InMemoryRevisionStore(RevisionStore):
    def __init__(self) -> None:
        self._revs: dict[str, list[Revision]] = {}

    def record(self, name: str, text: str, *, note: str = "") -> None:
        revs = self._revs.setdefault(name, [])
        if revs and revs[-1].text == text:
            return
        revs.append(Revision(name, len(revs) + 1, text, time.time(), note))

    async def history(self, name: str) -> list[Revision]:
        return list(self._revs.get(name, []))

    async def names(self) -> list[str]:
        return sorted(self._revs)


class InMemoryPairingStore(PairingStore):
    def __init__(self) -> None:
        self._rows: dict[tuple[str, str], Pairing] = {}

    async def get(self, platform: str, user: str) -> Pairing | None:
        return self._rows.get((platform, user))

    async def put(self, pairing: Pairing) -> None:
        self._rows[(pairing.platform, pairing.user)] = pairing

    async def by_code(self, code: str) -> Pairing | None:
        return next((p for p in self._rows.values() if p.code == code), None)

    async def delete(self, user: str, *, platform: str | None = None) -> int:
        gone = [k for k in self._rows if k[1] == user and (platform is None or k[0] == platform)]
        for k in gone:
            del self._rows[k]
        return len(gone)

    async def list(self) -> list[Pairing]:
        return sorted(self._rows.values(), key=lambda p: p.created)
