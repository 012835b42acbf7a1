"""How often each hook failed, and why: counters for ``mjf metrics``.

Each failure a hook's fail-safe frame logs appends one byte to
``<base_dir>/state/hook_failures/<entry point>.<reason>``, so a counter is its file's
size. An append (``O_APPEND``) is atomic in the kernel: hooks that fail together - a
broken config fails every hook of a busy node at once - never wait on a lock nor lose a
count, and a reader needs no lock either. Only the failure path imports this module:
a hook that succeeds pays nothing for it.

Entry points and reasons are ours (a command and its role; one of ``REASONS``), never
what a job's user wrote, so the label sets they make are bounded. A hook that cannot
write ``base_dir/state`` (one running as the job's user) counts nothing; nor does a
hook whose ``base_dir`` does not exist (nothing outside it is ever made).
"""

from __future__ import annotations

import os
import stat

from .errors import MJFError
from .store import Store

COUNTERS_DIR = "hook_failures"
# Why a hook failed, as the frame tells: its config could not be read; a wrong command
# line (a wiring mistake: an unknown role); the site's input or the node's state is
# wrong (a message saying what and where); a system call failed; a bug of ours.
REASONS = ("config", "usage", "input", "system", "internal")
_ENTRY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_ ")
_MAX_ENTRY_CHARS = 64


def reason_of(error: BaseException) -> str:
    """The reason a failure with ``error`` is counted under."""
    if isinstance(error, MJFError):
        return "input"
    if isinstance(error, OSError):
        return "system"
    return "internal"


def file_name(entry: str, reason: str) -> str | None:
    """The counter file of an entry point (``mjf-slurm prolog``) and a reason; None for
    one that is not ours."""
    if reason not in REASONS or not entry or len(entry) > _MAX_ENTRY_CHARS \
            or not set(entry) <= _ENTRY_CHARS:
        return None
    return f"{entry.replace(' ', '+')}.{reason}"


def _parse_name(name: str) -> tuple[str, str] | None:
    entry, _, reason = name.rpartition(".")
    entry = entry.replace("+", " ")
    return (entry, reason) if file_name(entry, reason) == name else None


def record(base_dir: str, entry: str, reason: str | BaseException,
           dir_mode: int = 0o755) -> None:
    """Count one failure of ``entry`` for ``reason`` (or the error it failed with).
    Never raises: counting must not turn a logged failure into another."""
    try:
        name = file_name(entry, reason if isinstance(reason, str) else reason_of(reason))
        if name is None or not os.path.isdir(base_dir):
            return
        with Store(base_dir, dir_mode).machine.open_state(create=True) as state, \
                state.subdir(COUNTERS_DIR, dir_mode, None, create=True) as counters:
            fd = os.open(name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
                         | os.O_NONBLOCK | os.O_CLOEXEC, 0o644, dir_fd=counters.fd)
            try:
                if stat.S_ISREG(os.fstat(fd).st_mode):
                    os.write(fd, b"1")
            finally:
                os.close(fd)
    except Exception:  # noqa: BLE001, S110 - a hook running as its job's user cannot count
        pass


def counts(base_dir: str) -> dict[tuple[str, str], int]:
    """Every counter: (entry point, reason) -> failures. Empty where none was ever
    counted; files that are not counters (by name or kind) are skipped."""
    from .errors import StoreError

    found: dict[tuple[str, str], int] = {}
    try:
        with Store(base_dir).machine.open_state() as state, \
                state.subdir(COUNTERS_DIR, 0o755, None) as counters:
            for name in os.listdir(counters.fd):
                key = _parse_name(name)
                if key is None:
                    continue
                try:
                    info = os.stat(name, dir_fd=counters.fd, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if stat.S_ISREG(info.st_mode):
                    found[key] = info.st_size
    except (OSError, StoreError):  # none counted yet, or not this user's to read
        pass
    return found
