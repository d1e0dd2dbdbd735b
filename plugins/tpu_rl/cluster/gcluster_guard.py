"""Run a command as the leader of its own process group, and take the group down when the
process that started it dies, even by SIGKILL (a killed Airflow worker leaves no gcluster or
terraform deploying on as an orphan beside the retry).

Usage: python gcluster_guard.py <command> [args...]; the exit status is the command's. A
standalone script (no package imports): the operator runs it by path, as a new session.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time

PR_SET_PDEATHSIG = 1
GRACE_SECONDS = 60.0


def _take_group_down(children: list[subprocess.Popen[bytes]]) -> None:
    """Interrupt the group (terraform releases its state lock), then kill what is left."""
    os.killpg(0, signal.SIGINT)
    deadline = time.monotonic() + GRACE_SECONDS
    while any(c.poll() is None for c in children) and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(0, signal.SIGKILL)  # this guard too


def main(argv: list[str]) -> int:
    children: list[subprocess.Popen[bytes]] = []
    signal.signal(signal.SIGINT, lambda *_: None)  # a group interrupt is for the command
    signal.signal(signal.SIGTERM, lambda *_: _take_group_down(children))
    starter = os.getppid()
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != starter:  # the starter died before prctl took effect
        return 1
    children.append(subprocess.Popen(argv))
    return children[0].wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
