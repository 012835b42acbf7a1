"""Read-only facts about this host and this job's cgroup.

Each probe has a pure function that parses the text of a file and a thin
reader at the edge that opens the file, so tests feed recorded text.
"""

from __future__ import annotations

import os
import stat

_CHUNK = 65536


def read_text(path: str) -> str | None:
    """The content of a small kernel or config file, or None if it cannot be read or is
    not a regular file (a FIFO in its place is not waited on)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, ValueError):  # ValueError: a path with a NUL byte (from the environment)
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        # Read straight from the descriptor: a file object's buffering and its checks
        # (fstat, isatty, seeks) cost every probe more than the read itself.
        chunks = []
        while True:
            chunk = os.read(fd, _CHUNK)
            if not chunk:
                break
            chunks.append(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    # As text mode would read it, without the codec lookup that imports encodings.ascii.
    return data.decode("ascii", "replace").replace("\r\n", "\n").replace("\r", "\n")


def is_directory(path: str) -> bool:
    """Whether ``path`` is a directory (a cgroup still there): beside :func:`read_text`,
    the other way the probes look at the kernel's files, so a test's fake tree that
    stands in for one stands in for both."""
    return os.path.isdir(path)
