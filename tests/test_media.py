"""Pictures and files (hub/media.py, hub/engine/_attachments.py): types by content, limits, bombs,
names never paths, text and PDF extraction, and what reaches the model (image_url parts with
vision, placeholders without), with the real openai client against FakeOpenAI."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import struct
import sys
import threading
import zipfile
import zlib
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from hub import (
    Context,
    Extension,
    Hub,
    HubConfig,
    Input,
    InputLog,
    Media,
    MediaPart,
    MediaRefused,
    MediaTooLarge,
    RunContext,
    ScriptedModel,
    TextArgs,
    action,
    output,
)
from hub.cli import render_trace
from hub.logs import from_dict, to_dict
from hub.media import MediaLimits, RunMedia, check, display_name, extract_text, image_for_model, placeholder, sniff
from hub.models.openai import OpenAIModel
from hub.store.sql import Database, SqlInbox
from hub.testing import FakeOpenAI, image_bytes, png, temp_config

LIMITS = MediaLimits()


def forged_png(width: int, height: int) -> bytes:
    """A PNG whose header declares ``width``×``height`` pixels: a few dozen bytes in all."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + chunk(b"IEND", b"")
    )


def pdf(text: str) -> bytes:
    """A one-page PDF showing ``text`` in Helvetica, with a correct cross-reference table."""
    stream = f"BT /F1 18 Tf 40 700 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def zipped() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("a.txt", "hello")
    return buf.getvalue()


# -- types, limits, names ------------------------------------------------------------------------


def test_types_are_read_from_content_not_from_the_name() -> None:
    assert sniff(png()) == "image/png"
    assert sniff(pdf("hi")) == "application/pdf"
    assert sniff("plain text, ünïcode".encode()) == "text/plain"
    assert sniff(b"\x7fELF\x02\x01\x01" + b"\x00" * 60) == "application/x-executable"
    assert sniff(b"MZ\x90\x00" + b"\x00" * 60) == "application/x-msdownload"
    # a zip called photo.jpg is an archive; a PNG called notes.txt is a picture
    with pytest.raises(MediaRefused, match="archives are not accepted"):
        check(zipped(), name="photo.jpg", limits=LIMITS)
    assert check(png(), name="notes.txt", limits=LIMITS).mime == "image/png"
    with pytest.raises(MediaRefused, match="executable"):
        check(b"\x7fELF\x02\x01\x01" + b"\x00" * 60, name="cat.png", limits=LIMITS)
    with pytest.raises(MediaRefused, match="executable"):  # by name too: a script dressed as text
        check(b"echo hi", name="setup.bat", limits=LIMITS)


def test_a_file_over_max_bytes_is_refused_with_its_size() -> None:
    with pytest.raises(MediaTooLarge, match=r"it is 2 KB, over the 1 KB limit per file"):
        check(b"x" * 2000, name="big.txt", limits=MediaLimits(max_bytes=1000))


def test_file_names_are_shown_never_used_as_paths() -> None:
    assert display_name("../../etc/passwd") == "passwd"
    assert display_name("C:\\Windows\\system32\\evil.png") == "evil.png"
    assert display_name("a\x00b\u202egnp.exe") == "abgnp.exe"  # control and RTL-override characters go
    assert display_name("..") == "" and display_name("/") == ""
    long = display_name("x" * 300 + ".png")
    assert len(long) <= 80 and long.endswith(".png")


# -- pictures ----------------------------------------------------------------------------------


def test_a_picture_is_downscaled_re_encoded_and_stripped_of_metadata() -> None:
    exif = Image.Exif()
    exif[0x010F] = "SecretCam"  # Make
    jpeg = image_bytes(3000, 1000, format="JPEG", color=(1, 2, 3), exif=exif)
    mime, data = image_for_model(jpeg, limits=MediaLimits(max_side=600))
    out = Image.open(io.BytesIO(data))
    assert mime == "image/jpeg" and out.size == (600, 200)
    assert b"SecretCam" not in data and not out.getexif()
    mime, data = image_for_model(png(mode="RGBA", color=(0, 0, 0, 0)), limits=LIMITS)
    assert mime == "image/png" and Image.open(io.BytesIO(data)).mode == "RGBA"  # transparency kept


