"""Hostile users on a real OpenPBS 23.06 complex, as real second users.

The scenarios every real batch system runs (:mod:`tests.integration.hostile`:
planting at the next job ids, a booby-trapped job directory, garbled bookkeeping),
and a job burying its own directory under 100,000 directories. Here the node's
health is PBS's: a failing execjob_begin would requeue a job 21 times and hold it,
and with ``fail_action = offline_vnodes`` take the node offline.
"""

from __future__ import annotations

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

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def complex_():
    with mjf_complex() as started:
        hostile.install_job_scripts(started.job_root)
        yield started


@pytest.fixture
def target(complex_):
    with hostile.precious_target(complex_.job_root) as path:
        yield path


def submit(complex_, user: str, command: list[str], log: str = "/dev/null") -> str:
    """A job running ``command``, not waited for; its id (its directory's name)."""
    # mem: every job has a max_rss_bytes (TRAPS replaces it with a FIFO).
    options = ["-l", "select=1:ncpus=1:mem=1gb", "-l", "walltime=00:03:00"]
    if log == "/dev/null":  # PBS copies the output back: nowhere to go
        return qsub(complex_, user, "hostile", *options, command=command, wait=False)
    job_id = qsub(complex_, user, "hostile", *options, command=command, wait=False)
    return job_id


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
        submit=lambda user, command, log="/dev/null": submit(complex_, user, command, log),
        run_dump=run_dump, job_dir=lambda view: view["env"]["PBS_JOBID"], cancel=cancel,
        mjf=mjf, assert_up=lambda: assert_node_up(complex_), next_dirs=next_dirs)


def test_nothing_can_be_planted_where_the_next_jobs_go_even_racing_their_begin_hooks(
        batch, target):
    hostile.nothing_can_be_planted_where_the_next_jobs_go(batch, target, os.environ)


def test_a_booby_trapped_job_directory_redirects_no_drain_sync_check_or_end(batch, target):
    hostile.a_booby_trapped_directory_redirects_nothing(batch, target)


def test_one_users_garbled_bookkeeping_breaks_no_drain_or_cancel_for_the_others(batch):
    hostile.garbled_bookkeeping_breaks_no_drain_or_cancel(batch)


def test_what_a_job_buries_in_its_directory_cannot_make_its_end_overrun(complex_):
    out = complex_.job_root / "out"
    jobs = complex_.mjf_base / "jobs"
    attacker = submit(complex_, ATTACKER, ["/usr/bin/python3", f"{complex_.job_root}/bury.py",
                                           str(out), "100000"], f"{out}/bury.log")
    wait_for(out / "bury.done", timeout=120, log=out / "bury.log", written=True)
    buried_at = float((out / "bury.done").read_text())
    complex_.wait_finished(attacker)
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
