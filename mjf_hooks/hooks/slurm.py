"""``mjf-slurm``: the Slurm Prolog, Epilog and TaskProlog.

Configured as ``Prolog=``, ``Epilog=`` (and, for manual use, ``TaskProlog=``)
in slurm.conf, it dispatches on ``SLURM_SCRIPT_CONTEXT``; ``mjf-slurm
prolog|epilog|taskprolog`` picks the role by hand, e.g. with ``--env-file``
to replay a recorded job start.

* Prolog (root, once per job and node): writes machine features if needed and
  the job's directory. Values it cannot know yet (the job's cgroup does not
  exist when it runs) are marked pending - unless it runs inside the job's
  cgroup (``PrologFlags=RunInJob``), where it sees them itself.
* TaskProlog (job user, before every task): prints ``export`` lines for
  Slurm; the first task of a pending job completes the values from inside the
  job's cgroup. Sites configure the pure-sh ``mjf-slurm-taskprolog``, which
  calls this only while the job is pending. For it, the Prolog also keeps what
  that script would read of the default config (``/etc/mjf/mjf.conf``) in
  ``/run/mjf-hooks/slurm-taskprolog.<node>.sh``, so that it need not read the
  config a byte at a time before every task (see :func:`keep_taskprolog_settings`).
* TaskEpilog (job user, after every task, in the job's cgroup), where records are
  kept: reports what the job used so far - its cgroup's counters - for the Epilog.
* Epilog (root): writes the job's record (where the site keeps records), removes
  the job's directory.
"""

from __future__ import annotations

import os
import sys
import time

from .. import lifecycle
from ..batch import slurm
from ..config import DEFAULT_PATH, Config
from ..errors import SiteInputError
from ..log import Log
from ..probe import read_text
from ..spec import digits_value
from ..store import job_dir_name
from ..store_locations import store_for
from .frame import COMMON_HELP, HookContext, run_roles, shell_quoted

USAGE = """\
usage: mjf-slurm [options] [prolog|epilog|taskprolog|taskepilog]

Slurm Prolog / Epilog / TaskProlog / TaskEpilog for Machine/Job Features. Without a
role it follows SLURM_SCRIPT_CONTEXT (prolog_slurmd, epilog_slurmd, prolog_task,
epilog_task).

""" + COMMON_HELP

_CONTEXT_ROLES = {"prolog_slurmd": "prolog", "epilog_slurmd": "epilog",
                  "prolog_task": "taskprolog", "epilog_task": "taskepilog"}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "epilog" in argv or (os.environ.get("SLURM_SCRIPT_CONTEXT") == "epilog_slurmd"
                            and not set(argv) & {"prolog", "taskprolog", "taskepilog"}):
        _shield_epilog()
    return run_roles("mjf-slurm", argv, ROLES, USAGE, role_of=_role,
                     job=lambda environ: environ.get("SLURM_JOB_ID", "?"))


def _shield_epilog() -> None:
    """The Epilog ignores SIGTERM, from its first statement to its exit.

    With ``PrologFlags=RunInJob`` Slurm runs the Epilog in the job's extern step, and on
    cgroup v2 in that step's cgroup: the SIGTERM Slurm sends (and sends again) to the
    step's processes while the job ends reaches the Epilog too. Killed before its rename,
    the Epilog would leave the job's directory in sight, and a killed Epilog fails
    (Slurm drains the node). The Epilog is short and bounded (a rename, a record, a
    removal within its budget), so it finishes instead. Ignored, not blocked: a blocked
    SIGTERM would still kill it once unblocked. Nothing else is given up: Slurm's
    PrologEpilogTimeout ends a hung Epilog with SIGKILL, and from the rename on any kill
    leaves only hidden trash, which `mjf sync` removes (docs/slurm.md).
    """
    from ..signals import signal

    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _as_root(log: Log, environ: dict[str, str]) -> bool:
    """The Prolog and Epilog act as root, even where slurmstepd started them with its job
    user's effective ids; False where they cannot: started with all the job user's uids.

    slurmstepd switches the whole process to the job's user for a moment in one thread
    while another may fork a hook: with ``PrologFlags=RunInJob`` the job's extern step
    (Slurm 24.11) ends by shutting X11 forwarding down so, for every job, as it forks the
    Epilog (between ``x11 forwarding shutdown in progress`` and ``complete`` in slurmd's
    log). The hook then starts with root's real uid but the user's effective and saved
    uid, gid and groups: denied the rename in root's ``jobs/``, it left the job's
    directory. A real uid of root is slurmd's intent, and taking root's ids back needs no
    privilege (0 is the real uid): done first, before anything is touched, and the saved
    uid too, which would let the job's user signal the hook.
    """
    uids, gids = os.getresuid(), os.getresgid()
    if uids[0] != 0:
        if set(uids) != {digits_value(environ.get("SLURM_JOB_UID", ""))}:
            return True  # not Slurm's doing: a user's own run (a replay, a private base_dir)
        # All its uids the job user's: slurmstepd forked it from a thread switched wholly
        # to that user. Nothing unprivileged takes root back; the job's directory waits
        # for root's next hook on this node (or `mjf sync`), which sees its runner ended.
        log.warning(f"started as uid {uids[0]}, not root (slurmstepd forked it while "
                    "switched to the job's user): the job's directory is left to the next "
                    "Prolog or Epilog on this node, or `mjf sync`")
        return False
    if uids[1:] == (0, 0) and gids[1:] == (gids[0],) * 2:
        return True
    started = (f"started with root's real uid but effective uid {uids[1]}, gid {gids[1]} "
               "(slurmstepd forked it while switched to the job's user)")
    try:
        os.setresuid(0, 0, 0)
        os.setresgid(gids[0], gids[0], gids[0])
        os.setgroups([])  # the job's; slurmstepd's root has none
    except OSError as error:
        log.warning(f"{started}: cannot act as root again: {error.strerror}")
        return False
    log.warning(f"{started}: acting as root again")
    return True