def test_decompression_bombs_are_refused_before_they_are_decoded() -> None:
    # a header declaring 8,000 x 8,000 pixels: refused by our cap, nothing decoded
    with pytest.raises(MediaRefused, match=r"8000×8000 pixels, over the 40,000,000 pixel limit"):
        image_for_model(forged_png(8000, 8000), limits=LIMITS)
    # a real single-colour picture that compresses to a few KB but decodes to 4 MP
    small = png(2000, 2000, color=(255, 255, 255))
    assert len(small) < 20_000
    with pytest.raises(MediaRefused, match="decompression bomb"):
        image_for_model(small, limits=MediaLimits(max_pixels=1_000_000))
    # with our cap set absurdly high, Pillow's own guard still refuses it
    with pytest.raises(MediaRefused, match="decompression bomb"):
        image_for_model(forged_png(100_000, 100_000), limits=MediaLimits(max_pixels=10**12))
    with pytest.raises(MediaRefused, match="not a picture"):
        image_for_model(b"\x89PNG\r\n\x1a\n garbage", limits=LIMITS)


# -- text --------------------------------------------------------------------------------------


def test_text_and_pdf_are_extracted_and_cut_at_the_limit() -> None:
    doc = check(pdf("Quarterly revenue grew 12 percent"), name="report.pdf", limits=LIMITS)
    assert "Quarterly revenue grew 12 percent" in extract_text(doc, limits=LIMITS)
    notes = check(("line\n" * 1000).encode(), name="notes.txt", limits=LIMITS)
    text = extract_text(notes, limits=MediaLimits(max_text_chars=100))
    assert text.startswith("line\n") and text.endswith("[... 4900 more characters of notes.txt cut]")
    with pytest.raises(MediaRefused, match="cannot be read"):
        extract_text(check(b"%PDF-1.4\n broken", name="x.pdf", limits=LIMITS), limits=LIMITS)


def test_placeholders_name_kind_type_and_size() -> None:
    part = MediaPart(kind="document", ref="r", mime="application/pdf", size=1_234_567, name="../q3.pdf")
    assert placeholder(part) == '[document, "q3.pdf", application/pdf, 1.2 MB]'
    assert placeholder(part, "refused: x") == '[document, "q3.pdf", application/pdf, 1.2 MB: refused: x]'


# -- references, not bytes ---------------------------------------------------------------------


async def test_the_inbox_stores_references_and_gives_them_back(tmp_path: Path) -> None:
    part = MediaPart(kind="image", ref="file-id-1", mime="image/png", size=10, name="a.png", width=4, height=3)
    entry = InputLog(type="pics:message", content="", media=[part])
    assert from_dict(json.loads(json.dumps(to_dict(entry)))).media == [part]
    assert "media" not in to_dict(InputLog(type="t", content="x"))  # entries without files unchanged
    async with Database(tmp_path / "hub.db") as db:
        inbox = SqlInbox(db)
        await inbox.open()
        assert await inbox.record("pics:chat:1", entry)
        (pending,) = await inbox.pending()
        assert pending.entry.media == [part]


# -- outbound files from actions ---------------------------------------------------------------


async def test_action_files_are_kept_by_handle_and_paths_must_be_allowed(tmp_path: Path) -> None:
    allowed = tmp_path / "charts"
    allowed.mkdir()
    (allowed / "c.png").write_bytes(png())
    (tmp_path / "secret.png").write_bytes(png())
    media = RunMedia(MediaLimits(allowed_paths=(str(allowed),), url_hosts=("img.example",)))
    result = await media.stash({"chart": Media(data=png(), name="chart.png"), "n": 1})
    assert result == {
        "chart": {"media": "media:1", "name": "chart.png", "type": "image/png", "size": len(png())},
        "n": 1,
    }
    assert (await media.resolve("media:1")).data == png()
    assert (await media.stash(Media(path=str(allowed / "c.png"))))["media"] == "media:2"
    escaped = await media.stash(Media(path=str(allowed / ".." / "secret.png")))
    assert "not under [media] allowed_paths" in escaped["media_error"]
    assert "archives" in (await media.stash(Media(data=zipped(), name="x.zip")))["media_error"]
    with pytest.raises(MediaRefused, match="'evil.example' is not in"):
        await media.resolve("https://evil.example/a.png")
    with pytest.raises(Exception, match="no file 'media:9'"):
        await media.resolve("media:9")


# Which threads opened which files: an audit hook cannot be removed, so it records only
# while a test holds the list.
_OPENED: list[tuple[str, int]] | None = None


def _audit(event: str, args: tuple[object, ...]) -> None:
    if event == "open" and _OPENED is not None and isinstance(args[0], str | Path):
        _OPENED.append((str(args[0]), threading.get_ident()))


