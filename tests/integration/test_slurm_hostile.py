"""Hostile users on real Slurm clusters (22.05 and 24.11), as real second users.

The scenarios every real batch system runs (:mod:`tests.integration.hostile`), and
Slurm's own: mjfuser1 filling the disk that holds base_dir, planting a symlink at a
base_dir under a public directory, and burying its own job directory under 750,000
directories on a tmpfs. No root write or removal may land outside base_dir, no other
job may be affected, every job must run, and the node must stay up (a failing Prolog
or Epilog would drain it).
"""

from __future__ import annotations

import functools
import os
import subprocess
import time

import pytest

from tests.integration import hostile
from tests.integration.hostile import ATTACKER, VICTIM, wait_for
from tests.integration.job_side import install
from tests.integration.site import SITE_CONFIG
from tests.integration.slurm_cluster import (
    VERSIONS,
    mjf_cluster,
    sbatch,
    seen,
)

pytestmark = pytest.mark.integration


# Runs in mjfuser1's job: fills the filesystem holding base_dir through a directory
# there anyone may write (as /run/lock on Debian), then waits and cleans up.
FILL = r'''
import os, sys, time
out, fill = sys.argv[1], sys.argv[2]
try:
    with open(fill, "wb") as f:
        while True:
            f.write(b"\0" * 65536)
            f.flush()
except OSError as error:
    open(os.path.join(out, "fill.ready"), "w").write(error.strerror)
deadline = time.time() + 90
while not os.path.exists(os.path.join(out, "fill.stop")) and time.time() < deadline:
    time.sleep(0.2)
os.unlink(fill)
'''


@pytest.fixture(scope="module", params=VERSIONS, ids=lambda version: f"slurm-{version}")
def cluster(request):
    # With memory constrained, a job's values are completed by its first task, so its
    # jobfeatures/ belongs to the job's user: the most a user can reach.
    with mjf_cluster(cgroups=True, version=request.param) as slurm:
        hostile.install_job_scripts(slurm.job_root)
        install(slurm.job_root, {"fill.py": FILL})
        yield slurm


def submit(cluster, user: str, command, log: str = "/dev/null", memory: str = "100M") -> str:
    script = command if isinstance(command, str) else " ".join(command)
    result = cluster.as_user(user, ["sbatch", "--parsable", "-c", "1", f"--mem={memory}",
                                    "--time=3", "-o", log, "--wrap", script])
    return result.stdout.strip()


def mjf(cluster, *args: str) -> subprocess.CompletedProcess:
    return cluster.mjf(*args)


def assert_node_up(cluster) -> None:
    cluster.wait_until_no_jobs()
    state = cluster.node_state()
    assert "drain" not in state and state.startswith("idle"), state + cluster.log("slurmd")


@pytest.fixture
def batch(cluster) -> hostile.Batch:
    def run_dump(user, name):
        sbatch(cluster, user, name, "--time=2", "--mem=100M")
        return seen(cluster, name)

    return hostile.Batch(
        cluster.job_root, cluster.mjf_base,
        submit=functools.partial(submit, cluster),
        run_dump=run_dump, job_dir=lambda view: view["env"]["SLURM_JOB_ID"],
        cancel=lambda *ids: cluster.command(["scancel", *ids], check=False),
        mjf=lambda *args: mjf(cluster, *args), assert_up=lambda: assert_node_up(cluster))


def test_nothing_can_be_planted_where_the_next_jobs_go_even_racing_their_prologs(
        batch, cluster, target):
    hostile.nothing_can_be_planted_where_the_next_jobs_go(batch, target, cluster.env)


def test_a_booby_trapped_job_directory_redirects_no_drain_sync_check_or_epilog(batch, target):
    hostile.a_booby_trapped_directory_redirects_nothing(batch, target)


def test_a_user_filling_the_disk_stops_no_job_and_drains_no_node(cluster):
    out = cluster.job_root / "out"
    small = cluster.job_root / "small"
    small.mkdir()
    cluster.mount_tmpfs(small, "size=2m,mode=755")
    base = small / "mjf"
    (small / "lock").mkdir(mode=0o1777)
    (small / "lock").chmod(0o1777)
    try:
        SITE_CONFIG.write_text(cluster.good_config.replace(str(cluster.mjf_base), str(base)))
        sbatch(cluster, VICTIM, "before-fill", "--time=2", "--mem=100M")
        assert seen(cluster, "before-fill")["JOBFEATURES"]["job_id"]
        filler = submit(cluster, ATTACKER, f"/usr/bin/python3 {cluster.job_root}/fill.py {out} "
                        f"{small}/lock/fill", f"{out}/fill.log")
        wait_for(out / "fill.ready", log=out / "fill.log", written=True)
        assert (out / "fill.ready").read_text() == "No space left on device"
        sbatch(cluster, VICTIM, "full-disk", "--time=2", "--mem=100M")
        view = seen(cluster, "full-disk")
        assert view["env"]["JOBFEATURES"] is None  # it ran, without MJF
        assert sorted(os.listdir(base / "jobs")) == [filler]  # nothing half-built
        (out / "fill.stop").touch()
        deadline = time.monotonic() + 30
        while (small / "lock/fill").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        sbatch(cluster, VICTIM, "disk-freed", "--time=2", "--mem=100M")
        assert seen(cluster, "disk-freed")["JOBFEATURES"]["job_id"]  # MJF is back
        assert_node_up(cluster)
        assert os.listdir(base / "jobs") == []
        assert sorted(path.name for path in base.rglob(".*")) == []
    finally:
        (out / "fill.stop").touch()  # the filler ends (and frees the disk) even after a failure
        SITE_CONFIG.write_text(cluster.good_config)
        cluster.wait_until_no_jobs()
        cluster.umount(small)


