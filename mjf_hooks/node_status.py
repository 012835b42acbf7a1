"""``mjf status``: every job's pilot status on this node, and the draft's figures.

Draft 0.99 ("Conversion formulas") derives, for use cases 9 to 12::

    remaining_time = last_exp_job_end - now
    draining_waste = (allocated_CPU - used_CPU) * (first_exp_job_end - now) + add_final_exp_waste
    kill_waste     = add_uncom_time + used_CPU * (now - last_job_start)

A time already past counts as now (no figure is negative); ``add_final_exp_waste`` and
``add_uncom_time`` count as 0 where the pilot did not write them. A job that reports
nothing (or nothing readable) is assumed to be one payload using all its cores since
it started, running to its wall limit: kill_waste = allocated_cpu * (now -
jobstart_secs), draining_waste 0, remaining_time to jobstart_secs + wall_limit_secs.
Such figures are marked ``assumed``.

What a job's user wrote is hostile input to root: each job's ``jobstatus/`` is opened
without following symlinks, its files are read by :func:`jobstatus.read_at` (bounded,
never waited on, only regular files of the directory's owner), a lock held too long is
waited for once for all jobs together, and a job that fails is reported with why while
the others are still shown. Nothing here writes.

Any local user can make job directories in its own private store (``/tmp/mjf-<uid>``),
job or not. A job is **counted** (the drain plan weighs it) only where something other
than its user vouches for it: a root hook wrote its directory (root's, with its
``state/backend``); or a batch system lists it on this node; or it sits alone in the
scratch directory a batch system made for one job; or, for a standalone ``mjf run``, its
runner process (``state/runner``: pid and start time) still runs, as the directory's
user. Every other job is **unverified**: listed with why, weighing nothing. What a
counted job's user wrote is bounded by what the kernel says: its ``allocated_cpu`` by
the machine's CPUs and those its runner may run on, its ``jobstart_secs`` by when its
runner started.
"""

from __future__ import annotations

import os
import time

