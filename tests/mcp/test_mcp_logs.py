"""A stdio server's log (``data_dir/mcp/NAME.log``) stays bounded (issue 40, item 21): past
its cap its content moves to ``NAME.log.1`` and the server, which holds the file open in
append mode, goes on writing at the start of the emptied file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from hub.mcp import cap_log


def test_a_log_past_its_cap_moves_aside_and_the_server_writes_on(tmp_path: Path) -> None:
    path = tmp_path / "time.log"
    with open(path, "a", encoding="utf-8") as log:  # as the hub opens it for the server's stderr
        write = [sys.executable, "-c", "import sys; sys.stderr.write(sys.argv[1])"]
        subprocess.run([*write, "x" * 2000], stderr=log, check=True)
        assert not cap_log(path, 5000)
        assert cap_log(path, 1000)
        subprocess.run([*write, "after the cut\n"], stderr=log, check=True)
    assert (tmp_path / "time.log.1").read_text() == "x" * 2000
    assert path.read_text() == "after the cut\n", "a hole or the old content is left"
    path.write_text("y" * 3000)
    assert cap_log(path, 1000) and (tmp_path / "time.log.1").read_text() == "y" * 3000  # one older file kept
