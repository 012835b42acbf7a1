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

from .. import lifecycle
from ..batch import gridengine
from ..errors import SiteInputError, UsageError
from ..safefs import (
    ROOT_ONLY,
    Dir,
    RefusedPath,
    open_checked_dir,
    read_checked,
    read_checked_text,
    shown_path,
    text_of,
)
from . import starter
from .frame import COMMON_HELP, HookContext, exec_job, run_roles

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
    # A prolog or epilog runs as root with the job's environment (qsub -v sets any of it).
    return run_roles("mjf-gridengine", argv, ROLES, USAGE, with_arguments=("starter",),
                     job=_job_label, positional_stop=True, runs_job="starter" in argv,
                     failure_exit=JOB_ERROR_EXIT, job_environment="starter" not in argv)


def starter_main(argv: list[str] | None = None) -> int:
    """``mjf-gridengine-starter CMD...``: the starter role; every argument is the job's."""
    return main(["starter", *(sys.argv[1:] if argv is None else argv)])


def _job_label(environ: dict[str, str]) -> str:
    task = environ.get("SGE_TASK_ID", "undefined")
    return environ.get("JOB_ID", "?") + (f".{task}" if task not in ("undefined", "") else "")


def prolog(context: HookContext, command: list[str]) -> int:
    job = _Job(context)
    try:
        set_up(context, job, in_job=False)
    finally:
        job.close()
    return 0


def epilog(context: HookContext, command: list[str]) -> int:
    ending = None
    if context.config.records_dir:
        environ = context.environ
        job = _Job(context)
        text = job.read(gridengine.USAGE)
        problems = [*([job.problem] if job.problem else []), *job.warnings]
        cpus = _cpus_known(job, environ)  # what keeps it from them, the prolog said
        job.close()
        for warning in problems:
            context.log.warning(f"{warning}: the job's record has no usage from its spool "
                                "directory")
        ending = lifecycle.JobEnd(
            gridengine.NAME,
            gridengine.usage_facts(text, job.path(gridengine.USAGE)) if text is not None else {},
            user=(job.spool or {}).get("job_owner") or environ.get("USER") or None,
            queue=(job.spool or {}).get("queue") or environ.get("QUEUE") or None,
            requested=cpus)
    starter.end(context, gridengine.job_id(context.environ), OWNER_VARIABLES, ending)
    return 0


def run_starter(context: HookContext, command: list[str]) -> int:
    if not command:
        raise UsageError("the starter needs the job's command (Grid Engine gives it)")
    try:
        job = _Job(context, starter_role=True)
    except Exception as error:  # noqa: BLE001 - the starter runs the job whatever happens
        context.log.error(f"the job's spool directory: internal error "
                          f"{type(error).__name__}: {error}")
        job = _Job(None)
    exports = context.fail_safe(set_up, context, job, True) or {}
    job.close()
    file, argv = gridengine.job_command(command, context.environ, job.spool)
    source = "the job's shell (SGE_STARTER_SHELL_PATH)" if file != command[0] else ""
    # Like a shell, 127 when the command cannot be executed.
    return 0 if exec_job(context, argv, exports, file, source) is None else 127


ROLES = {"prolog": prolog, "epilog": epilog, "starter": run_starter}


