"""A throwaway one-node Slurm cluster on loopback, with the installed MJF hooks.

Used by the integration tests (as root, in CI). Debian's slurmctld/slurmd 22.05
and munge; every path lives in a scratch directory; ``stop()`` shuts the
daemons down and removes the cgroup directories they leave behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from tests.conftest import require
from tests.integration.job_side import MEMORY_LIMITS
from tests.integration.site import HOOKS_BIN, mjf_site, run, seen_in
from tests.integration.site import (
    assert_no_job_directories_left as site_assert_no_job_directories_left,
)

MUNGE_SOCKET_DIR = Path("/run/munge")


def ensure_munge() -> None:
    if run(["pgrep", "-x", "munged"], check=False).returncode == 0:
        return
    MUNGE_SOCKET_DIR.mkdir(exist_ok=True)
    shutil.chown(MUNGE_SOCKET_DIR, "munge", "munge")
    run(["runuser", "-u", "munge", "--", "/usr/sbin/munged"])


class SlurmCluster:
    """slurmctld + slurmd for this host, configured with the hooks in ``bindir``."""

    def __init__(self, root: Path, bindir: Path, cgroups: bool) -> None:
        self.root = root
        self.bindir = bindir
        self.cgroups = cgroups
        self.node = socket.gethostname().split(".")[0]
        self.conf = root / "slurm.conf"
        self.env = {"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "SLURM_CONF": str(self.conf)}

    def write_config(self) -> None:
        for sub in ("state", "spool", "log"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        cpus = os.cpu_count()
        cgroup_lines = (
            "ProctrackType=proctrack/cgroup\nTaskPlugin=task/cgroup,task/affinity\n"
            "PrologFlags=Alloc,Contain\n"
            if self.cgroups else
            "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nPrologFlags=Alloc\n"
        )
        self.conf.write_text(f"""\
