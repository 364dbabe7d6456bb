"""Pictures and files: what came in (references), what is read (bytes, sniffed), what goes out.

An input carries [`MediaPart`][hub.MediaPart] references only; the bytes are fetched when a
run needs them (an image for a vision model, a text or PDF file to read), held in memory for
that run and never written to disk. Everything here is a pure function of bytes and
`MediaLimits`, so the engine, the prompt and every platform apply the same rules:

- a size cap per file (``max_bytes``) and a number of files per run (``max_per_run``);
- the type is read from the content (`sniff()`), never from the name or the platform's claim;
- archives and executables are never passed on (by content, and by name as well);
- a picture is decoded only when its header says it holds at most ``max_pixels`` pixels, with
  Pillow's own decompression-bomb guard as a second net; it reaches a model re-encoded
  (metadata such as GPS dropped) and downscaled to ``max_side``;
- text files and PDFs may be given to the model as their text, cut at ``max_text_chars``;
- a file name is shown to the model and the user ([`display_name()`][hub.platform.display_name]), never used as a path.

Outbound, an action returns [`Media`][hub.Media] (bytes, or a path under an allowed directory) and
an output names it by the handle its result shows (``media:1``) or by a URL whose host the
operator allowed; `RunMedia` keeps a run's files and resolves those names.
"""

from __future__ import annotations

import asyncio
import base64
import io
import ipaddress
import re
import socket
import time
import unicodedata
import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any
from urllib.parse import urlsplit

from aiohttp.abc import AbstractResolver

from .audio import AudioClip
from .errors import MediaError, MediaRefused, MediaTooLarge
from .logs import MediaPart

__all__ = [
    "MediaPart",
    "MediaLimits",
    "MediaFile",
    "Media",
    "RunMedia",
    "MediaError",
    "MediaTooLarge",
    "MediaRefused",
    "sniff",
    "check",
    "display_name",
    "human_size",
    "image_for_model",
    "extract_text",
    "data_url",
    "placeholder",
    "placeholders",
    "fetch_url",
    "read_capped",
    "MediaHosts",
    "Resolve",
    "Speaker",
    "public_addresses",
    "is_public",
    "host_name",
    "is_image",
    "is_text",
    "readable",
    "refused_by_claim",
]

# --- limits ---------------------------------------------------------------------------------


@dataclass(slots=True, frozen=True)
class MediaLimits:
    """``[media]`` as the code uses it (see `hub.config._sections.MediaSection`)."""

    max_bytes: int = 10_000_000
    max_per_run: int = 4
    max_pixels: int = 40_000_000
    max_side: int = 1568
    max_text_chars: int = 12_000
    max_pdf_pages: int = 30
    fetch_timeout: float = 30.0
    url_hosts: tuple[str, ...] = ()
    allowed_paths: tuple[str, ...] = ()
    decode_workers: int = 2
    decode_timeout: float = 20.0
    decode_memory: int = 512_000_000
    decode_pixels: int = 40_000_000


# --- types by content -----------------------------------------------------------------------

