"""``GET /events`` (Server-Sent Events), ``GET /runs/{id}`` (JSON) and ``POST /runs/{id}/stop``
on the hub's endpoint.

All need ``Authorization: Bearer TOKEN``, the ``[http] token``; with no token configured
they are off and answer ``404`` with a JSON reason (a run's log is the conversation itself).

``/events?context=TYPE:KEY&run=ID&kinds=output,run_ended`` streams events from the moment of
connection, one SSE message per event: ``event`` is its kind, ``data`` its JSON
(`hub.events.event_dict()`), and ``id`` says where it is in the run store:
``RUN_ID:N`` for the run's N-th stored log entry (``:0`` its start, ``:end`` its end;
``output_partial`` events, which are not stored, carry none). A client that reconnects with
``Last-Event-ID: RUN_ID:N`` (the header browsers send, or ``?last_event_id=``) is first sent,
from the run store, what it missed: that run's entries after N, then the entries of the
runs (of the stream's filter) that started after it, each run's in order with its end, at
most ``REPLAY_RUNS`` runs; then the live events, without repeating what was replayed. A client that reads
too slowly loses events (a ``dropped`` event says how many); it never slows a run. A
comment line every ``keepalive`` seconds finds clients that went away. What is streamed is
redacted as the run store's records are. ``/runs/{id}`` (an id or a unique prefix) answers
the run's record and its whole event log so far.

``POST /runs/{id}/stop`` is the operator's stop (as ``hub stop RUN_ID``): the run ends
``killed``, reason ``stopped by operator``, on whichever worker holds it. It answers ``200``
with the run's record once it has ended (within ``STOP_WAIT`` seconds), ``202`` with the
record when the stop is requested but the run has not ended yet, ``404`` for no such run and
``409`` for a run that is not running.

``POST /approvals/{id}`` with ``{"approve": true|false}`` is the operator's answer to a run
waiting before an action (as ``hub approvals approve|deny ID``): ``200`` with the outcome when
it was the one answer, ``409`` when the question was already answered or its time has passed,
``404`` for no such approval, ``400`` for a body that is not that object. ``GET /approvals``
lists the questions still open.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
from typing import Any

from aiohttp import web

from ..errors import RunError
from ..events import KINDS, EventStream, RunEnded, RunEvent, RunStarted, event_dict
from ..logs import to_dict
from ..store import RunState
from ._untrusted_json import load_json

__all__ = ["EventRoutes", "run_dict", "REPLAY_RUNS", "STOP_WAIT"]

_MAX_PARAM = 300
REPLAY_RUNS = 100
"""The most runs a reconnecting client is sent from the run store."""
_ALL = 1 << 62  # replayed up to its end: no live event of that run is sent again
STOP_WAIT = 5.0
"""Seconds ``POST /runs/{id}/stop`` waits for the run to end before it answers 202."""


def run_dict(r: Any) -> dict[str, Any]:
    return {
        "id": r.id,
        "context": r.context,
        "state": str(r.state),
        "reason": r.reason,
        "steps": r.steps,
        "prompt_tokens": r.prompt_tokens,
        "completion_tokens": r.completion_tokens,
        "cached_tokens": r.cached_tokens,
        "started": r.started,
        "ended": r.ended,
        "duration": r.duration,
        "parent_id": r.parent_id,
        "user": r.user,
        "cost": r.cost,
    }


def _json_error(status: int, message: str, **headers: str) -> web.Response:
    return web.json_response({"error": message}, status=status, headers=headers or None)


class EventRoutes:
    """The two routes, and the streams they hold open (closed when the endpoint stops)."""

    def __init__(self, hub: Any, *, keepalive: float = 15.0) -> None:
        self.hub = hub
        self.keepalive = keepalive
        self._streams: set[EventStream] = set()

    def add_to(self, app: web.Application) -> None:
        app.router.add_get("/events", self.events)
        app.router.add_get("/runs/{id}", self.run)
        app.router.add_post("/runs/{id}/stop", self.stop)
        app.router.add_get("/approvals", self.approvals)
        app.router.add_post("/approvals/{id}", self.approve)

    def close(self) -> None:
        for stream in tuple(self._streams):
            stream.close()

    def _refusal(self, request: web.Request) -> web.Response | None:
        cfg = self.hub.config.http
        token = cfg.token if cfg is not None else ""
        if not token:
            return _json_error(404, f"{request.path} is off: set [http] token to serve run events")
        auth = request.headers.get("Authorization", "")
        scheme, _, given = auth.partition(" ")
        if not (
            auth.isascii()
            and scheme.lower() == "bearer"
            and hmac.compare_digest(given.strip().encode(), token.encode())
        ):
            return _json_error(
                401,
                f"{request.path} needs Authorization: Bearer TOKEN (the [http] token)",
                **{"WWW-Authenticate": "Bearer"},
            )
        return None

    def _clean(self, value: Any) -> Any:
        redactor = self.hub.redactor
        return redactor.redact_tree(value) if redactor else value

    async def run(self, request: web.Request) -> web.Response:
        refused = self._refusal(request)
        if refused is not None:
            return refused
        run_id = request.match_info["id"]
        if len(run_id) > _MAX_PARAM:
            return _json_error(400, f"run id is longer than {_MAX_PARAM} characters")
        store = self.hub.runs
        record = await store.get(run_id) or await store.find(run_id)
        if record is None:
            return _json_error(404, f"no run matches {run_id!r} (give more characters if several do)")
        events: Any = await store.events(record.id)  # (RunStore.list shadows list in its annotations)
        body = {"run": run_dict(record), "events": [to_dict(e) for e in events]}
        return web.json_response(self._clean(json.loads(json.dumps(body, default=str))))

    async def stop(self, request: web.Request) -> web.Response:
        refused = self._refusal(request)
        if refused is not None:
            return refused
        run_id = request.match_info["id"]
        if len(run_id) > _MAX_PARAM:
            return _json_error(400, f"run id is longer than {_MAX_PARAM} characters")
        store = self.hub.runs
        record = await store.get(run_id) or await store.find(run_id)
        if record is None:
            return _json_error(404, f"no run matches {run_id!r} (give more characters if several do)")
        try:
            record = await self.hub.stop_run(record.id, wait=STOP_WAIT)
        except RunError as e:  # it ended meanwhile, or had ended
            return web.json_response({"error": str(e), "run": self._clean(run_dict(record))}, status=409)
        ended = record.state != RunState.RUNNING
        body = {"run": run_dict(record)} if ended else {"stop": "requested", "run": run_dict(record)}
        return web.json_response(self._clean(body), status=200 if ended else 202)

    async def approvals(self, request: web.Request) -> web.Response:
        refused = self._refusal(request)
        if refused is not None:
            return refused
        rows = await self.hub.approvals.waiting()
        body = [
            {
                "id": a.id,
                "run_id": a.run_id,
                "context": a.context,
                "action": a.action,
                "args": a.args,
                "user": a.user,
                "expires": a.expires,
            }
            for a in rows
        ]
        return web.json_response(self._clean({"approvals": body}))

    async def approve(self, request: web.Request) -> web.Response:
        refused = self._refusal(request)
        if refused is not None:
            return refused
        approval_id = request.match_info["id"]
        if len(approval_id) > _MAX_PARAM:
            return _json_error(400, f"approval id is longer than {_MAX_PARAM} characters")
        raw = await request.read()
        try:
            body = load_json(raw) if len(raw) <= 1024 else None
        except ValueError as e:
            return _json_error(400, f"the body is not JSON: {e}")
        if not isinstance(body, dict) or not isinstance(body.get("approve"), bool) or len(body) != 1:
            return _json_error(400, 'the body must be {"approve": true} or {"approve": false}')
        try:
            answer = await self.hub.approvals.answer_as_operator(approval_id, approve=body["approve"])
        except RunError as e:
            return _json_error(404, str(e))
        status = 200 if answer.accepted else 409
        return web.json_response({"state": answer.state, "message": answer.message}, status=status)

    async def events(self, request: web.Request) -> web.StreamResponse:
        refused = self._refusal(request)
        if refused is not None:
            return refused
        q = request.query
        for name in ("context", "run", "kinds"):
            if len(q.get(name, "")) > _MAX_PARAM:
                return _json_error(400, f"{name} is longer than {_MAX_PARAM} characters")
        kinds = [k.strip() for k in q["kinds"].split(",") if k.strip()] if q.get("kinds") else None
        unknown = sorted(set(kinds or ()) - KINDS)
        if unknown:
            return _json_error(400, f"unknown event kind(s) {', '.join(unknown)}; known: {', '.join(sorted(KINDS))}")
        run = q.get("run") or None
        last_id = request.headers.get("Last-Event-ID") or q.get("last_event_id") or ""
        resume: tuple[str, int] | None = None
        if last_id:
            resume = _parse_last_id(last_id)
            if resume is None:
                return _json_error(
                    400, f"Last-Event-ID {last_id[:_MAX_PARAM]!r} is not RUN_ID:N (an id this stream sent)"
                )
        stream = self.hub.events(context=q.get("context") or None, run=run, kinds=kinds)
        self._streams.add(stream)
        try:
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
            await resp.prepare(request)
            # subscribed first, then read the store: nothing falls between the two
            replayed = await self._replay(resp, stream, resume) if resume is not None else {}
            if run is not None and replayed.get(run) == _ALL:
                return resp  # that run had ended: all of it was sent
            if run is not None:  # a run that already ended: its end, then the stream ends
                record = await self.hub.runs.get(run)
                if record is not None and record.ended is not None:
                    stream.close()
                    await self._send(
                        resp,
                        RunEnded(
                            record.id,
                            record.context,
                            0,
                            str(record.state),
                            record.reason,
                            record.steps,
                            record.prompt_tokens,
                            record.completion_tokens,
                            record.duration,
                        ),
                    )
                    return resp
            it = aiter(stream)
            while True:
                try:
                    event = await asyncio.wait_for(anext(it), self.keepalive)
                except TimeoutError:
                    await resp.write(b": keepalive\n\n")
                    continue
                except StopAsyncIteration:
                    break
                if replayed and _was_replayed(event, replayed):
                    continue
                await self._send(resp, event)
            with contextlib.suppress(ConnectionError):
                await resp.write_eof()
            return resp
        finally:
            stream.close()
            self._streams.discard(stream)

    async def _replay(self, resp: web.StreamResponse, stream: EventStream, resume: tuple[str, int]) -> dict[str, int]:
        """Send, from the run store, what followed ``resume`` (see the module's docstring).
        Returns how far each run was sent (its stored entries, or ``_ALL`` with its end)."""
        store = self.hub.runs
        run_id, after = resume
        first = await store.get(run_id)
        if first is None:
            return {}
        runs = [first]
        if stream.run is None:
            later = await store.list(limit=REPLAY_RUNS, context=stream.context)
            runs += sorted(
                (r for r in later if r.started > first.started and r.id != first.id), key=lambda r: r.started
            )
        elif stream.run != first.id:
            return {}
        sent: dict[str, int] = {}
        for r in runs[:REPLAY_RUNS]:
            if not stream.wants(r.id, r.context, "run_started"):
                continue  # another conversation than the stream's
            entries = await store.events(r.id)
            start = min(after, len(entries)) if r.id == run_id else 0
            for n, entry in enumerate(entries[start:], start + 1):
                if stream.wants(r.id, r.context, entry.kind):
                    await self._send(resp, RunEvent(r.id, r.context, 0, entry, n))
            sent[r.id] = len(entries)
            if r.ended is not None:
                if stream.wants(r.id, r.context, "run_ended"):
                    await self._send(
                        resp,
                        RunEnded(
                            r.id,
                            r.context,
                            0,
                            str(r.state),
                            r.reason,
                            r.steps,
                            r.prompt_tokens,
                            r.completion_tokens,
                            r.duration,
                        ),
                    )
                sent[r.id] = _ALL
        return sent

    async def _send(self, resp: web.StreamResponse, event: Any) -> None:
        data = json.dumps(self._clean(json.loads(json.dumps(event_dict(event), default=str))), ensure_ascii=False)
        head = f"id: {eid}\n" if (eid := _event_id(event)) else ""
        await resp.write(f"{head}event: {event.kind}\ndata: {data}\n\n".encode())


def _event_id(event: Any) -> str | None:
    """Where ``event`` is in the run store, as ``Last-Event-ID`` names it; None for events
    that are not stored (partial output, a dropped-events notice)."""
    if isinstance(event, RunEvent):
        return f"{event.run_id}:{event.index}" if event.index else None
    if isinstance(event, RunStarted):
        return f"{event.run_id}:0"
    if isinstance(event, RunEnded):
        return f"{event.run_id}:end"
    return None


def _parse_last_id(value: str) -> tuple[str, int] | None:
    run_id, sep, n = value.strip().rpartition(":")
    if not sep or not run_id or len(run_id) > _MAX_PARAM:
        return None
    if n == "end":
        return run_id, _ALL
    return (run_id, int(n)) if n.isdigit() and len(n) < 12 else None


def _was_replayed(event: Any, replayed: dict[str, int]) -> bool:
    """A live event that the replay already sent (or that belongs to a run replayed whole)."""
    done = replayed.get(getattr(event, "run_id", ""), None)
    if done is None:
        return False
    if isinstance(event, RunEvent):
        return event.index <= done
    return isinstance(event, RunStarted) or done == _ALL
