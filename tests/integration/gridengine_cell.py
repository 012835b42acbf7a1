"""A one-node Grid Engine cell on loopback, with the installed MJF hooks.

Used by the integration tests (as root, in CI). Debian's Son of Grid Engine 8.1.9
(gridengine-master, -exec, -client, installed with a preseeded cell by
tests/setup-system): the tests start ``sge_qmaster`` and ``sge_execd`` with a clean
environment, add a parallel environment ``mjf_smp`` and a queue ``mjf.q`` whose
prolog, epilog and starter_method are the installed hooks, and on ``stop()`` remove
both and shut down the daemons they started (by pid).
"""

from __future__ import annotations

import contextlib
import glob
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from tests.conftest import require
from tests.integration.boot_dirs import make_boot_dirs
from tests.integration.job_side import dump_script
from tests.integration.site import HOOKS_BIN, admin_mjf, mjf_site, run, seen_in
from tests.integration.site import (
    assert_no_job_directories_left as site_assert_no_job_directories_left,
)

SGE_ROOT = Path("/var/lib/gridengine")
SGE_CELL = "default"
SPOOL = Path("/var/spool/gridengine")
QUEUE, PE = "mjf.q", "mjf_smp"
ENV = {"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "SGE_ROOT": str(SGE_ROOT),
       "SGE_CELL": SGE_CELL}
SLOTS = 4


