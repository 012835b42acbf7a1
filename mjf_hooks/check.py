"""``mjf check``: a machine/job features pair checked against the spec.

Severities follow the monitoring probes sites run (notes/consumers.md): an
*error* where a reader breaks or a required key is missing, a *warning* where a
recommended key is missing or a value looks wrong, *info* for optional keys.
Exit codes are Nagios-style: 0 ok (info only), 1 warning, 2 error.
"""

from __future__ import annotations

import time

from . import spec
from .reader import Features, MalformedValue, ReadError

ERROR, WARNING, INFO = "error", "warning", "info"
EXIT_CODES = {None: 0, INFO: 0, WARNING: 1, ERROR: 2}
_RANK = {INFO: 0, WARNING: 1, ERROR: 2}

REQUIRED = {
    spec.MACHINE: {"total_cpu": ERROR, "hs06": WARNING, "shutdowntime": INFO, "grace_secs": INFO},
    spec.JOB: {
        "allocated_cpu": ERROR, "jobstart_secs": ERROR, "job_id": ERROR,
        "wall_limit_secs": ERROR, "cpu_limit_secs": ERROR, "hs06_job": WARNING,
        "max_rss_bytes": WARNING, "max_swap_bytes": WARNING, "scratch_limit_bytes": WARNING,
        "shutdowntime_job": INFO, "grace_secs_job": INFO,
    },
}
# UNIX times before 2000 or after 2100 are unit mistakes (milliseconds, durations).
_EARLIEST_TIME, _LATEST_TIME = 946684800, 4102444800
_TIME_KEYS = ("jobstart_secs", "shutdowntime", "shutdowntime_job")


class Finding:
    __slots__ = ("key", "location", "message", "rule", "severity")

    def __init__(self, severity: str, location: str, key: str, rule: str, message: str) -> None:
        self.severity = severity
        self.location = location
        self.key = key
        self.rule = rule
        self.message = message

    def as_dict(self) -> dict[str, str]:
        return {name: getattr(self, name) for name in self.__slots__}

    def __str__(self) -> str:
        where = f"{self.location}/{self.key}" if self.key else self.location
        return f"{self.severity.upper():7} {where}: {self.message} [{self.rule}]"


def check(machine: Features | None, jobs: list[Features],
          now: float | None = None) -> list[Finding]:
    """Every finding for a machine location and the job locations that go with it."""
    now = time.time() if now is None else now
    findings: list[Finding] = []
    machine_values = _check_location(machine, spec.MACHINE, now, findings) if machine else {}
    if machine is None:
        findings.append(Finding(ERROR, "$MACHINEFEATURES", "", "location",
                                "no machine features location given or set"))
    for job in jobs:
        job_values = _check_location(job, spec.JOB, now, findings)
        _check_consistency(job.location, machine_values, job_values, now, findings)
    if not jobs:
        findings.append(Finding(ERROR, "$JOBFEATURES", "", "location",
                                "no job features location given or set"))
    return findings


def worst(findings: list[Finding]) -> str | None:
    return max((finding.severity for finding in findings), key=_RANK.get, default=None)


def _check_location(features: Features, scope: str, now: float,
                    findings: list[Finding]) -> dict[str, object]:
    where = features.location
    try:
        raw_values = features.read_all()
    except ReadError as error:
        findings.append(Finding(ERROR, where, "", "location", str(error)))
        return {}
    values: dict[str, object] = {}
    for name, raw in raw_values.items():
        finding = _check_file(features, scope, name, raw, values)
        if finding:
            findings.append(finding)
    for name, severity in REQUIRED[scope].items():
        if name not in raw_values:
            findings.append(Finding(severity, where, name, "required",
                                    f"{name} is missing ({spec.KEYS[name].doc})"))
    for name in _TIME_KEYS:
        value = values.get(name)
        if isinstance(value, int) and not _EARLIEST_TIME <= value <= _LATEST_TIME:
            findings.append(Finding(ERROR, where, name, "units",
                                    f"{value} is not a plausible UNIX time in seconds"))
    _check_units(where, values, findings)
    shutdown_key, grace_key = (("shutdowntime", "grace_secs") if scope == spec.MACHINE
                               else ("shutdowntime_job", "grace_secs_job"))
    _check_grace(where, values, shutdown_key, grace_key, now, findings)
    return values


