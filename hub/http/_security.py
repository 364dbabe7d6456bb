"""What every request to the endpoint is given or checked for, in one place: the security
headers on every response, the ``[http] token`` as a bearer, and who the client is behind
the proxies ``[http] trusted_proxies`` names.

The headers are set by one hook, `add_security_headers()`, on aiohttp's
``on_response_prepare`` signal: it sees every response just before its headers go out,
those a handler returns, those raised as exceptions (a 303, a 404 from the router, a 405)
and streams a handler prepares itself (``/events``), which a middleware could no longer change.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterable, Sequence

from aiohttp import web

__all__ = [
    "API_CSP",
    "DASHBOARD_CSP",
    "add_security_headers",
    "set_security_headers",
    "bearer_matches",
    "client_address",
    "parse_networks",
]

API_CSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'"
"""The JSON and text routes load nothing and may not be framed."""
DASHBOARD_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
)
"""The dashboard's pages: the hub's own script and styles only, never framed."""


async def add_security_headers(request: web.BaseRequest, response: web.StreamResponse) -> None:
    """Every response: no sniffing, no framing, a CSP, no referrer to other sites, and a
    ``Server`` header that does not tell the versions of Python and aiohttp."""
    set_security_headers(request.path, response)


def set_security_headers(path: str, response: web.StreamResponse) -> None:
    """The headers of `add_security_headers()` on ``response``, an answer to ``path``
    (also for answers no route gave: aiohttp's own 400 to a request it could not parse)."""
    headers = response.headers
    dashboard = path == "/ui" or path.startswith("/ui/")
    headers["Content-Security-Policy"] = DASHBOARD_CSP if dashboard else API_CSP
    headers["X-Frame-Options"] = "DENY"
    headers["X-Content-Type-Options"] = "nosniff"
    headers["Referrer-Policy"] = "same-origin"
    headers["Server"] = "hub"
    if dashboard and not path.startswith("/ui/static/"):
        headers.setdefault("Cache-Control", "no-store")  # pages show conversations: never cached


def bearer_matches(request: web.BaseRequest, token: str) -> bool:
    """Whether the request carries ``Authorization: Bearer TOKEN`` (constant time; never for
    an empty token)."""
    if not token:
        return False
    auth = request.headers.get("Authorization", "")
    scheme, _, given = auth.partition(" ")
    return auth.isascii() and scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(entries: Iterable[str]) -> tuple[Network, ...]:
    """``trusted_proxies`` entries (an address or a CIDR network) as networks.

    Raises:
        ValueError: an entry that is neither, naming it.
    """
    out = []
    for entry in entries:
        try:
            out.append(ipaddress.ip_network(entry.strip(), strict=False))
        except ValueError:
            raise ValueError(f"{entry!r} is not an IP address or a network like 10.0.0.0/8") from None
    return tuple(out)


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    text = text.strip()
    if text.startswith("[") and "]" in text:  # [v6]:port
        text = text[1 : text.index("]")]
    elif text.count(":") == 1:  # v4:port
        text = text.partition(":")[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    mapped = getattr(address, "ipv4_mapped", None)
    return mapped if mapped is not None else address


def client_address(request: web.BaseRequest, trusted: Sequence[Network]) -> str:
    """The client's address: the peer's, unless the peer is a trusted proxy; then the last
    address in ``X-Forwarded-For`` that a trusted proxy did not add (read from the right, as
    each proxy appends the address it saw). An untrusted peer's ``X-Forwarded-For`` is ignored,
    so nobody can choose the address they are counted under; a malformed hop gives a name of
    its own (``unknown (malformed X-Forwarded-For via PROXY)``), never the proxy's address."""
    peer = request.remote or "?"
    if not trusted:
        return peer
    current = _address(peer)
    hops = [h for part in request.headers.getall("X-Forwarded-For", []) for h in part.split(",")]
    while current is not None and any(current in net for net in trusted) and hops:
        nxt = _address(hops.pop())
        if nxt is None:
            # a malformed hop behind a trusted proxy: the client is unknown, and never counted
            # as the proxy itself (whose own address an operator on its host logs in from)
            return f"unknown (malformed X-Forwarded-For via {current})"
        current = nxt
    return str(current) if current is not None else peer