def qconf(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return run(["qconf", *args], check=check, env=ENV, cwd="/")


def _apply(kind: str, name: str, text: str, workdir: Path) -> None:
    """Add an object (``-A<kind>``), or replace it if it exists (``-M<kind>``)."""
    path = workdir / name  # qconf -Mconf takes the object's name from the file name
    path.write_text(text)
    exists = qconf(f"-s{kind}", name, check=False).returncode == 0
    qconf(f"-M{kind}" if exists else f"-A{kind}", str(path))


class GridEngineCell:
    """sge_qmaster + sge_execd for this host, with ``mjf.q`` running the hooks in ``bindir``."""

    def __init__(self, root: Path, bindir: Path) -> None:
        self.root = root
        self.bindir = bindir
        self.host = socket.gethostname().split(".")[0]
        self.pids: list[int] = []

    def start(self) -> None:
        aliases = SGE_ROOT / SGE_CELL / "common" / "host_aliases"
        # This host's name resolves back to "localhost" here: one name for both.
        aliases.write_text(f"{self.host} localhost\n")
        self._start_daemon("sge_qmaster", str(SPOOL / "qmaster" / "qmaster.pid"))
        self._wait_for(lambda: qconf("-sh", check=False).returncode == 0, "qmaster")
        qconf("-as", self.host, check=False)
        if qconf("-se", self.host, check=False).returncode != 0:
            _apply("e", self.host, f"hostname {self.host}\nload_scaling NONE\n"
                   "complex_values NONE\nuser_lists NONE\nxuser_lists NONE\nprojects NONE\n"
                   "xprojects NONE\nusage_scaling NONE\nreport_variables NONE\n", self.root)
        global_conf = qconf("-sconf", "global").stdout
        lines = [line for line in global_conf.splitlines()
                 if not line.startswith(("#", "execd_params", "load_report_time"))]
        # INHERIT_ENV=false: execd's own environment would leak into every job and hook.
        lines += ["execd_params INHERIT_ENV=false", "load_report_time 00:00:05"]
        (self.root / "global").write_text("\n".join(lines) + "\n")
        qconf("-Mconf", str(self.root / "global"))
        scheduler = qconf("-ssconf").stdout
        scheduler = "\n".join("schedule_interval 0:0:1" if line.startswith("schedule_interval")
                              else line for line in scheduler.splitlines())
        (self.root / "sched").write_text(scheduler + "\n")
        qconf("-Msconf", str(self.root / "sched"))
        _apply("p", PE, f"pe_name {PE}\nslots 999\nuser_lists NONE\nxuser_lists NONE\n"
               "start_proc_args NONE\nstop_proc_args NONE\nallocation_rule $pe_slots\n"
               "control_slaves FALSE\njob_is_first_task TRUE\nurgency_slots min\n"
               "accounting_summary FALSE\nqsort_args NONE\n", self.root)
        self.configure_queue()
        self._start_daemon("sge_execd", str(SPOOL / "execd" / "*" / "execd.pid"))
        self._wait_for(self._queue_ready, "execd")

    def configure_queue(self, prolog: bool = True) -> None:
        hooks = (f"prolog root@{self.bindir}/mjf-gridengine prolog\n"
                 f"epilog root@{self.bindir}/mjf-gridengine epilog\n") if prolog else \
            "prolog NONE\nepilog NONE\n"
        limits = "".join(f"{limit} INFINITY\n" for limit in (
            "s_rt", "h_rt", "s_cpu", "h_cpu", "s_fsize", "h_fsize", "s_data", "h_data",
            "s_stack", "h_stack", "s_core", "h_core", "s_rss", "h_rss", "s_vmem", "h_vmem"))
        _apply("q", QUEUE, f"""qname {QUEUE}
hostlist {self.host}
seq_no 0
load_thresholds NONE
suspend_thresholds NONE
nsuspend 1
suspend_interval 00:05:00
priority 0
min_cpu_interval 00:05:00
processors UNDEFINED
qtype BATCH
ckpt_list NONE
pe_list {PE}
rerun FALSE
slots {SLOTS}
tmpdir /tmp
shell /bin/sh
{hooks}shell_start_mode posix_compliant
starter_method {self.bindir}/mjf-gridengine-starter
suspend_method NONE
resume_method NONE
terminate_method NONE
notify 00:00:60
owner_list NONE
user_lists NONE
xuser_lists NONE
subordinate_list NONE
complex_values NONE
projects NONE
xprojects NONE
calendar NONE
initial_state default
{limits}""", self.root)

    def _start_daemon(self, name: str, pidfiles: str) -> None:
        """Start a daemon unless one runs (then it is not ours: left alone at the end)."""
        if self._live_pid(pidfiles) is not None:
            return
        run([f"/usr/sbin/{name}"], env=ENV, cwd="/")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            pid = self._live_pid(pidfiles)
            if pid is not None:
                self.pids.append(pid)
                return
            time.sleep(0.1)
        raise RuntimeError(f"{name} did not start: " + self.messages())

    @staticmethod
    def _live_pid(pidfiles: str) -> int | None:
        for path in glob.glob(pidfiles):
            with contextlib.suppress(OSError):
                pid = Path(path).read_text().strip()
                if pid.isdigit() and Path(f"/proc/{pid}").exists():
                    return int(pid)
        return None

    def _queue_ready(self) -> bool:
        result = run(["qstat", "-f", "-q", f"{QUEUE}@{self.host}"], check=False, env=ENV,
                     cwd="/")
        lines = [line for line in result.stdout.splitlines() if line.startswith(QUEUE)]
        return bool(lines) and len(lines[0].split()) == 5  # no state column: ready

    def _wait_for(self, ready, what: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready():
                return
            time.sleep(0.2)
        raise RuntimeError(f"Grid Engine {what} did not come up: " + self.messages())

    def queue_states(self) -> str:
        """The queue instance's state letters (``E`` for error), '' when fine."""
        result = run(["qstat", "-f", "-q", f"{QUEUE}@{self.host}"], check=False, env=ENV,
                     cwd="/")
        for line in result.stdout.splitlines():
            if line.startswith(QUEUE):
                fields = line.split()
                return fields[5] if len(fields) > 5 else ""
        return "?"

    def clear_error(self) -> None:
        run(["qmod", "-c", f"{QUEUE}@{self.host}"], check=False, env=ENV, cwd="/")

    def messages(self) -> str:
        texts = []
        for path in [SPOOL / "qmaster" / "messages",
                     *map(Path, glob.glob(str(SPOOL / "execd" / "*" / "messages")))]:
            if path.exists():
                texts.append(f"{path}:\n" + path.read_text()[-3000:])
        return "\n".join(texts)

    def as_user(self, user: str, argv: list[str], timeout: int = 120,
                check: bool = True) -> subprocess.CompletedProcess:
        home = f"/home/{user}"
        return run(["runuser", "-u", user, "--", "env", "-i", f"HOME={home}", f"USER={user}",
                    *[f"{name}={value}" for name, value in ENV.items()], *argv],
                   timeout=timeout, check=check, cwd="/tmp")

    def wait_until_no_jobs(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not run(["qstat", "-u", "*"], env=ENV, cwd="/").stdout.strip():
                return
            time.sleep(0.2)
        raise RuntimeError("jobs still queued: " + run(["qstat", "-u", "*"], env=ENV).stdout)

    def stop(self) -> None:
        run(["qdel", "-f", "-u", "*"], check=False, env=ENV, cwd="/")
        with contextlib.suppress(RuntimeError):
            self.wait_until_no_jobs(20)
        qconf("-dq", QUEUE, check=False)
        qconf("-dp", PE, check=False)
        for pid in reversed(self.pids):  # execd first, then qmaster: only those we started
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 30
            while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
                time.sleep(0.1)


# Runs inside the job as its user: records what the job sees.
DUMP = dump_script(("JOB_ID", "SGE_TASK_ID", "NSLOTS"),
                   'sys.argv[1] + ("" if task == "undefined" else "." + task)',
                   extra='task = os.environ.get("SGE_TASK_ID", "undefined")\n')


@contextlib.contextmanager
def mjf_cell():
    """A started cell whose hooks use a fresh base_dir, with the site config
    (/etc/mjf/mjf.conf) pointing there; everything is restored afterwards.

    Besides GridEngineCell's attributes: ``mjf_base``, ``job_root`` (holds ``dump.py``
    and ``out/``, where jobs write what they saw) and ``good_config``.
    """
    require(os.geteuid() == 0, "needs root to run sge_qmaster and sge_execd")
    require(Path("/usr/sbin/sge_qmaster").exists() and Path("/usr/sbin/sge_execd").exists()
            and (SGE_ROOT / SGE_CELL / "common" / "act_qmaster").exists(),
            "needs Debian's gridengine-master, -exec and -client with a configured cell "
            "(tests/setup-system)")
    require((HOOKS_BIN / "mjf-gridengine-starter").exists(),
            f"needs the hooks installed in {HOOKS_BIN} (tests/run does it)")
    make_boot_dirs(Path("/"), ("gridengine-master", "gridengine-exec"))
    with mjf_site("mjf-gridengine-", DUMP, "gridengine") as site:
        (site.root / "conf").mkdir()
        cell = GridEngineCell(site.root / "conf", HOOKS_BIN)
        cell.mjf_base, cell.job_root, cell.good_config = site.base, site.root, site.good_config
        try:
            cell.start()
            yield cell
        finally:
            cell.stop()


def qsub(cell, user: str, name: str, *options: str, command: list[str] | None = None,
         wait: bool = True) -> str:
    """Submit a job running dump.py (or ``command``); return its job number."""
    argv = ["qsub", "-terse", "-N", name, "-o", f"{cell.job_root}/out", "-e",
            f"{cell.job_root}/out", "-q", QUEUE, *options]
    argv += command or ["-b", "y", "/usr/bin/python3", f"{cell.job_root}/dump.py", name]
    if wait:
        argv[1:1] = ["-sync", "y"]
    result = cell.as_user(user, ["timeout", "90", *argv], timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr + cell.messages()
    return result.stdout.strip().splitlines()[0].split(".")[0]


def seen(cell, name: str) -> dict:
    return seen_in(cell.job_root / "out" / f"{name}.json")


def mjf(cell, *args: str) -> subprocess.CompletedProcess:
    """An admin's `mjf` command, as root."""
    return admin_mjf(ENV, *args)


def assert_no_job_directories_left(cell) -> None:
    site_assert_no_job_directories_left(cell.mjf_base)
