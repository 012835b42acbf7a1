"""HTCondor: a job's ``.machine.ad``/``.job.ad`` and wrapper environment -> job facts.

Pure functions of parsed ads (:mod:`mjf_hooks.classad_files`); the wrapper in
:mod:`mjf_hooks.hooks.htcondor` reads the files. Facts (HTCondor's manual, docs/htcondor.md):

* the slot's ``Cpus``, ``Memory`` (MiB) and ``Disk`` (KiB) are what the job got;
  they are preferred over the job's ``Request*`` (a slot can be larger, and
  ``Request*`` can be expressions);
* ``JobCurrentStartDate`` (job ad) or ``JobStart`` (machine ad) is the start;
* ``GlobalJobId`` identifies the job pool-wide, ``ClusterId.ProcId`` per schedd;
* HTCondor has no native wall-time limit: sites use ``AllowedJobDuration``
  (seconds; HTCondor holds the job past it) or their own attribute.
"""

from __future__ import annotations

import os

from .. import spec
from ..classad_files import Ad, Expression

MIB = 2**20
KIB = 2**10
TIME_UNITS = {"seconds": 1, "minutes": 60, "hours": 3600}
DEFAULT_WALL_LIMIT_ATTRIBUTE = "AllowedJobDuration"


def _whole_number(ad: Ad | dict, name: str, where: str, warnings: list[str]) -> int | None:
    """A non-negative integer attribute, None (with a warning if malformed) otherwise."""
    value = ad.get(name.lower())
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        kind = "an unevaluated expression" if isinstance(value, Expression) else repr(value)
        warnings.append(f"{where} {name} is {kind}, not a whole number: ignored")
        return None
    if not 0 <= value <= spec.MAX_INTEGER:
        warnings.append(f"{where} {name} = {value} is out of range: ignored")
        return None
    return value


class JobInput:
    """What the job wrapper gathered for :func:`job_facts`: the two ads (an ad that could
    not be read at all is None: its reader reported that) and the site's options."""

    __slots__ = ("job_ad", "job_id_style", "machine_ad", "wall_limit_attribute",
                 "wall_limit_unit")

    def __init__(self, machine_ad: Ad | dict | None, job_ad: Ad | dict | None,
                 job_id_style: str = "global",
                 wall_limit_attribute: str = DEFAULT_WALL_LIMIT_ATTRIBUTE,
                 wall_limit_unit: str = "seconds") -> None:
        self.machine_ad, self.job_ad, self.job_id_style = machine_ad, job_ad, job_id_style
        self.wall_limit_attribute, self.wall_limit_unit = wall_limit_attribute, wall_limit_unit


def job_facts(given: JobInput, now: int) -> tuple[dict, list[str]]:
    """Job facts from the two ads, and warnings about what was malformed or missing."""
    machine_ad, job_ad, job_id_style = given.machine_ad, given.job_ad, given.job_id_style
    wall_limit_attribute, wall_limit_unit = given.wall_limit_attribute, given.wall_limit_unit
    warnings: list[str] = []
    facts: dict[str, tuple] = {}
    for name, ad in (("machine", machine_ad), ("job", job_ad)):
        if ad is not None and not ad:
            warnings.append(f"the {name} ad has no attributes: its values are not written")
    machine_ad = machine_ad or {}
    job_ad = job_ad or {}

    job_id = job_id_of(job_ad, job_id_style, warnings)
    if job_id is not None:
        facts["job_id"] = job_id

    start = _whole_number(job_ad, "JobCurrentStartDate", "job ad", warnings)
    if start:
        facts["jobstart_secs"] = (start, "job ad JobCurrentStartDate")
    else:
        start = _whole_number(machine_ad, "JobStart", "machine ad", warnings)
        facts["jobstart_secs"] = (start, "machine ad JobStart") if start \
            else (now, "time the wrapper ran")

    cpus = _whole_number(machine_ad, "Cpus", "machine ad", warnings)
    if cpus:
        facts["allocated_cpu"] = (cpus, f"machine ad Cpus = {cpus}")
    else:
        requested = _whole_number(job_ad, "RequestCpus", "job ad", warnings)
        if requested:
            facts["allocated_cpu"] = (requested, f"job ad RequestCpus = {requested}")

    memory_mib = _whole_number(machine_ad, "Memory", "machine ad", warnings)
    if memory_mib:
        facts["max_rss_bytes"] = (memory_mib * MIB, f"machine ad Memory = {memory_mib} MiB")
    disk_kib = _whole_number(machine_ad, "Disk", "machine ad", warnings)
    if disk_kib:
        facts["scratch_limit_bytes"] = (disk_kib * KIB, f"machine ad Disk = {disk_kib} KiB")

    limit = _whole_number(job_ad, wall_limit_attribute, "job ad", warnings)
    if limit:
        seconds = limit * TIME_UNITS[wall_limit_unit]
        facts["wall_limit_secs"] = (seconds, f"job ad {wall_limit_attribute} = {limit} "
                                             f"{wall_limit_unit}")
    return facts, warnings


def job_id_of(job_ad: Ad | dict, style: str, warnings: list[str]) -> tuple | None:
    """(the job's id, where it came from) by the ``[htcondor] job_id`` style; None if
    the ad does not say."""
    if style == "global":
        value = job_ad.get("globaljobid")
        if isinstance(value, str) and value:
            return (value, "job ad GlobalJobId")
        warnings.append("job ad GlobalJobId is missing or not a string: using ClusterId.ProcId")
    cluster = _whole_number(job_ad, "ClusterId", "job ad", warnings)
    proc = _whole_number(job_ad, "ProcId", "job ad", warnings)
    if cluster is None or proc is None:
        return None
    return (f"{cluster}.{proc}", "job ad ClusterId.ProcId")


