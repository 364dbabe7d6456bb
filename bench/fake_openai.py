#!/usr/bin/env python3
"""A loopback fake of OpenAI's chat-completions API for side-by-side benchmarks.

Both the hub and the peer (Daydreams) talk to the same process, so neither side
gets a faster model. It answers scripted responses, streamed or not, and records
the size of every prompt it receives.

    python bench/fake_openai.py --port 0 --latency 0 --chunk 8 --script FILE

The first line on stdout is ``PORT=<n>``; the server runs until SIGTERM/SIGINT.

Endpoints
---------
``POST /v1/chat/completions``  ``stream: true`` gives SSE ``data: {chunk}\\n\\n``
    events of ``--chunk`` characters of content each, then a chunk with
    ``finish_reason`` and ``usage``, then ``data: [DONE]``. ``--latency`` seconds
    pass before the first byte of the body (the model's time to first token).
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
import sys
import time
from typing import Any

from aiohttp import web


def build_response(item: Any) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, dict) and "repeat" in item:
        return item.get("prefix", "") + item["repeat"] * int(item["times"]) + item.get("suffix", "")
    raise ValueError(f"a response must be a string or a repeat object, not {item!r}")


class Client:
    def __init__(self, name: str, spec: Any) -> None:
        self.name = name
        if isinstance(spec, list):
            spec = {"responses": spec}
        self.responses = [build_response(r) for r in spec["responses"]]
        if not self.responses:
            raise ValueError(f"client {name!r} has no responses")
        self.rules = []
        for rule in spec.get("rules", []):
            where = rule.get("in", "all")
            if where not in ("all", "last", "last_user"):
                raise ValueError(f"rule 'in' must be all, last or last_user: {rule!r}")
            pick = int(rule["pick"])
            if not 0 <= pick < len(self.responses):
                raise ValueError(f"rule pick {pick} out of range for client {name!r}")
            if "regex" in rule:
                pattern = re.compile(rule["regex"])
                test = pattern.search
            else:
                needle = rule["contains"]
                test = lambda text, needle=needle: needle in text  # noqa: E731
            self.rules.append((where, test, bool(rule.get("not", False)), pick))

    def choose(self, messages: list[dict]) -> int:
        texts = [content_text(m.get("content")) for m in messages]
        views: dict[str, str] = {}
        for where, test, negate, pick in self.rules:
            if where not in views:
                if where == "last":
                    views[where] = texts[-1] if texts else ""
                elif where == "last_user":
                    users = [t for m, t in zip(messages, texts) if m.get("role") == "user"]
                    views[where] = users[-1] if users else ""
                else:
                    views[where] = "\n".join(texts)
            if bool(test(views[where])) != negate:
                return pick
        return 0


def content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content)


def load_script(path: str | None) -> tuple[dict[str, Client], str]:
    if path is None:
        spec: Any = ["<response><reasoning>ok</reasoning></response>"]
    else:
        with open(path, encoding="utf-8") as f:
            spec = json.load(f)
    if isinstance(spec, list):
        return {"default": Client("default", spec)}, "default"
    clients = {name: Client(name, c) for name, c in spec["clients"].items()}
    default = spec.get("default") or next(iter(clients))
    if default not in clients:
        raise ValueError(f"default client {default!r} is not in clients")
    return clients, default


class FakeOpenAI:
    def __init__(self, clients: dict[str, Client], default: str, latency: float,
                 chunk: int, interval: float, write_bytes: int) -> None:
        self.clients = clients
        self.default = default
        self.latency = latency
        self.chunk = max(1, chunk)
        self.interval = interval
        self.write_bytes = write_bytes
        self.stats: list[dict] = []
        self.counter = 0

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self.completions)
        app.router.add_get("/stats", self.get_stats)
        app.router.add_post("/stats/reset", self.reset_stats)
        app.router.add_get("/healthz", lambda r: web.Response(text="ok"))
        return app

    async def get_stats(self, request: web.Request) -> web.Response:
        body = json.dumps({"count": len(self.stats), "requests": self.stats})
        return web.Response(body=body, content_type="application/json")

    async def reset_stats(self, request: web.Request) -> web.Response:
        self.stats = []
        return web.Response(body=b'{"ok": true}', content_type="application/json")

    async def completions(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
            messages = body["messages"]
        except (ValueError, KeyError, TypeError):
            return web.Response(status=400, content_type="application/json",
                                body=b'{"error": {"message": "bad request"}}')
        model = str(body.get("model", ""))
        name = request.headers.get("X-Bench-Client") or (model if model in self.clients else self.default)
        client = self.clients.get(name) or self.clients[self.default]
        pick = client.choose(messages)
        text = client.responses[pick]
        texts = [content_text(m.get("content")) for m in messages]
        prompt_chars = sum(len(t) for t in texts)
        prompt_tokens = max(1, prompt_chars // 4)
        completion_tokens = max(1, len(text) // 4)
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                 "total_tokens": prompt_tokens + completion_tokens}
        self.stats.append({"t": time.time(), "client": client.name, "model": model, "response": pick,
                           "prompt_chars": prompt_chars, "prompt_tokens": prompt_tokens,
                           "messages": len(messages), "last_chars": len(texts[-1]) if texts else 0})
        self.counter += 1
        cid = f"chatcmpl-fake{self.counter}"
        created = int(time.time())

        if self.latency > 0:
            await asyncio.sleep(self.latency)

        if not body.get("stream"):
            payload = {"id": cid, "object": "chat.completion", "created": created, "model": model,
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": text}}],
                       "usage": usage}
            return web.Response(body=json.dumps(payload), content_type="application/json")

        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-cache"})
        await resp.prepare(request)
        head = f'data: {{"id":"{cid}","object":"chat.completion.chunk","created":{created},"model":{json.dumps(model)},"choices":[{{"index":0,"delta":'
        events = [head + '{"role":"assistant","content":""},"finish_reason":null}]}\n\n']
        for i in range(0, len(text), self.chunk):
            events.append(head + '{"content":' + json.dumps(text[i:i + self.chunk]) + '},"finish_reason":null}]}\n\n')
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        final = head + '{},"finish_reason":"stop"}]'
        if include_usage:  # as OpenAI does: usage in one last chunk with no choices
            events.append(final + "}\n\n")
            events.append(f'data: {{"id":"{cid}","object":"chat.completion.chunk","created":{created},'
                          f'"model":{json.dumps(model)},"choices":[],"usage":{json.dumps(usage)}}}\n\n')
        else:
            events.append(final + ',"usage":' + json.dumps(usage) + "}\n\n")
        events.append("data: [DONE]\n\n")

        try:
            if self.interval > 0:  # paced: one event per write
                for ev in events:
                    await resp.write(ev.encode())
                    await asyncio.sleep(self.interval)
            else:  # as fast as possible: batch events into writes of about write_bytes
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
            await resp.write_eof()
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        return resp


async def serve(args: argparse.Namespace) -> None:
    clients, default = load_script(args.script)
    fake = FakeOpenAI(clients, default, args.latency, args.chunk, args.interval / 1000.0, args.write_bytes)
    runner = web.AppRunner(fake.app(), access_log=None, handle_signals=False)
    await runner.setup()
    # A deep accept backlog: 1,000 clients connect at once in the "many" benchmark.
    site = web.TCPSite(runner, args.host, args.port, backlog=4096)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    print(f"PORT={port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--latency", type=float, default=0.0, help="seconds before the first byte")
    p.add_argument("--chunk", type=int, default=8, help="characters of content per SSE event")
    p.add_argument("--interval", type=float, default=0.0,
                   help="milliseconds between SSE events (0: write them in batches, as fast as possible)")
    p.add_argument("--write-bytes", type=int, default=16384, help="bytes per write when --interval is 0")
    p.add_argument("--script", help="JSON script file (see the module docstring)")
    args = p.parse_args(argv)
    try:
        import uvloop  # type: ignore[import-not-found]
        uvloop.install()
    except ImportError:
        pass
    try:
        asyncio.run(serve(args))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