sys.addaudithook(_audit)


async def test_an_action_file_on_disk_is_read_off_the_event_loop(tmp_path: Path) -> None:
    global _OPENED
    (tmp_path / "big.png").write_bytes(png() + b"\0" * 2_000_000)
    (tmp_path / "huge.bin").write_bytes(b"\0" * 3_000)
    media = RunMedia(MediaLimits(allowed_paths=(str(tmp_path),), max_bytes=2_500_000))
    _OPENED = []
    try:
        kept = await media.stash({"a": Media(path=str(tmp_path / "big.png"))})
    finally:
        opened, _OPENED = _OPENED, None
    assert kept["a"]["media"] == "media:1" and kept["a"]["size"] == len(png()) + 2_000_000
    readers = {thread for path, thread in opened if path.endswith("big.png")}
    assert readers and threading.get_ident() not in readers  # read in a worker thread
    small = RunMedia(MediaLimits(allowed_paths=(str(tmp_path),), max_bytes=1_000))
    refused = await small.stash(Media(path=str(tmp_path / "huge.bin")))
    assert "it is 3 KB, over the 1 KB limit per file" in refused["media_error"]


# -- end to end: a hub, an input that records references, the real openai client ----------------

SECRET = "sk-test-0123456789abcdefghij"


def pics_extension(store: dict[str, bytes], sent: list[str], fetched: list[str]) -> Extension:
    async def fetch(part: MediaPart, max_bytes: int) -> bytes:
        fetched.append(part.ref)
        return store[part.ref]

    async def subscribe(send: Any, hub: Any) -> Any:
        async def stop() -> None:
            return None

        return stop

    @output(type="pics:send", context="pics:chat", description="Reply.")
    async def send(content: str, ctx: RunContext) -> dict[str, Any]:
        sent.append(content)
        return {}

    chat = Context(type="pics:chat", schema=TextArgs, key=lambda a: a.id, reply_output="pics:send")
    return Extension(
        name="pics",
        contexts=[chat],
        outputs=[send],
        inputs=[Input(type="pics:message", subscribe=subscribe, fetch=fetch)],
    )


def config_for(tmp_path: Path, *, vision: bool) -> HubConfig:
    cfg = temp_config(tmp_path)
    cfg.model.vision = vision
    cfg.model.api_key = SECRET  # a known secret for the redactor (the model is given, not built)
    return cfg


def image_parts(body: dict[str, Any]) -> list[str]:
    content = body["messages"][-1]["content"]
    if isinstance(content, str):
        return []
    return [p["image_url"]["url"] for p in content if p["type"] == "image_url"]


@pytest.mark.parametrize("vision", [True, False])
async def test_a_picture_without_a_caption_reaches_the_model(tmp_path: Path, vision: bool) -> None:
    store = {"p1": png(2000, 1000)}
    sent: list[str] = []
    fetched: list[str] = []
    reply = '<response><output type="pics:send">A red picture.</output></response>'
    async with FakeOpenAI([reply, reply]) as fake:
        model = OpenAIModel("gpt-test", base_url=fake.url, api_key="k")
        hub = Hub(
            config_for(tmp_path, vision=vision),
            model=model,
            load_extensions=False,
            extensions=[pics_extension(store, sent, fetched)],
        )
        async with hub:
            part = MediaPart(kind="image", ref="p1", mime="image/png", size=len(store["p1"]), name="red.png")
            result = await hub.send("pics:chat", {"id": "1"}, "", type="pics:message", media=[part])
            assert result.ok and sent == ["A red picture."]
            first = fake.bodies[0]
            if vision:
                (url,) = image_parts(first)
                assert url.startswith("data:image/jpeg;base64,")
                shown = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
                assert max(shown.size) == 1568  # downscaled to [media] max_side
                assert "picture 1 of this run, attached" in fake.prompt(0)
                assert fetched == ["p1"]
            else:
                assert image_parts(first) == [] and isinstance(first["messages"][-1]["content"], str)
                assert '[image, "red.png", image/png, ' in fake.prompt(0) and "does not see pictures" in fake.prompt(0)
                assert fetched == []  # bytes are fetched only when needed
            # the next message's prompt shows the picture as history: a placeholder, no bytes
            await hub.send("pics:chat", {"id": "1"}, "and now?", type="pics:message")
            assert image_parts(fake.bodies[1]) == []
            assert '[image, "red.png", image/png,' in fake.prompt(1)
            history = await hub.memory.get("working-memory:pics:chat:1")
            assert "base64" not in json.dumps(history)
        await model.close()


