"""POST /reviews/{id} (and GET /reviews): deciding on held posts over HTTP, behind the [http] token."""

from __future__ import annotations

import time

import aiohttp

from hub import Hub, HubConfig, ScriptedModel
from hub.config import HttpSection
from hub.store import Review
from tests._support.chat import Said, test_extension

TOKEN = "review-token-for-tests-0123"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _review(rid: str, text: str, *, expires_in: float = 3600.0) -> Review:
    now = time.time()
    return Review(rid, "mastodon", "mastodon:reply", "1", text, "pending", now, now + expires_in, in_reply_to="1")


async def test_decide_on_held_posts_over_http(config: HubConfig, said: Said) -> None:
    config.http = HttpSection(port=0, token=TOKEN)
    hub = Hub(config, model=ScriptedModel([]), load_extensions=False, extensions=[test_extension(said)])
    async with hub, aiohttp.ClientSession() as session:
        base = f"http://127.0.0.1:{hub.http.port}"
        for r in (_review("r1", "draft"), _review("r2", "no"), _review("r3", "late", expires_in=-1)):
            await hub.stores.reviews.add(r)
        async with session.post(f"{base}/reviews/r1", json={"approve": True}) as resp:
            assert resp.status == 401 and "Bearer TOKEN" in (await resp.json())["error"]
        async with session.get(f"{base}/reviews", headers=AUTH) as resp:
            body = await resp.json()
            assert [(r["id"], r["state"]) for r in body["reviews"]] == [
                ("r1", "pending"),
                ("r2", "pending"),
                ("r3", "expired"),
            ]
        for payload, status, says in [
            (b"not json", 400, "not JSON"),
            (b'{"approve": "yes"}', 400, '{"approve": true|false}'),
            (b'{"approve": false, "text": "x"}', 400, '"approve": true only'),
            (b'{"approve": true, "text": "  "}', 409, "the edited text is empty"),
        ]:
            async with session.post(f"{base}/reviews/r1", data=payload, headers=AUTH) as resp:
                assert resp.status == status and says in (await resp.json())["error"], payload
        async with session.post(f"{base}/reviews/r1", json={"approve": True, "text": "edited"}, headers=AUTH) as resp:
            review = (await resp.json())["review"]
            assert resp.status == 200 and (review["state"], review["text"]) == ("approved", "edited")
        async with session.post(f"{base}/reviews/r2", json={"approve": False}, headers=AUTH) as resp:
            assert resp.status == 200 and (await resp.json())["review"]["state"] == "rejected"
        for rid, status, says in [("r1", 409, "is approved"), ("r3", 409, "is expired"), ("zz", 404, "no held post")]:
            async with session.post(f"{base}/reviews/{rid}", json={"approve": True}, headers=AUTH) as resp:
                assert resp.status == status and says in (await resp.json())["error"], rid
        r1 = await hub.stores.reviews.get("r1")
        assert r1 is not None and r1.text == "edited"


async def test_reviews_are_off_without_a_token(config: HubConfig, said: Said) -> None:
    config.http = HttpSection(port=0, token="")
    hub = Hub(config, model=ScriptedModel([]), load_extensions=False, extensions=[test_extension(said)])
    async with hub, aiohttp.ClientSession() as session:
        async with session.post(f"http://127.0.0.1:{hub.http.port}/reviews/r1", json={"approve": True}) as resp:
            assert resp.status == 404 and "set [http] token" in (await resp.json())["error"]
