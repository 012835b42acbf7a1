"""``mjf drain``: announce (or cancel) this machine's shutdown to it and to its jobs.

HSF-TN-2016-02: a shutdown time, once announced, is at least ``grace_secs``
after the moment it is set (``grace_secs_job`` for a job). A drain sooner than
that is refused with the earliest allowed time, unless forced.

Two parties may drain a node, and withdrawing one's drain never withdraws the
other's: the admin (``mjf drain``) and the batch system (a maintenance
reservation, an HTCondor graceful drain, which ``mjf sync`` follows). Each one's
time is kept in ``<base_dir>/state/`` (root's bookkeeping, never served:
``machinefeatures/`` holds key files only); ``machinefeatures/shutdowntime`` is
the earlier of the two. It is written first, then every job's
``shutdowntime_job`` becomes the earlier of its own and the machine's; jobs that
start meanwhile get it at start (or from the pass that follows the listing).
"""

from __future__ import annotations

import time

from . import spec, store_locations
from .config import Config
from .errors import SiteInputError, StoreError
from .log import Log
from .store import Store
from .terminal import printable

# <base_dir>/state/ entries: the admin's drain (UNIX seconds), and the batch system's
# ("<UNIX seconds> <what it is>").
ADMIN_DRAIN = "shutdowntime_admin"
BATCH_DRAIN = "shutdowntime_batch"
# Where an earlier version marked a batch-system drain (read once, then removed).
_LEGACY_SOURCE_MARKER = ".shutdowntime_source"

def check_plausible(shutdown: int) -> None:
    """Refuse a time no reader would take for a shutdown (``mjf check`` calls it an
    error): before 2000 or after 2100 - milliseconds, or a duration given as a time."""
    if not spec.EARLIEST_TIME <= shutdown <= spec.LATEST_TIME:
        raise SiteInputError(
            f"{shutdown} is not a plausible shutdown time in UNIX seconds (2000 to 2100): "
            "milliseconds, or a duration? (use --in for a duration)")


def _describe(moment: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(moment))


def _grace(config: Config, store: Store) -> tuple[int, str]:
    """The notice promised to jobs: the longest of grace_secs and the jobs' grace_secs_job."""
    grace = config.machine.get("grace_secs")
    if grace is None:
        written = store.machine.read_key("grace_secs")
        grace = spec.digits_value(written) if written else None
    promises = [(grace, "grace_secs")] if grace is not None else []
    job_grace = config.job.get("grace_secs_job")
    if job_grace is not None:
        promises.append((job_grace, "grace_secs_job"))
    return max(promises) if promises else (0, "")


def earliest_notice(config: Config, store: Store) -> tuple[int, str]:
    """The notice a drain must give (seconds) and the key that promises it."""
    grace, promise = _grace(config, store)
    return grace, promise or "no grace_secs"


def _notice_problem(config: Config, store: Store, shutdown: int, now: int) -> str | None:
    """Why a shutdown at ``shutdown`` breaks the notice promised to jobs, or None."""
    grace, promise = _grace(config, store)
    earliest = now + grace
    if shutdown >= earliest:
        return None
    if not promise:
        return f"a shutdown at {shutdown} ({_describe(shutdown)}) is in the past"
    return (f"a shutdown at {shutdown} ({_describe(shutdown)}) gives jobs less than the "
            f"{promise} = {grace} s of notice the spec promises: the earliest allowed is "
            f"{earliest} ({_describe(earliest)})")


def drain(config: Config, store: Store, log: Log, shutdown: int, force: bool = False,
          now: float | None = None) -> str:
    """The admin announces a shutdown at UNIX time ``shutdown``; a one-line summary."""
    check_plausible(shutdown)
    problem = _notice_problem(config, store, shutdown, int(time.time() if now is None else now))
    if problem:
        if not force:
            raise SiteInputError(problem + "; --force overrides")
        log.warning("FORCED: " + problem)
    if not _grace(config, store)[1]:
        log.warning("grace_secs is not configured: jobs are promised no notice")
    return _set_admin_drain(config, store, log, shutdown)


def cancel(config: Config, store: Store, log: Log) -> str:
    """Withdraw the admin's drain; a batch system's drain, if any, stands."""
    return _set_admin_drain(config, store, log, None)


def _set_admin_drain(config: Config, store: Store, log: Log, shutdown: int | None) -> str:
    drains = Drains.load(store)
    drains.admin = shutdown
    drains.save(store)
    summary, _ = apply(config, store, log, drains)
    log.info(("drain: " if shutdown is not None else "drain cancelled: ") + summary)
    return summary


