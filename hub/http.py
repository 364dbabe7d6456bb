"""The hub's HTTP endpoint (aiohttp): ``/healthz``, ``/metrics`` and ``/webhooks/NAME``.

Off unless config.toml has an ``[http]`` table; bound to 127.0.0.1 unless ``host`` says
otherwise.

``POST /webhooks/NAME`` is authenticated with the webhook's shared secret, either as
``Authorization: Bearer SECRET`` or as ``X-Hub-Signature-256: sha256=HEX`` (the HMAC-SHA256 of
the raw body keyed by the secret); both are compared in constant time. The JSON body becomes
an input (type ``webhook``) to the webhook's context. It answers ``202 {"run_id": ...}``, or
with ``?wait=1`` ``200`` with the run's terminal state and outputs once it ends. An
``Idempotency-Key`` header makes a redelivery answer ``200 {"duplicate": true}`` instead of
running again. Nothing runs on a 4xx.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
from typing import TYPE_CHECKING, Any

from aiohttp import web

from .config import HubConfig, WebhookSection
from .errors import ConfigError, RunError
from .metrics import CONTENT_TYPE

if TYPE_CHECKING:
    from .engine import RunResult
    from .hub import Hub

__all__ = ["HttpServer", "http_component", "signature"]

log = logging.getLogger(__name__)

_TRUE = frozenset({"1", "true", "yes"})


def signature(secret: str, body: bytes) -> str:
    """The ``X-Hub-Signature-256`` value for ``body``: ``sha256=`` and the hex HMAC-SHA256."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def http_component(config: HubConfig) -> HttpServer | None:
    """The endpoint when ``[http]`` is configured; None (and a warning for webhooks) otherwise."""
    if config.http is None:
        if config.webhooks:
            log.warning("[webhooks] are configured but [http] is not: they are not served")
        return None
    return HttpServer()


def _error(status: int, message: str, **headers: str) -> web.Response:
    return web.json_response({"error": message}, status=status, headers=headers or None)


def _authorized(hook: WebhookSection, request: web.Request, body: bytes) -> str | None:
    """None when the request carries the secret (either way), else why not."""
    problems = []
    auth = request.headers.get("Authorization", "")
    if auth:
        scheme, _, token = auth.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            problems.append("Authorization must be 'Bearer SECRET'")
        elif hmac.compare_digest(token.strip().encode(), hook.secret.encode()):
            return None
        else:
            problems.append("bearer token does not match")
    sig = request.headers.get("X-Hub-Signature-256", "")
    if sig:
        if not sig.startswith("sha256="):
            problems.append("X-Hub-Signature-256 must be 'sha256=HEX'")
        elif hmac.compare_digest(sig.strip().lower().encode(), signature(hook.secret, body).encode()):
            return None
        else:
            problems.append("X-Hub-Signature-256 does not match the body")
    return "; ".join(problems) or "missing Authorization: Bearer SECRET or X-Hub-Signature-256 header"


def _run_body(result: RunResult) -> dict[str, Any]:
    return {
        "run_id": result.run_id,
        "context": result.context,
        "state": str(result.state),
        "reason": result.reason,
        "steps": result.steps,
        "outputs": [
            {"type": o.type, "content": o.content, "sent": o.sent, "error": o.error} for o in result.outputs
        ],
    }


