"""The docs' "Writing a platform extension" example (docs/extending/platform.md, once the
README's) is a working platform: run it as written against a loopback fake of its chat
service, through ``module =`` in config."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from hub import Hub, HubConfig
from hub.config import config_from_dict
from hub.testing import Failure, FakeServer, Recorded, ScriptedModel

ROOT = Path(__file__).resolve().parents[2]


PAGE = ROOT / "docs" / "extending" / "platform.md"


def readme_block() -> str:
    text = PAGE.read_text()
    section = text.split("# Writing a platform extension", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, f"the platform example is missing from {PAGE.relative_to(ROOT)}"
    return match.group(1)


@dataclass
class _State:
    requests: list[Recorded] = field(default_factory=list)
    sent: list[dict[str, Any]] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    updates: list[dict[str, Any]] = field(default_factory=list)


class FakeAcme(FakeServer):
    """GET /updates?offset=N (the updates from N on), POST /send (answers its id)."""

    def __init__(self) -> None:
        super().__init__()
        self.state = _State()

    def push(self, chat_id: str, text: str, *, user: str = "ann", bot: bool = False) -> int:
        uid = len(self.state.updates) + 1
        self.state.updates.append({"id": uid, "chat_id": chat_id, "text": text, "user": user, "bot": bot})
        return uid

    def _build_app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/updates", self._updates)
        app.router.add_post("/send", self._send)
        return app

    async def _updates(self, request: web.Request) -> web.Response:
        offset = int(request.query.get("offset", 0))
        self.state.requests.append(Recorded("updates", "GET", request.path, dict(request.query), {}, 200))
        return web.json_response([u for u in self.state.updates if u["id"] >= offset])

    async def _send(self, request: web.Request) -> web.Response:
        body = await request.json()
        rec = Recorded("send", "POST", request.path, body, dict(request.headers))
        self.state.requests.append(rec)
        failure = self._take_failure("send")
        if failure is not None:
            rec.status = failure.status
            self._notify()
            return web.json_response(
                {"error": "injected"}, status=failure.status, headers={"Retry-After": str(failure.retry_after or 1)}
            )
        rec.status = 200
        message = {**body, "id": 1000 + len(self.state.sent)}
        self.state.sent.append(message)
        self._notify()
        return web.json_response(message)


async def test_the_readme_platform_answers_through_its_fake(tmp_path: Path) -> None:
    (tmp_path / "acme_platform.py").write_text(readme_block())
    async with FakeAcme() as acme:
        cfg: HubConfig = config_from_dict(
            {
                "hub": {"data_dir": str(tmp_path / "data"), "contexts_dir": str(tmp_path)},
                "memory": {"episodes": False},
                "extensions": {
                    "acme": {
                        "module": "acme_platform.py",
                        "base_url": acme.base_url,
                        "poll_interval": 0.02,
                        "allowed_users": ["ann"],
                    },
                },
            },
            path=tmp_path / "config.toml",
        )
        acme.fail_next("send", status=429, retry_after=0.1)  # the governor waits and retries
        model = ScriptedModel(['<response><output type="acme:send">Hello, Ann.</output></response>'])
        async with Hub(cfg, model=model):
            acme.push("c1", "hi", user="mallory")  # not on allowed_users: passed over
            asked = acme.push("c1", "hello there")
            await acme.wait_sent(1, timeout=30)
        (sent,) = acme.sent
        assert sent["chat_id"] == "c1" and sent["text"] == "Hello, Ann." and sent["reply_to"] == asked
        assert [r.status for r in acme.calls("send")] == [429, 200]
        assert len(model.requests) == 1  # mallory's message never reached the model
