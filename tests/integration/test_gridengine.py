"""The Grid Engine hooks on a real Son of Grid Engine 8.1.9 cell, asserted from inside the jobs.

Runs as root (CI): a one-node cell whose queue ``mjf.q`` runs the installed
``mjf-gridengine prolog``/``epilog`` (as root) and ``mjf-gridengine-starter``; jobs
submitted by unprivileged users with ``qsub -sync y``.
"""

from __future__ import annotations

import subprocess
import threading
import time

import pytest

from tests.integration.gridengine_cell import (
    ENV,
    QUEUE,
    assert_no_job_directories_left,
    mjf,
    mjf_cell,
    qsub,
    seen,
)
from tests.integration.site import SITE_CONFIG, job_values

pytestmark = pytest.mark.integration

MIB = 2**20


@pytest.fixture(scope="module")
def cell():
    with mjf_cell() as started:
        yield started


def test_a_parallel_job_sees_every_value(cell):
    submitted = time.time()
    job_id = qsub(cell, "mjfuser1", "pe", "-pe", "mjf_smp", "2",
                  "-l", "h_rt=0:10:0,h_vmem=300M,h_cpu=100")
    view = seen(cell, "pe")
    assert job_values(view, cell.mjf_base, job_id, submitted) == {
        "job_id": job_id, "allocated_cpu": "2", "wall_limit_secs": "600",
        # h_cpu and h_vmem are per slot: Grid Engine enforces them times 2
        "cpu_limit_secs": "200", "max_rss_bytes": str(600 * MIB),
        "hs06_job": "20", "grace_secs_job": "600"}
    # The job's own arguments arrived as they were (a binary job under sh -c).
    assert view["argv"][1:] == ["pe"]
    assert_no_job_directories_left(cell)


def test_rss_and_soft_limits_and_a_queue_without_limits(cell):
    qsub(cell, "mjfuser1", "rss", "-l", "h_rss=200M,h_vmem=1G,s_rt=300,s_cpu=1000")
    job = seen(cell, "rss")["JOBFEATURES"]
    # h_rss wins over h_vmem; per process in Grid Engine, so not times the slots
    assert job["max_rss_bytes"] == str(200 * MIB)
    assert job["wall_limit_secs"] == "300" and job["cpu_limit_secs"] == "1000"
    qsub(cell, "mjfuser1", "plain")
    job = seen(cell, "plain")["JOBFEATURES"]
    assert job["allocated_cpu"] == "1"
    for absent in ("wall_limit_secs", "cpu_limit_secs", "max_rss_bytes"):
        assert absent not in job  # the queue's limits are INFINITY


def test_array_tasks_each_get_their_own_directory(cell):
    job_id = qsub(cell, "mjfuser2", "array", "-t", "1-3", "-l", "h_rt=120")
    for task in (1, 2, 3):
        view = seen(cell, f"array.{task}")
        assert view["JOBFEATURES"]["job_id"] == f"{job_id}.{task}"
        assert view["env"]["JOBFEATURES"] == f"{cell.mjf_base}/jobs/{job_id}.{task}/jobfeatures"
        assert view["JOBFEATURES"]["wall_limit_secs"] == "120"
    assert_no_job_directories_left(cell)


