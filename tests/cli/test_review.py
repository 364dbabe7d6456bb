"""``hub review``: the operator's side of the review queue, run as a user runs it (a process
beside the hub's database)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from hub.config import load_config
from hub.store import Review, open_stores
from tests._support.processes import hub_cmd, setup_dir


async def _hold(tmp_path: Path, *reviews: Review) -> None:
    config = load_config(tmp_path / "config.toml")
    async with open_stores(config) as stores:
        for r in reviews:
            await stores.reviews.add(r)


def _review(rid: str, text: str, *, expires_in: float = 3600.0) -> Review:
    now = time.time()
    return Review(rid, "twitter", "twitter:reply", "c1", text, "pending", now, now + expires_in, in_reply_to="99")


async def test_list_approve_with_an_edit_and_reject(tmp_path: Path) -> None:
    setup_dir(tmp_path, "http://127.0.0.1:9/v1")
    await _hold(
        tmp_path, _review("aa11", "first draft"), _review("bb22", "second"), _review("cc33", "old", expires_in=-1)
    )
    code, out, err = await hub_cmd("review", "list", cwd=tmp_path)
    assert code == 0, err
    assert "aa11" in out and "first draft" in out and "in reply to 99" in out and "cc33" not in out  # expired
    code, out, err = await hub_cmd("review", "approve", "aa11", "--text", "checked text", cwd=tmp_path)
    assert code == 0 and out.startswith("approved: aa11"), err
    code, out, err = await hub_cmd("review", "reject", "bb22", cwd=tmp_path)
    assert code == 0 and out.startswith("rejected: bb22"), err
    # decided once: a second decision, an expired post and an unknown id are one clear line each
    for args, says in [
        (("approve", "aa11"), "held post aa11 is approved: it can no longer be approved"),
        (("approve", "cc33"), "held post cc33 is expired"),
        (("reject", "nope"), "no held post 'nope'"),
    ]:
        code, out, err = await hub_cmd("review", *args, cwd=tmp_path)
        assert code == 2 and says in err, (args, err)
    code, out, _ = await hub_cmd("review", "list", "--all", "--json", cwd=tmp_path)
    rows = {r["id"]: r for r in map(json.loads, out.splitlines())}
    assert {k: (v["state"], v["text"]) for k, v in rows.items()} == {
        "aa11": ("approved", "checked text"),
        "bb22": ("rejected", "second"),
        "cc33": ("expired", "old"),
    }
