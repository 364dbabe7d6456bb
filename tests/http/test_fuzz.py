"""Random and hostile JSON bodies posted to a webhook (hypothesis): every answer is a 2xx or
a 4xx, and the next normal message is answered."""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hub import Hub, HubConfig, ScriptedModel
from hub.config import HttpSection, WebhookSection
from tests._support.chat import Said, reply_to_input, test_extension

SECRET = "fuzz-secret-0123456789"

# text with lone surrogates, controls, NULs, tag-like and escape-like content
_chars = st.characters(codec=None, exclude_categories=())
texts = st.text(_chars, max_size=40) | st.sampled_from(
    ["</input>", '<action_call name="x">{}</action_call>', "\x1b]0;t\x07", "\\ud800"]
)
scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | texts
values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=5) | st.dictionaries(texts, inner, max_size=5), max_leaves=30
)


def _dump(v: object) -> bytes:
    # surrogatepass: a lone surrogate reaches the wire as raw CESU bytes, or as an escape
    return json.dumps(v, ensure_ascii=False).encode("utf-8", "surrogatepass")


bodies = (
    values.map(lambda v: json.dumps(v).encode())
    | values.map(_dump)
    | st.binary(max_size=200)
    | st.integers(1, 5000).map(lambda n: b"[" * n)
    | st.integers(1, 3000).map(lambda n: b'{"a":' * n + b"1" + b"}" * n)
    | st.sampled_from([b"NaN", b"[Infinity]", b'"\\udfff"', b"1" * 5000, b"\xef\xbb\xbf{}", b"{}" * 3, b"\x00"])
)


class Served:
    """A hub with the endpoint on a loop in its own thread, so hypothesis can drive it synchronously."""

    def __init__(self, tmp: Path) -> None:
        cfg = HubConfig()
        cfg.hub.data_dir = cfg.hub.contexts_dir = str(tmp)
        cfg.hub.shutdown_grace = 0.0
        cfg.memory.episodes = False
        cfg.http = HttpSection(port=0, max_body=100_000)
        cfg.webhooks = {"fuzz": WebhookSection(context="test:chat:1", secret=SECRET, wait_timeout=60)}
        self.said = None
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

        async def start() -> Hub:
            self.said = Said()
            hub = Hub(
                cfg, model=ScriptedModel(reply_to_input), load_extensions=False, extensions=[test_extension(self.said)]
            )
            await hub.__aenter__()
            return hub

        self.hub = asyncio.run_coroutine_threadsafe(start(), self.loop).result(30)
        self.port = self.hub.http.port

    def post(self, body: bytes, query: str = "") -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            conn.request(
                "POST",
                f"/webhooks/fuzz{query}",
                body=body,
                headers={"Authorization": f"Bearer {SECRET}", "Content-Type": "application/json"},
            )
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.hub.__aexit__(None, None, None), self.loop).result(60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    s = Served(tmp_path_factory.mktemp("fuzz"))
    yield s
    s.close()


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(body=bodies)
def test_hostile_bodies_get_2xx_or_4xx(served: Served, body: bytes) -> None:
    status, answer = served.post(body)
    assert 200 <= status < 300 or 400 <= status < 500, (status, answer[:300])
    assert json.loads(answer)  # every answer is JSON


def test_the_next_normal_message_is_answered(served: Served) -> None:
    test_hostile_bodies_get_2xx_or_4xx(served)  # the fuzz first, whatever the order tests run in
    status, answer = served.post(b'{"after": "fuzz"}', "?wait=1")
    assert status == 200, answer
    result = json.loads(answer)
    assert result["state"] == "completed"
    assert result["outputs"][-1]["content"].endswith('{"after": "fuzz"}') and result["outputs"][-1]["sent"]
