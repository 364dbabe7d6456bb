"""One contract, every MemoryStore."""

import pytest

from hub.store import InMemoryStore, MemoryStore
from hub.store.sql import Database, SqlMemoryStore
from tests._support.backends import BACKENDS, sql_database


@pytest.fixture(params=BACKENDS)
async def store(request, tmp_path):
    if request.param == "memory":
        s: MemoryStore = InMemoryStore()
        await s.open()
        yield s
        return
    async with sql_database(request.param, tmp_path) as db:
        s = SqlMemoryStore(db)
        await s.open()
        yield s


async def test_get_set_delete(store: MemoryStore) -> None:
    assert await store.get("context:a") is None
    await store.set("context:a", {"n": 1, "list": [1, "two", None], "ok": True})
    assert await store.get("context:a") == {"n": 1, "list": [1, "two", None], "ok": True}
    await store.set("context:a", "replaced")
    assert await store.get("context:a") == "replaced"
    await store.delete("context:a")
    await store.delete("context:a")
    assert await store.get("context:a") is None


async def test_values_are_copies(store: MemoryStore) -> None:
    value = {"items": [1]}
    await store.set("k", value)
    value["items"].append(2)
    got = await store.get("k")
    got["items"].append(3)
    assert await store.get("k") == {"items": [1]}


async def test_nested_values_are_copies_and_a_bad_one_deep_inside_is_named(store: MemoryStore) -> None:
    value = {"messages": [{"role": "user", "parts": ["a"]}], "meta": {"seen": {"n": 1}}}
    await store.set("k", value)
    value["messages"][0]["parts"].append("b")
    value["meta"]["seen"]["n"] = 2
    got = await store.get("k")
    assert got == {"messages": [{"role": "user", "parts": ["a"]}], "meta": {"seen": {"n": 1}}}
    got["messages"][0]["role"] = "changed"
    assert (await store.get("k"))["messages"][0]["role"] == "user"
    with pytest.raises(TypeError, match="object"):
        await store.set("k", {"messages": [{"parts": ["a", object()]}]})
    assert (await store.get("k"))["meta"] == {"seen": {"n": 1}}


async def test_keys_and_clear_by_prefix(store: MemoryStore) -> None:
    for k in ("memory:b", "memory:a", "working-memory:a", "context:a", "memory:%_odd"):
        await store.set(k, 1)
    assert await store.keys("memory:") == ["memory:%_odd", "memory:a", "memory:b"]
    await store.clear("memory:")
    assert await store.keys() == ["context:a", "working-memory:a"]
    await store.clear()
    assert await store.keys() == []


async def test_keys_by_prefix_whatever_its_last_character(store: MemoryStore) -> None:
    """A prefix selects exactly the keys that start with it (the SQL stores read a range
    of the key, from the prefix to the prefix with its last character the next one)."""
    keys = [
        "a:",
        "a:1",
        "a:\U0010ffff",
        "a:\U0010ffffz",
        "a:é",
        "a;",
        "a",
        "b",
        "é",
        "éa",
        "f",
        "a:\ud7ff",
        "a:\ud7ffz",
        "a:\ue000",
    ]  # U+D7FF and U+E000: either side of the surrogates
    for k in keys:
        await store.set(k, 1)
    for prefix in ["a", "a:", "a:\ud7ff", "a:\U0010ffff", "é", "a:é", "zz", "a:\ue000"]:
        assert await store.keys(prefix) == sorted(k for k in keys if k.startswith(prefix)), prefix


async def test_unicode_and_falsy_values(store: MemoryStore) -> None:
    await store.set("k:é", "naïve ☃")
    await store.set("zero", 0)
    await store.set("empty", [])
    assert await store.get("k:é") == "naïve ☃"
    assert await store.get("zero") == 0
    assert await store.get("empty") == []


async def test_rejects_what_json_cannot_hold(store: MemoryStore) -> None:
    with pytest.raises(TypeError):
        await store.set("k", {"s": {1, 2}})
    assert await store.get("k") is None


async def test_sqlite_survives_reopen(tmp_path) -> None:
    db = Database(tmp_path / "hub.db")
    s = SqlMemoryStore(db)
    await s.open()
    await s.set("memory:x", {"a": 1})
    await db.close()
    db2 = Database(tmp_path / "hub.db")
    s2 = SqlMemoryStore(db2)
    await s2.open()
    assert await s2.get("memory:x") == {"a": 1}
    mode = await db2.fetchone("PRAGMA journal_mode")
    assert mode[0] == "wal"
    await db2.close()


async def test_concurrent_flushes_and_writes_commit_together(tmp_path) -> None:
    import asyncio

    db = Database(tmp_path / "hub.db")
    s = SqlMemoryStore(db)
    await s.open()
    db.write_soon("INSERT INTO kv (key, value, updated) VALUES ('a', '1', 0)")
    await asyncio.gather(db.flush(), db.flush(), s.set("b", 2), db.flush())
    assert await s.get("a") == 1 and await s.get("b") == 2
    await db.close()
