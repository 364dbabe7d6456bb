"""``GET /reviews`` and ``POST /reviews/{id}``: the review queue of public timelines over HTTP,
behind the ``[http] token`` (as ``hub review``; the dashboard's review page is the same store).

``POST /reviews/{id}`` takes ``{"approve": true|false, "text": "..."}`` (``text``: an edit,
with approval only) and answers ``200`` with the held post, ``404`` for no such post, ``409``
when it is not pending any more (decided, or expired), ``400`` for a body it cannot use.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from ..store import Review, ReviewRefused
from ._security import bearer_matches
from ._untrusted_json import UntrustedJSONError, load_json

__all__ = ["ReviewRoutes", "review_dict"]

_MAX_ID = 64


def review_dict(r: Review) -> dict[str, Any]:
    return {
        "id": r.id,
        "platform": r.platform,
        "output": r.output,
        "chat": r.chat,
        "in_reply_to": r.in_reply_to,
        "text": r.text,
        "state": r.shown_state,
        "created": r.created,
        "expires": r.expires,
        "decided": r.decided,
        "result": r.result,
    }


def _error(status: int, message: str, **headers: str) -> web.Response:
    return web.json_response({"error": message}, status=status, headers=headers or None)


class ReviewRoutes:
    """The two routes, on the hub's review store."""

    def __init__(self, hub: Any) -> None:
        self.hub = hub

    def add_to(self, app: web.Application) -> None:
        app.router.add_get("/reviews", self.list)
        app.router.add_post("/reviews/{id}", self.decide)

    def _refusal(self, request: web.Request) -> web.Response | None:
        token = self.hub.config.http.token
        if not token:
            return _error(404, f"{request.path} is off: set [http] token to decide on held posts")
        if not bearer_matches(request, token):
            return _error(
                401,
                f"{request.path} needs Authorization: Bearer TOKEN (the [http] token)",
                **{"WWW-Authenticate": "Bearer"},
            )
        return None

    async def list(self, request: web.Request) -> web.Response:
        refused = self._refusal(request)
        if refused is not None:
            return refused
        state = request.query.get("state")
        reviews = await self.hub.stores.reviews.list(
            state=state if state in ("pending", "approved", "posted") else None
        )
        return web.json_response({"reviews": [review_dict(r) for r in reviews]})

    async def decide(self, request: web.Request) -> web.Response:
        refused = self._refusal(request)
        if refused is not None:
            return refused
        review_id = request.match_info["id"]
        if len(review_id) > _MAX_ID:
            return _error(400, f"review id is longer than {_MAX_ID} characters")
        try:
            body = load_json(await request.read())
        except (UntrustedJSONError, UnicodeDecodeError, ValueError) as e:
            return _error(400, f"the body is not JSON: {e}")
        if not isinstance(body, dict) or not isinstance(body.get("approve"), bool):
            return _error(400, 'the body must be {"approve": true|false} (and "text" to post an edit)')
        text = body.get("text")
        if text is not None and (not isinstance(text, str) or not body["approve"]):
            return _error(400, '"text" is the edited post, a string, and goes with "approve": true only')
        try:
            review = await self.hub.stores.reviews.decide(review_id, approve=body["approve"], text=text)
        except ReviewRefused as e:
            return _error(404 if e.missing else 409, str(e))
        return web.json_response({"review": review_dict(review)})
