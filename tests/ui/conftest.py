"""The dashboard's fixtures: a started hub with the Telegram extension against the fake Bot API,
a model the tests script (or hold), and the ``[http]`` endpoint on port 0 with a token.

The fake Telegram server is the one the extension's tests use (``hub.testing.telegram``),
through a small fixture.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from hub import Extension, Hub, HubConfig
from hub.config import HttpSection
from hub.models import Model, ModelRequest, Usage
from hub.store import RunRecord, RunState
from hub.testing import temp_config
from hub.testing.telegram import FakeTelegram
from hub_telegram import TelegramSettings
from hub_telegram import extension as telegram_extension

TOKEN = "ui-dashboard-token-0123456789"
TG_TOKEN = "123456:TEST-ui-token"
PERSONA = 'name = "default"\ninstructions = """Sign every reply as ALPHA."""\n'


def persona_text(signature: str) -> str:
    return f'name = "default"\ninstructions = """Sign every reply as {signature}."""\n'


def signed_reply(request: ModelRequest) -> str:
    """Answers as the persona in the prompt says: the signature its instructions name."""
    prompt = request.system + "".join(m["content"] for m in request.messages)
    found = re.findall(r"Sign every reply as (\w+)", prompt)
    sig = found[-1] if found else "NOBODY"
    return f'<response><reasoning>The persona says sign as {sig}.</reasoning><output type="telegram:send">Hello from {sig}</output></response>'


class HeldModel(Model):
    """Answers as ``answer(request)`` says, each request only once the test lets it go
    (``release``), so a run stays ``running`` for as long as a test needs to look at it."""

    name = "held"

    def __init__(self, answer: Callable[[ModelRequest], str] = signed_reply, *, hold: bool = False) -> None:
        self.answer = answer
        self.gate = asyncio.Event()
        if not hold:
            self.gate.set()
        self.waiting = asyncio.Event()
        self.requests: list[ModelRequest] = []

    def hold(self) -> None:
        self.gate.clear()

    def release(self) -> None:
        self.gate.set()

    async def stream(self, request: ModelRequest):  # type: ignore[override]
        self.requests.append(request)
        self.waiting.set()
        await self.gate.wait()
        text = self.answer(request)
        for i in range(0, len(text), 7):
            yield text[i : i + 7]
        yield Usage(prompt_tokens=len(request.system) // 4, completion_tokens=len(text) // 4, finish_reason="stop")


@dataclass
class Dash:
    """A running hub with its dashboard: ``base`` is ``http://127.0.0.1:PORT``."""

    hub: Hub
    tg: FakeTelegram
    model: HeldModel
    base: str
    contexts: Path
    extra: dict[str, Any] = field(default_factory=dict)


def make_config(tmp_path: Path, *, token: str = TOKEN) -> HubConfig:
    cfg = temp_config(tmp_path, persona=PERSONA)  # no Chroma: forget has its own test
    cfg.hub.shutdown_grace = 1
    cfg.http = HttpSection(port=0, token=token)
    return cfg


@contextlib.asynccontextmanager
async def dashboard(
    tmp_path: Path,
    *,
    model: HeldModel | None = None,
    config: HubConfig | None = None,
    extensions: Sequence[Extension] = (),
    **settings: Any,
) -> AsyncIterator[Dash]:
    """A hub with Telegram (against a fresh fake), ``extensions`` and the dashboard, started."""
    cfg = config or make_config(tmp_path)
    model = model or HeldModel()
    settings.setdefault("poll_timeout", 1)
    settings.setdefault("chat_rate", 50)
    async with FakeTelegram() as tg:
        ext = telegram_extension(TelegramSettings(token=TG_TOKEN, base_url=f"{tg.base_url}/bot", **settings))
        hub = Hub(cfg, model=model, load_extensions=False, extensions=[ext, *extensions])
        async with hub:
            assert hub.http is not None and hub.http.port
            yield Dash(hub, tg, model, f"http://127.0.0.1:{hub.http.port}", Path(cfg.hub.contexts_dir))


def client(**kw: Any) -> aiohttp.ClientSession:
    """A client session that keeps cookies of 127.0.0.1 (aiohttp's jar skips IP hosts by default)."""
    return aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True), **kw)


async def login(session: aiohttp.ClientSession, base: str, token: str = TOKEN) -> str:
    """Log ``session`` in; returns the CSRF token of its pages."""
    async with session.post(f"{base}/ui/login", data={"token": token}, allow_redirects=False) as resp:
        assert resp.status == 303, await resp.text()
    async with session.get(f"{base}/ui/") as resp:
        page = await resp.text()
    m = re.search(r'name="csrf" value="([^"]+)"', page)
    assert m, page[:500]
    return m.group(1)


async def wait_until(predicate: Callable[[], Any], timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not await _value(predicate()):
            await asyncio.sleep(0.02)


async def _value(v: Any) -> Any:
    return await v if asyncio.iscoroutine(v) else v


async def seed(store: Any, n: int, *, t0: float = 1_700_000_000.0) -> list[RunRecord]:
    """``n`` ended (and some running) runs over three platforms, two starting each second."""
    states = [RunState.COMPLETED, RunState.FAILED, RunState.REJECTED, RunState.KILLED, RunState.RUNNING]
    runs = []
    for i in range(n):
        platform = ("telegram", "discord", "twitter")[i % 3]
        runs.append(RunRecord(context=f"{platform}:chat:{i % 7}", started=t0 + i // 2, state=states[i % 5], steps=1))
    for batch in range(0, n, 100):  # together, so that SQLite commits them as groups
        await asyncio.gather(*(store.create(r) for r in runs[batch : batch + 100]))
    ended = [r for r in runs if r.state != RunState.RUNNING]
    for r in ended:
        r.ended = r.started + 0.5
    for batch in range(0, len(ended), 100):
        await asyncio.gather(*(store.finish(r) for r in ended[batch : batch + 100]))
    return runs
