"""The engine's decoder (issue 24, findings 2 and 3): pictures and PDFs are decoded in worker
processes of their own, each stopped at its time limit, ended with the run that wanted it,
within a budget of pixels decoded at once; the probe's PDF and PNG, made here, are the corpus."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from hub.engine import Decoder
from hub.media import MediaFile, MediaLimits, MediaRefused
from hub.testing import png
from tests._support.hostile_files import slow_pdf, text_pdf, zero_png


def gone(pid: int) -> bool:
    return not os.path.exists(f"/proc/{pid}")


async def first_worker(decoder: Decoder) -> int:
    async with asyncio.timeout(30):  # the first job starts the fork server
        while not decoder.pids:
            await asyncio.sleep(0.01)
    return decoder.pids[0]


def test_the_corpus_is_the_probes() -> None:
    pdf, picture = slow_pdf(), zero_png()
    assert len(pdf) < 16_000 and pdf.count(b"/Type /Page ") == 30 and pdf.count(b"/FlateDecode") == 1
    assert len(picture) < 150_000  # 6000 x 6000 RGBA: 36 MP, under the default 40 MP max_pixels


async def test_the_probes_pdf_is_stopped_at_its_time_limit_and_its_worker_ends() -> None:
    """Thirty pages sharing one 4 MB stream cost about 9 s of CPU each: 4.5 minutes, which
    went on after the run was killed. Now the worker is killed at ``decode_timeout``."""
    decoder = Decoder(MediaLimits(decode_timeout=3))
    try:
        job = asyncio.create_task(decoder.text(MediaFile(slow_pdf(), "application/pdf", "slow.pdf")))
        pid = await first_worker(decoder)
        t0 = time.monotonic()
        with pytest.raises(MediaRefused, match="took longer than 3s|used up its CPU time"):
            await job
        assert time.monotonic() - t0 < 8
        assert gone(pid) and decoder.running == 0 and decoder.killed == 1
    finally:
        await decoder.stop()


async def test_a_pdf_slower_than_half_its_time_gives_what_it_read() -> None:
    """Between pages, a PDF past half its time stops with what it has (a page that alone takes
    the rest is killed, as above)."""
    decoder = Decoder(MediaLimits(decode_timeout=10))
    try:
        pages = slow_pdf(pages=30, stream_bytes=500_000)  # about 1 s a page: it stops after about 5
        text = await decoder.text(MediaFile(pages, "application/pdf", "slow.pdf"))
        assert "stopped after" in text and "of 30 pages: this PDF is slow to read" in text
        ordinary = await decoder.text(MediaFile(text_pdf(3), "application/pdf", "q3.pdf"))
        assert "Page 3, line 40" in ordinary
    finally:
        await decoder.stop()


async def test_a_decode_whose_run_ended_is_stopped_with_it() -> None:
    decoder = Decoder(MediaLimits(decode_timeout=60))
    try:
        job = asyncio.create_task(decoder.text(MediaFile(slow_pdf(), "application/pdf", "slow.pdf")))
        pid = await first_worker(decoder)
        job.cancel()  # what a killed or stopped run does to what it awaits
        with pytest.raises(asyncio.CancelledError):
            await job
        async with asyncio.timeout(5):
            while not gone(pid):
                await asyncio.sleep(0.01)
        assert decoder.running == 0 and decoder.killed == 1
    finally:
        await decoder.stop()


async def test_the_probes_png_is_decoded_downscaled_within_its_memory() -> None:
    """6000 x 6000 RGBA of zeros, 140 KB: about 460 MB decoded the old way (a full-size copy to
    convert, another to resample); now reduced in bands right after the decode."""
    decoder = Decoder(MediaLimits())
    try:
        mime, data = await decoder.image(zero_png(), name="zeros.png")
        assert mime == "image/png"
        from io import BytesIO

        from PIL import Image

        assert Image.open(BytesIO(data)).size == (1568, 1568)
        assert 100_000_000 < decoder.peak_rss < 280_000_000, decoder.peak_rss  # the 144 MB decode, and little more
    finally:
        await decoder.stop()


async def test_the_pixels_decoded_at_once_stay_within_the_budget() -> None:
    decoder = Decoder(MediaLimits(decode_workers=3, decode_pixels=10_000_000))
    try:
        pictures = [png(3000, 3000, color=(i * 40, 0, 0)) for i in range(3)]  # 9 MP each
        results = await asyncio.gather(*(decoder.image(p, name=f"{i}.png") for i, p in enumerate(pictures)))
        assert [m for m, _ in results] == ["image/jpeg"] * 3
        assert decoder.pixels_peak == 9_000_000  # one at a time: two would be 18 MP
    finally:
        await decoder.stop()


async def test_what_a_worker_refuses_is_refused_by_name() -> None:
    decoder = Decoder(MediaLimits(max_pixels=1_000_000))
    try:
        with pytest.raises(MediaRefused, match="over the 1,000,000 pixel limit"):
            await decoder.image(png(2000, 1000), name="big.png")
        with pytest.raises(MediaRefused, match="not a picture that can be read"):
            await decoder.image(b"\x89PNG\r\n\x1a\n" + b"\x00" * 100, name="broken.png")
        with pytest.raises(MediaRefused, match="the PDF cannot be read"):
            await decoder.text(MediaFile(b"%PDF-1.4\n garbage", "application/pdf", "broken.pdf"))
        assert decoder.killed == 0 and decoder.running == 0
    finally:
        await decoder.stop()
