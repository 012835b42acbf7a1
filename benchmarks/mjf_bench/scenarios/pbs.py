"""PBS: ``mjf-pbs`` begin, launch and end with the job's attributes on stdin as PBS's hook
adapter handed them over in a real job; and each whole event as a mom runs it.

A mom runs every hook event as ``pbs_python --hook -i INPUT -o OUTPUT -L LOGDIR -e MASK
HOOKFILE`` (OpenPBS ``src/resmom/mom_hook_func.c``): ``pbs_python`` embeds Python, starts
it without ``site``, ignoring the environment and optimized twice (``-SEOO``:
``src/lib/Libpython/pbs_python_external.c``), loads PBS's own ``pbs`` module with the
event built from INPUT (lines the mom writes: ``pbs.event().job.NAME=VALUE``), compiles
HOOKFILE from source and runs it. The rows start it just so, outside a mom (which it
needs not), with an input file in the mom's format holding the recorded job (2 CPUs,
300 MB, 10 minutes). Their floor is the same start running an empty hook file: what any
Python hook on an event costs at least. The hook file runs mjf-pbs's code in that
interpreter; execjob_begin once more with the hook's fallback, ``mjf-pbs`` started; and
with records kept begin and the end writing the job's record (those as commands)."""

from __future__ import annotations

import os
import pwd
import subprocess

from .. import CHECKOUT, FIXTURES
from ..bench import Bench
from ..measure import NOT_INSTALLED, PYTHON_FLOOR, Command
from ..scenario import RecordsKept, Scenario

PBS_PYTHON = "/opt/pbs/bin/pbs_python"  # PBS's hook interpreter, where OpenPBS is built
PBS_PYTHON_LABEL = ("`pbs_python --hook` running an empty hook file (PBS's own hook "
                    "interpreter, as a mom starts it)")
# The whole events' floor: what any Python hook on an event costs at least.
PBS_PYTHON_FLOOR = "pbs_python floor"
ROLES = ("begin", "launch", "end")
JOB_ID = "5200.vm"  # the whole events' job
# The mom's constants for the events (pbs.EXECJOB_*), as its input file names them.
EVENT_NAMES = {"begin": "execjob_begin", "launch": "execjob_launch", "end": "execjob_end"}


def hook_input(bench: Bench, role: str, job_id: str) -> str:
    """The job's attributes as PBS's hook adapter handed them to ``mjf-pbs ROLE`` in a real
    job (2 CPUs, 300 MB, 10 minutes), for job ``job_id`` of this machine's user; the path
    of a file holding them."""
    with open(os.path.join(FIXTURES, "pbs-23.06", "hook-input", f"{role}-a.txt")) as handle:
        text = handle.read().replace("id=20.vm\n", f"id={job_id}\n").replace(
            "euser=pbsuser1\n", f"euser={user()}\n")
    return bench.file(f"pbs-{role}-{job_id}.txt", text)


