"""Memory, swap and CPU limits of a process's cgroup, v1 and v2.

Paths are derived, never assumed: ``/proc/<pid>/cgroup`` names the process's
cgroup in each hierarchy and ``/proc/<pid>/mountinfo`` says where each
hierarchy is mounted. Batch systems set limits at different levels (Slurm sets
the job and step levels, leaves the task level unlimited), so memory limits
are the minimum over the cgroup and all its ancestors.
"""

from __future__ import annotations

from ..spec import digits_value
from . import is_directory, read_text
from .mounts import Mount, parse_mountinfo

# cgroup v1 reports "no limit" as LONG_MAX rounded down to the page size.
_V1_UNLIMITED_FROM = 2**63 - 2**21


class CgroupLimits:
    """What the kernel enforces on a process: None means no limit."""

    __slots__ = ("cpus", "memory_bytes", "path", "swap_bytes", "version")

    def __init__(self, version: int, path: str, memory_bytes: int | None,
                 swap_bytes: int | None, cpus: int | None) -> None:
        self.version = version
        self.path = path  # the process's own cgroup directory
        self.memory_bytes = memory_bytes
        self.swap_bytes = swap_bytes
        self.cpus = cpus

    def __repr__(self) -> str:
        return (f"CgroupLimits(v{self.version} {self.path}: memory={self.memory_bytes} "
                f"swap={self.swap_bytes} cpus={self.cpus})")


def parse_proc_cgroup(text: str) -> dict[str, str]:
    """Map each controller (``""`` for the v2 unified hierarchy) to the cgroup path."""
    paths = {}
    for line in text.splitlines():
        fields = line.split(":", 2)
        if len(fields) != 3:
            continue
        _, controllers, path = fields
        for controller in controllers.split(",") if controllers else [""]:
            paths[controller] = path
    return paths


def cgroup_mounts(mounts: list[Mount]) -> dict[str, tuple[str, str]]:
    """Map each cgroup controller (``""`` for cgroup2) to (mount root, mount point)."""
    found: dict[str, tuple[str, str]] = {}
    for mount in mounts:
        if mount.fstype == "cgroup2":
            found.setdefault("", (mount.root, mount.mount_point))
        elif mount.fstype == "cgroup":
            for option in mount.super_options:
                found.setdefault(option, (mount.root, mount.mount_point))
    return found


def cgroup_mounts_of(mountinfo: str) -> dict[str, tuple[str, str]]:
    """:func:`cgroup_mounts` of a mountinfo text, parsing only its lines that can be a
    cgroup mount (its type, cgroup or cgroup2, is on the line): the rest, all of a
    node's other filesystems, would be parsed on every job start for nothing."""
    return cgroup_mounts(parse_mountinfo(
        "\n".join([line for line in mountinfo.splitlines() if "cgroup" in line])))


def parse_limit(text: str | None) -> int | None:
    """A memory limit file's value in bytes; None for ``max``, v1's unlimited, or junk."""
    if text is None:
        return None
    number = digits_value(text.strip())
    return None if number is None or number >= _V1_UNLIMITED_FROM else number


def parse_cpu_list(text: str | None) -> int | None:
    """Number of CPUs in a list such as ``0-3,8,10-11``; None if empty or malformed."""
    if not text or not text.strip():
        return None
    count = 0
    for part in text.strip().split(","):
        first, dash, last = part.partition("-")
        start, stop = digits_value(first), digits_value(last if dash else first)
        if start is None or stop is None or stop < start:
            return None
        count += stop - start + 1
    return count


def cgroup_dir(controller: str, proc_cgroup: dict[str, str],
               mounts: dict[str, tuple[str, str]]) -> tuple[str, str] | None:
    """(the process's cgroup directory, the hierarchy's mount point) for a controller."""
    if controller not in proc_cgroup or controller not in mounts:
        return None
    root, mount_point = mounts[controller]
    path = proc_cgroup[controller]
    if root != "/" and (path == root or path.startswith(root + "/")):
        path = path[len(root):]
    return mount_point.rstrip("/") + "/" + path.strip("/"), mount_point


def _ancestors(directory: str, mount_point: str) -> list[str]:
    """``directory`` and its parents up to and including the mount point."""
    stop = mount_point.rstrip("/") or "/"
    chain = [directory.rstrip("/") or "/"]
    while chain[-1] != stop and chain[-1].startswith(stop) and chain[-1] != "/":
        chain.append(chain[-1].rsplit("/", 1)[0] or "/")
    return chain


def _min_limit(directories: list[str], filename: str) -> int | None:
    limits = [parse_limit(read_text(d + "/" + filename)) for d in directories]
    known = [limit for limit in limits if limit is not None]
    return min(known) if known else None


def _leaf_cpus(directories: list[str], filenames: tuple[str, ...]) -> int | None:
    for directory in directories:
        for filename in filenames:
            count = parse_cpu_list(read_text(directory + "/" + filename))
            if count is not None:
                return count
    return None


def limits(pid: int | str = "self") -> CgroupLimits | None:
    """The limits the kernel enforces on ``pid``; None when it is in no cgroup we can read."""
    proc_cgroup = read_text(f"/proc/{pid}/cgroup")
    mountinfo = read_text(f"/proc/{pid}/mountinfo")
    if not proc_cgroup or not mountinfo:
        return None
    return limits_from(parse_proc_cgroup(proc_cgroup), cgroup_mounts_of(mountinfo))


