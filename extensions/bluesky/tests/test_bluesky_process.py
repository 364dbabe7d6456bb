"""``hub run`` as a real process with ``[extensions.bluesky]``, against the loopback fake PDS:
SIGKILLed after a mention was recorded (and the notifications cursor saved in the store) and
before the model answered, then started again: the mention is answered once, the restart
reads on from the saved cursor (the answered mention is not read again), and a mention that
came while the hub was down is answered too."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

from hub.testing import FakeOpenAI
from hub.testing.bluesky import APP_PASSWORD, BOT_HANDLE, FakeBluesky
from hub.testing.processes import start_hub, stop_hub, store_rows, until_model_asked, write_hub_config
from hub_bluesky import CURSOR_KEY

ANSWER = '<response><output type="bluesky:reply">answered</output></response>'


def _config(tmp_path: Path, fake: FakeBluesky, model_url: str) -> Path:
    return write_hub_config(
        tmp_path,
        model_url=model_url,
        extension=f"""
[extensions.bluesky]
handle = "{BOT_HANDLE}"
app_password = "${{BLUESKY_APP_PASSWORD}}"
base_url = "{fake.base_url}"
dry_run = false
post_interval = 0
poll_interval = 5
""",
    )


def _cursor(tmp_path: Path) -> Any:
    """The notifications cursor as the hub's store holds it (read-only, beside the hub)."""
    rows = store_rows(tmp_path, "SELECT value FROM kv WHERE key = ?", CURSOR_KEY)
    return json.loads(rows[0][0]) if rows else None


async def test_sigkill_between_receipt_and_answer_answers_once_after_restart(tmp_path: Path) -> None:
    env = {"BLUESKY_APP_PASSWORD": APP_PASSWORD}
    async with FakeBluesky() as fake, FakeOpenAI(default=ANSWER, latency=60) as ai:
        config = _config(tmp_path, fake, ai.url)
        note = fake.mention("answer me once", handle="alice.bsky.social")
        hub = start_hub(tmp_path, config, env)
        try:
            await until_model_asked(ai, hub)  # recorded, and the model is writing (FakeOpenAI holds it)
            await fake.wait_for(lambda: _cursor(tmp_path) is not None, timeout=20)
        finally:
            output = stop_hub(hub)
        assert not fake.sent, output
        assert _cursor(tmp_path) == {"at": note["indexedAt"], "uri": note["uri"]}, output  # kept in the store

        ai.latency = 0.0
        later = fake.mention("a sentinel, while the hub was down", handle="bob.bsky.social")
        hub = start_hub(tmp_path, config, env)
        try:
            sent = await fake.wait_sent(2, timeout=30)  # the first resumed from the inbox, the second read
        finally:
            output = stop_hub(hub, signal.SIGTERM)
        assert hub.returncode == 0, output
        assert sorted(s["parent"] for s in sent) == sorted([note["uri"], later["uri"]]), output
        assert [s["parent"] for s in fake.sent].count(note["uri"]) == 1, output
        assert "was recorded before" not in output  # read on from the cursor: the first is not read again
        assert _cursor(tmp_path) == {"at": later["indexedAt"], "uri": later["uri"]}
        assert {s["text"] for s in sent} == {"@alice.bsky.social answered", "@bob.bsky.social answered"}
        after = [ai.prompt(i) for i in range(1, len(ai.bodies))]  # the two runs after the restart, in either order
        assert len(after) == 2 and any("answer me once" in p for p in after) and any("a sentinel" in p for p in after)
        assert APP_PASSWORD not in output
