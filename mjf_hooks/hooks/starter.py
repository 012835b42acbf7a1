"""What a batch system with a pre-start hook and a job starter shares.

LSF (``PRE_EXEC`` and ``JOB_STARTER``) and Grid Engine (the queue's ``prolog`` and
``starter_method``) both run a hook before the job - as root or as the job's
user, outside the job - and then, as the job's user, a starter whose process *is*
the job. The pre-start writes the job's directory with what it can see and marks it
pending; the starter completes it from inside the job (its cgroup, its limits) or,
where no pre-start ran, writes it itself; then the job runs with the variables.
A backend's CLI gathers its batch system's facts and calls these.
"""

from __future__ import annotations

import os

from .. import lifecycle, store_locations
from ..errors import SiteInputError
from ..exports import exports
from ..store import Store
from .frame import HookContext

# Type names only: importing collections.abc at run time costs every job start ~2 ms.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


def job_stores(context: HookContext, site: Store | None = None) -> list[Store]:
    """Where a job's directory may be: base_dir (``site``, if the caller has it: its
    path is walked once), or its user's private directory. Not, as root, a private
    directory of root's: that would be named by the job's environment
    (``$XDG_RUNTIME_DIR``), which is its user's (a root end of a job finds the user's own
    by uid, :func:`end`)."""
    site = site or store_locations.store_for(context.config)
    if os.geteuid() == 0:
        return [site]
    private = store_locations.private_base_dir(context.environ, create=False)
    return [site, store_locations.store_for(context.config, private)]


def set_up(context: HookContext, backend: str, job_id: str, in_job: bool,
           gather: Callable[[], tuple[dict, list[str]]], scratch_dir: str | None,
           owner_variables: tuple[str, ...],
           completion: Callable[[], dict] | None = None) -> dict[str, str]:
    """Write a job's features, or in the starter (``in_job``) complete what a pre-start
    wrote; return the variables the job gets.

    ``gather``: the batch system's facts and warnings (called only when writing);
    ``owner_variables``: the variables naming the job's user, for a pre-start running
    as root; ``completion``: facts only the job's own process has (its rlimits).
    """
    config, environ, log = context.config, context.environ, context.log
    site = store_locations.store_for(config)
    if in_job:
        for store in job_stores(context, site):
            if os.path.isdir(store.job_features_dir(job_id)):
                machine_store = site if site.machine.exists(log) else store
                lifecycle.complete_if_pending(config, store, log, job_id,
                                              completion() if completion else {},
                                              machine_store, dry_run=context.dry_run)
                return exports(config, machine_store.machine_dir,
                               store.job_features_dir(job_id))
    facts, warnings = gather()
    if in_job and completion:
        facts = {**facts, **completion()}
    for warning in warnings:
        log.warning(warning)
    running_as_root = os.geteuid() == 0
    store = site if running_as_root else store_locations.user_job_store(config, environ, log,
                                                                   context.dry_run)
    uid = gid = None
    if running_as_root and not in_job:
        uid, gid = job_user(environ, owner_variables)
    # A pre-start is not the job (as root, not even its user): what only the job's own
    # process shows (its cgroup, its limits) is left pending for the starter.
    # Without a scratch directory the job's working directory - not for a root pre-start,
    # whose working directory is whatever the job's user chose.
    if scratch_dir is None and (in_job or not running_as_root):
        scratch_dir = os.getcwd()
    job = lifecycle.JobStart(backend, facts, cgroup_pid="self" if in_job else None,
                             scratch_dir=scratch_dir,
                             gid=gid, features_owner=uid, pending=not in_job)
    return lifecycle.set_up_job(config, store, log, job, site, dry_run=context.dry_run)


def end(context: HookContext, job_id: str, owner_variables: tuple[str, ...],
        ending: lifecycle.JobEnd | None = None) -> None:
    """Remove the job's directory wherever it is (idempotent): base_dir, this user's
    private directory, and - run as root, where neither had it - the job's user's
    (a starter without a root pre-start put it there). With ``ending``, the job's
    record is written first (where the site keeps records)."""
    looked = job_stores(context)
    removed = [lifecycle.end_job(context.config, store, context.log, job_id,
                                 dry_run=context.dry_run, ending=ending, say_if_absent=False)
               for store in looked]
    if any(removed) or context.dry_run:
        return
    if os.geteuid() == 0:
        try:
            uid, _ = job_user(context.environ, owner_variables)
        except SiteInputError:
            uid = 0  # no user known here: nothing of theirs to look in
        for store in store_locations.job_stores_elsewhere(context.config):
            if store.owner == uid and uid != 0:
                looked.append(store)
                if lifecycle.end_job(context.config, store, context.log, job_id, ending=ending,
                                     say_if_absent=False):
                    return
    lifecycle.say_nothing_to_remove(context.log, job_id, looked, context.config)


def job_user(environ: dict[str, str], variables: tuple[str, ...]) -> tuple[int, int]:
    """uid and gid of the job's user, named by the first of ``variables`` that is set."""
    import pwd  # only here: a root pre-start is the one role that needs it

    name = next((environ[variable] for variable in variables if environ.get(variable)), "")
    try:
        entry = pwd.getpwnam(name)
    except (KeyError, ValueError):  # ValueError: a name with a NUL byte
        raise SiteInputError(f"{'/'.join(variables)}: the job's user {name!r} is unknown "
                             "here") from None
    return entry.pw_uid, entry.pw_gid
