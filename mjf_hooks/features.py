"""Facts + site config -> the key values a job reads.

Pure functions: every input is plain data gathered elsewhere, every output
maps a key to ``(value, source)`` so ``--verbose`` and ``--dry-run`` can say
where each value came from. Precedence is documented in docs/keys.md:

* machine keys: the config wins over what is probed;
* per-job facts from the batch system (job_id, jobstart_secs, allocated_cpu)
  are never overridden;
* limits (wall, cpu, memory, swap, scratch) take the smallest of the limits
  that apply: the batch system's, the cgroup's and the config's;
* a value that cannot be determined is left out, never guessed.
"""

from __future__ import annotations

from . import spec
from .config import Config
from .errors import SiteInputError

# Type names only: importing collections.abc at run time costs every job start ~2 ms,
# and a hook that probes no cgroup need not load the cgroup probe.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from .probe.cgroup import CgroupLimits

Sourced = tuple  # (value, source description)
Features = dict  # key name -> Sourced


def machine_features(config: Config, total_cpu: Sourced | None,
                     physical_cores: int | None = None) -> Features:
    """The machine keys of this host."""
    features: Features = {}
    for name, value in config.machine.items():
        features[name] = (value, "config [machinefeatures]")
    if "total_cpu" not in features and total_cpu and total_cpu[0]:
        features["total_cpu"] = total_cpu
    cpus = features.get("total_cpu", (None,))[0]
    if "hs06" not in features and config.hs06_per_cpu is not None and cpus:
        features["hs06"] = (config.hs06_per_cpu * cpus, "hs06_per_cpu x total_cpu")
    if config.legacy_keys:
        extra = {"phys_cores": (physical_cores, "/proc/cpuinfo core ids")}
        features.update(_legacy(spec.MACHINE, features, extra))
    return features


def job_features(
    config: Config,
    machine: Features,
    batch: Mapping[str, Sourced],
    cgroup: CgroupLimits | None = None,
    scratch_size: Sourced | None = None,
) -> Features:
    """The job keys of one job.

    ``batch`` holds what the batch system (or ``mjf run``'s options) says about
    the job, keyed by MJF key name; ``machine`` is this host's machine features.
    """
    for required in ("job_id", "jobstart_secs"):
        if required not in batch:
            raise SiteInputError(f"the batch system did not give the job's {required}")
    features: Features = {name: batch[name] for name in ("job_id", "jobstart_secs")}
    if "allocated_cpu" in batch:
        features["allocated_cpu"] = batch["allocated_cpu"]

    cgroup_limits = {}
    if cgroup is not None:
        where = f"cgroup v{cgroup.version} {cgroup.path}"
        cgroup_limits["max_rss_bytes"] = (cgroup.memory_bytes, where)
        cgroup_limits["max_swap_bytes"] = (cgroup.swap_bytes, where)
    for name in ("wall_limit_secs", "cpu_limit_secs", "max_rss_bytes", "max_swap_bytes",
                 "scratch_limit_bytes"):
        candidates = [batch.get(name), _from_config(config, name), cgroup_limits.get(name)]
        smallest = _smallest(candidates)
        if smallest is not None:
            features[name] = smallest

    if "scratch_limit_bytes" not in features and scratch_size and scratch_size[0]:
        features["scratch_limit_bytes"] = scratch_size
    if "cpu_limit_secs" not in features and "wall_limit_secs" in features \
            and "allocated_cpu" in features:
        features["cpu_limit_secs"] = (
            features["wall_limit_secs"][0] * features["allocated_cpu"][0],
            "wall_limit_secs x allocated_cpu (no CPU time limit is enforced)",
        )
        if not _writable(features["cpu_limit_secs"]):
            del features["cpu_limit_secs"]

    hs06_job = _hs06_job(config, machine, features)
    if hs06_job is not None and _writable(hs06_job):
        features["hs06_job"] = hs06_job

    if "grace_secs_job" in config.job:
        features["grace_secs_job"] = (config.job["grace_secs_job"], "config [jobfeatures]")
    elif "grace_secs" in machine:
        features["grace_secs_job"] = (machine["grace_secs"][0], "grace_secs of the machine")

    shutdown = _smallest([batch.get("shutdowntime_job"), machine.get("shutdowntime")])
    if shutdown is not None:
        features["shutdowntime_job"] = shutdown

    if config.legacy_keys:
        extra = {"cpufactor_lrms": (1, "limits are real time, not normalised")}
        features.update(_legacy(spec.JOB, features, extra))
    return features


def _from_config(config: Config, name: str) -> Sourced | None:
    if name in config.job:
        return (config.job[name], "config [jobfeatures]")
    return None


def _writable(candidate: Sourced) -> bool:
    """A derived value or a limit too large for a file (no 64-bit reader could hold it)
    cannot be determined: it is left out, not turned into an error for the whole job."""
    return not candidate[0] > spec.MAX_INTEGER


def _smallest(candidates: list) -> Sourced | None:
    known = [candidate for candidate in candidates
             if candidate and candidate[0] is not None and _writable(candidate)]
    if not known:
        return None
    return min(known, key=lambda candidate: candidate[0])


def _hs06_job(config: Config, machine: Features, job: Features) -> Sourced | None:
    if "hs06_job" in config.job:
        return (config.job["hs06_job"], "config [jobfeatures]")
    if "allocated_cpu" not in job:
        return None
    allocated = job["allocated_cpu"][0]
    if config.hs06_per_cpu is not None and "hs06" not in config.machine:
        return (config.hs06_per_cpu * allocated, "hs06_per_cpu x allocated_cpu")
    if "hs06" in machine and machine.get("total_cpu", (0,))[0]:
        share = machine["hs06"][0] * allocated / machine["total_cpu"][0]
        return (share, "hs06 x allocated_cpu / total_cpu")
    return None


def _legacy(scope: str, features: Features, extra: Mapping[str, Sourced]) -> Features:
    """Draft-0.99 names computed from the 2016 values (opt-in)."""
    legacy: Features = {}
    for alias in spec.LEGACY_KEYS:
        source = features.get(alias.source) or extra.get(alias.source)
        if alias.scope != scope or not source or source[0] is None:
            continue
        value = source[0]
        if alias.divisor != 1:
            value = int(value) // alias.divisor
        legacy[alias.name] = (value, f"legacy alias of {alias.source}")
    return legacy


def render(features: Features) -> dict[str, str]:
    """The file content of every key, validated against the registry.

    A value that breaks the file format (negative, fractional where digits are
    required, a job id with spaces) is the batch system's or the site's bad
    input: it raises SiteInputError naming the key, the value and its source.
    """
    rendered = {}
    for name, (value, source) in features.items():
        try:
            rendered[name] = spec.format_value(spec.typed_like(name), value)
        except ValueError as error:
            raise SiteInputError(f"{name} from {source}: {error}") from None
    return rendered
