"""Hostile users on a real OpenPBS 23.06 complex, as real second users.

Every PBS hook runs as root and nothing is completed from inside the job, so a job's
``jobfeatures/`` and bookkeeping are root's: the scenarios in which a job booby-traps
or garbles its own directory (:mod:`tests.integration.hostile`) cannot start here,
and a test shows that they cannot. What a user can do: plant at the next job ids (the
common scenario), and, where the site offers ``$JOBSTATUS``, fill the one directory
the job owns. Here the node's health is PBS's: a failing execjob_begin would requeue
a job 21 times and hold it, and with ``fail_action = offline_vnodes`` take the node
offline.
"""

from __future__ import annotations

import functools
import json
import os
import time

import pytest

from tests.integration import hostile
from tests.integration.hostile import ATTACKER, VICTIM, wait_for
from tests.integration.pbs_complex import (
    assert_no_job_directories_left,
    mjf,
    mjf_complex,
    pbs_command,
    qsub,
    seen,
)
from tests.integration.site import SITE_CONFIG

pytestmark = pytest.mark.integration


complex_ = hostile.started(mjf_complex)


def submit(complex_, user: str, command: list[str], log: str = "/dev/null") -> str:
    """A job running ``command``, not waited for; its id (its directory's name)."""
    return qsub(complex_, user, "hostile", "-l", "select=1:ncpus=1:mem=1gb",
                "-l", "walltime=00:03:00", command=command, wait=False)


def next_dirs(job_dir: str) -> list[str]:
    number, _, server = job_dir.partition(".")
    return [f"{int(number) + step}.{server}" for step in range(1, 7)]


def cancel(*job_ids: str) -> None:
    for job_id in job_ids:
        pbs_command("qdel", "-W", "force", job_id, check=False)


def assert_node_up(complex_) -> None:
    deadline = time.monotonic() + 60
    while pbs_command("qselect", "-s", "QRHE").stdout.strip():
        assert time.monotonic() < deadline, pbs_command("qstat", "-a").stdout
        time.sleep(0.2)
    complex_.wait_node_free()
    held = [job for job in pbs_command("qselect", "-x", "-s", "H").stdout.split()]
    assert held == []


@pytest.fixture
def batch(complex_) -> hostile.Batch:
    def run_dump(user, name):
        qsub(complex_, user, name, "-l", "walltime=00:02:00")
        return seen(complex_, name)

    return hostile.Batch(
        complex_.job_root, complex_.mjf_base,
        submit=functools.partial(submit, complex_),
        run_dump=run_dump, job_dir=lambda view: view["env"]["PBS_JOBID"], cancel=cancel,
        mjf=mjf, assert_up=lambda: assert_node_up(complex_), next_dirs=next_dirs)


def test_nothing_can_be_planted_where_the_next_jobs_go_even_racing_their_begin_hooks(
        batch, target):
    hostile.nothing_can_be_planted_where_the_next_jobs_go(batch, target, os.environ)


# Runs in mjfuser1's job: every way it could trap its own job directory, and what
# each attempt got.
TRY_TRAPS = r'''
import json, os, sys
features = os.environ["JOBFEATURES"]
top = os.path.dirname(features)
attempts = {
    "unlink a key": lambda: os.unlink(os.path.join(features, "max_rss_bytes")),
    "fifo in jobfeatures": lambda: os.mkfifo(os.path.join(features, "fifo")),
    "symlink in jobfeatures": lambda: os.symlink("/etc", os.path.join(features, "up")),
    "write a key": lambda: open(os.path.join(features, "wall_limit_secs"), "w"),
    "garble state": lambda: open(os.path.join(top, "state", "own_shutdowntime_job"), "w"),
    "rename the directory": lambda: os.rename(top, top + "x"),
    "chmod jobfeatures": lambda: os.chmod(features, 0o777),
}
results = {}
for name, attempt in attempts.items():
    try:
        attempt()
        results[name] = "done"
    except OSError as error:
        results[name] = error.strerror
json.dump(results, open(os.path.join(sys.argv[1], "try-traps.json"), "w"))
'''


def test_a_job_cannot_touch_its_own_directory(complex_):
    (complex_.job_root / "try_traps.py").write_text(TRY_TRAPS)
    out = complex_.job_root / "out"
    job_id = qsub(complex_, ATTACKER, "try-traps", "-l", "select=1:ncpus=1:mem=100mb",
                  command=["/usr/bin/python3", f"{complex_.job_root}/try_traps.py", str(out)])
    results = json.loads((out / "try-traps.json").read_text())
    assert set(results.values()) <= {"Permission denied", "Operation not permitted"}, results
    assert complex_.job(job_id)["Exit_status"] == 0
    assert_node_up(complex_)
    assert_no_job_directories_left(complex_)


def test_what_a_job_buries_in_its_jobstatus_cannot_make_its_end_overrun(complex_):
    """$JOBSTATUS is the one directory a job owns: 14 levels of long names and 100,000
    directories there, then the job ends."""
    out = complex_.job_root / "out"
    jobs = complex_.mjf_base / "jobs"
    SITE_CONFIG.write_text(complex_.good_config.replace("[mjf]\n", "[mjf]\njobstatus = yes\n"))
    try:
        attacker = qsub(complex_, ATTACKER, "bury", "-l", "select=1:ncpus=1:mem=1gb",
                        wait=False, command=[
                            "/bin/sh", "-c", f"JOBFEATURES=$JOBSTATUS exec /usr/bin/python3 "
                            f"{complex_.job_root}/bury.py {out} 100000"])
        wait_for(out / "bury.done", timeout=120, log=out / "bury.log", written=True)
        buried_at = float((out / "bury.done").read_text())
        complex_.wait_finished(attacker)
    finally:
        SITE_CONFIG.write_text(complex_.good_config)
    # The job's end (execjob_end) does not wait for the removal of what it made.
    assert time.time() - buried_at < 15
    assert not (jobs / attacker).exists()
    assert_node_up(complex_)
    qsub(complex_, VICTIM, "after-bury", "-l", "walltime=00:01:00")
    assert seen(complex_, "after-bury")["JOBFEATURES"]["job_id"]
    synced = mjf("sync")  # removes the rest, for up to its budget a run
    assert synced.returncode == 0, synced.stderr
    deadline = time.monotonic() + 120
    while any(name.startswith(".") for name in os.listdir(jobs)):
        assert time.monotonic() < deadline
        mjf("sync")
    assert_no_job_directories_left(complex_)
