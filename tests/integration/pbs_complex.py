"""A one-node OpenPBS complex with our hook installed, for the integration tests.

OpenPBS 23.06 is built from ``tests/vendor/openpbs/`` into ``/opt/pbs`` by
tests/setup-system (once: the build is cached there). A running complex is used as it
is; otherwise the vendor recipe's ``pbs-up.sh start`` starts one (its daemons in a
private mount namespace, where the host name maps to a non-loopback address) and
``pbs-down.sh`` stops it afterwards. The hook is installed with
``contrib/pbs/install-hook`` for the installed commands and deleted afterwards.
"""

from __future__ import annotations

import contextlib
import json
import os
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

    def wait_hook_synced(self, command: str, timeout: float = 60) -> None:
        """The server sends a hook to the moms a little after qmgr imports it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                if f'MJF_PBS = "{command}"' in MOM_HOOK.read_text():
                    return
            time.sleep(0.2)
        raise RuntimeError(f"the mom never got the hook for {command}")

    def delete_hook(self) -> None:
        qmgr(f"delete hook {HOOK}", check=False)
        deadline = time.monotonic() + 30
        while MOM_HOOK.exists() and time.monotonic() < deadline:
            time.sleep(0.2)

    def node_state(self) -> str:
        output = pbs_command("pbsnodes", "-v", self.node, "-F", "json").stdout
        return json.loads(output)["nodes"][self.node]["state"]

    def wait_node_free(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.node_state() == "free":
                return
            time.sleep(0.25)
        raise RuntimeError(f"node {self.node} is {self.node_state()}, not free")

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
    with mjf_site("mjf-pbs-", DUMP) as site:
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