_EXECUTABLE = frozenset(
    {
        "application/x-msdownload",
        "application/x-executable",
        "application/x-mach-binary",
        "application/x-dosexec",
        "application/x-sharedlib",
        "application/x-elf",
        "application/vnd.microsoft.portable-executable",
        "application/x-shockwave-flash",
        "application/java-vm",
        "application/vnd.android.package-archive",
        "application/x-msi",
        "application/java-archive",
        "application/x-chrome-extension",
        "application/x-ms-shortcut",
    }
)
_ARCHIVE = frozenset(
    {
        "application/zip",
        "application/x-zip-compressed",
        "application/x-tar",
        "application/gzip",
        "application/x-gzip",
        "application/x-bzip2",
        "application/x-7z-compressed",
        "application/x-xz",
        "application/x-rar-compressed",
        "application/vnd.rar",
        "application/x-compress",
        "application/x-lzip",
        "application/zstd",
        "application/x-zstd",
        "application/vnd.ms-cab-compressed",
        "application/x-deb",
        "application/x-unix-archive",
        "application/x-rpm",
        "application/x-iso9660-image",
        "application/x-apple-diskimage",
        "application/x-lzma",
        "application/epub+zip",
    }
)
# By name as well: a renamed archive is caught by its content, a file the sniffer cannot
# place (a script, a disk image) by its name. Source code (.py, .js, .sh) is text and is read.
_REFUSED_SUFFIXES = frozenset(
    {
        "exe",
        "dll",
        "scr",
        "com",
        "bat",
        "cmd",
        "msi",
        "msp",
        "ps1",
        "psm1",
        "vbs",
        "vbe",
        "jse",
        "wsf",
        "wsh",
        "hta",
        "cpl",
        "jar",
        "apk",
        "aab",
        "app",
        "dmg",
        "deb",
        "rpm",
        "lnk",
        "reg",
        "pif",
        "so",
        "dylib",
        "sys",
        "iso",
        "img",
        "zip",
        "rar",
        "7z",
        "tar",
        "gz",
        "tgz",
        "bz2",
        "xz",
        "zst",
        "cab",
        "lz",
        "lzma",
        "z",
        "cpio",
        "ipa",
        "xpi",
        "crx",
    }
)
_IMAGE_FORMATS = {
    "PNG": "image/png",
    "JPEG": "image/jpeg",
    "GIF": "image/gif",
    "WEBP": "image/webp",
    "BMP": "image/bmp",
}
_TEXT_LIKE = frozenset(
    {
        "application/json",
        "application/xml",
        "application/x-yaml",
        "application/yaml",
        "application/toml",
        "application/javascript",
        "application/x-python",
        "application/x-sh",
        "application/sql",
    }
)


def sniff(data: bytes) -> str:
    """The MIME type of ``data`` read from its content: magic numbers (``filetype``) for
    binary formats, and ``text/plain`` for UTF-8 text without NUL bytes; else
    ``application/octet-stream``. The name and the platform's claim play no part."""
    import filetype  # small and pure Python; imported here so the core starts without it loaded

    head = data[:8192]
    if head[:2] == b"MZ":
        return "application/x-msdownload"  # DOS/PE executables (filetype only checks the PE header)
    if head[:4] == b"\x7fELF":
        return "application/x-executable"
    if head[:4] in (b"\xfe\xed\xfa\xce", b"\xfe\xed\xfa\xcf", b"\xce\xfa\xed\xfe", b"\xcf\xfa\xed\xfe"):
        return "application/x-mach-binary"
    kind = filetype.guess(head)
    if kind is not None:
        return str(kind.mime)
    if head and b"\x00" not in head and _utf8(head):
        return "text/plain"
    return "application/octet-stream"


def _utf8(head: bytes) -> bool:
    try:
        head.decode("utf-8")
        return True
    except UnicodeDecodeError as e:  # a multi-byte character cut by the 8 KB sample is fine
        return e.start >= len(head) - 3 and e.reason == "unexpected end of data"


def is_image(mime: str) -> bool:
    return mime in _IMAGE_FORMATS.values()


def is_text(mime: str) -> bool:
    return mime.startswith("text/") or mime in _TEXT_LIKE


def readable(mime: str) -> bool:
    """Whether a file of this type can be given to the model as text (text, PDF)."""
    return is_text(mime) or mime == "application/pdf"


def _suffix(name: str) -> str:
    return PurePath(name).suffix.lower().lstrip(".")


def refused_by_claim(part: MediaPart) -> str | None:
    """Why a file is refused from what the platform says alone (before any download), or None."""
    suffix = _suffix(part.name)
    if part.mime in _EXECUTABLE or (suffix in _REFUSED_SUFFIXES and suffix not in _ARCHIVE_SUFFIXES):
        return "executable files are not accepted"
    if part.mime in _ARCHIVE or suffix in _ARCHIVE_SUFFIXES:
        return "archives are not accepted"
    return None


_ARCHIVE_SUFFIXES = frozenset(
    {"zip", "rar", "7z", "tar", "gz", "tgz", "bz2", "xz", "zst", "cab", "lz", "lzma", "z", "cpio", "iso", "img", "dmg"}
)


# --- a file in memory -----------------------------------------------------------------------


@dataclass(slots=True, frozen=True)
class MediaFile:
    """A file's bytes, for one run: its type as sniffed, and a display name (never a path)."""

    data: bytes = field(repr=False)
    """The bytes, checked against ``[media]``'s limits."""
    mime: str
    """The type, sniffed from the bytes (never the claimed one)."""
    name: str
    """A name to show; never a path."""

    @property
    def size(self) -> int:
        """Its size in bytes."""
        return len(self.data)

    @property
    def kind(self) -> str:
        """``image`` for a picture, else ``document``."""
        return "image" if is_image(self.mime) else "document"


