"""``mjf-gridengine``: Grid Engine prolog, epilog and starter method.

* ``prolog`` (the queue's ``prolog root@/usr/bin/mjf-gridengine prolog``: root, the
  job's environment, once per array task): writes the job's directory, pending
  until the starter completes it from inside the job.
* ``epilog`` (``epilog root@/usr/bin/mjf-gridengine epilog``): removes it.
* ``starter`` (the queue's ``starter_method``, which takes a path only: installed as
  ``mjf-gridengine-starter``; the job's user, argv = the job): completes the job's
  values (or writes them, if no prolog ran), then runs the job as Grid Engine itself
  would have (:func:`mjf_hooks.batch.gridengine.job_command`) with
  ``MACHINEFEATURES``/``JOBFEATURES`` set.

A prolog or epilog exit other than 0, 99 or 100 puts the *queue instance* into error
state, blocking every later job on it: every role exits 0 whatever happens; with
``on_error = fail`` 100, which puts only this job into error.
"""

from __future__ import annotations

import os
import sys
import time

from .. import lifecycle, starter
from ..batch import gridengine
from ..hook import COMMON_HELP, HookContext, exec_job, run_hook
from ..options import UsageError
from ..probe import read_text

USAGE = """\
usage: mjf-gridengine [options] prolog | epilog | starter CMD [ARGS...]

Grid Engine prolog, epilog and starter method for Machine/Job Features.
(mjf-gridengine-starter CMD... is the starter, for the queue's starter_method.)

""" + COMMON_HELP

# Grid Engine reads a prolog, epilog or job exit status of 100 as "this job failed";
# any other failure blames the queue instance.
JOB_ERROR_EXIT = 100
# Where a job's environment names its user (a root prolog or epilog acts for them).
OWNER_VARIABLES = ("USER", "LOGNAME")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # The starter runs the job even when the config is broken (a wrapper must).
    return run_hook("mjf-gridengine", argv, _dispatch, USAGE, positional_stop=True,
                    runs_job="starter" in argv, failure_exit=JOB_ERROR_EXIT)


def starter_main(argv: list[str] | None = None) -> int:
    """``mjf-gridengine-starter CMD...``: the starter role; every argument is the job's."""
    return main(["starter", *(sys.argv[1:] if argv is None else argv)])


def _dispatch(context: HookContext) -> int:
    role, command = (context.args[0], context.args[1:]) if context.args else ("", [])
    if role not in ROLES:
        raise UsageError(f"unknown role {role!r}: give prolog, epilog or starter")
    if role != "starter" and command:
        raise UsageError(f"{role} takes no arguments, got {command!r}")
    job = context.environ.get("JOB_ID", "?")
    task = context.environ.get("SGE_TASK_ID", "undefined")
    context.log.context = f"mjf-gridengine {role} job {job}" + \
        (f".{task}" if task not in ("undefined", "") else "")
    return ROLES[role](context, command)


def prolog(context: HookContext, command: list[str]) -> int:
    set_up(context, _Job(context), in_job=False)
    return 0


def epilog(context: HookContext, command: list[str]) -> int:
    ending = None
    if context.config.records_dir:
        environ = context.environ
        spool_dir = environ.get("SGE_JOB_SPOOL_DIR", "")
        path = os.path.join(spool_dir, "usage")
        text = read_text(path) if spool_dir.startswith("/") else None
        ending = lifecycle.JobEnd(
            gridengine.NAME, gridengine.usage_facts(text, path) if text is not None else {},
            user=environ.get("USER") or None, queue=environ.get("QUEUE") or None)
    starter.end(context, gridengine.job_id(context.environ), OWNER_VARIABLES, ending)
    return 0


def run_starter(context: HookContext, command: list[str]) -> int:
    if not command:
        raise UsageError("the starter needs the job's command (Grid Engine gives it)")
    job = _Job(context)
    exports = context.fail_safe(set_up, context, job, True) or {}
    file, argv = gridengine.job_command(command, context.environ, job.spool)
    source = "the job's shell (SGE_STARTER_SHELL_PATH)" if file != command[0] else ""
    # Like a shell, 127 when the command cannot be executed.
    return 0 if exec_job(context, argv, exports, file, source) is None else 127


ROLES = {"prolog": prolog, "epilog": epilog, "starter": run_starter}


class _Job:
    """What the job's spool directory says, read once."""

    def __init__(self, context: HookContext) -> None:
        spool_dir = context.environ.get("SGE_JOB_SPOOL_DIR", "")
        text = read_text(os.path.join(spool_dir, "config")) if spool_dir.startswith("/") else None
        self.spool = gridengine.parse_spool_config(text) if text is not None else None


def set_up(context: HookContext, job: _Job, in_job: bool) -> dict[str, str]:
    """Write the job's features (or, in the starter, complete the prolog's); return exports."""
    environ = context.environ
    job_id = gridengine.job_id(environ)

    def gather() -> tuple[dict, list[str]]:
        pe_hostfile = environ.get("PE_HOSTFILE", "")
        pe_text = read_text(pe_hostfile) if pe_hostfile else None
        if pe_hostfile and pe_text is None:
            context.log.warning(f"PE_HOSTFILE {pe_hostfile} is not readable")
        names = [os.uname().nodename, (job.spool or {}).get("host", ""),
                 environ.get("HOSTNAME", "")]
        requests, queue_limits = _run_limits(context, job)
        return gridengine.job_facts(environ, [name for name in names if name],
                                    int(time.time()), job.spool, pe_text, requests,
                                    queue_limits)

    return starter.set_up(context, gridengine.NAME, job_id, in_job, gather,
                          gridengine.scratch_dir(environ, job.spool or {}),
                          OWNER_VARIABLES,
                          completion=lambda: gridengine.spool_limit_facts(job.spool))


def _run_limits(context: HookContext, job: _Job) -> tuple[dict | None, dict | None]:
    """The job's h_rt/s_rt requests (``qstat -j``) and, if it made none, its queue
    instance's limits (``qstat -F``): Grid Engine gives a job neither."""
    options = context.config.backend[gridengine.NAME]
    if options.get("query_qstat", "yes") == "no":
        return None, None
    from ..command import ask  # only here: the epilog runs no command

    qstat = gridengine.qstat_path(options)
    env = gridengine.command_env(options, dict(context.environ))
    timeout = context.config.command_timeout_secs
    job_number = context.environ.get("JOB_ID", "")
    output = ask([qstat, "-j", job_number], timeout, env, context.log,
                 "wall_limit_secs not written")
    if output is None:
        return None, None
    requests = gridengine.parse_resource_list(output)
    if not gridengine.needs_queue_limits(requests):
        return requests, None
    instance = gridengine.queue_instance(context.environ, job.spool or {})
    if instance is None:
        return requests, None
    output = ask([qstat, "-F", "h_rt,s_rt", "-q", instance], timeout, env, context.log,
                 "the queue's run-time limit is not known: wall_limit_secs not written")
    return requests, gridengine.parse_queue_limits(output or "")
