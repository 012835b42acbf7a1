"""Hostile users on a real Grid Engine 8.1.9 cell, as real second users.

mjfuser1 attacks; mjfuser2's jobs are the victims (the job scripts are the Slurm
hostile tests'). Whatever mjfuser1 does - planting symlinks and directories where
the next jobs' directories go, racing the hooks with rename/symlink loops, burying
its own job directory, garbling the bookkeeping it owns - no root write or removal
may land outside base_dir, no other job may be affected, every job must run, and the
queue instance must never go into error state (a failing prolog or epilog would put
it there, blocking every later job).
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.gridengine_cell import (
    ENV,
    QUEUE,
    SITE_CONFIG,
    assert_no_job_directories_left,
    mjf_cell,
    qsub,
    seen,
)
from tests.integration.job_side import BURY, GARBLE, TRAPS
from tests.integration.slurm_cluster import HOOKS_BIN

pytestmark = pytest.mark.integration

ATTACKER, VICTIM = "mjfuser1", "mjfuser2"


@pytest.fixture(scope="module")
def cell():
    with mjf_cell() as started:
        for name, text in (("traps.py", TRAPS), ("bury.py", BURY), ("garble.py", GARBLE)):
            (started.job_root / name).write_text(text)
            (started.job_root / name).chmod(0o644)
        yield started


@pytest.fixture
def target(cell):
    """A root file outside base_dir that no hook may write, follow or remove."""
    directory = cell.job_root / "outside"
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


def submit(cell, user: str, command: str, log: str = "/dev/null") -> str:
    """A binary job running ``command`` (Grid Engine joins its words for ``sh -c``), not
    waited for; its job number."""
    # h_rss: every job has a max_rss_bytes (TRAPS replaces it with a FIFO).
    result = cell.as_user(user, ["qsub", "-terse", "-q", QUEUE, "-l", "h_rt=180,h_rss=1G",
                                 "-o", log,
                                 "-j", "y", "-b", "y", *command.split()])
    return result.stdout.strip()


def mjf(cell, *args: str) -> subprocess.CompletedProcess:
    """An admin's `mjf` command, as root; a hang is a failure (timeout)."""
    return subprocess.run([str(HOOKS_BIN / "mjf"), *args], capture_output=True, text=True,
                          timeout=60, env={**ENV, "MJF_CONFIG": str(SITE_CONFIG)})


def qdel(*job_ids: str) -> None:
    subprocess.run(["qdel", "-f", *job_ids], capture_output=True, env=ENV, check=False)


def assert_queue_up(cell) -> None:
    cell.wait_until_no_jobs()
    assert cell.queue_states() == "", cell.messages()


