"""``mjf-pbs``: OpenPBS / PBS Professional execjob hooks, and classic prologue/epilogue.

PBS's own Python hooks run in PBS's embedded interpreter, which does not see our
install: the hook file (``contrib/pbs/mjf_hook.py``, imported by
``contrib/pbs/install-hook``) is a thin adapter that hands the job's attributes as
``name=value`` lines to these roles and reads what they print. It calls ``run`` right
there where that interpreter can import this package (the same Python, from a directory
only root can change), else it starts this command with the lines on stdin:

* ``begin`` (execjob_begin: root, before the job, on each of its moms): writes the
  job's directory from its attributes (``exec_vnode`` for this mom's share) and
  the memory limit of its pbs_cgroups cgroup where there is one; prints the job's
  variables as ``NAME=value`` lines, which the adapter puts into its Variable_List.
* ``launch`` (execjob_launch: root, just before the job's shell starts), which the
  adapter runs only where begin set no variables: prints them if the job's directory
  exists. A job without one gets none; with ``on_error = fail`` that is a failure
  (exit 1), and the adapter then rejects the launch: the job ends without running,
  is neither requeued nor held, and the node stays up.
* ``end`` (execjob_end: root): writes the job's record (where the site keeps
  records; ``resources_used`` is what PBS measured), removes the directory.

Classic ``mom_priv/prologue``/``epilogue`` scripts (Torque; OpenPBS without hooks)
run as root with the job in argv: ``prologue`` and ``epilogue`` take that argv.
Such a prologue cannot set the job's environment: ``profile`` (the job's user,
``PBS_JOBID`` set) prints ``export`` lines for ``/etc/profile.d/mjf.sh``.

Every role exits 0 whatever happens (a failing execjob_begin makes PBS requeue the
job 21 times and then hold it; a failing prologue requeues or aborts it); with
``on_error = fail`` 1, which the adapter acts on only in ``launch``.
"""

from __future__ import annotations

import io
import os
import sys
import time

from .. import lifecycle
from ..batch import pbs
from ..errors import SiteInputError
from ..exports import exports
from ..probe import read_text
from ..store_locations import store_for
from . import starter
from .frame import COMMON_HELP, HookContext, export_lines, run_roles

# Type names only: importing collections.abc at run time costs every job start ~2 ms.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

USAGE = """\
usage: mjf-pbs [options] begin | launch | end          (attributes on stdin)
       mjf-pbs [options] prologue JOBID USER GROUP [JOBNAME RESOURCES QUEUE ACCOUNT]
       mjf-pbs [options] epilogue JOBID USER GROUP [JOBNAME SESSION RESOURCES USED ...]
       mjf-pbs [options] profile                        (in the job: PBS_JOBID)

PBS execjob hooks (through contrib/pbs/mjf_hook.py), classic prologue and epilogue,
and the profile.d export lines, for Machine/Job Features.

""" + COMMON_HELP

# The job's attributes on stdin: a job's few dozen lines, with room to spare.
MAX_ATTRIBUTE_BYTES = 1 << 20
# The variables a launch prints, the only ones the adapter sets in the job's environment.
EXPORTED = ("MACHINEFEATURES", "JOBFEATURES", "JOBSTATUS")


def main(argv: list[str] | None = None) -> int:
    status, out, err = run(sys.argv[1:] if argv is None else argv)
    sys.stdout.write(out)
    sys.stdout.flush()
    sys.stderr.write(err)
    return status


def run(argv: list[str], stdin: str | None = None) -> tuple[int, str, str]:
    """``mjf-pbs ARGV`` -> (its exit status, what it printed, what it logged on stderr),
    ``stdin`` (None: this process's) being the job's attribute lines of begin, launch and
    end. The command runs this, and so does the hook file inside PBS's own interpreter
    (contrib/pbs/mjf_hook.py), which keeps both outputs for the mom's log and the job."""

    def reading(role: Callable[[HookContext, dict[str, str]], int]) -> Callable:
        return lambda context, args: role(context, _attributes(context, stdin))

    roles = {name: reading(role) if name in EVENT_ROLES else role
             for name, role in ROLES.items()}
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err = io.StringIO(), io.StringIO()
    try:
        status = run_roles("mjf-pbs", argv, roles, USAGE,
                           with_arguments=("prologue", "epilogue"), positional_stop=True)
    except SystemExit as exiting:  # on_error = fail
        status = exiting.code if isinstance(exiting.code, int) else 1
    finally:
        sys.stdout, sys.stderr = saved
    return status, out.getvalue(), err.getvalue()


