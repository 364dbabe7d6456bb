"""The operators' dashboard at ``/ui/`` on the hub's HTTP endpoint (on when ``[http] token`` is set).

Server-side pages (Jinja2, autoescaped, every string passed through the hub's redactor and
with server paths shortened on its way out) with htmx, vendored in
``hub/http/dashboard/static/``, for the parts that update live by polling (the runs list, a
running run's trace, the pairings, the health figures), and one small script of ours,
``static/chat.js``, for the chat panel's streamed reply. No Node step.

- **Runs** (``/ui/``): newest first, with who sent each (name, @handle) and what (previews of
  the message and the reply); filtered by state, context and platform, or searched (``q``);
  paged by keyset (``before=STARTED:ID``), 50 a page; the first page refreshes every second.
- **A run** (``/ui/runs/ID``): its trace as it happens, who and what at the top, and its child
  runs as a tree; a run in progress has a Stop button (the operator's stop, as ``hub stop``).
- **Conversations**: the recent ones (searchable) with their latest run's who and what; one
  conversation's persona, history (working memory), memory and episodes; *forget* deletes
  the episodes and the working memory, as ``hub memory forget``.
- **Chat**: the operator talks to the bot in ``web:chat:<session>`` (hub/http/dashboard/_chat.py).
- **Personas**: a new one, or the file edited in the browser, validated as the persona watcher
  validates, shown as a diff against the revision in force before it is saved (atomically,
  so the watcher records it); history and rollback, as ``hub persona``; the conversations
  that use each (hub/http/dashboard/_persona_use.py).
- **Tools**: the MCP servers (up or down, and why), their tools, and the skills.
- **Access**: pending pairing codes (who asked) to approve, paired users to revoke, as
  ``hub pairing``; the config's allow-lists beside them.
- **Health**: totals for today and the last hour, uptime, version, model, the failed runs;
  charts over a chosen window with axes and units (hub/http/dashboard/_charts.py) of the run
  store's runs, failures and tokens and of `MetricsHistory`'s
  samples; platforms and budgets used today.

Destructive changes (forget, revoke, rollback) take a confirmation step first; errors are
pages of the layout (404, 400, 500 with the details in the log only).

Log in by posting the token; sessions and CSRF are `hub.http.dashboard`'s. Every POST needs
the session's CSRF token (form field ``csrf`` or header ``X-CSRF-Token``) and, when the
browser sends one, an ``Origin`` of this host. The routes use the hub's public attributes
(``runs``, ``personas``, ``revisions``, ``access``, ``memory``, ``episodes``, ``metrics``).
"""

from __future__ import annotations

import difflib
import importlib.metadata
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from aiohttp import web
from markupsafe import Markup, escape
from yarl import URL

from ...errors import ConfigError, HubError
from ...features import BOT_SCOPE, PairingError, utc_day
from ...logs import (
    ActionCallLog,
    ActionResultLog,
    ErrorLog,
    InputLog,
    Log,
    OutputLog,
    StateLog,
    StepLog,
    SummaryLog,
    ThoughtLog,
    VoiceLog,
    from_dict,
)
from ...personas import parse_persona, rollback, write_persona
from ...redact import MASK
from ...store import ReviewRefused, Revision, RunRecord, RunState, collect_tree
from .._security import client_address, parse_networks
from ._charts import BUCKETS, WINDOWS, amount, chart
from ._chat import MAX_MESSAGE, ChatPanel
from ._health import SERIES, MetricsHistory, metric_total
from ._paths import PathScrubber
from ._persona_use import persona_of
from ._sessions import COOKIE, LoginThrottle, Session, Sessions, token_matches

__all__ = ["Dashboard", "PAGE_SIZE"]

log = logging.getLogger("hub.http.dashboard")

HERE = Path(__file__).parent
PAGE_SIZE = 50
DEFAULT_WINDOW = "1h"
USES_SCANNED = 200
"""The recent conversations looked at for the ones that use each persona."""
NEW_PERSONA = 'name = "NAME"\ninstructions = """\nYou are ... Answer briefly.\n"""\n# contexts = ["telegram:chat"]  # which conversations use it (types, TYPE:KEY ids, globs)\n'

_MAX_PARAM = 300
_STATES = tuple(str(s) for s in RunState)
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")
_PLATFORM = re.compile(r"[A-Za-z0-9_-]{1,100}")
_PUBLIC = ("/ui/login", "/ui/static/", "/ui/favicon.ico")
# where a request keeps its session (aiohttp 3.12+ wants typed keys; older ones take a string)
_SESSION: Any = web.RequestKey("session", Session) if hasattr(web, "RequestKey") else "hub.ui.session"


class BadRequest(HubError):
    """A dashboard request with a parameter that cannot be used; the message names it."""


@dataclass(frozen=True, slots=True)
class TraceItem:
    """One line of a trace as the page shows it."""

    kind: str
    at: float  # seconds since the run started
    title: str
    body: str = ""
    status: str = ""  # ok, error, pending, ...


def _pretty(value: Any, limit: int = 20_000) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=2, default=str)
    return text if len(text) <= limit else text[:limit] + f"\n... ({len(text) - limit} more characters)"


