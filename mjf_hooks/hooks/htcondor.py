"""``mjf-htcondor-wrapper`` (USER_JOB_WRAPPER) and ``mjf-htcondor-cron`` (STARTD_CRON).

The wrapper runs as the job's user, inside the job's cgroup, with the job's
executable and arguments as its argv (so it takes no options: ``mjf
htcondor-wrapper [options] -- CMD`` replays it by hand). It writes the job's
features under the job's scratch directory (HTCondor removes them with the
sandbox), then execs the job - or the next wrapper of a chain - with
``MACHINEFEATURES``/``JOBFEATURES`` set and the argv untouched. If MJF cannot
be set up the job still runs; only a failing exec is reported to HTCondor,
as one line in ``$_CONDOR_WRAPPER_ERROR_FILE``.

The job-exit hook (``<KEYWORD>_HOOK_JOB_EXIT``, as the job's user, given the final
job ad on stdin), where the site keeps records, hands in the job's record.

The cron prints the machine features as ``MJF_MACHINE_<KEY> = value`` attributes
(the names glideinWMS publishes), which HTCondor merges into the slot ads for
policies and matchmaking.
"""

from __future__ import annotations

import os
import sys
import time

from .. import classad_files, features, lifecycle, spec
from ..batch import htcondor
from ..errors import SiteInputError, UsageError
from ..store_locations import store_for
from .frame import COMMON_HELP, CommandLine, HookContext, exec_job, run_hook

WRAPPER_USAGE = """\
usage: mjf htcondor-wrapper [options] -- CMD [ARGS...]

What mjf-htcondor-wrapper (USER_JOB_WRAPPER) does for a job, by hand: set up
the job's features from $_CONDOR_MACHINE_AD and $_CONDOR_JOB_AD under
$_CONDOR_SCRATCH_DIR, then exec CMD (or [htcondor] next_wrapper CMD) with
MACHINEFEATURES and JOBFEATURES set.

""" + COMMON_HELP

CRON_USAGE = """\
usage: mjf-htcondor-cron [options]

STARTD_CRON job: print this machine's features as MJF_MACHINE_<KEY> = value
attributes (the names glideinWMS publishes).

""" + COMMON_HELP


def wrapper_main() -> int:
    """USER_JOB_WRAPPER: every argument belongs to the job."""
    job_argv = sys.argv[1:]
    return run_hook("mjf-htcondor-wrapper", [], lambda context: wrap(context, job_argv),
                    CommandLine(WRAPPER_USAGE), runs_job=True)


# `mjf htcondor-wrapper`'s command line: options, then the job's command.
WRAPPER_COMMAND_LINE = CommandLine(WRAPPER_USAGE, arguments=None, positional_stop=True,
                                   usage_exit=2)


def wrapper_command(argv: list[str]) -> int:
    """``mjf htcondor-wrapper [options] -- CMD``: the wrapper, replayable with options."""
    return run_hook("mjf htcondor-wrapper", argv, lambda context: wrap(context, context.args),
                    WRAPPER_COMMAND_LINE, runs_job=True)


def wrap(context: HookContext, job_argv: list[str]) -> int:
    if not job_argv:
        raise UsageError("no job to run: HTCondor passes the job's executable and arguments")
    try:
        exports = context.fail_safe(_set_up, context) or {}
    except SystemExit:  # on_error = fail
        _report_to_htcondor(context, "MJF set-up failed and [mjf] on_error = fail")
        raise
    next_wrapper = context.config.backend[htcondor.NAME].get("next_wrapper")
    argv = [next_wrapper, *job_argv] if next_wrapper else list(job_argv)
    failure = exec_job(context, argv, exports)
    if failure is None:
        return 0  # a dry run
    _report_to_htcondor(context, failure)
    return 1


def _report_to_htcondor(context: HookContext, message: str) -> None:
    """One line in $_CONDOR_WRAPPER_ERROR_FILE: more lines break the starter."""
    path = context.environ.get("_CONDOR_WRAPPER_ERROR_FILE")
    if not path:
        return
    try:
        with open(path, "w") as handle:
            handle.write("mjf-htcondor-wrapper: " + " ".join(message.split()) + "\n")
    except OSError as error:
        context.log.error(f"{path}: {error.strerror}")


