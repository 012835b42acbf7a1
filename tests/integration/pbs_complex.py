"""An OpenPBS complex with our hook installed, for the integration tests: one node, and
further moms on this host as further nodes where a test asks (``further_moms``).

OpenPBS 23.06 is built from ``tests/vendor/openpbs/`` into ``/opt/pbs`` by
tests/setup-system (once: the build is cached there). A running complex is used as it
is; otherwise the vendor recipe's ``pbs-up.sh start`` starts one (its daemons in a
private mount namespace, where the host name maps to a non-loopback address) and
``pbs-down.sh`` stops it afterwards. The hook is installed with
``contrib/pbs/install-hook`` for the installed commands and deleted afterwards.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from tests.conftest import require
from tests.integration.boot_dirs import make_boot_dirs
from tests.integration.job_side import dump_script
from tests.integration.site import HOOKS_BIN, admin_mjf, mjf_site, run, seen_in
from tests.integration.site import (
    assert_no_job_directories_left as site_assert_no_job_directories_left,
)

REPO = Path(__file__).resolve().parents[2]
VENDOR = REPO / "tests" / "vendor" / "openpbs"
PBS_EXEC = Path("/opt/pbs")
PBS_HOME = Path("/var/spool/pbs")
HOOK = "mjf"
PBS_CONF = Path("/etc/pbs.conf")
MOM_HOOK = PBS_HOME / "mom_priv" / "hooks" / f"{HOOK}.PY"
ENV = {"PATH": f"{PBS_EXEC}/bin:/usr/bin:/bin:/usr/sbin:/sbin", "PBS_CONF_FILE": "/etc/pbs.conf"}


def pbs_command(name: str, *args: str, check: bool = True,
                timeout: int = 60) -> subprocess.CompletedProcess:
    return run([str(PBS_EXEC / "bin" / name), *args], check=check, env=ENV, cwd="/",
               timeout=timeout)


def qmgr(command: str, check: bool = True) -> subprocess.CompletedProcess:
    return pbs_command("qmgr", "-c", command, check=check)


def server_running() -> bool:
    lock = PBS_HOME / "server_priv" / "server.lock"
    with contextlib.suppress(OSError, ValueError):
        return Path(f"/proc/{int(lock.read_text().split()[0])}").exists() and \
            pbs_command("qstat", "-B", check=False).returncode == 0
    return False


class PBSComplex:
    """The complex, its node name, and the job root where jobs write what they saw."""

    def __init__(self) -> None:
        self.node = socket.gethostname().split(".")[0]
        self.started_here = False
        self.made_conf = False
        self.extra_moms: list[Mom] = []  # further moms of this host (further_moms)

    def start(self) -> None:
        # PBS is no Debian package, but its datastore runs Debian's PostgreSQL.
        make_boot_dirs(Path("/"), ("postgresql-common",))
        if not server_running():
            # /etc/pbs.conf makes `mjf sync` ask PBS on this host: it goes with the daemons.
            self.made_conf = not PBS_CONF.exists()
            run(["bash", str(VENDOR / "pbs-up.sh"), "start"], timeout=300,
                env={**os.environ, "W": "/srv/openpbs-build"})
            self.started_here = True
        qmgr("set server flatuid = True")
        qmgr("set server job_history_enable = True")
        self.wait_node_free()

    def install_hook(self, bindir: Path = HOOKS_BIN) -> subprocess.CompletedProcess:
        """contrib/pbs/install-hook BINDIR, then wait until the mom has that hook."""
        result = run([str(REPO / "contrib" / "pbs" / "install-hook"), str(bindir)],
                     check=False, env={**ENV, "PBS_EXEC": str(PBS_EXEC)})
        if result.returncode == 0:
            self.wait_hook_synced(f"{bindir}/mjf-pbs")
        return result

    def mom_hooks(self) -> list[Path]:
        """Where each mom of this host keeps its copy of the hook (a further mom's
        PBS_HOME is its own)."""
        return [MOM_HOOK, *(mom.home / MOM_HOOK.relative_to(PBS_HOME)
                            for mom in self.extra_moms)]

    def wait_hook_synced(self, command: str, timeout: float = 60,
                         line: str | None = None) -> None:
        """The server sends a hook to the moms a little after qmgr imports it: wait until
        each mom's copy runs ``command`` (and holds ``line``)."""
        deadline = time.monotonic() + timeout
        waiting = self.mom_hooks()
        while waiting and time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                waiting = [path for path in waiting
                           if f'MJF_PBS = "{command}"\n' not in path.read_text()
                           or (line and f"\n{line}\n" not in path.read_text())]
            time.sleep(0.2)
        if waiting:
            raise RuntimeError(f"{', '.join(map(str, waiting))} never got the hook for {command}")

    def change_hook(self, old: str, new: str) -> None:
        """The installed hook with its line ``old`` replaced by ``new``, imported again as
        install-hook does; wait until every mom has it."""
        text = MOM_HOOK.read_text()
        assert f"\n{old}\n" in text, old
        command = text.split('\nMJF_PBS = "', 1)[1].split('"', 1)[0]
        changed = Path(tempfile.mkdtemp()) / "mjf_hook.py"
        try:
            changed.write_text(text.replace(f"\n{old}\n", f"\n{new}\n"))
            qmgr(f"import hook {HOOK} application/x-python default {changed}")
        finally:
            shutil.rmtree(changed.parent)
        self.wait_hook_synced(command, line=new)

    def delete_hook(self) -> None:
        qmgr(f"delete hook {HOOK}", check=False)
        deadline = time.monotonic() + 30
        while any(path.exists() for path in self.mom_hooks()) and time.monotonic() < deadline:
            time.sleep(0.2)

    def node_state(self, node: str | None = None) -> str:
        node = node or self.node
        output = pbs_command("pbsnodes", "-v", node, "-F", "json").stdout
        return json.loads(output)["nodes"][node]["state"]

    def wait_node_free(self, timeout: float = 60, node: str | None = None) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.node_state(node) == "free":
                return
            time.sleep(0.25)
        raise RuntimeError(f"node {node or self.node} is {self.node_state(node)}, not free")

    def job(self, job_id: str) -> dict:
        """``qstat -x -f -F json JOB``'s record of a job (finished ones too)."""
        output = pbs_command("qstat", "-x", "-f", "-F", "json", job_id).stdout
        return json.loads(output)["Jobs"][job_id]

    def wait_finished(self, job_id: str, timeout: float = 90) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            job = self.job(job_id)
            if job["job_state"] in ("F", "H"):  # finished, or held (never should be)
                return job
            time.sleep(0.2)
        raise RuntimeError(f"job {job_id} did not finish: {self.job(job_id)}")

    @staticmethod
    def mom_pid() -> int:
        return int((PBS_HOME / "mom_priv" / "mom.lock").read_text().split()[0])

    def mom_log(self) -> str:
        logs = sorted((PBS_HOME / "mom_logs").glob("*"))
        return logs[-1].read_text(errors="replace")[-4000:] if logs else ""

    def stop(self) -> None:
        listed = pbs_command("qselect", "-x", check=False).stdout.split()
        for job_id in listed:
            pbs_command("qdel", "-W", "force", job_id, check=False)
        self.delete_hook()
        if self.started_here:
            run(["bash", str(VENDOR / "pbs-down.sh")], check=False, timeout=120)
            if self.made_conf:
                PBS_CONF.unlink()