def trace_items(run: RunRecord, events: Sequence[Log]) -> list[TraceItem]:
    """The run's log as the trace page lists it: an output once, in its last state; in time order."""
    last_output = {e.id: i for i, e in enumerate(events) if isinstance(e, OutputLog)}
    shown = [e for i, e in enumerate(events) if not isinstance(e, OutputLog) or last_output[e.id] == i]
    items = []
    for e in sorted(shown, key=lambda e: e.ts):
        at = max(0.0, e.ts - run.started)
        match e:
            case InputLog():
                who = _sender(e)
                items.append(TraceItem("input", at, f"input {e.type}{who}", _pretty(e.formatted or e.content)))
            case ThoughtLog():
                items.append(TraceItem("thought", at, f"thought (step {e.step})", e.content))
            case ActionCallLog():
                items.append(TraceItem("action_call", at, f"call #{e.index} {e.name}", _pretty(e.args)))
            case ActionResultLog():
                status = "ok" if e.ok else ("denied" if e.denied else "error")
                body = _pretty(e.data) if e.ok else (e.error or "")
                items.append(
                    TraceItem("action_result", at, f"result of {e.name}, {e.duration * 1000:.0f} ms", body, status)
                )
            case OutputLog():
                status = "sent" if e.sent else ("error" if e.error else "pending")
                body = _pretty(e.formatted or e.content) + (f"\n\nnot sent: {e.error}" if e.error else "")
                items.append(TraceItem("output", at, f"output {e.type}", body, status))
            case StepLog():
                items.append(
                    TraceItem(
                        "step",
                        at,
                        f"step {e.step}: {e.duration * 1000:.0f} ms (first token {e.llm_latency * 1000:.0f} ms), "
                        f"tokens {e.prompt_tokens} prompt + {e.completion_tokens} completion"
                        + (f" ({e.cached_tokens} prompt cached)" if e.cached_tokens else "")
                        + (f", cost {e.cost:.6f}" if e.cost > 0 else "")
                        + (f", answered by {e.model}" if e.model else ""),
                    )
                )
            case ErrorLog():
                items.append(TraceItem("error", at, f"error in {e.where or 'the run'}", e.message, "error"))
            case StateLog():
                items.append(TraceItem("state", at, f"state {e.state}" + (f" ({e.reason})" if e.reason else "")))
            case SummaryLog():
                items.append(TraceItem("summary", at, f"summary of {e.entries} earlier history entries", e.content))
            case VoiceLog():
                head = f"voice {e.direction}: {e.seconds:.1f}s by {e.model}" + (
                    f", cost {e.cost:.6f}" if e.cost else ""
                )
                items.append(TraceItem("voice", at, head, e.text))
    return items


def _sender(e: InputLog) -> str:
    """`` from Ada Lovelace @ada_l (1001)``: who sent an input, as its meta names them."""
    meta = e.meta if isinstance(e.meta, dict) else {}
    name, handle = meta.get("user_name"), meta.get("user_handle")
    names = " ".join(
        str(x) for x in (name if isinstance(name, str) and name else None, f"@{handle}" if handle else None) if x
    )
    if names and e.user:
        return f" from {names} ({e.user})"
    return f" from {names or e.user}" if names or e.user else ""


def _diff(old: str, new: str, old_name: str, new_name: str) -> list[str]:
    return list(difflib.unified_diff(old.splitlines(), new.splitlines(), old_name, new_name, n=2, lineterm=""))


def _breakable(value: Any) -> Markup:
    """An id (``telegram:chat:1001``) that a narrow screen wraps after a ``:``, never mid-word."""
    return Markup(str(escape(str(value))).replace(":", ":<wbr>"))


def _when(ts: float | None) -> str:
    return "" if ts is None else time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts))


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