def _attributes(context: HookContext, stdin: str | None) -> dict[str, str]:
    """The job's attributes as the hook file hands them over (``stdin``, else read from
    stdin); their ``id`` checked to be a PBS job id."""
    data = sys.stdin.buffer.read(MAX_ATTRIBUTE_BYTES + 1) if stdin is None else \
        stdin.encode("utf-8", "replace")
    if len(data) > MAX_ATTRIBUTE_BYTES:
        raise SiteInputError(f"the job's attributes on stdin are larger than "
                             f"{MAX_ATTRIBUTE_BYTES} bytes")
    attributes = pbs.parse_attribute_lines(data.decode("utf-8", "replace"))
    _name_job(context, attributes)
    return attributes


def _name_job(context: HookContext, attributes: dict[str, str]) -> str:
    job = pbs.checked_job_id(attributes.get("id", ""), "the job's id attribute")
    context.log.context += f" job {job}"
    return job


def begin(context: HookContext, attributes: dict[str, str]) -> int:
    """Write the job's directory; print its variables (the adapter puts them into the
    job's Variable_List, so its launch need not run this command again)."""
    _print_variables(context, set_up(context, attributes))
    return 0


def _print_variables(context: HookContext, job_dir: str) -> None:
    store = store_for(context.config)
    variables = exports(context.config, store.machine_dir, job_dir)
    sys.stdout.write("".join(f"{name}={value}\n" for name, value in variables.items()))


def launch(context: HookContext, attributes: dict[str, str]) -> int:
    """Print the variables for the job's environment, if its directory exists."""
    config = context.config
    job = attributes["id"]
    store = store_for(config)
    job_dir = store.job_features_dir(job)
    if not os.path.isdir(job_dir):
        raise SiteInputError(f"{job_dir} does not exist (did execjob_begin run?): "
                             "the job gets no MJF variables")
    _print_variables(context, job_dir)
    return 0


def end(context: HookContext, attributes: dict[str, str]) -> int:
    finish(context, attributes)
    return 0


def prologue(context: HookContext, args: list[str]) -> int:
    attributes = pbs.prologue_attributes(args)
    job = _name_job(context, attributes)
    if not any(name.startswith(pbs.RESOURCE_LIST) for name in attributes):
        # OpenPBS passes only id, user and group: the rest is the server's.
        attributes = {**_qstat(context, job), **attributes}
    set_up(context, attributes)
    return 0


def epilogue(context: HookContext, args: list[str]) -> int:
    attributes = pbs.epilogue_attributes(args)
    _name_job(context, attributes)
    finish(context, attributes)
    return 0


def profile(context: HookContext, args: list[str]) -> int:
    """``export`` lines for a login shell of the job (``/etc/profile.d/mjf.sh``)."""
    config = context.config
    job = pbs.job_id(context.environ)
    store = store_for(config)
    job_dir = store.job_features_dir(job)
    if os.path.isdir(job_dir):
        variables = exports(config, store.machine_dir, job_dir)
        sys.stdout.write(export_lines(variables))
    return 0


ROLES = {"begin": begin, "launch": launch, "end": end, "prologue": prologue,
         "epilogue": epilogue, "profile": profile}
# The hook's events: these roles take the job's attributes (``run``'s stdin), not argv.
EVENT_ROLES = ("begin", "launch", "end")


