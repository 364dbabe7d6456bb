"""hub.testing's pictures are real image files of the size, mode and format asked for."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from hub.media import sniff
from hub.testing import image_bytes, png


@pytest.mark.parametrize(
    ("data", "fmt", "size", "mode"),
    [
        (png(), "PNG", (64, 48), "RGB"),
        (png(3, 2, mode="RGBA", color=(0, 0, 0, 0)), "PNG", (3, 2), "RGBA"),
        (image_bytes(30, 20, format="JPEG"), "JPEG", (30, 20), "RGB"),
        (image_bytes(8, 8, format="WEBP", mode="RGBA", color=(1, 2, 3, 4)), "WEBP", (8, 8), "RGBA"),
    ],
)
def test_pictures_decode_as_asked(data: bytes, fmt: str, size: tuple[int, int], mode: str) -> None:
    img = Image.open(io.BytesIO(data))
    assert (img.format, img.size, img.mode) == (fmt, size, mode)
    assert sniff(data) == f"image/{fmt.lower()}"


def test_colours_tell_pictures_apart() -> None:
    assert png(color=(1, 2, 3)) != png(color=(3, 2, 1))
    assert png(color=(1, 2, 3)) == png(color=(1, 2, 3))
