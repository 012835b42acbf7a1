"""Hostile-user scenarios, run on every real batch system (``test_*_hostile.py``).

mjfuser1 attacks; mjfuser2's jobs are the victims. A batch system's test module
hands each scenario a :class:`Batch`: how to submit a job there, cancel it, and tell
that the node (or queue) is still up. Whatever the attacker does, no root write or
removal may land outside base_dir, no other job may be affected, every job must run,
and the node must stay up.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.job_side import BURY, GARBLE, TRAPS, install
from tests.integration.site import assert_no_job_directories_left

ATTACKER, VICTIM = "mjfuser1", "mjfuser2"
JOB_SCRIPTS = {"traps.py": TRAPS, "bury.py": BURY, "garble.py": GARBLE}

# Type names only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


class Batch:
    """What a scenario needs of a real batch system and the site around it.

    ``submit(user, command, log)``: a job running ``command`` (words: a program and
    its arguments), not waited for -> its job directory name; ``run_dump(user,
    name)``: a job running dump.py, waited for -> what it saw; ``job_dir(view)``: the
    job directory name a dump's job has (from the batch system's own variables);
    ``cancel(*ids)``; ``mjf(*args)``: an admin's ``mjf``; ``assert_up()``: no job
    left, and the node or queue healthy; ``next_dirs(job_dir)``: the directory names of
    the next jobs (default: the next numbers).
    """

    def __init__(self, root: Path, base: Path, submit: Callable, run_dump: Callable,
                 job_dir: Callable, cancel: Callable, mjf: Callable,
                 assert_up: Callable, next_dirs: Callable | None = None) -> None:
        self.root, self.base, self.jobs, self.out = root, base, base / "jobs", root / "out"
        self.submit, self.run_dump, self.job_dir = submit, run_dump, job_dir
        self.cancel, self.mjf, self.assert_up = cancel, mjf, assert_up
        self.next_dirs = next_dirs or (
            lambda job_dir: [str(number) for number in range(int(job_dir) + 1,
                                                             int(job_dir) + 7)])


def install_job_scripts(root: Path) -> None:
    install(root, JOB_SCRIPTS)


def started(start: Callable):
    """A module's fixture: what ``start()`` (a context manager: a batch system and the
    site around it) yields, with the attackers' job scripts in its job root."""
    @pytest.fixture(scope="module")
    def fixture():
        with start() as batch_system:
            install_job_scripts(batch_system.job_root)
            yield batch_system
    return fixture


@contextlib.contextmanager
def precious_target(root: Path):
    """A root file outside base_dir that no hook may write, follow or remove."""
    directory = root / "outside"
    directory.mkdir(exist_ok=True)
    path = directory / "target"
    path.write_text("precious\n")
    yield path
    assert path.read_text() == "precious\n" and path.stat().st_uid == 0
    assert sorted(os.listdir(directory)) == ["target"]


def wait_for(path: Path, timeout: float = 60, log: Path | None = None,
             written: bool = False) -> None:
    """Until ``path`` exists (and, if ``written``, holds something: a job's marker is
    made before it is written)."""
    deadline = time.monotonic() + timeout
    while not path.exists() or (written and not path.stat().st_size):
        assert time.monotonic() < deadline, f"{path} did not appear" + (
            f": {log.read_text()[-2000:]}" if log and log.exists() else "")
        time.sleep(0.1)


def python_job(batch: Batch, script: str, *args: object) -> list[str]:
    return ["/usr/bin/python3", str(batch.root / script), *map(str, args)]


def nothing_can_be_planted_where_the_next_jobs_go(batch: Batch, target: Path,
                                                  env: dict[str, str]) -> None:
    jobs = batch.jobs
    victim = batch.submit(VICTIM, ["sleep", "20"])
    wait_for(jobs / victim / "jobfeatures")
    # While victims start, mjfuser1 loops planting symlinks, directories and renames at
    # the ids they will get, and inside the running victim's directory.
    planted = subprocess.Popen(
        ["runuser", "-u", ATTACKER, "--", "/bin/sh", "-c", f'''
        end=$(( $(date +%s) + 8 )); tries=0; made=0
        while [ $(date +%s) -lt $end ]; do
            for id in {" ".join(batch.next_dirs(victim))}; do
                tries=$((tries + 1))
                ln -s {target} {jobs}/$id 2>/dev/null && made=$((made + 1))
                mkdir {jobs}/$id 2>/dev/null && made=$((made + 1))
                ln -s {target} {jobs}/.new-$id 2>/dev/null && made=$((made + 1))
                mv -T {jobs}/{victim} {jobs}/$id 2>/dev/null && made=$((made + 1))
                ln -s {target} {jobs}/{victim}/jobfeatures/shutdowntime_job 2>/dev/null \
                    && made=$((made + 1))
            done
        done
        echo "$tries $made"'''], stdout=subprocess.PIPE, text=True, env=env)
    views = [batch.run_dump(VICTIM, f"planted-{index}") for index in range(3)]
    tries, made = map(int, planted.communicate(timeout=60)[0].split())
    assert tries > 0 and made == 0  # every attempt was refused by the kernel
    for view in views:
        job_dir = batch.job_dir(view)
        assert view["JOBFEATURES"]["job_id"] == job_dir
        assert view["env"]["JOBFEATURES"] == f"{jobs}/{job_dir}/jobfeatures"
    batch.cancel(victim)
    batch.assert_up()
    assert_no_job_directories_left(batch.base)


