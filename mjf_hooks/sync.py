"""``mjf sync``: keep a node's MJF state right between job starts (cron, systemd timer).

1. Machine features are brought up to date (as ``mjf machine``).
2. A drain the batch system knows about becomes ``shutdowntime``: a Slurm
   maintenance reservation covering this node, an HTCondor graceful drain of
   this machine, a PBS maintenance reservation holding this host, an LSF host an
   admin closed (from when it was closed until it is opened). Such a
   shutdown is announced even when it comes with less notice than
   ``grace_secs`` (hiding it would be worse; that is logged), and
   withdrawn when the batch system drops it - but a drain an admin set with
   ``mjf drain`` is never touched.
3. Job directories whose job is gone are removed - only when that is proven,
   by the batch system that made the job (its ``state/backend``): a standalone
   job's process has ended; a batch module's ``running_jobs`` no longer lists it.
   Only what nobody but root can have written is proof: where the job's user owns
   its ``state/`` (values completed from inside the job), the job is gone only when
   no batch system here lists it. A job whose process (its runner) has ended is ended
   as its end hook would have, its record written. As root, the same for the jobs in
   users' private directories (``/tmp/mjf-<uid>``) that their batch system no longer
   runs here. When in doubt (a query fails, an unknown directory) nothing is removed.
4. Job records handed in by jobs' users are filed as root's; records older than
   ``[records] keep_days`` are removed.
5. With ``[publish] sync = yes``, the node's facts are published where its batch system
   matches jobs on them (:mod:`mjf_hooks.publish`, as ``mjf publish``).
6. What job ends had no time to remove (hidden trash names in ``jobs/``) is removed.
7. With ``[metrics] output``, the node's metrics are written there (as ``mjf metrics``).

Each batch system this node runs is asked through its batch module's queries, by
:mod:`mjf_hooks.batch.here`; this module knows none of them by name.

The phases are independent: one that fails - whatever it raises, or a batch system's
query or write it needed that failed - is logged in one line naming it and why, and the
others still run; the pass then says it failed (``mjf sync`` exits 1, and the metrics
count it). A dry run changes nothing anywhere (files, batch system, metrics file): it
runs the batch systems' queries and says what each phase would do.
"""

from __future__ import annotations

import os
import time

from . import drain, lifecycle
from .batch import here
from .config import Config
from .errors import StoreError
from .log import Log
from .probe import process
from .store import BACKEND_MARKER, JOBS_DIR, RUNNER_MARKER, Store
from .store_locations import private_job_stores, store_for


class Pass:
    """What one pass did (``done``, a line each; in a ``dry_run``, would do) and the
    phases that failed."""

    __slots__ = ("done", "dry_run", "failed", "log", "phase")

    def __init__(self, log: Log, dry_run: bool = False) -> None:
        self.log = log
        self.dry_run = dry_run
        self.done: list[str] = []
        self.failed: list[str] = []
        self.phase = ""

    def run(self, phase: str, step, *args) -> None:
        """``step(*args)`` (a list of what it did), whatever another phase did before."""
        self.phase = phase
        try:
            self.done += step(*args) or []
        except Exception as error:  # noqa: BLE001 - one phase must not stop the others
            self.fail(_error_text(error))

    def fail(self, why: str) -> None:
        """The phase running could not do its whole job: one error line naming it."""
        if self.phase not in self.failed:
            self.failed.append(self.phase)
        self.log.error(f"sync: {self.phase} failed: {why}")


def _error_text(error: BaseException) -> str:
    from .errors import MJFError

    text = str(error) if isinstance(error, (MJFError, OSError)) \
        else f"{type(error).__name__}: {error}"
    return " ".join(text.split())[:300]  # one line, whatever it quotes


def sync(config: Config, log: Log, environ: dict[str, str], now: float | None = None,
         dry_run: bool = False) -> Pass:
    """One pass; what it did (would do, in a ``dry_run``) and which phases failed (each
    logged)."""
    now = time.time() if now is None else now
    store = store_for(config)
    done = Pass(log, dry_run)
    done.run("machine features", _machine_features, config, store, done)
    done.run("drains", _batch_drains, config, store, environ, now, done)
    done.run("stale jobs", _remove_stale_jobs, config, store, environ, done)
    if config.publish_on_sync:
        done.run("publishing node facts", _publish, config, done)
    if config.records_dir:
        done.run("job records handed in", _file_records, config, done)
        done.run("old job records", _expire_records, config, now, done)
    # Last, for up to TRASH_BUDGET_SECS: what job ends had no time to remove (a job's
    # user may have filled its directory) blocks no job here.
    done.run("the trash of removed job directories", _empty_trash, store, done)
    if config.metrics_output:  # last: it tells of this pass
        done.run("metrics", _write_metrics, config, now, done)
    return done


