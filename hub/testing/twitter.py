"""A fake X (Twitter) API v2 subset for tweepy's ``AsyncClient``.

tweepy hard-codes ``https://api.twitter.com``; ``patch_async_client`` gives a client a
session that rewrites that host to this server::

    async with FakeTwitter() as tw:
        client = tweepy.asynchronous.AsyncClient(bearer_token="b", consumer_key="ck", ...)
        tw.patch_async_client(client)
        tid = tw.push_mention("@hubbot hi", author_id="42", author_username="alice")
        resp = await client.get_users_mentions(tw.user_id, since_id=..., user_auth=True)

Endpoints (names for ``fail_next``/``calls``): ``GET /2/users/me``,
``GET /2/users/:id/mentions``, ``POST /2/tweets``. Every answer carries
``x-rate-limit-limit/remaining/reset`` per endpoint over a 15-minute window; an exhausted
endpoint answers 429 by itself (set ``rate_limits`` low to test polling discipline).
Text is measured like twitter-text (weighted, URLs 23); over 280 answers 403 as X does.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web
from yarl import URL

from .fakes import Failure, FakeServer, Recorded, loopback_resolver

MEDIA_HOST = "pbs.twimg.com"
"""Pictures are served under X's own media host name, on this fake's port: the extension
under test gets ``FakeTwitter.resolve`` (that name, and only it, is 127.0.0.1)."""

__all__ = ["FakeTwitter", "TwitterState", "weighted_length"]

MAX_WEIGHTED_LENGTH = 280
WINDOW_S = 15 * 60
DEFAULT_RATE_LIMITS = {
    "GET /2/users/me": 75,
    "GET /2/users/:id/mentions": 180,
    "POST /2/tweets": 100,
}
_REAL_HOSTS = {"api.twitter.com", "api.x.com", "upload.twitter.com"}
_APP_ONLY_FORBIDDEN = (
    "Authenticating with OAuth 2.0 Application-Only is forbidden for this endpoint.  "
    "Supported authentication types are [OAuth 1.0a User Context, OAuth 2.0 User Context]."
)
_TWEET_FIELDS = {
    "author_id",
    "created_at",
    "conversation_id",
    "in_reply_to_user_id",
    "referenced_tweets",
    "lang",
    "entities",
    "public_metrics",
}


@dataclass
class TwitterState:
    """Everything the fake knows. ``tweets``: id -> full tweet (mentions and the bot's own);
    ``sent``: the bot's tweets (``id``, ``text``, ``in_reply_to``, ``json``)."""

    user_id: str
    username: str
    name: str
    users: dict[str, dict[str, Any]] = field(default_factory=dict)
    tweets: dict[str, dict[str, Any]] = field(default_factory=dict)
    mentions: list[str] = field(default_factory=list)
    sent: list[dict[str, Any]] = field(default_factory=list)
    requests: list[Recorded] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    windows: dict[str, tuple[float, int]] = field(default_factory=dict)
    next_id: int = 1_860_000_000_000_000_000
    media: dict[str, dict[str, Any]] = field(default_factory=dict)
    """media_key → its ``includes.media`` object; its bytes under ``media_bytes``."""
    media_bytes: dict[str, bytes] = field(default_factory=dict)
    uploads: list[dict[str, Any]] = field(default_factory=list)
    """What ``POST /1.1/media/upload.json`` received: ``media_id``, ``filename``, ``data``, ``auth``."""


class FakeTwitter(FakeServer):
    """Fake X API v2. Attributes: ``user_id``, ``username``, ``state``, ``sent``,
    ``requests``, ``auth_kinds`` (``"oauth1"``/``"bearer"``/``"none"`` per request).

    ``bearer_is_app_only`` (default True): a Bearer token is an app-only token, refused on
    ``/2/users/me`` and ``POST /2/tweets`` like X refuses it; those need OAuth 1.0a
    (``user_auth=True``). ``rate_limits`` overrides per-endpoint limits per window.
    """

    def __init__(
        self,
        *,
        user_id: str = "1500000000000000001",
        username: str = "hubbot",
        name: str = "Hub Bot",
        bearer_is_app_only: bool = True,
        rate_limits: dict[str, int] | None = None,
    ) -> None:
        super().__init__()
        self.state = TwitterState(user_id=user_id, username=username, name=name)
        self.state.users[user_id] = {"id": user_id, "name": name, "username": username}
        self.bearer_is_app_only = bearer_is_app_only
        self.rate_limits = {**DEFAULT_RATE_LIMITS, **(rate_limits or {})}
        self._sessions: list[_RewritingSession] = []
        self.resolve = loopback_resolver(MEDIA_HOST)

    @property
    def user_id(self) -> str:
        return self.state.user_id

    @property
    def username(self) -> str:
        return self.state.username

    @property
    def auth_kinds(self) -> list[str]:
        return [_auth_kind(r.headers) for r in self.requests]

    # -- inbound events --------------------------------------------------------------------

    def _new_id(self) -> str:
        self.state.next_id += 1_000_000  # increasing, like snowflakes
        return str(self.state.next_id)

    def push_mention(
        self,
        text: str,
        author_id: str,
        author_username: str,
        *,
        author_name: str | None = None,
        in_reply_to: str | None = None,
    ) -> str:
        """Someone mentions the bot (``text`` should contain ``@username``); returns its id.

        ``in_reply_to`` makes it a reply (to one of the bot's tweets, say).
        """
        author_id = str(author_id)
        self.state.users[author_id] = {
            "id": author_id,
            "name": author_name or author_username,
            "username": author_username,
        }
        tweet = self._tweet(text, author_id, in_reply_to=in_reply_to)
        self.state.mentions.append(tweet["id"])
        self._notify()
        return tweet["id"]

    def _tweet(self, text: str, author_id: str, *, in_reply_to: str | None) -> dict[str, Any]:
        tid = self._new_id()
        tweet: dict[str, Any] = {
            "id": tid,
            "text": text,
            "edit_history_tweet_ids": [tid],
            "author_id": author_id,
            "created_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z"),
            "conversation_id": tid,
            "lang": "en",
        }
        if in_reply_to is not None:
            parent = self.state.tweets.get(in_reply_to)
            tweet["referenced_tweets"] = [{"type": "replied_to", "id": in_reply_to}]
            if parent is not None:
                tweet["conversation_id"] = parent["conversation_id"]
                tweet["in_reply_to_user_id"] = parent["author_id"]
        self.state.tweets[tid] = tweet
        return tweet

    # -- client wiring ---------------------------------------------------------------------

    def patch_async_client(self, client: Any) -> Any:
        """Route a ``tweepy.asynchronous.AsyncClient``'s requests to this fake.

        tweepy's ``request`` uses ``self.session or aiohttp.ClientSession()`` with the
        absolute ``https://api.twitter.com`` URL. The client's class is swapped for a
        subclass whose ``session`` property always yields a rewriting session: assigning
        a real ``aiohttp.ClientSession`` later wraps it, assigning None keeps the fake's.
        Returns the rewriting session; the fake closes the sessions it made on stop.
        """
        fake = self
        cls = type(client)
        if not getattr(cls, "_fake_twitter_patched", False):

            def get(obj: Any) -> Any:
                return obj.__dict__["_fake_session"]

            def set_(obj: Any, value: Any) -> None:
                current = obj.__dict__.get("_fake_session")
                if isinstance(value, _RewritingSession):
                    obj.__dict__["_fake_session"] = value
                elif value is None and current is not None:
                    return
                else:
                    obj.__dict__["_fake_session"] = obj.__dict__["_fake_twitter"]._session_for(value)

            cls = type(
                f"Fake{cls.__name__}",
                (cls,),
                {
                    "session": property(get, set_),
                    "_fake_twitter_patched": True,
                },
            )
        existing = client.__dict__.pop("session", None)
        client.__dict__["_fake_twitter"] = fake
        client.__dict__["_fake_session"] = fake._session_for(existing)
        client.__class__ = cls
        return client.session

    def _session_for(self, session: aiohttp.ClientSession | None) -> _RewritingSession:
        rewriting = _RewritingSession(self, session)
        self._sessions.append(rewriting)
        return rewriting

    def rewrite(self, url: str | URL) -> str | URL:
        """``https://api.twitter.com/2/...`` -> this server, keeping the encoded query."""
        u = url if isinstance(url, URL) else URL(url)
        if u.host not in _REAL_HOSTS:
            return url
        return URL.build(
            scheme="http",
            host=self.host,
            port=self.port,
            path=u.raw_path,
            query_string=u.raw_query_string,
            encoded=True,
        )

    async def _before_cleanup(self) -> None:
        for session in self._sessions:
            await session.close()

    # -- server ----------------------------------------------------------------------------

    def _build_app(self) -> web.Application:
        app = web.Application()
        routes = [
            ("GET", "/2/users/me", "GET /2/users/me", self._me),
            ("GET", "/2/users/{id}/mentions", "GET /2/users/:id/mentions", self._mentions),
            ("POST", "/2/tweets", "POST /2/tweets", self._create_tweet),
        ]
        for method, path, name, handler in routes:
            app.router.add_route(method, path, self._wrap(name, handler))
        app.router.add_post("/1.1/media/upload.json", self._upload)
        app.router.add_get("/media/{key}", self._media_file)
        app.router.add_route("*", "/{tail:.*}", self._wrap("unknown", self._unknown))
        return app

    def _wrap(self, name: str, handler: Any) -> Any:
        async def wrapped(request: web.Request) -> web.Response:
            params: dict[str, Any] = dict(request.query)
            if request.can_read_body:
                try:
                    params.update(await request.json())
                except ValueError:
                    pass
            rec = self._record_request(
                name if name != "unknown" else f"{request.method} {request.path}", request, params
            )
            response = self._answer(name, request, params, handler)
            rec.status = response.status
            self._notify()
            return response

        return wrapped

    def _answer(self, name: str, request: web.Request, params: dict[str, Any], handler: Any) -> web.Response:
        auth = _auth_kind(request.headers)
        if auth == "none":
            return _problem(401, "Unauthorized", "Unauthorized")
        limit = self.rate_limits.get(name, 1000)
        start, used = self.state.windows.get(name, (time.time(), 0))
        if time.time() - start >= WINDOW_S:
            start, used = time.time(), 0
        reset = int(start + WINDOW_S)
        failure = self._take_failure(name)
        if failure is not None:
            if failure.status == 429:
                reset = int(time.time() + (failure.retry_after or 0)) + 1
                response = _problem(429, "Too Many Requests", "Too Many Requests")
                _limit_headers(response, limit, 0, reset)
                return response
            response = _problem(failure.status, _phrase(failure.status), failure.description or _phrase(failure.status))
            _limit_headers(response, limit, max(limit - used, 0), reset)
            return response
        if used >= limit:
            response = _problem(429, "Too Many Requests", "Too Many Requests")
            _limit_headers(response, limit, 0, reset)
            return response
        used += 1
        self.state.windows[name] = (start, used)
        if auth == "bearer" and self.bearer_is_app_only and name in ("GET /2/users/me", "POST /2/tweets"):
            response = _problem(
                403,
                "Unsupported Authentication",
                _APP_ONLY_FORBIDDEN,
                type_="https://api.twitter.com/2/problems/unsupported-authentication",
            )
        else:
            response = handler(request, params)
        _limit_headers(response, limit, limit - used, reset)
        return response

    def _unknown(self, request: web.Request, params: dict[str, Any]) -> web.Response:
        return _problem(404, "Not Found Error", "Sorry, that page does not exist.")

    def _me(self, request: web.Request, params: dict[str, Any]) -> web.Response:
        return _json({"data": self.state.users[self.user_id]})

    def _mentions(self, request: web.Request, params: dict[str, Any]) -> web.Response:
        max_results = int(params.get("max_results", 10))
        if not 5 <= max_results <= 100:
            return _invalid(
                "max_results",
                str(max_results),
                f"The `max_results` query parameter value [{max_results}] is not between 5 and 100",
            )
        ids = sorted(
            (t for t in self.state.mentions if request.match_info["id"] == self.user_id),
            key=int,
            reverse=True,
        )
        for bound, keep in (
            ("since_id", lambda t, b: int(t) > b),
            ("until_id", lambda t, b: int(t) < b),
            ("pagination_token", lambda t, b: int(t) < b),
        ):
            if params.get(bound):
                ids = [t for t in ids if keep(t, int(params[bound]))]
        page, rest = ids[:max_results], ids[max_results:]
        if not page:
            return _json({"meta": {"result_count": 0}})
        expansions = _csv(params.get("expansions"))
        fields = _csv(params.get("tweet.fields")) & _TWEET_FIELDS
        if "author_id" in expansions:
            fields.add("author_id")
        tweets = [self.state.tweets[t] for t in page]
        body: dict[str, Any] = {
            "data": [
                {
                    "id": t["id"],
                    "text": t["text"],
                    "edit_history_tweet_ids": t["edit_history_tweet_ids"],
                    **{k: t[k] for k in fields if k in t},
                }
                for t in tweets
            ],
            "meta": {"result_count": len(page), "newest_id": page[0], "oldest_id": page[-1]},
        }
        if rest:
            body["meta"]["next_token"] = page[-1]
        if "author_id" in expansions:
            authors = dict.fromkeys(t["author_id"] for t in tweets)
            body["includes"] = {"users": [self.state.users[a] for a in authors]}
        self._add_media(body, tweets, expansions)
        return _json(body)

    # -- media: pictures on mentions (served at /media/KEY), v1.1 uploads -------------------

    def push_mention_with_media(
        self, text: str, author_id: str, author_username: str, pictures: list[tuple[str, bytes]]
    ) -> str:
        """A mention carrying ``pictures`` (``(file name, bytes)``), served by this fake."""
        tid = self.push_mention(text, author_id, author_username)
        keys = []
        for name, data in pictures:
            key = f"3_{self._new_id()}"
            self.state.media[key] = {
                "media_key": key,
                "type": "photo",
                "width": 10,
                "height": 10,
                "url": f"http://{MEDIA_HOST}:{self.port}/media/{key}?name={name}",
            }
            self.state.media_bytes[key] = data
            keys.append(key)
        self.state.tweets[tid]["attachments"] = {"media_keys": keys}
        return tid

    def _add_media(self, body: dict[str, Any], tweets: list[dict[str, Any]], expansions: set[str]) -> None:
        if "attachments.media_keys" not in expansions:
            return
        keys = [k for t in tweets for k in (t.get("attachments") or {}).get("media_keys", [])]
        for data, tweet in zip(body["data"], tweets, strict=True):
            if "attachments" in tweet:
                data["attachments"] = tweet["attachments"]
        if keys:
            body.setdefault("includes", {})["media"] = [self.state.media[k] for k in keys]

    async def _media_file(self, request: web.Request) -> web.Response:
        data = self.state.media_bytes.get(request.match_info["key"])
        if data is None:
            return web.Response(status=404)
        return web.Response(body=data, content_type="image/png")

    async def _upload(self, request: web.Request) -> web.Response:
        auth = _auth_kind(request.headers)
        form = await request.post()
        media = form.get("media")
        if auth != "oauth1":
            return _json({"errors": [{"code": 32, "message": "Could not authenticate you."}]}, 401)
        if not isinstance(media, web.FileField):
            return _json({"errors": [{"code": 38, "message": "media parameter is missing."}]}, 400)
        data = media.file.read()
        media_id = self._new_id()
        self.state.uploads.append({"media_id": media_id, "filename": media.filename, "data": data, "auth": auth})
        self._notify()
        return _json(
            {
                "media_id": int(media_id),
                "media_id_string": media_id,
                "size": len(data),
                "expires_after_secs": 86400,
                "image": {"image_type": media.content_type, "w": 1, "h": 1},
            }
        )

    def _create_tweet(self, request: web.Request, params: dict[str, Any]) -> web.Response:
        text = params.get("text") or ""
        if not text and not params.get("media"):
            return _invalid("text", "", "Tweet text is required")  # X: 400 invalid request
        if weighted_length(text) > MAX_WEIGHTED_LENGTH:
            return _problem(
                403,
                "Forbidden",
                "Your Tweet text is too long. For more "
                "information on how X determines text length see "
                "https://github.com/twitter/twitter-text.",
            )
        if any(s["text"] == text for s in self.state.sent):
            return _problem(403, "Forbidden", "You are not allowed to create a Tweet with duplicate content.")
        in_reply_to = (params.get("reply") or {}).get("in_reply_to_tweet_id")
        if in_reply_to is not None and in_reply_to not in self.state.tweets:
            return _problem(
                403, "Forbidden", "You attempted to reply to a Tweet that is deleted or not visible to you."
            )
        tweet = self._tweet(text, self.user_id, in_reply_to=in_reply_to)
        self.state.sent.append({"id": tweet["id"], "text": text, "in_reply_to": in_reply_to, "json": params})
        return _json({"data": {"id": tweet["id"], "text": text, "edit_history_tweet_ids": [tweet["id"]]}}, 201)


