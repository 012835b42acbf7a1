"""``mjf sync``: keep a node's MJF state right between job starts (cron, systemd timer).

1. Machine features are brought up to date (as ``mjf machine``).
2. A drain the batch system knows about becomes ``shutdowntime``: a Slurm
   maintenance reservation covering this node, an HTCondor graceful drain of
   this machine. Such a shutdown is announced even when it comes with less
   notice than ``grace_secs`` (hiding it would be worse; that is logged), and
   withdrawn when the batch system drops it - but a drain an admin set with
   ``mjf drain`` is never touched.
3. Job directories whose job is gone are removed - only when that is proven:
   a standalone job's process has ended; a Slurm job is no longer on this node
   per ``squeue``. When in doubt (a query fails, an unknown directory) nothing
   is removed.
"""

from __future__ import annotations

import os
import time

from . import drain, lifecycle
from .batch import htcondor, slurm
from .command import ask
from .config import Config
from .log import Log
from .probe import process
from .store import BACKEND_MARKER, JOBS_DIR, RUNNER_MARKER, Store

_CONDOR_STATUS = "/usr/bin/condor_status"


def sync(config: Config, log: Log, environ: dict[str, str], now: float | None = None) -> list[str]:
    """One pass; returns what it did, a line each."""
    now = time.time() if now is None else now
    store = lifecycle.store_for(config)
    lifecycle.machine_features(config, store, log)
    done = _batch_drains(config, store, log, environ, now)
    done += _remove_stale_jobs(config, store, log, environ)
    # Last, and with no time limit: what job ends had no time to remove (a job's user
    # may have filled its directory) blocks no job here.
    if not store.empty_trash():
        log.warning(f"{store.base_dir}/jobs: what job ends left to remove is not all "
                    "removed yet (the next sync goes on)")
    return done


def _node_name() -> str:
    return os.uname().nodename.split(".")[0]


def _batch_drains(config: Config, store: Store, log: Log, environ: dict[str, str],
                  now: float) -> list[str]:
    found: list[tuple[int, str]] = []
    asked = False
    scontrol = slurm.command_path("scontrol", config.backend["slurm"].get("scontrol"))
    if _runs(config, "slurm", scontrol is not None):
        asked = True
        found += _slurm_reservations(config, scontrol or "/usr/bin/scontrol", log, environ, now)
    if _runs(config, "htcondor", os.path.exists(_CONDOR_STATUS)):
        asked = True
        found += _condor_drain(config, _CONDOR_STATUS, log)
    if not asked:
        return []
    summary = drain.follow_batch_system(config, store, log, min(found) if found else None, now)
    return [summary] if summary else []


def _runs(config: Config, batch_system: str, installed: bool) -> bool:
    """Whether this node runs a batch system: as configured (``[mjf] batch_systems``),
    else where its command is installed."""
    if config.batch_systems is not None:
        return batch_system in config.batch_systems
    return installed


def _slurm_reservations(config: Config, scontrol: str, log: Log, environ: dict[str, str],
                        now: float) -> list[tuple[int, str]]:
    output = ask([scontrol, "show", "reservation", "-o"], config.command_timeout_secs,
                 slurm.command_env(environ), log, "Slurm reservations not known this time")
    return slurm.maintenance_drains(output, _node_name(), now) if output is not None else []


def condor_drain_shutdown(config: Config, log: Log) -> int | None:
    """When this machine's HTCondor graceful drain will be complete, if one is under way."""
    found = _condor_drain(config, _CONDOR_STATUS, log) if os.path.exists(_CONDOR_STATUS) else []
    return found[0][0] if found else None


def _condor_drain(config: Config, condor_status: str, log: Log) -> list[tuple[int, str]]:
    # This machine's slots only: a pool has tens of thousands, and every node asks.
    argv = [condor_status, "-startd", "-constraint",
            htcondor.machine_constraint(os.uname().nodename), "-af:,",
            *htcondor.GRACEFUL_DRAIN_ATTRIBUTES]
    output = ask(argv, config.command_timeout_secs, {"PATH": "/usr/bin:/bin"}, log,
                 "HTCondor drain state not known this time")
    drained = htcondor.graceful_drain(output, _node_name()) if output is not None else None
    return [drained] if drained else []


def _remove_stale_jobs(config: Config, store: Store, log: Log,
                       environ: dict[str, str]) -> list[str]:
    jobs_dir = os.path.join(store.base_dir, JOBS_DIR)
    try:
        names = [name for name in os.listdir(jobs_dir) if not name.startswith(".")]
    except OSError:
        return []
    on_node = None  # Slurm job ids on this node, asked only if needed
    done = []
    for name in sorted(names):
        # Each job is asked about of the batch system that made it, and no other: an LSF
        # or Grid Engine job's id is all digits too. What its user may have written
        # there is only ever compared with known names.
        backend = store.read_job_state(name, BACKEND_MARKER)
        runner = store.read_job_state(name, RUNNER_MARKER)
        if runner is not None and backend in ("standalone", None):
            stale = process.still_running(runner) is False
            why = "its process has ended"
        elif backend == "slurm" and name.isdigit() and _runs(config, "slurm", True):
            if on_node is None:
                on_node = _slurm_jobs_on_node(config, log, environ)
            stale = on_node is not False and name not in on_node
            why = "Slurm no longer runs it on this node"
        else:
            continue  # nothing proves it stale (a job of an earlier version: its end does)
        if stale and store.remove_job_dir(name):
            done.append(f"removed job {name}: {why}")
            log.info(f"sync removed job {name}: {why}")
    return done


def _slurm_jobs_on_node(config: Config, log: Log, environ: dict[str, str]) -> set[str] | bool:
    """Ids of the jobs Slurm has on this node; False when that cannot be known."""
    squeue = slurm.command_path("squeue", config.backend["slurm"].get("scontrol"))
    if squeue is None or not os.path.exists(squeue):
        return False
    output = ask([squeue, "-h", "-w", _node_name(), "-o", "%A"], config.command_timeout_secs,
                 slurm.command_env(environ), log, "no job directory removed")
    if output is None:
        return False
    return {line.strip() for line in output.splitlines() if line.strip()}
