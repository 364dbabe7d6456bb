"""Pytest fixtures for tests of the hub and its extensions; import them into a conftest.py::

    from hub.testing.fixtures import _no_network, _restore_logging  # noqa: F401  (autouse)

Both are autouse: once imported, every test under that conftest.py gets them.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from typing import Any

import pytest

__all__ = ["_no_network", "_restore_logging"]

_LOOPBACK = ("127.0.0.1", "::1", "localhost")


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests talk to 127.0.0.1 only: any other address fails loudly."""
    real = socket.socket.connect

    def guarded(self: socket.socket, address: Any) -> Any:
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and self.family in (socket.AF_INET, socket.AF_INET6):
            if host not in _LOOPBACK and not host.startswith("127."):
                raise OSError(f"test tried to reach the network: {address!r}")
        return real(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """Each test starts from the logging the one before it found: tests that set up logging
    (``hub`` commands run in process, ``setup_logging``, ``quiet_loggers``) leave no handler on
    a stream pytest closes, and no logger quieted, disabled or cut off from the root for the
    tests after them (which would then miss the lines ``caplog`` expects)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    saved = {
        name: _state(lg) for name, lg in logging.Logger.manager.loggerDict.items() if isinstance(lg, logging.Logger)
    }
    yield
    for h in list(root.handlers):
        if h not in handlers:
            root.removeHandler(h)
    for h in handlers:
        if h not in root.handlers:
            root.addHandler(h)
    root.setLevel(level)
    for name, lg in list(logging.Logger.manager.loggerDict.items()):
        if isinstance(lg, logging.Logger):  # a logger made during the test gets the defaults
            level, lg.disabled, lg.propagate = saved.get(name, (logging.NOTSET, False, True))
            lg.setLevel(level)


def _state(logger: logging.Logger) -> tuple[int, bool, bool]:
    return logger.level, logger.disabled, logger.propagate
