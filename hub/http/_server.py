"""The hub's HTTP endpoint (aiohttp): ``/healthz``, ``/metrics``, ``/webhooks/NAME`` and, with
``[http] token``, the run events (hub/http/_run_events.py) and the dashboard at ``/ui/`` (hub/http/dashboard/_pages.py).

Off unless config.toml has an ``[http]`` table; bound to 127.0.0.1 unless ``host`` says
otherwise.

``POST /webhooks/NAME`` is authenticated with the webhook's shared secret, either as
``Authorization: Bearer SECRET`` or as ``X-Hub-Signature-256: sha256=HEX`` (the HMAC-SHA256 of
the raw body keyed by the secret, or of ``TIMESTAMP.`` and the body when the request carries
``X-Hub-Timestamp: TIMESTAMP``, refused outside a 5-minute window); both are compared in
constant time. The credentials are checked from the headers before the body is read, and an
unknown name answers exactly as a wrong credential does. The JSON body, cleaned by
`hub.http._untrusted_json.load_json()`, becomes an input (type ``webhook``) to the webhook's
context. It answers ``202 {"run_id": ...}``, or with ``?wait=1`` ``200`` with the run's
terminal state and outputs once it ends. An ``Idempotency-Key`` header makes a redelivery
answer ``200 {"duplicate": true}`` instead of running again. Nothing runs on a 4xx.

Slow clients cannot hold the endpoint: each request's headers must arrive within
``header_timeout`` and its body, whatever the route, within ``body_timeout`` and under a cap
(``max_body``; 4 KB for a dashboard login), and at most ``max_connections`` are open at once;
when full, the oldest connection that has not yet proven anything (waiting for its headers,
or sending a body not yet read whole or verified) is dropped. The connection guard is in
``_connections``, the security headers and the bearer check in ``_security``; this module
holds the listener and the routes.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import hmac
import logging
import re
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

from aiohttp import web

from ..config import HubConfig, WebhookSection
from ..definitions import Route, RouteAnswer, RouteRequest
from ..errors import ConfigError, RunError, StoreError
from ._connections import _Connection, _Guard, _ProtocolLog, handler_factory
from ._security import add_security_headers, bearer_matches
from ._untrusted_json import UntrustedJSONError, load_json

if TYPE_CHECKING:
    from ..definitions import RunResult
    from ..engine import Submission

__all__ = ["HttpServer", "http_component", "signature", "TIMESTAMP_TOLERANCE"]

log = logging.getLogger("hub.http")

_TRUE = frozenset({"1", "true", "yes"})
TIMESTAMP_TOLERANCE = 300.0
"""Seconds an ``X-Hub-Timestamp`` may differ from the hub's clock (as Slack and Stripe allow)."""
LOGIN_MAX_BODY = 4096
"""Bytes a dashboard login's body may have: a form with the token, nothing more."""
_HEX64 = re.compile(r"[0-9a-fA-F]{64}")
_IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e]{1,200}")


def signature(secret: str, body: bytes, timestamp: str | int | None = None) -> str:
    """The ``X-Hub-Signature-256`` value for ``body``: ``sha256=`` and the hex HMAC-SHA256.

    With a ``timestamp`` (sent as ``X-Hub-Timestamp``) the signed text is ``TIMESTAMP.BODY``.
    """
    text = body if timestamp is None else f"{timestamp}.".encode() + body
    return "sha256=" + hmac.new(secret.encode(), text, hashlib.sha256).hexdigest()


def http_component(config: HubConfig) -> HttpServer | None:
    """The endpoint when ``[http]`` is configured; None (and a warning for webhooks) otherwise."""
    if config.http is None:
        if config.webhooks:
            log.warning("[webhooks] are configured but [http] is not: they are not served")
        return None
    return HttpServer()


def _error(status: int, message: str, **headers: str) -> web.Response:
    return web.json_response({"error": message}, status=status, headers=headers or None)


def _unread(status: int, message: str) -> web.Response:
    """An error answered before the body was read: the connection closes after it, rather
    than wait (aiohttp's lingering) for a body its client may never send."""
    resp = _error(status, message)
    resp.force_close()
    return resp


