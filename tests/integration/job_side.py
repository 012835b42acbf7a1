"""Code that runs inside the test jobs (as their users), shared by the batch-system tests."""

from __future__ import annotations

# Appended to a job's dump script: `out["cgroup_limits"]` lists the memory limits the
# kernel enforces on the job, at its cgroup v1 memory level and every ancestor.
MEMORY_LIMITS = r'''
limits = []
for line in open("/proc/self/cgroup"):
    _, controllers, path = line.rstrip("\n").split(":", 2)
    if "memory" in controllers.split(","):
        while True:
            try:
                with open("/sys/fs/cgroup/memory" + path + "/memory.limit_in_bytes") as f:
                    limits.append(int(f.read()))
            except OSError:
                pass
            if path in ("/", ""):
                break
            path = path.rsplit("/", 1)[0] or "/"
out["cgroup_limits"] = limits
'''


def enforced_memory_limit(view: dict) -> int | None:
    """The limit the job's dump saw enforced (v1's huge values mean none)."""
    limits = [limit for limit in view["cgroup_limits"] if limit < 2**62]
    return min(limits) if limits else None
