"""PoisonUpdates: an update that fails for a reason of its own is parked after
``park_after`` failures; a store that fails is never the update's fault."""

from __future__ import annotations

import pytest

from hub import StoreError
from hub.platform import PoisonUpdates
from hub.store import InMemoryInbox


async def test_only_the_updates_own_failures_count_and_park_it() -> None:
    inbox = InMemoryInbox()
    poison = PoisonUpdates("demo", inbox, park_after=2)
    outage = StoreError("down (injected)", store="inbox", operation="write")
    kw = {"context": "demo:chat:1", "type": "demo:chat", "content": "hi"}
    for _ in range(5):  # an outage, however long, parks nothing
        assert not await poison.failed("demo:1", outage, **kw)
    assert await inbox.parked() == []
    assert not await poison.failed("demo:1", ValueError("bad shape"), **kw)
    poison.succeeded("demo:1")  # taken at last: its count starts over
    assert not await poison.failed("demo:1", ValueError("bad shape"), **kw)
    assert await poison.failed("demo:1", ValueError("bad shape"), **kw)
    (parked,) = await inbox.parked()
    assert parked.failures == 2 and parked.error == "not taken: ValueError: bad shape"
    assert await poison.failed("demo:1", ValueError("bad shape"), **kw)  # known: moved past, not parked twice
    assert len(await inbox.parked()) == 1
    with pytest.raises(ValueError, match="at least 1"):
        PoisonUpdates("demo", inbox, park_after=0)


async def test_the_last_delivery_a_platform_makes_is_parked_at_its_first_failure() -> None:
    inbox = InMemoryInbox()
    poison = PoisonUpdates("demo", inbox, park_after=3)
    kw = {"context": "demo:chat:1", "type": "demo:chat", "content": "hi"}
    outage = StoreError("down (injected)", store="inbox", operation="write")
    assert not await poison.failed("demo:1", outage, last=True, **kw)  # the store's fault: never parked
    assert await inbox.parked() == []
    assert await poison.failed("demo:1", ValueError("bad shape"), last=True, **kw)
    (parked,) = await inbox.parked()
    assert parked.failures == 1 and parked.entry.platform_id == "demo:1"


async def test_what_is_parked_has_its_secrets_masked() -> None:
    """A poison update is stored and listed by `hub inbox`: masked as the intake masks."""
    from hub.redact import Redactor

    secret = "sk-live-0123456789abcdefXYZ"
    inbox = InMemoryInbox()
    poison = PoisonUpdates("demo", inbox, park_after=1, redactor=Redactor([secret]))
    raw = {"text": f"my key is {secret}", "nested": [secret]}
    assert await poison.failed(
        "demo:9",
        ValueError(f"cannot read {secret}"),
        context="demo:chat:1",
        type="demo:chat",
        content=raw,
        meta={"event": raw},
    )
    (parked,) = await inbox.parked()
    assert secret not in repr(parked.entry) and secret not in parked.error
    assert "[REDACTED]" in str(parked.entry.content) and "[REDACTED]" in parked.error