def _extern_step() -> str | None:
    """In the job, the Prolog's slurmstepd is the job's extern step, which lives as long as
    the job here: its identity, recorded as the job's runner, whose end proves the job
    over on this node alone (None where no slurmstepd is found above the hook)."""
    from ..probe import process  # with RunInJob only

    stepd = process.ancestor_named("slurmstepd")
    return process.identity(stepd) if stepd is not None else None


def _role(context: HookContext) -> tuple[str, list[str]]:
    """The role named, or else the one SLURM_SCRIPT_CONTEXT says (none takes arguments)."""
    role = context.args[0] if context.args else \
        _CONTEXT_ROLES.get(context.environ.get("SLURM_SCRIPT_CONTEXT", ""))
    if role not in ROLES or len(context.args) > 1:
        raise SiteInputError(
            f"cannot tell the role: arguments {context.args!r}, SLURM_SCRIPT_CONTEXT="
            f"{context.environ.get('SLURM_SCRIPT_CONTEXT')!r}; give prolog, epilog, "
            "taskprolog or taskepilog"
        )
    return role, []


def prolog(context: HookContext, args: list[str]) -> int:
    config, environ, log = context.config, context.environ, context.log
    if not context.dry_run and not _as_root(log, environ):
        return 0
    job_id = slurm.job_id(environ)
    store = store_for(config)
    machine = lifecycle.machine_features(config, store, log, context.dry_run)
    job = partition = None
    if slurm.needs_scontrol(environ):
        job = _scontrol(context, ["show", "job", "-o", job_id])
        if job is not None and job.get("TimeLimit") == "Partition_Limit":
            partition = _scontrol(context, ["show", "partition", "-o",
                                            environ.get("SLURM_JOB_PARTITION", "")])
    facts, warnings = slurm.job_facts(slurm.JobInput(environ, job, partition), int(time.time()))
    for warning in warnings:
        log.warning(warning)
    settings = _slurm_settings(environ)
    # With PrologFlags=RunInJob the Prolog runs in the job's cgroup and sees its limits
    # itself: the values are final at once, and the directory stays root's. Otherwise
    # the job's cgroup does not exist yet.
    in_job = slurm.in_job_cgroup(read_text("/proc/self/cgroup") or "", job_id)
    pending = not in_job and slurm.completion_needed(facts, settings)
    # The job's uid only where something becomes its user's: a pending jobfeatures/, a
    # jobstatus/, a usage/ for the TaskEpilog's report (a malformed SLURM_JOB_UID fails
    # nothing else).
    uid, gid = slurm.job_owner(environ, uid_needed=pending or config.jobstatus
                               or bool(config.records_dir))
    job = lifecycle.JobStart(
        slurm.NAME, facts, cgroup_pid="self" if in_job else None,
        runner=_extern_step() if in_job else None,
        scratch_dir=config.backend[slurm.NAME].get("scratch_dir") or settings.get("tmpfs", "/tmp"),
        gid=gid, features_owner=uid if pending else None, pending=pending, job_uid=uid,
        reports_usage=uid is not None)
    lifecycle.start_job(config, store, log, machine, job, context.dry_run)
    if context.dry_run:
        return 0
    # Not context.fail_safe: with on_error = fail that would fail the job, and the
    # TaskProlog does without (it reads the config itself).
    try:
        keep_taskprolog_settings(config, environ.get("SLURMD_NODENAME", ""))
    except Exception as error:  # noqa: BLE001 - the job does not depend on it
        log.warning(f"the sh TaskProlog's settings were not kept in "
                    f"{TASKPROLOG_SETTINGS_DIR} ({error}): it reads {config.path} "
                    "before every task")
    if job.runner:
        context.fail_safe(lifecycle.end_jobs_left_behind, config, store, log,
                          _job_end({}, None, None))
    return 0