class _RewritingSession:
    """Enough of ``aiohttp.ClientSession`` for tweepy: ``request`` (an async context
    manager) and ``close``, sending api.twitter.com URLs to the fake."""

    def __init__(self, fake: FakeTwitter, session: aiohttp.ClientSession | None) -> None:
        self._fake = fake
        self._session = session

    def request(self, method: str, url: str | URL, **kwargs: Any) -> Any:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
        return self._session.request(method, self._fake.rewrite(url), **kwargs)

    @property
    def closed(self) -> bool:
        return self._session is None or self._session.closed

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()


# -- helpers -----------------------------------------------------------------------------------


def weighted_length(text: str) -> int:
    """Tweet length as X counts it: twitter-text v3 (its Python port, checked against
    twitter-text's conformance file in test_twitter_text.py)."""
    from twitter_text import parse_tweet
    from twitter_text.config import config as twitter_text_configs

    return int(parse_tweet(text, twitter_text_configs["version3"]).weightedLength)


def _auth_kind(headers: Any) -> str:
    value = headers.get("Authorization", "")
    if value.startswith("OAuth "):
        return "oauth1"
    if value.startswith("Bearer "):
        return "bearer"
    return "none"


def _csv(value: Any) -> set[str]:
    return {v for v in str(value or "").split(",") if v}


def _phrase(status: int) -> str:
    from http import HTTPStatus

    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=json.dumps(body).encode(), status=status, content_type="application/json", charset="utf-8")


def _problem(status: int, title: str, detail: str, *, type_: str = "about:blank") -> web.Response:
    return _json({"title": title, "detail": detail, "type": type_, "status": status}, status)


def _invalid(param: str, value: str, message: str) -> web.Response:
    return _json(
        {
            "errors": [{"parameters": {param: [value]}, "message": message}],
            "title": "Invalid Request",
            "detail": "One or more parameters to your request was invalid.",
            "type": "https://api.twitter.com/2/problems/invalid-request",
        },
        400,
    )


def _limit_headers(response: web.Response, limit: int, remaining: int, reset: int) -> None:
    response.headers.update(
        {
            "x-rate-limit-limit": str(limit),
            "x-rate-limit-remaining": str(remaining),
            "x-rate-limit-reset": str(reset),
        }
    )