def _read_ad(context: HookContext, variable: str) -> classad_files.Ad | None:
    """The ad a starter variable names; None (logged) if it cannot be read."""
    path = context.environ.get(variable)
    if not path:
        context.log.warning(f"${variable} is not set: its values are not written")
        return None
    try:
        return classad_files.read_ad(path)
    except (OSError, ValueError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        context.log.warning(f"${variable} {path}: {reason}: its values are not written")
        return None


def _set_up(context: HookContext) -> dict[str, str]:
    config, environ, log = context.config, context.environ, context.log
    scratch = environ.get("_CONDOR_SCRATCH_DIR")
    if not scratch or not scratch.startswith("/"):
        raise SiteInputError("$_CONDOR_SCRATCH_DIR is not set to an absolute path: "
                             "not run by HTCondor's starter?")
    if not os.path.isdir(scratch):
        raise SiteInputError(f"$_CONDOR_SCRATCH_DIR {scratch} is not a directory")
    options = config.backend[htcondor.NAME]
    given = htcondor.JobInput(
        _read_ad(context, "_CONDOR_MACHINE_AD"), _read_ad(context, "_CONDOR_JOB_AD"),
        job_id_style=options.get("job_id", "global"),
        wall_limit_attribute=options.get("wall_limit_attribute",
                                         htcondor.DEFAULT_WALL_LIMIT_ATTRIBUTE),
        wall_limit_unit=options.get("wall_limit_unit", "seconds"))
    facts, warnings = htcondor.job_facts(given, int(time.time()))
    for warning in warnings:
        log.warning(warning)
    if "job_id" not in facts:
        raise SiteInputError("the job ad ($_CONDOR_JOB_AD) has no GlobalJobId, nor ClusterId "
                             "and ProcId: cannot tell the job's id")
    site = store_for(config)
    # The scratch is HTCondor's, below the condor user's EXECUTE directory.
    store = store_for(config, os.path.join(scratch, htcondor.SCRATCH_STORE),
                                given_dir=scratch)
    job = lifecycle.JobStart(htcondor.NAME, facts, cgroup_pid="self", scratch_dir=scratch)
    return lifecycle.set_up_job(config, store, log, job, site, dry_run=context.dry_run)


EXIT_USAGE = """\
usage: mjf-htcondor-job-exit [options] [REASON]

HTCondor's job-exit hook (STARTER_JOB_HOOK_KEYWORD = MJF, MJF_HOOK_JOB_EXIT = this
command): with the final job ad on stdin, where [records] dir is set, hand in the
job's record of what MJF promised against what it used, then remove the job's
directory. REASON (exit, evict...) is HTCondor's.

""" + COMMON_HELP


def job_exit_main(argv: list[str] | None = None) -> int:
    return run_hook("mjf-htcondor-job-exit", argv, _job_exit,
                    CommandLine(EXIT_USAGE, arguments=1))


def _job_exit(context: HookContext) -> int:
    config, environ, log = context.config, context.environ, context.log
    scratch = environ.get("_CONDOR_SCRATCH_DIR")
    if not scratch or not scratch.startswith("/") or not os.path.isdir(scratch):
        raise SiteInputError("$_CONDOR_SCRATCH_DIR is not an existing absolute path: "
                             "not run by HTCondor's starter?")
    data = sys.stdin.buffer.read(classad_files.MAX_AD_BYTES + 1)
    if len(data) > classad_files.MAX_AD_BYTES:
        raise SiteInputError(
            f"the job ad on stdin is larger than {classad_files.MAX_AD_BYTES} bytes")
    final_ad = classad_files.Ad(data.decode("utf-8", "replace"))
    warnings: list[str] = []
    found = htcondor.job_id_of(final_ad, config.backend[htcondor.NAME].get("job_id", "global"),
                               warnings)
    if found is None:
        raise SiteInputError("the job ad on stdin has no GlobalJobId, nor ClusterId and "
                             "ProcId: cannot tell the job's id")
    job_id, source = found
    if not spec.is_valid_job_id(job_id):
        raise SiteInputError(f"the job ad on stdin: {source} {job_id[:80]!r} is not a job id "
                             f"(1 to {spec.MAX_JOB_ID_LENGTH} printable ASCII characters "
                             "without spaces)")
    context.log.context = f"mjf-htcondor-job-exit job {job_id}"
    ending = None
    if config.records_dir:
        delivered, owner = htcondor.exit_facts(final_ad)
        ending = lifecycle.JobEnd(htcondor.NAME, delivered, user=owner)
    store = store_for(config, os.path.join(scratch, htcondor.SCRATCH_STORE),
                                given_dir=scratch)
    lifecycle.end_job(config, store, log, job_id, dry_run=context.dry_run, ending=ending)
    return 0


def cron_main(argv: list[str] | None = None) -> int:
    return run_hook("mjf-htcondor-cron", argv, _cron, CommandLine(CRON_USAGE))


def _cron(context: HookContext) -> int:
    """Machine features as attributes. A graceful drain under way shows as
    MJF_MACHINE_SHUTDOWNTIME at once, even before `mjf sync` (root) has written it to
    the files jobs read: this cron runs as the condor user."""
    from ..batch.here import drain_time

    store = store_for(context.config)
    machine = features.render(lifecycle.machine_features(
        context.config, store, context.log, context.dry_run, write=False))
    drained = drain_time(htcondor, context.config, context.log)
    if drained is not None and int(machine.get("shutdowntime", drained)) >= drained:
        machine["shutdowntime"] = str(drained)
    sys.stdout.write(htcondor.cron_attributes(machine))
    return 0
