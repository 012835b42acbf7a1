"""Each quick-start page (docs/quickstart-<batch system>.md) run as written, against the
real batch system of its integration tests: one job each.

The page's blocks (tests/integration/quickstart.py) are the test's: its config is written
where it says (a drop-in beside the site config), its hook lines are the ones in force
(the harness's own taken out first, or replaced), its job is typed by an unprivileged user
in an empty directory of theirs, and what that prints must be the page's output. What the
page names as on a real node is mapped to where the harness has it, explicitly, per
batch system (``PATHS``). The install line is not run here (tests/unit/test_docs_quickstarts.py
checks it against the packaging).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.conftest import run
from tests.integration import quickstart
from tests.integration.site import HOOKS_BIN, SITE_CONFIG, assert_no_job_directories_left

pytestmark = pytest.mark.integration

USER = "mjfuser1"
CONTRIB = str(quickstart.CHECKOUT / "contrib") + "/"
# Where each page's paths are in its harness. The package's commands (/usr/bin) are the
# hooks tests/run installs (HOOKS_BIN), but in the HTCondor pool's chroot, which links
# them into its /usr/bin; the package's copy of contrib/ is this checkout's (the chroot
# mounts the checkout at its own path). The site config is the host's /etc/mjf/mjf.conf
# (the chroot's, for HTCondor), as on a node.
PATHS = {
    "slurm": {"/usr/bin/": f"{HOOKS_BIN}/"},
    "htcondor": {"/usr/share/doc/mjf-hooks/contrib/": CONTRIB},
    "gridengine": {"/usr/bin/": f"{HOOKS_BIN}/", "/usr/share/doc/mjf-hooks/contrib/": CONTRIB},
    "pbs": {"/usr/share/doc/mjf-hooks/contrib/": CONTRIB, "/usr/bin": str(HOOKS_BIN)},
    "lsf": {"/usr/bin/": f"{HOOKS_BIN}/"},
}


@contextlib.contextmanager
def config_written(page: quickstart.Page, etc_mjf: Path):
    """The page's config where it says, ``/etc/mjf/`` being ``etc_mjf``; removed
    afterwards (with its directory, if made here)."""
    target = etc_mjf / page.config_path[len("/etc/mjf/"):]
    made = not target.parent.exists()
    target.parent.mkdir(parents=True, exist_ok=True)
    assert not target.exists(), f"{target} is there already"
    target.write_text(page.config)
    target.chmod(0o644)
    try:
        yield target
    finally:
        target.unlink()
        if made:
            target.parent.rmdir()


@contextlib.contextmanager
def user_directory(parent: str | None = None):
    """An empty directory of the user's, where the job is typed (and its files go)."""
    directory = Path(tempfile.mkdtemp(prefix="mjf-quickstart-", dir=parent))
    shutil.chown(directory, USER, USER)
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def as_user(directory: Path, env: dict[str, str], script: str):
    """``script`` typed by the user in ``directory``, with the batch system's
    environment and nothing else; what it prints on either stream, as a terminal shows it."""
    return subprocess.run(
        ["runuser", "-u", USER, "--", "env", "-i", f"HOME=/home/{USER}", f"USER={USER}",
         *(f"{key}={value}" for key, value in env.items()), "sh", "-c", script],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=str(directory),
        timeout=180)


def assert_printed(page: quickstart.Page, result, context: str = "") -> None:
    assert result.returncode == 0 and quickstart.matches(page.output, result.stdout), (
        f"exit {result.returncode}\n--- printed:\n{result.stdout}\n--- expected:\n"
        f"{page.output}\n---\n{context}")


def run_slurm(page: quickstart.Page) -> None:
    from tests.integration.slurm_cluster import mjf_cluster

    hooks = quickstart.mapped(page.hooks, PATHS["slurm"])
    with mjf_cluster(cgroups=False, hook_lines=hooks) as cluster, \
            config_written(page, SITE_CONFIG.parent), user_directory() as directory:
        conf = cluster.conf.read_text()
        assert all(line in conf.splitlines() for line in hooks.splitlines())
        assert_printed(page, as_user(directory, cluster.env, page.job),
                       cluster.log("slurmd"))