def follow_batch_system(config: Config, store: Store, log: Log, found: tuple[int, str] | None,
                        now: float, dry_run: bool = False) -> str | None:
    """Make the batch system's drain (``(time, what)``, or None when it has none) this
    machine's; a summary when that changed something (``dry_run``: would change; nothing
    is written). The admin's drain stays."""
    drains = Drains.load(store, write=not dry_run)
    before = drains.batch
    if found is None:
        drains.batch = None
    elif before is None or before[1] != found[1] or found[0] < before[0]:
        # The same drain whose expected end drifts later keeps the time first announced.
        drains.batch = found
        problem = _notice_problem(config, store, found[0], int(now))
        if problem:  # announced all the same: hiding it would be worse
            log.warning(f"{found[1]}: {problem}")
    if drains.batch != before and not dry_run:
        drains.save(store)
    # Applied every time: a run that died half-way (or a job that started meanwhile) is
    # caught up with; only what changed is written.
    summary, changed = apply(config, store, log, drains, dry_run)
    if not changed and drains.batch == before:
        return None
    shutdown = drains.shutdown()
    if drains.batch is None and before is not None:
        summary = f"shutdowntime withdrawn: {before[1]} is gone"
        if shutdown is not None:
            summary = f"{before[1]} is gone: shutdowntime = {shutdown}, the admin's drain"
    elif drains.batch is not None and drains.batch != before:
        summary = (f"shutdowntime = {shutdown} from {drains.batch[1]}"
                   if shutdown == drains.batch[0] else
                   f"{drains.batch[1]} at {drains.batch[0]}: shutdowntime stays {shutdown}, "
                   "the admin's drain")
    if not dry_run:
        log.info(f"sync: {summary}")
    return summary


class Drains:
    """Who drains this machine: the admin's time, and the batch system's with what it is."""

    __slots__ = ("admin", "batch")

    def __init__(self, admin: int | None, batch: tuple[int, str] | None) -> None:
        self.admin = admin
        self.batch = batch

    @classmethod
    def load(cls, store: Store, write: bool = True) -> Drains:
        """As kept in ``state/`` (a value that is not one counts as none); a drain an
        earlier version wrote only to ``machinefeatures/`` is taken over once (``write``
        false: read as taken over, nothing written)."""
        admin = _time(store.machine.read_state(ADMIN_DRAIN))
        batch_text = store.machine.read_state(BATCH_DRAIN) or ""
        seconds, _, what = batch_text.partition(" ")
        batch = (_time(seconds), what) if _time(seconds) is not None and what else None
        drains = cls(admin, batch)
        legacy = store.machine.read_key(_LEGACY_SOURCE_MARKER)
        current = None if admin or batch else _time(store.machine.read_key("shutdowntime"))
        if current is not None:  # announced by an earlier version: taken over once
            drains = cls(None, (current, legacy)) if legacy else cls(current, None)
            if write:
                drains.save(store)
        if legacy is not None and write:
            store.machine.set_key(_LEGACY_SOURCE_MARKER, None)
        return drains

    def save(self, store: Store) -> None:
        store.machine.set_state(ADMIN_DRAIN, None if self.admin is None else str(self.admin))
        store.machine.set_state(BATCH_DRAIN, None if self.batch is None
                                else f"{self.batch[0]} {printable(self.batch[1])}")

    def shutdown(self) -> int | None:
        """The machine's shutdowntime: the earlier drain."""
        times = [moment for moment in (self.admin, self.batch and self.batch[0])
                 if moment is not None]
        return min(times) if times else None


def _time(text: str | None) -> int | None:
    value = spec.digits_value(text) if text else None
    return value if value is not None and spec.EARLIEST_TIME <= value <= spec.LATEST_TIME \
        else None


def apply(config: Config, store: Store, log: Log, drains: Drains,
          dry_run: bool = False) -> tuple[str, bool]:
    """Write the machine's shutdowntime from ``drains``, then every job's; a summary and
    whether anything changed (``dry_run``: would change; nothing is written)."""
    shutdown = drains.shutdown()
    value = None if shutdown is None else spec.format_value("shutdowntime", shutdown)
    changed = store.machine.read_key("shutdowntime") != value
    if changed and not dry_run:
        store.machine.set_key("shutdowntime", value)
    if shutdown is None:
        jobs = _update_jobs(config, store, log, lambda own: own, dry_run)
        return f"shutdowntime removed; shutdowntime_job restored in {jobs} job(s)", \
            changed or jobs > 0

    def earlier(own: int | None) -> int:
        return own if own is not None and own < shutdown else shutdown

    jobs = _update_jobs(config, store, log, earlier, dry_run)
    why = [f"{what} at {moment}" for what, moment in (
        ("the admin's drain", drains.admin),
        (drains.batch[1] if drains.batch else "", drains.batch[0] if drains.batch else None))
        if moment is not None]
    return (f"shutdowntime = {shutdown} ({_describe(shutdown)}; {', '.join(why)}); "
            f"shutdowntime_job updated in {jobs} job(s)"), changed or jobs > 0


def _update_jobs(config: Config, store: Store, log: Log, compute, dry_run: bool = False) -> int:
    """shutdowntime_job of every job: base_dir's, then those in every store a backend keeps
    elsewhere (HTCondor scratch directories, per-user directories); a store a user has
    tampered with is skipped and logged, the others still updated (``dry_run``: counted,
    not written)."""
    def skip(name: str, error: StoreError) -> None:
        log.warning(f"job {name} not updated: {error}")

    changed = store.update_every_job("shutdowntime_job", compute, skip, dry_run)
    for elsewhere in store_locations.job_stores_elsewhere(config):
        try:
            changed += elsewhere.update_every_job("shutdowntime_job", compute, skip, dry_run)
        except StoreError as error:
            log.warning(f"skipped {elsewhere.base_dir}: {error}")
    return changed