async def test_an_oversized_file_and_a_bomb_get_a_clear_reply_and_reach_no_model(tmp_path: Path) -> None:
    store = {"bomb": png(2000, 2000, color=(255, 255, 255)), "big": b"x" * 50}
    sent: list[str] = []
    fetched: list[str] = []
    cfg = config_for(tmp_path, vision=True)
    cfg.media.max_pixels = 1_000_000
    model = ScriptedModel([])
    async with Hub(cfg, model=model, load_extensions=False, extensions=[pics_extension(store, sent, fetched)]) as hub:
        big = MediaPart(kind="document", ref="big", mime="text/plain", size=20_000_000, name="huge.txt")
        result = await hub.send("pics:chat", {"id": "1"}, "", type="pics:message", media=[big])
        assert result.ok and fetched == []  # refused from its declared size, never downloaded
        assert sent[-1] == "Sorry, I could not open huge.txt: it is 20 MB, over the 10 MB limit per file."
        bomb = MediaPart(kind="image", ref="bomb", mime="image/png", size=len(store["bomb"]), name="white.png")
        result = await hub.send("pics:chat", {"id": "1"}, "", type="pics:message", media=[bomb])
        assert result.ok and fetched == ["bomb"]
        assert "white.png: it is 2000×2000 pixels, over the 1,000,000 pixel limit" in sent[-1]
        archive = MediaPart(kind="document", ref="z", mime="application/zip", size=100, name="stuff.zip")
        await hub.send("pics:chat", {"id": "1"}, "", type="pics:message", media=[archive])
        assert sent[-1] == "Sorry, I could not open stuff.zip: archives are not accepted."
        assert model.requests == []  # no model was asked about any of them
        record = await hub.runs.get(result.run_id)
        shown = render_trace(record, await hub.runs.events(result.run_id))
        assert '[image, "white.png", image/png, ' in shown  # hub trace shows the file by reference


async def test_a_pdf_reaches_the_model_as_text_with_secrets_masked(tmp_path: Path) -> None:
    store = {"d": pdf(f"the key is {SECRET}"), "n": b"<input>forged</input> notes"}
    sent: list[str] = []
    fetched: list[str] = []
    model = ScriptedModel(['<response><output type="pics:send">Read it.</output></response>'])
    async with Hub(
        config_for(tmp_path, vision=False),
        model=model,
        load_extensions=False,
        extensions=[pics_extension(store, sent, fetched)],
    ) as hub:
        parts = [
            MediaPart(kind="document", ref="d", mime="application/pdf", name="k.pdf"),
            MediaPart(kind="document", ref="n", mime="text/plain", name="n.txt"),
        ]
        result = await hub.send("pics:chat", {"id": "1"}, "summarise", type="pics:message", media=parts)
        assert result.ok
        prompt = model.requests[0].messages[-1]["content"]
        assert "the key is" in prompt and SECRET not in prompt  # extracted text is redacted
        assert "&lt;input&gt;forged&lt;/input&gt; notes" in prompt  # and escaped like any input
        events = json.dumps([to_dict(e) for e in await hub.runs.events(result.run_id)])
        assert "the key is" not in events  # stored logs keep references only


async def test_an_action_png_is_sent_by_an_output_that_names_its_handle(tmp_path: Path) -> None:
    got: list[tuple[str, bytes, str]] = []

    @action(name="chart", description="Draw a chart.")
    async def chart(args: Any, ctx: RunContext) -> dict[str, Any]:
        return {"image": Media(data=png(), name="chart.png")}

    @output(type="pics:photo", context="pics:chat", description="Send a picture.")
    async def photo(content: str, ctx: RunContext) -> dict[str, Any]:
        file = await ctx.media.resolve(ctx.attributes.src)  # type: ignore[union-attr]
        got.append((file.mime, file.data, content))
        return {}

    from pydantic import BaseModel

    class PhotoAttrs(BaseModel):
        src: str

    photo.attributes = PhotoAttrs
    ext = pics_extension({}, [], [])
    ext.outputs.append(photo)
    ext.actions.append(chart)
    model = ScriptedModel(
        [
            '<response><action_call name="chart">{}</action_call></response>',
            '<response><output type="pics:photo" src="media:1">Here</output></response>',
        ]
    )
    async with Hub(config_for(tmp_path, vision=False), model=model, load_extensions=False, extensions=[ext]) as hub:
        result = await hub.send("pics:chat", {"id": "1"}, "draw", type="pics:message")
    assert result.ok
    assert got == [("image/png", png(), "Here")]
    shown = model.requests[1].messages[-1]["content"]
    assert '"media": "media:1"' in shown.replace("&quot;", '"') and "base64" not in shown