class _Job:
    """The job's spool directory (``$SGE_JOB_SPOOL_DIR``) and what its config says, read
    only where Grid Engine puts it: a job can set variables (``qsub -v PE_HOSTFILE=...``),
    and a prolog or epilog runs as root with the job's environment.

    The directory is reached without a symlink; its files are read without following
    one, never waiting on a FIFO, at most :data:`mjf_hooks.safefs.MAX_BATCH_FILE_BYTES`.
    As root, besides, the directory must be execd's for this job (a prolog's or
    epilog's: ``.../active_jobs/<job>.<task>``), and every directory on the way and every
    file must belong to root or to the cell's admin user (its ``bootstrap``'s
    ``admin_user``, whom execd writes them as), who is not the job's user: nobody else
    can put a file there. (The starter runs as the job's user, who can read nothing more
    through it.) What is refused is not read; a warning names the path and why, never
    what the file holds.
    """

    def __init__(self, context: HookContext | None, starter_role: bool = False) -> None:
        """``context`` None: a job whose spool directory is not read."""
        # Why the spool config is not read (None: it is, or there is none to read).
        self.problem: str | None = None
        self.warnings: list[str] = []  # about its other files
        self.spool: dict[str, str] | None = None
        self._directory: Dir | None = None
        self._owners: frozenset[int] | None = None
        self._who = ""
        self._admin: str | None = None
        self._path = ""
        if context is None:
            return
        environ = context.environ
        self._path = environ.get("SGE_JOB_SPOOL_DIR", "")
        try:
            if not self._path:
                raise SiteInputError("$SGE_JOB_SPOOL_DIR is not set")
            if os.geteuid() == 0:
                # (A starter runs its job as Grid Engine would even with a broken JOB_ID:
                # it reads any spool directory of root's and the admin user's.)
                problem = None if starter_role else \
                    gridengine.spool_dir_problem(self._path, environ)
                if problem:
                    raise RefusedPath(f"$SGE_JOB_SPOOL_DIR {shown_path(self._path)} is "
                                      f"{problem}")
                self._owners, self._who, self._admin = _trusted_owners(context)
            self._directory = open_checked_dir(self._path, self._owners, self._who)
            text = text_of(read_checked(self._directory, gridengine.SPOOL_CONFIG,
                                        self._owners, self._who))
        except SiteInputError as error:  # RefusedPath too
            self.problem = str(error)
            return
        spool = gridengine.parse_spool_config(text)
        owner = spool.get("job_owner", "")
        if owner and owner == self._admin and owner != "root":
            self.problem = (f"{self.path(gridengine.SPOOL_CONFIG)}: the job's user {owner} is "
                            "Grid Engine's admin user, who writes its spool directory")
            return
        self.spool = spool

    def path(self, name: str) -> str:
        return f"{self._path.rstrip('/')}/{name}"

    def read(self, name: str) -> str | None:
        """Another file of the spool directory as text, or None (``warnings`` says why,
        unless the directory itself was not read: ``problem``)."""
        if self.spool is None or self._directory is None:
            return None
        try:
            return text_of(read_checked(self._directory, name, self._owners, self._who))
        except RefusedPath as error:
            self.warnings.append(str(error))
            return None

    def pe_hostfile(self, environ: dict[str, str]) -> tuple[str | None, str]:
        """The text of the job's ``pe_hostfile`` (None without one: a job without a
        parallel environment, or one whose spool config is not read), and its path.
        ``$PE_HOSTFILE`` is read only where execd put the file, in the job's spool
        directory, as its spool config says."""
        named = environ.get("PE_HOSTFILE", "")
        if self.spool is None:
            return None, named  # the problem's warning says so
        expected = self.spool.get("pe_hostfile", "")
        if not expected:
            if named:
                self.warnings.append(f"PE_HOSTFILE {shown_path(named)} is not read: the job "
                                     "has no parallel environment (its spool config names no "
                                     "pe_hostfile)")
            return None, named
        if expected != self.path(gridengine.PE_HOSTFILE) or (named and named != expected):
            self.warnings.append(f"PE_HOSTFILE {shown_path(named or expected)} is not read: "
                                 f"not {self.path(gridengine.PE_HOSTFILE)}, where Grid Engine "
                                 "puts it")
            return None, named or expected
        return self.read(gridengine.PE_HOSTFILE), expected

    def scratch_dir(self, environ: dict[str, str]) -> str | None:
        """The job's TMPDIR. As root only the spool config's (where execd made it): the
        environment's ``TMP``/``TMPDIR`` are the job's to set."""
        if os.geteuid() == 0:
            return (self.spool or {}).get("tmpdir") or None
        return gridengine.scratch_dir(environ, self.spool or {})

    def close(self) -> None:
        if self._directory is not None:
            self._directory.close()
            self._directory = None


