"""``mjf drain``: announce (or cancel) this machine's shutdown to it and to its jobs.

HSF-TN-2016-02: a shutdown time, once announced, is at least ``grace_secs``
after the moment it is set (``grace_secs_job`` for a job). A drain sooner than
that is refused with the earliest allowed time, unless forced. The machine's
``shutdowntime`` is written first, then every job's ``shutdowntime_job``
becomes the earlier of its own and the machine's; jobs that start meanwhile
get it at start (or from the pass that follows the listing). Cancelling
removes ``shutdowntime`` and gives each job back its own value (or none).
"""

from __future__ import annotations

import os
import stat
import time
from datetime import datetime

from . import spec
from .config import Config
from .errors import SiteInputError, StoreError
from .log import Log
from .store import SCRATCH_STORE, Store

DEFAULT_CONDOR_EXECUTE = "/var/lib/condor/execute"

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration_secs(text: str) -> int:
    """``90``, ``90s``, ``90m``, ``2h``, ``1d``, ``1h30m`` -> seconds."""
    text = text.strip().lower()
    if text.isdigit():
        return int(text)
    total, number = 0, ""
    for char in text:
        if char.isdigit():
            number += char
        elif char in _UNITS and number:
            total += int(number) * _UNITS[char]
            number = ""
        else:
            raise SiteInputError(f"{text!r} is not a duration such as 90m, 2h or 1h30m")
    if number or not text:
        raise SiteInputError(f"{text!r} is not a duration such as 90m, 2h or 1h30m")
    return total


def parse_time(text: str) -> int:
    """UNIX seconds, or ISO-8601 (``2026-12-01T08:00``, ``...Z``, ``...+01:00``; local if
    no zone) -> UNIX seconds."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError:
        raise SiteInputError(f"{text!r} is not a UNIX time or an ISO-8601 time such as "
                             "2026-12-01T08:00 or 2026-12-01T08:00:00+01:00") from None
    return int(moment.timestamp())


def _grace(config: Config, store: Store) -> tuple[int, str]:
    """The notice promised to jobs: the longest of grace_secs and the jobs' grace_secs_job."""
    grace = config.machine.get("grace_secs")
    if grace is None:
        written = store.read_machine_key("grace_secs")
        grace = int(written) if written and written.isdigit() else None
    promises = [(grace, "grace_secs")] if grace is not None else []
    job_grace = config.job.get("grace_secs_job")
    if job_grace is not None:
        promises.append((job_grace, "grace_secs_job"))
    return max(promises) if promises else (0, "")


def drain(config: Config, store: Store, log: Log, shutdown: int, force: bool = False,
          now: float | None = None) -> str:
    """Announce a shutdown at UNIX time ``shutdown``; return a one-line summary."""
    now = int(time.time() if now is None else now)
    grace, promise = _grace(config, store)
    earliest = now + grace
    when = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(shutdown))
    if shutdown < earliest:
        allowed = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(earliest))
        message = (f"a shutdown at {shutdown} ({when}) gives jobs less than the {promise} = "
                   f"{grace} s of notice the spec promises: the earliest allowed is {earliest} "
                   f"({allowed})")
        if not force:
            raise SiteInputError(message + "; --force overrides")
        log.warning("FORCED: " + message)
    if not promise:
        log.warning("grace_secs is not configured: jobs are promised no notice")
    value = spec.format_value("shutdowntime", shutdown)
    store.set_machine_key("shutdowntime", value)

    def earlier(own: str | None) -> str:
        return own if own is not None and own.isdigit() and int(own) < shutdown else value

    jobs = _update_jobs(config, store, log, earlier)
    summary = f"shutdowntime = {shutdown} ({when}); shutdowntime_job updated in {jobs} job(s)"
    log.info("drain: " + summary)
    return summary


def _update_jobs(config: Config, store: Store, log: Log, compute) -> int:
    """shutdowntime_job of every job: base_dir's, then each HTCondor job's scratch store
    (one a user has tampered with is skipped and logged, the others still updated)."""
    def skip(name: str, error: StoreError) -> None:
        log.warning(f"job {name} not updated: {error}")

    changed = store.update_every_job("shutdowntime_job", compute, skip)
    for scratch in htcondor_job_stores(config):
        try:
            changed += scratch.update_every_job("shutdowntime_job", compute, skip)
        except StoreError as error:
            log.warning(f"skipped {scratch.base_dir}: {error}")
    return changed


def htcondor_job_stores(config: Config) -> list[Store]:
    """The stores HTCondor jobs keep in their scratch directories (``<execute>/dir_*/.mjf``).

    Each belongs to its job's user; only real directories are taken (a symlink
    planted there is skipped), and the store is opened without following one.
    """
    execute = config.backend["htcondor"].get("execute_dir", DEFAULT_CONDOR_EXECUTE)
    try:
        entries = os.listdir(execute)
    except OSError:
        return []
    stores = []
    for entry in entries:
        path = os.path.join(execute, entry, SCRATCH_STORE)
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode):
            stores.append(Store(path, config.dir_mode, config.file_mode, owner=info.st_uid))
    return stores


def cancel(config: Config, store: Store, log: Log) -> str:
    """Withdraw the announced shutdown; each job gets its own shutdowntime_job back."""
    store.set_machine_key("shutdowntime", None)
    jobs = _update_jobs(config, store, log, lambda own: own)
    summary = f"shutdowntime removed; shutdowntime_job restored in {jobs} job(s)"
    log.info("drain cancelled: " + summary)
    return summary