def _route_answer(answer: RouteAnswer | None) -> web.Response:
    """A route handler's answer as a response: its text bare, else its JSON body."""
    answer = answer if answer is not None else RouteAnswer()
    if answer.text is not None:
        return web.Response(text=answer.text, status=answer.status, content_type="text/plain")
    return web.json_response({"ok": True} if answer.body is None else answer.body, status=answer.status)


def _denied(message: str) -> web.Response:
    return _error(401, message, **{"WWW-Authenticate": "Bearer"})


class _Credentials:
    """What a webhook request's headers claim, checked before its body is read."""

    def __init__(self, hook: WebhookSection, request: web.Request) -> None:
        self.hook = hook
        self.problems: list[str] = []
        self.bearer_ok = False
        self.signature: str | None = None  # well-formed, still to check against the body
        self.timestamp: str | None = None
        self.refused: str | None = None  # a reason to answer 401 at once
        headers = request.headers
        for name in ("Authorization", "X-Hub-Signature-256", "X-Hub-Timestamp"):
            if not headers.get(name, "").isascii():
                self.refused = f"{name} is not ASCII: it cannot hold a credential"
                return
        ts = headers.get("X-Hub-Timestamp")
        if ts is not None:
            if not (ts.strip().isdigit() and len(ts.strip()) <= 12):
                self.refused = "X-Hub-Timestamp must be Unix seconds (an integer)"
                return
            self.timestamp = ts.strip()
        auth = headers.get("Authorization", "")
        if auth:
            scheme, _, token = auth.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                self.problems.append("Authorization must be 'Bearer SECRET'")
            elif hmac.compare_digest(token.strip().encode(), hook.secret.encode()):
                self.bearer_ok = True
            else:
                self.problems.append("bearer token does not match")
        sig = headers.get("X-Hub-Signature-256", "")
        if sig:
            value = sig.strip()
            if not value.startswith("sha256=") or not _HEX64.fullmatch(value[7:]):
                self.problems.append("X-Hub-Signature-256 must be 'sha256=HEX' (64 hex digits)")
            else:
                self.signature = value.lower()
        if not self.bearer_ok and self.signature is None:
            self.refused = "; ".join(self.problems) or (
                "missing Authorization: Bearer SECRET or X-Hub-Signature-256 header"
            )

    def verify(self, body: bytes) -> str | None:
        """None when the body's signature matches (or the bearer did), else why not."""
        if not self.bearer_ok:
            assert self.signature is not None
            expected = signature(self.hook.secret, body, self.timestamp)
            if not hmac.compare_digest(self.signature.encode(), expected.encode()):
                signed = "the timestamp and the body" if self.timestamp is not None else "the body"
                return "; ".join([*self.problems, f"X-Hub-Signature-256 does not match {signed}"])
        return self.fresh()

    def fresh(self) -> str | None:
        """None when the timestamp is within the window (or absent and not required)."""
        if self.timestamp is None:
            if self.hook.require_timestamp:
                return "X-Hub-Timestamp is required by this webhook (sign TIMESTAMP.BODY)"
            return None
        skew = time.time() - int(self.timestamp)
        if abs(skew) > TIMESTAMP_TOLERANCE:
            return (
                f"X-Hub-Timestamp is {abs(skew):.0f}s {'old' if skew > 0 else 'ahead'}, outside the "
                f"{TIMESTAMP_TOLERANCE:.0f}s window: a replay, or a clock to fix"
            )
        return None


def _json_body(body: bytes) -> Any:
    """A posted body parsed as untrusted JSON, or the 400 that says why it is refused."""
    if not body.strip():
        return _error(400, "empty body: send a JSON value")
    try:
        return load_json(body)
    except UntrustedJSONError as e:
        return _error(400, f"body refused: {e}")


def _form_body(body: bytes) -> dict[str, str] | web.Response:
    """A posted form (``a=1&b=2``) as a dict of its fields (the last of a repeated one), or the 400."""
    try:
        return dict(
            parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=bool(body), max_num_fields=1000)
        )
    except (UnicodeDecodeError, ValueError) as e:
        return _error(400, f"body refused: not a form ({e})")