def _check_grace(where: str, values: dict, shutdown_key: str, grace_key: str, now: float,
                 findings: list[Finding]) -> None:
    shutdown = values.get(shutdown_key)
    if shutdown is None:
        return
    if grace_key not in values:
        findings.append(Finding(WARNING, where, grace_key, "grace",
                                f"{shutdown_key} is set but {grace_key} is not (the spec "
                                "requires it when a shutdown affects running jobs)"))
    if isinstance(shutdown, int) and shutdown < now:
        findings.append(Finding(WARNING, where, shutdown_key, "grace",
                                f"{shutdown} has passed: this should be down by now"))


def _check_file(features: Features, scope: str, name: str, raw: str,
                values: dict[str, object]) -> Finding | None:
    where = features.location
    legacy = {alias.name for alias in spec.LEGACY_KEYS if alias.scope == scope}
    if name in legacy:
        return Finding(INFO, where, name, "legacy-name",
                       "a draft-0.99 name, written for old readers")
    if not spec.is_valid_key_name(name):
        return Finding(ERROR, where, name, "file-name",
                       "file names may only hold lowercase letters, digits and _")
    if name not in spec.KEYS or spec.KEYS[name].scope != scope:
        return Finding(WARNING, where, name, "unknown-file", f"not a {scope} features key")
    if raw != raw.strip():
        return Finding(ERROR, where, name, "format",
                       f"{raw!r} has surrounding whitespace or a newline; strict readers fail")
    try:
        values[name] = features.get(name)
    except MalformedValue as error:
        return Finding(ERROR, where, name, "format", str(error).split(": ", 1)[-1])
    return None


def _check_units(where: str, values: dict[str, object], findings: list[Finding]) -> None:
    rules = (
        ("total_cpu", lambda v: 1 <= v <= 100000, "is not a plausible processor count"),
        ("allocated_cpu", lambda v: 1 <= v <= 100000, "is not a plausible processor count"),
        ("wall_limit_secs", lambda v: 0 < v < 10 * 365 * 86400, "is not a plausible limit in s"),
        ("cpu_limit_secs", lambda v: v > 0, "is zero"),
        ("max_rss_bytes", lambda v: v >= 2**20, "is under 1 MiB: MB or KiB written as bytes?"),
        ("scratch_limit_bytes", lambda v: v >= 2**20, "is under 1 MiB: GB written as bytes?"),
        ("grace_secs", lambda v: v < 30 * 86400, "is over 30 days"),
        ("grace_secs_job", lambda v: v < 30 * 86400, "is over 30 days"),
    )
    for name, plausible, problem in rules:
        value = values.get(name)
        if isinstance(value, (int, float)) and not plausible(value):
            findings.append(Finding(WARNING, where, name, "units", f"{value} {problem}"))


def _check_consistency(where: str, machine: dict, job: dict, now: float,
                       findings: list[Finding]) -> None:
    def add(severity: str, key: str, rule: str, message: str) -> None:
        findings.append(Finding(severity, where, key, rule, message))

    total, allocated = machine.get("total_cpu"), job.get("allocated_cpu")
    if isinstance(total, int) and isinstance(allocated, int) and allocated > total:
        add(ERROR, "allocated_cpu", "consistency", f"{allocated} > total_cpu {total}")
    hs06, hs06_job = machine.get("hs06"), job.get("hs06_job")
    if all(isinstance(v, (int, float)) for v in (hs06, hs06_job, total, allocated)) and total:
        expected = hs06 * allocated / total
        if abs(hs06_job - expected) > 0.01 * expected + 0.01:
            add(WARNING, "hs06_job", "consistency",
                f"{hs06_job} is not hs06 x allocated_cpu / total_cpu = {expected:.2f}")
    start = job.get("jobstart_secs")
    if isinstance(start, int) and start > now + 60:
        add(ERROR, "jobstart_secs", "consistency", f"{start} is in the future")
    shutdown, shutdown_job = machine.get("shutdowntime"), job.get("shutdowntime_job")
    if isinstance(shutdown, int) and isinstance(shutdown_job, int) and shutdown_job > shutdown:
        add(ERROR, "shutdowntime_job", "consistency",
            f"{shutdown_job} is after the machine's shutdowntime {shutdown}")