def _machine_features(config: Config, store: Store, done: Pass) -> list[str]:
    if not done.dry_run:
        lifecycle.machine_features(config, store, done.log)
        return []
    return [f"would remove {store.machine_dir}/{name}" if content is None else
            f"would write {store.machine_dir}/{name} = {content}"
            for name, content in lifecycle.machine_changes(config, store).items()]


def _publish(config: Config, done: Pass) -> list[str]:
    from . import publish

    outcome = publish.publish(config, done.log, publish.machine_values(config), done.dry_run)
    if outcome.failed:
        done.fail("a read or a write of the node's facts failed (its warning says which)")
    return outcome.done


def _write_metrics(config: Config, now: float, done: Pass) -> list[str]:
    if done.dry_run:  # gathering reads records, whose digests it would write
        return [f"would write this node's metrics to {config.metrics_output}"]
    from . import metrics

    text = metrics.exposition(metrics.gather(config, now, len(done.failed), done.log))
    metrics.write_file(config.metrics_output, text)
    return []


def _empty_trash(store: Store, done: Pass) -> list[str]:
    if done.dry_run:
        left = store.trash_names()
        return [f"would remove what job ends left in {store.base_dir}/{JOBS_DIR}: "
                f"{', '.join(left[:3])}{' ...' if len(left) > 3 else ''}"] if left else []
    if not store.empty_trash():
        done.log.warning(f"{store.base_dir}/jobs: what job ends left to remove is not all "
                         "removed yet (the next sync goes on)")
    return []


def _file_records(config: Config, done: Pass) -> list[str]:
    from .records import filing as record_filing

    if done.dry_run:
        waiting = record_filing.waiting(config)
        if waiting is None:
            return [f"would make the drop box {config.records_dir}/incoming"]
        hand_ins, others = waiting
        return ([f"would file the {hand_ins} job record(s) handed in by jobs' users that "
                 "hold a record within bounds"] if hand_ins else []) + \
            ([f"would remove {others} file(s) of {config.records_dir}/incoming that are not "
              "records handed in"] if others else [])
    filed = record_filing.ingest(config, done.log)
    lines = [f"filed {filed} job record(s) handed in by jobs' users"] if filed else []
    for line in lines:
        done.log.info(line)
    return lines


def _expire_records(config: Config, now: float, done: Pass) -> list[str]:
    from .records import filing as record_filing

    removed = record_filing.expire(config, now, done.dry_run)
    lines = [f"{'would remove' if done.dry_run else 'removed'} {removed} job record(s) older "
             f"than {config.records_keep_days} days from {config.records_dir}"] if removed else []
    if not done.dry_run:
        for line in lines:
            done.log.info(line)
    return lines


def _batch_drains(config: Config, store: Store, environ: dict[str, str], now: float,
                  done: Pass) -> list[str]:
    found: list[tuple[int, str]] = []
    asked = False
    for module in here.batch_systems(config):
        answer = here.ask(module, module.drain_query, config, done.log, environ,
                      f"{module.TITLE} drains not known this time")
        if answer is False:
            # Not known this time: a drain announced stays, none is withdrawn.
            done.fail(f"{module.TITLE} could not be asked: no drain followed this time")
            return []
        if isinstance(answer, str):
            asked = True
            found += module.drains(answer, here.short_name(module, config), now)
    if not asked:
        return []
    summary = drain.follow_batch_system(config, store, done.log, min(found) if found else None,
                                        now, done.dry_run)
    if summary is None:
        return []
    return [f"would follow the batch system's drain: {summary}" if done.dry_run else summary]


