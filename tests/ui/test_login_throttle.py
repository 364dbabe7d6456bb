"""The login throttle holds back each address that keeps guessing, and behind a trusted proxy
it counts each client by its X-Forwarded-For, so one attacker does not lock the operator out
(issue 24, finding 4); nor do many attackers together (issue 40, finding 26)."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from hub.config import HttpSection

from .conftest import TOKEN, client, dashboard, make_config


async def login_from(base: str, source: str, token: str, **headers: str) -> int:
    """The status of one login posted from the loopback address ``source`` (127.0.0.0/8 is all ours)."""
    connector = aiohttp.TCPConnector(local_addr=(source, 0))
    async with client(connector=connector) as s:
        async with s.post(f"{base}/ui/login", data={"token": token}, headers=headers, allow_redirects=False) as resp:
            return resp.status


async def test_rotating_source_addresses_are_logged_as_guessing_and_lock_nobody_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The probe once found a short token in 610 tries from rotating loopback addresses; tokens
    now have 16 characters or more, so what rotating addresses meet is each address's own limit
    and a warning that someone is guessing, once, never a login closed to the operator."""
    async with dashboard(tmp_path) as d:
        statuses = [await login_from(d.base, f"127.0.{i // 250}.{i % 250 + 2}", f"guess-{i}") for i in range(61)]
        assert statuses == [401] * 61  # each address tried once: under its own limit
        assert await login_from(d.base, "127.0.9.9", TOKEN) == 303
    surges = [r for r in caplog.records if "someone is guessing" in r.getMessage()]
    assert len(surges) == 1 and surges[0].levelname == "WARNING"


async def test_behind_a_trusted_proxy_each_client_is_counted_by_its_forwarded_address(tmp_path: Path) -> None:
    cfg = make_config(tmp_path)
    cfg.http = HttpSection(port=0, token=TOKEN, trusted_proxies=["127.0.0.1"])
    async with dashboard(tmp_path, config=cfg) as d:
        attacker = {"X-Forwarded-For": "203.0.113.9"}
        for i in range(10):
            assert await login_from(d.base, "127.0.0.1", f"guess-{i}", **attacker) == 401
        assert await login_from(d.base, "127.0.0.1", TOKEN, **attacker) == 429
        # the operator, through the same proxy, is not locked out by the attacker's tries
        assert await login_from(d.base, "127.0.0.1", TOKEN, **{"X-Forwarded-For": "198.51.100.7"}) == 303
        # a client that is not the proxy cannot choose the address it is counted under
        for i in range(10):
            assert await login_from(d.base, "127.0.0.5", f"guess-{i}", **{"X-Forwarded-For": f"192.0.2.{i}"}) == 401
        assert await login_from(d.base, "127.0.0.5", TOKEN, **{"X-Forwarded-For": "192.0.2.200"}) == 429


async def test_without_trusted_proxies_x_forwarded_for_is_ignored(tmp_path: Path) -> None:
    async with dashboard(tmp_path) as d:
        for i in range(10):
            assert await login_from(d.base, "127.0.0.3", f"guess-{i}", **{"X-Forwarded-For": f"192.0.2.{i}"}) == 401
        assert await login_from(d.base, "127.0.0.3", TOKEN, **{"X-Forwarded-For": "198.51.100.7"}) == 429


async def test_the_right_token_is_never_refused_for_other_addresses_failures(tmp_path: Path) -> None:
    """Issue 40, finding 26: 63 wrong tokens from 7 addresses (each under its own limit) closed
    the login for everyone, the operator's right token included."""
    async with dashboard(tmp_path) as d:
        for i in range(63):
            assert await login_from(d.base, f"127.0.7.{i % 7 + 2}", f"guess-{i}") == 401
        assert await login_from(d.base, "127.0.9.9", TOKEN) == 303  # the operator, elsewhere
        assert await login_from(d.base, "127.0.7.2", TOKEN) == 303  # under its own limit: the right token works


async def test_a_malformed_forwarded_address_is_not_counted_under_the_proxys_own(tmp_path: Path) -> None:
    cfg = make_config(tmp_path)
    cfg.http = HttpSection(port=0, token=TOKEN, trusted_proxies=["127.0.0.1"])
    async with dashboard(tmp_path, config=cfg) as d:
        for i in range(10):
            assert await login_from(d.base, "127.0.0.1", f"guess-{i}", **{"X-Forwarded-For": "not-an-address"}) == 401
        assert await login_from(d.base, "127.0.0.1", TOKEN, **{"X-Forwarded-For": "999.1.1.1"}) == 429
        # the proxy's own address (the operator on the proxy's host) is not locked out by them
        assert await login_from(d.base, "127.0.0.1", TOKEN) == 303
