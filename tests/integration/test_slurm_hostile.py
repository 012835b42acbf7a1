"""Hostile users on a real Slurm 22.05 cluster, as real second users.

mjfuser1 attacks; mjfuser2's jobs are the victims. Whatever mjfuser1 does -
planting symlinks and directories where the next jobs' directories go, racing
the hooks with rename/symlink loops, filling the disk that holds base_dir,
burying its own job directory under thousands of locked directories and FIFOs,
planting a symlink at a base_dir under a public directory - no root write or
removal may land outside base_dir, no other job may be affected, every job
must run, and the node must stay up (a failing Prolog or Epilog would drain
it).
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.job_side import BURY, GARBLE, TRAPS
from tests.integration.slurm_cluster import (
    HOOKS_BIN,
    SITE_CONFIG,
    assert_no_job_directories_left,
    mjf_cluster,
    sbatch,
    seen,
)

pytestmark = pytest.mark.integration

ATTACKER, VICTIM = "mjfuser1", "mjfuser2"


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


@pytest.fixture(scope="module")
def cluster():
    # With memory constrained, a job's values are completed by its first task, so its
    # jobfeatures/ belongs to the job's user: the most a user can reach.
    with mjf_cluster(cgroups=True) as slurm:
        for name, text in (("traps.py", TRAPS), ("fill.py", FILL), ("bury.py", BURY),
                           ("garble.py", GARBLE)):
            (slurm.job_root / name).write_text(text)
            (slurm.job_root / name).chmod(0o644)
        yield slurm


@pytest.fixture
def target(cluster):
    """A root file outside base_dir that no hook may write, follow or remove."""
    directory = cluster.job_root / "outside"
    directory.mkdir(exist_ok=True)
    path = directory / "target"
    path.write_text("precious\n")
    yield path
    assert path.read_text() == "precious\n" and path.stat().st_uid == 0
    assert sorted(os.listdir(directory)) == ["target"]


def wait_for(path: Path, timeout: float = 60, log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} did not appear" + (
            f": {log.read_text()[-2000:]}" if log and log.exists() else "")
        time.sleep(0.1)


def submit(cluster, user: str, script: str, log: str = "/dev/null", memory: str = "100M") -> str:
    result = cluster.as_user(user, ["sbatch", "--parsable", "-c", "1", f"--mem={memory}",
                                    "--time=3", "-o", log, "--wrap", script])
    return result.stdout.strip()


def mjf(cluster, *args: str) -> subprocess.CompletedProcess:
    """An admin's `mjf` command, as root; a hang is a failure (timeout)."""
    return subprocess.run([str(HOOKS_BIN / "mjf"), *args], capture_output=True, text=True,
                          timeout=60, env={**cluster.env, "MJF_CONFIG": str(SITE_CONFIG)})


def assert_node_up(cluster) -> None:
    cluster.wait_until_no_jobs()
    state = cluster.node_state()
    assert "drain" not in state and state.startswith("idle"), state + cluster.log("slurmd")


