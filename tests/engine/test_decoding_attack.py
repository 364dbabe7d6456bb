"""The probe's decoding attack on a whole hub (issue 24, findings 2 and 3): seven of its PDFs
and seven of its PNGs from fourteen chats at once, with vision on. Another user, whose
conversation has episodes to recall (the recall and the embedder use the default thread pool,
which the decoding filled before), has their turn answered while the attack's files are
still being decoded (before the first of its PDFs, which each take the whole
``decode_timeout``, is given up), and the memory of the hub and its decoding workers together
stays under a stated bound.

Before: the PDFs filled the default thread pool (6 threads here) for minutes and the other
user's run was killed ``stalled``; six PNGs took the hub from 368 MB to a 3.0 GB peak.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from hub import Hub, MediaPart, ScriptedModel
from hub.memory import HashEmbedder, InMemoryVectorStore
from hub.testing import temp_config
from tests._support.hostile_files import slow_pdf, zero_png
from tests.test_media import pics_extension

REPLY = '<response><output type="pics:send">ok</output></response>'
MEMORY_BOUND = 700_000_000
"""What the attack may add to the memory of the hub and its workers (proportional set size,
so pages the workers share with the fork server count once): two workers decoding, the fork
server, and the hub's own share. The hard bound is decode_workers x decode_memory (2 x 512 MB
of address space) plus the fork server; the measured peak is well under this test's bound."""


def _children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            out.setdefault(ppid, []).append(int(entry))
    return out


def tree_pss(root: int) -> int:
    """Proportional set size of ``root`` and every process under it, in bytes."""
    children, total, todo = _children(), 0, [root]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                total += next(int(line.split()[1]) * 1024 for line in f if line.startswith("Pss:"))
        except (OSError, StopIteration):
            continue
    return total


async def sample(peak: list[int], stop: asyncio.Event) -> None:
    while not stop.is_set():
        peak.append(await asyncio.to_thread(tree_pss, os.getpid()))
        try:
            await asyncio.wait_for(stop.wait(), 0.05)
        except TimeoutError:
            pass


async def test_fourteen_decoding_bombs_leave_another_users_turn_and_the_memory_bounded(tmp_path: Path) -> None:
    cfg = temp_config(tmp_path)
    cfg.model.vision = True
    cfg.memory.episodes = True
    cfg.agent.max_history = 0  # recall is then the conversation's only memory
    cfg.media.decode_timeout = 5.0  # keeps the test short; the default is 20
    store = {"pdf": slow_pdf(), "png": zero_png()}
    sent: list[str] = []
    model = ScriptedModel([], default=REPLY)
    hub = Hub(cfg, model=model, load_extensions=False, extensions=[pics_extension(store, sent, [])])
    assert hub.episodes is not None
    embedder = HashEmbedder()  # recall embeds the question through the default thread pool
    hub.episodes.embedder = embedder
    hub.episodes.store = InMemoryVectorStore(embedder)
    decoder = hub.features.decoder
    async with hub:
        ann = {"id": "ann"}
        await hub.send("pics:chat", ann, "my cat is called Tom", type="pics:message")
        await hub.episodes.flush()
        await hub.send("pics:chat", ann, "my dog is called Rex", type="pics:message")
        await hub.episodes.flush()

        base, peak, stop = tree_pss(os.getpid()), [0], asyncio.Event()
        sampler = asyncio.create_task(sample(peak, stop))
        attack = []
        for i in range(7):
            pdf = MediaPart(kind="document", ref="pdf", mime="application/pdf", size=len(store["pdf"]), name="r.pdf")
            picture = MediaPart(kind="image", ref="png", mime="image/png", size=len(store["png"]), name="z.png")
            attack.append(await hub.submit("pics:chat", {"id": f"pdf{i}"}, "", type="pics:message", media=[pdf]))
            attack.append(await hub.submit("pics:chat", {"id": f"png{i}"}, "", type="pics:message", media=[picture]))
        async with asyncio.timeout(30):  # the first decode starts the fork server
            while decoder.running < cfg.media.decode_workers:
                await asyncio.sleep(0.01)

        result = await hub.send("pics:chat", ann, "what is my cat called?", type="pics:message")
        # answered while the attack was still going on: both workers decoding, and none of the
        # PDFs (each runs until decode_timeout stops it) given up yet, so the turn waited for
        # none of the attack's files (before, it waited for the thread pool the PDFs filled)
        assert decoder.running == cfg.media.decode_workers
        given_up = [s for s in sent if s.startswith("Sorry, I could not open r.pdf")]
        assert given_up == [], given_up
        async with asyncio.timeout(120):  # every file of the attack is decoded, or stopped
            results = [await sub.wait() for sub in attack]
        stop.set()
        await sampler

        assert result is not None and result.ok, result
        (prompt,) = [r.messages[0]["content"] for r in model.requests if "what is my cat called?" in str(r.messages)]
        assert "Tom" in prompt[prompt.index("<episodes>") : prompt.index("</episodes>")]  # recall ran (default pool)
        added = max(peak) - base
        assert added < MEMORY_BOUND, added / 1e6
        assert all(r.ok for r in results)
        stopped = [s for s in sent if s.startswith("Sorry, I could not open r.pdf")]
        assert len(stopped) == 7 and all("reading it took longer than 5s" in s for s in stopped)
        pictures = [r for r in model.requests if "picture 1 of this run, attached" in str(r.messages)]
        assert pictures, "no picture was decoded: the memory was not measured with one"  # on a busy machine
        # a picture may be stopped too; nothing else happens to one
        assert len(pictures) + sum("z.png: reading it took longer" in s for s in sent) == 7
        assert decoder.running == 0 and decoder.pixels_peak <= cfg.media.decode_pixels
        print(f"\nmemory during the attack: +{added / 1e6:.0f} MB")