def check(data: bytes, *, name: str = "", limits: MediaLimits) -> MediaFile:
    """``data`` as a [`MediaFile`][hub.MediaFile] the hub may pass on: within ``max_bytes``, its type
    sniffed, never an archive or an executable (by content or by name).

    Raises:
        MediaTooLarge: over ``limits.max_bytes``.
        MediaRefused: an archive or executable.
    """
    shown = display_name(name)
    if len(data) > limits.max_bytes:
        raise MediaTooLarge(
            f"it is {human_size(len(data))}, over the {human_size(limits.max_bytes)} limit per file", name=shown
        )
    mime = sniff(data)
    if mime in _EXECUTABLE:
        raise MediaRefused("executable files are not accepted", name=shown)
    if mime in _ARCHIVE:
        raise MediaRefused("archives are not accepted", name=shown)
    suffix = _suffix(shown)
    if suffix in _REFUSED_SUFFIXES:
        raise MediaRefused(
            "archives are not accepted" if suffix in _ARCHIVE_SUFFIXES else "executable files are not accepted",
            name=shown,
        )
    return MediaFile(data=data, mime=mime, name=shown or "file")


_UNSAFE = re.compile(r"[\x00-\x1f\x7f/\\:*?\"<>|]+")


def display_name(name: str, *, limit: int = 80) -> str:
    """A platform's file name, safe to show: its last path component only, without control
    characters or path separators, at most ``limit`` characters. Never used as a path."""
    name = unicodedata.normalize("NFC", str(name or ""))
    name = name.replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(c for c in name if unicodedata.category(c)[0] != "C")  # control, format (RTL override)
    name = _UNSAFE.sub("_", name).strip(" .")
    if len(name) > limit:
        stem, dot, ext = name.rpartition(".")
        name = (stem[: limit - len(ext) - 2] + "…." + ext) if dot and len(ext) <= 10 else name[: limit - 1] + "…"
    return name


def human_size(n: int | None) -> str:
    """A size in bytes as people read it, in powers of 1000: ``"980 B"``, ``"1.5 MB"``,
    ``"3 GB"``; ``"unknown size"`` for None. For messages that tell a user a file is too big."""
    if n is None:
        return "unknown size"
    if n < 1000:
        return f"{n} B"
    for unit in ("KB", "MB", "GB"):
        n_f = n / 1000.0
        if n_f < 1000 or unit == "GB":
            return f"{n_f:.1f} {unit}".replace(".0 ", " ")
        n = int(n_f)
    return f"{n} B"  # pragma: no cover


# --- images ---------------------------------------------------------------------------------


def image_for_model(
    data: bytes, *, limits: MediaLimits, name: str = "", admit: Callable[[int], None] | None = None
) -> tuple[str, bytes]:
    """Decode a picture safely and re-encode it for a model: ``(mime, bytes)``, its longest
    side at most ``max_side``, the first frame of an animation, metadata dropped.

    The pixel count is read from the header and checked *before* decoding; Pillow's own
    ``DecompressionBombError`` (and its warning, made an error here) is a second guard. The
    picture is made small while it is decoded, not after: a JPEG is decoded at a reduced scale
    (``draft``), any other is reduced by a whole factor (``reduce``) as soon as it is loaded,
    and the full-size decode is dropped before the final resampling. ``admit(pixels)``, if
    given, is called with the pixels the decode will hold, before it starts (a budget of
    pixels decoded at once may make it wait). CPU-bound: the engine runs it in a worker
    process of its own (``hub.engine``'s decoder).

    Raises:
        MediaRefused: a decompression bomb, or not a picture Pillow can read.
    """
    from PIL import Image, UnidentifiedImageError

    shown = display_name(name)
    side = limits.max_side
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as img:
                width, height = img.size
                if width * height > limits.max_pixels:
                    raise MediaRefused(
                        f"it is {width}×{height} pixels, over the {limits.max_pixels:,} pixel limit "
                        "for pictures (refused undecoded, as a possible decompression bomb)",
                        name=shown,
                    )
                if img.format not in _IMAGE_FORMATS:
                    raise MediaRefused(f"{img.format or 'this'} pictures are not accepted", name=shown)
                img.draft("RGB", (side, side))  # JPEG: decode at a reduced scale
                if admit is not None:
                    admit(img.size[0] * img.size[1])
                img.seek(0)
                img.load()
                mode = "RGBA" if _has_alpha(img) else "RGB"
                frame = _reduced(img, side, mode)  # the full-size decode goes with the `with`
        frame = frame.convert(mode) if frame.mode != mode else frame
    except MediaError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as e:
        raise MediaRefused(f"it is refused as a decompression bomb ({e})", name=shown) from e
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, EOFError) as e:
        raise MediaRefused(f"it is not a picture that can be read ({type(e).__name__})", name=shown) from e
    frame.thumbnail((side, side), Image.Resampling.LANCZOS)
    out = io.BytesIO()
    if frame.mode == "RGBA":
        frame.save(out, format="PNG", optimize=True)
        return "image/png", out.getvalue()
    frame.save(out, format="JPEG", quality=85)
    return "image/jpeg", out.getvalue()