def test_a_base_dir_a_user_planted_under_a_public_directory_is_refused(cluster, target):
    public = cluster.job_root / "public"
    public.mkdir(mode=0o1777)
    public.chmod(0o1777)
    # The site meant /…/public/mjf; mjfuser1 got there first with a symlink.
    cluster.as_user(ATTACKER, ["ln", "-s", str(target.parent), str(public / "mjf")])
    try:
        SITE_CONFIG.write_text(cluster.good_config.replace(str(cluster.mjf_base),
                                                           str(public / "mjf")))
        sbatch(cluster, VICTIM, "planted-base", "--time=2", "--mem=100M")
        assert seen(cluster, "planted-base")["env"]["JOBFEATURES"] is None  # ran without MJF
        assert_node_up(cluster)
    finally:
        SITE_CONFIG.write_text(cluster.good_config)


def job_states(cluster, job_id: str) -> str:
    return cluster.command(["squeue", "-h", "-j", job_id, "-o", "%T"],
                           check=False).stdout.strip()


def test_what_a_job_buries_in_its_directory_cannot_make_its_epilog_overrun(cluster):
    out = cluster.job_root / "out"
    big = cluster.job_root / "big"
    big.mkdir()
    # base_dir on a tmpfs, as /run/mjf is: there a user makes entries fastest.
    cluster.mount_tmpfs(big, "size=2g,nr_inodes=2m,mode=755")
    base = big / "mjf"
    try:
        SITE_CONFIG.write_text(cluster.good_config.replace(str(cluster.mjf_base), str(base)))
        # What it makes on a tmpfs counts as its memory (the kernel charges the job's
        # cgroup): 100 MiB would not hold it.
        attacker = submit(cluster, ATTACKER, f"/usr/bin/python3 {cluster.job_root}/bury.py "
                          f"{out} 750000", f"{out}/bury.log", memory="3000M")
        wait_for(out / "bury.done", timeout=120, log=out / "bury.log", written=True)
        ended = float((out / "bury.done").read_text())
        # Slurm holds the job COMPLETING while its Epilog runs (and drains the node if
        # it overruns PrologEpilogTimeout).
        while job_states(cluster, attacker) and time.time() - ended < 90:
            time.sleep(0.1)
        epilog_secs = time.time() - ended
        print(f"750,000 entries: the job's end took {epilog_secs:.1f} s")  # shown with -s
        assert epilog_secs < 10, epilog_secs
        assert not (base / "jobs" / attacker).exists()
        # The next, innocent job starts at once: nothing of it is swept in its Prolog.
        started = time.monotonic()
        sbatch(cluster, VICTIM, "after-bury", "--time=2", "--mem=100M")
        assert time.monotonic() - started < 20
        assert seen(cluster, "after-bury")["JOBFEATURES"]["job_id"]
        assert_node_up(cluster)
        # The rest waited out of sight; `mjf sync` (a timer: it blocks no job) removes it.
        synced = mjf(cluster, "sync")
        assert synced.returncode == 0, synced.stderr
        assert sorted(os.listdir(base / "jobs")) == []
        assert sorted(path.name for path in base.rglob(".*")) == []
    finally:
        SITE_CONFIG.write_text(cluster.good_config)
        cluster.wait_until_no_jobs()
        cluster.umount(big)


def test_one_users_garbled_bookkeeping_breaks_no_drain_or_cancel_for_the_others(
        batch, cluster):
    jobs, machine = cluster.mjf_base / "jobs", cluster.mjf_base / "machinefeatures"

    def through_sync(victim, attacker):
        # The same through `mjf sync` following a maintenance reservation that goes away.
        start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() + 7200))
        cluster.command(["scontrol", "create", "reservation", "ReservationName=mjfgarble",
                         f"StartTime={start}", "Duration=10", f"Nodes={cluster.node}",
                         "Flags=MAINT,IGNORE_JOBS", "Users=root"])
        try:
            synced = mjf(cluster, "sync")
            assert "from Slurm maintenance reservation mjfgarble" in synced.stdout, synced.stderr
            assert (jobs / victim / "jobfeatures/shutdowntime_job").exists()
        finally:
            cluster.command(["scontrol", "delete", "reservation=mjfgarble"], check=False)
        synced = mjf(cluster, "sync")
        assert synced.returncode == 0 and "internal error" not in synced.stderr, synced.stderr
        assert "withdrawn" in synced.stdout
        assert not (machine / "shutdowntime").exists()
        for job in (victim, attacker):
            assert not (jobs / job / "jobfeatures/shutdowntime_job").exists(), job

    hostile.garbled_bookkeeping_breaks_no_drain_or_cancel(batch, through_sync)
