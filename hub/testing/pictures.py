"""Pictures for tests of attachments: real image files, drawn with Pillow, of a size and
colour a test chooses (so that two pictures can be told apart by their bytes)."""

from __future__ import annotations

import io
from typing import Any

from PIL import Image

__all__ = ["image_bytes", "png"]


def image_bytes(
    width: int = 64,
    height: int = 48,
    *,
    format: str = "PNG",  # noqa: A002 - Pillow's name
    mode: str = "RGB",
    color: Any = (200, 30, 30),
    **save: Any,
) -> bytes:
    """A ``width`` × ``height`` picture of one ``color``, encoded as ``format`` (``"PNG"``,
    ``"JPEG"``, ``"WEBP"``, ``"GIF"``...); ``save`` goes to Pillow's ``Image.save`` (``exif=``...)."""
    buf = io.BytesIO()
    Image.new(mode, (width, height), color).save(buf, format=format, **save)
    return buf.getvalue()


def png(width: int = 64, height: int = 48, *, mode: str = "RGB", color: Any = (200, 30, 30), **save: Any) -> bytes:
    """A PNG of one ``color``: [`image_bytes()`][hub.testing.image_bytes] with ``format="PNG"``."""
    return image_bytes(width, height, format="PNG", mode=mode, color=color, **save)
