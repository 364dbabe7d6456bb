"""``hub memory forget --person`` against the embedded Chroma store the hub writes episodes
to: the episodes of every identity linked to the person go (on each identity's own platform),
with their id keys; everyone else's stay, a user with the same id on another platform too.
A forget cut off before its episodes went is finished when the hub's episodic memory opens."""

from __future__ import annotations

import io
import time
from pathlib import Path

import hub_cli
from hub import Hub, HubConfig, ScriptedModel
from hub.cli._memory import forget_person
from hub.memory import Episode, MiniLMEmbedder, all_episodes, open_episode_store
from hub.store import People
from hub_cli import CliSettings

OK = "<response><output>Sure.</output></response>"


def _hub(data: Path, embedder: MiniLMEmbedder, replies: int = 0) -> Hub:
    cfg = HubConfig()
    cfg.hub.data_dir = str(data)
    cfg.hub.contexts_dir = str(data)
    cli = hub_cli.extension(CliSettings(stdin=False), out=io.StringIO())
    hub = Hub(cfg, model=ScriptedModel([OK] * replies), load_extensions=False, extensions=[cli])
    assert hub.episodes is not None
    hub.episodes.embedder = embedder  # the session's MiniLM; the store is Chroma under data/chroma
    return hub


async def _write(hub: Hub) -> None:
    """ann and bob talk in the terminal, carl too; episodes of discord:77 (to be linked to
    ann) and of telegram:77 (someone else) are written as their platforms' runs would."""
    assert hub.episodes is not None
    for user in ("ann", "bob", "carl"):
        assert (await hub.send("cli:session", {"user": user}, f"a question from {user}", user=user)).ok
    now = time.time()
    for run_id, context, user in (("r-d", "discord:channel:9", "77"), ("r-t", "telegram:chat:77", "77")):
        await hub.episodes.remember(Episode(run_id, context, user, now, "completed", "q", "a", "d"))
    await hub.episodes.flush()


def _who(episodes: list[Episode]) -> list[tuple[str, str]]:
    return sorted((e.platform, e.user) for e in episodes)


async def test_forget_person_deletes_the_episodes_of_every_linked_identity_and_no_others(
    tmp_path: Path, minilm: MiniLMEmbedder
) -> None:
    data = tmp_path / "data"
    async with _hub(data, minilm, replies=3) as hub:
        await _write(hub)
        people = People(hub.memory)
        await people.redeem(await people.new_code("cli", "ann"), "cli", "bob")
        await people.redeem(await people.new_code("cli", "ann"), "discord", "77")
        assert hub.episodes is not None
        before = _who(await hub.episodes.episodes())
    assert before == [("cli", "ann"), ("cli", "bob"), ("cli", "carl"), ("discord", "77"), ("telegram", "77")]

    config = HubConfig()
    config.hub.data_dir = str(data)
    deleted, ids, _ = await forget_person(config, "discord:77")
    assert (deleted, ids) == (3, ["cli:ann", "cli:bob", "discord:77"])

    async with open_episode_store(config, embedder=minilm) as store:
        left = await all_episodes(store)
    assert _who(left) == [("cli", "carl"), ("telegram", "77")]
    async with _hub(data, minilm) as hub:  # their episodes' id keys went with them
        keys = await hub.memory.keys("episode-ids:")
        assert keys and not any(":ann:" in k or ":bob:" in k or ":discord:" in k for k in keys), keys
        assert any(":carl:" in k for k in keys)


async def test_episodes_of_a_forget_cut_off_go_when_the_hub_opens_its_memory(
    tmp_path: Path, minilm: MiniLMEmbedder
) -> None:
    data = tmp_path / "data"
    async with _hub(data, minilm, replies=3) as hub:
        await _write(hub)
        people = People(hub.memory)
        await people.redeem(await people.new_code("cli", "ann"), "discord", "77")
        # the forget was cut off right after its journal entry: nothing deleted yet
        assert await people.begin_forgetting("cli:ann") == ["cli:ann", "discord:77"]
    async with _hub(data, minilm) as hub:
        assert hub.episodes is not None
        left = _who(await hub.episodes.episodes())  # once the store is open
        people = People(hub.memory)
        assert await people.lookup("cli", "ann") is None  # the database part, at the start
        assert await people.forgetting() == {}
    assert left == [("cli", "bob"), ("cli", "carl"), ("telegram", "77")]
