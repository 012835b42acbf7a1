"""Scratch space: the size of the filesystem holding a job's scratch directory."""

from __future__ import annotations

import os


def filesystem_size_bytes(path: str) -> int | None:
    """Total size of the filesystem at ``path``, or None if it cannot be read.

    Without quotas, HSF-TN-2016-02 defines scratch_limit_bytes as the full
    scratch space shared by all jobs on the host: the filesystem's size, not
    what happens to be free at job start.
    """
    try:
        stat = os.statvfs(path)
    except (OSError, ValueError):  # ValueError: a path with a NUL byte ($TMPDIR in an env file)
        return None
    return stat.f_blocks * stat.f_frsize or None
