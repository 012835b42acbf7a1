"""A volclava cluster (an LSF-compatible scheduler) on this host, for the LSF tests.

volclava 2.2 is built from ``tests/vendor/volclava/`` into ``/opt/volclava`` by
tests/setup-system (once: the build is cached there, like OpenPBS in ``/opt/pbs``). A
cluster here never changes that build: its configuration, work and log directories are
its own, below the test's directory, and its daemons find them by ``LSF_ENVDIR``. Root
is its administrator (no user is made for it).

The daemons (``lim``, ``res`` and ``sbatchd``, which start ``pim``, ``mbatchd`` and the
ELIM) run as root and put themselves in the background, so they are not our children:
``stop()`` ends the processes whose ``LSF_ENVDIR`` is this cluster's, by their pids, and
removes what LSF made for the jobs' users (``~/.lsbatch``, ``/tmp/.lsbtmp<uid>``) where
it was not there before.

The queues run the hooks as docs/lsf.md tells a site to (contrib/lsf/lsb.queues):
``JOB_STARTER = eval "$(mjf-lsf exports)";`` with the pre-exec and post-exec as the
job's user (queue ``mjf``) or, with ``PRE_POST_EXEC_USER = root``, as root (queue
``mjfroot``); the hooks are the ones tests/run installs with the system Python.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from tests.conftest import require, run
from tests.integration.job_side import READERS_JDL, dump_script, install, readers_snippet
from tests.integration.site import HOOKS_BIN, SITE_CONFIG, USERS, admin_mjf, mjf_site, seen_in

PREFIX = Path("/opt/volclava")
HOST = socket.gethostname().split(".")[0]
PORTS = {"LSF_LIM_PORT": 6322, "LSF_RES_PORT": 6323, "LSB_MBD_PORT": 6324,
         "LSB_SBD_PORT": 6325}
SLOTS = 4  # lsb.hosts MXJ: more than this machine's 2 CPUs, so jobs of 2 run side by side

# Runs inside the job as its user: what the job sees (and its rlimits). ``dump.py NAME
# [SECONDS] [readers]``: sleeps first; runs the readers (job_side); an array element
# writes NAME.<index>.
DUMP = dump_script(
    ("LSB_JOBID", "LSB_JOBINDEX", "LSB_MCPU_HOSTS", "LSB_HOSTS", "LSB_QUEUE", "TMPDIR",
     "JOBSTATUS"),
    'sys.argv[1] + ("." + index if index not in (None, "", "0") else "")', extra=r'''
import resource
index = os.environ.get("LSB_JOBINDEX")
out["rlimits"] = {"cpu": resource.getrlimit(resource.RLIMIT_CPU)[0],
                  "rss": resource.getrlimit(resource.RLIMIT_RSS)[0]}
if len(sys.argv) > 2 and sys.argv[2].replace(".", "", 1).isdigit():
    import time
    time.sleep(float(sys.argv[2]))
''' + readers_snippet(f"{HOOKS_BIN}/mjf"))

# What a site puts in each queue (docs/lsf.md): the job starter in the job's own shell.
HOOK_LINES = """\
JOB_STARTER = eval "$({bin}/mjf-lsf exports)";
PRE_EXEC = {bin}/mjf-lsf pre-exec
POST_EXEC = {bin}/mjf-lsf post-exec
"""


class LsfCluster:
    """The configuration under ``root/etc`` and the daemons that read it."""

    def __init__(self, root: Path, queues: str = "", hosts: tuple[str, ...] = (HOST,)) -> None:
        self.root = root
        # Its hosts; the first is LSF's master, where the commands run.
        self.hosts = hosts
        self.envdir = root / "etc"
        self.env = {"LSF_ENVDIR": str(self.envdir),
                    "PATH": f"{PREFIX}/bin:/usr/bin:/bin:/usr/sbin:/sbin"}
        self.queues = queues or default_queues()
        self._before: set[Path] = set()
        # Where LSF makes each job's <id>.tmpdir: on a tmpfs. volclava 2.2's sbatchd takes
        # a directory's first two entries for . and .. when it removes one, and recurses
        # into . (a stack overflow, the job's post-exec never run) where a filesystem
        # lists them later - as this machine's overlayfs /tmp does; tmpfs lists them first.
        self.tmpdir = Path(tempfile.mkdtemp(prefix="mjf-lsf-", dir="/dev/shm"))
        self.tmpdir.chmod(0o1777)
        # LSF_SERVERDIR: the build's daemons, and our ELIM beside them (the build is
        # never changed).
        self.serverdir = root / "sbin"

    # --- configuration ------------------------------------------------------------

    def write_config(self) -> None:
        for name in ("work/logdir", "log"):
            (self.root / name).mkdir(parents=True, exist_ok=True)
        self.serverdir.mkdir(exist_ok=True)
        for daemon in (PREFIX / "sbin").iterdir():
            (self.serverdir / daemon.name).symlink_to(daemon)
        # What docs/lsf.md has a site install as $LSF_SERVERDIR/elim (volclava's name).
        (self.serverdir / "elim").write_text(f"#!/bin/sh\nexec {HOOKS_BIN}/mjf-lsf elim\n")
        (self.serverdir / "elim").chmod(0o755)
        self.envdir.mkdir(parents=True, exist_ok=True)
        ports = "".join(f"{key}={value}\n" for key, value in PORTS.items())
        files = {
            "lsf.conf": (f"LSF_SERVERDIR={self.serverdir}\nLSF_BINDIR={PREFIX}/bin\n"
                         # -M's plain number in MB, which `mjf submit-args` reads here.
                         "LSF_UNIT_FOR_LIMITS=MB\n"
                         f"LSF_ENVDIR={self.envdir}\nLSF_CONFDIR={self.envdir}\n"
                         f"LSB_CONFDIR={self.envdir}\nLSB_SHAREDIR={self.root}/work\n"
                         f"LSF_LOGDIR={self.root}/log\nLSF_LOG_MASK=LOG_WARNING\n"
                         f"{ports}LSF_AUTH=eauth\nLSB_MAILTO=!U\n"
                         # As docs/lsf.md advises: a root pre-exec measures the job's tmpdir.
                         f"LSB_SET_TMPDIR=y\nLSF_TMPDIR={self.tmpdir}\n"),
            "lsf.shared": ("Begin Cluster\nClusterName\nmjf\nEnd Cluster\n"
                           "Begin HostType\nTYPENAME\nlinux\nEnd HostType\n"
                           "Begin HostModel\nMODELNAME CPUFACTOR ARCHITECTURE\n"
                           "IntelI5 100 (x86_64)\nEnd HostModel\n"
                           "Begin Resource\nRESOURCENAME TYPE INTERVAL INCREASING DESCRIPTION\n"
                           "cs Boolean () () (Compute server)\n"
                           # The node's HEPscore23, reported by the ELIM (docs/lsf.md).
                           "hs06 Numeric 60 Y (HEPscore23 of the host)\nEnd Resource\n"),
            "lsf.cluster.mjf": ("Begin ClusterAdmins\nAdministrators = root\nEnd ClusterAdmins\n"
                                "Begin Host\nHOSTNAME model type server r1m RESOURCES\n"
                                # Type and model named: hosts whose type LIM is left to
                                # find (!) are UNKNOWN but the master's, and a job (select
                                # [type == local] by default) never spans them.
                                + "".join(f"{host} IntelI5 linux 1 3.5 (cs)\n"
                                          for host in self.hosts)
                                + "End Host\n"
                                "Begin ResourceMap\nRESOURCENAME LOCATION\n"
                                "hs06 [default]\nEnd ResourceMap\n"),
            "lsf.task": "",
            "lsb.params": ("Begin Parameters\nDEFAULT_QUEUE = mjf\nMBD_SLEEP_TIME = 2\n"
                           "SBD_SLEEP_TIME = 2\nJOB_ACCEPT_INTERVAL = 0\nEnd Parameters\n"),
            "lsb.hosts": ("Begin Host\nHOST_NAME MXJ JL/U r1m pg ls tmp DISPATCH_WINDOW\n"
                          f"default {SLOTS} () () () () () ()\nEnd Host\n"),
            "lsb.users": "",
            "lsb.queues": self.queues,
        }
        for name, text in files.items():
            (self.envdir / name).write_text(text)
        # The jobs' users read lsf.conf (bsub, the job's own bjobs), and run from here.
        for path in (self.root, self.envdir, *self.envdir.iterdir()):
            path.chmod(0o755 if path.is_dir() else 0o644)

    # --- daemons ------------------------------------------------------------------

    def start(self) -> None:
        require(os.geteuid() == 0, "needs root to run volclava's daemons")
        require((PREFIX / "sbin" / "sbatchd").exists(),
                "needs volclava built into /opt/volclava (tests/setup-system builds it from "
                "tests/vendor/volclava)")
        require((HOOKS_BIN / "mjf-lsf").exists(),
                f"needs the hooks installed in {HOOKS_BIN} (tests/run does it)")
        assert not self.daemons(any_cluster=True), \
            f"volclava daemons of another cluster are running: {self.daemons(any_cluster=True)}"
        self._before = set(self._leftovers())
        self.write_config()
        for host in self.hosts:
            for daemon in ("lim", "res", "sbatchd"):
                run([*self.on_host(host), str(self.serverdir / daemon)], env=self.env, cwd="/")
        deadline = time.monotonic() + 90
        while any(self.host_status(host) != "ok" for host in self.hosts):
            if time.monotonic() > deadline:
                raise AssertionError(
                    "volclava did not come up: bhosts says " +
                    ", ".join(f"{host} {self.host_status(host)!r}" for host in self.hosts) +
                    f"\n{self.logs()}")
            time.sleep(0.5)

    def on_host(self, host: str) -> tuple[str, ...]:
        """What runs a command on ``host``: nothing here, where the one host is this one."""
        return ()

    def daemons(self, any_cluster: bool = False) -> list[int]:
        """The pids of this cluster's processes - its daemons, the ELIM LIM runs, what is
        left of its jobs: all have its LSF_ENVDIR - or of any cluster's volclava daemons."""
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                exe = os.readlink(f"/proc/{entry}/exe")
                environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if any_cluster:
                if exe.startswith(f"{PREFIX}/sbin/"):
                    found.append(int(entry))
            elif f"LSF_ENVDIR={self.envdir}".encode() in environ:
                found.append(int(entry))
        return found

    def stop(self) -> None:
        self.command("bkill", "-u", "all", "0", check=False)
        deadline = time.monotonic() + 30
        while self.unfinished() and time.monotonic() < deadline:
            time.sleep(0.5)
        for pid in self.daemons():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while self.daemons() and time.monotonic() < deadline:
            time.sleep(0.1)
        for path in [*(set(self._leftovers()) - self._before), self.tmpdir]:
            run(["rm", "-rf", "--one-file-system", str(path)], check=False)

    @staticmethod
    def _leftovers() -> list[Path]:
        """What LSF makes for a job's user: its job files and its post-exec's HOME."""
        paths = []
        for user in USERS:
            with contextlib.suppress(KeyError):
                entry = pwd.getpwnam(user)
                paths += [Path(entry.pw_dir) / ".lsbatch", Path(f"/tmp/.lsbtmp{entry.pw_uid}")]
        return [path for path in paths if path.exists()]

    def logs(self) -> str:
        text = ""
        for path in sorted((self.root / "log").glob("*")):
            text += f"== {path.name}\n{path.read_text(errors='replace')[-3000:]}\n"
        return text

    # --- commands -----------------------------------------------------------------

    def command(self, name: str, *args: str, check: bool = True,
                user: str | None = None) -> subprocess.CompletedProcess:
        """An LSF command, as root or as ``user`` (with only LSF's environment)."""
        argv = [str(PREFIX / "bin" / name), *args]
        if user is not None:
            argv = ["runuser", "-u", user, "--", "env", "-i", f"HOME=/home/{user}",
                    f"USER={user}", *[f"{key}={value}" for key, value in self.env.items()],
                    *argv]
        return run([*self.on_host(self.hosts[0]), *argv], check=check, env=self.env,
                   cwd="/tmp")

    def host_status(self, host: str = HOST) -> str:
        result = self.command("bhosts", host, check=False)
        rows = [line.split() for line in result.stdout.splitlines()[1:] if line.split()]
        return rows[0][1] if rows else result.stderr.strip()

    def bsub(self, user: str, name: str, *options: str, command: str | None = None,
             wait: bool = True) -> str:
        """Submit a job that runs dump.py NAME (or the shell ``command``); its id."""
        command = command or f"/usr/bin/python3 {self.job_root}/dump.py {name}"
        result = self.command("bsub", "-o", f"{self.job_root}/out/{name}.log", *options,
                              command, user=user)
        found = re.search(r"Job <(\d+)> is submitted", result.stdout)
        assert found, result.stdout + result.stderr
        if wait:
            self.wait_ended(found[1])
        return found[1]

    def jobs(self, job_id: str = "") -> dict[str, str]:
        """Each job's (or array element's) state: ``{"12": "DONE", "13[2]": "EXIT"}``."""
        result = self.command("bjobs", "-a", *([job_id] if job_id else ["-u", "all"]),
                              check=False)
        states = {}
        for line in result.stdout.splitlines()[1:]:
            words = line.split()
            if len(words) >= 3 and words[0].isdigit():
                # An array element's name ends in [index]: its id is ID[index].
                index = re.search(r"\[(\d+)\]$", words[-4] if len(words) >= 7 else "")
                states[words[0] + (f"[{index[1]}]" if index else "")] = words[2]
        return states

    def unfinished(self) -> list[str]:
        return [job for job, state in self.jobs().items() if state not in ("DONE", "EXIT")]

    def wait_ended(self, job_id: str, timeout: float = 120) -> dict[str, str]:
        """Every element of job ``job_id`` DONE or EXIT; their states."""
        deadline = time.monotonic() + timeout
        while True:
            states = self.jobs(job_id)
            if states and all(state in ("DONE", "EXIT") for state in states.values()):
                return states
            if time.monotonic() > deadline:
                raise AssertionError(f"job {job_id} did not end: {states}\n"
                                     f"{self.command('bjobs', '-l', job_id, check=False).stdout}")
            time.sleep(0.5)

    def wait_state(self, job_id: str, wanted: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while wanted not in self.jobs(job_id).values():
            assert time.monotonic() < deadline, f"job {job_id}: {self.jobs(job_id)}"
            time.sleep(0.3)

    def exit_info(self, job_id: str) -> str:
        """``bjobs -l``'s text of a job (its exit code, pre-exec retries...)."""
        return self.command("bjobs", "-l", job_id, check=False).stdout

    job_root: Path


def default_queues(bin_dir: Path = HOOKS_BIN) -> str:
    """Queue ``mjf`` (pre- and post-exec as the job's user) and ``mjfroot`` (as root)."""
    hooks = HOOK_LINES.format(bin=bin_dir)
    return (f"Begin Queue\nQUEUE_NAME = mjf\nPRIORITY = 30\n{hooks}End Queue\n"
            f"Begin Queue\nQUEUE_NAME = mjfroot\nPRIORITY = 30\nPRE_POST_EXEC_USER = root\n"
            f"{hooks}End Queue\n")


@contextlib.contextmanager
def lsf_cluster(queues: str = ""):
    """A started cluster whose hooks use a fresh base_dir (the site config,
    /etc/mjf/mjf.conf, points there), with ``job_root`` (``dump.py``, ``out/``),
    ``mjf_base`` and ``good_config``; everything is stopped and removed afterwards."""
    with mjf_site("mjf-lsf-", DUMP, "lsf") as site:
        install(site.root, {"two.jdl": READERS_JDL})
        cluster = LsfCluster(site.root / "lsf", queues)
        cluster.job_root, cluster.mjf_base = site.root, site.base
        # As docs/lsf.md tells a site whose pre-exec runs as root: bjobs by its path.
        cluster.good_config = site.good_config + f"[lsf]\nbjobs = {PREFIX}/bin/bjobs\n"
        SITE_CONFIG.write_text(cluster.good_config)
        try:
            cluster.start()
            yield cluster
        finally:
            cluster.stop()


def seen(cluster: LsfCluster, name: str) -> dict:
    return seen_in(cluster.job_root / "out" / f"{name}.json")


def mjf(cluster: LsfCluster, *args: str) -> subprocess.CompletedProcess:
    """An admin's `mjf` command, as root."""
    return admin_mjf(cluster.env, *args)
