"""``mjf-lsf``: LSF pre-exec, post-exec and job starter.

* ``mjf-lsf starter CMD...`` as ``JOB_STARTER`` (the job's user, the job's
  environment): sets up the job's features unless a pre-exec already did
  (completing them from inside the job where the pre-exec could not), then
  execs CMD with ``MACHINEFEATURES``/``JOBFEATURES`` set. One argument (LSF's
  ``"%USRCMD"``) is a shell command line and runs under ``/bin/sh -c``;
  several are an argv and are exec'd as they are.
* ``mjf-lsf pre-exec`` (``PRE_EXEC``; as the job's user, or as root with
  ``LSB_PRE_POST_EXEC_USER=root``) sets up the job's features;
  ``mjf-lsf post-exec`` (``POST_EXEC``) removes them.

A pre-exec that exits non-zero makes LSF requeue the job and retry, so every
role exits 0 whatever happens (``on_error = fail``: 1); none ever exits 99.
"""

from __future__ import annotations

import os
import sys
import time

from .. import lifecycle
from ..batch import lsf
from ..errors import SiteInputError
from ..hook import COMMON_HELP, HookContext, exec_job, run_hook
from ..options import UsageError
from ..store import Store

USAGE = """\
usage: mjf-lsf [options] pre-exec | post-exec | starter CMD [ARGS...]

LSF pre-exec, post-exec and job starter for Machine/Job Features.

""" + COMMON_HELP

_BJOBS_CANDIDATES = ("/usr/bin/bjobs", "/usr/local/bin/bjobs")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # The starter runs the job even when the config is broken (a wrapper must).
    return run_hook("mjf-lsf", argv, _dispatch, USAGE, positional_stop=True,
                    runs_job="starter" in argv)


def _dispatch(context: HookContext) -> int:
    role, command = (context.args[0], context.args[1:]) if context.args else ("", [])
    if role not in ("pre-exec", "post-exec", "starter"):
        raise UsageError(f"unknown role {role!r}: give pre-exec, post-exec or starter")
    if role != "starter" and command:
        raise UsageError(f"{role} takes no arguments, got {command!r}")
    context.log.context = f"mjf-lsf {role} job {context.environ.get('LSB_JOBID', '?')}"
    if role == "pre-exec":
        set_up(context, completing=False)
        return 0
    if role == "post-exec":
        job_id = lsf.job_id(context.environ)
        for store in _stores(context):
            lifecycle.end_job(store, context.log, job_id, context.dry_run)
        return 0
    return starter(context, command)


def starter(context: HookContext, command: list[str]) -> int:
    if not command:
        raise UsageError("starter needs the job's command (JOB_STARTER = mjf-lsf starter "
                         '"%USRCMD")')
    exports = context.fail_safe(set_up, context, True) or {}
    argv = ["/bin/sh", "-c", command[0]] if len(command) == 1 else list(command)
    # Like a shell, 127 when the command cannot be executed.
    return 0 if exec_job(context, argv, exports) is None else 127


def _stores(context: HookContext) -> list[Store]:
    """Where a job's directory may be: base_dir, or its user's private directory."""
    private = lifecycle.private_base_dir(context.environ, create=False)
    return [lifecycle.store_for(context.config), lifecycle.store_for(context.config, private)]


def set_up(context: HookContext, completing: bool) -> dict[str, str]:
    """Write the job's features (or, in the starter, complete the pre-exec's); return exports."""
    config, environ, log = context.config, context.environ, context.log
    job_id = lsf.job_id(environ)
    site = lifecycle.store_for(config)
    if completing:
        for store in _stores(context):
            if os.path.isdir(store.job_features_dir(job_id)):
                return _complete(context, site, store, job_id)
    # The starter is the job; a pre-exec is not (as root, not even its user): what only
    # the job's own process shows (its limits, its cgroup) is left for the starter.
    is_job = completing
    facts, warnings = lsf.job_facts(environ, [os.uname().nodename], int(time.time()),
                                    _limits() if is_job else None, _run_limit(context, job_id))
    for warning in warnings:
        log.warning(warning)
    running_as_root = os.geteuid() == 0
    store = site if running_as_root else lifecycle.user_job_store(config, environ, log,
                                                                   context.dry_run)
    uid = gid = None
    if running_as_root and not is_job:
        uid, gid = _job_user(environ)
    job = lifecycle.JobStart("lsf", facts, cgroup_pid="self" if is_job else None,
                             scratch_dir=environ.get("TMPDIR") or os.getcwd(),
                             gid=gid, uid=uid, pending=not is_job)
    return lifecycle.set_up_job(config, log, site, store, job, context.dry_run)


def _complete(context: HookContext, site: Store, store: Store, job_id: str) -> dict[str, str]:
    """The starter after a pre-exec: add what only the job's own process can see."""
    config, log = context.config, context.log
    machine_store = site if site.has_machine_dir(log) else store
    lifecycle.complete_if_pending(config, store, machine_store, log, job_id, _limits(),
                                  context.dry_run)
    return lifecycle.exports(config, machine_store.machine_dir, store.job_features_dir(job_id))


def _limits() -> dict:
    import resource  # only here: the starter's own limits; pre-exec and post-exec never ask

    return lsf.limit_facts(resource.getrlimit(resource.RLIMIT_CPU)[0],
                           resource.getrlimit(resource.RLIMIT_RSS)[0], resource.RLIM_INFINITY)


def _run_limit(context: HookContext, job_id: str) -> tuple | None:
    """The run limit from ``bjobs`` (LSF passes none to the job), unless switched off."""
    options = context.config.backend["lsf"]
    if options.get("query_bjobs", "yes") == "no":
        return None
    lsf_bindir = context.environ.get("LSF_BINDIR", "")
    candidates = [options.get("bjobs")] if options.get("bjobs") else \
        [os.path.join(lsf_bindir, "bjobs")] * bool(lsf_bindir) + list(_BJOBS_CANDIDATES)
    path = next((candidate for candidate in candidates if os.path.exists(candidate)), None)
    if path is None:
        context.log.warning("bjobs not found (set [lsf] bjobs): wall_limit_secs not written")
        return None
    from ..command import ask  # only here: most roles run no command

    argv = [path, "-noheader", "-hms", "-o", "runtimelimit", job_id]
    output = ask(argv, context.config.command_timeout_secs, dict(context.environ), context.log,
                 "wall_limit_secs not written")
    if output is None:
        return None
    try:
        limit = lsf.parse_run_limit_secs(output.strip().splitlines()[0] if output.strip() else "")
    except ValueError as error:
        context.log.warning(f"{error}: wall_limit_secs not written")
        return None
    return (limit, f"{path} -o runtimelimit: {output.strip()}") if limit else None


def _job_user(environ: dict[str, str]) -> tuple[int | None, int | None]:
    """uid and gid of the job's user, for a pre-exec running as root."""
    import pwd  # only here: a root pre-exec is the one role that needs it

    name = environ.get("LSB_JOB_EXECUSER") or environ.get("USER") or ""
    try:
        entry = pwd.getpwnam(name)
    except (KeyError, ValueError):  # ValueError: a name with a NUL byte
        raise SiteInputError(f"LSB_JOB_EXECUSER/USER: the job's user {name!r} is unknown "
                             "here") from None
    return entry.pw_uid, entry.pw_gid
