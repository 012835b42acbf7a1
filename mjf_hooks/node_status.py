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
user. Every other job is **unverified**: listed with why, weighing nothing.

What a job's user may have written never names a job nor weighs more than the machine
has: a job is known by its directory's name (the one root and the batch system chose;
its ``jobfeatures/job_id`` is not read), and wherever its directory or its
``jobfeatures/`` is not root's (a user's store; a pending job's, completed from inside
it), its ``allocated_cpu`` counts as at most the machine's ``total_cpu`` and its
``jobstart_secs`` as no earlier than the machine's boot (:mod:`user_bounds`). A process
vouches for one job only, and jobs that nothing but a user's process vouches for (a
user's ``mjf run``) share, in the order found, the CPUs that the other counted jobs
leave of ``total_cpu``, its ``allocated_cpu`` further bounded by the CPUs its runner may
run on and its ``jobstart_secs`` by when its runner started. Two directories that users named alike
outside ``base_dir`` both go unverified: neither can be told from the other. A pilot's
report is refused where it says what its job cannot have done
(:func:`jobstatus.bound_by_job`).
"""

from __future__ import annotations

import marshal
import os
import time
from collections import Counter

from . import batch, jobstatus, spec, store_locations
from .batch.here import BatchListings
from .config import Config
from .errors import StoreError
from .probe import process
from .store import (
    BACKEND_MARKER,
    JOB_FEATURES_DIR,
    JOB_STATUS_DIR,
    RUNNER_MARKER,
    job_id_of_dir_name,
    read_states,
)
from .user_bounds import MachineLimits, bound_above, bound_below

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .log import Log
    from .safefs import Dir

# The jobfeatures keys the figures and the drain planner use (not job_id: a job's user may
# write it, its directory's name is the job's).
_JOB_KEYS = ("allocated_cpu", "jobstart_secs", "wall_limit_secs")
# Pause between attempts at locks that were held when first tried.
_RETRY_PAUSE_SECS = 0.02


class JobReport:
    """One job as ``mjf status`` sees it: its features, its pilot's status and figures.

    ``status``: what the pilot reported (None where it could not be read: ``unreadable``
    says why, or where the job has no ``jobstatus/``: ``offered`` is False).
    """

    __slots__ = ("backend", "counted", "features", "job_id", "location", "offered", "owner",
                 "status", "unreadable", "unverified", "vouched_by_user")

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
        # Whether nothing but a process of its user vouches for it (a user's `mjf run`):
        # such jobs come after all others wherever the node's room is shared out.
        self.vouched_by_user = False

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
    failing query is said (asked only for a job that needs it).

    A large store is read by one process per CPU this one may use, each a contiguous
    share of its jobs through the same code (the reading is mostly system calls, one
    CPU's worth); the reports are then counted or not here, in the order found."""
    from .log import Log

    verifier = _Verifier(config, BatchListings(config, log or Log("mjf status", ()),
                                               dict(os.environ)))
    # Per store: its maker, its job count and its shares (read here, or a _Worker).
    parts: list[tuple[str, int, list]] = []
    waiting: list[tuple[JobReport, int]] = []
    site = store_locations.store_for(config)
    try:
        for store, maker in [(site, _SITE), *store_locations.kept_job_stores(config)]:
            try:
                found = store.job_dirs()
            except (OSError, StoreError):
                continue  # a store refused (a planted symlink) or unreadable to this user
            if found is None:
                continue
            jobs, names = found
            with jobs:
                first, *others = _shares(names)
                shares: list = []  # in parts at once: whatever fails, its workers are waited for
                parts.append((maker, len(names), shares))
                for share in others:
                    shares.append(_Worker(jobs, share, job_ids, timeout))
                shares.insert(0, _first_pass(jobs, first, job_ids, waiting))
        _wait(waiting, timeout)
        for _, _, shares in parts:
            shares[1:] = [worker.entries() for worker in shares[1:]]
    finally:
        for worker in (share for _, _, shares in parts for share in shares):
            if isinstance(worker, _Worker):
                worker.abandon()
    # How many directories users made outside base_dir under each name.
    claims = Counter(name for maker, _, shares in parts if maker != _SITE
                     for share in shares for name, _, _ in share)
    everyone = []
    for maker, jobs_in_store, shares in parts:
        for name, report, facts in (entry for share in shares for entry in share):
            verifier.verify(report, facts, name, maker, jobs_in_store,
                            claims[name] if maker != _SITE else 1)
            everyone.append(report)
    verifier.share_what_others_leave(everyone)
    now = int(time.time())
    reports = []
    for report in everyone:
        if job_ids and report.job_id not in job_ids:
            continue
        if report.status is not None:  # bounded by what verify made of the features
            jobstatus.bound_by_job(report.status, report.allocated_cpu,
                                   report.features.get("jobstart_secs"), report.planned_end(),
                                   now)
        reports.append(report)
    return reports


