"""A loopback fake of OpenAI's chat-completions API: one server for the tests and ``bench/``.

In tests, ``FakeOpenAI(responses)`` answers ``POST /v1/chat/completions`` with the next
scripted response (a string, a native tool turn built by [`tool_turn()`][hub.testing.tool_turn], or a callable of
the request body returning either);
``fail_next("chat", status=429, count=N)`` injects errors (a 401 quotes the key it was
given, as OpenAI's does), ``hang_next()`` a request that gets no answer until the server
stops, and [`closed_port()`][hub.testing.closed_port] gives a port nothing listens on (a refused connection);
``requests`` / ``bodies`` record what came in. For benchmarks (the hub and a peer talking to the same process, so
that neither gets a faster model) it runs as a process::

    python -m hub.testing.openai --port 0 --latency 0 --chunk 8 --script FILE

The first line on stdout is ``PORT=<n>``; the server runs until SIGTERM/SIGINT.

Endpoints
---------
``POST /v1/chat/completions``  ``stream: true`` gives SSE ``data: {chunk}\\n\\n``
    events of ``chunk`` characters of content each, then a chunk with ``finish_reason``
    and ``usage``, then ``data: [DONE]``. ``latency`` seconds pass before the first byte
    of the body (the model's time to first token). The usage's
    ``prompt_tokens_details.cached_tokens`` plays a provider's prompt cache: the longest
    prefix the prompt (`prompt_text()`) shares with one of the last 16 prompts.
    A tool turn streams as OpenAI streams it (the shape of the streams openai-python's own
    tests recorded from the API): a first chunk with the role and ``content: null``, the text
    if any, then for each call one chunk with its ``index``, ``id``, ``type`` and function
    ``name`` (``arguments: ""``) followed by chunks of ``arguments`` fragments, then
    ``finish_reason: "tool_calls"`` (or the turn's own, e.g. ``"length"``), the usage and
    ``[DONE]``. A turn with ``drop=True`` closes the connection after its last fragment.
``POST /v1/audio/transcriptions``  a multipart upload (``file``, ``model``): the file is
    decoded with PyAV (a file that is not audio gets a 400, as OpenAI answers), and the
    answer is the next of ``transcripts`` (else ``"heard N.N seconds"``) as ``{"text"}``.
    ``fail_next("transcribe", status=500)`` and ``hang_audio_next()`` inject failures.
``POST /v1/audio/speech``  ``{model, voice, input, response_format}``: real audio, a tone
    of ``speech_seconds_per_char`` seconds per character, encoded as asked (``opus``: OGG/
    Opus; ``mp3``; ``wav``). ``fail_next("speech", ...)`` injects failures.
``GET /stats``        ``{"count": n, "requests": [{client, model, response,
    prompt_chars, prompt_tokens, messages, last_chars}, ...]}`` in arrival order.
``POST /stats/reset`` forgets them.
``GET /healthz``      ``ok``.

Script file
-----------
JSON. Either a plain list of responses (strings), which every request shares and
the first of which is always chosen unless rules say otherwise, or::

    {"default": "hub",
     "clients": {
       "hub":       {"responses": ["step 1 ...", "step 2 ..."],
                     "rules": [{"contains": "\\"temperature\\"", "in": "last", "pick": 1}]},
       "daydreams": {"responses": [...],
                     "rules": [{"contains": "No unprocessed inputs.", "pick": 1}]}}}

The client is chosen by the ``X-Bench-Client`` request header, else by the
request's ``model`` when it names a client, else ``default`` (else the only or
first client). The response is the ``pick`` of the first rule that matches, else
response 0. A rule matches when its ``contains`` string (or ``regex``) occurs in
the text it looks at: ``"in": "last"`` the last message's content, ``"last_user"``
the last user message, ``"all"`` (the default) every message's content joined by
newlines. ``"not": true`` inverts a rule. A response that is an object
``{"repeat": "text", "times": n, "prefix": "...", "suffix": "..."}`` is built once at
load (for long outputs that would make the script file huge).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import signal
import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from ..models.scripted import PrefixCache
from .fakes import Failure, FakeServer, Recorded

__all__ = [
    "FakeOpenAI",
    "closed_port",
    "Script",
    "ToolTurn",
    "load_script",
    "build_response",
    "content_text",
    "prompt_text",
    "main",
    "tool_turn",
]


@dataclass(slots=True)
class ToolTurn:
    """A native tool-calling answer: ``content`` (text, or None) and ``calls`` (``{"name",
    "arguments", "id"}``; arguments a JSON string, or an object that is serialised; ``"id":
    None`` streams the call with no id), streamed as OpenAI streams them. ``finish_reason``: ``"tool_calls"`` when there are calls, else
    ``"stop"``, unless given (``"length"`` for a cut). ``drop``: the connection is closed after
    the last fragment, with no finish reason, usage or ``[DONE]`` (a broken stream)."""

    content: str | None = None
    """Text the turn writes before its calls, or None."""
    calls: list[dict[str, Any]] = field(default_factory=list)
    """The calls: ``{"name", "arguments", "id"}`` each."""
    finish_reason: str | None = None
    """The finish reason to send; None: ``tool_calls`` when there are calls, else ``stop``."""
    drop: bool = False
    """Close the connection after the last fragment (a broken stream)."""

    def text(self) -> str:
        """What the turn writes, for the usage count and ``sent``."""
        return (self.content or "") + "".join(_arguments(c) for c in self.calls)


def tool_turn(content: str | None = None, *calls: tuple[str, Any], **kw: Any) -> ToolTurn:
    """A [`ToolTurn`][hub.testing.ToolTurn]: ``tool_turn(None, ("get_weather", {"city": "Paris"}))``."""
    return ToolTurn(content, [{"name": n, "arguments": a} for n, a in calls], **kw)


def _arguments(call: dict[str, Any]) -> str:
    args = call.get("arguments", "")
    return args if isinstance(args, str) else json.dumps(args)


Reply = str | ToolTurn
Response = Reply | Callable[[dict[str, Any]], Reply]


def build_response(item: Any) -> Reply:
    """A script's response: a string, ``{"repeat", "times", "prefix", "suffix"}``, or a tool
    turn ``{"content": ..., "tool_calls": [{"name", "arguments"}], "finish_reason": ...}``."""
    if isinstance(item, str):
        return item
    if isinstance(item, dict) and "repeat" in item:
        return item.get("prefix", "") + item["repeat"] * int(item["times"]) + item.get("suffix", "")
    if isinstance(item, dict) and "tool_calls" in item:
        return ToolTurn(item.get("content"), list(item["tool_calls"]), item.get("finish_reason"))
    raise ValueError(f"a response must be a string, a repeat object or a tool turn, not {item!r}")


def prompt_text(body: dict[str, Any]) -> str:
    """A request's prompt as a provider's cache sees it, in the order it is sent: the tools,
    then each message (role, content, tool calls) in turn."""
    parts = [json.dumps(body.get("tools") or [], sort_keys=True)]
    for m in body.get("messages") or ():
        parts.append(json.dumps([m.get("role"), m.get("content"), m.get("tool_calls")], ensure_ascii=False))
    return "\n".join(parts)


def content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content)


class Script:
    """One client's responses and the rules that pick among them, from a script file's JSON.

    ``spec`` is a list of responses, or ``{"responses": [...], "rules": [...]}``. A rule
    ``{"contains": TEXT, "pick": N}`` (or ``"regex"``) picks response ``N`` when the text
    occurs in what it looks at: ``"in": "last"`` the last message's content, ``"last_user"``
    the last user message, ``"all"`` (the default) every message joined; ``"not": true``
    inverts it. The first rule that matches picks; with none, response 0. A response
    ``{"repeat": TEXT, "times": N, "prefix": ..., "suffix": ...}`` is built once, at load.

    Raises:
        ValueError: no responses, a rule's ``in`` unknown, or its ``pick`` out of range.

    Attributes:
        name: The client's name (a benchmark's ``X-Bench-Client`` header picks it).
        responses: Its responses, built.
        rules: Its rules, compiled: (where, test, negated, pick).
    """

    def __init__(self, name: str, spec: Any) -> None:
        self.name = name
        if isinstance(spec, list):
            spec = {"responses": spec}
        self.responses: list[Reply] = [build_response(r) for r in spec["responses"]]
        if not self.responses:
            raise ValueError(f"client {name!r} has no responses")
        self.rules: list[tuple[str, Callable[[str], Any], bool, int]] = []
        for rule in spec.get("rules", []):
            where = rule.get("in", "all")
            if where not in ("all", "last", "last_user"):
                raise ValueError(f"rule 'in' must be all, last or last_user: {rule!r}")
            pick = int(rule["pick"])
            if not 0 <= pick < len(self.responses):
                raise ValueError(f"rule pick {pick} out of range for client {name!r}")
            if "regex" in rule:
                test: Callable[[str], Any] = re.compile(rule["regex"]).search
            else:
                needle = rule["contains"]
                test = re.compile(re.escape(needle)).search
            self.rules.append((where, test, bool(rule.get("not", False)), pick))

    def choose(self, messages: list[dict[str, Any]]) -> int:
        """The index of the response for a request's ``messages``: the first matching rule's pick, else 0."""
        texts = [content_text(m.get("content")) for m in messages]
        views: dict[str, str] = {}
        for where, test, negate, pick in self.rules:
            if where not in views:
                if where == "last":
                    views[where] = texts[-1] if texts else ""
                elif where == "last_user":
                    users = [t for m, t in zip(messages, texts, strict=True) if m.get("role") == "user"]
                    views[where] = users[-1] if users else ""
                else:
                    views[where] = "\n".join(texts)
            if bool(test(views[where])) != negate:
                return pick
        return 0


def load_script(spec: Any) -> tuple[dict[str, Script], str]:
    """Clients and the default client's name, from a script (a path, or the parsed JSON).

    A script is a list of responses every request shares, or
    ``{"default": NAME, "clients": {NAME: SPEC, ...}}`` with one [`Script`][hub.testing.Script]
    spec per client; None is one response that ends the run.

    Raises:
        ValueError: a client's spec is wrong (see [`Script`][hub.testing.Script]), or ``default``
            names no client.
    """
    if spec is None:
        spec = ["<response><reasoning>ok</reasoning></response>"]
    elif isinstance(spec, str):
        with open(spec, encoding="utf-8") as f:
            spec = json.load(f)
    if isinstance(spec, list):
        return {"default": Script("default", spec)}, "default"
    clients = {name: Script(name, c) for name, c in spec["clients"].items()}
    default = spec.get("default") or next(iter(clients))
    if default not in clients:
        raise ValueError(f"default client {default!r} is not in clients")
    return clients, default


@dataclass
class _State:
    requests: list[Recorded] = field(default_factory=list)
    sent: list[dict[str, Any]] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)


class FakeOpenAI(FakeServer):
    """OpenAI's chat completions on 127.0.0.1.

    A request takes, in order of preference: an injected failure; the next of
    ``responses`` (consumed); the ``script``'s pick (see [`load_script()`][hub.testing.load_script]); ``default``.
    With none left it answers 500. ``chunk_delay`` paces the stream one event per write;
    without it events go out in writes of about ``write_bytes``. ``record=False`` keeps
    no request log (only the ``stats`` a benchmark reads), for long runs.

    Args:
        responses: Answers to the next requests, in order: text, a [`ToolTurn`][hub.testing.ToolTurn],
            or a function of the request's JSON body returning either.
        script: A script file's path or its parsed JSON ([`load_script`][hub.testing.load_script]).
        chunk: Characters of content per streamed event.
        latency: Seconds before the first byte of a body (the model's time to first token).
        chunk_delay: Seconds between events.
        default: The answer when nothing else gives one; None: a 500.
        write_bytes: About how many bytes go out per write when ``chunk_delay`` is 0.
        record: Whether to keep the request log.
        port: The port to listen on; 0: a free one.

    Attributes:
        state: What outlives one server: the request log, the sent answers, the failures, the bodies.
        responses: The answers left, consumed in order.
        default: The answer when nothing else gives one.
        chunk: Characters of content per streamed event.
        latency: Seconds before the first byte of a body.
        chunk_delay: Seconds between events.
        write_bytes: Bytes per write without ``chunk_delay``.
        record: Whether the request log is kept.
        port: Its port (0 until started on a free one).
        stats: One entry per chat request (client, model, response, prompt size), for ``GET /stats``.
        speech_seconds_per_char: Seconds of tone ``/v1/audio/speech`` makes per character of input.
    """

    def __init__(
        self,
        responses: Sequence[Response] = (),
        *,
        script: Any = None,
        chunk: int = 7,
        latency: float = 0.0,
        chunk_delay: float = 0.0,
        default: Response | None = None,
        write_bytes: int = 16384,
        record: bool = True,
        port: int = 0,
    ) -> None:
        super().__init__()
        self.state = _State()
        self.responses: list[Response] = list(responses)
        self.clients, self.default_client = load_script(script) if script is not None else ({}, "")
        self.default = default
        self.chunk = max(1, chunk)
        self.latency = latency
        self.chunk_delay = chunk_delay
        self.write_bytes = write_bytes
        self.record = record
        self.port = port
        self.stats: list[dict[str, Any]] = []
        self._counter = 0
        self.prompt_cache = PrefixCache()
        """The provider's prompt cache, played: each answer's ``cached_tokens``."""
        self.cached_tokens_total = 0
        """The cached prompt tokens of every answer so far."""
        self._hangs = 0
        self._release = asyncio.Event()
        self.transcripts: list[str] = []
        """What the next transcriptions answer, in order (then ``"heard N.N seconds"``)."""
        self.heard: list[dict[str, Any]] = []
        """Each transcription: ``model``, ``filename``, ``content_type``, ``seconds`` (as decoded), ``size``."""
        self.spoken: list[dict[str, Any]] = []
        """Each speech request's JSON body."""
        self.speech_seconds_per_char = 0.02
        self._audio_hangs = 0

    def hang_next(self, count: int = 1) -> None:
        """The next ``count`` chat requests get no answer at all until the server stops (a
        model that hangs past the client's timeout)."""
        self._hangs += count
        self._release.clear()  # set by an earlier stop

    def hang_audio_next(self, count: int = 1) -> None:
        """The next ``count`` audio requests (transcription or speech) get no answer until the
        server stops."""
        self._audio_hangs += count
        self._release.clear()

    async def _audio_gate(self, name: str, request: web.Request, body: Any) -> web.Response | None:
        """An injected failure or hang for an audio route, else None."""
        rec = self._record_request(name, request, body)
        failure = self._take_failure(name) if self.state.failures else None
        if failure is not None:
            return self._failed(failure, rec, request)
        if self._audio_hangs > 0:
            self._audio_hangs -= 1
            self._notify()
            await self._release.wait()
            return web.json_response({"error": {"message": "fake: stopped while hanging"}}, status=503)
        rec.status = 200
        return None

    async def _transcribe(self, request: web.Request) -> web.Response:
        from .audio import measure

        form = await request.post()
        upload = form.get("file")
        if not isinstance(upload, web.FileField):
            return web.json_response({"error": {"message": "bad request: a multipart file"}}, status=400)
        data = upload.file.read()
        meta = {
            "model": str(form.get("model", "")),
            "filename": upload.filename,
            "content_type": upload.content_type,
            "size": len(data),
        }
        gate = await self._audio_gate("transcribe", request, meta)
        if gate is not None:
            return gate
        seconds = measure(data)
        if seconds is None:
            self._notify()
            return web.json_response(
                {"error": {"message": "Invalid file format.", "type": "invalid_request_error"}}, status=400
            )
        self.heard.append({**meta, "seconds": seconds})
        text = self.transcripts.pop(0) if self.transcripts else f"heard {seconds:.1f} seconds"
        self._notify()
        return web.json_response({"text": text})

    async def _speech(self, request: web.Request) -> web.Response:
        from .audio import audio_bytes

        try:
            body = await request.json()
            text = str(body["input"])
        except (ValueError, KeyError, TypeError):
            return web.json_response({"error": {"message": "bad request: a JSON body with input"}}, status=400)
        gate = await self._audio_gate("speech", request, body)
        if gate is not None:
            return gate
        self.spoken.append(body)
        fmt = {"opus": "ogg", "mp3": "mp3", "wav": "wav"}.get(str(body.get("response_format") or "mp3"), "mp3")
        seconds = max(0.2, len(text) * self.speech_seconds_per_char)
        data = await asyncio.to_thread(audio_bytes, seconds, format=fmt, freq=330.0)
        self._notify()
        return web.Response(body=data, content_type="audio/ogg" if fmt == "ogg" else f"audio/{fmt}")

    async def _before_cleanup(self) -> None:
        self._release.set()

    @property
    def url(self) -> str:
        """The ``base_url`` to give the client."""
        return f"{self.base_url}/v1"

    @property
    def bodies(self) -> list[dict[str, Any]]:
        """Every request body received, in order."""
        return self.state.bodies

    def prompt(self, i: int = -1) -> str:
        """The text of every message of request ``i``, joined."""
        return "\n".join(content_text(m.get("content")) for m in self.bodies[i]["messages"])

    def _build_app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/audio/transcriptions", self._transcribe)
        app.router.add_post("/v1/audio/speech", self._speech)
        app.router.add_get("/stats", self._get_stats)
        app.router.add_post("/stats/reset", self._reset_stats)
        app.router.add_get("/healthz", self._healthz)
        return app

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _get_stats(self, request: web.Request) -> web.Response:
        body = json.dumps({"count": len(self.stats), "requests": self.stats})
        return web.Response(body=body, content_type="application/json")

    async def _reset_stats(self, request: web.Request) -> web.Response:
        self.stats = []
        return web.Response(body=b'{"ok": true}', content_type="application/json")

    def _pick(self, request: web.Request, body: dict[str, Any], model: str) -> tuple[Reply | None, str, int]:
        """(text, client name, response index); text None when nothing is left to answer."""
        if self.responses:
            item = self.responses.pop(0)
            return (item(body) if callable(item) else item), "", 0
        if self.clients:
            name = request.headers.get("X-Bench-Client") or (model if model in self.clients else self.default_client)
            client = self.clients.get(name) or self.clients[self.default_client]
            pick = client.choose(body["messages"])
            return client.responses[pick], client.name, pick
        if self.default is not None:
            return (self.default(body) if callable(self.default) else self.default), "", 0
        return None, "", 0

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
            messages = body["messages"]
        except (ValueError, KeyError, TypeError):
            return web.json_response({"error": {"message": "bad request: a JSON body with messages"}}, status=400)
        rec = None
        if self.record:  # a benchmark's thousands of requests keep no log (only stats)
            rec = self._record_request("chat", request, body)
            self.state.bodies.append(body)
        failure = self._take_failure("chat") if self.state.failures else None
        if failure is not None:
            return self._failed(failure, rec, request)
        if self._hangs > 0:
            self._hangs -= 1
            self._notify()
            await self._release.wait()  # the client gives up first (its handler is cancelled then)
            return web.json_response({"error": {"message": "fake: stopped while hanging"}}, status=503)
        model = str(body.get("model", ""))
        text, client, pick = self._pick(request, body, model)
        if text is None:
            if rec is not None:
                rec.status = 500
            self._notify()
            return web.json_response({"error": {"message": "fake: no scripted response left"}}, status=500)
        written = text.text() if isinstance(text, ToolTurn) else text
        usage = self._count(messages, written, client=client, model=model, pick=pick)
        cached = min(self.prompt_cache.cached_tokens(prompt_text(body)), usage["prompt_tokens"])
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
        self.cached_tokens_total += cached
        self._counter += 1
        cid = f"chatcmpl-fake{self._counter}"
        created = int(time.time())
        if self.latency > 0:
            await asyncio.sleep(self.latency)
        if rec is not None:
            rec.status = 200
            self.state.sent.append({"text": written})
        if not body.get("stream"):
            self._notify()
            return web.Response(
                body=json.dumps(_completion(cid, created, model, text, usage)), content_type="application/json"
            )
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        if isinstance(text, ToolTurn):
            events = _tool_events(cid, created, model, text, usage, self.chunk, include_usage)
            return await self._stream(request, events, drop=text.drop)
        return await self._stream(request, _chunk_events(cid, created, model, text, usage, self.chunk, include_usage))

    def _failed(self, failure: Failure, rec: Recorded | None, request: web.Request) -> web.Response:
        """The answer of an injected failure (``fail_next``), as OpenAI words its errors. A 401
        quotes the key it was given, as OpenAI's does (there in part): the hub must not."""
        if rec is not None:
            rec.status = failure.status
        headers = {"retry-after": str(failure.retry_after)} if failure.retry_after is not None else {}
        message = failure.description or f"injected {failure.status}"
        if failure.status == 401 and failure.description is None:
            key = request.headers.get("Authorization", "").removeprefix("Bearer ")
            message = f"Incorrect API key provided: {key}. You can find your API key at the dashboard."
        error: dict[str, Any] = {"message": message, "type": "fake"}
        if failure.code is not None:  # as OpenAI sends it: {"error": {"message", "type", "param", "code"}}
            error.update(type="invalid_request_error", param="messages", code=failure.code)
        payload = {"error": error}
        self._notify()
        return web.json_response(payload, status=failure.status, headers=headers)

    def _count(self, messages: list[Any], text: str, *, client: str, model: str, pick: int) -> dict[str, Any]:
        """The request's usage (about 4 characters a token), and its line in `stats`."""
        texts = [content_text(m.get("content")) for m in messages]
        prompt_chars = sum(len(t) for t in texts)
        prompt_tokens = max(1, prompt_chars // 4)
        completion_tokens = max(1, len(text) // 4)
        self.stats.append(
            {
                "t": time.time(),
                "client": client,
                "model": model,
                "response": pick,
                "prompt_chars": prompt_chars,
                "prompt_tokens": prompt_tokens,
                "messages": len(messages),
                "last_chars": len(texts[-1]) if texts else 0,
            }
        )
        return {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }

    async def _stream(self, request: web.Request, events: list[str], *, drop: bool = False) -> web.StreamResponse:
        """Send server-sent ``events``: one a write, ``chunk_delay`` apart, or (with no delay)
        batched into writes of about ``write_bytes``, as fast as the client reads. ``drop``:
        close the connection after them, mid-body (a broken stream)."""
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        try:
            if self.chunk_delay > 0:
                for ev in events:
                    await resp.write(ev.encode())
                    await asyncio.sleep(self.chunk_delay)
            else:
                buf: list[str] = []
                size = 0
                for ev in events:
                    buf.append(ev)
                    size += len(ev)
                    if size >= self.write_bytes:
                        await resp.write("".join(buf).encode())
                        buf, size = [], 0
                if buf:
                    await resp.write("".join(buf).encode())
            if drop and request.transport is not None:
                await asyncio.sleep(0.05)  # what was written reaches the client before the cut
                request.transport.close()
                return resp
            await resp.write_eof()
        except ConnectionResetError:
            pass
        finally:
            if self._waiters:
                self._notify()
        return resp

    async def serve_forever(self, *, host: str = "127.0.0.1", backlog: int = 4096) -> None:
        """Serve on ``host`` until SIGINT/SIGTERM, printing ``PORT=<n>`` first (the CLI)."""
        runner = web.AppRunner(self._build_app(), access_log=None, handle_signals=False)
        await runner.setup()
        # a deep accept backlog: 1,000 clients connect at once in the "many" benchmark
        site = web.TCPSite(runner, host, self.port, backlog=backlog)
        await site.start()
        self.port = runner.addresses[0][1]
        print(f"PORT={self.port}", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        await runner.cleanup()


def closed_port() -> int:
    """A loopback port nothing listens on: a connection to it is refused (a model server that is down)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed on leaving: nothing listens there now


def _completion(cid: str, created: int, model: str, text: Reply, usage: dict[str, Any]) -> dict[str, Any]:
    """A whole (not streamed) chat completion."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    finish = "stop"
    if isinstance(text, ToolTurn):
        message = {"role": "assistant", "content": text.content, "tool_calls": _whole_calls(text, cid)}
        finish = text.finish_reason or ("tool_calls" if text.calls else "stop")
    return {
        "id": cid,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "finish_reason": finish, "message": message}],
        "usage": usage,
    }


def _call_id(turn: ToolTurn, i: int, cid: str) -> dict[str, str]:
    """The call's ``id`` field: its own, one made up, or none for ``"id": None`` (a server
    that gives no ids, as some OpenAI-compatible ones do)."""
    call = turn.calls[i]
    if "id" in call and call["id"] is None:
        return {}
    return {"id": str(call.get("id") or f"call_{cid.removeprefix('chatcmpl-')}_{i}")}


def _whole_calls(turn: ToolTurn, cid: str) -> list[dict[str, Any]]:
    return [
        {**_call_id(turn, i, cid), "type": "function", "function": {"name": c["name"], "arguments": _arguments(c)}}
        for i, c in enumerate(turn.calls)
    ]


def _tool_events(
    cid: str, created: int, model: str, turn: ToolTurn, usage: dict[str, Any], chunk: int, include_usage: bool
) -> list[str]:
    """A streamed tool turn's server-sent events, in the shape the API streams them (see the
    module docstring): role, text, each call's head then its argument fragments, finish, usage."""
    head = f'data: {{"id":"{cid}","object":"chat.completion.chunk","created":{created},"model":{json.dumps(model)},'

    def event(delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return head + '"choices":[' + json.dumps(choice, separators=(",", ":")) + "]}\n\n"

    events = [event({"role": "assistant", "content": None})]
    text = turn.content or ""
    for i in range(0, len(text), chunk):
        events.append(event({"content": text[i : i + chunk]}))
    for i, call in enumerate(turn.calls):
        fn = {"name": call["name"], "arguments": ""}
        events.append(
            event({"tool_calls": [{"index": i, **_call_id(turn, i, cid), "type": "function", "function": fn}]})
        )
        args = _arguments(call)
        for j in range(0, len(args), chunk):
            events.append(event({"tool_calls": [{"index": i, "function": {"arguments": args[j : j + chunk]}}]}))
    if turn.drop:
        return events
    events.append(event({}, turn.finish_reason or ("tool_calls" if turn.calls else "stop")))
    tail = json.dumps(usage)
    if include_usage:
        events.append(head + '"choices":[],"usage":' + tail + "}\n\n")
    else:  # the finish chunk carries it
        events[-1] = events[-1][: -len("}\n\n")] + ',"usage":' + tail + "}\n\n"
    events.append("data: [DONE]\n\n")
    return events


def _chunk_events(
    cid: str, created: int, model: str, text: str, usage: dict[str, Any], chunk: int, include_usage: bool
) -> list[str]:
    """A streamed completion's server-sent events: the role, ``text`` ``chunk`` characters an
    event, the finish reason, the usage (in a last chunk of its own when the client asked for
    ``include_usage``, as OpenAI sends it), then ``[DONE]``."""
    head = (
        f'data: {{"id":"{cid}","object":"chat.completion.chunk","created":{created},'
        f'"model":{json.dumps(model)},"choices":[{{"index":0,"delta":'
    )
    events = [head + '{"role":"assistant","content":""},"finish_reason":null}]}\n\n']
    for i in range(0, len(text), chunk):
        events.append(head + '{"content":' + json.dumps(text[i : i + chunk]) + '},"finish_reason":null}]}\n\n')
    final = head + '{},"finish_reason":"stop"}]'
    if include_usage:
        events.append(final + "}\n\n")
        events.append(
            f'data: {{"id":"{cid}","object":"chat.completion.chunk","created":{created},'
            f'"model":{json.dumps(model)},"choices":[],"usage":{json.dumps(usage)}}}\n\n'
        )
    else:
        events.append(final + ',"usage":' + json.dumps(usage) + "}\n\n")
    events.append("data: [DONE]\n\n")
    return events


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="A loopback fake of OpenAI's chat completions (see hub.testing.openai).")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--latency", type=float, default=0.0, help="seconds before the first byte")
    p.add_argument("--chunk", type=int, default=8, help="characters of content per SSE event")
    p.add_argument(
        "--interval",
        type=float,
        default=0.0,
        help="milliseconds between SSE events (0: write them in batches, as fast as possible)",
    )
    p.add_argument("--write-bytes", type=int, default=16384, help="bytes per write when --interval is 0")
    p.add_argument("--script", help="JSON script file (see the module docstring)")
    args = p.parse_args(argv)
    fake = FakeOpenAI(
        script=args.script if args.script else ["<response><reasoning>ok</reasoning></response>"],
        chunk=args.chunk,
        latency=args.latency,
        chunk_delay=args.interval / 1000.0,
        write_bytes=args.write_bytes,
        record=False,
        port=args.port,
    )
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    try:
        asyncio.run(fake.serve_forever(host=args.host))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
