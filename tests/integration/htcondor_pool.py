"""A throwaway one-machine HTCondor pool, in a Debian trixie chroot, with the installed hooks.

Debian bookworm has no condor package; trixie's (23.9) runs inside a debootstrap
chroot (``build-condor-root``, kept between runs). The checkout, /tmp and /home
are bind-mounted at the same paths, so files written by jobs are visible
outside. The hooks are installed inside with the chroot's own Python, from
wheels built outside, and linked to /usr/bin as a package would put them; the
pool's config.d gets ``contrib/htcondor/mjf.config`` verbatim.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
VENV = "/opt/mjf/venv"
COMMANDS = ("mjf", "mjf-htcondor-wrapper", "mjf-htcondor-cron")

POOL_CONFIG = """\
CONDOR_HOST = 127.0.0.1
NETWORK_INTERFACE = 127.0.0.1
use ROLE : CentralManager
use ROLE : Submit
use ROLE : Execute
use FEATURE : PartitionableSlot
SEC_DEFAULT_AUTHENTICATION_METHODS = FS
ALLOW_READ = *
ALLOW_WRITE = *
ALLOW_NEGOTIATOR = *
ALLOW_ADMINISTRATOR = *
ALLOW_DAEMON = *
# The chroot's root is not a mount point: without this every job is held.
MOUNT_UNDER_SCRATCH =
NEGOTIATOR_INTERVAL = 2
NEGOTIATOR_CYCLE_DELAY = 1
SCHEDD_INTERVAL = 2
UPDATE_INTERVAL = 2
STARTER_UPDATE_INTERVAL = 2
STARTD_CRON_MJF_PERIOD = 5s
"""


def run(argv, check=True, timeout=120, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=check, timeout=timeout, capture_output=True, text=True,
                          **kwargs)


def condor_arguments(args: list[str]) -> str:
    """The submit file's new-style ``arguments`` value for an exact argv."""
    quoted = ("'" + arg.replace("'", "''").replace('"', '""') + "'" for arg in args)
    return '"' + " ".join(quoted) + '"'


class CondorPool:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.mounts: list[str] = []
        self.env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}

    # Building and installing.
    def prepare(self) -> None:
        run([str(CHECKOUT / "tests/integration/build-condor-root"), str(self.root)],
            timeout=900)
        wheels = self.root / "opt/mjf/wheels"
        shutil.rmtree(wheels, ignore_errors=True)
        wheels.mkdir(parents=True)
        run([sys.executable, "-m", "pip", "wheel", "--quiet", "-w", str(wheels), str(CHECKOUT)],
            timeout=600)
        self.chroot(["rm", "-rf", VENV])
        self.chroot(["python3", "-m", "venv", VENV])
        self.chroot([f"{VENV}/bin/pip", "install", "--quiet", "--no-index", "--find-links",
                     "/opt/mjf/wheels", "mjf-hooks"], timeout=300)
        for command in COMMANDS:
            self.chroot(["ln", "-sf", f"{VENV}/bin/{command}", f"/usr/bin/{command}"])
        self.copy_users()
        config_d = self.root / "etc/condor/config.d"
        shutil.copy(CHECKOUT / "contrib/htcondor/mjf.config", config_d / "50-mjf.config")
        (config_d / "90-mjf-ci.config").write_text(POOL_CONFIG)

    def copy_users(self) -> None:
        """Users with uid >= 1000 exist inside too, so jobs run as them."""
        for name in ("passwd", "group"):
            inside = (self.root / "etc" / name).read_text().splitlines()
            known = {line.split(":")[0] for line in inside}
            extra = [line for line in Path(f"/etc/{name}").read_text().splitlines()
                     if line.split(":")[0] not in known
                     and 1000 <= int(line.split(":")[2]) < 65534]
            (self.root / "etc" / name).write_text("\n".join(inside + extra) + "\n")

    def chroot(self, argv: list[str], user: str | None = None, timeout: int = 120,
               check: bool = True) -> subprocess.CompletedProcess:
        spec = [f"--userspec={user}:{user}"] if user else []
        return run(["chroot", *spec, str(self.root), *argv], env=self.env, timeout=timeout,
                   check=check)

    # Running.
    def mount(self) -> None:
        binds = [("proc", None), ("/sys", "rbind"), ("/dev", "bind"), ("/dev/pts", "bind"),
                 ("/tmp", "bind"), ("/home", "bind"), (str(CHECKOUT), "bind")]
        for source, kind in binds:
            target = self.root / source.lstrip("/") if kind else self.root / "proc"
            target.mkdir(parents=True, exist_ok=True)
            if kind is None:
                run(["mount", "-t", "proc", "proc", str(target)])
            else:
                run(["mount", f"--{kind}", source, str(target)])
                if kind == "rbind":
                    run(["mount", "--make-rslave", str(target)])
            self.mounts.append(str(target))

    def start(self) -> None:
        # A fresh pool: no queue, sandboxes, logs or MJF state left from an earlier run.
        for state in ("var/spool/condor", "var/lib/condor/execute", "var/log/condor", "run/mjf"):
            directory = self.root / state
            for entry in directory.iterdir() if directory.exists() else ():
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
        self.mount()
        self.chroot(["/usr/sbin/condor_master"])
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            status = self.chroot(["condor_status", "-af", "Name"], check=False)
            if status.returncode == 0 and status.stdout.strip():
                return
            time.sleep(0.5)
        raise RuntimeError("the pool did not come up:\n" + self.log("MasterLog")
                           + self.log("StartLog"))

    def log(self, name: str) -> str:
        path = self.root / "var/log/condor" / name
        return path.read_text()[-4000:] if path.exists() else f"(no {name})"

    def submit(self, user: str, submit_file: Path) -> None:
        result = self.chroot(["condor_submit", str(submit_file)], user=user, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"condor_submit failed: {result.stdout}{result.stderr}")

    def wait(self, user: str, log: Path, timeout: int = 180) -> str:
        """Wait for every job of a user log to end; return the log."""
        result = self.chroot(["condor_wait", "-wait", str(timeout), str(log)], user=user,
                             timeout=timeout + 30, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"jobs did not finish: {result.stdout}{result.stderr}\n"
                               + (log.read_text() if log.exists() else "(no user log)")
                               + self.log("SchedLog") + self.log("StartLog")
                               + self.log("StarterLog.slot1_1"))
        return log.read_text()

    def machine_ads(self) -> str:
        return self.chroot(["condor_status", "-l"]).stdout

    def stop(self) -> None:
        self.chroot(["condor_off", "-master"], check=False)
        deadline = time.monotonic() + 60
        while self.processes() and time.monotonic() < deadline:
            time.sleep(0.5)
        for pid in self.processes():
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        # Deepest first: bind mounts defeat any removal that would cross them.
        for target in reversed(self.mounts):
            run(["umount", "-R", target], check=False)
        self.mounts.clear()

    def processes(self) -> list[int]:
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if os.readlink(entry / "root") == str(self.root):
                        found.append(int(entry.name))
                except OSError:
                    continue
        return found
