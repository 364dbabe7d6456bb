"""Start-up of episodic memory: a conversation with no episodes is answered without
opening the store or loading the embedder; one with episodes waits for them; `hub check`
and `hub runs` import neither chromadb nor onnxruntime."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from hub import ModelRequest, ScriptedModel
from hub.memory import ChromaVectorStore, HashEmbedder, MetadataValue, VectorHit, VectorRecord, VectorStore

from .test_episodes import ANN, ANSWER_REPLY, OK_REPLY, WEATHER_A, WEATHER_Q, WEATHER_REPLY, ask, make_hub

REPO = Path(__file__).resolve().parents[2]
BOB = {"user": "bob"}


class GatedStore(VectorStore):
    """A real store whose `open` waits for `gate` (a store and a model still loading)."""

    def __init__(self, inner: VectorStore) -> None:
        self.inner = inner
        self.gate = asyncio.Event()
        self.embedder = inner.embedder  # type: ignore[attr-defined]

    async def open(self) -> None:
        await self.gate.wait()
        await self.inner.open()

    async def create_index(self, name: str) -> None:
        await self.inner.create_index(name)

    async def delete_index(self, name: str) -> None:
        await self.inner.delete_index(name)

    async def upsert(self, index: str, records: Sequence[VectorRecord]) -> None:
        await self.inner.upsert(index, records)

    async def query(
        self,
        index: str,
        text: str,
        *,
        k: int = 5,
        where: dict[str, MetadataValue] | None = None,
        min_score: float | None = None,
        ids: Sequence[str] | None = None,
    ) -> list[VectorHit]:
        return await self.inner.query(index, text, k=k, where=where, min_score=min_score, ids=ids)

    async def delete(
        self, index: str, *, ids: Sequence[str] | None = None, where: dict[str, MetadataValue] | None = None
    ) -> int:
        return await self.inner.delete(index, ids=ids, where=where)

    async def count(self, index: str) -> int:
        return await self.inner.count(index)

    async def get(
        self, index: str, *, where: dict[str, MetadataValue] | None = None, limit: int | None = None
    ) -> list[VectorRecord]:
        return await self.inner.get(index, where=where, limit=limit)

    async def close(self) -> None:
        await self.inner.close()


async def test_a_fresh_hub_answers_before_any_store_exists(tmp_path: Path) -> None:
    seen: list[bool] = []

    def reply(request: ModelRequest) -> str:
        seen.append((tmp_path / "chroma").exists())
        return OK_REPLY

    model = ScriptedModel([reply, reply, WEATHER_REPLY, ANSWER_REPLY, OK_REPLY])
    async with make_hub(tmp_path, model, HashEmbedder(64)) as hub:
        assert hub.episodes is not None and not hub.episodes.available
        await ask(hub, "hello")  # no store on disk, nothing to recall: nothing opened
        assert seen == [False]
        # the first episode opened the store (in the background, after the run)
        assert hub.episodes.available and (tmp_path / "chroma").is_dir()
        await ask(hub, "hello again", BOB)
        await ask(hub, WEATHER_Q, BOB)
        await ask(hub, "What's the weather in NYC today?", BOB)
        assert WEATHER_A in model.requests[-1].messages[0]["content"]


async def test_only_a_conversation_with_episodes_waits_for_the_store(tmp_path: Path) -> None:
    embedder = HashEmbedder(64)
    model = ScriptedModel([WEATHER_REPLY, ANSWER_REPLY])
    async with make_hub(tmp_path, model, embedder) as hub:
        await ask(hub, WEATHER_Q)  # ann's episode, on disk

    model = ScriptedModel([OK_REPLY, OK_REPLY])
    hub = make_hub(tmp_path, model, embedder)
    assert hub.episodes is not None
    store = GatedStore(ChromaVectorStore(tmp_path / "chroma", embedder=embedder))
    hub.episodes.store = store
    async with hub:
        # bob has no episode: answered while the store is still opening
        result = await asyncio.wait_for(hub.send("cli:session", BOB, WEATHER_Q, user="bob"), 30)
        assert result is not None and result.ok and not hub.episodes.available
        # ann has one: her run waits for the store, then recalls it
        ann = asyncio.create_task(hub.send("cli:session", ANN, WEATHER_Q, user="ann"))
        store.gate.set()
        assert (await ann) is not None
        assert WEATHER_A in model.requests[-1].messages[0]["content"]
        assert WEATHER_A not in model.requests[0].messages[0]["content"]


def test_hub_check_and_hub_runs_load_neither_chroma_nor_the_embedder(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(f'[hub]\ndata_dir = "{tmp_path}/data"\ncontexts_dir = "{REPO}/contexts"\n')
    code = (
        "import sys\nfrom hub.cli import main\n"
        "for cmd in (['check'], ['runs']):\n"
        "    try:\n        main([*cmd])\n    except SystemExit:\n        pass\n"
        "print('LOADED', sorted(m for m in ('chromadb', 'onnxruntime', 'tokenizers') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert "LOADED []" in done.stdout, done.stdout + done.stderr
