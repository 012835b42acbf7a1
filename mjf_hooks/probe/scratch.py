"""Scratch space: the size of the filesystem holding a job's scratch directory."""

from __future__ import annotations

import os


def filesystem_size_bytes(path: str) -> int | None:
    """Total size of the filesystem at ``path``, or None if it cannot be read.

    Without quotas, HSF-TN-2016-02 defines scratch_limit_bytes as the full
    scratch space shared by all jobs on the host: the filesystem's size, not
    what happens to be free at job start.

    As root (a hook acting for a job whose environment may name the directory), only
    a directory below directories of root's alone (the job's own directory last),
    reached through no symlink but root's own: no job can steer root to report another
    filesystem (its home, a mount it chose) or to trigger an automount; the size is read
    from the directory's descriptor (:func:`mjf_hooks.safefs.open_checked_dir`).
    """
    try:
        if os.geteuid() != 0:
            stat = os.statvfs(path)
        else:
            from ..safefs import ROOT_ONLY, RefusedPath, open_checked_dir

            try:
                with open_checked_dir(path, ROOT_ONLY, "root", any_last_owner=True,
                                      owners_symlinks=True) as directory:
                    stat = os.fstatvfs(directory.fd)
            except RefusedPath:
                return None
    except (OSError, ValueError):  # ValueError: a path with a NUL byte ($TMPDIR in an env file)
        return None
    return stat.f_blocks * stat.f_frsize or None

