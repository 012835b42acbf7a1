"""The steps every backend shares: machine features, job start, job end.

A backend gathers what its batch system says about a job (a mapping of MJF
key names to ``(value, source)``) and calls these; they probe the host,
compute the values, and write - or, in a dry run, only describe - the files.

Every step takes its arguments in one order: ``config``, the ``store`` the job's (or the
machine's) directory is in, the ``log``, then what the step is about (the job, its id),
then the rest, ``dry_run`` among the last.
"""

from __future__ import annotations

import os
import sys
import time

from . import spec
from .config import Config
from .errors import StoreError
from .log import Log
from .store import (
    BACKEND_MARKER,
    OWN_PREFIX,
    RUNNER_MARKER,
    Store,
    job_dir_name,
)
from .store_locations import store_for

# Type names only: importing collections.abc at run time costs every job start ~2 ms.
# The value computation and the probes load where a job starts (or machine features
# are written), not in an Epilog or post-exec, which only remove a directory.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from .features import Features
    from .user_bounds import MachineLimits

# Static machine keys this suite writes; removed again when no longer configured.
_MANAGED_MACHINE_KEYS = frozenset(
    [key.name for key in spec.KEYS.values() if key.scope == spec.MACHINE and not key.dynamic]
    + [alias.name for alias in spec.LEGACY_KEYS if alias.scope == spec.MACHINE]
)


def machine_features(config: Config, store: Store, log: Log, dry_run: bool = False,
                     write: bool = True) -> Features:
    """Compute this host's machine keys and bring ``machinefeatures/`` up to date.

    With ``write`` false (a store that belongs to someone else) nothing is written.

    Returns the machine features, including a dynamic ``shutdowntime`` already
    set by a drain, which job features derive from.
    """
    features, rendered = _machine_values(config)
    report(log, store.machine_dir, features, rendered, dry_run)
    if write and not dry_run:
        changed = store.machine.write(rendered, _MANAGED_MACHINE_KEYS)
        if changed:
            log.info(f"{store.machine_dir}: updated {', '.join(changed)}")
    shutdown = _machine_shutdown(store, log)
    if shutdown is not None:
        features["shutdowntime"] = (shutdown, f"{store.machine_dir}/shutdowntime")
    return features


def _machine_values(config: Config) -> tuple[Features, dict[str, str]]:
    """This host's static machine keys, with their sources, and as written."""
    from . import features as features_module
    from .probe import cpu

    total = None if "total_cpu" in config.machine else cpu.total_cpu()
    physical = cpu.physical_cores() if config.legacy_keys else None
    features = features_module.machine_features(config, total, physical)
    return features, features_module.render(features)


def machine_changes(config: Config, store: Store) -> dict[str, str | None]:
    """What :func:`machine_features` would change in ``machinefeatures/``, changing
    nothing: ``{key: new content}``, None for a key it would remove."""
    return store.machine.changes(_machine_values(config)[1], _MANAGED_MACHINE_KEYS)


def _machine_shutdown(store: Store, log: Log | None = None) -> int | None:
    """The shutdowntime a drain set, or None; one that is not a valid value is ignored
    (and logged, given a log)."""
    written = store.machine.read_key("shutdowntime")
    if written is None:
        return None
    try:
        return int(spec.parse_value("shutdowntime", written))
    except ValueError as error:
        if log is not None:
            log.warning(f"{store.machine_dir}/shutdowntime {written[:40]!r} ignored: {error}")
        return None


def machine_features_for_job(config: Config, store: Store, log: Log, site: Store,
                             dry_run: bool = False) -> tuple[Store, Features]:
    """Machine features for a job whose directory lives in ``store``.

    Where that is not the site's store (an unprivileged standalone run, an
    HTCondor job's scratch), the site's ``machinefeatures/`` is used as it is if
    it exists (it is not ours to rewrite); otherwise they are written beside
    the job. Returns the store whose ``machine_dir`` the job should get.
    """
    if store.base_dir != site.base_dir and site.machine.exists(log):
        return site, machine_features(config, site, log, dry_run, write=False)
    return store, machine_features(config, store, log, dry_run)


