"""``mjf-lsf``: LSF pre-exec, post-exec and job starter.

* ``mjf-lsf exports``, in ``JOB_STARTER = eval "$(/usr/bin/mjf-lsf exports)";``
  (the job's user, inside the job's own shell): sets up the job's features as the
  starter does, and prints ``export`` lines for that shell to evaluate. LSF puts a
  job starter's text before the job's command in the job file, so the command keeps
  its own shell syntax (quotes, ``;``, several lines), which a quoted ``"%USRCMD"``
  does not (a ``"`` in it ends the quotes).
* ``mjf-lsf starter CMD...`` as ``JOB_STARTER`` (the job's user, the job's
  environment): sets up the job's features unless a pre-exec already did
  (completing them from inside the job where the pre-exec could not), then
  execs CMD with ``MACHINEFEATURES``/``JOBFEATURES`` set. One argument (LSF's
  ``"%USRCMD"``) is a shell command line and runs under ``/bin/sh -c``;
  several are an argv and are exec'd as they are.
* ``mjf-lsf pre-exec`` (``PRE_EXEC``; as the job's user, or as root with
  ``LSB_PRE_POST_EXEC_USER=root``) sets up the job's features;
  ``mjf-lsf post-exec`` (``POST_EXEC``) removes them.

* ``mjf-lsf elim``, as LSF's external LIM (root): this node's facts as LSF resources.

A pre-exec that exits non-zero makes LSF requeue the job and retry, so every
role exits 0 whatever happens (``on_error = fail``: 1); none ever exits 99.
"""

from __future__ import annotations

import os
import sys
import time

from .. import lifecycle
from ..batch import lsf
from ..errors import SiteInputError, UsageError
from . import starter
from .frame import COMMON_HELP, HookContext, exec_job, export_lines, run_roles, shell_quoted

USAGE = """\
usage: mjf-lsf [options] pre-exec | post-exec | exports | elim | starter CMD [ARGS...]

LSF pre-exec, post-exec and job starter for Machine/Job Features.

""" + COMMON_HELP

# Where a job's environment names its user (a root pre-exec or post-exec acts for them).
OWNER_VARIABLES = ("LSB_JOB_EXECUSER", "USER")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # The starter runs the job even when the config is broken (a wrapper must).
    # A pre-exec or post-exec may run as root (LSB_PRE_POST_EXEC_USER=root) with the
    # job's environment, which is its user's.
    in_job = bool(argv) and any(role in argv for role in ("starter", "exports"))
    # The ELIM (the last word: it takes no arguments) is no job's: its lines name none.
    elim_role = argv[-1:] == ["elim"] and "starter" not in argv
    return run_roles("mjf-lsf", argv, ROLES, USAGE, with_arguments=("starter",),
                     job=None if elim_role else lambda environ: environ.get("LSB_JOBID", "?"),
                     positional_stop=True,
                     runs_job="starter" in argv, job_environment=not in_job)


def pre_exec(context: HookContext, args: list[str]) -> int:
    set_up(context, in_job=False)
    return 0


def post_exec(context: HookContext, args: list[str]) -> int:
    ending = None
    if context.config.records_dir:
        # The post-exec runs outside the job, after it: what the job used is what LSF
        # reports of it (its end, the post-exec's own start).
        environ = context.environ
        user = next((environ[name] for name in OWNER_VARIABLES if environ.get(name)), None)
        ending = lifecycle.JobEnd(lsf.NAME, _usage(context, lsf.job_id(environ)), user=user,
                                  queue=environ.get("LSB_QUEUE") or None)
    starter.end(context, lsf.job_id(context.environ), OWNER_VARIABLES, ending)
    return 0


# What a job's starter takes away where it could not set MJF up: the JOBFEATURES the job
# came with is no job's directory on this host (its submitter's, or, in a task on another
# host of the job, the first host's).
NOT_OURS = ("JOBFEATURES",)


def run_starter(context: HookContext, command: list[str]) -> int:
    if not command:
        raise UsageError("starter needs the job's command (JOB_STARTER = mjf-lsf starter "
                         '"%USRCMD")')
    exports = context.fail_safe(set_up, context, True)
    argv = ["/bin/sh", "-c", command[0]] if len(command) == 1 else list(command)
    # Like a shell, 127 when the command cannot be executed.
    failure = exec_job(context, argv, exports or {}, unset=() if exports else NOT_OURS)
    return 0 if failure is None else 127


