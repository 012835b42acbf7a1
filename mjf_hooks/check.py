"""``mjf check``: a machine/job features pair checked against the spec.

Severities follow what the readers of these files accept (docs/commands.md, `mjf check`): an
*error* where a reader breaks or a required key is missing, a *warning* where a
recommended key is missing, a value looks wrong or the machine is draining, *info* for
optional keys and for limits a standalone job genuinely lacks, *unknown* where there is
nothing to check. Exit codes are a Nagios plugin's: 0 OK (info only), 1 WARNING,
2 CRITICAL (an error), 3 UNKNOWN; :func:`summary` is the plugin's first line.
"""

from __future__ import annotations

import os
import time

from . import spec
from .reader import Features, ReadError, is_url
from .store import BACKEND_MARKER, STANDALONE, STATE_DIR

UNKNOWN, ERROR, WARNING, INFO = "unknown", "error", "warning", "info"
EXIT_CODES = {None: 0, INFO: 0, WARNING: 1, ERROR: 2, UNKNOWN: 3}
_RANK = {INFO: 0, WARNING: 1, ERROR: 2, UNKNOWN: 3}
# What a monitoring system calls each exit status (Nagios plugin guidelines).
PLUGIN_STATES = ("OK", "WARNING", "CRITICAL", "UNKNOWN")
DRAINING = "draining"

REQUIRED = {
    spec.MACHINE: {"total_cpu": ERROR, "hs06": WARNING, "shutdowntime": INFO, "grace_secs": INFO},
    spec.JOB: {
        "allocated_cpu": ERROR, "jobstart_secs": ERROR, "job_id": ERROR,
        "wall_limit_secs": ERROR, "cpu_limit_secs": ERROR, "hs06_job": WARNING,
        "max_rss_bytes": WARNING, "max_swap_bytes": WARNING, "scratch_limit_bytes": WARNING,
        "shutdowntime_job": INFO, "grace_secs_job": INFO,
    },
}
_TIME_KEYS = ("jobstart_secs", "shutdowntime", "shutdowntime_job")
# The limits a standalone job (`mjf run`) has only when it is given one, and how: without,
# it has none, and the spec asks for no value that does not exist ("required unless the
# resource provider cannot determine their value"). A note, not a fault.
_STANDALONE_LIMITS = {
    "wall_limit_secs": "mjf run --wall-limit or [jobfeatures] wall_limit_secs",
    "cpu_limit_secs": "mjf run --wall-limit, which makes it wall_limit_secs x allocated_cpu, "
                      "or [jobfeatures] cpu_limit_secs",
    "max_rss_bytes": "mjf run --memory, a cgroup memory limit or [jobfeatures] max_rss_bytes",
    "max_swap_bytes": "a cgroup swap limit or [jobfeatures] max_swap_bytes",
}


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


class Listing:
    """The jobs found in a base_dir's ``jobs/``, as a probe of a live node sees them.

    Unlike a location the user names, a listed job may end while it is read (its
    Epilog removes its directory): no fault of the node. ``error`` is why ``jobs/``
    could not be listed (a monitoring user, ``dir_mode = 0711``), None if it was.
    """

    __slots__ = ("error", "jobs", "jobs_dir")

    def __init__(self, jobs_dir: str, jobs: list[Features],
                 error: OSError | None = None) -> None:
        self.jobs_dir = jobs_dir
        self.jobs = jobs
        self.error = error

    def why_unlisted(self) -> str:
        """The reason jobs/ could not be listed, as the system says it."""
        return (self.error.strerror or str(self.error)) if self.error else ""


def list_jobs(base_dir: str) -> Listing:
    """The jobs in ``base_dir/jobs/``: none when it is empty or absent (an idle node)."""
    jobs_dir = os.path.join(base_dir, "jobs")
    try:
        names = sorted(os.listdir(jobs_dir))
    except FileNotFoundError:
        names = []  # no job has started here yet
    except OSError as error:
        return Listing(jobs_dir, [], error)
    return Listing(jobs_dir, [Features(os.path.join(jobs_dir, name, "jobfeatures"))
                              for name in names if not name.startswith(".")])


