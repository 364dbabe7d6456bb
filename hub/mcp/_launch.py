"""Starts a stdio MCP server under a small keeper that bounds what it writes and leaves no
descendant behind: ``python -I _launch.py PPID MAX_BYTES PROGRAM ARGS...`` (run by path,
standard library only, so it starts in milliseconds).

The keeper:

- asks the kernel for SIGTERM when the hub dies (``PR_SET_PDEATHSIG``), even by SIGKILL, and
  becomes a subreaper (``PR_SET_CHILD_SUBREAPER``): every process the server starts stays
  its descendant, also one that calls ``setsid`` and outlives its parent. When the server
  exits, or the keeper is told to stop, it kills every descendant and reaps them (Linux).
- starts the server with the keeper's stdin and stderr, and relays its stdout line by line,
  never holding more than ``MAX_BYTES`` of one line: an answer over it is replaced by a
  JSON-RPC error for its id (the rest of the line is read and dropped); a line over it with
  no id to answer (a server writing without a newline) stops the server, which the hub then
  starts again. So the hub, and the SDK's reader in it, never buffer more than that.
"""

import ctypes
import json
import os
import re
import selectors
import signal
import subprocess
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
LINUX = sys.platform.startswith("linux")
_ID = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.){0,200}")')
EXIT_OVERSIZED = 70


def _prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):  # no prctl: the hub's own stop still ends the group
        return False


def _descendants() -> list[int]:
    """The pids of every living process below this one (all of them, as a subreaper's)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != b"Z":
                parents[int(entry)] = int(fields[1])
    found: list[int] = []
    frontier = {os.getpid()}
    while frontier:
        frontier = {p for p, pp in parents.items() if pp in frontier}
        found.extend(frontier)
    return found


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _reap_adopted(server: int) -> None:
    """Reap the orphans this subreaper adopted that have exited (never the server: Popen waits for it)."""
    me = str(os.getpid()).encode()
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != server:
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if fields[0] == b"Z" and fields[1] == me:
                try:
                    os.waitpid(int(entry), os.WNOHANG)
                except ChildProcessError:
                    pass


def _kill_all() -> None:
    """Kill every descendant until none is left (one that forks meanwhile is found next round)."""
    if not LINUX:
        try:
            os.killpg(0, signal.SIGKILL)  # the hub gave the keeper a session: the group is ours
        except OSError:
            pass
        return
    for _ in range(200):
        pids = _descendants()
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        _reap()
        time.sleep(0.005)


class _Relay:
    """The server's stdout to ours, one line at a time, each bounded to ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.line = bytearray()
        self.dropping = False  # reading the rest of a line already answered as too long

    def feed(self, chunk: bytes) -> bool:
        """Relay ``chunk``; False when the server must stop (a line too long to answer)."""
        while chunk:
            end = chunk.find(b"\n")
            part, chunk = (chunk, b"") if end < 0 else (chunk[: end + 1], chunk[end + 1 :])
            if self.dropping:
                self.dropping = end < 0
                continue
            self.line += part
            if len(self.line) > self.limit:
                if not self._refuse(whole=end >= 0):
                    return False
            elif end >= 0:
                _write(bytes(self.line))
                self.line.clear()
        return True

    def _refuse(self, *, whole: bool) -> bool:
        head = bytes(self.line[:1024])
        found = _ID.search(head)
        self.line.clear()
        if found is None or b'"method"' in head[: found.start()]:
            print(
                f"the server wrote more than {self.limit} bytes without a newline: stopped (max_message_bytes)",
                file=sys.stderr,
                flush=True,
            )
            return False
        answer = {
            "jsonrpc": "2.0",
            "id": json.loads(found.group(1)),
            "error": {
                "code": -32603,
                "message": f"the server's answer is over {self.limit} bytes (max_message_bytes): left unread",
            },
        }
        _write(json.dumps(answer).encode() + b"\n")
        self.dropping = not whole
        return True


def _write(data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(1, view) :]


def main() -> None:
    parent, limit, program, args = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[3:]
    if LINUX:
        _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
    if os.getppid() != parent:  # the hub died before the request took effect
        sys.exit(1)

    def stop(signum: int, frame: object) -> None:
        _kill_all()
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes the loop when the server exits

    def child_setup() -> None:
        if LINUX:  # the server dies with its keeper, whatever kills the keeper
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)

    try:
        server = subprocess.Popen(args, executable=program, stdout=subprocess.PIPE, preexec_fn=child_setup, bufsize=0)
    except OSError as e:
        print(f"cannot start {program}: {e.strerror}", file=sys.stderr)
        sys.exit(127)
    os.close(0)  # the server holds the hub's pipe: its end is the server's to see closed
    assert server.stdout is not None
    out = server.stdout.fileno()
    relay = _Relay(limit)
    code = None
    with selectors.DefaultSelector() as sel:
        sel.register(out, selectors.EVENT_READ)
        sel.register(wake_r, selectors.EVENT_READ)
        while code is None:
            for key, _ in sel.select():
                if key.fd == wake_r:
                    os.read(wake_r, 512)
                    code = server.poll()
                    if code is None and LINUX:
                        _reap_adopted(server.pid)
                    continue
                chunk = os.read(out, 65536)
                if not chunk:  # the server and everything holding its stdout closed it
                    code = server.wait()
                    break
                if not relay.feed(chunk):
                    code = EXIT_OVERSIZED
                    break
        # what the server wrote before it exited still goes to the hub
        os.set_blocking(out, False)
        try:
            while code != EXIT_OVERSIZED and (chunk := os.read(out, 65536)) and relay.feed(chunk):
                pass
        except OSError:
            pass
    _kill_all()
    sys.exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    main()