from . import batch, jobstatus, spec, store_locations
from .config import Config
from .errors import StoreError
from .probe import process
from .store import (
    BACKEND_MARKER,
    JOB_FEATURES_DIR,
    JOB_STATUS_DIR,
    RUNNER_MARKER,
    read_states,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .log import Log
    from .safefs import Dir
    from .sync import BatchListings

# The jobfeatures keys the figures and the drain planner use.
_JOB_KEYS = ("job_id", "allocated_cpu", "jobstart_secs", "wall_limit_secs")
# Pause between attempts at locks that were held when first tried.
_RETRY_PAUSE_SECS = 0.02


class JobReport:
    """One job as ``mjf status`` sees it: its features, its pilot's status and figures.

    ``status``: what the pilot reported (None where it could not be read: ``unreadable``
    says why, or where the job has no ``jobstatus/``: ``offered`` is False).
    """

    __slots__ = ("backend", "counted", "features", "job_id", "location", "offered", "owner",
                 "status", "unreadable", "unverified")

    def __init__(self, job_id: str, location: str, features: dict[str, int]) -> None:
        self.job_id = job_id
        self.location = location
        self.features = features
        self.offered = False
        self.status: jobstatus.Status | None = None
        self.unreadable: str | None = None
        # The uid its jobstatus/ belongs to: the job's user (None where there is none).
        self.owner: int | None = None
        # Why the job is counted (who vouches for it, and what was bounded), or why it is
        # not: exactly one of the two is set once collected.
        self.counted: str | None = None
        self.unverified: str | None = None
        # The batch system its state/backend names (None: none, a standalone job's).
        self.backend: str | None = None

    @property
    def allocated_cpu(self) -> int | None:
        return self.features.get("allocated_cpu")

    @property
    def reports(self) -> bool:
        """Whether the pilot reported what the figures need (used_CPU at least)."""
        return self.status is not None and "used_CPU" in self.status.values

    def planned_end(self) -> int | None:
        """When the batch system ends the job at the latest: jobstart + wall limit."""
        start, limit = self.features.get("jobstart_secs"), self.features.get("wall_limit_secs")
        return start + limit if start is not None and limit is not None else None

    def figures(self, now: int) -> dict:
        """The draft's figures at ``now`` (None where an input is missing), and whether
        they are ``assumed`` (the job reports nothing)."""
        if not self.reports:
            return self._assumed_figures(now)
        values = self.status.values
        used = values["used_CPU"]
        allocated = self.allocated_cpu
        last_end, first_end = values.get("last_exp_job_end"), values.get("first_exp_job_end")
        last_start = values.get("last_job_start")
        draining = kill = None
        if allocated is not None and first_end is not None:
            draining = (max(allocated - used, 0) * max(first_end - now, 0)
                        + values.get("add_final_exp_waste", 0))
        if last_start is not None or used == 0:
            elapsed = max(now - last_start, 0) if last_start is not None else 0
            kill = values.get("add_uncom_time", 0) + used * elapsed
        return {"remaining_time": None if last_end is None else max(last_end - now, 0),
                "draining_waste": draining, "kill_waste": kill,
                "priority_factor": values.get("priority_factor"),
                "can_postpone_last_job": values.get("can_postpone_last_job"),
                "assumed": False}

    def _assumed_figures(self, now: int) -> dict:
        allocated, start = self.allocated_cpu, self.features.get("jobstart_secs")
        end = self.planned_end()
        return {"remaining_time": None if end is None else max(end - now, 0),
                "draining_waste": 0,
                "kill_waste": None if allocated is None or start is None
                else allocated * max(now - start, 0),
                "priority_factor": None, "can_postpone_last_job": None, "assumed": True}

    def describe(self) -> str:
        """What the pilot reported, in a few words."""
        if self.unreadable:
            return f"unreadable: {self.unreadable}"
        if not self.offered:
            return "no $JOBSTATUS (the job started before the site offered it)"
        if self.status is None or not self.status.reported:
            return "reports nothing"
        if not self.reports:
            return "reports no valid used_CPU"
        return "reports"

    def as_dict(self, now: int) -> dict:
        status = self.status or jobstatus.Status()
        return {"job_id": self.job_id, "jobstatus": self.location,
                "counted": self.counted, "unverified": self.unverified,
                "features": self.features, "state": self.describe(),
                "values": status.raw, "problems": status.problems,
                "figures": self.figures(now)}


def collect(config: Config, job_ids: tuple[str, ...] = (),
            timeout: float = jobstatus.DEFAULT_READ_TIMEOUT_SECS,
            log: Log | None = None) -> list[JobReport]:
    """Every job on this node (or those named) with its pilot's status, each read under
    its lock; locks held by pilots are waited for at most ``timeout`` seconds in all.
    Each is counted or unverified (see the module); ``log``: where a batch system's
    failing query is said (asked only for a job that needs it)."""
    from .log import Log
    from .sync import BatchListings

    verifier = _Verifier(config, BatchListings(config, log or Log("mjf status", ()),
                                               dict(os.environ)))
    reports, waiting = [], []
    site = store_locations.store_for(config)
    for store, maker in [(site, _SITE), *store_locations.kept_job_stores(config)]:
        try:
            found = store.job_dirs()
        except (OSError, StoreError):
            continue  # a store refused (a planted symlink) or unreadable to this user
        if found is None:
            continue
        jobs, names = found
        with jobs:
            for name in names:
                report, status_dir = _open_job(jobs, name, verifier, maker, len(names))
                if report is None or (job_ids and report.job_id not in job_ids):
                    if status_dir is not None:
                        os.close(status_dir)
                    continue
                reports.append(report)
                if status_dir is not None and not _read(report, status_dir, 0.0, final=False):
                    waiting.append((report, status_dir))
    deadline = time.monotonic() + timeout
    while waiting:
        time.sleep(_RETRY_PAUSE_SECS)
        last = time.monotonic() >= deadline
        waiting = [(report, fd) for report, fd in waiting
                   if not _read(report, fd, 0.0, final=last, waited=timeout)]
    return reports


# The maker of base_dir's store (store_locations.kept_job_stores names the others').
_SITE = "site"


class _Verifier:
    """Decides, job by job in the order found (base_dir's first), whether a job counts."""

    def __init__(self, config: Config, listings: BatchListings) -> None:
        self.listings = listings
        self.counted: set[str] = set()  # the directory names counted so far
        self.euid = os.geteuid()
        machine = store_locations.store_for(config).read_machine_key("total_cpu")
        # What no job of this machine can have more of: its CPUs (as root wrote them).
        self.total_cpu = (spec.digits_value(machine) if machine else None) or os.cpu_count()

    def verify(self, report: JobReport, top, name: str, maker: str, jobs_in_store: int) -> None:
        uid = os.fstat(top.fd).st_uid
        backend, runner = read_states(top, BACKEND_MARKER, RUNNER_MARKER)
        report.backend = backend
        if name in self.counted:
            report.unverified = f"another directory already counts for job {name}"
            return
        if uid in (0, self.euid) and maker == _SITE and backend in batch.NAMES:
            report.counted = f"its directory was written by a root hook of {backend}"
        elif backend in (None, "standalone"):  # `mjf sync` reads no backend so too
            self._standalone(report, uid, runner)
        elif backend not in batch.NAMES:
            report.unverified = (f"its state/{BACKEND_MARKER} {backend[:40]!r} names no "
                                 "batch system")
        elif maker == backend:  # the scratch directory that batch system made for one job
            if jobs_in_store != 1:
                report.unverified = (f"the {backend} scratch it is in holds {jobs_in_store} "
                                     "job directories, where its job has one")
            else:
                report.counted = f"it is alone in the scratch {backend} made for its job"
        else:
            listed = self.listings.running(backend)
            title = batch.backend(backend).TITLE
            if listed is None:
                report.unverified = f"{title} cannot tell whether it runs the job here"
            elif name not in listed:
                report.unverified = f"{title} does not list the job on this node"
            else:
                report.counted = f"{title} lists the job on this node"
        if report.counted is None:
            return
        self.counted.add(name)
        if uid != 0:  # its user wrote the figures: no more CPUs than the machine has
            self._bound(report, "allocated_cpu", self.total_cpu, "the machine's total_cpu")

    def _standalone(self, report: JobReport, uid: int, runner: str | None) -> None:
        if runner is None:
            report.unverified = (f"its directory (uid {uid}) records no runner process and "
                                 "no batch system")
            return
        problem = process.runner_problem(runner, uid)
        if problem is not None:
            report.unverified = problem
            return
        pid = spec.digits_value(runner.split()[0])
        report.counted = f"its runner process {pid} (uid {uid}) runs"
        if uid == 0:
            return  # root's own `mjf run`: its figures are root's
        self._bound(report, "allocated_cpu", process.cpus_allowed(pid),
                    f"the CPUs process {pid} may run on")
        started = process.started_at(pid)
        start = report.features.get("jobstart_secs")
        if started is not None and start is not None and start < int(started):
            report.features["jobstart_secs"] = int(started)
            report.counted += f"; jobstart_secs {start} counted as {int(started)}, when it started"

    @staticmethod
    def _bound(report: JobReport, key: str, most: int | None, what: str) -> None:
        value = report.features.get(key)
        if value is not None and most is not None and value > most:
            report.features[key] = most
            report.counted += f"; {key} {value} counted as {most}, {what}"


def _open_job(jobs: Dir, name: str, verifier: _Verifier | None = None, maker: str = _SITE,
              jobs_in_store: int = 1) -> tuple[JobReport | None, int | None]:
    """A job's report with its features (counted or not, by ``verifier``), and its
    ``jobstatus/`` open (or None); ``jobs``: its store's jobs/, open."""
    try:
        top = jobs.open_subdir(name)
    except (FileNotFoundError, StoreError):
        return None, None  # ended meanwhile, or not a directory: not a job
    with top:
        features: dict[str, int] = {}
        job_id = name
        try:
            with top.open_subdir(JOB_FEATURES_DIR) as directory:
                for key in _JOB_KEYS:
                    text = directory.read(key)
                    if text is None:
                        continue
                    if key == "job_id":
                        # A user writes it where the store is its own: shown only if it
                        # is a job id (else the directory's name).
                        job_id = text if spec.is_valid_job_id(text) else name
                        continue
                    try:
                        features[key] = int(spec.parse_value(key, text))
                    except ValueError:
                        pass  # mjf check reports it; the figures do without
        except (FileNotFoundError, StoreError):
            return None, None  # a directory being built or removed
        report = JobReport(job_id, f"{top.path}/{JOB_STATUS_DIR}", features)
        if verifier is not None:
            verifier.verify(report, top, name, maker, jobs_in_store)
        try:
            status_dir = top.open_subdir(JOB_STATUS_DIR)
        except FileNotFoundError:
            return report, None
        except StoreError as error:
            report.offered, report.unreadable = True, str(error)
            return report, None
    report.offered = True
    return report, status_dir.fd  # left open: _read closes it, once read under the lock


def _read(report: JobReport, fd: int, timeout: float, final: bool = True,
          waited: float | None = None) -> bool:
    """Read a job's status from its open ``jobstatus/``; False if its lock was held and
    this is not the ``final`` attempt (the descriptor then stays open). ``waited``: how
    long its lock was waited for in all, for the message (default ``timeout``)."""
    try:
        owner = report.owner = os.fstat(fd).st_uid
        report.status = jobstatus.read_at(fd, report.location, timeout, owner,
                                          report.allocated_cpu)
    except jobstatus.LockTimeout as error:
        if not final:
            return False
        report.unreadable = str(error) if waited is None else (
            f"{report.location}/{jobstatus.LOCK_KEY} stayed locked by another process for "
            f"{waited:g} s")
    except (jobstatus.StatusError, OSError) as error:
        report.unreadable = str(error)
    os.close(fd)
    return True


def least_critical_first(reports: list[JobReport], now: int) -> list[JobReport]:
    """Use case 12: the job whose loss costs least first - by kill_waste (assumed for a
    job that reports nothing); of equal cost, one user's jobs by their priority_factor
    (the draft: it compares only one user's jobs), then by job id; a job whose cost is
    unknown last; an unverified job (nothing but its user vouches for it) after all
    counted ones, whatever it claims."""
    def key(report: JobReport) -> tuple:
        figures = report.figures(now)
        kill = figures["kill_waste"]
        owner = -1 if report.owner is None else report.owner
        return (report.unverified is not None, kill is None, kill or 0, owner,
                figures["priority_factor"] or 0, report.job_id)
    return sorted(reports, key=key)