# Fewer jobs than this for each process are read in one: starting a worker and taking
# its reports back costs more than the share it would read.
_JOBS_PER_WORKER = 400


def _shares(names: list[str]) -> list[list[str]]:
    """``names`` in contiguous shares, one per process to read them (at least one)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on every system
        cpus = os.cpu_count() or 1
    count = min(cpus, len(names) // _JOBS_PER_WORKER)
    if count <= 1:
        return [names]
    size = -(-len(names) // count)
    return [names[start:start + size] for start in range(0, len(names), size)]


def _first_pass(jobs: Dir, names: list[str], job_ids: tuple[str, ...],
                waiting: list[tuple[JobReport, int]]) -> list:
    """The jobs of ``names`` (in order), each as (its directory's name, its report, what
    its counting is decided on): their statuses read (unless not among ``job_ids``),
    each lock tried once; those held are added to ``waiting``, ``jobstatus/`` open."""
    entries = []
    for name in names:
        report, facts, status_dir = _open_job(jobs, name)
        if report is None:
            continue
        entries.append((name, report, facts))
        if status_dir is None:
            continue
        if job_ids and report.job_id not in job_ids:
            os.close(status_dir)
        elif not _read(report, status_dir, 0.0, final=False):
            waiting.append((report, status_dir))
    return entries


def _wait(waiting: list[tuple[JobReport, int]], timeout: float) -> None:
    """Read the jobs whose locks were held, waiting at most ``timeout`` for all."""
    deadline = time.monotonic() + timeout
    while waiting:
        time.sleep(_RETRY_PAUSE_SECS)
        last = time.monotonic() >= deadline
        waiting[:] = [(report, fd) for report, fd in waiting
                      if not _read(report, fd, 0.0, final=last, waited=timeout)]


class _Worker:
    """A forked process reading a share of a store's jobs as this one would (its first
    pass and its waiting); it hands them back through a pipe, marshalled (plain values
    only). What it raised is raised here, pickled: only then is pickle imported.

    Why workers: a store of thousands of jobs is mostly system calls, one CPU's worth;
    10,000 jobs read on two CPUs take 0.73 of what one process takes (1.28 s, 1.76 s)
    (docs/performance.md; the benchmark's `mjf status` table has both). Why marshal:
    it is built in, while ``import pickle`` (with ``re`` and what else it loads) costs
    29 million instructions under -IS, about a bare interpreter start again (callgrind).
    tests/unit/test_node_status.py reads stores through workers and through one process
    and compares the two."""

    def __init__(self, jobs: Dir, names: list[str], job_ids: tuple[str, ...],
                 timeout: float) -> None:
        reading, writing = os.pipe()
        try:
            self.pid = os.fork()
        except BaseException:
            os.close(reading)
            os.close(writing)
            raise
        if self.pid == 0:  # pragma: no cover - the child (its answer is what is tested)
            os.close(reading)
            _answer(writing, jobs, names, job_ids, timeout)
        os.close(writing)
        self.fd: int | None = reading
        self.count = len(names)

    def entries(self) -> list:
        """Its jobs' entries, once it has ended (StoreError if it ended without them)."""
        chunks = []
        while True:
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        self.abandon()
        data = b"".join(chunks)
        if data[:1] == b"R":  # its exception, raised here as it was raised there
            import pickle

            raise pickle.loads(data[1:])  # noqa: S301 - our own child's, through our pipe
        if data[:1] != b"E" or self.status != 0:
            how = (f"signal {-os.waitstatus_to_exitcode(self.status)}"
                   if os.WIFSIGNALED(self.status)
                   else f"exit status {os.waitstatus_to_exitcode(self.status)}")
            raise StoreError(f"the process reading {self.count} of the jobs ended without "
                             f"its reports ({how})")
        # Written by our own child into a pipe no one else holds.
        return [_entry_from(plain) for plain in marshal.loads(data[1:])]  # noqa: S302

    def abandon(self) -> None:
        """Close its pipe (a worker still writing then ends) and wait for it, once."""
        if self.fd is None:
            return
        os.close(self.fd)
        self.fd = None
        self.status = os.waitpid(self.pid, 0)[1]


def _answer(fd: int, jobs: Dir, names: list[str], job_ids: tuple[str, ...],
            timeout: float) -> None:  # pragma: no cover - runs in a worker
    """A worker's whole life: read, write the entries (or what was raised), exit."""
    try:
        waiting: list[tuple[JobReport, int]] = []
        entries = _first_pass(jobs, names, job_ids, waiting)
        _wait(waiting, timeout)
        data = b"E" + marshal.dumps([_plain(entry) for entry in entries])
        code = 0
    except BaseException as error:  # noqa: BLE001 - handed to the parent, which raises it
        import pickle

        try:
            data = b"R" + pickle.dumps(error)
        except Exception:  # noqa: BLE001 - not picklable: its text at least
            data = b"R" + pickle.dumps(StoreError(f"{type(error).__name__}: {error}"))
        code = 1
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except OSError:
        code = 1
    os._exit(code)


def _plain(entry: tuple) -> tuple:
    name, report, facts = entry
    status = report.status
    return (name, report.job_id, report.location, report.features, report.offered,
            report.unreadable, report.owner, facts,
            None if status is None else (status.raw, status.values, status.problems))


def _entry_from(plain: tuple) -> tuple:
    name, job_id, location, features, offered, unreadable, owner, facts, status = plain
    report = JobReport(job_id, location, features)
    report.offered, report.unreadable, report.owner = offered, unreadable, owner
    if status is not None:
        report.status = jobstatus.Status()
        report.status.raw, report.status.values, report.status.problems = status
    return name, report, facts


# The maker of base_dir's store (store_locations.kept_job_stores names the others').
_SITE = "site"


class _Verifier:
    """Decides, job by job in the order found (base_dir's first), whether a job counts."""

    def __init__(self, config: Config, listings: BatchListings) -> None:
        self.listings = listings
        self.counted: set[str] = set()  # the directory names counted so far
        self.runners: dict[int, str] = {}  # runner pid -> the directory it vouches for
        self.euid = os.geteuid()
        # What no job of this machine can have more of, nor have started before.
        self.machine = MachineLimits.of(store_locations.store_for(config))

    def verify(self, report: JobReport, facts: tuple[int, int, str | None, str | None],
               name: str, maker: str, jobs_in_store: int, claims: int = 1) -> None:
        """``facts``: its directory's uid, the uid that may have written its values (its
        ``jobfeatures/``'s where the directory is root's), its state/backend and
        state/runner; ``claims``: how many directories users made under its name."""
        uid, writer, backend, runner = facts
        report.backend = backend
        if name in self.counted:
            report.unverified = f"another directory already counts for job {name}"
            return
        if claims > 1:
            report.unverified = (f"{claims} directories their users made claim job "
                                 f"{report.job_id[:40]}: neither is told from the other")
            return
        if uid in (0, self.euid) and maker == _SITE and backend in batch.NAMES:
            report.counted = f"its directory was written by a root hook of {backend}"
        elif backend in (None, "standalone"):  # `mjf sync` reads no backend so too
            self._standalone(report, name, writer, runner)
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
        if writer != 0:  # its user may have written the figures: bounded by the machine
            self._note(report, self.machine.bound(report.features))

    def _standalone(self, report: JobReport, name: str, uid: int, runner: str | None) -> None:
        if runner is None:
            report.unverified = (f"its directory (uid {uid}) records no runner process and "
                                 "no batch system")
            return
        problem = process.runner_problem(runner, uid)
        if problem is not None:
            report.unverified = problem
            return
        pid = spec.digits_value(runner.split()[0])
        if pid in self.runners:
            report.unverified = (f"its runner process {pid} already vouches for job "
                                 f"{job_id_of_dir_name(self.runners[pid])[:40]}")
            return
        self.runners[pid] = name
        report.counted = f"its runner process {pid} (uid {uid}) runs"
        if uid == 0:
            return  # root's own `mjf run`: its figures are root's
        report.vouched_by_user = True
        started = process.started_at(pid)
        self._note(report, [
            bound_above(report.features, "allocated_cpu", process.cpus_allowed(pid),
                        f"the CPUs process {pid} may run on"),
            bound_below(report.features, "jobstart_secs",
                        None if started is None else int(started),
                        f"when process {pid} started")])

    def share_what_others_leave(self, reports: list[JobReport]) -> None:
        """Bound the jobs nothing but a user's process vouches for, in the order found, to
        the CPUs of ``total_cpu`` that all other counted jobs (and those before) leave:
        however many such jobs one user makes, they never outweigh the batch jobs."""
        if self.machine.total_cpu is None:
            return
        left = self.machine.total_cpu - sum(report.allocated_cpu or 0 for report in reports
                                    if report.counted is not None and not report.vouched_by_user)
        for report in reports:
            if report.counted is not None and report.vouched_by_user:
                self._note(report, [bound_above(
                    report.features, "allocated_cpu", max(left, 0),
                    "what the batch jobs leave of the machine's total_cpu")])
                left -= report.allocated_cpu or 0

    @staticmethod
    def _note(report: JobReport, notes: list[str | None]) -> None:
        """Say, in why it counts, each of its values bounded."""
        report.counted += "".join(f"; {note}" for note in notes if note)


def _open_job(jobs: Dir, name: str) -> tuple[JobReport | None, tuple, int | None]:
    """A job's report with its features, what its counting is decided on (its
    directory's uid, the uid that may have written its values, state/backend and
    state/runner), and its ``jobstatus/`` open (or None); ``jobs``: its store's jobs/,
    open."""
    try:
        top = jobs.open_subdir(name)
    except (FileNotFoundError, StoreError):
        return None, (), None  # ended meanwhile, or not a directory: not a job
    with top:
        features: dict[str, int] = {}
        uid = os.fstat(top.fd).st_uid
        try:
            with top.open_subdir(JOB_FEATURES_DIR) as directory:
                # Below a directory of root's, its jobfeatures/ (and state/) may still be
                # the job's user's: a job completed from inside.
                writer = uid if uid != 0 else os.fstat(directory.fd).st_uid
                for key in _JOB_KEYS:
                    text = directory.read(key)
                    if text is None:
                        continue
                    try:
                        features[key] = int(spec.parse_value(key, text))
                    except ValueError:
                        pass  # mjf check reports it; the figures do without
        except (FileNotFoundError, StoreError):
            return None, (), None  # a directory being built or removed
        report = JobReport(job_id_of_dir_name(name), f"{top.path}/{JOB_STATUS_DIR}", features)
        facts = (uid, writer, *read_states(top, BACKEND_MARKER, RUNNER_MARKER))
        try:
            status_dir = top.open_subdir(JOB_STATUS_DIR)
        except FileNotFoundError:
            return report, facts, None
        except StoreError as error:
            report.offered, report.unreadable = True, str(error)
            return report, facts, None
    report.offered = True
    return report, facts, status_dir.fd  # left open: _read closes it, once read under the lock


def _read(report: JobReport, fd: int, timeout: float, final: bool = True,
          waited: float | None = None) -> bool:
    """Read a job's status from its open ``jobstatus/``; False if its lock was held and
    this is not the ``final`` attempt (the descriptor then stays open). ``waited``: how
    long its lock was waited for in all, for the message (default ``timeout``)."""
    try:
        owner = report.owner = os.fstat(fd).st_uid
        # allocated_cpu bounds used_CPU once the job is counted or not (collect).
        report.status = jobstatus.read_at(fd, report.location, timeout, owner)
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
