"""tweepy's ``AsyncClient``, made to remember rate-limit headers and to talk to another host.

tweepy returns parsed bodies and drops the headers, but polling politely needs
``x-rate-limit-remaining`` and ``x-rate-limit-reset`` of every answer: `TwitterClient`
keeps the last ones per endpoint. ``api_base_url`` (a proxy, or a loopback fake in tests)
is applied by the session after tweepy signs the request for ``api.twitter.com``, so
OAuth 1.0a signatures stay valid for a proxy that forwards to X.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import aiohttp
import tweepy
from tweepy.asynchronous import AsyncClient
from yarl import URL

from hub import MediaFile
from hub.platform import PermanentSendError, RateLimited, TransientSendError

if TYPE_CHECKING:
    from . import TwitterSettings

__all__ = ["TwitterClient", "RateLimitState", "make_client", "BaseURLSession", "send_error", "reset_in", "upload_media"]

_ID = re.compile(r"(?<=.)/\d+(?=/|$)")  # not the leading /2 (the API version)
REQUEST_TIMEOUT = 30.0


@dataclass(slots=True, frozen=True)
class RateLimitState:
    """One endpoint's rate-limit headers as of its last answer. ``reset`` is epoch seconds."""

    limit: int | None
    remaining: int | None
    reset: float | None

    @classmethod
    def from_headers(cls, headers: Any) -> RateLimitState | None:
        def num(name: str) -> int | None:
            try:
                return int(headers.get(name))
            except (TypeError, ValueError):
                return None

        state = cls(num("x-rate-limit-limit"), num("x-rate-limit-remaining"), num("x-rate-limit-reset"))
        return state if state.remaining is not None or state.reset is not None else None


def endpoint(method: str, route: str) -> str:
    """``GET /2/users/123/mentions`` -> ``GET /2/users/:id/mentions`` (how X names its limits)."""
    return f"{method} {_ID.sub('/:id', route)}"


class TwitterClient(AsyncClient):
    """``AsyncClient`` that records each endpoint's last rate-limit headers in ``rate_limits``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rate_limits: dict[str, RateLimitState] = {}

    async def request(
        self, method: str, route: str, params: Any = None, json: Any = None, user_auth: bool = False
    ) -> Any:
        key = endpoint(method, route)
        try:
            response = await super().request(method, route, params=params, json=json, user_auth=user_auth)
        except tweepy.HTTPException as e:
            self._note(key, getattr(e, "response", None))
            raise
        self._note(key, response)
        return response

    def _note(self, key: str, response: Any) -> None:
        state = RateLimitState.from_headers(getattr(response, "headers", None) or {})
        if state is not None:
            self.rate_limits[key] = state


class BaseURLSession:
    """Enough of ``aiohttp.ClientSession`` for tweepy (``request``, ``close``, ``closed``):
    requests for api.twitter.com go to ``base_url`` instead; a timeout bounds every request."""

    _HOSTS = frozenset({"api.twitter.com", "api.x.com", "upload.twitter.com"})

    def __init__(self, base_url: str = "", *, timeout: float = REQUEST_TIMEOUT) -> None:
        self._base = URL(base_url.rstrip("/")) if base_url else None
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout))

    def rewrite(self, url: str | URL) -> str | URL:
        if self._base is None or self._base.host is None:  # a host is checked with the settings
            return url
        u = url if isinstance(url, URL) else URL(url)
        if u.host not in self._HOSTS:
            return url
        return URL.build(
            scheme=self._base.scheme,
            host=self._base.host,
            port=self._base.explicit_port,
            path=self._base.raw_path.rstrip("/") + u.raw_path,
            query_string=u.raw_query_string,
            encoded=True,
        )

    def request(self, method: str, url: str | URL, **kwargs: Any) -> Any:
        return self._session.request(method, self.rewrite(url), **kwargs)

    @property
    def closed(self) -> bool:
        return self._session.closed

    async def close(self) -> None:
        await self._session.close()


UPLOAD_URL = "https://upload.twitter.com/1.1/media/upload.json"


async def upload_media(client: AsyncClient, file: MediaFile) -> str:
    """Upload one picture through v1.1 ``media/upload`` (tweepy's ``AsyncClient`` has no
    upload of its own), signed with the client's OAuth 1.0a keys; returns the ``media_id``.

    Raises:
        tweepy.HTTPException: X refused it (mapped like a post's errors by the caller).
    """
    from oauthlib.oauth1 import Client as OAuthClient

    auth = OAuthClient(client.consumer_key, client.consumer_secret, client.access_token, client.access_token_secret)
    # a multipart body is not part of an OAuth 1.0a signature: only the URL and method are
    url, headers, _ = auth.sign(UPLOAD_URL, "POST")
    form = aiohttp.FormData()
    form.add_field("media", file.data, filename=file.name, content_type=file.mime)
    session = client.session or aiohttp.ClientSession()
    try:
        async with session.request("POST", url, data=form, headers=headers) as response:
            if response.status >= 400:
                error = {
                    400: tweepy.BadRequest,
                    401: tweepy.Unauthorized,
                    403: tweepy.Forbidden,
                    404: tweepy.NotFound,
                    429: tweepy.TooManyRequests,
                }.get(response.status)
                if error is None:
                    error = tweepy.TwitterServerError if response.status >= 500 else tweepy.HTTPException
                try:
                    detail = await response.json(content_type=None)
                except ValueError:
                    detail = None
                raise error(response, response_json=detail if isinstance(detail, dict) else {})
            body = await response.json(content_type=None)
    finally:
        if client.session is None:
            await session.close()
    return str(body["media_id_string"])


def make_client(settings: TwitterSettings) -> TwitterClient:
    """The client the extension uses by default: every credential from ``settings``."""

    def secret(name: str) -> str | None:
        return getattr(settings, name).get_secret_value() or None

    return TwitterClient(
        bearer_token=secret("bearer_token"),
        consumer_key=secret("api_key"),
        consumer_secret=secret("api_secret"),
        access_token=secret("access_token"),
        access_token_secret=secret("access_token_secret"),
    )


def reset_in(error: tweepy.HTTPException, *, default: float = 60.0, now: float | None = None) -> float:
    """Seconds until the limit behind a 429 resets (``x-rate-limit-reset``, epoch seconds)."""
    reset = getattr(error, "reset_time", None)
    if reset is None:
        state = RateLimitState.from_headers(getattr(getattr(error, "response", None), "headers", None) or {})
        reset = state.reset if state else None
    if reset is None:
        return default
    # the reset header is whole seconds: wait a second more so the window has really turned
    return max(1.0, float(reset) - (time.time() if now is None else now) + 1.0)


def send_error(error: BaseException) -> BaseException:
    """A posting error as the Governor understands it: wait, retry, or give up."""
    if isinstance(error, tweepy.TooManyRequests):
        # X's posting limits are per account: every conversation waits
        return RateLimited(reset_in(error), scope="global", message=f"X: {_first_line(error)}")
    if isinstance(error, tweepy.TwitterServerError):
        return TransientSendError(f"X: {_first_line(error)}")
    if isinstance(error, tweepy.HTTPException):
        return PermanentSendError(f"X: {_one_line(error)}")
    if isinstance(error, (aiohttp.ClientError, asyncio.TimeoutError, OSError)):
        return TransientSendError(f"X unreachable: {type(error).__name__}: {error}")
    return error


def _first_line(error: BaseException) -> str:
    return str(error).split("\n", 1)[0]


def _one_line(error: BaseException) -> str:
    return " - ".join(line for line in str(error).split("\n") if line)
