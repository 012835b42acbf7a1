"""What a job's user may have written, held within what the machine has.

Where a job's directory or its ``jobfeatures/`` is not root's alone (a user's own store,
an HTCondor scratch, a pending job's values completed from inside it), every value in
it is its user's word. No job of this machine has more CPUs than the machine's
``total_cpu`` (as root wrote it), started before the machine booted, has a larger share
of the machine's ``hs06`` than of its CPUs, or used more CPU time than all its CPUs give
in the job's time. `mjf status`, `mjf drain --plan`, `mjf metrics` and the job records
all bound such values here, each bound said in one note ("allocated_cpu 1000000 counted
as 16, the machine's total_cpu").

Cheap to import: it runs in end-of-job hooks.
"""

from __future__ import annotations

from . import spec

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .store import Store


class MachineLimits:
    """What no job of this machine can exceed: its CPUs, its boot, its benchmark."""

    __slots__ = ("booted", "hs06", "total_cpu")

    def __init__(self, total_cpu: int | None, booted: int | None,
                 hs06: float | None = None) -> None:
        self.total_cpu = total_cpu
        self.booted = booted
        self.hs06 = hs06

    @classmethod
    def of(cls, store: Store) -> MachineLimits:
        """This machine's: ``total_cpu`` and ``hs06`` as root wrote them in ``store``'s
        machinefeatures/ (the CPUs the kernel counts where it wrote none), its boot
        (/proc/stat)."""
        import os

        from .probe import process

        total = store.machine.read_key("total_cpu")
        hs06 = store.machine.read_key("hs06")
        try:
            benchmark = None if hs06 is None else spec.parse_value("hs06", hs06)
        except ValueError:
            benchmark = None
        return cls((spec.digits_value(total) if total else None) or os.cpu_count(),
                   process.boot_time(), benchmark)

    def bound(self, values: dict) -> list[str]:
        """Bound, in place, the user-written ``values`` (``{MJF key: number}``):
        ``allocated_cpu`` by the machine's ``total_cpu``, ``jobstart_secs`` by its boot
        and ``hs06_job`` by the machine's ``hs06`` per CPU times the (bounded)
        ``allocated_cpu``; return a note of each value bounded."""
        notes = [bound_above(values, "allocated_cpu", self.total_cpu,
                             "the machine's total_cpu"),
                 bound_below(values, "jobstart_secs", self.booted, "when the machine booted")]
        cpus = values.get("allocated_cpu")
        if self.hs06 is not None and self.total_cpu and cpus is not None:
            notes.append(bound_above(values, "hs06_job",
                                     round(self.hs06 * cpus / self.total_cpu, 2),
                                     "the machine's hs06 per CPU x allocated_cpu"))
        return [note for note in notes if note]

    def bound_usage(self, values: dict) -> list[str]:
        """Bound, in place, what a job's user reported it used (``{MJF or record name:
        number}``): its ``cpu_secs`` by what all the machine's CPUs give in its
        ``wall_secs`` (and a second: batch systems give whole seconds)."""
        wall = values.get("wall_secs")
        if self.total_cpu is None or wall is None:
            return []
        note = bound_above(values, "cpu_secs", self.total_cpu * (wall + 1),
                           "the machine's total_cpu x (wall_secs + 1)")
        return [note] if note else []


def bound_above(values: dict, key: str, most: float | None, what: str) -> str | None:
    """Lower ``values[key]`` to ``most`` where it is more; the note saying so, or None."""
    value = values.get(key)
    if value is None or most is None or value <= most:
        return None
    values[key] = most
    return f"{key} {value} counted as {most}, {what}"


def bound_below(values: dict, key: str, least: float | None, what: str) -> str | None:
    """Raise ``values[key]`` to ``least`` where it is less; the note saying so, or None."""
    value = values.get(key)
    if value is None or least is None or value >= least:
        return None
    values[key] = least
    return f"{key} {value} counted as {least}, {what}"
