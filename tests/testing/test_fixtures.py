"""hub.testing.fixtures, as an extension's conftest.py imports them: each test starts from the
logging the test before it found, and no test reaches past loopback. Run as a pytest session of
its own, so that what one test leaves behind is seen by the next."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

CONFTEST = "from hub.testing.fixtures import _no_network, _restore_logging  # noqa: F401\n"

# in file order: the first test changes logging as `hub` commands and libraries do, the second
# checks that it finds the logging of before
TESTS = """
import logging
import socket

import pytest

from hub.logging_setup import quiet_loggers, setup_logging


def test_1_sets_up_logging():
    logging.getLogger("httpx")  # a library's logger, made before the test starts
    setup_logging("INFO")  # quiets httpx, among others
    quiet_loggers("made.during.the.test")
    logging.getLogger("httpx").disabled = True  # as logging.config does to loggers it does not name
    logging.getLogger("httpx").propagate = False


def test_2_finds_the_logging_of_before(caplog):
    httpx = logging.getLogger("httpx")
    assert (httpx.level, httpx.disabled, httpx.propagate) == (logging.NOTSET, False, True)
    assert logging.getLogger("made.during.the.test").level == logging.NOTSET
    assert not any(type(h) is logging.StreamHandler for h in logging.getLogger().handlers)
    caplog.set_level(logging.INFO)
    httpx.info("HTTP Request: GET http://127.0.0.1/")
    assert "HTTP Request" in caplog.text


def test_3_loopback_only():
    with socket.create_connection(("127.0.0.1", PORT), timeout=5):
        pass
    with pytest.raises(OSError, match="test tried to reach the network"):
        socket.create_connection(("192.0.2.1", 80), timeout=5)  # TEST-NET-1: never routed
"""


def test_logging_is_restored_and_the_network_refused_between_tests(tmp_path: Path) -> None:
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        (tmp_path / "conftest.py").write_text(CONFTEST)
        port = listener.getsockname()[1]
        (tmp_path / "test_order.py").write_text(textwrap.dedent(TESTS).replace("PORT", str(port)))
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", str(tmp_path)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout
