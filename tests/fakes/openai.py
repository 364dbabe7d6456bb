"""A loopback fake of the OpenAI chat-completions API, for the real ``openai`` client.

``FakeOpenAI(responses)`` answers ``POST /v1/chat/completions``: each request takes the
next scripted response (a string, or a callable of the request body returning one), and
streams it as server-sent events in ``chunk``-sized pieces, ending with a usage chunk and
``data: [DONE]``. ``fail_next("chat", status=429, count=N)`` injects errors.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from . import FakeServer, Failure, Recorded

__all__ = ["FakeOpenAI"]

Response = str | Callable[[dict[str, Any]], str]


@dataclass
class _State:
    requests: list[Recorded] = field(default_factory=list)
    sent: list[dict[str, Any]] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)


class FakeOpenAI(FakeServer):
    def __init__(
        self,
        responses: Sequence[Response] = (),
        *,
        chunk: int = 7,
        latency: float = 0.0,
        chunk_delay: float = 0.0,
        default: Response | None = None,
    ) -> None:
        super().__init__()
        self.state = _State()
        self.responses: list[Response] = list(responses)
        self.default = default
        self.chunk = chunk
        self.latency = latency
        self.chunk_delay = chunk_delay

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
        return "\n".join(m["content"] for m in self.bodies[i]["messages"])

    def _build_app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        return app

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        rec = Recorded("chat", request.method, request.path, body, dict(request.headers))
        self.state.requests.append(rec)
        self.state.bodies.append(body)
        failure = self._take_failure("chat")
        if failure is not None:
            rec.status = failure.status
            headers = {"retry-after": str(failure.retry_after)} if failure.retry_after is not None else {}
            payload = {"error": {"message": failure.description or f"injected {failure.status}", "type": "fake"}}
            self._notify()
            return web.json_response(payload, status=failure.status, headers=headers)
        if self.responses:
            item = self.responses.pop(0)
        elif self.default is not None:
            item = self.default
        else:
            rec.status = 500
            return web.json_response({"error": {"message": "fake: no scripted response left"}}, status=500)
        text = item(body) if callable(item) else item
        if self.latency:
            await asyncio.sleep(self.latency)
        rec.status = 200
        self.state.sent.append({"text": text})
        base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()), "model": body.get("model", "fake")}
        if not body.get("stream"):
            self._notify()
            return web.json_response(
                {
                    **base,
                    "object": "chat.completion",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": len(text) // 4, "total_tokens": 10 + len(text) // 4},
                }
            )
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for i in range(0, len(text), self.chunk):
            piece = text[i : i + self.chunk]
            delta = {**base, "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
            await resp.write(f"data: {json.dumps(delta)}\n\n".encode())
            if self.chunk_delay:
                await asyncio.sleep(self.chunk_delay)
        done = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        await resp.write(f"data: {json.dumps(done)}\n\n".encode())
        if (body.get("stream_options") or {}).get("include_usage"):
            prompt_chars = sum(len(m["content"]) for m in body["messages"])
            usage = {**base, "choices": [], "usage": {"prompt_tokens": prompt_chars // 4, "completion_tokens": len(text) // 4 + 1, "total_tokens": 0}}
            await resp.write(f"data: {json.dumps(usage)}\n\n".encode())
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        self._notify()
        return resp
