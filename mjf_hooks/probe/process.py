"""Whether a process still runs: its pid alone can be reused, its start time cannot."""

from __future__ import annotations

from . import read_text


def start_ticks(pid: int) -> int | None:
    """The start time of ``pid`` in clock ticks since boot (/proc/<pid>/stat field 22)."""
    text = read_text(f"/proc/{pid}/stat")
    if not text or ")" not in text:
        return None
    fields = text.rsplit(")", 1)[1].split()
    # After "pid (comm)", field 3 (state) is fields[0]: starttime (22) is fields[19].
    return int(fields[19]) if len(fields) > 19 and fields[19].isdigit() else None


def identity(pid: int) -> str | None:
    """``"<pid> <start ticks>"``: what :func:`still_running` checks later."""
    ticks = start_ticks(pid)
    return None if ticks is None else f"{pid} {ticks}"


def still_running(recorded: str) -> bool | None:
    """True/False for a recorded identity; None if the record is unreadable."""
    pid, _, ticks = recorded.strip().partition(" ")
    if not pid.isdigit() or not ticks.isdigit():
        return None
    return start_ticks(int(pid)) == int(ticks)
