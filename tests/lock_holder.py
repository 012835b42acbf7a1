"""A process that holds a POSIX record lock on a file until told to let go: how the
tests play a pilot (or a reader) in the middle of its update."""

from __future__ import annotations

import contextlib
import subprocess
import sys

_HOLDER = """
import fcntl, os, sys
exclusive = sys.argv[2] == "ex"
fd = os.open(sys.argv[1], os.O_RDWR if exclusive else os.O_RDONLY)
fcntl.lockf(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
print("ready", flush=True)
sys.stdin.readline()
"""


def start(path, exclusive: bool = True) -> subprocess.Popen:
    """A process holding a lock on ``path`` (exclusive, or shared), once it said so."""
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(path),
                               "ex" if exclusive else "sh"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "ready\n"
    return holder


def release(holder: subprocess.Popen) -> None:
    """Let go of the lock: the process ends (waited for; killed by its pid if it hangs)."""
    try:
        holder.communicate("go\n", timeout=10)
    except subprocess.TimeoutExpired:
        holder.kill()
        holder.communicate()


@contextlib.contextmanager
def held(*paths, exclusive: bool = True):
    """Locks on ``paths``, each held by a process of its own, for the ``with`` block."""
    holders = []
    try:
        for path in paths:
            holders.append(start(path, exclusive))
        yield holders
    finally:
        for holder in holders:
            release(holder)