def run_htcondor(page: quickstart.Page) -> None:
    from tests.integration.htcondor_pool import condor_pool

    # The package's mjf.conf: all defaults (comments).
    with condor_pool(config="") as pool, config_written(page, pool.site_config.parent), \
            user_directory(str(pool.work)) as directory:
        pool.chroot(["sh", "-ec", quickstart.mapped(page.hooks, PATHS["htcondor"])])
        env = " ".join(f"{key}={value}" for key, value in pool.env.items())
        result = pool.chroot(["sh", "-c", f"cd {directory} && exec env -i HOME=/home/{USER} "
                              f"USER={USER} {env} sh -c \"$0\" 2>&1", page.job], user=USER,
                             check=False, timeout=180)
        assert_printed(page, result, pool.log("StarterLog.slot1_1"))


def run_gridengine(page: quickstart.Page) -> None:
    from tests.integration.gridengine_cell import ENV, QUEUE, mjf_cell, qconf

    hooks = quickstart.mapped(page.hooks, {**PATHS["gridengine"], " all.q": f" {QUEUE}"})
    with mjf_cell() as cell, config_written(page, SITE_CONFIG.parent), \
            user_directory() as directory:
        # Only the page's hooks: the harness's taken out of the queue first.
        for attribute in ("prolog", "epilog", "starter_method"):
            qconf("-mattr", "queue", attribute, "NONE", QUEUE)
        qconf("-dp", "smp", check=False)  # left by a run killed before its clean-up
        try:
            run(["sh", "-ec", hooks], env=ENV, cwd="/")
            assert_printed(page, as_user(directory, ENV, page.job), cell.messages())
        finally:
            qconf("-dattr", "queue", "pe_list", "smp", QUEUE, check=False)
            qconf("-dp", "smp", check=False)


def run_pbs(page: quickstart.Page) -> None:
    from tests.integration.pbs_complex import ENV, mjf_complex

    with mjf_complex() as complex_, config_written(page, SITE_CONFIG.parent), \
            user_directory() as directory:
        complex_.delete_hook()  # only the page's hook: the harness's taken out first
        run(["sh", "-ec", quickstart.mapped(page.hooks, PATHS["pbs"])], env=ENV, cwd="/")
        complex_.wait_hook_synced(f"{HOOKS_BIN}/mjf-pbs")
        assert_printed(page, as_user(directory, ENV, page.job), complex_.mom_log())


def run_lsf(page: quickstart.Page) -> None:
    from tests.integration.lsf_cluster import default_queues, lsf_cluster

    # The page's queue beside the harness's (lsb.params names its default queue).
    queues = default_queues() + quickstart.mapped(page.hooks, PATHS["lsf"])
    # Its hooks run as the job's user, who may not write base_dir: they write in the
    # user's own directory (docs/lsf.md), removed afterwards unless it was there before.
    private = Path(f"/tmp/mjf-{pwd.getpwnam(USER).pw_uid}")
    existed = private.exists()
    with lsf_cluster(queues) as cluster, config_written(page, SITE_CONFIG.parent), \
            user_directory() as directory:
        assert_printed(page, as_user(directory, cluster.env, page.job), cluster.logs())
    if not existed and private.exists():
        assert_no_job_directories_left(private)
        shutil.rmtree(private)


RUNS = {"slurm": run_slurm, "htcondor": run_htcondor, "gridengine": run_gridengine,
        "pbs": run_pbs, "lsf": run_lsf}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_the_quick_start_runs_as_written(name):
    require_root()
    RUNS[name](quickstart.page(name))


def require_root() -> None:
    from tests.conftest import require

    require(os.geteuid() == 0, "needs root to run the batch systems' daemons")
