"""`hub run` freezes its start-up heap out of garbage collection once the hub has started
(hub/cli/_heap.py), as bench/soak.py does: the soak's figures hold for `hub run` only if the
hub itself does what the bench does."""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from hub.cli import _heap, _main
from hub.testing import temp_config


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    try:
        yield
    finally:
        gc.unfreeze()  # the test process goes on making hubs: nothing of this one stays frozen


async def test_hub_run_freezes_the_start_up_heap_once_the_hub_has_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unfrozen: None
) -> None:
    cfg = temp_config(tmp_path)
    cfg.extensions = {}
    settled = asyncio.Event()
    frozen: list[int] = []
    real = _heap.settle_heap

    def settle() -> int:  # the real one, and a sign for the test that it ran
        frozen.append(real())
        settled.set()
        return frozen[-1]

    monkeypatch.setattr(_heap, "settle_heap", settle)
    assert gc.get_freeze_count() == 0
    run = asyncio.create_task(_main.cmd_run(cfg, argparse.Namespace()))
    async with asyncio.timeout(60):
        await settled.wait()
    assert frozen and frozen[0] > 0 and gc.get_freeze_count() > 0  # some frozen objects are freed since
    os.kill(os.getpid(), signal.SIGTERM)  # as an operator stops it: the handler cmd_run installed
    async with asyncio.timeout(60):
        assert await run == 0