def has_ended(job: Features) -> bool:
    """Whether a listed job's directory is gone: its Epilog removed it.

    The job's directory, not its ``jobfeatures/``: a job ends by its whole directory
    being renamed away at once, so a directory still there without ``jobfeatures/`` is
    broken, not ended. Only "no such file" counts: a directory we may not look into is
    still there.
    """
    try:
        os.lstat(os.path.dirname(job.location))
    except FileNotFoundError:
        return True
    except OSError:
        pass  # there, but out of our reach: its findings say so
    return False


def check(machine: Features | None, jobs: list[Features], now: float | None = None,
          listings: list[Listing] | None = None,
          from_environment: bool = False) -> list[Finding]:
    """Every finding for a machine location and the job locations that go with it.

    ``jobs`` were named: one that cannot be read is an error. ``listings`` are
    base_dirs' jobs/ as listed: an empty one is an idle node, and a job that ends
    while it is checked is no error. Named locations are checked as given (machine
    features alone are a node's check); ``from_environment``: they are a job's
    variables, and a job is given both.
    """
    now = time.time() if now is None else now
    listings = listings or []
    if machine is None and not jobs and not listings:
        return [Finding(UNKNOWN, "$MACHINEFEATURES, $JOBFEATURES", "", "location",
                        "nothing to check: no location given, and neither variable is set: "
                        "give a base_dir, a .../machinefeatures or a .../jobfeatures location")]
    findings: list[Finding] = []
    machine_values = _check_location(machine, spec.MACHINE, now, findings) if machine else {}
    if machine is None and from_environment:
        findings.append(Finding(ERROR, "$MACHINEFEATURES", "", "location",
                                "not set, though $JOBFEATURES is: a job is given both"))
    elif machine is None:
        findings.append(Finding(INFO, "$MACHINEFEATURES", "", "location",
                                "no machine features given: the jobs were not checked "
                                "against them"))
    for job in jobs:
        _check_job(job, machine_values, now, findings)
    for listing in listings:
        if listing.error is not None:
            hint = " (run the check as root)" if isinstance(listing.error, PermissionError) \
                else ""
            findings.append(Finding(WARNING, listing.jobs_dir, "", "location",
                                    f"cannot be listed ({listing.why_unlisted()}): job "
                                    f"directories were not checked{hint}"))
        for job in listing.jobs:
            first = len(findings)
            _check_job(job, machine_values, now, findings)
            if has_ended(job):  # what it gave was read from a vanishing directory
                del findings[first:]
                findings.append(Finding(INFO, job.location, "", "location",
                                        "gone: the job ended during the check"))
    if not jobs and not listings and from_environment:
        findings.append(Finding(ERROR, "$JOBFEATURES", "", "location",
                                "not set, though $MACHINEFEATURES is: a job is given both"))
    return findings


def worst(findings: list[Finding]) -> str | None:
    return max((finding.severity for finding in findings), key=_RANK.get, default=None)


def summary(findings: list[Finding], machine_checked: bool, jobs_checked: int) -> str:
    """The first line of a Nagios plugin's output: the state, what was checked, the
    finding that decided it, and performance data after ``|``."""
    status = worst(findings)
    state = PLUGIN_STATES[EXIT_CODES[status]]
    if status == UNKNOWN:
        return plugin_safe(f"MJF {state} - {_headline(findings, status).message}")
    counted = {severity: sum(f.severity == severity for f in findings)
               for severity in (ERROR, WARNING, INFO)}
    parts = ["the machine features"] if machine_checked else []
    if jobs_checked or not machine_checked:  # an idle node's jobs/ is no news
        parts.append(f"{jobs_checked} job director{'y' if jobs_checked == 1 else 'ies'}")
    checked = " and ".join(parts)
    perfdata = f"jobs={jobs_checked} errors={counted[ERROR]} warnings={counted[WARNING]}"
    if EXIT_CODES[status] == 0:
        notes = counted[INFO]
        told = f" ({notes} note{'s' * (notes != 1)})" if notes else ""
        return f"MJF {state} - {checked} pass{told} | {perfdata}"
    problems = ", ".join(f"{count} {severity}{'s' * (count != 1)}"
                         for severity, count in counted.items()
                         if severity != INFO and count)
    first = _headline(findings, status)
    where = f"{first.location}/{first.key}" if first.key else first.location
    return plugin_safe(f"MJF {state} - {problems} in {checked}: {where}: {first.message} "
                       f"[{first.rule}]") + f" | {perfdata}"