class JobStart:
    """What a backend knows about a job it starts, for :func:`start_job`.

    ``facts``: ``{key: (value, source)}`` from the batch system; ``cgroup_pid``: a
    process in the job's cgroup (None where it does not exist yet); ``scratch_dir``:
    where the job's scratch space is; ``gid``: the job's group, when root writes for
    it (the job may read what root wrote); ``features_owner``: the uid that owns
    ``jobfeatures/`` - the job's user, when its values are ``pending``: to be
    completed from inside the job (:func:`complete_if_pending`), else None (root, or
    the writer); ``runner``: the identity of the process the job lives in, where no
    batch system will say when it ended (standalone); ``backend``: the batch system
    that runs the job, recorded for `mjf sync`; ``job_uid``: the job's user, when root
    writes for it (its ``jobstatus/`` is that user's; defaults to ``features_owner``);
    ``reports_usage``: a hook of the job's user reports what the job used (into
    ``usage/``, where records are kept), since root's end of the job cannot measure it.
    """

    __slots__ = ("backend", "cgroup_pid", "facts", "features_owner", "gid", "job_uid",
                 "pending", "reports_usage", "runner", "scratch_dir")

    def __init__(self, backend: str, facts: Mapping[str, tuple],
                 cgroup_pid: int | str | None = "self", scratch_dir: str | None = None,
                 gid: int | None = None, features_owner: int | None = None,
                 pending: bool = False, runner: str | None = None, job_uid: int | None = None,
                 reports_usage: bool = False) -> None:
        self.backend = backend
        self.reports_usage = reports_usage
        self.facts = facts
        self.cgroup_pid = cgroup_pid
        self.scratch_dir = scratch_dir
        self.gid = gid
        self.features_owner = features_owner
        self.pending = pending
        self.runner = runner
        self.job_uid = job_uid if job_uid is not None else features_owner


def set_up_job(config: Config, store: Store, log: Log, job: JobStart, site: Store,
               dry_run: bool = False) -> dict[str, str]:
    """A job started by its runner (a wrapper, a starter, ``mjf run``): machine features
    (the site's, or written beside the job), the job's directory in ``store``, and the
    variables the job gets - printed in a dry run."""
    machine_store, machine = machine_features_for_job(config, store, log, site, dry_run=dry_run)
    job_dir = start_job(config, store, log, machine, job, dry_run, machine_store)
    from .exports import export_lines, exports  # a job runner's: end hooks export nothing

    variables = exports(config, machine_store.machine_dir, job_dir)
    if dry_run:
        sys.stdout.write(export_lines(variables))
    return variables


def start_job(config: Config, store: Store, log: Log, machine: Features, job: JobStart,
              dry_run: bool = False, machine_store: Store | None = None) -> str:
    """Compute a job's keys and create its directory; return the jobfeatures path.
    ``machine_store``: where ``machine`` was read, if not ``store``."""
    from . import features as features_module
    from .probe.scratch import filesystem_size_bytes

    batch = job.facts
    limits = None
    if job.cgroup_pid is not None:  # a job runner's, or a Prolog already in the job's cgroup
        from .probe import cgroup

        limits = cgroup.limits(job.cgroup_pid)
        if limits is not None:
            log.debug(f"cgroup: {limits!r}")
    scratch = None
    if job.scratch_dir and "scratch_limit_bytes" not in config.job:
        size = filesystem_size_bytes(job.scratch_dir)
        scratch = (size, f"size of the filesystem holding {job.scratch_dir}")
    features = features_module.job_features(config, machine, batch, limits, scratch)
    rendered = features_module.render(features)
    job_id = rendered["job_id"]
    state = {BACKEND_MARKER: job.backend}  # bookkeeping beside jobfeatures/, never shown
    if "shutdowntime_job" in batch:  # the job's own, for a cancelled drain to restore
        state[OWN_PREFIX + "shutdowntime_job"] = str(batch["shutdowntime_job"][0])
    if job.runner:
        state[RUNNER_MARKER] = job.runner
    path = store.job_features_dir(job_id)
    report(log, path, features, rendered, dry_run)
    if not dry_run:
        store.create_job(job_id, rendered, job.gid, job.features_owner, job.pending, state,
                         status=config.jobstatus, status_uid=job.job_uid,
                         usage=job.reports_usage and bool(config.records_dir))
        log.info(f"{path}: created with {len(rendered)} keys")
        used = machine.get("shutdowntime")
        _follow_drains(store, machine_store or store, job_id, batch.get("shutdowntime_job"),
                       used[0] if used else None)
    return path


