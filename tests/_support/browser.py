"""Chromium, headless, as Playwright drives it in the dashboard's and the docs site's browser
tests: where it is (``HUB_UI_CHROMIUM``, else Debian's ``/usr/bin/chromium``), how it is
launched (`LAUNCH`, for ``pw.chromium.launch(**LAUNCH)``), and the mark that skips the tests
where it cannot run, saying why (`needs_browser`), except under CI (``CI`` set), where they
must run: ``.ci/run`` installs Chromium.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("HUB_UI_CHROMIUM", "/usr/bin/chromium")
# no sandbox (a container's root), no GPU, nothing in the background that would reach the network
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
]
LAUNCH: dict[str, Any] = {"executable_path": CHROMIUM, "args": ARGS, "headless": True}


def unavailable() -> str | None:
    """Why Playwright cannot drive Chromium here, or None where it can."""
    try:
        import playwright  # noqa: F401
    except ImportError as e:  # the dev extra is not installed
        return f"playwright is not installed ({e}); pip install -e '.[dev]'"
    if shutil.which(CHROMIUM) or Path(CHROMIUM).exists():
        return None
    return f"no Chromium at {CHROMIUM}: apt-get install chromium chromium-driver (as .ci/run does)"


def needs_browser(tests: str) -> pytest.MarkDecorator:
    """The mark that skips ``tests`` (``"the dashboard's browser tests"``) where `unavailable`
    says why; under CI, the error that they must run."""
    reason = unavailable()
    if reason and os.environ.get("CI"):
        raise RuntimeError(f"{tests} must run under CI: {reason}")
    return pytest.mark.skipif(reason is not None, reason=reason or "")