def test_nothing_can_be_planted_where_the_next_jobs_go_even_racing_their_prologs(
        cell, target):
    jobs = cell.mjf_base / "jobs"
    victim = submit(cell, VICTIM, "sleep 20")
    wait_for(jobs / victim / "jobfeatures")
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
        echo "$tries $made"'''], stdout=subprocess.PIPE, text=True, env=ENV)
    names = [f"planted-{index}" for index in range(3)]
    for name in names:
        qsub(cell, VICTIM, name, "-l", "h_rt=120")
    tries, made = map(int, planted.communicate(timeout=60)[0].split())
    assert tries > 0 and made == 0  # every attempt was refused by the kernel
    for name in names:
        view = seen(cell, name)
        assert view["JOBFEATURES"]["job_id"] == view["env"]["JOB_ID"]
        assert view["env"]["JOBFEATURES"] == \
            f"{cell.mjf_base}/jobs/{view['env']['JOB_ID']}/jobfeatures"
    qdel(victim)
    assert_queue_up(cell)
    assert_no_job_directories_left(cell)


def test_a_booby_trapped_job_directory_redirects_no_drain_sync_check_or_epilog(cell, target):
    out = cell.job_root / "out"
    jobs = cell.mjf_base / "jobs"
    victim = submit(cell, VICTIM, "sleep 60")
    wait_for(jobs / victim / "jobfeatures")
    attacker = submit(cell, ATTACKER, f"/usr/bin/python3 {cell.job_root}/traps.py "
                      f"{target} {jobs / victim / 'jobfeatures'} {out}", f"{out}/traps.log")
    wait_for(out / "traps.ready", log=out / "traps.log")
    try:
        for round_number in range(12):  # the job races every one of these
            drained = mjf(cell, "drain", "--in", f"{2 + round_number % 2}h")
            assert drained.returncode == 0, drained.stderr
            assert "internal error" not in drained.stderr
            assert mjf(cell, "sync").returncode == 0
        checked = mjf(cell, "check", str(jobs / attacker))
        assert checked.returncode in (1, 2) and "Traceback" not in checked.stderr
        shutdown = (cell.mjf_base / "machinefeatures/shutdowntime").read_text()
        assert (jobs / victim / "jobfeatures/shutdowntime_job").read_text() == shutdown
    finally:
        (out / "traps.stop").touch()
    wait_for(out / "traps.done")
    assert int((out / "traps.done").read_text()) > 100  # it did race
    deadline = time.monotonic() + 30
    while (jobs / attacker).exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not (jobs / attacker).exists()  # the epilog removed all of it
    assert mjf(cell, "drain", "--cancel").returncode == 0
    qdel(victim)
    assert_queue_up(cell)
    assert_no_job_directories_left(cell)
    assert sorted(path.name for path in cell.mjf_base.rglob(".*")) == []


def test_what_a_job_buries_in_its_directory_cannot_make_its_epilog_overrun(cell):
    out = cell.job_root / "out"
    jobs = cell.mjf_base / "jobs"
    attacker = submit(cell, ATTACKER, f"/usr/bin/python3 {cell.job_root}/bury.py {out} 100000",
                      f"{out}/bury.log")
    wait_for(out / "bury.done", timeout=120, log=out / "bury.log")
    while not (out / "bury.done").read_text():  # made, not yet written
        time.sleep(0.05)
    buried_at = float((out / "bury.done").read_text())
    cell.wait_until_no_jobs()
    # The job's end (its epilog) does not wait for the removal of what it made.
    assert time.time() - buried_at < 15
    assert not (jobs / attacker).exists()
    assert cell.queue_states() == "", cell.messages()
    qsub(cell, VICTIM, "after-bury", "-l", "h_rt=60")
    assert seen(cell, "after-bury")["JOBFEATURES"]["job_id"]
    synced = mjf(cell, "sync")  # removes the rest, for up to its budget a run
    assert synced.returncode == 0, synced.stderr
    deadline = time.monotonic() + 120
    while any(name.startswith(".") for name in os.listdir(jobs)):
        assert time.monotonic() < deadline
        mjf(cell, "sync")
    assert_no_job_directories_left(cell)


def test_one_users_garbled_bookkeeping_breaks_no_drain_or_cancel_for_the_others(cell):
    out = cell.job_root / "out"
    jobs = cell.mjf_base / "jobs"
    victim = submit(cell, VICTIM, "sleep 60")
    attacker = submit(cell, ATTACKER, f"/usr/bin/python3 {cell.job_root}/garble.py {out}",
                      f"{out}/garble.log")
    wait_for(out / "garble.ready", log=out / "garble.log")
    wait_for(jobs / victim / "jobfeatures")
    machine = cell.mjf_base / "machinefeatures"
    try:
        drained = mjf(cell, "drain", "--in", "2h")
        assert drained.returncode == 0, drained.stderr
        assert (jobs / victim / "jobfeatures/shutdowntime_job").exists()
        result = mjf(cell, "drain", "--cancel")
        assert result.returncode == 0, result.stderr
        assert "Traceback" not in result.stderr and "internal error" not in result.stderr
        assert not (machine / "shutdowntime").exists()
        for job in (victim, attacker):
            assert not (jobs / job / "jobfeatures/shutdowntime_job").exists(), job
        assert [path for path in cell.mjf_base.rglob(".*")] == []  # no temporary file
    finally:
        qdel(victim, attacker)
    assert_queue_up(cell)
    assert_no_job_directories_left(cell)