def mom_input(bench: Bench, role: str) -> str:
    """The input file a mom writes for ``pbs_python --hook`` on event ``role`` of job
    JOB_ID (as the recorded job's: fixtures/pbs-23.06/hook-*-job-a.txt), this machine's
    user's; at launch, with the variables execjob_begin put into the job's environment.
    Its path."""
    job, name = "pbs.event().job", user()
    variables = ("PBS_O_HOME=/home/pbsuser1,PBS_O_LANG=C.UTF-8,PBS_O_LOGNAME=pbsuser1,"
                 "PBS_O_PATH=/usr/bin:/bin,PBS_O_SHELL=/bin/bash,PBS_O_WORKDIR=/home/pbsuser1,"
                 "PBS_O_SYSTEM=Linux,PBS_O_QUEUE=workq,PBS_O_HOST=localhost")
    lines = [f"{job}.id={JOB_ID}", f"{job}.Job_Name=a", f"{job}.Job_Owner={name}@localhost",
             f"{job}.euser={name}", f"{job}.egroup={name}", f"{job}.queue=workq",
             f"{job}.exec_host2=vm:15002/0*2", f"{job}.exec_vnode=(vm:ncpus=2:mem=307200kb)",
             f"{job}.Resource_List[mem]=300mb", f"{job}.Resource_List[walltime]=00:10:00",
             f"{job}.Resource_List[ncpus]=2", f"{job}.Resource_List[place]=free",
             f"{job}.Variable_List={variables}",
             f"{job}.Output_Path=localhost:/home/pbsuser1/a.o5200",
             f"{job}.Error_Path=localhost:/home/pbsuser1/a.e5200",
             f"{job}.run_count=1", f"{job}._stdout_file=", f"{job}._stderr_file=",
             'pbs.event().vnode_list["vm"].resources_available[ncpus]=2',
             'pbs.event().vnode_list["vm"].resources_available[mem]=24684096kb',
             'pbs.event().vnode_list["vm"].resources_assigned[ncpus]=2',
             'pbs.event().vnode_list["vm"].resources_assigned[mem]=307200kb']
    if role == "end":
        lines += [f"{job}.resources_used[cput]=00:00:03", f"{job}.resources_used[mem]=20480kb",
                  f"{job}.resources_used[walltime]=00:00:05",
                  f"{job}.resources_used[ncpus]=2"]
    if role == "launch":
        lines += ['pbs.event().progname=/bin/bash',
                  f'pbs.event().env="""{variables},MACHINEFEATURES={bench.base}/machinefeatures,'
                  f'JOBFEATURES={bench.base}/jobs/{JOB_ID}/jobfeatures"""']
    lines += ["pbs.get_local_nodename()=vm", f"pbs.event().type={EVENT_NAMES[role]}",
              "pbs.event().hook_name=mjf", "pbs.event().hook_type=site",
              "pbs.event().requestor=pbs_mom", "pbs.event().requestor_host=vm",
              "pbs.event().user=pbsadmin", "pbs.event().alarm=30"]
    return bench.file(f"pbs-mom-{role}.in", "".join(line + "\n" for line in lines))


def _read(path: str) -> str:
    with open(path, errors="replace") as handle:
        return handle.read()


def user() -> str:
    return pwd.getpwuid(os.getuid()).pw_name


def mjf_pbs(bench: Bench, config: str, job_id: str, labels: dict[str, str]) -> list[Command]:
    """``mjf-pbs ROLE`` for each role ``labels`` names a row for, on the recorded input
    for ``job_id``."""
    return [Command(label, [bench.bin("mjf-pbs"), role], PYTHON_FLOOR, bench.env_for(config),
                    stdin=hook_input(bench, role, job_id)) for role, label in labels.items()]


