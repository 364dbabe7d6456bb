"""Starts a stdio MCP server as a child that dies with the hub: ``python -I _launch.py PPID
PROGRAM ARGS...`` (run by path, standard library only, so it starts in milliseconds).

On Linux it asks the kernel for SIGKILL when its parent dies (``PR_SET_PDEATHSIG``, kept
across ``exec``), checks the parent did not die before that, and then becomes the server
(``execv``): no orphan is left even when the hub is killed with SIGKILL. The hub gives it a
session of its own, so a stop ends the server's whole process group.
"""

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def main() -> None:
    parent, program, args = int(sys.argv[1]), sys.argv[2], sys.argv[2:]
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # no prctl: the hub's own stop still ends the server
            pass
    if os.getppid() != parent:  # the hub died before the request took effect
        sys.exit(1)
    try:
        os.execv(program, args)
    except OSError as e:
        print(f"cannot start {program}: {e.strerror}", file=sys.stderr)
        sys.exit(127)


if __name__ == "__main__":
    main()