def test_nothing_can_be_planted_where_the_next_jobs_go_even_racing_their_prologs(
        cluster, target):
    jobs = cluster.mjf_base / "jobs"
    victim = submit(cluster, VICTIM, "sleep 20")
    wait_for(jobs / victim / "jobfeatures")
    # While victims start, mjfuser1 loops planting symlinks, directories and renames at
    # the ids they will get, and inside the running victim's directory.
    planted = subprocess.Popen(
        ["runuser", "-u", ATTACKER, "--", "/bin/sh", "-c", f'''
        end=$(( $(date +%s) + 8 )); tries=0; made=0
        while [ $(date +%s) -lt $end ]; do
            for id in $(seq {int(victim) + 1} {int(victim) + 6}); do
                tries=$((tries + 1))
                ln -s {target} {jobs}/$id 2>/dev/null && made=$((made + 1))
                mkdir {jobs}/$id 2>/dev/null && made=$((made + 1))
                ln -s {target} {jobs}/.new-$id 2>/dev/null && made=$((made + 1))
                mv -T {jobs}/{victim} {jobs}/$id 2>/dev/null && made=$((made + 1))
                ln -s {target} {jobs}/{victim}/jobfeatures/shutdowntime_job 2>/dev/null \
                    && made=$((made + 1))
            done
        done
        echo "$tries $made"'''], stdout=subprocess.PIPE, text=True, env=cluster.env)
    names = [f"planted-{index}" for index in range(3)]
    for name in names:
        sbatch(cluster, VICTIM, name, "--time=2", "--mem=100M")
    tries, made = map(int, planted.communicate(timeout=60)[0].split())
    assert tries > 0 and made == 0  # every attempt was refused by the kernel
    for name in names:
        view = seen(cluster, name)
        assert view["JOBFEATURES"]["job_id"] == view["env"]["SLURM_JOB_ID"]
        assert view["env"]["JOBFEATURES"] == \
            f"{cluster.mjf_base}/jobs/{view['env']['SLURM_JOB_ID']}/jobfeatures"
    subprocess.run(["scancel", victim], env=cluster.env, check=False)
    assert_node_up(cluster)
    assert_no_job_directories_left(cluster)


def test_a_booby_trapped_job_directory_redirects_no_drain_sync_check_or_epilog(
        cluster, target):
    out = cluster.job_root / "out"
    jobs = cluster.mjf_base / "jobs"
    victim = submit(cluster, VICTIM, "sleep 60")
    wait_for(jobs / victim / "jobfeatures")
    attacker = submit(cluster, ATTACKER, f"/usr/bin/python3 {cluster.job_root}/traps.py "
                      f"{target} {jobs / victim / 'jobfeatures'} {out}", f"{out}/traps.log")
    wait_for(out / "traps.ready", log=out / "traps.log")
    try:
        for round_number in range(12):  # the job races every one of these
            drained = mjf(cluster, "drain", "--in", f"{2 + round_number % 2}h")
            assert drained.returncode == 0, drained.stderr
            assert "internal error" not in drained.stderr
            assert mjf(cluster, "sync").returncode == 0
        # What mjf check and mjf show make of it: a report, not a hang or a crash.
        checked = mjf(cluster, "check", str(jobs / attacker))
        assert checked.returncode in (1, 2) and "Traceback" not in checked.stderr
        assert mjf(cluster, "show", str(jobs / attacker)).returncode in (0, 1)
        shutdown = (cluster.mjf_base / "machinefeatures/shutdowntime").read_text()
        assert (jobs / victim / "jobfeatures/shutdowntime_job").read_text() == shutdown
    finally:
        (out / "traps.stop").touch()
    wait_for(out / "traps.done")
    assert int((out / "traps.done").read_text()) > 100  # it did race
    deadline = time.monotonic() + 30
    while (jobs / attacker).exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not (jobs / attacker).exists()  # the Epilog removed all of it
    victim_values = sorted(os.listdir(jobs / victim / "jobfeatures"))
    assert "shutdowntime_job" in victim_values and "job_id" in victim_values
    assert mjf(cluster, "drain", "--cancel").returncode == 0
    subprocess.run(["scancel", victim], env=cluster.env, check=False)
    assert_node_up(cluster)
    assert_no_job_directories_left(cluster)
    assert sorted(path.name for path in cluster.mjf_base.rglob(".*")) == []


def test_a_user_filling_the_disk_stops_no_job_and_drains_no_node(cluster):
    out = cluster.job_root / "out"
    small = cluster.job_root / "small"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=755", "mjf-small", small],
                   check=True)
    base = small / "mjf"
    (small / "lock").mkdir(mode=0o1777)
    (small / "lock").chmod(0o1777)
    try:
        SITE_CONFIG.write_text(cluster.good_config.replace(str(cluster.mjf_base), str(base)))
        sbatch(cluster, VICTIM, "before-fill", "--time=2", "--mem=100M")
        assert seen(cluster, "before-fill")["JOBFEATURES"]["job_id"]
        filler = submit(cluster, ATTACKER, f"/usr/bin/python3 {cluster.job_root}/fill.py {out} "
                        f"{small}/lock/fill", f"{out}/fill.log")
        wait_for(out / "fill.ready", log=out / "fill.log")
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
        subprocess.run(["umount", small], check=False)


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
    return subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True,
                          text=True, env=cluster.env, check=False).stdout.strip()