# Runs inside the job as its user: records what the job sees.
# ``dump.py NAME SECONDS``: sleeps that long first.
DUMP = dump_script(("JOBSTATUS", "PBS_JOBID", "PBS_ARRAY_INDEX", "TMPDIR", "NCPUS"),
                   'sys.argv[1] + ("." + index if index else "")', extra=r'''
index = os.environ.get("PBS_ARRAY_INDEX")
if len(sys.argv) > 2:
    import time
    time.sleep(float(sys.argv[2]))
''')


@contextlib.contextmanager
def mjf_complex():
    """A started complex whose hook uses a fresh base_dir (the site config,
    /etc/mjf/mjf.conf, points there); hook, jobs and config are removed afterwards.

    Besides PBSComplex's attributes: ``mjf_base``, ``job_root`` (``dump.py``, ``out/``)
    and ``good_config``.
    """
    require(os.geteuid() == 0, "needs root to run the OpenPBS daemons")
    require((PBS_EXEC / "bin" / "qsub").exists() and (PBS_EXEC / "sbin" / "pbs_mom").exists(),
            "needs OpenPBS built into /opt/pbs (tests/setup-system builds it from "
            "tests/vendor/openpbs)")
    require((HOOKS_BIN / "mjf-pbs").exists(),
            f"needs the hooks installed in {HOOKS_BIN} (tests/run does it)")
    with mjf_site("mjf-pbs-", DUMP, "pbs") as site:
        complex_ = PBSComplex()
        complex_.mjf_base, complex_.job_root = site.base, site.root
        complex_.good_config = site.good_config
        try:
            complex_.start()
            result = complex_.install_hook()
            assert result.returncode == 0, result.stdout + result.stderr
            yield complex_
        finally:
            complex_.stop()