# Where the Prolog keeps the sh TaskProlog's settings: a directory only root can make
# (in /run) or write, so the job's user may source what is there.
TASKPROLOG_SETTINGS_DIR = "/run/mjf-hooks"


def taskprolog_settings_name(node: str) -> str | None:
    """The kept file of slurmd node ``node`` (``$SLURMD_NODENAME``): one per node, as
    several slurmds of one host (each its own config) share its /run. None for a name
    that is not one file's (empty, or with a ``/`` or NUL): nothing kept then."""
    if not node or "/" in node or "\0" in node or len(node) > 200:
        return None
    return f"slurm-taskprolog.{node}.sh"


def keep_taskprolog_settings(config: Config, node: str,
                             run_dir: str = TASKPROLOG_SETTINGS_DIR,
                             default_config: str = DEFAULT_PATH) -> None:
    """Keep what bin/mjf-slurm-taskprolog reads of the config - base_dir, export and
    url_base, as sh assignments - in ``run_dir``, with the newest mtime of the config,
    its drop-in directory and its drop-ins, for the TaskProlog of slurmd node ``node``.

    The TaskProlog runs before every task and, in POSIX sh, reads its config a byte per
    system call; it sources this instead wherever the config is not newer - also where
    the job's user may not read the config, or there is none (every default, and the
    file then has the time it was written). Only for the default config: a Prolog given
    another (``$MJF_CONFIG``, ``--config``) keeps nothing, as the TaskProlog reads its
    own config then. Rewritten only when the values or the config's mtime changed, so a
    Prolog usually only reads it. (``run_dir`` and ``default_config``: the script's two
    paths, for a test's copy of it.)"""
    name = taskprolog_settings_name(node)
    if config.path != default_config or name is None:
        return
    config_mtime = _newest_mtime((config.path, f"{config.path}.d", *config.drop_ins))
    text = "".join(f"{key}={shell_quoted(value)}\n" for key, value in (
        ("base_dir", config.base_dir), ("export_as", config.export),
        ("url_base", config.url_base or "")))
    parent, directory = os.path.split(run_dir)
    from ..safefs import Dir

    try:
        run = Dir(os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC), parent)
    except FileNotFoundError:
        return  # no /run (a container's root): the TaskProlog reads the config itself
    with run, run.subdir(directory, 0o755, None, create=True) as kept:
        if os.fstat(kept.fd).st_mode & 0o777 != 0o755:  # made under a narrower umask
            os.fchmod(kept.fd, 0o755)
        if kept.read_bytes(name, len(text) + 1) == text.encode() and (
                config_mtime is None or config_mtime == os.stat(
                    name, dir_fd=kept.fd, follow_symlinks=False).st_mtime_ns):
            return
        kept.replace(name, text, 0o644)
        if config_mtime is not None:
            os.utime(name, ns=(config_mtime, config_mtime), dir_fd=kept.fd,
                     follow_symlinks=False)


def _newest_mtime(paths: tuple[str, ...]) -> int | None:
    """The newest mtime of those of ``paths`` that exist (None: none does): what the
    TaskProlog compares its kept file with, the config, its drop-in directory and each
    drop-in."""
    newest = None
    for path in paths:
        try:
            mtime = os.stat(path).st_mtime_ns
        except (FileNotFoundError, NotADirectoryError):
            continue
        newest = mtime if newest is None else max(newest, mtime)
    return newest


