"""Episodic memory against a real Chroma server (``chroma run``) that goes down and comes
back: episodes made meanwhile wait in the hub's store and are written when it answers,
and a hub started before its server turns memory on by itself."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from hub import Hub, ScriptedModel
from hub.memory import MiniLMEmbedder

from .conftest import _free_port
from .test_episodes import ANN, CTX, make_hub, prompt_of

TOPICS = ["the tides at Brest", "a sourdough starter", "the Rust borrow checker", "Kyoto in autumn", "tax on bonds"]


@contextlib.contextmanager
def chroma_server(data: Path, port: int) -> Iterator[str]:
    """``chroma run`` on ``port`` over ``data``, until the block ends (then stopped)."""
    chroma = Path(sys.executable).parent / "chroma"
    url = f"http://127.0.0.1:{port}"
    log = (data.parent / f"chroma-{port}.log").open("ab")
    proc = subprocess.Popen(
        [str(chroma), "run", "--path", str(data), "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1):
                    break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "chroma run did not start"
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def hub_on(tmp_path: Path, url: str, model: ScriptedModel, minilm: MiniLMEmbedder) -> Hub:
    hub = make_hub(tmp_path, model, minilm, chroma_url=url)
    assert hub.episodes is not None
    hub.episodes._retry_first = 0.2  # the server is retried every 0.2 s, doubling
    return hub


async def until_waiting(hub: Hub, n: int, timeout: float = 60) -> None:
    """Until ``n`` episodes wait in the hub's outbox."""
    assert hub.episodes is not None
    async with asyncio.timeout(timeout):
        while len(await hub.episodes.outbox.keys()) != n:
            await asyncio.sleep(0.05)


async def until_on(hub: Hub, timeout: float = 60) -> None:
    assert hub.episodes is not None
    async with asyncio.timeout(timeout):
        while not hub.episodes.available:
            await asyncio.sleep(0.05)


async def run(hub: Hub, text: str) -> None:
    result = await hub.send(CTX, ANN, text, user=ANN["user"])
    assert result is not None and result.ok


async def test_episodes_made_while_the_server_is_down_are_written_when_it_returns(
    tmp_path: Path, minilm: MiniLMEmbedder
) -> None:
    port, data = _free_port(), tmp_path / "chroma"
    model = ScriptedModel([], default="<response><output>Noted.</output></response>")
    hub = hub_on(tmp_path / "hub", f"http://127.0.0.1:{port}", model, minilm)
    with chroma_server(data, port):
        await hub.start()
        await run(hub, "hello")
        assert hub.episodes is not None
        await hub.episodes.flush()
        assert hub.episodes.available
    try:
        for topic in TOPICS:  # the server is down: each episode waits in the hub's store
            await run(hub, f"Tell me about {topic}.")
        await until_waiting(hub, len(TOPICS))
        with chroma_server(data, port):
            await until_waiting(hub, 0)  # written once it answers
            await hub.episodes.flush()
            for topic in TOPICS:
                await run(hub, f"What did we say about {topic}?")
                assert f"Tell me about {topic}." in prompt_of(model)
            await hub.episodes.flush()  # the last run's own episode is written after it answers
            assert len(await hub.episodes.episodes()) == 1 + 2 * len(TOPICS)  # none lost, none twice
    finally:
        await hub.stop()


async def test_a_hub_started_before_its_server_turns_memory_on_when_it_answers(
    tmp_path: Path, minilm: MiniLMEmbedder
) -> None:
    port, data = _free_port(), tmp_path / "chroma"
    model = ScriptedModel([], default="<response><output>Noted.</output></response>")
    url = f"http://127.0.0.1:{port}"
    async with hub_on(tmp_path / "hub", url, model, minilm) as hub:  # no server yet
        assert hub.episodes is not None
        await run(hub, "Tell me about the tides at Brest.")
        await until_waiting(hub, 1)
        assert not hub.episodes.available and hub.episodes.error is None
    # the hub restarts, the server still down: the episode still waits (in the hub's store)
    async with hub_on(tmp_path / "hub", url, model, minilm) as hub:
        assert hub.episodes is not None
        await run(hub, "Tell me about a sourdough starter.")
        await until_waiting(hub, 2)
        with chroma_server(data, port):
            await until_on(hub)  # on by itself
            await until_waiting(hub, 0)
            await hub.episodes.flush()
            await run(hub, "What did we say about the tides at Brest?")
            assert "Tell me about the tides at Brest." in prompt_of(model)
            await run(hub, "And the sourdough starter?")
            assert "Tell me about a sourdough starter." in prompt_of(model)