def qsub(complex_: PBSComplex, user: str, name: str, *options: str,
         command: list[str] | None = None, script: Path | None = None,
         wait: bool = True) -> str:
    """Submit a job running dump.py NAME (or ``command``, or the job script ``script``);
    return its id."""
    argv = [str(PBS_EXEC / "bin" / "qsub"), "-N", name[:15], "-j", "oe", "-o",
            f"{complex_.job_root}/out/{name}.log", *options]
    if script:
        argv.append(str(script))
    else:
        argv += ["--", *(command or ["/usr/bin/python3", f"{complex_.job_root}/dump.py",
                                     name])]
    result = run(["runuser", "-u", user, "--", "env", "-i", f"HOME=/home/{user}",
                  f"USER={user}", *[f"{key}={value}" for key, value in ENV.items()], *argv],
                 check=False, cwd="/tmp")
    assert result.returncode == 0, result.stdout + result.stderr
    job_id = result.stdout.strip()
    if wait:
        complex_.wait_finished(job_id)
    return job_id


def seen(complex_: PBSComplex, name: str) -> dict:
    return seen_in(complex_.job_root / "out" / f"{name}.json")


def mjf(*args: str) -> subprocess.CompletedProcess:
    """An admin's `mjf` command, as root."""
    return admin_mjf(ENV, *args)


def assert_no_job_directories_left(complex_: PBSComplex) -> None:
    site_assert_no_job_directories_left(complex_.mjf_base)


# ---------------------------------------------------------------- further moms

# Several moms on one host, as OpenPBS's own test framework runs them (PTL's
# Server.create_moms): each its own pbs.conf and PBS_HOME, and its own ports, the
# manager's one above the mom's (PBS requires it), from PTL's first; the node is created
# with that port. PBS_MOM_NODE_NAME makes the mom's natural vnode (and
# pbs.get_local_nodename() in its hooks) the node's name, not the host's.
FIRST_MOM_PORT = 15011
MOMS_DIR = Path("/var/spool/pbs-mjf-moms")  # their PBS_HOMEs: PBS wants root's path there


@dataclasses.dataclass(frozen=True)
class MomSpec:
    """A further mom: its node's name suffix, what PBS may place there, and its MJF
    config's hs06 per CPU (total_cpu is the node's ncpus)."""

    suffix: str
    ncpus: int
    mem_mib: int
    hs06_per_cpu: int


@dataclasses.dataclass
class Mom:
    """A further mom: ``base`` is where its share of MJF lies seen from here (in its
    own mount namespace it is the site's base_dir), ``etc`` its /etc/mjf."""

    spec: MomSpec
    name: str
    port: int
    home: Path
    base: Path
    etc: Path
    pid: int = 0

    def config(self, base_dir: Path, extra: str = "") -> str:
        """Its /etc/mjf/mjf.conf's text (``extra``: further sections); it names PBS, as
        site.GOOD_CONFIG names the batch system under test."""
        return (f"[mjf]\nbase_dir = {base_dir}\nbatch_systems = pbs\n[machinefeatures]\n"
                f"hs06_per_cpu = {self.spec.hs06_per_cpu}\ntotal_cpu = {self.spec.ncpus}\n"
                f"grace_secs = 600\n{extra}")

    def mjf(self, *args: str) -> subprocess.CompletedProcess:
        """An admin's `mjf` command on this mom's node: in its mount namespace."""
        return admin_mjf(ENV, *args, prefix=tuple(self.in_namespace()))

    def in_namespace(self) -> list[str]:
        """A command's prefix that runs it as this mom's hooks run: in its mount
        namespace (its /etc/pbs.conf, /etc/mjf and base_dir)."""
        return ["nsenter", "-t", str(self.pid), "-m"]

    def log(self) -> str:
        logs = sorted((self.home / "mom_logs").glob("*"))
        return logs[-1].read_text(errors="replace")[-4000:] if logs else ""