class Pbs(Scenario):
    def __init__(self, bench: Bench) -> None:
        super().__init__(bench)
        missing = None if os.access(PBS_PYTHON, os.X_OK) else NOT_INSTALLED
        # pbs_python will not start without a pbs.conf: one of its own, no complex needed.
        # A mom's environment: PBS_HOME/pbs_environment's PATH, and its pbs.conf.
        pbs_exec = os.path.dirname(os.path.dirname(PBS_PYTHON))
        pbs_conf = bench.file("pbs.conf", f"PBS_EXEC={pbs_exec}\nPBS_HOME=/var/spool/pbs\n"
                              "PBS_SERVER=localhost\n")
        self.env = {"PATH": "/bin:/usr/bin", "PBS_CONF_FILE": pbs_conf}
        self.logs = os.path.join(bench.work, "pbs-logs")  # pbs_python's log, as the mom's
        os.mkdir(self.logs)
        # The hook file as install-hook makes it; mjf-pbs reads the site config named here,
        # as the hook passes no environment.
        with open(os.path.join(CHECKOUT, "contrib", "pbs", "mjf_hook.py")) as handle:
            source = handle.read().replace(
                '"LC_ALL": "C"}', f'"LC_ALL": "C", "MJF_CONFIG": {bench.config!r}}}')
        # Where install-hook finds the venv's package, and for which Python. The in-process
        # hook's MJF_PBS does not exist: an event that started it would say so (prepare).
        self.site, python = self._recorded(bench) if missing is None else ("", "")
        in_process = bench.file("mjf_hook.py", source.replace(
            "@MJF_PBS@", bench.bin("mjf-pbs") + ".never-started").replace(
            "@MJF_SITE@", self.site).replace("@MJF_PYTHON@", python))
        started = bench.file("mjf_hook_started.py", source.replace(
            "@MJF_PBS@", bench.bin("mjf-pbs")).replace("@MJF_SITE@", "").replace(
            "@MJF_PYTHON@", ""))
        empty = bench.file("empty_hook.py", "")
        self.events = self._argv(bench, "begin", in_process)
        # PBS runs each hook event in a fresh pbs_python, which runs these.
        self.commands = [
            Command(PBS_PYTHON_LABEL, self._argv(bench, "begin", empty), PBS_PYTHON_FLOOR,
                    self.env, is_floor=True, missing=missing),
            *mjf_pbs(bench, bench.config, "5000.vm",
                     {role: f"`mjf-pbs {role}` (execjob_{role})" for role in ROLES}),
            *[self._event(bench, role, in_process, missing) for role in ROLES],
        ]
        # The fallback's begin before the end, which removes the job's directory.
        self.commands.insert(-1, Command(
            "whole execjob_begin event, the hook's fallback: `pbs_python --hook mjf_hook.py` "
            "starting `mjf-pbs`", self._argv(bench, "begin", started), PBS_PYTHON_FLOOR,
            self.env, missing=missing))

    def _argv(self, bench: Bench, role: str, hook: str) -> list[str]:
        """A mom's start of ``hook`` on event ``role`` (src/resmom/mom_hook_func.c)."""
        return [PBS_PYTHON, "--hook", "-i", mom_input(bench, role), "-o",
                os.path.join(bench.work, f"pbs-mom-{role}.out"), "-L", self.logs, "-e", "511",
                hook]

    def _event(self, bench: Bench, role: str, hook: str, missing: str | None) -> Command:
        what = "begin's variables there: nothing run" if role == "launch" else \
            "running mjf-pbs's code in `pbs_python`"
        return Command(f"whole execjob_{role} event: `pbs_python --hook mjf_hook.py` as a mom "
                       f"starts it, {what}", self._argv(bench, role, hook), PBS_PYTHON_FLOOR,
                       self.env, missing=missing)

    @staticmethod
    def _recorded(bench: Bench) -> tuple[str, str]:
        """The venv's package directory and Python major.minor, as install-hook finds
        them."""
        found = subprocess.run(
            [bench.python, "-I", "-c", "import os, sys, mjf_hooks.hooks.pbs as command\n"
             "print(f'{sys.version_info[0]}.{sys.version_info[1]}', os.path.dirname("
             "os.path.dirname(os.path.dirname(os.path.realpath(command.__file__)))))"],
            capture_output=True, text=True, check=True, cwd="/").stdout.split(" ", 1)
        return found[1].strip(), found[0]

    def prepare(self) -> None:
        """One execjob_begin of the in-process rows: it must not have started mjf-pbs,
        which the hook file could not (it would log why), nor found the site untrusted;
        its Variable_List must hold the job's variables."""
        if self.commands[0].missing:
            return
        ran = subprocess.run(self.events, env=self.env, capture_output=True, text=True)
        logged = "".join(_read(os.path.join(self.logs, name)) for name in os.listdir(self.logs))
        output = _read(self.events[self.events.index("-o") + 1])
        if ran.returncode != 0 or "mjf: " in logged or "JOBFEATURES=" not in output or \
                not os.path.isdir(os.path.join(self.bench.base, "jobs", JOB_ID)):
            raise SystemExit(f"the PBS hook did not run mjf-pbs's code from {self.site}: "
                             f"{ran.stderr.strip()[:300]} {logged.strip()[-500:]}")


class PbsRecords(RecordsKept):
    job = "5100.vm"

    def __init__(self, bench: Bench) -> None:
        super().__init__(bench)
        self.commands = mjf_pbs(bench, bench.records_config, self.job, {
            "begin": "`mjf-pbs begin`, records kept",
            "end": "`mjf-pbs end`, writing the job's record"})
