"""Processor counts: /proc/cpuinfo and the CPU affinity of a process."""

from __future__ import annotations

import os

from . import read_text

CPUINFO = "/proc/cpuinfo"


def count_processors(cpuinfo: str) -> int | None:
    """Number of ``processor :`` lines (the spec's definition of total_cpu)."""
    # Only a line holding the word can be one; the others (some 25 a processor) are not
    # taken apart.
    count = sum(1 for line in cpuinfo.splitlines()
                if "processor" in line and _field(line)[0] == "processor")
    return count or None


def count_physical_cores(cpuinfo: str) -> int | None:
    """Distinct (physical id, core id) pairs; None where the kernel does not say."""
    cores = set()
    physical_id = core_id = None
    for line in [*cpuinfo.splitlines(), ""]:
        name, value = _field(line)
        if name == "physical id":
            physical_id = value
        elif name == "core id":
            core_id = value
        elif not line.strip():
            if core_id is not None:
                cores.add((physical_id, core_id))
            physical_id = core_id = None
    return len(cores) or None


def _field(line: str) -> tuple[str, str]:
    name, _, value = line.partition(":")
    return name.strip(), value.strip()


def total_cpu() -> tuple[int | None, str]:
    """total_cpu of this host and where it came from."""
    text = read_text(CPUINFO)
    count = count_processors(text) if text else None
    return count, f"{CPUINFO}: {count} processor lines"


def model_name() -> str | None:
    """This host's CPU model as the kernel names it: /proc/cpuinfo's first ``model name``
    (None where it has none: most ARM kernels)."""
    text = read_text(CPUINFO)
    for line in (text or "").split("\n"):
        if line.startswith("model name"):
            return _field(line)[1]
    return None


def physical_cores() -> int | None:
    """Physical cores of this host (draft-0.99 ``phys_cores``)."""
    text = read_text(CPUINFO)
    return count_physical_cores(text) if text else None


def affinity_cpus(pid: int = 0) -> int:
    """Processors the process may run on (its CPU affinity mask)."""
    return len(os.sched_getaffinity(pid))