class Dashboard:
    """The ``/ui/`` application of one hub, its sessions and its metrics history."""

    def __init__(
        self, hub: Any, *, sessions: Sessions | None = None, sample_interval: float = 5.0, page_size: int = PAGE_SIZE
    ) -> None:
        self.hub = hub
        self.sessions = sessions if sessions is not None else Sessions()
        self.throttle = LoginThrottle()
        # whose X-Forwarded-For names the client (the login throttle counts by client)
        self.trusted_proxies = parse_networks(hub.config.http.trusted_proxies)
        self.page_size = page_size
        self.history = MetricsHistory(
            hub.metrics.registry,
            lambda: (hub.runner.running, hub.runner.queued),
            interval=sample_interval,
            size=int(max(WINDOWS.values()) / sample_interval) + 1,  # the widest window's samples
        )
        self.started_at = time.time()
        cfg = hub.config
        folders = [cfg.contexts_dir, cfg.data_dir, Path(hub.personas.folder)]
        if cfg.agent.skills_dir:
            folders.append(cfg.resolve(cfg.agent.skills_dir))
        self.scrub_paths = PathScrubber(folders, base=cfg.base_dir)
        # jinja2 is imported with the dashboard, not at start (memory)
        from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

        self.env = Environment(
            loader=FileSystemLoader(HERE / "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
            undefined=StrictUndefined,
            finalize=self._finalize,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.chat = ChatPanel(hub, self._clean)
        self.env.filters.update(
            ids=_breakable, when=_when, duration=_duration, pretty=_pretty, q=lambda v: urlencode({"context": v})
        )
        self.env.globals.update(urlencode=urlencode)

    def _finalize(self, value: Any) -> Any:
        """Every value a template prints passes here: a secret the hub knows is masked, and a
        path on the server is shown by its folder's name (hub/http/dashboard/_paths.py)."""
        if isinstance(value, Markup):
            return Markup(self._clean(str(value)))
        if isinstance(value, str):
            return self._clean(value)
        return value

    def _clean(self, text: str) -> str:
        redactor = self.hub.redactor
        return self.scrub_paths(redactor.redact(text) if redactor else text)

    # --- the application ----------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._guard], client_max_size=2_000_000)
        r = app.router
        r.add_get("/", self.runs_page)
        r.add_get("/login", self.login_page)
        r.add_post("/login", self.login)
        r.add_post("/logout", self.logout)
        r.add_get("/runs/rows", self.runs_rows)
        r.add_get("/runs/{id}", self.run_page)
        r.add_get("/runs/{id}/trace", self.run_trace)
        r.add_post("/runs/{id}/stop", self.run_stop)
        r.add_post("/approvals/{id}", self.approval_answer)
        r.add_get("/chat", self.chat_page)
        r.add_post("/chat", self.chat_send)
        r.add_get("/chat/events", self.chat_events)
        r.add_get("/conversations", self.conversations_page)
        r.add_get("/conversation", self.conversation_page)
        r.add_post("/conversation/forget", self.forget)
        r.add_get("/personas", self.personas_page)
        r.add_get("/personas/new", self.persona_new_page)
        r.add_post("/personas/new", self.persona_create)
        r.add_get("/personas/{name}", self.persona_page)
        r.add_post("/personas/{name}/preview", self.persona_preview)
        r.add_post("/personas/{name}/save", self.persona_save)
        r.add_post("/personas/{name}/rollback", self.persona_rollback)
        r.add_get("/access", self.access_page)
        r.add_get("/access/rows", self.access_rows)
        r.add_post("/access/approve", self.approve)
        r.add_post("/access/revoke", self.revoke)
        r.add_get("/reviews", self.reviews_page)
        r.add_post("/reviews/{id}/approve", self.review_approve)
        r.add_post("/reviews/{id}/reject", self.review_reject)
        r.add_get("/tools", self.tools_page)
        r.add_get("/health", self.health_page)
        r.add_get("/health/charts", self.health_charts)
        r.add_get("/favicon.ico", self.favicon)
        r.add_static("/static/", HERE / "static", name="static")
        r.add_route("*", "/{tail:.*}", self.not_found)  # last: any other path is a page of ours saying so
        return app

    async def start(self) -> None:
        self.started_at = time.time()
        for name in self.env.list_templates():  # compiled now, so no operator's first page waits on it
            self.env.get_template(name)
        await self.history.start()

    async def stop(self) -> None:
        self.chat.close()
        await self.history.stop()

    # --- sessions, CSRF and headers -----------------------------------------------------

    @web.middleware
    async def _guard(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        public = request.path.startswith(_PUBLIC)
        if request.method == "POST":
            refused = self._cross_origin(request)
            if refused is not None:
                return self._refuse(403, refused)
        if not public:
            session = self.sessions.get(request.cookies.get(COOKIE))
            if session is None:
                if request.headers.get("HX-Request"):  # htmx follows this header, not a 3xx
                    return web.Response(status=401, headers={"HX-Redirect": "/ui/login"})
                raise web.HTTPSeeOther("/ui/login")
            request[_SESSION] = session
            if request.method == "POST":
                form = await request.post()
                given = request.headers.get("X-CSRF-Token") or form.get("csrf")
                if not session.csrf_matches(given if isinstance(given, str) else None):
                    return self._refuse(403, "the CSRF token is missing or wrong: reload the page and try again")
        try:
            return await handler(request)  # the security headers are the endpoint's (hub/http/_security.py)
        except BadRequest as e:
            return self._refuse(400, str(e), request)
        except web.HTTPException as e:
            if e.status < 400 or e.status == 401 or public and request.path.startswith("/ui/static/"):
                raise  # redirects; a static file's 404 needs no page around it
            return self._refuse(e.status, e.text or e.reason, request)
        except ConnectionError:  # the client went away: nobody to show a page to
            raise
        except Exception:  # an operator gets a page in the layout; the details go to the log only
            log.exception("dashboard: %s %s failed", request.method, request.path)
            return self._refuse(
                500, "Something went wrong on the hub's side while making this page: the hub's log says what.", request
            )

    @staticmethod
    def _cross_origin(request: web.Request) -> str | None:
        """Why a POST is refused as coming from another site (None when it is not)."""
        origin = request.headers.get("Origin")
        if origin is None:
            return None  # not sent by this client; the CSRF token decides
        try:
            url = URL(origin)
            same = url.host is not None and f"{url.host}:{url.port}" == _host_port(request)
        except ValueError:
            same = False
        return None if same else f"Origin {origin[:100]!r} is not this dashboard's: the change is refused"

    @staticmethod
    def _done(request: web.Request, location: str, msg: str) -> web.HTTPSeeOther:
        """Back to ``location`` (POST, redirect, GET), which shows ``msg`` once: it is kept in
        the session, not in the URL, so no link can make the dashboard say something."""
        request[_SESSION].flash = msg[:1000]
        return web.HTTPSeeOther(location)

    def _refuse(self, status: int, message: str, request: web.Request | None = None) -> web.Response:
        """An error as a page in the layout (with the navigation when logged in)."""
        session: Session | None = request.get(_SESSION) if request is not None else None
        text = self.env.get_template("error.html").render(
            message=message, status=status, csrf=session.csrf if session else "", nav="", msg=""
        )
        return web.Response(text=text, status=status, content_type="text/html")

    async def not_found(self, request: web.Request) -> web.Response:
        raise web.HTTPNotFound(text=f"There is no page {request.path[:200]!r} in the dashboard.")

    async def favicon(self, request: web.Request) -> web.StreamResponse:
        return web.FileResponse(HERE / "static" / "favicon.svg", headers={"Content-Type": "image/svg+xml"})

    def _confirm(
        self, request: web.Request, form: Mapping[str, Any], *, title: str, what: str, button: str, back: str
    ) -> web.Response | None:
        """The confirmation step of a destructive action: None once the form says ``confirm=yes``;
        before, a page that says what will go and posts the same fields again with it."""
        if form.get("confirm") == "yes":
            return None
        fields = [(k, str(v)) for k, v in form.items() if k not in ("csrf", "confirm") and isinstance(v, str)]
        return self._page(
            request,
            "confirm.html",
            title=title,
            what=what,
            button=button,
            action=request.path,
            fields=fields,
            back=back,
        )

    def _page(self, request: web.Request, template: str, *, status: int = 200, **context: Any) -> web.Response:
        session: Session | None = request.get(_SESSION)
        context.setdefault("nav", "")
        if "msg" not in context:  # a whole page shows the flash once; a polled fragment leaves it
            context["msg"] = session.take_flash() if session is not None and not template.startswith("_") else ""
        text = self.env.get_template(template).render(csrf=session.csrf if session else "", **context)
        return web.Response(text=text, status=status, content_type="text/html")

    # --- login --------------------------------------------------------------------------

    async def login_page(self, request: web.Request) -> web.Response:
        return self._page(request, "login.html", error="")

    async def login(self, request: web.Request) -> web.StreamResponse:
        address = client_address(request, self.trusted_proxies)
        wait = self.throttle.wait(address)
        if wait:
            return self._page(
                request,
                "login.html",
                status=429,
                error=f"Too many wrong tokens from {address}: try again in {wait:.0f} s.",
            )
        form = await request.post()
        given = form.get("token")
        token = self.hub.config.http.token
        if not isinstance(given, str) or not token_matches(given.strip(), token):
            surging = self.throttle.surge()
            self.throttle.failed(address)
            log.warning("dashboard: a login with a wrong token from %s", address)
            if self.throttle.surge() and not surging:  # once as it starts, not for each guess
                log.warning(
                    "dashboard: %d wrong tokens within %g s from all addresses: someone is guessing "
                    "(each address is held back after %d; the right token still logs in)",
                    self.throttle.global_limit,
                    self.throttle.window,
                    self.throttle.limit,
                )
            return self._page(request, "login.html", status=401, error="That is not the hub's [http] token.")
        self.throttle.succeeded(address)
        session = self.sessions.create()
        resp = web.HTTPSeeOther("/ui/")
        resp.set_cookie(
            COOKIE,
            session.id,
            path="/ui",
            httponly=True,
            samesite="Strict",
            secure=_is_https(request),
            max_age=int(self.sessions.lifetime),
        )
        raise resp

    async def logout(self, request: web.Request) -> web.StreamResponse:
        self.sessions.drop(request.cookies.get(COOKIE))
        resp = web.HTTPSeeOther("/ui/login")
        resp.del_cookie(COOKIE, path="/ui")
        raise resp

    # --- runs ---------------------------------------------------------------------------

    def _platforms(self) -> list[str]:
        return sorted({t.split(":", 1)[0] for t in self.hub.contexts})

    def _filters(self, request: web.Request) -> dict[str, str]:
        q = request.query
        f = {name: q.get(name, "").strip() for name in ("state", "context", "platform", "before", "q")}
        for name, value in f.items():
            if len(value) > _MAX_PARAM:
                raise BadRequest(f"{name} is longer than {_MAX_PARAM} characters")
        if f["state"] and f["state"] not in _STATES:
            raise BadRequest(f"state must be one of {', '.join(_STATES)}, not {f['state']!r}")
        if f["platform"] and not _PLATFORM.fullmatch(f["platform"]):
            raise BadRequest(f"platform must be a platform's name (letters, digits, _ and -), not {f['platform']!r}")
        return f

    @staticmethod
    def _cursor(value: str) -> tuple[float, str] | None:
        if not value:
            return None
        started, _, run_id = value.partition(":")
        try:
            return float(started), run_id
        except ValueError:
            raise BadRequest(f"before must be STARTED:ID as the 'older' link gives it, not {value!r}") from None

    async def _rows(self, f: Mapping[str, str]) -> dict[str, Any]:
        where: dict[str, Any] = {
            "limit": self.page_size + 1,
            "before": self._cursor(f["before"]),
            "state": f["state"] or None,
            "context": f["context"] or None,
            "platform": f["platform"] or None,
        }
        runs = await (self.hub.runs.search(f["q"], **where) if f["q"] else self.hub.runs.page(**where))
        more = len(runs) > self.page_size
        runs = runs[: self.page_size]
        query = {k: v for k, v in f.items() if v and k != "before"}
        older = None
        if more:
            older = urlencode({**query, "before": f"{runs[-1].started!r}:{runs[-1].id}"})
        return {
            "runs": runs,
            "q": f["q"],
            "older": older,
            "live": not f["before"],
            "rows_url": "/ui/runs/rows?" + urlencode({**query, **({"before": f["before"]} if f["before"] else {})}),
        }

    async def runs_page(self, request: web.Request) -> web.Response:
        f = self._filters(request)
        return self._page(
            request, "runs.html", nav="runs", f=f, states=_STATES, platforms=self._platforms(), **await self._rows(f)
        )

    async def runs_rows(self, request: web.Request) -> web.Response:
        return self._page(request, "_rows.html", **await self._rows(self._filters(request)))

    async def _run(self, request: web.Request) -> RunRecord:
        run_id = request.match_info["id"]
        if len(run_id) > _MAX_PARAM:
            raise BadRequest(f"run id is longer than {_MAX_PARAM} characters")
        runs = self.hub.runs
        record = await runs.get(run_id) or await runs.find(run_id)
        if record is None:
            raise web.HTTPNotFound(text=f"No run has the id {run_id!r} (or an id that begins so, and only one).")
        return record

    async def _trace(self, record: RunRecord) -> dict[str, Any]:
        events = await self.hub.runs.events(record.id)
        tree = await collect_tree(self.hub.runs, record.id, max_runs=200)
        # a run waiting for a person's yes shows the question, with the operator's buttons
        approval = None
        if record.ended is None:
            approval = next((a for a in await self.hub.approvals.waiting() if a.run_id == record.id), None)
        return {
            "run": record,
            "items": trace_items(record, events),
            "tree": tree,
            "live": record.ended is None,
            "approval": approval,
            "approval_args": json.dumps(approval.args, ensure_ascii=False) if approval is not None else "",
        }

    async def run_page(self, request: web.Request) -> web.Response:
        record = await self._run(request)
        return self._page(request, "trace.html", nav="runs", **await self._trace(record))

    async def run_trace(self, request: web.Request) -> web.Response:
        record = await self._run(request)
        return self._page(request, "_trace.html", **await self._trace(record))

    async def run_stop(self, request: web.Request) -> web.StreamResponse:
        """The operator's stop: the run ends ``killed`` (``stopped by operator``) wherever it runs."""
        record = await self._run(request)
        try:
            stopped = await self.hub.stop_run(record.id)
        except HubError as e:
            raise self._done(request, f"/ui/runs/{record.id}", f"not stopped: {e}") from None
        log.info("dashboard: stopped run %s", record.id)
        how = f"{stopped.state}" + (f" ({stopped.reason})" if stopped.reason else "")
        msg = f"stop requested: run {record.id[:10]} is still running" if stopped.ended is None else f"stopped: {how}"
        raise self._done(request, f"/ui/runs/{record.id}", msg)

    async def approval_answer(self, request: web.Request) -> web.StreamResponse:
        """The operator's answer to a run waiting before an action (as ``hub approvals``)."""
        approval_id = request.match_info["id"]
        if len(approval_id) > _MAX_PARAM:
            raise BadRequest(f"approval id is longer than {_MAX_PARAM} characters")
        form = await request.post()
        approve = form.get("approve") == "1"
        found = await self.hub.approvals.store.get(approval_id)
        back = f"/ui/runs/{found.run_id}" if found is not None else "/ui/"
        try:
            answer = await self.hub.approvals.answer_as_operator(approval_id, approve=approve)
        except HubError as e:
            raise self._done(request, back, f"not answered: {e}") from None
        log.info("dashboard: approval %s: %s", approval_id, answer.message)
        raise self._done(request, back, answer.message if answer.accepted else f"not answered: {answer.message}")

    # --- the chat panel (hub/http/dashboard/_chat.py) -------------------------------------

    def _chat_on(self) -> None:
        if not self.chat.available:
            raise web.HTTPNotFound(text="The chat panel's conversation (web:chat) is not registered in this hub.")

    async def chat_page(self, request: web.Request) -> web.Response:
        self._chat_on()
        chat_id = request[_SESSION].chat
        return self._page(
            request,
            "chat.html",
            nav="chat",
            context=self.chat.context_of(chat_id),
            lines=await self.chat.transcript(chat_id),
            text="",
            problem="",
        )

    async def chat_send(self, request: web.Request) -> web.StreamResponse:
        """A message to the bot; a script's post (``Accept: application/json``) gets 202 at once,
        a form's a redirect to the page."""
        self._chat_on()
        form = await request.post()
        text = form.get("text")
        text = text.strip() if isinstance(text, str) else ""
        problem = ""
        if not text:
            problem = "the message is empty: write something to send"
        elif len(text) > MAX_MESSAGE:
            problem = f"the message is {len(text)} characters long; the chat panel takes at most {MAX_MESSAGE}"
        if problem:
            if request.headers.get("Accept") == "application/json":
                return web.json_response({"error": problem}, status=400)
            chat_id = request[_SESSION].chat
            return self._page(
                request,
                "chat.html",
                nav="chat",
                status=400,
                context=self.chat.context_of(chat_id),
                lines=await self.chat.transcript(chat_id),
                text=text,
                problem=problem,
            )
        try:
            await self.chat.send(request[_SESSION].chat, text)
        except HubError as e:
            if request.headers.get("Accept") == "application/json":
                return web.json_response({"error": f"not sent: {self._clean(str(e))}"}, status=503)
            raise self._done(request, "/ui/chat", f"not sent: {e}") from None
        if request.headers.get("Accept") == "application/json":
            return web.json_response({"sent": True}, status=202)
        raise web.HTTPSeeOther("/ui/chat")

    async def chat_events(self, request: web.Request) -> web.StreamResponse:
        self._chat_on()
        return await self.chat.events(request, request[_SESSION].chat)

    # --- conversations ------------------------------------------------------------------

    @staticmethod
    def _context(value: Any) -> str:
        context = value.strip() if isinstance(value, str) else ""
        if len(context) > _MAX_PARAM or ":" not in context:
            raise BadRequest(f"a conversation is TYPE:KEY of at most {_MAX_PARAM} characters, not {context[:80]!r}")
        return context

    async def conversations_page(self, request: web.Request) -> web.Response:
        platform = request.query.get("platform", "").strip()
        if platform and not _PLATFORM.fullmatch(platform):
            raise BadRequest(f"platform must be a platform's name, not {platform[:80]!r}")
        text = request.query.get("q", "").strip()
        if len(text) > _MAX_PARAM:
            raise BadRequest(f"q is longer than {_MAX_PARAM} characters")
        rows = await self.hub.runs.conversations(limit=100, platform=platform or None, text=text or None)
        return self._page(
            request,
            "conversations.html",
            nav="conversations",
            rows=rows,
            platform=platform,
            q=text,
            platforms=self._platforms(),
        )

    async def conversation_page(self, request: web.Request) -> web.Response:
        context = self._context(request.query.get("context"))
        memory = self.hub.memory
        raw = await memory.get(f"working-memory:{context}") or []
        history = [from_dict(d) for d in raw if isinstance(d, dict)]
        items = [
            TraceItem(i.kind, i.at, i.title, i.body, i.status)
            for i in trace_items(RunRecord(context=context, started=0.0), history)
        ]
        episodes = []
        if self.hub.episodes is not None:
            try:
                episodes = (await self.hub.episodes.episodes(context=context))[-20:]
            except HubError as e:
                log.warning("dashboard: episodes of %s unavailable: %s", context, e)
        runs = await self.hub.runs.page(limit=10, context=context)
        return self._page(
            request,
            "conversation.html",
            nav="conversations",
            context=context,
            persona=persona_of(self.hub, context),
            route=(route := self.hub.route_for(context)),
            route_number=self.hub.config.routes.index(route) + 1 if route is not None else None,
            items=items,
            memory=await memory.get(f"memory:{context}"),
            info=await memory.get(f"context:{context}"),
            episodes=episodes,
            runs=runs,
        )

    async def forget(self, request: web.Request) -> web.StreamResponse:
        """As ``hub memory forget --context``: its episodes and its working memory go."""
        form = await request.post()
        context = self._context(form.get("context"))
        back = "/ui/conversation?" + urlencode({"context": context})
        asked = self._confirm(
            request,
            form,
            title=f"Forget {context}?",
            what="Its episodes and its working memory are deleted, as hub memory forget --context does. "
            "The runs and their traces stay. This cannot be undone.",
            button="Yes, forget it",
            back=back,
        )
        if asked is not None:
            return asked
        deleted = 0
        if self.hub.episodes is not None:
            deleted = await self.hub.episodes.forget(context=context)
        key = f"working-memory:{context}"
        had = await self.hub.memory.get(key) is not None
        if had:
            await self.hub.memory.delete(key)
        log.info("dashboard: forgot %s: %d episodes%s", context, deleted, f", {key}" if had else "")
        msg = f"forgot {context}: {deleted} episode{'s' if deleted != 1 else ''}" + (f", {key}" if had else "")
        raise self._done(request, back, msg)

    # --- personas -----------------------------------------------------------------------

    async def personas_page(self, request: web.Request) -> web.Response:
        personas = self.hub.personas
        stored = {n for n in await self.hub.revisions.names() if not n.startswith("skill:")}  # skills' are on /ui/tools
        names = sorted(set(personas.names()) | stored | set(personas.errors()))
        uses = await self._persona_uses()
        return self._page(
            request,
            "personas.html",
            nav="personas",
            names=names,
            errors=personas.errors(),
            default=personas.default,
            uses={name: len(contexts) for name, contexts in uses.items()},
        )

    async def _persona_uses(self) -> dict[str, list[RunRecord]]:
        """The recent conversations (their latest run) by the persona each uses now."""
        uses: dict[str, list[RunRecord]] = {}
        for latest, _ in await self.hub.runs.conversations(limit=USES_SCANNED):
            name = persona_of(self.hub, latest.context)
            if name is not None:
                uses.setdefault(name, []).append(latest)
        return uses

    async def persona_new_page(self, request: web.Request) -> web.Response:
        return self._page(request, "persona_new.html", nav="personas", name="", text=NEW_PERSONA, problem="")

    async def persona_create(self, request: web.Request) -> web.StreamResponse:
        """A new persona file, validated as an edit is; the form comes back as typed when it is refused."""
        form = await request.post()
        name = str(form.get("name", "")).strip()[:_MAX_PARAM]
        text = str(form.get("text", "")).replace("\r\n", "\n")
        problem = ""
        if not _NAME.fullmatch(name) or name.startswith("."):
            problem = "a persona's name is its file's name: letters, digits, _ . - (at most 100), not starting with ."
        elif (
            self._on_disk(name) is not None
            or name in self.hub.personas.names()
            or await self.hub.revisions.history(name)
        ):
            problem = f"there is a persona {name!r} already: open it from the list to edit it"
        else:
            problem = self._check_edit(name, text)
        if problem:
            return self._page(
                request, "persona_new.html", nav="personas", name=name, text=text, problem=problem, status=400
            )
        write_persona(self.hub.personas.folder, name, text)
        self.hub.revisions.record(name, text, note="created in the dashboard")
        self.hub.personas.refresh(force=True)
        await self.hub.revisions.flush()
        log.info("dashboard: persona %s created", name)
        raise self._done(request, f"/ui/personas/{name}", f"created persona {name}: rev 1 is in force")

    def _persona_name(self, request: web.Request) -> str:
        name = request.match_info["name"]
        if not _NAME.fullmatch(name) or name.startswith("."):
            raise BadRequest(
                f"a persona's name is its file's name without .toml (letters, digits, _ . -), not {name[:80]!r}"
            )
        return name

    def _path(self, name: str) -> Path:
        return Path(self.hub.personas.folder) / f"{name}.toml"

    def _on_disk(self, name: str) -> str | None:
        try:
            return self._path(name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None

    async def _persona(self, name: str) -> dict[str, Any]:
        self.hub.personas.refresh(force=True)  # an edit on disk shows up at once
        revisions: list[Revision] = await self.hub.revisions.history(name)
        on_disk = self._on_disk(name)
        if on_disk is None and not revisions:
            raise web.HTTPNotFound(text=f"There is no persona {name!r}: no file {name}.toml, no revision recorded.")
        in_force = revisions[-1] if revisions else None
        history = []
        prev: Revision | None = None
        for r in revisions:
            diff = _diff(prev.text, r.text, f"rev {prev.rev}", f"rev {r.rev}") if prev is not None else []
            history.append({"rev": r, "diff": diff, "in_force": r is in_force})
            prev = r
        history.reverse()
        return {
            "name": name,
            "uses": await self._uses_of(name),
            "in_force": in_force,
            "on_disk": on_disk,
            "history": history,
            "error": self.hub.personas.errors().get(name, ""),
            "differs": on_disk is not None and in_force is not None and on_disk != in_force.text,
        }

    async def persona_page(self, request: web.Request) -> web.Response:
        name = self._persona_name(request)
        p = await self._persona(name)
        text = p["on_disk"] if p["on_disk"] is not None else p["in_force"].text
        return self._page(request, "persona.html", nav="personas", text=text, preview=None, problem="", **p)

    async def _uses_of(self, name: str) -> list[RunRecord]:
        return (await self._persona_uses()).get(name, [])

    def _check_edit(self, name: str, text: str) -> str:
        """Why ``text`` cannot be saved as persona ``name`` ("" when it can)."""
        if MASK in text and self.hub.redactor:
            on_disk = self._on_disk(name) or ""
            if self.hub.redactor.redact(on_disk) != on_disk:
                return (
                    f"this persona holds a secret, shown as {MASK} here: saving would write {MASK} in its "
                    "place. Edit the file on disk instead."
                )
        try:
            parse_persona(text, self._path(name))
        except ConfigError as e:
            return f"the edit does not validate, nothing was saved: {e}"
        return ""

    async def _edit(self, request: web.Request) -> tuple[str, str, int | None]:
        form = await request.post()
        text = form.get("text")
        if not isinstance(text, str):
            raise BadRequest("the form has no text field: send the persona's TOML as 'text'")
        text = text.replace("\r\n", "\n")
        base = form.get("base", "")
        try:
            base_rev = int(base) if isinstance(base, str) and base else None
        except ValueError:
            raise BadRequest(f"base must be a revision number, not {str(base)[:20]!r}") from None
        return self._persona_name(request), text, base_rev

    async def persona_preview(self, request: web.Request) -> web.Response:
        name, text, _ = await self._edit(request)
        p = await self._persona(name)
        problem = self._check_edit(name, text)
        base = p["in_force"].text if p["in_force"] else ""
        base_name = f"rev {p['in_force'].rev} (in force)" if p["in_force"] else "nothing"
        preview = _diff(base, text, base_name, "your edit")
        return self._page(
            request,
            "persona.html",
            nav="personas",
            text=text,
            preview=preview,
            problem=problem,
            status=400 if problem else 200,
            **p,
        )

    async def persona_save(self, request: web.Request) -> web.StreamResponse:
        name, text, base_rev = await self._edit(request)
        p = await self._persona(name)
        in_force = p["in_force"]
        problem = self._check_edit(name, text)
        if not problem and in_force is not None and base_rev is not None and base_rev != in_force.rev:
            problem = (
                f"the persona changed since you opened it (rev {in_force.rev} is in force now, you edited "
                f"rev {base_rev}): review the diff against it and save again"
            )
        if problem:  # the page comes back with the text as typed: nothing is lost
            preview = _diff(in_force.text if in_force else "", text, "in force", "your edit")
            return self._page(
                request, "persona.html", nav="personas", text=text, preview=preview, problem=problem, status=400, **p
            )
        if in_force is not None and text == in_force.text:
            raise self._done(request, f"/ui/personas/{name}", "no change: nothing saved")
        write_persona(self.hub.personas.folder, name, text)
        self.hub.revisions.record(name, text, note="edited in the dashboard")
        self.hub.personas.refresh(force=True)  # in force from the next message, not the next scan
        await self.hub.revisions.flush()
        rev = (await self.hub.revisions.history(name))[-1].rev
        log.info("dashboard: persona %s saved as rev %d", name, rev)
        raise self._done(request, f"/ui/personas/{name}", f"saved: rev {rev} is in force")

    async def persona_rollback(self, request: web.Request) -> web.StreamResponse:
        name = self._persona_name(request)
        form = await request.post()
        try:
            rev = int(str(form.get("rev", "")))
        except ValueError:
            raise BadRequest("rev must be a revision number") from None
        asked = self._confirm(
            request,
            form,
            title=f"Roll persona {name} back to rev {rev}?",
            what=f"The file {name}.toml is rewritten with rev {rev}'s text, which is in force from the next "
            "message. The revisions after it stay in the history: you can roll forward again.",
            button=f"Yes, roll back to rev {rev}",
            back=f"/ui/personas/{name}",
        )
        if asked is not None:
            return asked
        try:
            await rollback(self.hub.revisions, self.hub.personas.folder, name, rev)
        except HubError as e:  # ConfigError too: the revision no longer validates
            raise self._done(request, f"/ui/personas/{name}", f"not rolled back: {e}") from None
        self.hub.personas.refresh(force=True)
        log.info("dashboard: persona %s rolled back to rev %d", name, rev)
        raise self._done(request, f"/ui/personas/{name}", f"rolled back to rev {rev}")

    # --- access -------------------------------------------------------------------------

    async def _pairings(self) -> list[tuple[Any, str]]:
        now = time.time()
        return [(p, "expired" if p.expired(now) else p.state) for p in await self.hub.access.list()]

    def _allow_lists(self) -> list[dict[str, Any]]:
        """Each enabled platform's dm_policy and its lists of the config (allowed_users,
        allowed_chats, ignored_users, ...), as ``[extensions.NAME]`` sets them."""
        out = []
        for name, table in sorted(self.hub.config.enabled_extensions().items()):
            lists = {
                key: [str(v) for v in value]
                for key, value in sorted(table.items())
                if key.startswith(("allowed_", "ignored_")) and isinstance(value, list)
            }
            policy = table.get("dm_policy")
            if lists or policy is not None:
                out.append({"platform": name, "dm_policy": str(policy or "open"), "lists": lists})
        return out

    async def access_page(self, request: web.Request) -> web.Response:
        return self._page(
            request, "access.html", nav="access", rows=await self._pairings(), allow_lists=self._allow_lists()
        )

    async def access_rows(self, request: web.Request) -> web.Response:
        """The pairings' rows, polled by the page: a new code shows up without a reload."""
        return self._page(request, "_pairings.html", rows=await self._pairings())

    async def approve(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        code = str(form.get("code", ""))[:_MAX_PARAM]
        try:
            p = await self.hub.access.approve(code)
        except PairingError as e:
            msg = f"not approved: {e}"
        else:
            msg = f"approved: {p.platform} user {p.user}"
            log.info("dashboard: %s", msg)
        raise self._done(request, "/ui/access", msg)

    async def revoke(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        user = str(form.get("user", ""))[:_MAX_PARAM]
        platform = str(form.get("platform", ""))[:_MAX_PARAM] or None
        if not user:
            raise BadRequest("revoke needs the user id (field 'user')")
        asked = self._confirm(
            request,
            form,
            title=f"Revoke user {user}" + (f" on {platform}?" if platform else "?"),
            what="Their pairing is deleted: the bot no longer answers them in direct messages until they pair "
            "again with a new code. A user of the config's allow-list keeps access.",
            button="Yes, revoke",
            back="/ui/access",
        )
        if asked is not None:
            return asked
        n = await self.hub.access.revoke(user, platform=platform)
        msg = f"revoked {n} pairing{'s' if n != 1 else ''} of user {user}" if n else f"no pairing of user {user}"
        raise self._done(request, "/ui/access", msg)

    # --- reviews (posts held on public timelines) ----------------------------------------

    async def reviews_page(self, request: web.Request) -> web.Response:
        everything = await self.hub.stores.reviews.list()
        waiting = [r for r in everything if r.shown_state == "pending"]
        done = [r for r in reversed(everything) if r.shown_state != "pending"][:50]
        return self._page(request, "reviews.html", nav="reviews", waiting=waiting, done=done)

    async def _decide(self, request: web.Request, *, approve: bool) -> web.StreamResponse:
        form = await request.post()
        review_id = request.match_info["id"][:_MAX_PARAM]
        text = str(form["text"]) if approve and "text" in form else None
        try:
            r = await self.hub.stores.reviews.decide(review_id, approve=approve, text=text)
        except ReviewRefused as e:
            msg = f"not {'approved' if approve else 'rejected'}: {e}"
        else:
            msg = f"{r.state}: {r.platform} post {r.id}" + (" (posted within seconds)" if approve else "")
            log.info("dashboard: %s", msg)
        raise self._done(request, "/ui/reviews", msg)

    async def review_approve(self, request: web.Request) -> web.StreamResponse:
        return await self._decide(request, approve=True)

    async def review_reject(self, request: web.Request) -> web.StreamResponse:
        return await self._decide(request, approve=False)

    # --- health -------------------------------------------------------------------------

    def _window(self, request: web.Request) -> str:
        window = request.query.get("window", DEFAULT_WINDOW)
        if window not in WINDOWS:
            raise BadRequest(f"window must be one of {', '.join(WINDOWS)}, not {window[:20]!r}")
        return window

    async def _health(self, window: str = DEFAULT_WINDOW) -> dict[str, Any]:
        hub = self.hub
        now = time.time()
        span = WINDOWS[window]
        width = span / BUCKETS
        start = now - span
        charts = []
        # from the run store: every run of the window, this process's or not
        per_span = await hub.runs.histogram(since=start, width=width, buckets=BUCKETS)
        for name, title, unit, pick in (
            ("runs", "runs started", "", lambda t: t.runs),
            ("failed", "runs failed", "", lambda t: t.failed),
            ("tokens", "tokens used", "", lambda t: t.tokens),
        ):
            counts = [float(pick(t)) for t in per_span]
            charts.append(
                {
                    "name": name,
                    "title": title,
                    "summary": f"{amount(sum(counts), unit)} in the last {window}",
                    "svg": Markup(chart(counts, start=start, step=width, unit=unit, label=title, bars=True)),
                    "link": "/ui/?state=failed" if name == "failed" else "",
                }
            )
        # from this process's samples of its metrics
        for name, (title, unit, how) in SERIES.items():
            values = self.history.buckets(name, start=start, width=width, n=BUCKETS, how=how)
            seen = [v for v in values if v is not None]
            if not seen:
                summary = "no samples yet"
            elif how == "sum":
                summary = f"{amount(sum(seen), unit)} in the last {window}"
            elif how == "mean":
                latest = self.history.latest(name)
                summary = "now " + (amount(round(latest), unit) if latest is not None else "–")
                summary += f", mean {amount(round(sum(seen) / len(seen)), unit)}"
            else:
                summary = f"now {amount(self.history.latest(name) or 0, unit)}, peak {amount(max(seen), unit)}"
            charts.append(
                {
                    "name": name,
                    "title": title,
                    "summary": summary,
                    "svg": Markup(chart(values, start=start, step=width, unit=unit, label=title, bars=how == "sum")),
                    "link": "",
                }
            )
        registry = hub.metrics.registry
        platforms = []
        for ext_name, ext in sorted(hub.extensions.items()):
            if not ext.inputs and not ext.outputs or ext_name == "web":  # the chat panel is no platform
                continue
            for name in _accounts_of(registry, ext_name):  # a row per account: "telegram", "telegram/support"
                platforms.append(
                    {
                        "name": name,
                        "listening": hub.started and bool(ext.inputs),
                        # None: the extension reports no connection (the terminal); 0: down or standing by
                        "connected": registry.get_sample_value("hub_platform_connected", {"platform": name}),
                        "sent": _total(registry, "hub_platform_sends_total", platform=name, result="ok"),
                        "errors": _total(registry, "hub_platform_sends_total", platform=name, result="error"),
                        "rate_limited": _total(registry, "hub_platform_rate_limited_total", platform=name),
                    }
                )
        limits = hub.config.limits
        day = utc_day()
        budgets = []
        if limits.conversation_tokens_per_day:
            for context, _, _ in await hub.runs.recent_contexts(limit=10):
                used = await hub.budgets.store.get(f"conversation:{context}", day)
                budgets.append(
                    {"scope": context, "used": used, "limit": limits.conversation_tokens_per_day, "unit": "tokens"}
                )
        budgets += await self._money_budgets(day)
        midnight = now - now % 86400
        return {
            "charts": charts,
            "window": window,
            "windows": list(WINDOWS),
            "today": await hub.runs.totals(since=midnight),
            "hour": await hub.runs.totals(since=now - 3600),
            "failures": (await hub.runs.page(limit=5, state=str(RunState.FAILED))),
            "up_since": self.started_at,
            "uptime": _uptime(now - self.started_at),
            "version": _VERSION,
            "model": self._model_name(),
            "platforms": platforms,
            "budgets": budgets,
            "limits": limits,
            "day": day,
            "running": hub.runner.running,
            "queued": hub.runner.queued,
            "store": hub.store_health.problem(),
            "models_down": hub.model_problems(),
            "interval": self.history.interval,
            "size": self.history.samples.maxlen,
        }

    # --- tools ------------------------------------------------------------------------------

    async def tools_page(self, request: web.Request) -> web.Response:
        """The MCP servers and their tools, and the skills, as the running hub has them now."""
        mcp = getattr(self.hub, "mcp", None)
        skills = getattr(self.hub, "skills", None)
        return self._page(
            request,
            "tools.html",
            nav="tools",
            servers=mcp.statuses() if mcp is not None else [],
            skills=skills.summaries() if skills is not None else [],
            skill_errors=skills.errors() if skills is not None else {},
        )

    async def _money_budgets(self, day: str) -> list[dict[str, Any]]:
        """The budgets in money used today: per recent conversation, and the whole bot's."""
        hub, limits = self.hub, self.hub.config.limits
        store, budgets = hub.budgets.store, []
        if limits.conversation_cost_per_day:
            for context, _, _ in await hub.runs.recent_contexts(limit=10):
                spent = await store.cost(f"conversation:{context}", day)
                budgets.append(
                    {
                        "scope": context,
                        "used": round(spent, 4),
                        "limit": limits.conversation_cost_per_day,
                        "unit": "spent",
                    }
                )
        if limits.cost_per_day:
            spent = await store.cost(BOT_SCOPE, day)
            budgets.append(
                {"scope": "the whole bot", "used": round(spent, 4), "limit": limits.cost_per_day, "unit": "spent"}
            )
        if limits.background_cost_per_day:  # schedules, reminders, webhooks, child runs (holds included)
            spent = await hub.background.spent(day)
            budgets.append(
                {
                    "scope": "background runs (schedules, reminders, webhooks, child runs)",
                    "used": round(spent, 4),
                    "limit": limits.background_cost_per_day,
                    "unit": "spent",
                    "skipped": hub.background.skipped_today(),
                }
            )
        return budgets

    def _model_name(self) -> str:
        cfg = self.hub.config.model
        try:
            given = getattr(self.hub.model, "name", "")
        except Exception:  # no model could be made: the config says which was asked for
            given = ""
        fallbacks = f" (fallbacks: {', '.join(cfg.fallbacks)})" if cfg.fallbacks else ""
        return str(given or cfg.name) + fallbacks

    async def health_page(self, request: web.Request) -> web.Response:
        return self._page(request, "health.html", nav="health", **await self._health(self._window(request)))

    async def health_charts(self, request: web.Request) -> web.Response:
        return self._page(request, "_charts.html", **await self._health(self._window(request)))


def _uptime(seconds: float) -> str:
    s = int(max(0.0, seconds))
    days, s = divmod(s, 86400)
    hours, s = divmod(s, 3600)
    minutes, s = divmod(s, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min {s} s"


def _version() -> str:
    try:
        return importlib.metadata.version("hub")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout that was not installed
        return "unknown"


_VERSION = _version()


def _accounts_of(registry: Any, platform: str) -> list[str]:
    """The ``platform`` labels of one extension's accounts in the metrics: its own name (the
    default account) first, then ``NAME/ACCOUNT`` for each other account that reported."""
    found = {
        s.labels.get("platform", "")
        for family in registry.collect()
        if family.name.startswith("hub_platform_")
        for s in family.samples
    }
    return [platform, *sorted(f for f in found if f.startswith(platform + "/"))]


def _total(registry: Any, name: str, **labels: str) -> int:
    return int(metric_total(registry, name, **labels))


def _host_port(request: web.Request) -> str:
    url = URL(f"{'https' if _is_https(request) else 'http'}://{request.host}")
    return f"{url.host}:{url.port}"


def _is_https(request: web.Request) -> bool:
    # behind a TLS-terminating proxy the browser's scheme is the proxy's
    return request.secure or request.headers.get("X-Forwarded-Proto", "").lower() == "https"