ClusterName=mjfci
SlurmctldHost={self.node}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CryptoType=crypto/munge
StateSaveLocation={self.root}/state
SlurmdSpoolDir={self.root}/spool
SlurmctldPidFile={self.root}/slurmctld.pid
SlurmdPidFile={self.root}/slurmd.pid
SlurmctldLogFile={self.root}/log/slurmctld.log
SlurmdLogFile={self.root}/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
{cgroup_lines}AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
ReturnToService=2
SchedulerParameters=sched_interval=1
MinJobAge=2
Prolog={self.bindir}/mjf-slurm
Epilog={self.bindir}/mjf-slurm
TaskProlog={self.bindir}/mjf-slurm-taskprolog
PrologEpilogTimeout=60
NodeName={self.node} CPUs={cpus} RealMemory=4000 State=UNKNOWN
PartitionName=debug Nodes={self.node} Default=YES MaxTime=INFINITE DefaultTime=30 State=UP
PartitionName=short Nodes={self.node} MaxTime=10 State=UP
""")
        if self.cgroups:
            (self.root / "cgroup.conf").write_text(
                "CgroupPlugin=cgroup/v1\nCgroupMountpoint=/sys/fs/cgroup\n"
                "ConstrainCores=yes\nConstrainRAMSpace=yes\nConstrainSwapSpace=yes\n"
            )

    def start(self) -> None:
        self.write_config()
        ensure_munge()
        run(["/usr/sbin/slurmctld", "-c", "-f", str(self.conf)], env=self.env)
        run(["/usr/sbin/slurmd", "-f", str(self.conf)], env=self.env)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            state = self.node_state()
            if state in ("idle", "mixed", "allocated"):
                return
            time.sleep(0.3)
        raise RuntimeError(f"slurm did not come up: node state {state!r}\n"
                           + self.log("slurmd") + self.log("slurmctld"))

    def node_state(self) -> str:
        """The node's state as scontrol prints it, lowercased: `idle`, `idle+drain`, ..."""
        result = run(["scontrol", "show", "node", "-o", self.node], check=False, env=self.env)
        for field in result.stdout.split():
            if field.startswith("State="):
                return field[len("State="):].lower()
        return ""

    def log(self, daemon: str) -> str:
        path = self.root / "log" / f"{daemon}.log"
        return path.read_text()[-4000:] if path.exists() else ""

    def as_user(self, user: str, argv: list[str], timeout: int = 120,
                check: bool = True) -> subprocess.CompletedProcess:
        return run(["runuser", "-u", user, "--", *argv], env=self.env, timeout=timeout,
                   check=check, cwd="/tmp")

    def resume(self) -> None:
        run(["scontrol", "update", f"nodename={self.node}", "state=resume"], check=False,
            env=self.env)

    def wait_until_no_jobs(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not run(["squeue", "-h"], env=self.env).stdout.strip():
                return
            time.sleep(0.2)
        raise RuntimeError("jobs still queued: " + run(["squeue"], env=self.env).stdout)

    def stop(self) -> None:
        run(["scontrol", "shutdown"], check=False, env=self.env)
        for pidfile in ("slurmd.pid", "slurmctld.pid"):
            path = self.root / pidfile
            deadline = time.monotonic() + 30
            while path.exists() and time.monotonic() < deadline:
                pid = path.read_text().strip()
                if not pid or not Path(f"/proc/{pid}").exists():
                    break
                time.sleep(0.2)
        # slurmd's cgroup/v1 plugin leaves empty slurm_<host> directories behind.
        for controller in Path("/sys/fs/cgroup").iterdir():
            leftover = controller / f"slurm_{self.node}"
            if leftover.is_dir():
                for directory in sorted(leftover.rglob("*"), reverse=True):
                    if directory.is_dir():
                        directory.rmdir()
                leftover.rmdir()


# Runs inside the job as its user: records what the job sees.
DUMP = r'''
import json, os, sys
out = {"env": {k: os.environ.get(k) for k in
               ("MACHINEFEATURES", "JOBFEATURES", "SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID")}}
for var in ("MACHINEFEATURES", "JOBFEATURES"):
    d = os.environ.get(var)
    out[var] = {n: open(os.path.join(d, n), "rb").read().decode()
                for n in sorted(os.listdir(d))} if d and os.path.isdir(d) else None
''' + MEMORY_LIMITS + r'''
jobs = os.path.dirname(os.path.dirname(os.environ.get("JOBFEATURES") or "/x/y/z"))
out["jobs_seen"] = sorted(os.listdir(jobs)) if os.path.isdir(jobs) else None
suffix = os.environ.get("SLURM_ARRAY_TASK_ID") or os.environ.get("SLURM_PROCID", "0")
name = sys.argv[1] + "." + suffix
with open(os.path.join(os.path.dirname(__file__), "out", name + ".json"), "w") as f:
    json.dump(out, f)
'''


@contextlib.contextmanager
def mjf_cluster(cgroups: bool):
    """A started cluster whose hooks use a fresh base_dir, with the site config
    (/etc/mjf/mjf.conf) pointing there; everything is restored afterwards.

    Besides SlurmCluster's attributes: ``mjf_base``, ``job_root`` (holds ``dump.py``
    and ``out/``, where jobs write what they saw) and ``good_config``.
    """
    require(os.geteuid() == 0, "needs root to run slurmctld and slurmd")
    require(shutil.which("slurmctld") is not None and Path("/usr/sbin/slurmd").exists(),
            "needs Debian's slurmctld, slurmd, slurm-client and munge (tests/setup-system)")
    require((HOOKS_BIN / "mjf-slurm").exists(),
            f"needs the hooks installed in {HOOKS_BIN} (tests/run does it)")
    with mjf_site("mjf-slurm-", DUMP) as site:
        slurm = SlurmCluster(site.root / "slurm", HOOKS_BIN, cgroups=cgroups)
        slurm.start()
        slurm.mjf_base, slurm.job_root, slurm.good_config = site.base, site.root, \
            site.good_config
        try:
            yield slurm
        finally:
            slurm.stop()


def sbatch(cluster, user, name, *options, wait=True):
    argv = ["sbatch", "--parsable", "-J", name, "-o", f"{cluster.job_root}/out/{name}.log",
            *options, "--wrap", f"/usr/bin/python3 {cluster.job_root}/dump.py {name}"]
    if wait:
        argv.insert(1, "--wait")
    result = cluster.as_user(user, argv, check=False)
    assert result.returncode == 0, result.stderr + cluster.log("slurmd")
    return result.stdout.strip().split(";")[0]


def seen(cluster, name, task=0):
    return seen_in(cluster.job_root / "out" / f"{name}.{task}.json")


def assert_no_job_directories_left(cluster):
    site_assert_no_job_directories_left(cluster.mjf_base)