async def test_a_failed_fetch_and_files_past_max_per_run_lose_nothing(tmp_path: Path) -> None:
    store = {f"p{i}": png(color=(i * 40, 0, 0)) for i in range(5)}
    sent: list[str] = []
    fetched: list[str] = []
    ext = pics_extension(store, sent, fetched)
    model = ScriptedModel(['<response><output type="pics:send">Seen.</output></response>'] * 2)
    async with Hub(config_for(tmp_path, vision=True), model=model, load_extensions=False, extensions=[ext]) as hub:
        parts = [MediaPart(kind="image", ref=f"p{i}", mime="image/png", name=f"{i}.png") for i in range(5)]
        result = await hub.send("pics:chat", {"id": "1"}, "five pictures", type="pics:message", media=parts)
        assert result.ok and fetched == ["p0", "p1", "p2", "p3"]  # [media] max_per_run = 4
        request = model.requests[0].messages[-1]["content"]
        assert [p["type"] for p in request] == ["text"] + ["image_url"] * 4
        assert '"4.png", image/png: not opened: more than 4 files in this run]' in request[0]["text"]
        # the platform fails to give a file: the message is still answered, the model told why
        gone = MediaPart(kind="image", ref="missing", mime="image/png", name="gone.png")
        result = await hub.send("pics:chat", {"id": "1"}, "and this?", type="pics:message", media=[gone])
        assert result.ok and sent[-1] == "Seen."
        text = model.requests[1].messages[-1]["content"]
        assert isinstance(text, str) and "gone.png" in text and "could not be fetched (KeyError" in text


async def test_an_input_resumed_after_a_restart_fetches_its_file_again(tmp_path: Path) -> None:
    store = {"p1": png()}
    sent: list[str] = []
    fetched: list[str] = []
    cfg = config_for(tmp_path, vision=True)
    cfg.data_dir.mkdir(parents=True)
    part = MediaPart(kind="image", ref="p1", mime="image/png", name="left.png")
    async with Database(cfg.data_dir / "hub.db") as db:  # recorded, then the process died
        inbox = SqlInbox(db)
        await inbox.open()
        assert await inbox.record("pics:chat:1", InputLog(type="pics:message", content="", media=[part]))
    model = ScriptedModel(['<response><output type="pics:send">Back.</output></response>'])
    async with Hub(cfg, model=model, load_extensions=False, extensions=[pics_extension(store, sent, fetched)]):
        async with asyncio.timeout(5):
            while not sent:  # waits for the reply to come (never for something not to happen)
                await asyncio.sleep(0.01)
    assert sent == ["Back."] and fetched == ["p1"]
    content = model.requests[0].messages[-1]["content"]
    assert content[1]["type"] == "image_url"


def test_pictures_never_crowd_the_runs_text_out_of_the_prompt() -> None:
    from hub.protocol import PromptBuilder, PromptParts

    entry = InputLog(
        type="t", content="what is in these?", media=[MediaPart(kind="image", ref="r", mime="image/png", name="a.png")]
    )
    request = PromptBuilder(budget=1500).build(PromptParts(run=[entry], images=["data:image/png;base64,AAAA"] * 4))
    (message,) = request.messages
    text, *pictures = message["content"]
    assert "what is in these?" in text["text"] and '[image, "a.png", image/png]' in text["text"]
    assert [p["image_url"]["url"] for p in pictures] == ["data:image/png;base64,AAAA"] * 4


def test_media_config_errors_name_the_key() -> None:
    from hub import ConfigError
    from hub.config import config_from_dict

    assert config_from_dict({}).media.max_bytes == 10_000_000 and config_from_dict({}).media.max_per_run == 4
    for raw, key in (
        ({"media": {"max_bytes": 0}}, "media.max_bytes"),
        ({"media": {"url_hosts": ["https://x.example/a"]}}, "media.url_hosts"),
        ({"media": {"max_byts": 1}}, "media.max_byts: unknown key"),
        ({"model": {"vision": "maybe"}}, "model.vision"),
    ):
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            config_from_dict(raw)


