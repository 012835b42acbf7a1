"""Whether a process still runs: its pid alone can be reused, its start time cannot."""

from __future__ import annotations

import os

from ..spec import digits_value
from . import read_text


def start_ticks(pid: int) -> int | None:
    """The start time of ``pid`` in clock ticks since boot (/proc/<pid>/stat field 22)."""
    stat = _stat_fields(pid)
    # After "pid (comm)", field 3 (state) is fields[0]: starttime (22) is fields[19].
    return digits_value(stat[1][19]) if stat is not None and len(stat[1]) > 19 else None


def _stat_fields(pid: int) -> tuple[str, list[str]] | None:
    """A process's command name and its /proc/<pid>/stat fields after it (state first)."""
    text = read_text(f"/proc/{pid}/stat")
    if not text or ")" not in text or "(" not in text:
        return None
    head, _, tail = text.rpartition(")")
    return head.partition("(")[2], tail.split()


def ancestor_named(command: str, pid: int | None = None, hops: int = 8) -> int | None:
    """The nearest ancestor of ``pid`` (this process) whose command name is ``command``,
    within ``hops`` parents (a site's wrapper or shell may stand between), or None."""
    pid = os.getppid() if pid is None else pid
    for _ in range(hops):
        fields = _stat_fields(pid) if pid > 1 else None
        if fields is None:
            return None
        if fields[0] == command:
            return pid
        pid = digits_value(fields[1][1]) if len(fields[1]) > 1 else None
        if pid is None:
            return None
    return None


def identity(pid: int) -> str | None:
    """``"<pid> <start ticks>"``: what :func:`still_running` checks later."""
    ticks = start_ticks(pid)
    return None if ticks is None else f"{pid} {ticks}"


def still_running(recorded: str) -> bool | None:
    """True/False for a recorded identity; None if the record is unreadable. A zombie
    (exited, not yet reaped: a slurmstepd whose parent is a slow init) has ended."""
    pid, _, ticks = recorded.strip().partition(" ")
    if digits_value(pid) is None or digits_value(ticks) is None:
        return None
    stat = _stat_fields(digits_value(pid))
    if stat is None or len(stat[1]) <= 19 or stat[1][0] in ("Z", "X"):
        return False
    return digits_value(stat[1][19]) == digits_value(ticks)


def owner(pid: int) -> int | None:
    """The uid a process runs as (its /proc directory's owner), or None if it is gone."""
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def boot_time() -> int | None:
    """When this machine booted, in UNIX seconds (/proc/stat btime), or None."""
    boot = next((line.split()[1] for line in (read_text("/proc/stat") or "").splitlines()
                 if line.startswith("btime ") and len(line.split()) > 1), None)
    return None if boot is None else digits_value(boot)


def started_at(pid: int) -> float | None:
    """When ``pid`` started, in UNIX seconds (boot time + its start ticks), or None."""
    ticks = start_ticks(pid)
    boot = boot_time()
    if ticks is None or boot is None:
        return None
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def cpus_allowed(pid: int) -> int | None:
    """How many CPUs ``pid`` may run on (its affinity mask), or None if it is gone."""
    try:
        return len(os.sched_getaffinity(pid))
    except OSError:
        return None


def runner_problem(recorded: str, uid: int) -> str | None:
    """Why the recorded identity ("<pid> <start ticks>") is no live process of ``uid``
    (None: it is one): unreadable, ended (its pid free or reused), or another user's."""
    if still_running(recorded) is None:
        return f"its runner {recorded.strip()[:40]!r} is no process identity"
    pid = digits_value(recorded.strip().partition(" ")[0])
    # The owner first: a process still there afterwards, with the recorded start, is the
    # one whose owner was read (its pid cannot have been reused in between).
    runs_as = owner(pid)
    if not still_running(recorded):
        return f"its runner process {pid} has ended"
    if runs_as != uid:
        return f"its runner process {pid} is uid {runs_as}'s, not the directory's uid {uid}"
    return None