def _follow_drains(store: Store, machine_store: Store, job_id: str, own: tuple | None,
                   used: int | None) -> None:
    """Catch up with a drain (or its cancel) that ran while the job's directory was built.

    A drain sets the machine's shutdowntime first, then every job's it can see;
    a job directory becomes visible only when complete. So either the drain saw
    this job, or the shutdowntime read here is the drain's: reading it again
    after the job appeared, until it stays put, leaves no window.
    """
    for _ in range(10):
        current = _machine_shutdown(machine_store)
        if current == used:
            return
        bounds = [value for value in (own[0] if own else None, current) if value is not None]
        store.set_job_keys(job_id, {"shutdowntime_job": spec.format_value(
            "shutdowntime_job", min(bounds)) if bounds else None})
        used = current


def complete_if_pending(config: Config, store: Store, log: Log, job_id: str,
                        batch: Mapping[str, tuple], machine_store: Store,
                        dry_run: bool = False) -> None:
    """From inside the job: complete its values if its start left them pending
    (:func:`complete_job`), with the machine features of ``machine_store``."""
    read = store.read_job(job_id)
    if read[1]:
        machine = machine_features(config, machine_store, log, write=False)
        complete_job(config, store, log, machine, job_id, batch, dry_run, read)


def complete_job(config: Config, store: Store, log: Log, machine: Features, job_id: str,
                 batch: Mapping[str, tuple], dry_run: bool = False,
                 read: tuple[dict[str, str], bool] | None = None) -> list[str]:
    """Recompute a job's keys from inside the job, where its cgroup exists; return what changed.

    What the job start wrote counts as the batch system's facts; ``batch``
    adds what is known only now, and the cgroup of this process (the job's)
    adds its limits. Limits can only go down. Clears the pending mark.
    ``read``: what ``store.read_job`` gave the caller just now, not read again.
    """
    written, pending = read or store.read_job(job_id)
    facts: dict[str, tuple] = {}
    invalid = set()
    for name, raw in written.items():
        if name in spec.KEYS and name not in ("hs06_job", "grace_secs_job", "cpu_limit_secs"):
            try:
                facts[name] = (spec.parse_value(name, raw), "written at job start")
            except ValueError as error:
                invalid.add(name)
                log.warning(f"{store.job_features_dir(job_id)}/{name} {raw[:40]!r}: {error}; "
                            "recomputing it, or removing it if it cannot be")
    for name, fact in batch.items():
        known = facts.get(name)
        facts[name] = fact if known is None or fact[0] < known[0] else known
    from . import features as features_module
    from .probe import cgroup

    limits = cgroup.limits("self")
    job = features_module.job_features(config, machine, facts, limits)
    rendered = features_module.render(job)
    changed: dict[str, str | None] = {
        name: value for name, value in rendered.items() if written.get(name) != value}
    changed.update({name: None for name in invalid - rendered.keys()})
    report(log, store.job_features_dir(job_id), job, rendered, dry_run)
    if not dry_run and (changed or pending):
        if changed:  # nothing to write, no directory to open
            store.set_job_keys(job_id, changed)
        store.clear_pending(job_id)
        if changed:
            log.info(f"{store.job_features_dir(job_id)}: completed {', '.join(sorted(changed))}")
    return sorted(changed)


class JobEnd:
    """What a backend knows about a job as it ends, for its record (``[records] dir``).

    ``delivered``: ``{name: (value, source)}`` for the :data:`job_record.DELIVERED` values
    the backend measured (``end_time``, ``wall_secs``, ``cpu_secs``,
    ``peak_memory_bytes``); what it could not measure is left out, never guessed.
    ``user`` and ``queue``: the job's user name and queue (partition), where known.
    ``usage_source``: where the job's usage report (``usage/``, from a hook of the job's
    user: :func:`report_usage`) came from, for a backend whose jobs report; what the
    backend measured itself wins over the report.
    ``share``: for a job of several nodes, which this node is (its place in the job's node
    list from 1, the number of nodes): the record is this node's share, and says so.
    ``node``: the batch system's name of this node where it knows one (several of its
    nodes may share a host); else the record names the host.
    ``requested``: ``{MJF key: (value, source)}``, Requested values root's end of job
    knows itself (its batch system's environment): where the job's values are its
    user's word (a pending job's), these stand instead of what its user wrote.
    """

    __slots__ = ("backend", "delivered", "node", "queue", "requested", "share",
                 "usage_source", "user")

    def __init__(self, backend: str, delivered: Mapping[str, tuple] | None = None,
                 user: str | None = None, queue: str | None = None,
                 usage_source: str | None = None,
                 share: tuple[int, int] | None = None, node: str | None = None,
                 requested: Mapping[str, tuple] | None = None) -> None:
        self.backend = backend
        self.delivered = dict(delivered or {})
        self.user = user
        self.queue = queue
        self.usage_source = usage_source
        self.share = share
        self.node = node
        self.requested = dict(requested or {})