def plugin_safe(line: str) -> str:
    """``line`` as a monitoring system can take it: a ``|`` would start performance data
    there, on any line of a plugin's output."""
    return line.replace("|", "\\x7c")


def _headline(findings: list[Finding], severity: str) -> Finding:
    """The finding a one-line summary names: the first of the worst severity, a drain
    before any other (it is the node's state, not a fault)."""
    return min((f for f in findings if f.severity == severity), key=lambda f: f.rule != DRAINING)


def _check_job(job: Features, machine_values: dict[str, object], now: float,
               findings: list[Finding]) -> None:
    job_values = _check_location(job, spec.JOB, now, findings)
    _check_consistency(job.location, machine_values, job_values, now, findings)


def _is_standalone(job: Features) -> bool:
    """Whether a local job directory was made by ``mjf run`` (its ``state/backend``).

    Read as the reader reads a key (bounded, never waiting on a FIFO) and only compared,
    never shown; a URL tells nothing of it.
    """
    if is_url(job.location):
        return False
    state = Features(os.path.join(os.path.dirname(job.location), STATE_DIR))
    try:
        return state.raw(BACKEND_MARKER) == STANDALONE
    except (ReadError, OSError):
        return False


def _missing(features: Features, scope: str, name: str, severity: str) -> Finding:
    """The finding for a key that is not there."""
    where = features.location
    if scope == spec.JOB and name in _STANDALONE_LIMITS and _is_standalone(features):
        return Finding(INFO, where, name, "required",
                       f"{name} is missing: a standalone job (mjf run) has no such limit "
                       f"unless it is given one ({_STANDALONE_LIMITS[name]})")
    return Finding(severity, where, name, "required",
                   f"{name} is missing ({spec.KEYS[name].doc})")


def _check_location(features: Features, scope: str, now: float,
                    findings: list[Finding]) -> dict[str, object]:
    where = features.location
    try:
        raw_values = features.read_all()
    except (ReadError, OSError) as error:  # OSError: in case one slips past the reader
        findings.append(Finding(ERROR, where, "", "location", str(error)))
        return {}
    values: dict[str, object] = {}
    for name, raw in raw_values.items():
        finding = _check_file(features, scope, name, raw, values)
        if finding:
            findings.append(finding)
    for name, severity in REQUIRED[scope].items():
        if name not in raw_values:
            findings.append(_missing(features, scope, name, severity))
    for name in _TIME_KEYS:
        value = values.get(name)
        if isinstance(value, int) and not spec.EARLIEST_TIME <= value <= spec.LATEST_TIME:
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
    elif isinstance(shutdown, int) and shutdown_key == "shutdowntime":
        findings.append(Finding(WARNING, where, shutdown_key, DRAINING,
                                f"the machine is draining: it shuts down at {shutdown} "
                                f"({_utc(shutdown)}, in {_duration(shutdown - now)})"))


def _utc(moment: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(moment))


def _duration(seconds: float) -> str:
    """A time span as an admin reads it at a glance: 2 h 05 min, 45 min, 30 s."""
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
    return f"{seconds // 60} min" if seconds >= 60 else f"{seconds} s"


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
        # The value already read, not read again: a second read (over HTTP) could fail
        # or see another value.
        values[name] = spec.parse_value(spec.typed_like(name), raw)
    except ValueError as error:
        return Finding(ERROR, where, name, "format", str(error))
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
