"""Who may talk to the bot: dm_policy, the pairing stores (one contract), ``hub pairing``."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from hub import ScriptedModel
from hub.errors import ConfigError
from hub.features import Access, PairingError
from hub.store import InMemoryPairingStore, Pairing
from hub.store.sql import Database, SqlPairingStore
from tests._support.backends import BACKENDS, sql_database
from tests._support.processes import hub_cmd


@pytest.fixture(params=BACKENDS)
async def store(request, tmp_path: Path):
    if request.param == "memory":
        yield InMemoryPairingStore()
        return
    async with sql_database(request.param, tmp_path) as db:
        s = SqlPairingStore(db)
        await s.open()
        yield s


async def test_pairing_gives_one_code_until_approved_then_allows(store) -> None:
    access = Access(store)
    first = await access.check("fake", "u1", "pairing")
    assert first.verdict == "pair" and first.code and first.code in first.message
    again = await access.check("fake", "u1", "pairing")
    assert again.code == first.code  # the same code while it is valid
    other = await access.check("fake", "u2", "pairing")
    assert other.code != first.code
    p = await access.approve(first.code.lower()[:4] + "-" + first.code.lower()[4:])  # as typed
    assert (p.platform, p.user, p.state) == ("fake", "u1", "approved")
    assert (await access.check("fake", "u1", "pairing")).allowed
    assert not (await access.check("other-platform", "u1", "pairing")).allowed  # per platform
    with pytest.raises(PairingError, match="no pending pairing"):
        await access.approve(first.code)  # used up
    assert await access.revoke("u1") == 2  # every platform
    assert not (await access.check("fake", "u1", "pairing")).allowed


async def test_who_asked_for_a_code_is_kept_with_it_redacted_through_approval(store) -> None:
    access = Access(store, redact=lambda t: t.replace("sk-secret", "[REDACTED]"))
    d = await access.check("fake", "u9", "pairing", user_name="Ada sk-secret", user_handle="@ada_l")
    (p,) = await access.list()
    assert (p.user_name, p.user_handle) == ("Ada [REDACTED]", "ada_l")
    approved = await access.approve(d.code)
    assert (approved.user_name, approved.user_handle) == ("Ada [REDACTED]", "ada_l")
    assert (await store.get("fake", "u9")).user_handle == "ada_l"
    await access.check("fake", "u10", "pairing", user_name="  ", user_handle=None)
    assert (await store.get("fake", "u10")).user_name is None


async def test_codes_expire(store) -> None:
    access = Access(store, code_ttl=3600)
    old = Pairing("fake", "u1", "pending", "ABCDEFGH", time.time() - 7200, time.time() - 3600)
    await store.put(old)
    with pytest.raises(PairingError, match="expired"):
        await access.approve("ABCDEFGH")
    fresh = await access.check("fake", "u1", "pairing")
    assert fresh.verdict == "pair" and fresh.code != "ABCDEFGH"


async def test_open_allowlist_and_a_bad_policy(store) -> None:
    access = Access(store)
    assert (await access.check("fake", "anyone", "open")).allowed
    assert (await access.check("fake", "42", "allowlist", [42])).allowed
    assert (await access.check("fake", "43", "allowlist", ["42"])).verdict == "deny"
    assert (await access.check("fake", "42", "pairing", ["42"])).allowed  # listed users need no code
    assert await store.list() == []  # nobody was given a code
    with pytest.raises(ConfigError, match="dm_policy must be one of open, allowlist, pairing, not 'closed'"):
        await access.check("fake", "u", "closed")


async def test_pairings_survive_a_restart(tmp_path: Path) -> None:
    db = Database(tmp_path / "hub.db")
    s = SqlPairingStore(db)
    await s.open()
    code = (await Access(s).check("fake", "u1", "pairing")).code
    await Access(s).approve(code)
    await db.close()
    db = Database(tmp_path / "hub.db")
    s = SqlPairingStore(db)
    await s.open()
    assert (await Access(s).check("fake", "u1", "pairing")).allowed
    await db.close()


async def test_an_unknown_user_gets_a_code_and_after_the_cli_approves_is_answered(
    make_hub, config, tmp_path: Path
) -> None:
    from hub import Hub

    model = ScriptedModel(["<response><output>hello, paired friend</output></response>"])
    (tmp_path / "config.toml").write_text(f'[hub]\ndata_dir = "{config.data_dir}"\n', encoding="utf-8")
    replies: list[str] = []

    async def dm(hub: Hub, user: str, text: str) -> None:  # what a platform extension does with a DM
        decision = await hub.access.check("fakechat", user, "pairing", [])
        if decision.allowed:
            result = await hub.send("cli:session", {"user": user}, text, user=user)
            replies.append(result.text)
        elif decision.message:
            replies.append(decision.message)

    async with make_hub(model) as hub:
        await dm(hub, "mallory", "hi")
        assert len(replies) == 1 and "hub pairing approve" in replies[0]
        assert model.requests == []  # nothing reached the model
        code = replies[0].rsplit(" ", 1)[1]

        rc, out, err = await hub_cmd("pairing", "list", cwd=tmp_path)
        assert rc == 0 and "mallory" in out and "pending" in out and code in out, err
        rc, out, err = await hub_cmd("pairing", "approve", "WRONG123", cwd=tmp_path)
        assert rc == 2 and "no pending pairing has the code 'WRONG123'" in err
        rc, out, err = await hub_cmd("pairing", "approve", code, cwd=tmp_path)
        assert rc == 0 and "approved: fakechat user mallory" in out, err

        await dm(hub, "mallory", "hi again")
        assert replies[1] == "hello, paired friend"
        assert len(model.requests) == 1

        rc, out, err = await hub_cmd("pairing", "revoke", "mallory", cwd=tmp_path)
        assert rc == 0 and "revoked 1 pairing" in out, err
        await dm(hub, "mallory", "still there?")
        assert "hub pairing approve" in replies[2] and len(model.requests) == 1


async def test_strangers_pending_pairings_are_forgotten_after_a_grace(store) -> None:
    """Issue 40, item 21: a stranger who drew a code and never came back is not kept for ever;
    an approved user is, and so is a code still within its grace."""
    from hub.store import PAIRING_GRACE, prune_pairings

    t = 1_700_000_000.0
    await store.put(Pairing("fake", "stranger", "pending", "AAAA1111", t - 10, expires=t - 1))
    await store.put(Pairing("fake", "recent", "pending", "BBBB2222", t, expires=t + PAIRING_GRACE + 60))
    await store.put(Pairing("fake", "friend", "approved", None, t - 10, approved=t - 5))
    assert await prune_pairings(store, now=t + PAIRING_GRACE) == 1
    assert {p.user for p in await store.list()} == {"recent", "friend"}


async def test_pairing_is_per_person_so_a_linked_account_is_approved_and_an_unlinked_one_is_not(store) -> None:
    """Issue 38: an identity linked to an approved one needs no pairing of its own; unlinked
    again, it does."""
    from hub.store import InMemoryStore, People

    people = People(InMemoryStore())
    access = Access(store, people=people)
    code = (await access.check("telegram", "42", "pairing")).code
    assert code is not None
    await access.approve(code)
    assert (await access.check("discord", "77", "pairing")).verdict == "pair"
    await people.redeem(await people.new_code("telegram", "42"), "discord", "77", operator=True)
    assert (await access.check("discord", "77", "pairing")).allowed
    assert (await access.check("discord", "78", "pairing")).verdict == "pair"  # a stranger: still asked
    await people.unlink("discord", "77")
    assert (await access.check("discord", "77", "pairing")).verdict == "pair"