def epilog(context: HookContext, args: list[str]) -> int:
    config, environ = context.config, context.environ
    if not context.dry_run and not _as_root(context.log, environ):
        return 0
    job_id = slurm.job_id(environ)
    store = store_for(config)
    ending = None
    if config.records_dir:
        delivered, user, partition = slurm.ending(environ, time.time())
        # Each node of a job writes the record of its own share, saying which it is.
        try:
            share = slurm.node_share(environ)
        except SiteInputError as error:
            context.log.warning(f"job {job_id}: its record does not say which of its nodes "
                                f"this is: {error}")
            share = None
        ending = _job_end(delivered, user, partition, share, _cpus_known(environ))
    # A job that recorded its runner (RunInJob) says the node's jobs do: what an earlier
    # end could not remove goes with this one.
    runs_in_job = lifecycle.records_runner(store, job_dir_name(job_id))
    lifecycle.end_job(config, store, context.log, job_id, dry_run=context.dry_run, ending=ending)
    if runs_in_job and not context.dry_run:
        context.fail_safe(lifecycle.end_jobs_left_behind, config, store, context.log,
                          _job_end({}, None, None))
    return 0


def _job_end(delivered: dict, user: str | None, partition: str | None,
             share=None, requested: dict | None = None) -> lifecycle.JobEnd:
    # The job's cgroup is gone by now (Slurm removes it before the Epilog): what it used
    # is what the TaskEpilog last read there, as the job's user.
    return lifecycle.JobEnd(slurm.NAME, delivered, user=user, queue=partition, share=share,
                            usage_source=slurm.USAGE_SOURCE, requested=requested)


def _cpus_known(environ: dict[str, str]) -> dict[str, tuple]:
    """This node's CPUs of the job as the Epilog's environment gives them (root's word,
    for a record whose jobfeatures/ its user completed); none where it does not."""
    try:
        return {"allocated_cpu": slurm.cpus_on_node(environ)}
    except SiteInputError:
        return {}  # the share's warning says what is wrong with the node list


def taskepilog(context: HookContext, args: list[str]) -> int:
    """Where records are kept: report the job's cgroup counters for the Epilog."""
    if context.config.records_dir:
        job_id = slurm.job_id(context.environ)
        lifecycle.report_usage(context.config, context.log, job_id,
                               slurm.job_cgroup_level(job_id), context.dry_run)
    return 0


def taskprolog(context: HookContext, args: list[str]) -> int:
    """Print the export lines; complete a pending job's values first."""
    config, environ = context.config, context.environ
    job_id = slurm.job_id(environ)
    store = store_for(config)
    job_dir = store.job_features_dir(job_id)
    if not os.path.isdir(job_dir):
        context.log.warning(f"{job_dir} does not exist (did the Prolog run?): not exporting")
        return 0
    context.fail_safe(lifecycle.complete_if_pending, config, store, context.log, job_id,
                      slurm.task_memory_facts(environ), store, context.dry_run)
    from ..exports import export_lines, exports  # the TaskProlog's alone of the four

    sys.stdout.write(export_lines(exports(config, store.machine_dir, job_dir)))
    return 0


ROLES = {"prolog": prolog, "epilog": epilog, "taskprolog": taskprolog,
         "taskepilog": taskepilog}


def _scontrol(context: HookContext, args: list[str]) -> dict[str, str] | None:
    """One scontrol record, or None (logged) if scontrol is missing, slow or garbled."""
    # Only here: from Slurm 23.02 on, the Prolog's environment has what scontrol would say.
    def command(options: dict[str, str]) -> tuple[list[str], dict[str, str]]:
        path = slurm.command_path("scontrol", options.get("scontrol")) \
            or "/usr/bin/scontrol"  # absent: the warning says so
        return [path, *args], slurm.command_env(context.environ)

    def record(output: str, argv: list[str]) -> dict[str, str]:
        found = slurm.parse_scontrol_record(output.strip().split("\n", 1)[0])
        if not found or ("JobId" not in found and "PartitionName" not in found):
            raise ValueError(f"{' '.join(argv)} printed no record: {output[:80]!r}")
        return found

    return context.query(slurm.NAME, None, command, "values it would give are not written",
                         record)


def _slurm_settings(environ: dict[str, str]) -> dict[str, str]:
    """slurm.conf and cgroup.conf settings (lowercased names), as far as readable: slurmd
    names them (``SLURM_CONF``, which a job cannot set for the Prolog), and they are read
    as any file of the batch system's own, never waiting on a FIFO, within a size bound."""
    conf = environ.get("SLURM_CONF") or "/etc/slurm/slurm.conf"
    settings = slurm.parse_settings(_bounded_text(conf))
    settings.update(slurm.parse_settings(
        _bounded_text(os.path.join(os.path.dirname(conf), "cgroup.conf"))))
    return settings


def _bounded_text(path: str) -> str:
    from ..safefs import RefusedPath, read_bounded, text_of

    try:
        return text_of(read_bounded(path))
    except RefusedPath:
        return ""