def set_up(context: HookContext, attributes: dict[str, str]) -> str:
    """Write the job's directory from its attributes, their ``id`` checked (root, before
    the job); return its jobfeatures path."""
    config, log = context.config, context.log
    options = config.backend[pbs.NAME]
    job = attributes["id"]
    own = [pbs.mom_node(attributes, pbs.node_name(options))]
    given = pbs.JobInput(attributes, own, cgroup_memory=_cgroup_memory(options, job))
    facts, warnings = pbs.job_facts(given, int(time.time()))
    for warning in warnings:
        log.warning(warning)
    store = store_for(config)
    machine = lifecycle.machine_features(config, store, log, context.dry_run)
    uid, gid = starter.job_user(attributes, ("euser",))
    tmpdir = pbs.scratch_dir(options.get("tmpdir") or pbs.DEFAULT_TMPDIR, job)
    start = lifecycle.JobStart(pbs.NAME, facts, cgroup_pid=None,
                               scratch_dir=tmpdir if os.path.isdir(tmpdir)
                               else os.path.dirname(tmpdir),
                               gid=gid, job_uid=uid)
    return lifecycle.start_job(config, store, log, machine, start, context.dry_run)


def finish(context: HookContext, attributes: dict[str, str]) -> None:
    """Write the job's record (where records are kept) and remove its directory."""
    config = context.config
    ending = None
    if config.records_dir:
        delivered, warnings = pbs.ending_facts(attributes, int(time.time()))
        for warning in warnings:
            context.log.warning(warning)
        node = pbs.mom_node(attributes, pbs.node_name(config.backend[pbs.NAME]))
        ending = lifecycle.JobEnd(pbs.NAME, delivered, user=attributes.get("euser") or None,
                                  queue=attributes.get("queue") or None, node=node,
                                  share=_node_share(context, attributes, node))
    lifecycle.end_job(config, store_for(config), context.log, attributes["id"],
                      dry_run=context.dry_run, ending=ending)


def _node_share(context: HookContext, attributes: dict[str, str],
                node: str) -> tuple[int, int] | None:
    """Which of the job's nodes this mom is, for its record (each mom of a job writes
    the record of its own share); None, with one warning line, where ``exec_vnode`` does
    not say, and None without one where there is none (a classic epilogue's argv)."""
    exec_vnode = attributes.get("exec_vnode", "")
    if not exec_vnode:
        return None
    try:
        return pbs.node_share(exec_vnode, [node])
    except ValueError as error:
        context.log.warning(f"its record does not say which of the job's nodes this is: "
                            f"{error}")
        return None


def _cgroup_memory(options: dict[str, str], job: str) -> tuple | None:
    """The memory limit pbs_cgroups set on the job's cgroup, if it made one (it runs
    before our hook in execjob_begin: install-hook orders ours after it)."""
    from ..probe import cgroup

    mountinfo = read_text("/proc/self/mountinfo")
    if not mountinfo:
        return None
    paths = pbs.cgroup_paths(options.get("cgroup_prefix") or pbs.DEFAULT_CGROUP_PREFIX, job)
    mounts = cgroup.cgroup_mounts_of(mountinfo)
    directory = cgroup.cgroup_dir("memory", paths, mounts) or cgroup.cgroup_dir("", paths, mounts)
    if directory is None or not os.path.isdir(directory[0]):
        return None
    limits = cgroup.limits_from(paths, mounts)
    if limits is None or limits.memory_bytes is None:
        return None
    return limits.memory_bytes, f"the job's cgroup {limits.path} (pbs_cgroups)"


def _qstat(context: HookContext, job: str) -> dict[str, str]:
    """``qstat -f JOBID``'s attributes, unless ``[pbs] query_qstat = no``; {} on failure."""
    def command(options: dict[str, str]) -> tuple[list[str], dict[str, str]]:
        qstat = options.get("qstat") or pbs.command_path(options, "qstat")
        return [qstat, "-f", job], pbs.command_env()

    def attributes(output: str, argv: list[str]) -> dict[str, str]:
        found = pbs.parse_qstat_f(output)
        if found.get("id") != job:
            raise ValueError(f"{argv[0]} -f {job} printed no such job: {output[:80]!r}")
        return found

    return context.query(pbs.NAME, "query_qstat", command,
                         "only what the prologue's argv says is written", attributes) or {}
