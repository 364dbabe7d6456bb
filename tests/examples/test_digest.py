"""examples/digest: the schedule fires at 08:00 on a clock the test moves (no sleeps), the
action hands over what is new, and the digest is posted to the Telegram chat; the next
morning's digest has only what came in since."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

from hub import Hub, RunState, ScriptedModel
from hub.models import ModelRequest
from hub.testing.telegram import FakeTelegram
from tests._support.clock import FakeClock
from tests.examples._examples import EXAMPLES, example_config

T0 = datetime(2026, 3, 2, 7, 0, tzinfo=UTC).timestamp()  # 07:00 UTC, an hour before the digest
CHAT = -1001234567890


def digest_writer(request: ModelRequest) -> str:
    """The model as the persona asks: call newItems, then post a line per item it returned."""
    # this run's part of the prompt (the history before it has the last digest's call)
    last = str(request.messages[-1]["content"]).split("<current_run>")[-1]
    if "newItems" not in last:
        return '<response><action_call name="newItems">{}</action_call></response>'
    items = json.loads(last[last.index("[") : last.rindex("]") + 1])
    lines = "\n".join(f"- {i['title']} ({i['source']})" for i in items) or "Nothing new today."
    return f'<response><output type="telegram:send">Digest\n{lines}</output></response>'


async def test_the_morning_schedule_posts_only_what_is_new(tmp_path: Path) -> None:
    items = tmp_path / "items.json"
    shutil.copy(EXAMPLES / "digest" / "items.json", items)
    clock = FakeClock(T0)
    async with FakeTelegram() as tg:
        cfg = example_config(
            "digest",
            tmp_path,
            extensions={"telegram": {"base_url": f"{tg.base_url}/bot"}, "digest": {"items_file": str(items)}},
        )
        hub = Hub(cfg, model=ScriptedModel(digest_writer))
        hub.scheduler.clock, hub.scheduler.sleep = clock.time, clock.sleep  # the schedule's clock is the test's
        async with hub, hub.events(kinds=["run_ended"]) as ended:
            await clock.advance(3599)
            assert not tg.sent  # 07:59:59: not yet
            await clock.advance(1)
            first = await anext(aiter(ended))
            (sent,) = await tg.wait_sent(1, timeout=30)
            assert sent["chat_id"] == CHAT
            assert sent["text"] == "Digest\n- Release 0.4 is out (changelog)\n- How we test the hub (blog)"

            news = [*json.loads(items.read_text()), {"id": "rel-0.5", "title": "Release 0.5", "source": "changelog"}]
            items.write_text(json.dumps(news))
            await clock.advance(24 * 3600)
            second = await anext(aiter(ended))
            await tg.wait_sent(2, timeout=30)
            events = await hub.runs.events(first.run_id)
    assert tg.sent[1]["text"] == "Digest\n- Release 0.5 (changelog)"
    assert first.state == second.state == RunState.COMPLETED.value
    (inp,) = [e for e in events if e.kind == "input"]
    assert inp.type == "schedule" and inp.meta == {"schedule": "daily-digest"}