def test_two_concurrent_jobs_of_two_users(cell):
    ids = {}

    def submit(user, name, slots):
        ids[name] = qsub(cell, user, name, "-pe", "mjf_smp", slots, "-l", "h_rt=60",
                         # Grid Engine runs a binary job's words joined under sh -c
                         command=["-b", "y", "sleep", "2;", "/usr/bin/python3",
                                  f"{cell.job_root}/dump.py", name])

    threads = [threading.Thread(target=submit, args=("mjfuser1", "first", "1")),
               threading.Thread(target=submit, args=("mjfuser2", "second", "2"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    first, second = seen(cell, "first")["JOBFEATURES"], seen(cell, "second")["JOBFEATURES"]
    assert (first["job_id"], first["allocated_cpu"]) == (ids["first"], "1")
    assert (second["job_id"], second["allocated_cpu"]) == (ids["second"], "2")
    assert_no_job_directories_left(cell)


SHELL_JOBS = {
    # A script run by the job's shell, as Grid Engine would run it without a starter.
    "bashism.sh": ("#!/bin/sh\n[[ -n \"$BASH_VERSION\" ]] && "
                   "/usr/bin/python3 {root}/dump.py bashism \"$@\"\n", ["-S", "/bin/bash"]),
    "noshebang.sh": ("/usr/bin/python3 {root}/dump.py noshebang \"$@\"\n", []),
}


@pytest.mark.parametrize("script", sorted(SHELL_JOBS))
def test_the_starter_runs_scripts_as_grid_engine_would(cell, script):
    text, options = SHELL_JOBS[script]
    path = cell.job_root / script
    path.write_text(text.format(root=cell.job_root))
    path.chmod(0o644)
    name = script.split(".")[0]
    qsub(cell, "mjfuser1", name, *options, command=[str(path), "x y", "--dry-run", ""])
    view = seen(cell, name)
    assert view["argv"][1:] == [name, "x y", "--dry-run", ""]
    assert view["JOBFEATURES"]["job_id"] == view["env"]["JOB_ID"]


def test_a_broken_config_runs_the_job_and_errs_no_queue(cell):
    SITE_CONFIG.write_text("[mjf\nbroken")
    try:
        qsub(cell, "mjfuser1", "broken")
        view = seen(cell, "broken")
    finally:
        SITE_CONFIG.write_text(cell.good_config)
    assert view["env"]["JOBFEATURES"] is None  # ran, without MJF
    assert cell.queue_states() == ""  # no E: later jobs still run here
    qsub(cell, "mjfuser1", "after-broken")
    assert seen(cell, "after-broken")["JOBFEATURES"]["job_id"]


def test_on_error_fail_errs_only_the_job(cell):
    unwritable = cell.job_root / "unwritable"
    unwritable.write_text("a file where base_dir should be\n")
    SITE_CONFIG.write_text(f"[mjf]\nbase_dir = {unwritable}/base\non_error = fail\n")
    try:
        result = cell.as_user("mjfuser1", ["timeout", "60", "qsub", "-terse", "-q", QUEUE,
                                           "-o", "/dev/null", "-e", "/dev/null",
                                           "-b", "y", "/bin/true"])
        job_id = result.stdout.strip()
        deadline = time.monotonic() + 30
        state = ""
        while time.monotonic() < deadline:
            listing = subprocess.run(["qstat", "-u", "*"], capture_output=True, text=True,
                                     env=ENV).stdout
            state = next((line.split()[4] for line in listing.splitlines()
                          if line.split()[:1] == [job_id]), "")
            if "E" in state:
                break
            time.sleep(0.3)
        assert "E" in state  # exit 100: the job is in error, not the queue
        assert cell.queue_states() == ""
    finally:
        SITE_CONFIG.write_text(cell.good_config)
        subprocess.run(["qdel", "-f", "-u", "*"], capture_output=True,
                       env=ENV)
    cell.wait_until_no_jobs()


def test_sync_removes_only_what_grid_engine_no_longer_runs(cell):
    job_id = qsub(cell, "mjfuser1", "long", wait=False,
                  command=["-b", "y", "/bin/sleep", "30"])
    jobs = cell.mjf_base / "jobs"
    deadline = time.monotonic() + 30
    while not (jobs / job_id).exists():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    # A directory whose job Grid Engine never ran (an epilog that did not run).
    stale = jobs / "999999"
    (stale / "jobfeatures").mkdir(parents=True)
    (stale / "state").mkdir()
    (stale / "state" / "backend").write_text("gridengine")
    try:
        result = mjf(cell, "sync")
        assert result.returncode == 0, result.stderr
        assert "removed job 999999: Grid Engine no longer runs it" in result.stdout
        assert not stale.exists()
        assert (jobs / job_id / "jobfeatures").is_dir()  # running: kept
        drained = mjf(cell, "drain", "--in", "2h")
        assert drained.returncode == 0, drained.stderr
        shutdown = (cell.mjf_base / "machinefeatures" / "shutdowntime").read_text()
        assert (jobs / job_id / "jobfeatures" / "shutdowntime_job").read_text() == shutdown
        assert mjf(cell, "drain", "--cancel").returncode == 0
        assert not (jobs / job_id / "jobfeatures" / "shutdowntime_job").exists()
    finally:
        subprocess.run(["qdel", "-f", job_id], capture_output=True, env=ENV)
    cell.wait_until_no_jobs()
    assert_no_job_directories_left(cell)
    assert cell.queue_states() == ""
