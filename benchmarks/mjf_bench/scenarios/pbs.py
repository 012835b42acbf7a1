"""PBS: ``mjf-pbs`` begin, launch and end with the job's attributes on stdin as PBS's hook
adapter handed them over in a real job; PBS's own hook interpreter, bare; each whole
event as PBS runs it (a fresh ``pbs_python`` running the hook file, which runs
mjf-pbs's code in that interpreter), with a stand-in ``pbs`` module, and execjob_begin
once more with the hook's fallback, ``mjf-pbs`` started; and with records kept begin and
the end writing the job's record."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess

from .. import CHECKOUT, FIXTURES
from ..bench import Bench
from ..measure import NOT_INSTALLED, PYTHON_FLOOR, Command
from ..scenario import RecordsKept, Scenario

PBS_PYTHON = "/opt/pbs/bin/pbs_python"  # PBS's hook interpreter, where OpenPBS is built
PBS_PYTHON_LABEL = "`pbs_python -c pass` (PBS's own hook interpreter, bare)"
# The whole events' floor: what any Python hook on an event costs at least.
PBS_PYTHON_FLOOR = "pbs_python floor"
ROLES = ("begin", "launch", "end")
# PBS's `pbs` module imports only inside a mom: this one plays the recorded job's events.
STAND_IN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pbs_stand_in", "pbs.py")


def hook_input(bench: Bench, role: str, job_id: str) -> str:
    """The job's attributes as PBS's hook adapter handed them to ``mjf-pbs ROLE`` in a real
    job (2 CPUs, 300 MB, 10 minutes), for job ``job_id`` of this machine's user; the path
    of a file holding them."""
    with open(os.path.join(FIXTURES, "pbs-23.06", "hook-input", f"{role}-a.txt")) as handle:
        text = handle.read().replace("id=20.vm\n", f"id={job_id}\n").replace(
            "euser=pbsuser1\n", f"euser={user()}\n")
    return bench.file(f"pbs-{role}-{job_id}.txt", text)


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
        pbs_exec = os.path.dirname(os.path.dirname(PBS_PYTHON))
        pbs_conf = bench.file("pbs.conf", f"PBS_EXEC={pbs_exec}\nPBS_HOME=/var/spool/pbs\n"
                              "PBS_SERVER=localhost\n")
        pbs_python_env = {"PATH": "/usr/bin:/bin", "PBS_CONF_FILE": pbs_conf}
        # The hook file as install-hook makes it; mjf-pbs reads the site config named here,
        # as the hook passes no environment. The stand-in is copied beside the work, so
        # that pbs_python caches its bytecode there.
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
        stand_in = os.path.join(bench.work, "fake-pbs")
        os.mkdir(stand_in)
        shutil.copy(STAND_IN, stand_in)
        event_env = {**pbs_python_env, "PYTHONPATH": stand_in, "MJF_BENCH_USER": user(),
                     "MJF_BENCH_BASE": bench.base}
        self.events = [[PBS_PYTHON, in_process], {**event_env, "MJF_BENCH_EVENT": "begin"}]
        # PBS runs each hook event in a fresh pbs_python (the adapter), which runs these.
        self.commands = [
            Command(PBS_PYTHON_LABEL, [PBS_PYTHON, "-c", "pass"], PBS_PYTHON_FLOOR,
                    pbs_python_env, is_floor=True, missing=missing),
            *mjf_pbs(bench, bench.config, "5000.vm",
                     {role: f"`mjf-pbs {role}` (execjob_{role})" for role in ROLES}),
            *[self._event(role, in_process, event_env, missing) for role in ROLES],
        ]
        # The fallback's begin before the end, which removes the job's directory.
        self.commands.insert(-1, Command(
            "whole execjob_begin event, the hook's fallback: `pbs_python mjf_hook.py` "
            "starting `mjf-pbs`", [PBS_PYTHON, started], PBS_PYTHON_FLOOR,
            {**event_env, "MJF_BENCH_EVENT": "begin"}, missing=missing))

    @staticmethod
    def _event(role: str, hook: str, event_env: dict[str, str], missing: str | None) -> Command:
        what = "begin's variables there: nothing run" if role == "launch" else \
            "running mjf-pbs's code in `pbs_python`"
        return Command(f"whole execjob_{role} event: `pbs_python mjf_hook.py` (a stand-in "
                       f"`pbs` module), {what}", [PBS_PYTHON, hook], PBS_PYTHON_FLOOR,
                       {**event_env, "MJF_BENCH_EVENT": role}, missing=missing)

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
        which the hook file could not (it would log why), nor found the site untrusted."""
        if self.commands[0].missing:
            return
        argv, env = self.events
        ran = subprocess.run(argv, env=env, capture_output=True, text=True)
        if ran.returncode != 0 or "cannot run" in ran.stderr or \
                not os.path.isdir(os.path.join(self.bench.base, "jobs", "5200.vm")):
            raise SystemExit(f"the PBS hook did not run mjf-pbs's code from {self.site}: "
                             f"{ran.stderr.strip()[:500]}")


class PbsRecords(RecordsKept):
    job = "5100.vm"

    def __init__(self, bench: Bench) -> None:
        super().__init__(bench)
        self.commands = mjf_pbs(bench, bench.records_config, self.job, {
            "begin": "`mjf-pbs begin`, records kept",
            "end": "`mjf-pbs end`, writing the job's record"})