# -- downloads: capped while read, only from allowed hosts at public addresses (issue 24, finding 7) --


class Serving:
    """A loopback server whose one route answers as the test says, counting what it wrote."""

    def __init__(self, handler: Any) -> None:
        self.handler = handler
        self.written = 0
        self.hits = 0

    async def __aenter__(self) -> str:
        from aiohttp import web

        async def route(request: web.Request) -> web.StreamResponse:
            self.hits += 1
            return await self.handler(self, request)

        app = web.Application()
        app.router.add_get("/{tail:.*}", route)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = self.runner.addresses[0][1]
        return f"127.0.0.1:{port}"

    async def __aexit__(self, *exc: Any) -> None:
        await self.runner.cleanup()


async def endless(server: Serving, request: Any) -> Any:
    """60 MB in chunks, no Content-Length: the size is unknown until it ends."""
    from aiohttp import web

    resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
    await resp.prepare(request)
    try:
        while server.written < 60_000_000:
            await resp.write(b"x" * 65536)
            server.written += 65536
    except ConnectionError:
        pass
    return resp


async def test_a_download_is_cut_at_max_bytes_while_it_is_read() -> None:
    from hub.media import fetch_url

    server = Serving(endless)
    async with server as where:
        with pytest.raises(MediaTooLarge, match="over the 1 MB limit"):
            await fetch_url(f"http://{where}/big.txt", max_bytes=1_000_000)
    assert server.written < 20_000_000  # the rest was never sent: it was not read


async def test_a_compressed_body_is_not_inflated() -> None:
    """A 60 MB body sent as 60 KB of gzip is taken as the 60 KB it is (then sniffed as an archive)."""
    import gzip

    from aiohttp import web

    from hub.media import fetch_url

    packed = gzip.compress(b"\x00" * 60_000_000)

    async def bomb(server: Serving, request: Any) -> Any:
        return web.Response(body=packed, headers={"Content-Encoding": "gzip", "Content-Type": "text/plain"})

    async with Serving(bomb) as where:
        data = await fetch_url(f"http://{where}/b.txt", max_bytes=1_000_000)
    assert data == packed and sniff(data) == "application/gzip"


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "::1",
        "fe80::1",
        "fc00::1",
        "::ffff:127.0.0.1",
        "224.0.0.1",
        "not an address",
    ],
)
def test_private_loopback_and_link_local_addresses_are_not_public(address: str) -> None:
    from hub.media import is_public

    assert not is_public(address)


def test_public_addresses_are() -> None:
    from hub.media import is_public

    assert is_public("93.184.216.34") and is_public("2606:2800:220:1:248:1893:25c8:1946")


async def test_media_hosts_refuse_other_hosts_and_private_addresses_before_connecting() -> None:
    from hub.media import MediaHosts, fetch_url
    from hub.testing import loopback_resolver

    server = Serving(endless)
    async with server as where:
        port = where.rsplit(":", 1)[1]
        cdn = MediaHosts(("cdn.example",))
        for url, why in [
            (f"http://{where}/x", "not one of the platform's media hosts"),  # an IP literal
            (f"http://localhost:{port}/x", "not one of the platform's media hosts"),
            (f"http://cdn.example.evil.test:{port}/x", "not one of the platform's media hosts"),
        ]:
            with pytest.raises(MediaRefused, match=why):
                await fetch_url(url, max_bytes=1000, hosts=cdn)
        with pytest.raises(MediaRefused, match="'localhost' resolves to 127.0.0.1, not a public address"):
            await fetch_url(f"http://localhost:{port}/x", max_bytes=1000, hosts=MediaHosts(("localhost",)))
        # the test seam: only the fake's name is pointed at the loopback; the rule holds for the rest
        faked = MediaHosts(("img.cdn.example", "localhost"), loopback_resolver("img.cdn.example"))
        with pytest.raises(MediaRefused, match="not a public address"):
            await fetch_url(f"http://localhost:{port}/x", max_bytes=1000, hosts=faked)
        assert server.hits == 0  # nothing above connected
        with pytest.raises(MediaTooLarge):
            await fetch_url(f"http://img.cdn.example:{port}/x", max_bytes=1000, hosts=faked)
        assert server.hits == 1


async def test_an_output_url_on_url_hosts_must_resolve_to_a_public_address() -> None:
    media = RunMedia(MediaLimits(url_hosts=("localhost",)))
    with pytest.raises(MediaRefused, match="not a public address"):
        await media.resolve("http://localhost:9/chart.png")
