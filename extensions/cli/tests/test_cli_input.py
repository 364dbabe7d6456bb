"""The terminal extension reads pipes, terminals, files and /dev/null without blocking the loop."""

import os

from hub_cli import read_lines


async def collect(stream) -> list[str]:
    return [line async for line in read_lines(stream)]


async def test_reads_a_pipe_to_eof() -> None:
    r, w = os.pipe()
    os.write(w, "one\ntwo é\n".encode())
    os.close(w)
    with os.fdopen(r) as stream:
        assert await collect(stream) == ["one\n", "two é\n"]


async def test_reads_a_regular_file_and_dev_null(tmp_path) -> None:
    path = tmp_path / "in.txt"
    path.write_text("a\nb\n")
    with path.open() as stream:
        assert await collect(stream) == ["a\n", "b\n"]
    with open(os.devnull) as stream:
        assert await collect(stream) == []