def _reduced(img: Any, side: int, mode: str) -> Any:
    """``img`` in ``mode``, made smaller by the largest whole factor that keeps its longest side
    at least ``side`` (a box filter; the final resampling is done on the small copy). It is
    reduced a band of rows at a time, so that beside the decoded picture only a band and the
    result are held, never a second full-size copy (Pillow premultiplies RGBA, a copy, to reduce)."""
    from PIL import Image

    factor = max(img.size) // side
    if factor < 2:
        return img.convert(mode)
    width, height = (img.size[0] // factor) * factor, (img.size[1] // factor) * factor
    out = Image.new(mode, (width // factor, height // factor))
    rows = factor * max(1, _BAND_PIXELS // (width * factor))  # a whole number of boxes per band
    for top in range(0, height, rows):
        band = img.crop((0, top, width, min(top + rows, height)))
        out.paste((band if band.mode == mode else band.convert(mode)).reduce(factor), (0, top // factor))
    return out


_BAND_PIXELS = 1_000_000
"""Pixels of the full-size picture reduced at a time."""


def _has_alpha(img: Any) -> bool:
    return img.mode in ("RGBA", "LA", "PA") or (img.mode == "P" and "transparency" in img.info)


def data_url(mime: str, data: bytes) -> str:
    """A ``data:`` URL, the form OpenAI-compatible servers take in an ``image_url`` part."""
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


# --- text -----------------------------------------------------------------------------------


def extract_text(file: MediaFile, *, limits: MediaLimits, deadline: float | None = None) -> str:
    """The text of a text file or a PDF, cut at ``max_text_chars`` with a visible marker.
    A PDF is read page by page until the cap is filled, ``max_pdf_pages`` are read, or the
    clock (`time.monotonic()`) passes ``deadline``; then a marker says what was left.
    CPU-bound for PDFs: the engine runs it in a worker process of its own.

    Raises:
        MediaRefused: not a readable type, or a PDF that cannot be read (encrypted, broken).
    """
    cap = limits.max_text_chars
    if is_text(file.mime):
        text = file.data.decode("utf-8", errors="replace")
    elif file.mime == "application/pdf":
        text = _pdf_text(file, limits, deadline)
    else:
        raise MediaRefused(f"{file.mime} files cannot be read as text", name=file.name)
    text = text.replace("\x00", "")
    if len(text) > cap:
        text = text[:cap] + f"\n[... {len(text) - cap} more characters of {file.name} cut]"
    return text


def _pdf_text(file: MediaFile, limits: MediaLimits, deadline: float | None) -> str:
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(file.data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise MediaRefused("the PDF is encrypted", name=file.name)
        pages = reader.pages
        out: list[str] = []
        size = 0
        for i, page in enumerate(pages):
            if i >= limits.max_pdf_pages:
                out.append(f"[... {len(pages) - i} more pages not read]")
                break
            if deadline is not None and i and time.monotonic() > deadline:
                out.append(f"[... stopped after {i} of {len(pages)} pages: this PDF is slow to read]")
                break
            text = page.extract_text() or ""
            out.append(text)
            size += len(text)
            if size > limits.max_text_chars:  # enough to fill the cap: stop reading
                break
        return "\n".join(out)
    except MediaError:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError, OSError) as e:
        raise MediaRefused(f"the PDF cannot be read ({type(e).__name__})", name=file.name) from e


# --- what the prompt shows instead of the bytes ---------------------------------------------


def placeholder(part: MediaPart, note: str = "") -> str:
    """One line for a file the model does not get as itself: kind, name, type, size."""
    bits = [part.kind or "file"]
    if part.name:
        bits.append(f'"{display_name(part.name)}"')
    if part.mime:
        bits.append(part.mime)
    if part.size is not None:
        bits.append(human_size(part.size))
    line = "[" + ", ".join(bits)
    return line + (f": {note}]" if note else "]")


def placeholders(parts: Sequence[MediaPart]) -> str:
    """The lines history shows for an input's files (never their bytes or their text)."""
    return "\n".join(placeholder(p) for p in parts)


# --- fetching -------------------------------------------------------------------------------

Resolve = Callable[[str, int], Awaitable[Sequence[str]]]
"""``resolve(host, port)``: the IP addresses a download from ``host`` may connect to."""


def is_public(address: str) -> bool:
    """Whether ``address`` is on the public internet: not loopback, private, link-local,
    shared (CGNAT), multicast, reserved or unspecified (an IPv4-mapped IPv6 address is judged
    as the IPv4 one it maps)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    if mapped is not None:
        ip = mapped
    return ip.is_global and not ip.is_multicast


async def public_addresses(host: str, port: int) -> list[str]:
    """``host``'s addresses from the system's resolver, when every one of them is public.

    Raises:
        MediaRefused: ``host`` resolves to a loopback, private or link-local address (or any
            other that is not public): the file is not fetched.
        MediaError: ``host`` does not resolve.
    """
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as e:
        raise MediaError(f"its host {host!r} does not resolve ({e.strerror or e})") from e
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    private = [a for a in addresses if not is_public(a)]
    if private or not addresses:
        raise MediaRefused(
            f"its host {host!r} resolves to {private[0] if private else 'nothing'}, not a public address"
        )
    return addresses


def host_name(entry: str) -> str:
    """A host name as a list of hosts takes it: lower case, no trailing dot.

    Raises:
        ValueError: a URL, a port or a path instead of a name.
    """
    h = entry.strip().lower().rstrip(".")
    if not h or "/" in h or ":" in h or " " in h:
        raise ValueError(f"{entry!r} is not a host name (write example.com, not a URL)")
    return h


@dataclass(frozen=True, slots=True)
class MediaHosts:
    """Where files named by URL may be fetched from: ``names`` (a host, or any host under it:
    ``discordapp.net`` takes ``media.discordapp.net``), each connected at the addresses
    ``resolve`` gives, which by default refuses any that is not public. A platform builds one
    from its documented list and its config's additions; a test points ``resolve`` at its
    loopback fake for its fake's names, and only those."""

    names: tuple[str, ...]
    """The hosts allowed: each one, and any host under it."""
    resolve: Resolve = public_addresses
    """How a host's addresses are found and checked (default: public addresses only)."""

    def allows(self, host: str) -> bool:
        """Whether ``host`` is one of ``names`` or under one (case-insensitive)."""
        host = host.lower().rstrip(".")
        return any(host == n or host.endswith("." + n) for n in self.names)


class _Pinned(AbstractResolver):
    """aiohttp's resolver for one download: the addresses already checked, so the connection
    goes where the check looked (a second lookup could answer otherwise)."""

    def __init__(self, addresses: Sequence[str]) -> None:
        self.addresses = addresses

    async def resolve(self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET) -> list[Any]:
        return [
            {
                "hostname": host,
                "host": a,
                "port": port,
                "family": socket.AF_INET6 if ":" in a else socket.AF_INET,
                "proto": 0,
                "flags": socket.AI_NUMERICHOST,
            }
            for a in self.addresses
        ]

    async def close(self) -> None:
        return None


async def fetch_url(
    url: str,
    *,
    max_bytes: int,
    timeout: float = 30.0,
    headers: Mapping[str, str] | None = None,
    name: str = "",
    hosts: MediaHosts | None = None,
) -> bytes:
    """GET ``url`` into memory, refusing more than ``max_bytes``: the cap is enforced while
    reading, whatever size the server declares, so an oversized body is never held whole.
    The body is taken as sent (no gzip inflated here: a compressed file is sniffed as the
    archive it is). Redirects are not followed, so an allowed host cannot send the hub elsewhere.

    With ``hosts`` (a URL a platform's message named: an attachment), the URL's host must be
    one of ``hosts``' names and the connection goes only to the addresses its ``resolve``
    vouches for (by default: public ones, never loopback, private or link-local). Without
    it, the URL is the operator's own (a configured API), fetched as it is.

    Raises:
        MediaTooLarge: the body is over ``max_bytes``.
        MediaRefused: not http(s), or a host or an address ``hosts`` does not allow.
        MediaError: an HTTP error, a timeout or a broken connection.
    """
    import aiohttp

    parts = urlsplit(url)
    shown = display_name(name) or display_name(parts.path)
    if parts.scheme not in ("http", "https"):
        raise MediaRefused("only http and https URLs are fetched", name=shown)
    connector = None
    if hosts is not None:
        host = (parts.hostname or "").lower().rstrip(".")
        if not hosts.allows(host):
            raise MediaRefused(f"its host {host!r} is not one of the platform's media hosts", name=shown)
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise MediaRefused("its URL has a bad port", name=shown) from None
        try:
            addresses = await hosts.resolve(host, port)
        except MediaError as e:
            raise type(e)(e.reason, name=shown) from e
        connector = aiohttp.TCPConnector(resolver=_Pinned(addresses), use_dns_cache=False)
    sent = {**dict(headers or {}), "Accept-Encoding": "identity"}
    too_large = f"it is over the {human_size(max_bytes)} limit per file"
    try:
        async with aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=timeout), auto_decompress=False, connector=connector
        ) as session:
            async with session.get(url, headers=sent, allow_redirects=False) as r:
                if r.status != 200:
                    raise MediaError(f"it could not be fetched (HTTP {r.status})", name=shown)
                if r.content_length is not None and r.content_length > max_bytes:
                    raise MediaTooLarge(
                        f"it is {human_size(r.content_length)}, over the {human_size(max_bytes)} limit per file",
                        name=shown,
                    )
                buf = bytearray()
                async for chunk in r.content.iter_chunked(65536):
                    buf += chunk
                    if len(buf) > max_bytes:
                        raise MediaTooLarge(too_large, name=shown)
                return bytes(buf)
    except MediaError:
        raise
    except (TimeoutError, aiohttp.ClientError) as e:
        raise MediaError(f"it could not be fetched ({type(e).__name__})", name=shown) from e


def read_capped(path: str, *, max_bytes: int, name: str = "") -> bytes:
    """A local file's bytes, reading at most ``max_bytes`` + 1 of them (blocking: call it in a thread).

    Raises:
        MediaTooLarge: the file is larger than ``max_bytes``.
        MediaError: it cannot be read.
    """
    shown = display_name(name) or display_name(path)
    try:
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as e:
        raise MediaError(f"it could not be read ({e.strerror or type(e).__name__})", name=shown) from e
    if len(data) > max_bytes:
        raise MediaTooLarge(f"it is over the {human_size(max_bytes)} limit per file", name=shown)
    return data


# --- outbound -------------------------------------------------------------------------------


@dataclass(slots=True, frozen=True)
class Media:
    """A picture or file an action returns for an output to send: ``data`` (bytes) or
    ``path`` (a file under one of ``[media] allowed_paths``), with a display ``name``.

    The model sees it in the action's result as ``{"media": "media:1", "name", "type",
    "size"}`` and sends it with an output's ``src="media:1"``; its bytes never reach a prompt.
    """

    data: bytes | None = field(default=None, repr=False)
    """The file's bytes (or give ``path``)."""
    path: str | None = None
    """A file under one of ``[media] allowed_paths`` (or give ``data``)."""
    name: str = ""
    """The name to show and send it under."""

    def __post_init__(self) -> None:
        if (self.data is None) == (self.path is None):
            raise ValueError("Media takes exactly one of data= (bytes) and path=")


Speaker = Callable[[str, int], Awaitable[list[AudioClip]]]
"""A run's ``speak(text, max_chars)``: the reply as voice messages, [] when it is not spoken."""


class RunMedia:
    """One run's files: what its inputs' files became in the prompt, and the files its
    actions produced (by handle), until the run ends. Nothing here outlives the run."""

    def __init__(self, limits: MediaLimits) -> None:
        self.limits = limits
        self.shown: dict[str, str] = {}
        """Input id → the lines the prompt shows for that input's files this run."""
        self.images: list[str] = []
        """``data:`` URLs of this run's pictures, in order, for a vision model."""
        self.refused: dict[str, list[str]] = {}
        """Input id → sentences saying why its files were refused (for the user)."""
        self.opened = 0
        """Files counted against ``max_per_run``."""
        self.files: dict[str, MediaFile] = {}
        self.audio: dict[str, list[MediaFile]] = {}
        """Input id → its voice notes as fetched (their bytes, for this run only): a model that
        takes audio could be given them."""
        self.spoken: set[str] = set()
        """Ids of this run's inputs that were voice notes, transcribed (``[voice]``)."""
        self.unheard: set[str] = set()
        """Those of ``refused`` that are voice notes not heard (the reply says "hear", not "open")."""
        self.speaker: Speaker | None = None
        """Speaks a reply for this run (see [`hub.platform.speak()`][hub.platform.speak]); None: no ``[voice]``."""

    async def add(self, media: Media) -> dict[str, Any]:
        """Keep an action's file for this run; what its result shows in its place. A file
        on disk is found, measured and read in a worker thread (up to ``max_bytes``, 10 MB
        by default: reading it on the loop's thread would stall every conversation).

        Raises:
            MediaError: over the limits, refused, or a path outside ``allowed_paths``.
        """
        if media.data is not None:
            file = check(bytes(media.data), name=media.name, limits=self.limits)
        else:
            file = await asyncio.to_thread(_read_allowed, str(media.path), media.name, self.limits)
        handle = f"media:{len(self.files) + 1}"
        self.files[handle] = file
        return {"media": handle, "name": file.name, "type": file.mime, "size": file.size}

    async def stash(self, value: Any) -> Any:
        """``value`` (an action's result) with every [`Media`][hub.Media] in it kept and replaced
        by its handle; an unusable file is replaced by ``{"media_error": reason}``."""
        if isinstance(value, Media):
            try:
                return await self.add(value)
            except MediaError as e:
                return {"media_error": str(e)}
        if isinstance(value, dict):
            return {k: await self.stash(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [await self.stash(v) for v in value]
        return value

    async def resolve(self, src: str) -> MediaFile:
        """The file an output names: a handle from this run (``media:1``), or an
        ``https://`` URL whose host is in ``[media] url_hosts`` (fetched, then checked).

        Raises:
            MediaError: unknown handle, a host not allowed, a fetch that failed, refused content.
        """
        src = src.strip()
        if src in self.files:
            return self.files[src]
        if src.startswith("media:"):
            known = ", ".join(self.files) or "none"
            raise MediaError(f"no file {src!r} in this run (known: {known})")
        parts = urlsplit(src)
        if parts.scheme in ("http", "https"):
            host = (parts.hostname or "").lower()
            allowed = MediaHosts(self.limits.url_hosts)  # and at public addresses only: the model chose this URL
            if not allowed.allows(host):
                raise MediaRefused(f"the host {host!r} is not in [media] url_hosts")
            name = PurePath(parts.path).name
            data = await fetch_url(
                src, max_bytes=self.limits.max_bytes, timeout=self.limits.fetch_timeout, name=name, hosts=allowed
            )
            return check(data, name=name, limits=self.limits)
        raise MediaError(f"{src!r} is neither a file of this run (media:N) nor an http(s) URL")


def _read_allowed(raw: str, name: str, limits: MediaLimits) -> MediaFile:
    """The checked file at ``raw`` (blocking: called in a worker thread)."""
    path = _allowed_path(raw, limits)
    size = path.stat().st_size
    shown = name or path.name
    if size > limits.max_bytes:
        raise MediaTooLarge(
            f"it is {human_size(size)}, over the {human_size(limits.max_bytes)} limit per file", name=shown
        )
    # read_capped: the file may have grown since the stat
    return check(read_capped(str(path), max_bytes=limits.max_bytes, name=shown), name=shown, limits=limits)


def _allowed_path(raw: str, limits: MediaLimits) -> Path:
    """``raw`` resolved (symlinks followed) when it lies inside one of ``allowed_paths``."""
    if not limits.allowed_paths:
        raise MediaRefused("files on disk are not sent unless [media] allowed_paths names their directory")
    path = Path(raw).expanduser().resolve()
    for root in limits.allowed_paths:
        base = Path(root).expanduser().resolve()
        if path.is_relative_to(base):
            if not path.is_file():
                raise MediaError(f"{path.name!r} is not a file")
            return path
    raise MediaRefused(f"{display_name(path.name)!r} is not under [media] allowed_paths")