def _pbs_conf_with(text: str, settings: dict[str, str]) -> str:
    kept = [line for line in text.splitlines() if line.partition("=")[0] not in settings]
    return "\n".join([*kept, *(f"{name}={value}" for name, value in settings.items())]) + "\n"


def _start_mom(complex_: PBSComplex, mom: Mom, pbs_conf: Path) -> None:
    """pbs_init.d start in a mount namespace of the mom's own, made inside the one the
    recipe started the daemons in (its /etc/hosts): there /etc/pbs.conf, /etc/mjf and
    the site's base_dir are the mom's. The mom daemonises; its pid is its mom.lock's."""
    script = (f"mount --bind {pbs_conf} /etc/pbs.conf && mount --bind {mom.etc} /etc/mjf && "
              f"mount --bind {mom.base} {complex_.mjf_base} && "
              f"exec {PBS_EXEC}/libexec/pbs_init.d start")
    run(["nsenter", "-t", str(complex_.mom_pid()), "-m", "unshare", "-m",
         "--propagation", "private", "sh", "-c", script], timeout=120)
    lock = mom.home / "mom_priv" / "mom.lock"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError, IndexError):
            mom.pid = int(lock.read_text().split()[0])
            return
        time.sleep(0.1)
    raise RuntimeError(f"mom {mom.name} wrote no {lock}")


def _stop_mom(mom: Mom) -> None:
    """SIGTERM to the mom this harness started, by the pid its lock named (its jobs are
    deleted first); its mount namespace goes with its last process."""
    if not mom.pid:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(mom.pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while Path(f"/proc/{mom.pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)


@contextlib.contextmanager
def further_moms(complex_: PBSComplex, specs: tuple[MomSpec, ...]):
    """Further moms on this host beside the complex's own, each a node of the complex
    (named ``<host>-<suffix>``) with ``resources_available`` from its spec and an MJF of
    its own; nodes, moms, their homes and files removed afterwards."""
    host_conf = PBS_CONF.read_text()
    # The mount point of each mom's base_dir, which the complex's own mom makes later.
    complex_.mjf_base.mkdir(mode=0o755, exist_ok=True)
    made: list[Mom] = []
    try:
        for index, spec in enumerate(specs):
            name = f"{complex_.node}-{spec.suffix}"
            files = complex_.job_root / "moms" / name
            mom = Mom(spec, name, FIRST_MOM_PORT + 2 * index, MOMS_DIR / name,
                      files / "mjf", files / "etc-mjf")
            made.append(mom)
            for directory in (mom.base, mom.etc):
                directory.mkdir(parents=True, mode=0o755)
            (mom.etc / "mjf.conf").write_text(mom.config(complex_.mjf_base))
            pbs_conf = files / "pbs.conf"
            pbs_conf.write_text(_pbs_conf_with(host_conf, {
                "PBS_HOME": str(mom.home), "PBS_START_SERVER": "0", "PBS_START_SCHED": "0",
                "PBS_START_COMM": "0", "PBS_START_MOM": "1",
                "PBS_MOM_SERVICE_PORT": str(mom.port),
                "PBS_MANAGER_SERVICE_PORT": str(mom.port + 1),
                "PBS_MOM_NODE_NAME": name}))
            _start_mom(complex_, mom, pbs_conf)
            # The server keeps its nodes: one of this name is one a run killed midway left.
            qmgr(f"delete node {name}", check=False)
            # place=scatter places chunks on distinct hosts: each node is a host of its own.
            qmgr(f"create node {name} Mom={complex_.node},port={mom.port},"
                 f"resources_available.host={name}")
            qmgr(f"set node {name} resources_available.ncpus = {spec.ncpus}")
            qmgr(f"set node {name} resources_available.mem = {spec.mem_mib}mb")
            complex_.extra_moms.append(mom)
        for mom in made:
            complex_.wait_node_free(node=mom.name)
        complex_.wait_hook_synced(f"{HOOKS_BIN}/mjf-pbs")
        yield made
    finally:
        # A node with a job is not deleted: the moms' jobs go first.
        for job_id in pbs_command("qselect", check=False).stdout.split():
            pbs_command("qdel", "-W", "force", job_id, check=False)
        for mom in made:
            qmgr(f"delete node {mom.name}", check=False)
            _stop_mom(mom)
            shutil.rmtree(mom.home, ignore_errors=True)
        with contextlib.suppress(OSError):
            MOMS_DIR.rmdir()
        complex_.extra_moms = [mom for mom in complex_.extra_moms if mom not in made]