def report_usage(config: Config, log: Log, job_id: str, level, dry_run: bool = False) -> None:
    """From inside the job, as its user: leave the job's cgroup counters (the cgroup
    ``level`` picks, see :func:`mjf_hooks.probe.cgroup.usage`) in its ``usage/`` for the
    root end of the job, which runs once the cgroup is gone."""
    from .probe import cgroup
    from .records.job import usage_report

    usage = cgroup.usage("self", level)
    if usage is None:
        log.info(f"no cgroup accounting of job {job_id} here: nothing to report")
        return
    report = usage_report(usage.facts())
    if dry_run:
        sys.stdout.write(report)
    elif report:
        store_for(config).write_usage_report(job_id, report)


def end_job(config: Config | None, store: Store, log: Log, job_id: str, dry_run: bool = False,
            ending: JobEnd | None = None, say_if_absent: bool = True) -> bool:
    """End a job here (idempotent); True if it had a directory.

    The first act is the rename of the job's directory out of sight (its hidden trash
    name): readers no longer see the job, and a kill at any later point leaves only what
    `mjf sync` removes. Then, with ``ending`` and a ``config`` that keeps records, the
    job's record is written from the renamed tree - or one line says why it cannot be -
    and last the tree is removed. A job without a directory is said in one line, naming
    the base_dir and the config read (``say_if_absent``: a caller that looks in several
    places says it once itself, :func:`say_nothing_to_remove`)."""
    if dry_run:
        sys.stdout.write(f"would remove {store.job_features_dir(job_id)}\n")
        return False
    taken = store.take_job(job_id)
    if taken is None:
        if say_if_absent:
            say_nothing_to_remove(log, job_id, [store], config)
        return False
    if ending is not None and config is not None and config.records_dir:
        try:
            record_job(config, store, log, job_id, ending, taken=taken)
        except Exception as error:  # noqa: BLE001 - a record must never keep a job's files
            log.error(f"job {job_id} not recorded: internal error "
                      f"{type(error).__name__}: {error}")
    if store.remove_taken(taken):
        log.info(f"removed the features of job {job_id}")
    else:
        log.info(f"removed the features of job {job_id} from sight; the rest waits for "
                 "`mjf sync`")
    return True


def records_runner(store: Store, dir_name: str) -> bool:
    """Whether the job whose directory is ``dir_name`` recorded the process it lives in
    (its runner), in what only root can have written."""
    proof = store.read_job_proof(dir_name, RUNNER_MARKER)
    return proof is not None and proof[0] is not None


def end_jobs_left_behind(config: Config, store: Store, log: Log, ending: JobEnd) -> list[str]:
    """End each job of ``ending.backend`` whose runner has ended yet whose directory is in
    sight - one whose end could not remove it - as its end would have, record included
    (with what ``ending`` says of all such jobs). Proof is only what nobody but root can
    have written (:meth:`Store.read_job_proof`): a job whose user owns its ``state/``
    records no runner. Run by root's hooks where jobs record a runner (Slurm's
    ``PrologFlags=RunInJob``: the job's extern slurmstepd), so such a directory goes with
    the next job start or end on the node; `mjf sync` removes it too."""
    from .probe import process

    done = []
    for name in store.job_dir_names():
        proof = store.read_job_proof(name, BACKEND_MARKER, RUNNER_MARKER)
        if proof is None or proof[0] != ending.backend or proof[1] is None \
                or process.still_running(proof[1]) is not False or not _names_itself(name):
            continue
        if end_job(config, store, log, name, ending=ending, say_if_absent=False):
            done.append(name)
            log.info(f"removed job {name}: the process it lived in has ended, and its "
                     "end left its directory")
    return done