def cron_attributes(machine_values: dict[str, str]) -> str:
    """STARTD_CRON output: every machine key as an ``MJF_MACHINE_<KEY> = value``
    attribute, the names glideinWMS publishes (:func:`mjf_hooks.spec.classad_name`).

    A key without a value is published as ``undefined``: HTCondor keeps a cron
    attribute that is no longer printed, so a cancelled drain would otherwise
    leave its MJF_MACHINE_SHUTDOWNTIME behind.
    """
    return "".join(f"{spec.classad_name(name)} = {machine_values.get(name, 'undefined')}\n"
                   for name in spec.MACHINE_KEYS)


NAME = "htcondor"
TITLE = "HTCondor"
CONDOR_STATUS = "/usr/bin/condor_status"


DEFAULT_EXECUTE_DIR = "/var/lib/condor/execute"
# A job's store, in its scratch directory (HTCondor removes it with the sandbox).
SCRATCH_STORE = ".mjf"


def job_store_dirs(options: dict[str, str]) -> list[tuple[str, str]]:
    """Each job keeps its store in its scratch: ``<EXECUTE>/<dir_*>/.mjf``."""
    return [(options.get("execute_dir", DEFAULT_EXECUTE_DIR), SCRATCH_STORE)]


def installed(options: dict[str, str]) -> bool:
    return os.path.exists(CONDOR_STATUS)


def drain_query(options: dict[str, str], environ: dict[str, str],
                nodename: str) -> tuple[list[str], dict[str, str]] | None:
    """This machine's StartD ads only (a pool has tens of thousands of slots)."""
    return ([CONDOR_STATUS, "-startd", "-constraint", machine_constraint(nodename), "-af:,",
             *GRACEFUL_DRAIN_ATTRIBUTES], {"PATH": "/usr/bin:/bin"})


def drains(output: str, node: str, now: float) -> list[tuple[int, str]]:
    drained = graceful_drain(output, node)
    return [drained] if drained else []


def jobs_query(options: dict[str, str], environ: dict[str, str], nodename: str) -> None:
    """None: a job's directory is in its scratch, which HTCondor removes itself."""
    return None


def running_jobs(output: str) -> set[str]:
    return set()


GRACEFUL_DRAIN_ATTRIBUTES = ("Machine", "Draining", "ExpectedMachineGracefulDrainingCompletion")


def machine_constraint(nodename: str) -> str:
    """A ClassAd constraint for the StartD ads of this machine: its ``Machine`` is this
    host's name, short or fully qualified (either may be what ``uname`` says)."""
    short = nodename.split(".")[0]
    quoted = [f'"{name}"' for name in (nodename, short)
              if name and all(char.isalnum() or char in "-." for char in name)]
    if not quoted:
        return "false"
    return (f"Machine == {quoted[0]} || Machine == {quoted[-1]} || "
            f"substr(Machine, 0, {len(short) + 1}) == {quoted[-1][:-1]}.\"")


def graceful_drain(output: str, node: str) -> tuple[int, str] | None:
    """``condor_status -af:, Machine Draining ExpectedMachineGracefulDrainingCompletion``
    -> (when the drain completes, what) for ``node`` (a short host name), if draining."""
    for line in output.splitlines():
        fields = [field.strip() for field in line.split(",")]
        if len(fields) == 3 and fields[0].split(".")[0] == node and fields[1] == "true" \
                and spec.digits_value(fields[2]) is not None:
            return spec.digits_value(fields[2]), "HTCondor graceful drain"
    return None


def _number(ad: Ad | dict, name: str) -> float | None:
    value = ad.get(name.lower())
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if 0 <= value < float("inf") else None


def exit_facts(final_ad: Ad | dict) -> tuple[dict[str, tuple], str | None]:
    """Delivered facts from the job ad HTCondor's starter gives its job-exit hook (on
    stdin: the job's ad with the starter's final usage), and the job's owner.

    ``JobDuration`` (seconds, the starter's clock from the job's start to its exit) is
    the wall time; ``RemoteUserCpu`` + ``RemoteSysCpu`` the CPU time (exact where HTCondor
    accounts through cgroups; sampled by its procd otherwise); ``ResidentSetSize`` (KiB)
    the peak resident set. ``RemoteWallClockTime`` and ``CompletionDate`` are not final
    here: the schedd sets them later."""
    facts: dict[str, tuple] = {}
    duration = _number(final_ad, "JobDuration")
    if duration is not None:
        facts["wall_secs"] = (duration, "HTCondor's final job ad: JobDuration")
    user, system = _number(final_ad, "RemoteUserCpu"), _number(final_ad, "RemoteSysCpu")
    if user is not None and system is not None:
        facts["cpu_secs"] = (user + system,
                             "HTCondor's final job ad: RemoteUserCpu + RemoteSysCpu")
    rss = _number(final_ad, "ResidentSetSize")
    if rss is not None:
        facts["peak_memory_bytes"] = (int(rss) * KIB,
                                      "HTCondor's final job ad: ResidentSetSize (KiB, peak)")
    owner = final_ad.get("owner")
    return facts, owner if isinstance(owner, str) and owner else None
