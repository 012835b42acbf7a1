"""A throwaway one-node Slurm cluster on loopback, with the installed MJF hooks.

Used by the integration tests (as root, in CI), in two versions: Debian bookworm's
slurmctld/slurmd 22.05 and munge on the host, and Debian trixie's 24.11 in a
:class:`~tests.integration.trixie_root.TrixieRoot` (``/srv/mjf-slurm24-root``, built
once) with its own ports, munge socket and node name, so both can run on one host.
Every path lives in a scratch directory under /tmp (the same path inside the
chroot); ``stop()`` shuts the daemons down and removes the cgroup directories they
leave behind.
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
from tests.integration.boot_dirs import make_boot_dirs
from tests.integration.job_side import MEMORY_LIMITS, dump_script
from tests.integration.site import HOOKS_BIN, SITE_CONFIG, mjf_site, run, seen_in
from tests.integration.site import (
    assert_no_job_directories_left as site_assert_no_job_directories_left,
)
from tests.integration.trixie_root import TrixieRoot

MUNGE_SOCKET_DIR = Path("/run/munge")
# $MJF_SLURM24_ROOT: another copy (to try a change to the root without touching the one
# the other tests share).
SLURM24_ROOT = Path(os.environ.get("MJF_SLURM24_ROOT", "/srv/mjf-slurm24-root"))
VERSIONS = ("22.05", "24.11")
HOOKS = ("mjf", "mjf-slurm", "mjf-slurm-taskprolog")
# dbus: what slurmd asks systemd through, where systemd runs the VM (cgroup2_vm).
# ansible-core, python3-apt (its apt module) and python3-click (the .deb's one dependency
# the root lacks): test_ansible.py applies the role inside, offline.
SLURM24_PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge", "dbus", "ansible-core",
                    "python3-apt", "python3-click")


def with_lines(conf: str, lines: str) -> str:
    """slurm.conf's text ``conf`` with ``lines`` added, and without its own lines of the
    keys those set."""
    keys = {line.split("=", 1)[0] for line in lines.splitlines() if "=" in line}
    kept = [line for line in conf.splitlines() if line.split("=", 1)[0] not in keys]
    return "\n".join(kept) + "\n" + lines


def ensure_munge() -> None:
    if run(["pgrep", "-x", "munged"], check=False).returncode == 0:
        return
    MUNGE_SOCKET_DIR.mkdir(exist_ok=True)
    shutil.chown(MUNGE_SOCKET_DIR, "munge", "munge")
    run(["runuser", "-u", "munge", "--", "/usr/sbin/munged"])


class SlurmCluster:
    """slurmctld + slurmd for this host, configured with the hooks in ``bindir``; in
    ``chroot`` (a prepared TrixieRoot with Slurm 24.11) if given.

    A subclass with more nodes (:mod:`tests.integration.slurm_multinode`) changes where
    the daemons run (``enter``, ``_start_daemons``), the controller's address, the node
    lines and the pid files; the rest is shared."""

    # slurmctld's and slurmd's ports in the 24.11 chroot: beside a 22.05 cluster's.
    ports = (7817, 7818)
    # Where Slurm's commands and the users' submissions run: an ``nsenter`` command into
    # the controller's namespaces, or here.
    enter: tuple[str, ...] = ()
    # slurmd's pid file and log are named after this, its spool directory is this (under
    # the cluster's root); ``%n`` is a node's name, for several slurmds.
    slurmd_name, slurmd_spool = "slurmd", "spool"

    def __init__(self, root: Path, bindir: Path, cgroups: bool,
                 chroot: TrixieRoot | None = None, run_in_job: bool = False,
                 site_hooks: bool = False, records: bool = False,
                 record_hooks: bool = False, hook_lines: str = "") -> None:
        self.root = root
        self.bindir = bindir
        self.cgroups = cgroups
        # PrologFlags=RunInJob (23.11 on; implies Contain): the Prolog runs in the job.
        self.run_in_job = run_in_job
        # A site's own Prolog and Epilog beside ours (a glob), and its TaskProlog that
        # ends by running ours.
        self.site_hooks = site_hooks
        # Job records: our TaskEpilog reports the job cgroup's counters, cpuacct included
        # (Slurm makes that controller's job cgroups only with jobacct_gather/cgroup).
        self.records = records
        # Every Prolog and Epilog run recorded in hooks.log (start, end, status, signals)
        # and what ours said (--verbose) in hooks.err: what a job's end left is then
        # explained by what ran, and when.
        self.record_hooks = record_hooks
        # slurm.conf lines of a page that tells a site what to add (a quick start): they
        # replace the cluster's own lines of the same keys, so those in force are the page's.
        self.hook_lines = hook_lines
        self.chroot = chroot
        self.version = "24.11" if chroot else "22.05"
        self.host = socket.gethostname().split(".")[0]
        # Slurm names its cgroups slurm_<NodeName>: a second cluster needs another name.
        self.node = "vm24" if chroot else self.host
        self.nodes: tuple[str, ...] = (self.node,)
        self.controller = self.host
        self.conf = root / "slurm.conf"
        self.env = {"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "SLURM_CONF": str(self.conf)}
        self.munged_pid: int | None = None
        self.kept_dir_was_there = True  # until start() looks: nothing removed

    def command(self, argv: list[str], check: bool = True, timeout: int = 60,
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        """A command of this cluster's Slurm (or any command, where it runs), as root."""
        env = {**self.env, **(env or {})}
        if self.chroot:
            return self.chroot.chroot(argv, check=check, timeout=timeout, env=env,
                                      enter=self.enter)
        return run([*self.enter, *argv], check=check, timeout=timeout, env=env)

    def mount_tmpfs(self, path: Path, options: str) -> None:
        """A tmpfs at ``path`` (under /tmp), seen by this cluster's daemons and jobs too:
        mounts made after a chroot's bind of /tmp do not reach into it here."""
        run(["mount", "-t", "tmpfs", "-o", options, "mjf-test", str(path)])
        if self.chroot:
            run(["mount", "--bind", str(path), str(self.chroot.root / str(path).lstrip("/"))])

    def umount(self, path: Path) -> None:
        if self.chroot:
            run(["umount", str(self.chroot.root / str(path).lstrip("/"))], check=False)
        run(["umount", str(path)], check=False)

    def mjf(self, *args: str) -> subprocess.CompletedProcess:
        """An admin's `mjf` command, as root, where this cluster's Slurm is."""
        return self.command([str(self.bindir / "mjf"), *args], check=False,
                            env={"MJF_CONFIG": str(SITE_CONFIG)})

    def write_config(self) -> None:
        for sub in ("state", "spool", "log"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self.conf.write_text(self.slurm_conf())
        if self.cgroups:
            (self.root / "cgroup.conf").write_text(self.cgroup_conf())

    def slurm_conf(self) -> str:
        """slurm.conf's text for this cluster."""
        nodes = ",".join(self.nodes)
        cgroup_lines = (
            "ProctrackType=proctrack/cgroup\nTaskPlugin=task/cgroup,task/affinity\n"
            f"PrologFlags=Alloc,{'RunInJob' if self.run_in_job else 'Contain'}\n"
            if self.cgroups else
            "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nPrologFlags=Alloc\n"
        )
        text = f"""\
ClusterName=mjfci
SlurmctldHost={self.controller}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
{self._version_lines()}StateSaveLocation={self.root}/state
SlurmdSpoolDir={self.root}/{self.slurmd_spool}
SlurmctldPidFile={self.root}/slurmctld.pid
SlurmdPidFile={self.root}/{self.slurmd_name}.pid
SlurmctldLogFile={self.root}/log/slurmctld.log
SlurmdLogFile={self.root}/log/{self.slurmd_name}.log
SlurmctldDebug=info
SlurmdDebug=info
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
{cgroup_lines}AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/{'cgroup' if self.records else 'none'}
MpiDefault=none
ReturnToService=2
SchedulerParameters=sched_interval=1{self._scheduler_extra()}
MinJobAge=2
{self._hook_lines()}PrologEpilogTimeout=60
{self._node_lines()}\
PartitionName=debug Nodes={nodes} Default=YES MaxTime=INFINITE DefaultTime=30 State=UP
PartitionName=short Nodes={nodes} MaxTime=10 State=UP
"""
        return with_lines(text, self.hook_lines)

    def cgroup_conf(self) -> str:
        """cgroup.conf's text, for a cluster with ``cgroups``: this host's v1."""
        return ("CgroupPlugin=cgroup/v1\nCgroupMountpoint=/sys/fs/cgroup\n"
                "ConstrainCores=yes\nConstrainRAMSpace=yes\nConstrainSwapSpace=yes\n")

    def _hook_lines(self) -> str:
        task_epilog = f"TaskEpilog={self.bindir}/mjf-slurm\n" if self.records else ""
        if not self.site_hooks:
            hook = self._recording_hook() if self.record_hooks else self.bindir / "mjf-slurm"
            return (f"Prolog={hook}\nEpilog={hook}\n"
                    f"TaskProlog={self.bindir}/mjf-slurm-taskprolog\n{task_epilog}")
        for hook in ("prolog", "epilog"):
            directory = self.root / f"{hook}.d"
            directory.mkdir(exist_ok=True)
            site = directory / f"50-site-{hook}"
            site.write_text(f'#!/bin/sh\necho "$SLURM_JOB_ID" >> {self.root}/site-{hook}.log\n'
                            f'[ ! -e {self.root}/site-{hook}.fail ]\n')
            site.chmod(0o755)
            ours = directory / "mjf"
            if not ours.is_symlink():
                ours.symlink_to(self.bindir / "mjf-slurm")
        task = self.root / "site-taskprolog"
        task.write_text("#!/bin/sh\necho export SITE_TASKPROLOG=ran\n"
                        f"exec {self.bindir}/mjf-slurm-taskprolog\n")
        task.chmod(0o755)
        return (f"Prolog={self.root}/prolog.d/*\nEpilog={self.root}/epilog.d/*\n"
                f"TaskProlog={task}\n")

    def _recording_hook(self) -> Path:
        """A Prolog and Epilog that records its run in hooks.log, then runs ours.

        Each run's ids are noted as it started: slurmstepd may start a hook with the job
        user's effective ids (its race), and the record shows when it did. The logs are
        writable by all so that such a run is recorded too, not failed. Its SIGTERM
        handler only notes the signal: our hook, started after the trap was set, gets the
        default disposition back, as it would from slurmstepd."""
        hook = self.root / "recording-hook"
        for name in ("hooks.log", "hooks.err"):
            (self.root / name).touch()
            (self.root / name).chmod(0o666)
        hook.write_text(f"""#!/bin/sh -p
note() {{
    echo "$(date +%s.%N) $1 pid=$$ $SLURM_SCRIPT_CONTEXT job=$SLURM_JOB_ID" \\
        "restart=$SLURM_JOB_RESTART_COUNT start=$SLURM_JOB_START_TIME $2" >> {self.root}/hooks.log
}}
trap 'note signal TERM' TERM
note start "$(grep -E '^(Uid|Gid|Groups):' /proc/$$/status | tr -s '\\t\\n' '  ')"
if [ "$SLURM_SCRIPT_CONTEXT" = epilog_slurmd ] && [ -e {self.root}/epilog-as-user ]; then
    # As slurmstepd's race starts it now and then: wholly the job's user. Where that
    # race has already made the effective ids the user's (a loaded machine), groups
    # cannot be cleared (no CAP_SETGID): they are the user's already, so kept.
    groups=--clear-groups
    [ "$(id -u)" = 0 ] || groups=--keep-groups
    setpriv --reuid="$SLURM_JOB_UID" --regid="$SLURM_JOB_GID" $groups \
        {self.bindir}/mjf-slurm --verbose "$@" 2>> {self.root}/hooks.err
else
    {self.bindir}/mjf-slurm --verbose "$@" 2>> {self.root}/hooks.err
fi
status=$?
note end "status=$status jobs=$(ls -A {self.mjf_base}/jobs 2>&1 | tr '\\n' ' ')"
exit $status
""")
        hook.chmod(0o755)
        return hook

    def hook_record(self) -> str:
        """hooks.log and hooks.err of a cluster with ``record_hooks``."""
        return "".join(f"== {name}\n{(self.root / name).read_text()}"
                       for name in ("hooks.log", "hooks.err") if (self.root / name).exists())

    def hooks_started_switched(self) -> list[tuple[str, str, bool]]:
        """The (role, job id, as_user) of each recorded Prolog and Epilog run that
        slurmstepd started with other uids than root's; ``as_user``: its real uid too."""
        runs = []
        for line in (self.root / "hooks.log").read_text().splitlines():
            words = line.split()
            if words[1] == "start" and "Uid: 0 0 0 0 " not in line:
                real_uid = words[words.index("Uid:") + 1]
                runs.append((words[3].split("_")[0], words[4][len("job="):], real_uid != "0"))
        return runs

    def _version_lines(self) -> str:
        if not self.chroot:
            return "CryptoType=crypto/munge\n"
        # Its own ports and munge socket, beside a 22.05 cluster on the same host.
        return (f"AuthInfo=socket={self.root}/munge/munge.socket\n"
                f"SlurmctldPort={self.ports[0]}\nSlurmdPort={self.ports[1]}\n"
                "MailProg=/bin/true\n")

    def _node_lines(self) -> str:
        address = f"NodeHostname={self.host} NodeAddr=127.0.0.1 " if self.chroot else ""
        return f"NodeName={self.node} {address}CPUs={os.cpu_count()} RealMemory=4000 " \
            "State=UNKNOWN\n"

    def _scheduler_extra(self) -> str:
        return ""

    def pidfiles(self) -> list[Path]:
        """The pid files of the daemons this cluster started (slurmd's first)."""
        return [self.root / "slurmd.pid", self.root / "slurmctld.pid"]

    def _start_munge(self) -> None:
        if not self.chroot:
            ensure_munge()
            return
        # munged runs as munge, and wants its own directory, writable by no one else.
        directory = self.root / "munge"
        directory.mkdir(mode=0o755, exist_ok=True)
        entry = next(line.split(":") for line in
                     (self.chroot.root / "etc/passwd").read_text().splitlines()
                     if line.startswith("munge:"))
        os.chown(directory, int(entry[2]), int(entry[3]))
        self.chroot.chroot(["/usr/sbin/munged", f"--socket={directory}/munge.socket",
                            f"--pid-file={directory}/munged.pid",
                            f"--log-file={directory}/munged.log",
                            f"--seed-file={directory}/munged.seed"], user="munge",
                           env=self.env)
        self.munged_pid = int((directory / "munged.pid").read_text())

    @property
    def kept_dir(self) -> Path:
        """Where this cluster's Prologs keep the TaskProlog's settings (/run/mjf-hooks)."""
        return (self.chroot.root if self.chroot else Path("/")) / "run/mjf-hooks"

    def start(self) -> None:
        # Removed at the stop if the Prologs made it (keep_taskprolog_settings).
        self.kept_dir_was_there = self.kept_dir.exists()
        self.write_config()
        self._start_munge()
        self._start_daemons()
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            states = {node: self.node_state(node) for node in self.nodes}
            if all(state in ("idle", "mixed", "allocated") for state in states.values()):
                return
            time.sleep(0.3)
        raise RuntimeError(f"slurm did not come up: node states {states!r}\n"
                           + "".join(self.log(path.stem) for path in self.pidfiles()))

    def _start_daemons(self) -> None:
        self.command(["/usr/sbin/slurmctld", "-c", "-f", str(self.conf)])
        self.command(["/usr/sbin/slurmd", "-f", str(self.conf)]
                     + (["-N", self.node] if self.chroot else []))

    def node_state(self, node: str | None = None) -> str:
        """A node's state (this cluster's first by default) as scontrol prints it,
        lowercased: `idle`, `idle+drain`, ..."""
        result = self.command(["scontrol", "show", "node", "-o", node or self.node],
                              check=False)
        for field in result.stdout.split():
            if field.startswith("State="):
                return field[len("State="):].lower()
        return ""

    def log(self, daemon: str, tail: int = 4000) -> str:
        """The last ``tail`` characters of the daemon's log (0: all of it)."""
        path = self.root / "log" / f"{daemon}.log"
        return path.read_text()[-tail:] if path.exists() else ""

    def as_user(self, user: str, argv: list[str], timeout: int = 120,
                check: bool = True) -> subprocess.CompletedProcess:
        if self.chroot:  # su and runuser need PAM, which the minimal chroot lacks
            environment = [f"{name}={value}" for name, value in self.env.items()]
            return self.chroot.chroot(["env", "-i", f"HOME=/home/{user}", f"USER={user}",
                                       *environment, "sh", "-c", 'cd /tmp && exec "$@"', "-",
                                       *argv], user=user, timeout=timeout, check=check,
                                      enter=self.enter)
        return run([*self.enter, "runuser", "-u", user, "--", *argv], env=self.env,
                   timeout=timeout, check=check, cwd="/tmp")

    def resume(self) -> None:
        self.command(["scontrol", "update", f"nodename={self.node}", "state=resume"],
                     check=False)

    def wait_until_no_jobs(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.command(["squeue", "-h"]).stdout.strip():
                return
            time.sleep(0.2)
        raise RuntimeError("jobs still queued: " + self.command(["squeue"]).stdout)

    def stop(self) -> None:
        self.command(["scontrol", "shutdown"], check=False)
        for path in self.pidfiles():
            deadline = time.monotonic() + 30
            while path.exists() and time.monotonic() < deadline:
                pid = path.read_text().strip()
                if not pid or not Path(f"/proc/{pid}").exists():
                    break
                time.sleep(0.2)
        if self.munged_pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.munged_pid, 15)
            # Gone before the next cluster starts: a 22.05 cluster takes any munged still
            # running for the host's (ensure_munge) and would start none of its own.
            deadline = time.monotonic() + 10
            while Path(f"/proc/{self.munged_pid}").exists() and time.monotonic() < deadline:
                time.sleep(0.1)
        if self.chroot:
            self.chroot.kill_processes()  # step daemons of jobs a failed test left
        if not self.kept_dir_was_there:
            shutil.rmtree(self.kept_dir, ignore_errors=True)
        # slurmd's cgroup/v1 plugin leaves empty slurm_<node> directories behind.
        for controller in Path("/sys/fs/cgroup").iterdir():
            for node in self.nodes:
                leftover = controller / f"slurm_{node}"
                if leftover.is_dir():
                    for directory in sorted(leftover.rglob("*"), reverse=True):
                        if directory.is_dir():
                            directory.rmdir()
                    leftover.rmdir()


# Runs inside the job as its user: records what the job sees.
# Also: who owns jobfeatures/, the job directories in sight, the memory limits enforced.
DUMP = dump_script(("SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SITE_TASKPROLOG"),
                   'sys.argv[1] + "." + suffix', argv=None, extra=MEMORY_LIMITS + r'''
features = os.environ.get("JOBFEATURES")
out["owner"] = os.stat(features).st_uid if features and os.path.isdir(features) else None
jobs = os.path.dirname(os.path.dirname(os.environ.get("JOBFEATURES") or "/x/y/z"))
out["jobs_seen"] = sorted(os.listdir(jobs)) if os.path.isdir(jobs) else None
suffix = os.environ.get("SLURM_ARRAY_TASK_ID") or os.environ.get("SLURM_PROCID", "0")
''')


def require_slurm(version: str) -> None:
    """Skip (fail in CI) unless a cluster of Slurm ``version`` can run here."""
    require(os.geteuid() == 0, "needs root to run slurmctld and slurmd")
    if version == "22.05":
        require(shutil.which("slurmctld") is not None and Path("/usr/sbin/slurmd").exists(),
                "needs Debian's slurmctld, slurmd, slurm-client and munge (tests/setup-system)")
        make_boot_dirs(Path("/"), ("slurmctld", "slurmd", "munge"))
    else:
        require(shutil.which("debootstrap") is not None,
                "needs debootstrap for the Slurm 24.11 chroot (tests/setup-system)")
    require((HOOKS_BIN / "mjf-slurm").exists(),
            f"needs the hooks installed in {HOOKS_BIN} (tests/run does it)")


def slurm24_root() -> TrixieRoot:
    """The Slurm 24.11 chroot, built once and prepared with the hooks (not mounted)."""
    chroot = TrixieRoot(SLURM24_ROOT, SLURM24_PACKAGES, HOOKS)
    chroot.prepare()
    return chroot


@contextlib.contextmanager
def mjf_cluster(cgroups: bool, version: str = "22.05", run_in_job: bool = False,
                site_hooks: bool = False, extra_config: str = "", records: bool = False,
                record_hooks: bool = False, hook_lines: str = ""):
    """A started cluster of Slurm ``version`` (one of VERSIONS) whose hooks use a fresh
    base_dir, with the site config (/etc/mjf/mjf.conf, bind-mounted into a chroot)
    pointing there, ``extra_config`` appended (``[mjf]\njobstatus = yes\n``, say);
    everything is restored afterwards. ``hook_lines``: slurm.conf lines in place of the
    cluster's own of the same keys.

    Besides SlurmCluster's attributes: ``mjf_base``, ``job_root`` (holds ``dump.py``
    and ``out/``, where jobs write what they saw) and ``good_config``.
    """
    require_slurm(version)
    with mjf_site("mjf-slurm-", DUMP, "slurm") as site:
        chroot = None
        if version == "24.11":
            chroot = slurm24_root()
            shutil.copy("/etc/hosts", chroot.root / "etc/hosts")
            chroot.mount(extra=(str(SITE_CONFIG.parent),))
        slurm = SlurmCluster(site.root / "slurm", Path("/usr/bin") if chroot else HOOKS_BIN,
                             cgroups=cgroups, chroot=chroot, run_in_job=run_in_job,
                             site_hooks=site_hooks, records=records,
                             record_hooks=record_hooks, hook_lines=hook_lines)
        slurm.mjf_base, slurm.job_root, slurm.good_config = site.base, site.root, \
            site.good_config
        if slurm.node != slurm.host:  # as a site whose NodeName is not the host name
            slurm.good_config += f"[slurm]\nnodename = {slurm.node}\n"
        if slurm.node != slurm.host or extra_config:
            slurm.good_config += extra_config
            SITE_CONFIG.write_text(slurm.good_config)
        try:
            slurm.start()
            yield slurm
        finally:
            slurm.stop()
            if chroot:
                chroot.unmount()


def sbatch(cluster, user, name, *options, wait=True, script=None):
    """Submit ``script`` (default: dump.py) as job ``name``; with ``wait``, until the job
    has left the queue (polled: faster than ``sbatch --wait``, which polls every few
    seconds)."""
    script = script or f"/usr/bin/python3 {cluster.job_root}/dump.py {name}"
    argv = ["sbatch", "--parsable", "-J", name, "-o", f"{cluster.job_root}/out/{name}.log",
            *options, "--wrap", script]
    result = cluster.as_user(user, argv, check=False)
    assert result.returncode == 0, result.stderr + cluster.log("slurmd") \
        + cluster.log("slurmctld")
    job_id = result.stdout.strip().split(";")[0]
    deadline = time.monotonic() + 120
    while wait and in_queue(cluster, job_id):
        assert time.monotonic() < deadline, f"job {job_id} still queued"
        time.sleep(0.1)
    return job_id


def in_queue(cluster, job_id: str) -> bool:
    """Whether the job is still queued (running, completing: its Epilog not done). Only
    squeue's answer that it is not - nothing listed, or the id unknown once the job is
    purged - counts: an squeue that failed otherwise (a busy slurmctld) says nothing,
    and taking it for "gone" let a test rewrite the config under a running Epilog."""
    result = cluster.command(["squeue", "-h", "-j", job_id], check=False)
    if result.stdout.strip():
        return True
    return not (result.returncode == 0 or "Invalid job id" in result.stderr)


def seen(cluster, name, task=0):
    return seen_in(cluster.job_root / "out" / f"{name}.{task}.json")


def assert_no_job_directories_left(cluster):
    """No job's directory left.

    On a RunInJob cluster (which records its hooks) slurmstepd now and then starts an
    Epilog wholly as the job's user (docs/slurm.md): that Epilog cannot remove the job's
    root-owned directory, and root's next Prolog or Epilog on the node does, seeing the
    job's extern step ended. Only a directory whose Epilog was recorded so may be left;
    one more job then runs, after which none may be. Anything else fails with the
    record of every Prolog and Epilog run and slurmd's log; no `mjf sync` runs."""
    try:
        site_assert_no_job_directories_left(cluster.mjf_base)
        return
    except AssertionError as left:
        if not cluster.record_hooks:
            raise
        record = f"{cluster.hook_record()[-20000:]}\n{cluster.log('slurmd', tail=20000)}"
        as_user = {job for role, job, wholly in cluster.hooks_started_switched()
                   if role == "epilog" and wholly}
        names = sorted(path.name for path in (cluster.mjf_base / "jobs").iterdir()
                       if not path.name.startswith("."))
        if not set(names) <= as_user:
            raise AssertionError(f"{left}\n{record}") from None
    next_job = sbatch(cluster, "mjfuser1", "after-an-epilog-as-the-user", "--time=2",
                      "--mem=100M")
    try:
        site_assert_no_job_directories_left(cluster.mjf_base)
    except AssertionError as left:
        raise AssertionError(f"{left} after job {next_job}, which should have removed "
                             f"those of jobs {names}\n{cluster.hook_record()[-20000:]}\n"
                             f"{cluster.log('slurmd', tail=20000)}") from None
