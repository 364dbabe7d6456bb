"""A mention storm on a public timeline, judged the same way on every platform (X, Mastodon,
Bluesky): `check_capped_storm`."""

from __future__ import annotations

from collections.abc import Sequence

from ..definitions import RunResult

__all__ = ["check_capped_storm"]


def check_capped_storm(results: Sequence[RunResult], *, cap: int, answered: Sequence[str], mentions: set[str]) -> None:
    """Assert that a storm of ``mentions`` (their inputs' ``platform_id``) was met as the
    daily cap ``max_posts_per_day = cap`` says: each mention recorded and run (none lost),
    exactly ``cap`` posts out (``answered``: the post each reply the fake received answers),
    none answering the same post twice, and every other answer a failed output naming the cap.

    Raises:
        AssertionError: saying which of these does not hold.
    """
    assert len(answered) == cap, f"{len(answered)} posts went out, not max_posts_per_day = {cap}"
    assert len(set(answered)) == cap, "a mention was answered twice"
    outputs = [o for r in results for o in r.outputs]
    assert sum(o.sent for o in outputs) == cap, "the outputs sent are not the posts the fake received"
    refused = [o for o in outputs if not o.sent]
    assert len(refused) == len(mentions) - cap, f"{len(refused)} answers refused, not {len(mentions) - cap}"
    wrong = [o.error for o in refused if f"max_posts_per_day = {cap}" not in (o.error or "")]
    assert not wrong, f"answers refused for another reason than the cap: {wrong[:3]}"
    recorded = {e.platform_id for r in results for e in r.logs if e.kind == "input"}
    assert recorded == mentions, f"{len(mentions - recorded)} mentions lost, {len(recorded - mentions)} unexpected"
