"""The input lifecycle's owner (hub/engine/_intake.py): what it refuses before recording,
and that a hub's runs reach the engine only through it."""

from __future__ import annotations

import pytest

from hub import MediaPart, RunError


async def test_media_that_is_not_a_reference_is_refused_before_anything_is_recorded(make_hub) -> None:
    async with make_hub(["hi"]) as hub:
        with pytest.raises(RunError, match="media= takes hub.MediaPart references, not bytes"):
            await hub.submit("cli:session", {"user": "ann"}, "look", media=[b"\x89PNG"])  # type: ignore[list-item]
        assert await hub.inbox.pending() == []
        part = MediaPart(kind="image", ref="file-1", name="cat.png", mime="image/png", size=10)
        sub = await hub.submit("cli:session", {"user": "ann"}, "look", media=[part])
        result = await sub.wait()
    (entry,) = [e for e in result.logs if e.kind == "input"]
    assert entry.media == [part]