async def _answer(sub: Submission, timeout: float, *, wait: bool) -> web.Response:
    """A webhook's answer once its input is recorded: 202 with the run's id when it has one
    (200 with the run's end when the caller asked to ``wait``), 504 when that takes over
    ``timeout`` (the run goes on), 503 when the hub stops under it. Either future may have
    been cancelled (an input answered without a run row, or taken over by another worker),
    so none is read with a bare ``.result()``: the caller always gets an answer."""
    waiting: set[asyncio.Future[Any]] = {sub.result} if wait else {sub.run_id, sub.result}
    await asyncio.wait(waiting, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    if sub.result.cancelled():
        return _unanswered(sub)
    ended = sub.ended()
    if not wait:  # a run id, or the end before one (a command answers without a run row)
        return web.json_response({"run_id": sub.taken_by(), "context": sub.context}, status=202)
    if ended is None:
        return web.json_response(
            {"error": f"the run did not end within {timeout:g}s", "run_id": sub.taken_by()}, status=504
        )
    return web.json_response(_run_body(ended), status=200)


def _unanswered(sub: Submission) -> web.Response:
    """The answer for an input whose end was cancelled: taken over by another worker (it
    answers it: a duplicate here), or dropped as the hub stops."""
    if sub.duplicate:
        return web.json_response({"duplicate": True, "context": sub.context}, status=200)
    return _error(503, "the run was cancelled: the hub is stopping")


def _run_body(result: RunResult) -> dict[str, Any]:
    return {
        "run_id": result.run_id,
        "context": result.context,
        "state": str(result.state),
        "reason": result.reason,
        "steps": result.steps,
        "outputs": [{"type": o.type, "content": o.content, "sent": o.sent, "error": o.error} for o in result.outputs],
    }


def _say_what_is_open(cfg: Any, port: int) -> None:
    """One line at start: what anyone who reaches the port gets, what the token guards, what is
    off. An empty ``[http] token`` is a choice the operator should see, not find out."""
    where = f"{cfg.host}:{port}"
    metrics = "/metrics" if cfg.metrics else None
    if cfg.token:
        guarded = ", ".join(p for p in ("/events, /runs, /reviews, /ui/", metrics) if p)
        off = "" if cfg.metrics else "; /metrics is off ([http] metrics = false)"
        log.info("http: open to anyone who reaches %s: /healthz; behind the [http] token: %s%s", where, guarded, off)
        return
    open_ = ", ".join(p for p in ("/healthz", metrics) if p)
    log.warning(
        "http: no [http] token: open to anyone who reaches %s: %s; off: the dashboard (/ui/) and the "
        "run events (/events, /runs) and the review queue (/reviews)%s. "
        "Set [http] token (16+ characters) to guard %s and serve them",
        where,
        open_,
        "" if cfg.metrics else ", /metrics ([http] metrics = false)",
        "/metrics" if cfg.metrics else "the endpoint",
    )


class HttpServer:
    """A hub component serving the endpoint; ``port`` is the bound port once started."""

    def __init__(self) -> None:
        self._hub: Any = None
        self._runner: web.AppRunner | None = None
        self._server: asyncio.Server | None = None
        self._guard: _Guard | None = None
        # unknown webhook names are checked against this (a secret nobody has), so they
        # answer exactly as a wrong credential does and names cannot be enumerated
        self._decoy = WebhookSection(context="decoy:none", secret=secrets.token_hex(32))
        self.port: int | None = None
        self._events: Any = None
        self._ui: Any = None  # the dashboard (hub/http/dashboard/_pages.py), when [http] token is set
        self._routes: dict[str, Route] = {}

    async def start(self, hub: Any) -> None:  # the Hub, through its public API (submit, metrics, store health)
        if self._runner is not None:
            return
        cfg = hub.config.http
        assert cfg is not None, "HttpServer needs [http]"
        self._hub = hub
        for name, hook in hub.config.webhooks.items():
            try:
                hub.resolve_context(hook.context)
            except RunError as e:
                path = str(hub.config.path) if hub.config.path else None
                raise ConfigError(str(e), path=path, key=f"webhooks.{name}.context") from e
        app = web.Application(client_max_size=cfg.max_body + 1, middlewares=[self._guarded])
        app.on_response_prepare.append(add_security_headers)  # every response, raised ones too
        app.router.add_get("/healthz", self._healthz)
        if cfg.metrics:
            app.router.add_get("/metrics", self._metrics)
        app.router.add_post("/webhooks/{name}", self._webhook)
        self._routes = dict(getattr(hub, "routes", {}))
        for path, route in self._routes.items():
            app.router.add_route(route.method, path, functools.partial(self._route, route))
            log.info("http: serving %s %s", route.method, path)
            if route.get is not None:
                app.router.add_get(path, functools.partial(self._route_get, route), allow_head=False)
        from ._run_events import EventRoutes

        self._events = EventRoutes(hub)
        self._events.add_to(app)
        from ._reviews import ReviewRoutes

        ReviewRoutes(hub).add_to(app)
        self._add_dashboard(app, hub)
        # lingering: after an answer given before its body was read (401, 408, 413), a client
        # still sending gets a second to take it, not aiohttp's ten (the hub's stop waits on it)
        protocol: dict[str, Any] = {"access_log": None, "logger": _ProtocolLog(log, {}), "lingering_time": 1.0}
        runner = web.AppRunner(app, handle_signals=False, **protocol)
        await runner.setup()
        assert runner.server is not None
        factory = handler_factory(runner.server, **protocol)
        guard = _Guard(factory, limit=cfg.max_connections, header_timeout=cfg.header_timeout)
        try:
            server = await asyncio.get_running_loop().create_server(guard, cfg.host, cfg.port, reuse_address=True)
        except OSError as e:
            await runner.cleanup()
            raise ConfigError(f"cannot listen on {cfg.host}:{cfg.port}: {e.strerror or e}", key="http") from e
        if self._ui is not None:
            await self._ui.start()
        self._runner, self._server, self._guard = runner, server, guard
        self.port = server.sockets[0].getsockname()[1]
        log.info("http: listening on %s:%d", cfg.host, self.port)
        _say_what_is_open(cfg, self.port)

    def _add_dashboard(self, app: web.Application, hub: Any) -> None:
        """``/ui/``: the operators' dashboard, behind the ``[http] token``; off (404) without one."""
        if hub.config.http.token:
            from .dashboard import Dashboard

            self._ui = Dashboard(hub)

            async def slash(request: web.Request) -> web.Response:
                raise web.HTTPPermanentRedirect("/ui/")

            app.router.add_get("/ui", slash)
            app.add_subapp("/ui/", self._ui.app())
            return

        async def off(request: web.Request) -> web.Response:
            return web.Response(status=404, text="the dashboard is off: set [http] token to serve it at /ui/")

        app.router.add_route("*", "/ui", off)
        app.router.add_route("*", "/ui/{tail:.*}", off)

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        server, self._server = self._server, None
        if server is not None:
            server.close()  # no new connections
        if self._events is not None:
            self._events.close()  # open /events streams end
        if self._ui is not None:
            self._ui.chat.close()  # and the dashboard's chat panel's
        if runner is not None:
            await runner.cleanup()
        if self._ui is not None:
            await self._ui.stop()
        if self._guard is not None:
            for conn in list(self._guard.live.values()):
                conn.drop()
        if server is not None:
            await server.wait_closed()

    # --- handlers -----------------------------------------------------------------------

    @property
    def hub(self) -> Any:
        assert self._hub is not None
        return self._hub

    @web.middleware
    async def _guarded(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """Headers are in: stop the header deadline; a body is read under its deadline and cap
        before anything else looks at the request (see `_prove()`); failures become JSON
        answers: a failing store is 503, anything else a logged 500."""
        conn = self._guard.of(request) if self._guard is not None else None
        if conn is not None:
            conn.disarm()
        try:
            proven = await self._prove(request, conn)
            if isinstance(proven, web.Response):
                return proven
            return await handler(proven)
        except web.HTTPException:
            raise
        except StoreError as e:
            log.error("http: %s %s: the store failed: %s", request.method, request.path, e)
            return _error(503, f"the hub cannot record input now (its store failed: {e}); retry later")
        except (ConnectionError, asyncio.IncompleteReadError) as e:
            # the client went away (mid-body, as anyone may): nobody to answer, and not the hub's
            # error: one line, never a traceback (200 dropped connections were 300 KB of log)
            log.info("http: %s %s: the client hung up (%s)", request.method, request.path, type(e).__name__)
            return _unread(400, "the client hung up")
        except Exception:
            log.exception("http: %s %s failed", request.method, request.path)
            return _error(500, "internal error (the hub's log has the details)")
        finally:
            if conn is not None and conn.transport is not None and not conn.transport.is_closing():
                conn.wait_for_request()

    async def _prove(self, request: web.Request, conn: _Connection | None) -> web.Request | web.Response:
        """The request once it has shown what it is, or the refusal (408, 413).

        A connection stays unproven, the first to be dropped when the endpoint is full, while
        a body is still coming, whatever the route: a webhook (ours or an extension's) proves
        itself with its secret and reads its own body under ``body_timeout``; every other body
        (a dashboard login, a form) is read here, whole, under the same deadline and a cap
        (`LOGIN_MAX_BODY` for a login, ``max_body`` else), before its handler runs."""
        signed = request.path.startswith("/webhooks/") or request.path in self._routes
        if conn is not None:
            conn.proven = not (signed or request.body_exists)
        if signed or not request.body_exists:
            return request
        refused = request.match_info.http_exception
        if refused is not None:  # a 404 or a 405: answered at once, its body unread, and the connection closed
            answer = web.Response(status=refused.status, text=refused.text, headers=refused.headers)
            answer.force_close()
            return answer
        cfg = self.hub.config.http
        cap = LOGIN_MAX_BODY if request.path == "/ui/login" else cfg.max_body
        if request.content_length is not None and request.content_length > cap:
            return _unread(413, f"body is larger than {cap} bytes")
        capped = request.clone(client_max_size=cap)
        try:
            async with asyncio.timeout(cfg.body_timeout):
                await capped.read()  # kept: the handler's post() and read() answer from it
        except TimeoutError:
            return _unread(408, f"the body did not arrive within {cfg.body_timeout:g}s")
        except web.HTTPRequestEntityTooLarge:
            return _unread(413, f"body is larger than {cap} bytes")
        if conn is not None:
            conn.proven = True
        return capped

    async def _healthz(self, request: web.Request) -> web.Response:
        """``ok``, ``degraded`` or ``down``, to anyone (a load balancer's probe); the runs, the
        queue, where the database is (its URL, the server's version) and the named models not
        answering now (a circuit open, keys refused) only with the ``[http] token``, as
        ``/metrics`` and the run events need it."""
        hub = self.hub
        ok = hub.started
        databases, unreachable = await hub.store_health.databases() if ok else ([], None)
        store = "; ".join(p for p in (hub.store_health.problem() if ok else None, unreachable) if p) or None
        platforms = dict(hub.platform_problems)  # an extension that stopped (a revoked session)
        degraded = store or "; ".join(platforms.values()) or None
        status = 200 if ok and not degraded else 503
        body: dict[str, Any] = {"status": ("degraded" if degraded else "ok") if ok else "down"}
        assert hub.config.http is not None
        if not bearer_matches(request, hub.config.http.token):
            return web.json_response(body, status=status)
        body.update(runs_running=hub.runner.running, queue_depth=hub.runner.queued)
        if databases:  # usually one: the database every store shares
            body["database"] = databases[0] if len(databases) == 1 else databases
        if store:
            body["store"] = store
        if platforms:
            body["platforms"] = platforms
        if hub.episodes is not None and (note := hub.episodes.health()):
            body["note"] = note  # not whole, but no failure of the hub: the status stays
        models = hub.model_problems()
        if models:  # a fallback answers meanwhile: reported, not a reason to take the hub out of service
            body["models"] = models
        return web.json_response(body, status=status)

    async def _metrics(self, request: web.Request) -> web.Response:
        assert self.hub.config.http is not None
        token = self.hub.config.http.token
        if token and not bearer_matches(request, token):
            return _denied("/metrics needs Authorization: Bearer TOKEN (the [http] token)")
        body, content_type = self.hub.metrics.render(request.headers.get("Accept"))
        resp = web.Response(body=body)
        resp.headers["Content-Type"] = content_type
        resp.headers["Vary"] = "Accept"
        return resp

    async def _webhook(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        resp = await self._handle_webhook(name, request)
        if name in self.hub.config.webhooks:  # unknown names would be unbounded label values
            self.hub.metrics.webhook(name, resp.status)
        return resp

    async def _handle_webhook(self, name: str, request: web.Request) -> web.Response:
        known = self.hub.config.webhooks.get(name)
        body = await self._signed_body(known, request)
        if isinstance(body, web.Response):
            return body
        assert known is not None  # an unknown name is refused as a bad signature is
        key = request.headers.get("Idempotency-Key")
        if key is not None and not _IDEMPOTENCY_KEY.fullmatch(key):
            return _error(400, "Idempotency-Key must be 1 to 200 printable ASCII characters, no spaces")
        data = _json_body(body)
        if isinstance(data, web.Response):
            return data
        if not self.hub.started:
            return _error(503, "the hub is not taking input (starting or stopping)")
        try:
            sub = await self.hub.submit(
                known.context,
                data=data,
                type="webhook",
                platform_id=f"webhook:{name}:{key}" if key else None,
                meta={"webhook": name},
            )
        except RunError as e:
            return _error(503, str(e))
        if sub.duplicate:
            return web.json_response({"duplicate": True, "context": sub.context}, status=200)
        return await _answer(sub, known.wait_timeout, wait=request.query.get("wait", "").lower() in _TRUE)

    async def _signed_body(self, known: WebhookSection | None, request: web.Request) -> bytes | web.Response:
        """The body of a POST to a webhook whose credentials hold, or the refusal: a bearer token
        is checked from the headers before the body is read, a signature once it is. A webhook
        that is not configured is checked against a decoy and refused like a bad signature, so
        the answer does not tell which names exist."""
        creds = _Credentials(known or self._decoy, request)  # from the headers alone
        if creds.refused is not None:
            return _denied(creds.refused)
        conn = self._guard.of(request) if self._guard is not None else None
        if creds.bearer_ok:
            stale = creds.fresh()
            if stale is not None:
                return _denied(stale)
            if conn is not None:
                conn.proven = True
        body = await self._read(request)
        if isinstance(body, web.Response):
            return body
        denied = creds.verify(body)
        if denied is not None or known is None:
            return _denied(denied or "X-Hub-Signature-256 does not match the body")
        if conn is not None:
            conn.proven = True
        return body

    async def _route(self, route: Route, request: web.Request) -> web.Response:
        """An extension's route: its secret header (or its verifier's look at the headers)
        checked before the body is read, the body capped, a signature checked against it,
        then parsed as JSON (or a form), then the extension's handler (see [`hub.Route`][hub.Route])."""
        verify = route.verify
        if route.secret_header or route.secret or verify is None:
            given = request.headers.get(route.secret_header, "")
            if not (given.isascii() and hmac.compare_digest(given.encode(), route.secret.encode())):
                return _denied(f"{route.secret_header} is missing or does not match")
        if verify is not None and (refused := verify.headers(request.headers)) is not None:
            return _denied(refused)
        conn = self._guard.of(request) if self._guard is not None else None
        if conn is not None and verify is None:
            conn.proven = True
        body = await self._read(request)
        if isinstance(body, web.Response):
            return body
        if verify is not None:
            if (refused := verify.body(request.headers, body)) is not None:
                return _denied(refused)
            if conn is not None:
                conn.proven = True
        if route.forms and request.content_type == "application/x-www-form-urlencoded":
            data = _form_body(body)
        else:
            data = _json_body(body)
        if isinstance(data, web.Response):
            return data
        if not self.hub.started:
            return _error(503, "the hub is not taking input (starting or stopping)")
        answer = await route.handler(RouteRequest(request.path, request.headers, body, data))
        return _route_answer(answer)

    async def _route_get(self, route: Route, request: web.Request) -> web.Response:
        """A GET at an extension's route (its subscription check): the query to its ``get``
        handler, which authenticates it itself (the platform's verify token)."""
        assert route.get is not None
        query = {k: v for k, v in request.query.items()}
        return _route_answer(await route.get(RouteRequest(request.path, request.headers, b"", None, query)))

    async def _read(self, request: web.Request) -> bytes | web.Response:
        """The raw body; 413 when it is over the limit (checked before reading it all), 408
        when it does not arrive within ``body_timeout``."""
        cfg = self.hub.config.http
        assert cfg is not None
        limit = cfg.max_body
        too_large = _error(413, f"body is larger than {limit} bytes")
        if request.content_length is not None and request.content_length > limit:
            return too_large
        chunks, size = [], 0
        try:
            async with asyncio.timeout(cfg.body_timeout):
                async for chunk in request.content.iter_chunked(64 * 1024):
                    size += len(chunk)
                    if size > limit:
                        return too_large
                    chunks.append(chunk)
        except TimeoutError:
            return _unread(408, f"the body did not arrive within {cfg.body_timeout:g}s")
        return b"".join(chunks)
