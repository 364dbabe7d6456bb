"""The data dir of one SQLite hub: one process at a time, and a database that is checked at start.

``hub run`` and ``hub chat`` take an exclusive OS lock on ``DATA_DIR/hub.lock`` (``flock``: the
kernel drops it when the process dies, however it dies), so a second process on the same
dir stops at once instead of answering every message and firing every schedule twice. The
lock file keeps the pid of the last hub that ran there, which is how the second one names it.

Before the stores open, `check_database()` refuses what would lose history silently: a
database that ``PRAGMA quick_check`` finds damaged, and an empty or missing ``hub.db`` in a
dir that shows a hub ran there before (a Chroma store, a lock file, a heartbeat).
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
from pathlib import Path

from ..errors import HubError

__all__ = ["DataDirLock", "DataDirInUse", "DatabaseRefused", "check_database", "LOCK_FILE", "DB_FILE"]

LOCK_FILE = "hub.lock"
DB_FILE = "hub.db"
_DB_FILES = {DB_FILE, f"{DB_FILE}-wal", f"{DB_FILE}-shm", f"{DB_FILE}-journal"}


class DataDirInUse(HubError):
    """Another process holds the data dir's lock."""


class DatabaseRefused(HubError):
    """The database is damaged, or empty where history is expected."""


class DataDirLock:
    """An exclusive, non-blocking ``flock`` on ``DATA_DIR/hub.lock``, held until `release()`
    or the process's end. ``existed`` tells whether a hub had run in this dir before."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir)
        self.path = self.data_dir / LOCK_FILE
        self.existed = False
        self._fd: int | None = None

    def acquire(self) -> DataDirLock:
        """Raises:
        DataDirInUse: another process holds it (the message names the dir and its pid).
        """
        if self._fd is not None:
            return self
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.existed = self.path.exists()
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise DataDirInUse(
                f"data dir {self.data_dir} is in use by another hub (pid {pid}); "
                "stop it first, or give this one another [hub] data_dir"
            ) from None
        except OSError:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        """Unlock; the file stays (it is how the next start knows a hub ran here)."""
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None

    def __enter__(self) -> DataDirLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _history(data_dir: Path, lock: DataDirLock | None) -> list[str]:
    """What shows that a hub ran in ``data_dir`` before (besides the database itself)."""
    found = []
    try:
        entries = sorted(data_dir.iterdir())
    except OSError:
        return []
    for entry in entries:
        if entry.name in _DB_FILES:
            continue
        if entry.name == LOCK_FILE and lock is not None and not lock.existed:
            continue  # made by this start
        found.append(entry.name + ("/" if entry.is_dir() else ""))
    return found


def check_database(data_dir: Path, *, allow_empty: bool = False, lock: DataDirLock | None = None) -> None:
    """Refuse a damaged database, and an empty one where a hub ran before.

    Raises:
        DatabaseRefused: naming the file, what is wrong and what to do.
    """
    data_dir = Path(data_dir)
    db = data_dir / DB_FILE
    size = db.stat().st_size if db.is_file() else None
    tables = 0
    if size:
        try:
            conn = sqlite3.connect(db, isolation_level=None)
            try:
                problems = [r[0] for r in conn.execute("PRAGMA quick_check(5)").fetchall()]
                tables = conn.execute("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]
            finally:
                conn.close()
        except sqlite3.DatabaseError as e:
            problems = [str(e)]
        if problems != ["ok"]:
            detail = " ".join("; ".join(problems).split()).replace("*** in database main *** ", "")[:300]
            raise DatabaseRefused(
                f"{db} is damaged (PRAGMA quick_check: {detail}); restore it from a backup, "
                "or move it away to start with an empty database"
            )
    if tables or allow_empty:
        return
    history = _history(data_dir, lock)
    if history:
        what = "missing" if size is None else ("0 bytes" if size == 0 else "empty (no tables)")
        raise DatabaseRefused(
            f"{db} is {what}, but {data_dir} has history ({', '.join(history)}): the database was lost or "
            "replaced. Restore it from a backup, or pass --allow-empty to start with an empty one"
        )