def _trusted_owners(context: HookContext) -> tuple[frozenset[int], str, str | None]:
    """Who may own the job's spool directory and files (uids, who they are, and the admin
    user's name): root and the cell's admin user, whom execd writes them as.

    The admin user is the one the cell's ``bootstrap`` names, read without a symlink;
    the file and its directories must belong to root or to that user. Where it cannot
    be told, root alone (the message says why)."""
    import pwd  # only here: a root prolog or epilog

    path = gridengine.bootstrap_path(context.config.backend[gridengine.NAME], context.environ)
    try:
        admin = gridengine.bootstrap_admin_user(read_checked_text(path))
        if admin is None:
            raise SiteInputError(f"{shown_path(path)} names no admin_user")
        try:
            uid = pwd.getpwnam(admin).pw_uid
        except (KeyError, ValueError):
            raise SiteInputError(f"{shown_path(path)} names admin_user {admin[:40]!r}, "
                                 "unknown here") from None
        owners = frozenset([0, uid])
        who = f"root or Grid Engine's admin user {admin}"
        read_checked_text(path, owners, who)  # its own directories and file are theirs
    except SiteInputError as error:  # RefusedPath too
        return ROOT_ONLY, f"root (Grid Engine's admin user is not known: {error})", None
    return owners, who, admin



def set_up(context: HookContext, job: _Job, in_job: bool) -> dict[str, str]:
    """Write the job's features (or, in the starter, complete the prolog's); return exports."""
    environ = context.environ
    job_id = gridengine.job_id(environ)

    def gather() -> tuple[dict, list[str]]:
        pe_text, pe_path = job.pe_hostfile(environ)
        requests, queue_limits = _run_limits(context, job)
        given = gridengine.JobInput(
            environ, _host_names(job, environ), job.spool, pe_text, requests=requests,
            queue_limits=queue_limits, pe_path=pe_path, spool_problem=job.problem)
        facts, warnings = gridengine.job_facts(given, int(time.time()))
        return facts, [*job.warnings, *warnings]

    return starter.set_up(context, gridengine.NAME, job_id, in_job, gather,
                          job.scratch_dir(environ), OWNER_VARIABLES,
                          completion=lambda: gridengine.spool_limit_facts(job.spool))


def _host_names(job: _Job, environ: dict[str, str]) -> list[str]:
    """This host's names, as the job's pe_hostfile may spell them."""
    names = [os.uname().nodename, (job.spool or {}).get("host", ""),
             environ.get("HOSTNAME", "")]
    return [name for name in names if name]


def _cpus_known(job: _Job, environ: dict[str, str]) -> dict[str, tuple]:
    """This host's slots of the job as root's epilog reads them (the pe_hostfile execd
    wrote, else ``NSLOTS``): root's word, for a record whose jobfeatures/ the job's user
    completed; none where they cannot be told (the prolog warned of it)."""
    pe_text, pe_path = job.pe_hostfile(environ)
    try:
        return {"allocated_cpu": gridengine.cpus_on_host(environ, pe_text,
                                                         _host_names(job, environ), pe_path)}
    except SiteInputError:
        return {}


def _run_limits(context: HookContext, job: _Job) -> tuple[dict | None, dict | None]:
    """The job's h_rt/s_rt requests (``qstat -j``) and, if it made none, its queue
    instance's limits (``qstat -F``): Grid Engine gives a job neither."""
    options = context.config.backend[gridengine.NAME]
    qstat = gridengine.qstat_path(options)
    env = gridengine.command_env(options, dict(context.environ))
    requests = context.query(
        gridengine.NAME, "query_qstat",
        lambda _: ([qstat, "-j", context.environ.get("JOB_ID", "")], env),
        "wall_limit_secs not written", lambda output, _: gridengine.parse_resource_list(output))
    if not gridengine.needs_queue_limits(requests):
        return requests, None
    instance = gridengine.queue_instance(context.environ, job.spool or {})
    if instance is None:
        return requests, None
    return requests, context.query(
        gridengine.NAME, None, lambda _: ([qstat, "-F", "h_rt,s_rt", "-q", instance], env),
        "the queue's run-time limit is not known: wall_limit_secs not written",
        lambda output, _: gridengine.parse_queue_limits(output))