def test_what_a_job_buries_in_its_directory_cannot_make_its_epilog_overrun(cluster):
    out = cluster.job_root / "out"
    big = cluster.job_root / "big"
    big.mkdir()
    # base_dir on a tmpfs, as /run/mjf is: there a user makes entries fastest.
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2g,nr_inodes=2m,mode=755", "mjf-big",
                    big], check=True)
    base = big / "mjf"
    try:
        SITE_CONFIG.write_text(cluster.good_config.replace(str(cluster.mjf_base), str(base)))
        # What it makes on a tmpfs counts as its memory (the kernel charges the job's
        # cgroup): 100 MiB would not hold it.
        attacker = submit(cluster, ATTACKER, f"/usr/bin/python3 {cluster.job_root}/bury.py "
                          f"{out} 750000", f"{out}/bury.log", memory="3000M")
        wait_for(out / "bury.done", timeout=120, log=out / "bury.log")
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
        subprocess.run(["umount", big], check=False)


def test_one_users_garbled_bookkeeping_breaks_no_drain_or_cancel_for_the_others(cluster):
    out = cluster.job_root / "out"
    jobs = cluster.mjf_base / "jobs"
    victim = submit(cluster, VICTIM, "sleep 60")
    attacker = submit(cluster, ATTACKER, f"/usr/bin/python3 {cluster.job_root}/garble.py {out}",
                      f"{out}/garble.log")
    wait_for(out / "garble.ready", log=out / "garble.log")
    wait_for(jobs / victim / "jobfeatures")
    machine = cluster.mjf_base / "machinefeatures"
    try:
        for command in (["drain", "--in", "2h"], ["drain", "--cancel"]):
            result = mjf(cluster, *command)
            assert result.returncode == 0, result.stderr
            assert "Traceback" not in result.stderr and "internal error" not in result.stderr
        assert "own_shutdowntime_job" in result.stderr  # named, ignored
        assert not (machine / "shutdowntime").exists()
        for job in (victim, attacker):
            assert not (jobs / job / "jobfeatures/shutdowntime_job").exists(), job
        # The same through `mjf sync` following a maintenance reservation that goes away.
        start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() + 7200))
        subprocess.run(["scontrol", "create", "reservation", "ReservationName=mjfgarble",
                        f"StartTime={start}", "Duration=10", f"Nodes={cluster.node}",
                        "Flags=MAINT,IGNORE_JOBS", "Users=root"], check=True, env=cluster.env,
                       capture_output=True)
        try:
            synced = mjf(cluster, "sync")
            assert "from Slurm maintenance reservation mjfgarble" in synced.stdout, synced.stderr
            assert (jobs / victim / "jobfeatures/shutdowntime_job").exists()
        finally:
            subprocess.run(["scontrol", "delete", "reservation=mjfgarble"], env=cluster.env,
                           capture_output=True)
        synced = mjf(cluster, "sync")
        assert synced.returncode == 0 and "internal error" not in synced.stderr, synced.stderr
        assert "withdrawn" in synced.stdout
        assert not (machine / "shutdowntime").exists()
        for job in (victim, attacker):
            assert not (jobs / job / "jobfeatures/shutdowntime_job").exists(), job
        assert [path for path in cluster.mjf_base.rglob(".*")] == []  # no temporary file
    finally:
        subprocess.run(["scancel", victim, attacker], env=cluster.env, check=False)
    assert_node_up(cluster)
    assert_no_job_directories_left(cluster)
