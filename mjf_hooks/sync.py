"""``mjf sync``: keep a node's MJF state right between job starts (cron, systemd timer).

1. Machine features are brought up to date (as ``mjf machine``).
2. A drain the batch system knows about becomes ``shutdowntime``: a Slurm
   maintenance reservation covering this node, an HTCondor graceful drain of
   this machine, a PBS maintenance reservation holding this host. Such a
   shutdown is announced even when it comes with less notice than
   ``grace_secs`` (hiding it would be worse; that is logged), and
   withdrawn when the batch system drops it - but a drain an admin set with
   ``mjf drain`` is never touched.
3. Job directories whose job is gone are removed - only when that is proven,
   by the batch system that made the job (its ``state/backend``): a standalone
   job's process has ended; a batch module's ``running_jobs`` no longer lists it.
   When in doubt (a query fails, an unknown directory) nothing is removed.
4. Job records handed in by jobs' users are filed as root's; records older than
   ``[records] keep_days`` are removed.
5. With ``[publish] sync = yes``, the node's facts are published where its batch system
   matches jobs on them (:mod:`mjf_hooks.publish`, as ``mjf publish``).
6. What job ends had no time to remove (hidden trash names in ``jobs/``) is removed.
7. With ``[metrics] output``, the node's metrics are written there (as ``mjf metrics``).

Each batch system this node runs is asked through its batch module's queries
(:mod:`mjf_hooks.batch`); this module knows none of them by name.

The phases are independent: one that fails (whatever it raises) is logged in one line
naming it and the error, and the others still run; the pass then says it failed.
"""

from __future__ import annotations

import os
import time

from . import batch, drain, lifecycle
from .config import Config
from .external_command import ask
from .log import Log
from .probe import process
from .store import BACKEND_MARKER, JOBS_DIR, RUNNER_MARKER, Store
from .store_locations import store_for


class Pass:
    """What one pass did (``done``, a line each) and the phases that failed."""

    __slots__ = ("done", "failed")

    def __init__(self) -> None:
        self.done: list[str] = []
        self.failed: list[str] = []

    def run(self, log: Log, phase: str, step, *args) -> None:
        """``step(*args)`` (a list of what it did), whatever another phase did before."""
        try:
            self.done += step(*args) or []
        except Exception as error:  # noqa: BLE001 - one phase must not stop the others
            self.failed.append(phase)
            log.error(f"sync: {phase} failed: {_error_text(error)}")


def _error_text(error: BaseException) -> str:
    from .errors import MJFError

    text = str(error) if isinstance(error, (MJFError, OSError)) \
        else f"{type(error).__name__}: {error}"
    return " ".join(text.split())[:300]  # one line, whatever it quotes


def sync(config: Config, log: Log, environ: dict[str, str], now: float | None = None) -> Pass:
    """One pass; what it did and which phases failed (each logged)."""
    now = time.time() if now is None else now
    store = store_for(config)
    done = Pass()
    done.run(log, "machine features", _machine_features, config, store, log)
    done.run(log, "drains", _batch_drains, config, store, log, environ, now)
    done.run(log, "stale jobs", _remove_stale_jobs, config, store, log, environ)
    if config.publish_on_sync:
        done.run(log, "publishing node facts", _publish, config, log, done)
    if config.records_dir:
        done.run(log, "job records handed in", _file_records, config, log)
        done.run(log, "old job records", _expire_records, config, log, now)
    # Last, for up to TRASH_BUDGET_SECS: what job ends had no time to remove (a job's
    # user may have filled its directory) blocks no job here.
    done.run(log, "the trash of removed job directories", _empty_trash, store, log)
    if config.metrics_output:  # last: it tells of this pass
        done.run(log, "metrics", _write_metrics, config, log, done, now)
    return done


def _machine_features(config: Config, store: Store, log: Log) -> list[str]:
    lifecycle.machine_features(config, store, log)
    return []


def _publish(config: Config, log: Log, done: Pass) -> list[str]:
    from . import publish

    outcome = publish.publish(config, log, publish.machine_values(config))
    if outcome.failed:  # said in its own warning line
        done.failed.append("publishing node facts")
    return outcome.done


def _write_metrics(config: Config, log: Log, done: Pass, now: float) -> list[str]:
    from . import metrics

    text = metrics.exposition(metrics.gather(config, now, len(done.failed), log))
    metrics.write_file(config.metrics_output, text)
    return []


def _empty_trash(store: Store, log: Log) -> list[str]:
    if not store.empty_trash():
        log.warning(f"{store.base_dir}/jobs: what job ends left to remove is not all "
                    "removed yet (the next sync goes on)")
    return []


def _file_records(config: Config, log: Log) -> list[str]:
    from . import record_filing

    filed = record_filing.ingest(config, log)
    done = [f"filed {filed} job record(s) handed in by jobs' users"] if filed else []
    for line in done:
        log.info(line)
    return done