def print_exports(context: HookContext, args: list[str]) -> int:
    """The job starter's work, for the job's own shell: ``export`` lines on stdout (none
    when MJF cannot be set up: the job then runs without it, as under the starter)."""
    try:
        exports = context.fail_safe(set_up, context, True)
    except SystemExit as stop:  # on_error = fail: the job's shell ends, as the starter would
        sys.stdout.write(f"exit {stop.code}\n")
        raise
    sys.stdout.write(export_lines(exports) if exports else f"unset {' '.join(NOT_OURS)}\n")
    return 0


# How often the ELIM tells LIM the node's facts (LIM keeps a value that long).
ELIM_INTERVAL_SECS = 60


def elim(context: HookContext, args: list[str]) -> int:
    """LSF's external LIM (``$LSF_SERVERDIR/elim``; IBM LSF: ``elim.mjf``, started by its
    melim), as root: this node's facts (``[publish] facts`` under their ``[submit]`` names,
    the values `mjf publish` gives other batch systems) as LSF's dynamic resources, a line
    ``N name value ...`` every minute, until LIM closes the pipe. Each name must be a
    resource of ``lsf.shared`` mapped to this host (docs/lsf.md); the config is read when
    LIM starts the ELIM (``lsadmin limrestart`` applies a change)."""
    from .. import publish

    warned = set()
    while True:
        want, warnings = publish.wanted(context.config, publish.machine_values(context.config))
        for warning in set(warnings) - warned:
            context.log.warning(warning)
        warned.update(warnings)
        line = " ".join([str(len(want)), *(f"{name} {value}" for name, value in want.items())])
        try:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
        except BrokenPipeError:  # LIM has gone, or restarts the ELIM
            return 0
        time.sleep(ELIM_INTERVAL_SECS)


ROLES = {"pre-exec": pre_exec, "post-exec": post_exec, "exports": print_exports,
         "starter": run_starter, "elim": elim}


def set_up(context: HookContext, in_job: bool) -> dict[str, str]:
    """Write the job's features (or, in the starter, complete the pre-exec's); return exports."""
    environ = context.environ
    job_id = lsf.job_id(environ)
    host_names = [os.uname().nodename]

    def gather() -> tuple[dict, list[str]]:
        given = lsf.JobInput(environ, host_names, limits=None,
                             run_limit=_run_limit(context, job_id))
        return lsf.job_facts(given, int(time.time()))

    exports = starter.set_up(context, lsf.NAME, job_id, in_job, gather,
                             _scratch_dir(context, in_job), OWNER_VARIABLES,
                             completion=lambda: {**_limits(), **_tmpdir_size(context)})
    if in_job:
        task_starter = lsf.remote_task_starter(environ, host_names, f"{_own_command()} starter")
        if task_starter:
            exports["LSF_JOB_STARTER"] = task_starter
    return exports


def _own_command() -> str:
    """This command as a job's shell runs it: the path it was started by (the queue's line
    names it), else its name on the job's PATH."""
    path = sys.argv[0]
    return shell_quoted(os.path.abspath(path)) if os.path.basename(path) == "mjf-lsf" \
        else "mjf-lsf"


def _scratch_dir(context: HookContext, in_job: bool) -> str | None:
    """The job's scratch directory, ``$TMPDIR``. A pre-exec as root takes it only where it
    is the one LSF made for this job (``.../1234.tmpdir``): otherwise it is the job's
    user's to set, and root would report the size of whatever filesystem they chose."""
    tmpdir = context.environ.get("TMPDIR") or None
    if tmpdir is None or in_job or os.geteuid() != 0:
        return tmpdir
    if not _is_lsf_tmpdir(context.environ, tmpdir):
        context.log.info(f"$TMPDIR {tmpdir[:200]} is not the job's directory LSF makes "
                         f"(.../{lsf.job_tmpdir_name(context.environ)}): scratch_limit_bytes "
                         "is not written")
        return None
    return tmpdir