class HttpServer:
    """A hub component serving the endpoint; ``port`` is the bound port once started."""

    def __init__(self) -> None:
        self._hub: Hub | None = None
        self._runner: web.AppRunner | None = None
        self.port: int | None = None

    async def start(self, hub: Hub) -> None:
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
        app = web.Application(client_max_size=cfg.max_body + 1)
        app.router.add_get("/healthz", self._healthz)
        if cfg.metrics:
            app.router.add_get("/metrics", self._metrics)
        app.router.add_post("/webhooks/{name}", self._webhook)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        try:
            site = web.TCPSite(runner, cfg.host, cfg.port)
            await site.start()
        except OSError as e:
            await runner.cleanup()
            raise ConfigError(f"cannot listen on {cfg.host}:{cfg.port}: {e.strerror or e}", key="http") from e
        self._runner = runner
        self.port = runner.addresses[0][1]
        log.info("http: listening on %s:%d", cfg.host, self.port)

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    # --- handlers -----------------------------------------------------------------------

    @property
    def hub(self) -> Hub:
        assert self._hub is not None
        return self._hub

    async def _healthz(self, request: web.Request) -> web.Response:
        from .storehealth import store_health

        hub = self.hub
        ok = hub.started
        degraded = store_health(hub) if ok else None
        body = {
            "status": ("degraded" if degraded else "ok") if ok else "unavailable",
            "runs_running": hub.runner.running,
            "queue_depth": hub.runner.queued,
        }
        if degraded:
            body["store"] = degraded
        return web.json_response(body, status=200 if ok and not degraded else 503)

    async def _metrics(self, request: web.Request) -> web.Response:
        resp = web.Response(body=self.hub.metrics.render())
        resp.headers["Content-Type"] = CONTENT_TYPE
        return resp

    async def _webhook(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        resp = await self._handle_webhook(name, request)
        if name in self.hub.config.webhooks:  # unknown names would be unbounded label values
            self.hub.metrics.webhook(name, resp.status)
        return resp

    async def _handle_webhook(self, name: str, request: web.Request) -> web.Response:
        hub = self.hub
        hook = hub.config.webhooks.get(name)
        if hook is None:
            return _error(404, f"no webhook named {name!r}")
        body = await self._read(request)
        if body is None:
            assert hub.config.http is not None
            return _error(413, f"body is larger than {hub.config.http.max_body} bytes")
        denied = _authorized(hook, request, body)
        if denied is not None:
            return _error(401, denied, **{"WWW-Authenticate": "Bearer"})
        if not body.strip():
            return _error(400, "empty body: send a JSON value")
        try:
            data = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            return _error(400, f"body is not valid JSON: {e}")
        if not hub.started:
            return _error(503, "the hub is not taking input (starting or stopping)")
        key = request.headers.get("Idempotency-Key")
        try:
            sub = await hub.submit(
                hook.context,
                data=data,
                type="webhook",
                platform_id=f"webhook:{name}:{key}" if key else None,
                meta={"webhook": name},
            )
        except RunError as e:
            return _error(503, str(e))
        if sub.duplicate:
            return web.json_response({"duplicate": True, "context": sub.context}, status=200)
        wait = request.query.get("wait", "").lower() in _TRUE
        try:
            if wait:
                result = await asyncio.wait_for(sub.wait(), hook.wait_timeout)
                return web.json_response(_run_body(result), status=200)
            await asyncio.wait(
                {sub.run_id, sub.result}, timeout=hook.wait_timeout, return_when=asyncio.FIRST_COMPLETED
            )
        except TimeoutError:
            run_id = sub.run_id.result() if sub.run_id.done() else None
            return web.json_response(
                {"error": f"the run did not end within {hook.wait_timeout:g}s", "run_id": run_id}, status=504
            )
        except asyncio.CancelledError:
            if sub.result.cancelled():
                return _error(503, "the run was cancelled: the hub is stopping")
            raise
        run_id = sub.run_id.result() if sub.run_id.done() else None
        return web.json_response({"run_id": run_id, "context": sub.context}, status=202)

    async def _read(self, request: web.Request) -> bytes | None:
        """The raw body, or None when it is over the limit (checked before reading it all)."""
        hub = self.hub
        assert hub.config.http is not None
        limit = hub.config.http.max_body
        if request.content_length is not None and request.content_length > limit:
            return None
        chunks, size = [], 0
        async for chunk in request.content.iter_chunked(64 * 1024):
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
        return b"".join(chunks)