def limits_from(proc_cgroup: dict[str, str],
                mounts: dict[str, tuple[str, str]]) -> CgroupLimits | None:
    """Read the limit files of the cgroups named; v1 memory controller first, else v2."""
    v1_memory = cgroup_dir("memory", proc_cgroup, mounts)
    if v1_memory:
        chain = _ancestors(*v1_memory)
        memory = _min_limit(chain, "memory.limit_in_bytes")
        memory_and_swap = _min_limit(chain, "memory.memsw.limit_in_bytes")
        # v1 limits memory+swap together: the swap a job may use is what memsw leaves over.
        swap = None
        if memory_and_swap is not None and memory is not None:
            swap = max(0, memory_and_swap - memory)
        v1_cpuset = cgroup_dir("cpuset", proc_cgroup, mounts)
        cpus = None
        if v1_cpuset:
            cpus = _leaf_cpus(_ancestors(*v1_cpuset), ("cpuset.effective_cpus", "cpuset.cpus"))
        return _if_still_there(CgroupLimits(1, v1_memory[0], memory, swap, cpus))
    unified = cgroup_dir("", proc_cgroup, mounts)
    if unified:
        chain = _ancestors(*unified)
        return _if_still_there(CgroupLimits(
            2,
            unified[0],
            _min_limit(chain, "memory.max"),
            _min_limit(chain, "memory.swap.max"),
            _leaf_cpus(chain, ("cpuset.cpus.effective",)),
        ))
    return None


def _if_still_there(limits: CgroupLimits) -> CgroupLimits | None:
    """``limits``, unless the cgroup they were read for is gone (its last process ended,
    and it was removed, while they were read: a job ending under a reader): its files
    then read as missing, and the parents' CPUs alone would be taken for the job's.
    Checked after the reads, so a removal during them is seen (on a real v2 kernel:
    tests/integration/test_cgroup2_standalone.py)."""
    return limits if is_directory(limits.path) else None


class CgroupUsage:
    """What a cgroup's accounting says its processes used, all of them, those gone
    included (the kernel charges every level up the tree): None where not kept."""

    __slots__ = ("cpu_path", "cpu_secs", "memory_path", "peak_memory_bytes", "version")

    def __init__(self, version: int, cpu_path: str | None, cpu_secs: float | None,
                 memory_path: str | None, peak_memory_bytes: int | None) -> None:
        self.version = version
        self.cpu_path, self.cpu_secs = cpu_path, cpu_secs
        self.memory_path, self.peak_memory_bytes = memory_path, peak_memory_bytes

    def facts(self) -> dict[str, tuple]:
        """As a job's Delivered values, ``{name: (value, source)}``."""
        facts = {}
        if self.cpu_secs is not None:
            name = "cpuacct.usage" if self.version == 1 else "cpu.stat usage_usec"
            facts["cpu_secs"] = (self.cpu_secs, f"cgroup {self.cpu_path}/{name}")
        if self.peak_memory_bytes is not None:
            name = "memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"
            facts["peak_memory_bytes"] = (self.peak_memory_bytes,
                                          f"cgroup {self.memory_path}/{name}")
        return facts


def _stat_field(text: str | None, field: str) -> int | None:
    """A ``name value`` line's value from a flat-keyed file such as cpu.stat."""
    for line in (text or "").splitlines():
        name, _, value = line.partition(" ")
        if name == field:
            return digits_value(value.strip())
    return None


def usage(pid: int | str, level) -> CgroupUsage | None:
    """The accounting of the cgroup ``level`` picks from ``pid``'s cgroup path - a
    function of that path (as /proc names it) giving the path of the job's level, an
    ancestor or itself, or None - read where it is kept; None if it is nowhere (not in a
    job's cgroup, or the cgroup is gone)."""
    proc_cgroup = read_text(f"/proc/{pid}/cgroup")
    mountinfo = read_text(f"/proc/{pid}/mountinfo")
    if not proc_cgroup or not mountinfo:
        return None
    return usage_from(parse_proc_cgroup(proc_cgroup), cgroup_mounts_of(mountinfo), level)


def usage_from(proc_cgroup: dict[str, str], mounts: dict[str, tuple[str, str]],
               level) -> CgroupUsage | None:
    """:func:`usage` from parsed ``/proc/<pid>/cgroup`` and cgroup mounts.

    In cgroup v1 a process need not be inside the job in every hierarchy (Slurm runs its
    TaskEpilog in the job's memory and freezer cgroups but the root cpuacct one): the
    job's level found in one hierarchy is taken to be the same path in the others."""
    picked = {controller: level(path) for controller, path in proc_cgroup.items()}
    v1_job = next((path for controller, path in picked.items() if controller and path), None)

    def directory(controller: str) -> str | None:
        chosen = picked.get(controller) or (v1_job if controller else None)
        if chosen is None:
            return None
        found = cgroup_dir(controller, {controller: chosen}, mounts)
        return found[0] if found else None

    cpuacct, memory = directory("cpuacct"), directory("memory")
    if cpuacct or memory:
        nanoseconds = digits_value((read_text(f"{cpuacct}/cpuacct.usage") or "").strip()) \
            if cpuacct else None
        peak = digits_value((read_text(f"{memory}/memory.max_usage_in_bytes") or "").strip()) \
            if memory else None
        if nanoseconds is None and peak is None:
            return None
        return CgroupUsage(1, cpuacct, None if nanoseconds is None else nanoseconds / 1e9,
                           memory, peak)
    unified = directory("")
    if unified is None:
        return None
    microseconds = _stat_field(read_text(f"{unified}/cpu.stat"), "usage_usec")
    peak = digits_value((read_text(f"{unified}/memory.peak") or "").strip())  # Linux >= 5.19
    if microseconds is None and peak is None:
        return None
    return CgroupUsage(2, unified, None if microseconds is None else microseconds / 1e6,
                       unified, peak)
