"""docs/extending/testing.md is one test file told in order: its Python blocks (those without a
skip mark), put together, are run by pytest in a process of its own, as a reader would run them
(the platforms' fakes are imported from hub.testing, nothing on PYTHONPATH), and every test in them
must pass."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.docs.test_code_blocks import ROOT, blocks

GUIDE = ROOT / "docs" / "extending" / "testing.md"


def guide_module() -> str:
    code = [b.text for b in blocks(GUIDE) if b.lang == "python" and b.skip is None]
    assert len(code) >= 8, "the guide's blocks are missing"
    return "\n\n\n".join(code) + "\n"


def test_the_testing_guide_runs(tmp_path: Path) -> None:
    module = guide_module()
    tests = re.findall(r"^(?:async )?def (test_\w+)", module, re.M)
    assert len(tests) >= 8
    (tmp_path / "test_guide.py").write_text(module)
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "test_guide.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert f"{len(tests)} passed" in proc.stdout, proc.stdout[-3000:]
