"""What every real batch system's tests set up around its daemons, and check afterwards.

A job root (``dump.py``, the batch system's job-side recorder, and ``out/``, where jobs
write what they saw), the submitting users, and the site config (/etc/mjf/mjf.conf)
pointing at a fresh base_dir; all restored afterwards.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from tests.conftest import ConfigPath, run
from tests.integration.job_side import install

USERS = ("mjfuser1", "mjfuser2")
# Rewritten by tests while jobs may still be ending: replaced atomically (ConfigPath).
SITE_CONFIG = ConfigPath("/etc/mjf/mjf.conf")
HOOKS_BIN = Path(os.environ.get("MJF_HOOKS_BIN", "/opt/mjf-hooks-ci/venv/bin"))
# This host has every batch system's commands (and a Grid Engine cell): as a site names
# what its nodes run, the config names the one under test, so `mjf sync` asks no other
# (whose query, with no daemon of it running, fails the pass).
GOOD_CONFIG = ("[mjf]\nbase_dir = {base}\nbatch_systems = {batch_system}\n"
               "[machinefeatures]\nhs06_per_cpu = 10\ngrace_secs = 600\n")


def ensure_user(name: str) -> tuple[int, int]:
    """An unprivileged user (uid >= 1000) for submitting jobs, with its home directory
    (a batch system starts the job there; a user kept from an earlier run may have lost
    it with the machine's /home)."""
    import pwd

    if run(["id", "-u", name], check=False).returncode != 0:
        run(["useradd", "--create-home", "--shell", "/bin/sh", name])
    entry = pwd.getpwnam(name)
    home = Path(entry.pw_dir)
    if not home.is_dir():
        home.mkdir(mode=0o700, parents=True)
        os.chown(home, entry.pw_uid, entry.pw_gid)
    return entry.pw_uid, entry.pw_gid


class Site:
    """``root`` (holds ``dump.py`` and ``out/``), ``base`` (the base_dir) and
    ``good_config`` (the site config's text, to restore after breaking it), for nodes
    that run ``batch_system``."""

    def __init__(self, root: Path, batch_system: str) -> None:
        self.root = root
        self.base = root / "mjf"
        self.good_config = GOOD_CONFIG.format(base=self.base, batch_system=batch_system)


@contextlib.contextmanager
def mjf_site(prefix: str, dump: str, batch_system: str, parent: str | None = None):
    """A job root (in ``parent``, else the usual temporary directory) with ``dump`` as
    ``dump.py``, the users, and the site config of nodes that run ``batch_system``; the
    config (and its directory, if made here) and the job root are removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    root.chmod(0o755)
    (root / "out").mkdir(mode=0o1777)
    (root / "out").chmod(0o1777)
    install(root, {"dump.py": dump})
    for user in USERS:
        ensure_user(user)
    saved = SITE_CONFIG.read_bytes() if SITE_CONFIG.exists() else None
    made_parent = not SITE_CONFIG.parent.exists()
    SITE_CONFIG.parent.mkdir(parents=True, exist_ok=True)
    site = Site(root, batch_system)
    SITE_CONFIG.write_text(site.good_config)
    try:
        yield site
    finally:
        if saved is None:
            SITE_CONFIG.unlink()
            if made_parent:
                SITE_CONFIG.parent.rmdir()
        else:
            SITE_CONFIG.write_bytes(saved)
        shutil.rmtree(root, ignore_errors=True)


def admin_mjf(env: dict[str, str], *args: str,
              prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """An admin's `mjf` command, as root, with the site config; a hang is a failure.
    ``prefix``: what runs it (``nsenter ...``: on another node of this host)."""
    return subprocess.run([*prefix, str(HOOKS_BIN / "mjf"), *args], capture_output=True,
                          text=True, timeout=60, env={**env, "MJF_CONFIG": str(SITE_CONFIG)})


def seen_in(path: Path) -> dict:
    """What a job's dump.py wrote to ``path``, once it is there."""
    deadline = time.monotonic() + 30
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    return json.loads(path.read_text())


def job_values(view: dict, base: Path, job_dir: str, submitted: float) -> dict:
    """The job's values from a dump, after checking what every job sees alike: the
    variables, the machine features of the site config, a start time and a scratch
    size; those two are taken out (they vary)."""
    assert view["env"]["MACHINEFEATURES"] == f"{base}/machinefeatures"
    assert view["env"]["JOBFEATURES"] == f"{base}/jobs/{job_dir}/jobfeatures"
    assert view["MACHINEFEATURES"] == {"grace_secs": "600", "hs06": str(10 * os.cpu_count()),
                                       "total_cpu": str(os.cpu_count())}
    job = dict(view["JOBFEATURES"])
    assert abs(int(job.pop("jobstart_secs")) - submitted) < 30
    assert int(job.pop("scratch_limit_bytes")) > 0
    return job


def assert_no_job_directories_left(base: Path) -> None:
    """No job's directory is left in ``base/jobs``: what a job's end had no time to
    remove waits there under a hidden trash name for `mjf sync`, and is not one."""
    jobs = base / "jobs"

    def left() -> list[str]:
        return sorted(name for name in os.listdir(jobs) if not name.startswith(".")) \
            if jobs.exists() else []

    deadline = time.monotonic() + 30
    while left() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left() == [], f"job directories left in {jobs}: {left()}"


# Job records (``[records]``), for the batch systems' record tests.
SITE = "MJF-TEST-SITE"


def records_config(directory: Path) -> str:
    return f"[records]\ndir = {directory}\nformat = sss, apel\nsite = {SITE}\n"


def record_files(directory: Path, timeout: float = 30) -> list[Path]:
    """The records' JSON files in ``directory``'s day directories, once there are some."""
    deadline = time.monotonic() + timeout
    while True:
        found = sorted(directory.glob("[0-9]*-*-*/*.json"))
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)
