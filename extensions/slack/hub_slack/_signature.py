"""The Events API's proof that a request is Slack's: ``X-Slack-Signature``, the HMAC-SHA256 of
``v0:<timestamp>:<body>`` keyed by the signing secret, checked by slack-sdk's
``SignatureVerifier``.

The hub asks `SlackSignature.headers()` before it reads the body: a request without the
headers, or whose timestamp is further than ``max_request_age`` from now, is refused (a replay
of a captured request), so nothing of its body is read. The body, capped at ``[http]
max_body``, is then checked against the signature before anything parses it. A signature seen
once already within the window is refused too: the same request sent again.

The HMAC is taken over the body's bytes as they came: slack-sdk's verifier decodes the body
first, and a signed body that is not UTF-8 would raise there (a 500) instead of reaching the
parser that refuses it with a 400.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping

__all__ = ["SlackSignature", "TIMESTAMP_HEADER", "SIGNATURE_HEADER"]

TIMESTAMP_HEADER = "X-Slack-Request-Timestamp"
SIGNATURE_HEADER = "X-Slack-Signature"
_SEEN_MAX = 10_000


class SlackSignature:
    """A [`hub.RouteVerifier`][hub.RouteVerifier] for Slack's signed requests."""

    def __init__(self, signing_secret: str, *, max_age: float = 300.0, clock: Callable[[], float] = time.time) -> None:
        self.max_age = max_age
        self.clock = clock
        self._secret = signing_secret.encode()
        self._seen: OrderedDict[str, float] = OrderedDict()  # signature -> when it expires

    def headers(self, headers: Mapping[str, str]) -> str | None:
        stamp, signature = headers.get(TIMESTAMP_HEADER), headers.get(SIGNATURE_HEADER)
        if not stamp or not signature:
            return f"{TIMESTAMP_HEADER} and {SIGNATURE_HEADER} are required (a request signed by Slack)"
        try:
            age = self.clock() - int(stamp)
        except ValueError:
            return f"{TIMESTAMP_HEADER} is not a number of seconds"
        if abs(age) > self.max_age:
            return f"{TIMESTAMP_HEADER} is {age:.0f}s from now: a replayed or delayed request is refused"
        return None

    def body(self, headers: Mapping[str, str], body: bytes) -> str | None:
        stamp, signature = headers.get(TIMESTAMP_HEADER, ""), headers.get(SIGNATURE_HEADER, "")
        if not self._is_valid(body, stamp, signature):
            return f"{SIGNATURE_HEADER} does not match the body (is signing_secret the app's Signing Secret?)"
        now = self.clock()
        while self._seen and (next(iter(self._seen.values())) < now or len(self._seen) > _SEEN_MAX):
            self._seen.popitem(last=False)
        if signature in self._seen:
            return "this signed request was received before: a replay is refused"
        self._seen[signature] = now + self.max_age
        return None

    def _is_valid(self, body: bytes, stamp: str, signature: str) -> bool:
        """slack-sdk's ``SignatureVerifier.is_valid``, over bytes (the freshness is checked by
        `headers()`, before the body is read)."""
        try:
            age = self.clock() - int(stamp)
        except ValueError:
            return False
        if abs(age) > self.max_age:
            return False
        mac = hmac.new(self._secret, b"v0:" + stamp.encode() + b":" + body, hashlib.sha256)
        return hmac.compare_digest("v0=" + mac.hexdigest(), signature)