def a_booby_trapped_directory_redirects_nothing(batch: Batch, target: Path) -> None:
    out, jobs = batch.out, batch.jobs
    victim = batch.submit(VICTIM, ["sleep", "60"])
    wait_for(jobs / victim / "jobfeatures")
    attacker = batch.submit(ATTACKER, python_job(batch, "traps.py", target,
                                                 jobs / victim / "jobfeatures", out),
                            f"{out}/traps.log")
    wait_for(out / "traps.ready", log=out / "traps.log")
    try:
        for round_number in range(12):  # the job races every one of these
            drained = batch.mjf("drain", "--in", f"{2 + round_number % 2}h")
            assert drained.returncode == 0, drained.stderr
            assert "internal error" not in drained.stderr
            assert batch.mjf("sync").returncode == 0
        # What mjf check and mjf show make of it: a report, not a hang or a crash.
        checked = batch.mjf("check", str(jobs / attacker))
        assert checked.returncode in (0, 1, 2) and "Traceback" not in checked.stderr
        assert checked.stdout.startswith("MJF ")
        assert batch.mjf("show", str(jobs / attacker)).returncode in (0, 1)
        shutdown = (batch.base / "machinefeatures/shutdowntime").read_text()
        assert (jobs / victim / "jobfeatures/shutdowntime_job").read_text() == shutdown
    finally:
        (out / "traps.stop").touch()
    wait_for(out / "traps.done", written=True)
    assert int((out / "traps.done").read_text()) > 100  # it did race
    deadline = time.monotonic() + 30
    while (jobs / attacker).exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not (jobs / attacker).exists()  # the job's end removed all of it
    victim_values = sorted(os.listdir(jobs / victim / "jobfeatures"))
    assert "shutdowntime_job" in victim_values and "job_id" in victim_values
    assert batch.mjf("drain", "--cancel").returncode == 0
    batch.cancel(victim)
    batch.assert_up()
    assert_no_job_directories_left(batch.base)
    # What the trap's end had no time to remove (its locked directories) is `mjf sync`'s.
    deadline = time.monotonic() + 120
    while any(batch.base.rglob(".*")) and time.monotonic() < deadline:
        assert batch.mjf("sync").returncode == 0
    assert sorted(path.name for path in batch.base.rglob(".*")) == []


def garbled_bookkeeping_breaks_no_drain_or_cancel(
        batch: Batch, more: Callable[[str, str], None] | None = None) -> None:
    """``more(victim, attacker)``: what else the batch system checks meanwhile (a drain
    it announces itself, followed by ``mjf sync``)."""
    out, jobs = batch.out, batch.jobs
    victim = batch.submit(VICTIM, ["sleep", "60"])
    attacker = batch.submit(ATTACKER, python_job(batch, "garble.py", out),
                            f"{out}/garble.log")
    wait_for(out / "garble.ready", log=out / "garble.log")
    wait_for(jobs / victim / "jobfeatures")
    machine = batch.base / "machinefeatures"
    try:
        drained = batch.mjf("drain", "--in", "2h")
        assert drained.returncode == 0, drained.stderr
        assert (jobs / victim / "jobfeatures/shutdowntime_job").exists()
        result = batch.mjf("drain", "--cancel")
        assert result.returncode == 0, result.stderr
        assert "Traceback" not in result.stderr and "internal error" not in result.stderr
        assert "own_shutdowntime_job" in result.stderr  # named, ignored
        assert not (machine / "shutdowntime").exists()
        for job in (victim, attacker):
            assert not (jobs / job / "jobfeatures/shutdowntime_job").exists(), job
        if more:
            more(victim, attacker)
        assert [path for path in batch.base.rglob(".*")] == []  # no temporary file
    finally:
        batch.cancel(victim, attacker)
    batch.assert_up()
    assert_no_job_directories_left(batch.base)