def _is_lsf_tmpdir(environ, tmpdir: str) -> bool:
    """Whether ``tmpdir`` is the job's directory LSF made (``.../1234.tmpdir``)."""
    return tmpdir.rstrip("/").rpartition("/")[2] == lsf.job_tmpdir_name(environ)


def _tmpdir_size(context: HookContext) -> dict:
    """From inside the job, where a root pre-exec could not measure it (LSF gives a pre-exec
    no ``$TMPDIR``; volclava never): the size of the job's tmpdir LSF made, if it is that."""
    tmpdir = context.environ.get("TMPDIR") or ""
    try:
        if not _is_lsf_tmpdir(context.environ, tmpdir):
            return {}
    except SiteInputError:
        return {}
    from ..probe.scratch import filesystem_size_bytes

    size = filesystem_size_bytes(tmpdir)
    return {"scratch_limit_bytes": (size, f"size of the filesystem holding {tmpdir}")} \
        if size else {}


def _root_command_env(context: HookContext) -> dict[str, str]:
    """What bjobs gets from a root pre-exec: a fixed PATH, and the job's ``LSF_ENVDIR``
    (where ``lsf.conf`` is) only if it is a directory of root's, reached without a symlink,
    that nobody else can write (its user cannot make one)."""
    from ..safefs import ROOT_ONLY, RefusedPath, open_checked_dir

    env = {"PATH": "/usr/bin:/bin"}
    envdir = context.environ.get("LSF_ENVDIR", "")
    if envdir:
        try:
            open_checked_dir(envdir, ROOT_ONLY, "root").close()
            env["LSF_ENVDIR"] = envdir
        except RefusedPath as error:
            context.log.warning(f"$LSF_ENVDIR not given to bjobs: {error}")
    return env



def _limits() -> dict:
    import resource  # only here: the starter's own limits; pre-exec and post-exec never ask

    return lsf.limit_facts(resource.getrlimit(resource.RLIMIT_CPU)[0],
                           resource.getrlimit(resource.RLIMIT_RSS)[0], resource.RLIM_INFINITY)


def _bjobs_long(context: HookContext, job_id: str, unwritten: str, parse):
    """``parse(output, argv)`` of ``bjobs -l JOBID`` (every LSF's long listing of a job),
    unless the site switched bjobs off; None (logged, with ``unwritten``) where it fails."""
    # As root, never $LSF_BINDIR, nor the job's environment: they are the job's user's, and
    # root would run the program they name, or with the libraries they preload.
    as_root = os.geteuid() == 0

    def command(options: dict[str, str]) -> tuple[list[str], dict[str, str]] | None:
        lsf_bindir = "" if as_root else context.environ.get("LSF_BINDIR", "")
        candidates = [os.path.join(lsf_bindir, "bjobs")] * bool(lsf_bindir and
                                                              not options.get("bjobs"))
        candidates.append(lsf.command_path(options, "bjobs"))  # [lsf] bjobs, the usual places
        path = next((candidate for candidate in candidates
                     if candidate and os.path.exists(candidate)), None)
        if path is None:
            context.log.warning(f"bjobs not found (set [lsf] bjobs): {unwritten}")
            return None
        env = _root_command_env(context) if as_root else dict(context.environ)
        return [path, "-l", job_id], env

    return context.query(lsf.NAME, "query_bjobs", command, unwritten, parse)


def _run_limit(context: HookContext, job_id: str) -> tuple | None:
    """The run limit from ``bjobs`` (LSF passes none to the job), unless switched off."""

    def run_limit(output: str, argv: list[str]) -> tuple | None:
        try:
            limit = lsf.parse_bjobs_run_limit_secs(output)
        except ValueError as error:
            raise ValueError(f"{error}: wall_limit_secs not written") from None
        return (limit, f"{argv[0]} -l {job_id}: RUNLIMIT {limit / 60:g} min") if limit else None

    return _bjobs_long(context, job_id, "wall_limit_secs not written", run_limit)


def _usage(context: HookContext, job_id: str) -> dict:
    """What the ended job used, as LSF reports it (``bjobs -l``: its CPU time, its peak
    memory), for its record; empty where bjobs cannot say."""
    return _bjobs_long(context, job_id, "the record has no CPU time or peak memory",
                       lambda output, argv: lsf.parse_bjobs_usage(output, f"{argv[0]} -l")
                       ) or {}
