"""Files made by the tests that need them (no binary blobs in the tree): the issue 24 probe's
decoding bombs, and ordinary files to measure against."""

from __future__ import annotations

import io
import struct
import zlib


def _pdf(pages: list[bytes], *, shared: bool = False) -> bytes:
    """A PDF with one page per content stream in ``pages`` (or, ``shared``, every page
    drawing the first one), Helvetica as F1, with a correct cross-reference table."""
    streams = pages[:1] if shared else pages
    count = len(pages)
    first_stream = 4 + count
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % (4 + i) for i in range(count)), count),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for i in range(count):
        contents = first_stream if shared else first_stream + i
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
            b"/Resources << /Font << /F1 3 0 R >> >> >>" % contents
        )
    for content in streams:
        packed = zlib.compress(content, 9)
        objects.append(b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(packed) + packed + b"\nendstream")
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for n, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % n + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    out.write(b"".join(b"%010d 00000 n \n" % o for o in offsets))
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    return out.getvalue()


def slow_pdf(pages: int = 30, stream_bytes: int = 4_000_000) -> bytes:
    """The probe's PDF: about 16 KB, ``pages`` pages sharing one Flate stream of
    ``stream_bytes`` that shows one empty string (so a text extractor must parse it all) and
    then only moves the pen. About 9 s of CPU per page for pypdf; it prints no text."""
    head = b"BT /F1 12 Tf () Tj ET\n"
    content = head + b"0 0 m\n" * ((stream_bytes - len(head)) // 6)
    return _pdf([content] * pages, shared=True)


def text_pdf(pages: int = 10, lines: int = 40) -> bytes:
    """An ordinary PDF: ``pages`` pages of ``lines`` lines of text each."""
    out = []
    for p in range(pages):
        body = [b"BT /F1 11 Tf 50 760 Td 14 TL"]
        body += [
            b"(Page %d, line %d: the quarterly figures rose by %d percent.) '" % (p + 1, n + 1, n) for n in range(lines)
        ]
        body.append(b"ET")
        out.append(b"\n".join(body))
    return _pdf(out)


def zero_png(width: int = 6000, height: int = 6000) -> bytes:
    """The probe's PNG: ``width`` x ``height`` RGBA pixels of zeros, about 140 KB at
    6000 x 6000, 144 MB once decoded; under the default 40 MP ``max_pixels``."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)  # 8 bits, RGBA
    packer = zlib.compressobj(9)
    row = b"\x00" * (1 + 4 * width)  # filter byte, then the pixels
    idat = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def photo(width: int = 4000, height: int = 3000) -> bytes:
    """An ordinary photo: a 12 MP JPEG of noise (as hard to compress as a real one)."""
    from PIL import Image

    img = Image.effect_noise((width, height), 12).convert("RGB")
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=88)
    return buf.getvalue()
