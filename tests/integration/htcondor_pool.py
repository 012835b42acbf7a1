"""A throwaway one-machine HTCondor pool, in a Debian trixie chroot, with the installed hooks.

Debian bookworm has no condor package; trixie's (23.9) runs inside a
:class:`~tests.integration.trixie_root.TrixieRoot`. The pool's config.d gets
``contrib/htcondor/mjf.config`` verbatim.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from pathlib import Path

from tests.conftest import ConfigPath, require
from tests.integration.boot_dirs import BootDir, make
from tests.integration.site import ensure_user
from tests.integration.trixie_root import CHECKOUT, TrixieRoot

COMMANDS = ("mjf", "mjf-htcondor-wrapper", "mjf-htcondor-cron", "mjf-htcondor-job-exit")
# The unprivileged user the tests submit as, the chroot, and the site config its
# hooks read (/etc/mjf/mjf.conf inside).
USER = "mjfuser1"
ROOT = Path(os.environ.get("MJF_CONDOR_ROOT", "/srv/mjf-condor-root"))
GOOD_CONFIG = "[machinefeatures]\nhs06 = 123.5\ngrace_secs = 900\n"
# The directories condor's daemons need before they start (the rest they make).
CONFIG_DIRS = ("LOG", "LOCK", "RUN", "SPOOL", "EXECUTE")

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


def condor_arguments(args: list[str]) -> str:
    """The submit file's new-style ``arguments`` value for an exact argv."""
    quoted = ("'" + arg.replace("'", "''").replace('"', '""') + "'" for arg in args)
    return '"' + " ".join(quoted) + '"'


# The prefix of the config.d files a pool gets from ``config_files`` (those of an
# earlier pool that asked for others are removed).
EXTRA_PREFIX = "60-mjf-extra-"


class CondorPool(TrixieRoot):
    """``config_files``: more files (paths outside) for config.d, after mjf.config;
    ``pool_config``: text appended to the CI settings (POOL_CONFIG)."""

    def __init__(self, root: Path, config_files: tuple[Path, ...] = (),
                 pool_config: str = "") -> None:
        super().__init__(root, ("condor",), COMMANDS)
        self.config_files = config_files
        self.pool_config = pool_config

    def prepare(self) -> None:
        super().prepare()
        config_d = self.root / "etc/condor/config.d"
        shutil.copy(CHECKOUT / "contrib/htcondor/mjf.config", config_d / "50-mjf.config")
        for stale in config_d.glob(EXTRA_PREFIX + "*"):
            stale.unlink()
        for path in self.config_files:
            shutil.copy(path, config_d / (EXTRA_PREFIX + path.name))
        (config_d / "90-mjf-ci.config").write_text(POOL_CONFIG + self.pool_config)
        self.make_config_dirs()

    def make_config_dirs(self) -> None:
        """The directories the pool's config names, as condor's postinst makes its LOG on a
        booted system: there ``condor_config_val LOG`` answers ``/var/log/condor``, in a
        fresh chroot it answered another path, and condor_master exits 4 ("cannot chdir
        to dir </var/log/condor>"). The package's tmpfiles.d names only RUN and LOCK."""
        for name in CONFIG_DIRS:
            path = self.chroot(["condor_config_val", name]).stdout.strip()
            make(self.root, BootDir(path, 0o755, "condor", "condor", f"condor_config_val {name}"))

    # Running.
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
        self.unmount()


@contextlib.contextmanager
def condor_pool(config: str = GOOD_CONFIG, config_files: tuple[Path, ...] = (),
                pool_config: str = ""):
    """A started pool whose site config reads ``config`` (and whose HTCondor config has
    ``config_files`` and ``pool_config``, see CondorPool), with a fresh work directory
    (``work``, the user's: the schedd writes the user logs as the user) holding ``out/``,
    where jobs write what they saw; stopped and removed afterwards.

    Besides CondorPool's attributes: ``work``, ``site_config`` (its path, outside the
    chroot) and ``good_config`` (``config``).
    """
    require(os.geteuid() == 0, "needs root to build a chroot and run HTCondor")
    require(shutil.which("debootstrap") is not None or (ROOT / ".mjf-ready").exists(),
            "needs debootstrap (tests/setup-system) or a prepared chroot")
    ensure_user(USER)
    work = Path(tempfile.mkdtemp(prefix="mjf-condor-"))
    work.chmod(0o755)
    shutil.chown(work, USER, USER)
    (work / "out").mkdir()
    (work / "out").chmod(0o1777)
    condor = CondorPool(ROOT, config_files, pool_config)
    condor.prepare()
    condor.site_config = ConfigPath(ROOT / "etc/mjf/mjf.conf")  # replaced atomically
    condor.site_config.parent.mkdir(parents=True, exist_ok=True)
    condor.site_config.write_text(config)
    condor.good_config = config
    condor.work = work
    try:
        condor.start()
        yield condor
    finally:
        condor.stop()
        shutil.rmtree(work, ignore_errors=True)