def end_job_left_behind(config: Config, store: Store, log: Log, dir_name: str,
                        ending: JobEnd) -> bool:
    """End the job whose directory in ``jobs/`` is ``dir_name``, which its end left
    behind, as that end would have: its record written where records are kept (with what
    ``ending`` says). A directory not named by its job's id as it is (an encoded
    character) is removed without a record. True if it was there."""
    if _names_itself(dir_name):
        return end_job(config, store, log, dir_name, ending=ending, say_if_absent=False)
    return store.remove_job_dir(dir_name)


def _names_itself(dir_name: str) -> bool:
    """Whether a directory name is its job's id as it is (no encoded character)."""
    try:
        return job_dir_name(dir_name) == dir_name
    except StoreError:
        return False


def say_nothing_to_remove(log: Log, job_id: str, stores: list[Store],
                          config: Config | None) -> None:
    """The one line of a job end that found no directory of the job: which job, where it
    looked and what was missing there, and the config that named those places. A warning
    where not even a ``jobs/`` exists: no job start wrote there, so this end probably
    read another config than the start did (or none); else information (a second end of
    the job, a start that made nothing)."""
    places, misplaced = [], True
    for store in stores:
        jobs = f"{store.base_dir}/jobs"
        missing = (store.base_dir if not os.path.isdir(store.base_dir) else
                   jobs if not os.path.isdir(jobs) else f"{jobs}/{job_dir_name(job_id)}")
        misplaced = misplaced and not missing.startswith(jobs + "/")
        places.append(f"base_dir {store.base_dir} ({missing} does not exist)")
    source = f"config {config.path}" if config is not None else "no config"
    (log.warning if misplaced else log.info)(
        f"job {job_id}: no directory to remove in {'; '.join(places)}; {source}")


# What a record's Requested values are read from: the job's own files, as MJF wrote them.
_REQUESTED_KEYS = (("allocated_cpu", "allocated_cpu"), ("max_rss_bytes", "max_rss_bytes"),
                   ("wall_limit_secs", "wall_limit_secs"), ("cpu_limit_secs", "cpu_limit_secs"),
                   ("scratch_limit_bytes", "scratch_limit_bytes"), ("hs06_job", "hs06_job"),
                   ("start_time", "jobstart_secs"))


