"""Hostile users on a real Grid Engine 8.1.9 cell, as real second users.

The scenarios every real batch system runs (:mod:`tests.integration.hostile`:
planting at the next job ids, a booby-trapped job directory, garbled bookkeeping),
and a job burying its own directory under 100,000 directories. Here the node's
health is the queue instance's: a failing prolog or epilog would put it into error
state, blocking every later job on it.
"""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from tests.integration import hostile
from tests.integration.gridengine_cell import (
    ENV,
    QUEUE,
    assert_no_job_directories_left,
    mjf,
    mjf_cell,
    qsub,
    seen,
)
from tests.integration.hostile import ATTACKER, VICTIM, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cell():
    with mjf_cell() as started:
        hostile.install_job_scripts(started.job_root)
        yield started


@pytest.fixture
def target(cell):
    with hostile.precious_target(cell.job_root) as path:
        yield path


def submit(cell, user: str, command: list[str], log: str = "/dev/null") -> str:
    """A binary job running ``command``, not waited for; its job number."""
    # h_rss: every job has a max_rss_bytes (TRAPS replaces it with a FIFO).
    result = cell.as_user(user, ["qsub", "-terse", "-q", QUEUE, "-l", "h_rt=180,h_rss=1G",
                                 "-o", log, "-j", "y", "-b", "y", *command])
    return result.stdout.strip()


def qdel(*job_ids: str) -> None:
    subprocess.run(["qdel", "-f", *job_ids], capture_output=True, env=ENV, check=False)


def assert_queue_up(cell) -> None:
    cell.wait_until_no_jobs()
    assert cell.queue_states() == "", cell.messages()


@pytest.fixture
def batch(cell) -> hostile.Batch:
    def run_dump(user, name):
        qsub(cell, user, name, "-l", "h_rt=120")
        return seen(cell, name)

    return hostile.Batch(
        cell.job_root, cell.mjf_base,
        submit=lambda user, command, log="/dev/null": submit(cell, user, command, log),
        run_dump=run_dump, job_dir=lambda view: view["env"]["JOB_ID"], cancel=qdel,
        mjf=lambda *args: mjf(cell, *args), assert_up=lambda: assert_queue_up(cell))


def test_nothing_can_be_planted_where_the_next_jobs_go_even_racing_their_prologs(
        batch, target):
    hostile.nothing_can_be_planted_where_the_next_jobs_go(batch, target, ENV)


def test_a_booby_trapped_job_directory_redirects_no_drain_sync_check_or_epilog(batch, target):
    hostile.a_booby_trapped_directory_redirects_nothing(batch, target)


def test_one_users_garbled_bookkeeping_breaks_no_drain_or_cancel_for_the_others(batch):
    hostile.garbled_bookkeeping_breaks_no_drain_or_cancel(batch)


def test_what_a_job_buries_in_its_directory_cannot_make_its_epilog_overrun(cell):
    out = cell.job_root / "out"
    jobs = cell.mjf_base / "jobs"
    attacker = submit(cell, ATTACKER, ["/usr/bin/python3", f"{cell.job_root}/bury.py", str(out),
                                       "100000"], f"{out}/bury.log")
    wait_for(out / "bury.done", timeout=120, log=out / "bury.log", written=True)
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
