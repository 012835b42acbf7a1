"""Whether a process still runs: its pid alone can be reused, its start time cannot."""

from __future__ import annotations

from ..spec import digits_value
from . import read_text


def start_ticks(pid: int) -> int | None:
    """The start time of ``pid`` in clock ticks since boot (/proc/<pid>/stat field 22)."""
    text = read_text(f"/proc/{pid}/stat")
    if not text or ")" not in text:
        return None
    fields = text.rsplit(")", 1)[1].split()
    # After "pid (comm)", field 3 (state) is fields[0]: starttime (22) is fields[19].
    return digits_value(fields[19]) if len(fields) > 19 else None


def identity(pid: int) -> str | None:
    """``"<pid> <start ticks>"``: what :func:`still_running` checks later."""
    ticks = start_ticks(pid)
    return None if ticks is None else f"{pid} {ticks}"


def still_running(recorded: str) -> bool | None:
    """True/False for a recorded identity; None if the record is unreadable."""
    pid, _, ticks = recorded.strip().partition(" ")
    if digits_value(pid) is None or digits_value(ticks) is None:
        return None
    return start_ticks(digits_value(pid)) == digits_value(ticks)