def _expire_records(config: Config, log: Log, now: float) -> list[str]:
    from . import record_filing

    removed = record_filing.expire(config, now)
    done = [f"removed {removed} job record(s) older than {config.records_keep_days} days "
            f"from {config.records_dir}"] if removed else []
    for line in done:
        log.info(line)
    return done


def _short_name(module, config: Config) -> str:
    """This host's short name for the batch system ``module``."""
    return batch.node_name(module, config.backend[module.NAME]).split(".")[0]


def _batch_drains(config: Config, store: Store, log: Log, environ: dict[str, str],
                  now: float) -> list[str]:
    found: list[tuple[int, str]] = []
    asked = False
    for module in batch_systems_here(config):
        answer = _ask(module, module.drain_query, config, log, environ,
                      f"{module.TITLE} drains not known this time")
        if answer is False:
            return []  # not known this time: a drain announced stays, none is withdrawn
        if isinstance(answer, str):
            asked = True
            found += module.drains(answer, _short_name(module, config), now)
    if not asked:
        return []
    summary = drain.follow_batch_system(config, store, log, min(found) if found else None, now)
    return [summary] if summary else []


def batch_systems_here(config: Config) -> list:
    """The batch modules of the batch systems this node runs: as configured (``[mjf]
    batch_systems``), else those that look installed."""
    modules = [batch.backend(name) for name in (config.batch_systems or batch.NAMES)]
    if config.batch_systems is not None:
        return modules
    return [module for module in modules if module.installed(config.backend[module.NAME])]


def _ask(module, query, config: Config, log: Log, environ: dict[str, str], unknown: str):
    """What a batch system printed for ``query``; None if it has no such command, False
    (logged) if the command failed."""
    options = config.backend[module.NAME]
    command = query(options, environ, batch.node_name(module, options))
    if command is None:
        return None
    output = ask(command[0], config.command_timeout_secs, command[1], log, unknown)
    return False if output is None else output


def drain_time(module, config: Config, log: Log) -> int | None:
    """When the drain of this machine that the batch system ``module`` knows of must be
    complete, if one is under way (for a hook that cannot wait for a pass: HTCondor's
    cron publishes it at once)."""
    if not module.installed(config.backend[module.NAME]):
        return None
    answer = _ask(module, module.drain_query, config, log, {},
                  f"{module.TITLE} drain state not known this time")
    found = module.drains(answer, _short_name(module, config), 0) \
        if isinstance(answer, str) else []
    return min(found)[0] if found else None


def _running(module, answer, log: Log) -> set[str] | None:
    """The job directory names a batch system's answer lists; None when not known."""
    if not isinstance(answer, str):
        return None
    try:
        return module.running_jobs(answer)
    except ValueError as error:  # its output was not what it prints: nothing is proven
        log.warning(f"{module.TITLE}: {error}: no job directory removed")
        return None


class BatchListings:
    """Which job directory names each batch system this node runs lists as its jobs
    here: each asked once (its batch module's ``jobs_query``), only when first needed."""

    def __init__(self, config: Config, log: Log, environ: dict[str, str]) -> None:
        self._config, self._log, self._environ = config, log, environ
        self._here: dict | None = None
        self._asked: dict[str, set[str] | None] = {}

    def here(self) -> dict:
        """The batch modules of this node, by name."""
        if self._here is None:
            self._here = {module.NAME: module for module in batch_systems_here(self._config)}
        return self._here

    def running(self, backend: str) -> set[str] | None:
        """The names ``backend`` lists; None when it is not here or cannot say."""
        module = self.here().get(backend)
        if module is None:
            return None
        if backend not in self._asked:
            answer = _ask(module, module.jobs_query, self._config, self._log, self._environ,
                          "no job directory removed")
            self._asked[backend] = _running(module, answer, self._log)
        return self._asked[backend]


def _remove_stale_jobs(config: Config, store: Store, log: Log,
                       environ: dict[str, str]) -> list[str]:
    jobs_dir = os.path.join(store.base_dir, JOBS_DIR)
    try:
        names = [name for name in os.listdir(jobs_dir) if not name.startswith(".")]
    except OSError:
        return []
    listings = BatchListings(config, log, environ)  # each asked only if needed
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
        elif backend in listings.here() and runner is not None \
                and process.still_running(runner) is False:
            # The extern slurmstepd of a Slurm job with PrologFlags=RunInJob has ended:
            # proof enough here, without asking.
            stale, why = True, "the process it lived in has ended"
        elif backend in listings.here():
            running = listings.running(backend)
            stale = running is not None and name not in running
            why = f"{listings.here()[backend].TITLE} no longer runs it on this node"
        else:
            continue  # nothing proves it stale (a job of an earlier version: its end does)
        if stale and store.remove_job_dir(name):
            done.append(f"removed job {name}: {why}")
            log.info(f"sync removed job {name}: {why}")
    return done