def record_job(config: Config, store: Store, log: Log, job_id: str, ending: JobEnd,
               now: float | None = None, taken: str | None = None) -> str | None:
    """Write the record of a job as it ends: what its directory says MJF promised,
    against what ``ending`` says it used. Returns the record's path; None (with one
    log line) if it could not be written. A job without a directory (MJF set up
    nothing for it, or its end already ran) gets no record. ``taken``: where the job's
    end moved its directory (:meth:`Store.take_job`), read there. Its id is ``job_id``
    (the batch system's, or its directory's name), never what its directory says; where
    its user may have written its values, they are bounded by the machine
    (:mod:`user_bounds`) and the record says so."""
    from .records import store as record_store
    from .records.job import MAX_NODES, Record, out_of_bounds

    try:
        written, _ = store.read_job(job_id, taken)
    except StoreError:
        log.debug(f"job {job_id} has no directory here: no record")
        return None
    # By MJF key name until bounded; what no job reaches (a batch system's or a job's
    # user's garbage) is left out, with one line naming where it came from.
    promised: dict[str, float] = {}
    for field, key in _REQUESTED_KEYS:
        if key not in written:
            continue
        try:
            value = spec.parse_value(key, written[key])
        except ValueError:
            log.warning(f"job {job_id}: its {key} {written[key][:40]!r} is not a valid "
                        "value: left out of its record")
            continue
        problem = out_of_bounds(field, value)
        if problem:
            log.warning(f"job {job_id}: its {key} {problem}: left out of its record")
        else:
            promised[key] = value
    delivered = {}
    if ending.usage_source:
        report = store.read_usage_report(job_id, taken)
        if report is not None:
            from .records.job import parse_usage_report

            delivered.update(parse_usage_report(report, ending.usage_source))
    delivered.update((name, fact) for name, fact in ending.delivered.items()
                     if fact[0] is not None)
    for name, (value, source) in list(delivered.items()):
        problem = out_of_bounds(name, value)
        if problem:
            del delivered[name]
            log.warning(f"job {job_id}: {name} from {source} {problem}: left out of its "
                        "record")
    if "end_time" not in delivered:
        delivered["end_time"] = (time.time() if now is None else now,
                                 "the clock as the job's end ran")
    users_word = store.users_word(job_id, taken)
    reported = bool(ending.usage_source) and "cpu_secs" in delivered \
        and delivered["cpu_secs"][1] == ending.usage_source
    # What no job of this machine exceeds, as root wrote it in base_dir (whichever store
    # the job had): read only where a job's user may have written or reported figures.
    machine = None
    if users_word is not None or reported:
        from .user_bounds import MachineLimits

        machine = MachineLimits.of(store_for(config))
    requested_source = None
    if users_word is not None:
        requested_source = _bound_users_word(machine, promised, ending.requested,
                                              delivered["end_time"][0], users_word)
    requested = {field: promised[key] for field, key in _REQUESTED_KEYS if key in promised}
    start = requested.get("start_time")
    if "wall_secs" not in delivered and start is not None:
        delivered["wall_secs"] = (max(0.0, delivered["end_time"][0] - start),
                                  "end_time - jobstart_secs" + (
                                      "" if users_word is None else " (the job's user's word)"))
    if reported and "wall_secs" in delivered:
        _bound_report(machine, delivered)
    node_index, node_count = ending.share or (None, None)
    if node_count is not None and node_count > MAX_NODES:
        log.warning(f"job {job_id}: its {node_count} nodes are more than a record counts "
                    f"({MAX_NODES}): its record does not say which of them this is")
        node_index = node_count = None
    record = Record(
        job_id, user=ending.user, queue=ending.queue,
        node=ending.node or os.uname().nodename,
        backend=ending.backend, node_index=node_index, node_count=node_count, **requested,
        **{name: value for name, (value, _) in delivered.items()},
        sources={name: source for name, (_, source) in delivered.items()},
        requested_source=requested_source,
        benchmark=config.benchmark if "hs06_job" in requested else None)
    try:
        if os.geteuid() == 0:
            path = record_store.write(config, record, log)
        else:  # records are root's: `mjf sync` files it
            path = record_store.hand_in(config, record)
    except StoreError as error:
        log.error(f"job {job_id} not recorded: {error}")
        return None
    log.info(f"job {job_id} recorded in {path}")
    return path


def _bound_report(machine: MachineLimits, delivered: dict[str, tuple]) -> None:
    """Bound, in place, the CPU time a job's user reported (its usage report) by the
    ``machine``; its source says so."""
    usage = {name: delivered[name][0] for name in ("cpu_secs", "wall_secs")}
    for note in machine.bound_usage(usage):
        delivered["cpu_secs"] = (usage["cpu_secs"], f"{delivered['cpu_secs'][1]}; {note}")


def _bound_users_word(machine: MachineLimits, promised: dict[str, float],
                      known: dict[str, tuple], end: float, why: str) -> str:
    """Bound, in place, Requested values a job's user may have written (``why``): what
    root ``known`` stands instead; the rest bounded by the ``machine``, and its start by
    its end. What the record says of where they came from."""
    from .user_bounds import bound_above

    notes = []
    for key, (value, source) in known.items():
        if key in promised and promised[key] != value:
            notes.append(f"{key} {promised[key]} counted as {value}, {source}")
        promised[key] = value
    notes += machine.bound(promised)
    notes.append(bound_above(promised, "jobstart_secs", int(end), "the job's end"))
    bounded = "; ".join(note for note in notes if note)
    return (f"the job's jobfeatures/, its user's word ({why})"
            + (f"; {bounded}" if bounded else ""))


def report(log: Log, directory: str, features: Features, rendered: dict[str, str],
           dry_run: bool) -> None:
    """Say where each value came from (--verbose), and print the plan (--dry-run)."""
    for name in rendered:
        log.debug(f"{directory}/{name} = {rendered[name]}  ({features[name][1]})")
    if dry_run:
        lines = [f"{directory}/{name} = {rendered[name]}\n" for name in rendered]
        sys.stdout.write("".join(lines))