def _remove_stale_jobs(config: Config, store: Store, environ: dict[str, str],
                       done: Pass) -> list[str]:
    jobs_dir = os.path.join(store.base_dir, JOBS_DIR)
    try:
        names = [name for name in os.listdir(jobs_dir) if not name.startswith(".")]
    except OSError:
        names = []
    listings = here.BatchListings(config, done.log, environ)  # each asked only if needed
    lines = []
    for name in sorted(names):
        found = _proven_gone(name, store.read_job_proof(name, BACKEND_MARKER, RUNNER_MARKER),
                             listings)
        if found is None:
            continue
        why, ending = found
        if done.dry_run:
            lines.append(f"would {'end' if ending else 'remove'} job {name}: {why}")
            continue
        removed = lifecycle.end_job_left_behind(config, store, done.log, name, ending) \
            if ending else store.remove_job_dir(name)
        _said_removed(removed, name, why, lines, done)
    if os.geteuid() == 0:
        for private in private_job_stores(config):
            lines += _remove_stale_private_jobs(private, listings, done)
    if listings.unanswered:
        done.fail(f"{', '.join(listings.unanswered)} could not be asked which jobs run here: "
                  "none of its jobs' directories removed")
    return lines


def _remove_stale_private_jobs(store: Store, listings: here.BatchListings,
                               done: Pass) -> list[str]:
    """The jobs in a user's private directory (``/tmp/mjf-<uid>``: made by a job's own
    user, who could not write base_dir; on LSF, a job's share of a host other than its
    first, which no post-exec ends) whose batch system no longer runs them here. Their
    ``state/backend`` is only their user's word: one who lies keeps or loses only their
    own directories. One without it (``mjf run``'s, which ends its own) is left."""
    try:
        names = store.job_dir_names()
    except StoreError as error:  # its user's to break: it fails no pass
        done.log.warning(f"stale jobs: {store.base_dir} not looked in: {error}")
        return []
    lines = []
    for name in names:
        backend = store.read_job_states(name, BACKEND_MARKER)[0]
        running = listings.running(backend) if backend in listings.here() else None
        if running is None or name in running:
            continue
        why = (f"{listings.here()[backend].TITLE} no longer runs it on this node (in "
               f"{store.base_dir}, its user's)")
        if done.dry_run:
            lines.append(f"would remove job {name}: {why}")
        else:
            _said_removed(store.remove_job_dir(name), name, why, lines, done)
    return lines


def _said_removed(removed: bool, name: str, why: str, lines: list[str], done: Pass) -> None:
    """A removed job's line, in what the pass did and in the log."""
    if removed:
        lines.append(f"removed job {name}: {why}")
        done.log.info(f"sync removed job {name}: {why}")


def _proven_gone(name: str, proof: list[str | None] | None,
                 listings: here.BatchListings) -> tuple[str, lifecycle.JobEnd | None] | None:
    """Why the job whose directory is ``name`` is proven gone, and, where its end is left
    to this pass (its runner ended), how to end it; None when nothing proves it.

    Each job is asked about of the batch system that made it, and no other: an LSF or
    Grid Engine job's id is all digits too. ``proof``: its ``state/backend`` and
    ``state/runner``, where nobody but root can have written them."""
    here = listings.here()
    if proof is None:
        # Its user owns its state/ (values completed from inside the job): neither the
        # batch system it names nor a runner is proof. Gone when none here lists it.
        answers = [listings.running(backend) for backend in here]
        if not here or any(running is None or name in running for running in answers):
            return None
        return (f"no batch system here runs it ({', '.join(m.TITLE for m in here.values())} "
                "asked; its state/ is its user's)", None)
    backend, runner = proof
    if runner is not None and backend in ("standalone", None):
        if process.still_running(runner) is not False:
            return None
        return "its process has ended", lifecycle.JobEnd("standalone")
    if backend not in here:
        return None  # nothing proves it stale (a job of an earlier version: its end does)
    module = here[backend]
    if runner is not None and process.still_running(runner) is False:
        # The extern slurmstepd of a Slurm job with PrologFlags=RunInJob has ended: proof
        # enough here, without asking; its end left it, so it is ended as its end would.
        return "the process it lived in has ended", lifecycle.JobEnd(
            backend, usage_source=getattr(module, "USAGE_SOURCE", None))
    running = listings.running(backend)
    if running is None or name in running:
        return None
    return f"{module.TITLE} no longer runs it on this node", None
