"""Hostile users on a real Grid Engine 8.1.9 cell, as real second users.

The scenarios every real batch system runs (:mod:`tests.integration.hostile`:
planting at the next job ids, a booby-trapped job directory, garbled bookkeeping),
a job burying its own directory under 100,000 directories, and what a job's user can
name to the root prolog and epilog through the job's environment (``qsub -v``): a
root-only file as PE_HOSTFILE or MJF_CONFIG, a sparse gibibyte or a FIFO, a
PYTHONPATH or a user site-packages. Here the node's health is the queue instance's: a
failing prolog or epilog would put it into error state, blocking every later job on it.
"""

from __future__ import annotations

import functools
import os
import subprocess
import time
from pathlib import Path

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
from tests.integration.site import HOOKS_BIN, ensure_user

pytestmark = pytest.mark.integration


cell = hostile.started(mjf_cell)


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
        submit=functools.partial(submit, cell),
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


# -- what a job's user names to the root prolog and epilog ------------------------------


@pytest.fixture
def root_secret(cell):
    """A root-only file in /root (mode 0600): read, it would give this host 31337 slots
    (as PE_HOSTFILE) or a broken config (as MJF_CONFIG) whose error quotes its lines;
    MARKER is on its second line. Yields (path, marker)."""
    marker = f"mjf-secret-{os.urandom(6).hex()}"
    path = Path("/root") / f"mjf-test-secret-{os.getpid()}"
    path.write_text(f"{cell.host} 31337 {QUEUE}@{cell.host} UNDEFINED\n{marker}\n")
    path.chmod(0o600)
    yield path, marker
    path.unlink()


def readable_by_the_job(cell) -> str:
    """Everything the jobs wrote or were given: their output and error files (Grid Engine
    writes a prolog's and epilog's stderr to the job's), what they saw of MJF."""
    return "".join(path.read_text(errors="replace")
                   for path in (cell.job_root / "out").iterdir() if path.is_file())


def test_a_root_only_file_named_as_pe_hostfile_leaks_nothing_and_errs_no_queue(
        cell, root_secret):
    secret, marker = root_secret
    named = f"PE_HOSTFILE={secret}"
    plain = qsub(cell, ATTACKER, "named-pe", "-l", "h_rt=60", "-v", named)
    parallel = qsub(cell, ATTACKER, "named-pe-smp", "-pe", "mjf_smp", "2", "-l", "h_rt=60",
                    "-v", named)
    assert seen(cell, "named-pe")["JOBFEATURES"]["allocated_cpu"] == "1"
    assert seen(cell, "named-pe-smp")["JOBFEATURES"]["allocated_cpu"] == "2"  # Grid Engine's
    everything = readable_by_the_job(cell)
    assert marker not in everything and "31337" not in everything
    # The warning names the path, in the job's own error file; never a byte of the file.
    errors = (cell.job_root / "out" / f"named-pe.e{plain}").read_text()
    assert f"PE_HOSTFILE {secret} is not read: the job has no parallel environment" in errors
    assert "PE_HOSTFILE" not in (cell.job_root / "out" / f"named-pe-smp.e{parallel}").read_text()
    assert cell.queue_states() == "", cell.messages()
    qsub(cell, VICTIM, "after-named-pe", "-pe", "mjf_smp", "2", "-l", "h_rt=60")
    assert seen(cell, "after-named-pe")["JOBFEATURES"]["allocated_cpu"] == "2"
    assert_no_job_directories_left(cell)


def test_a_sparse_gibibyte_or_a_fifo_as_pe_hostfile_neither_slows_the_prolog_nor_errs_it(
        cell):
    home = Path("/home") / ATTACKER
    cell.as_user(ATTACKER, ["sh", "-c", f"rm -f {home}/huge {home}/fifo; truncate -s 1G "
                            f"{home}/huge; mkfifo {home}/fifo"])
    try:
        started = time.monotonic()
        qsub(cell, ATTACKER, "baseline", "-l", "h_rt=60")
        baseline = time.monotonic() - started
        for name in ("huge", "fifo"):
            started = time.monotonic()
            job = qsub(cell, ATTACKER, f"named-{name}", "-l", "h_rt=60",
                       "-v", f"PE_HOSTFILE={home}/{name}")
            # A whole read of the gibibyte took 10 s (and 2 GB: an OOM kill errs the queue).
            assert time.monotonic() - started < baseline + 4, (name, baseline)
            assert seen(cell, f"named-{name}")["JOBFEATURES"]["allocated_cpu"] == "1"
            errors = (cell.job_root / "out" / f"named-{name}.e{job}").read_text()
            assert f"PE_HOSTFILE {home}/{name} is not read" in errors
            assert cell.queue_states() == "", cell.messages()
    finally:
        cell.as_user(ATTACKER, ["rm", "-f", f"{home}/huge", f"{home}/fifo"], check=False)
    assert_no_job_directories_left(cell)


def test_mjf_config_named_by_a_job_is_not_the_root_prologs(cell, root_secret):
    secret, marker = root_secret
    job = qsub(cell, ATTACKER, "named-config", "-l", "h_rt=60", "-v", f"MJF_CONFIG={secret}")
    assert seen(cell, "named-config")["JOBFEATURES"] is None
    # The root prolog and epilog kept to the site's config; the starter, the job's own
    # process, took the job's MJF_CONFIG - as its user, who cannot read the file: the job
    # ran without MJF. (The epilog's line may come a moment after qsub -sync returns.)
    path = cell.job_root / "out" / f"named-config.e{job}"
    ignored = f"warning: $MJF_CONFIG '{secret}' is not used: this hook runs as root"
    deadline = time.monotonic() + 20
    while path.read_text().count(ignored) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    errors = path.read_text()
    assert errors.count(ignored) == 2, errors
    assert f"error: {secret}: cannot read the config: Permission denied" in errors
    assert marker not in readable_by_the_job(cell)
    assert cell.queue_states() == "", cell.messages()
    assert_no_job_directories_left(cell)


def test_no_python_a_job_names_runs_in_the_root_prolog_or_epilog(cell):
    """The hooks start Python isolated (-IS, as the packages install them): neither a
    PYTHONPATH the job sets nor a user site-packages in its HOME runs code as root."""
    home = Path("/home") / ATTACKER
    uid, gid = ensure_user(ATTACKER)
    record = Path(f"/tmp/mjf-python-ran-{os.getpid()}")
    code = f"import os\nwith open('{record}', 'a') as f:\n    f.write(f'{{os.geteuid()}}\\n')\n"
    version = subprocess.run([str(HOOKS_BIN / "python3"), "-c",
                              "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    site = home / ".local" / "lib" / f"python{version}" / "site-packages"
    planted = {home / "evil" / "sitecustomize.py": code,
               site / "mjf_test_user_site.py": code,
               site / "mjf-test.pth": "import mjf_test_user_site\n"}
    made = [path for path in (home / "evil", home / ".local") if not path.exists()]
    for path, text in planted.items():  # the job's user's own files
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for directory, _, names in [*os.walk(home / "evil"), *os.walk(home / ".local")]:
        for path in [directory, *(os.path.join(directory, name) for name in names)]:
            os.chown(path, uid, gid)
    record.touch(mode=0o666)
    record.chmod(0o666)
    try:
        qsub(cell, ATTACKER, "named-python", "-l", "h_rt=60",
             "-v", f"PYTHONPATH={home}/evil")
        ran = record.read_text().split()
        assert "0" not in ran, ran  # (the job's own Python, as its user, did run it)
        assert str(uid) in ran
        assert seen(cell, "named-python")["JOBFEATURES"]["allocated_cpu"] == "1"
        assert cell.queue_states() == "", cell.messages()
    finally:
        for path in planted:
            path.unlink(missing_ok=True)
        subprocess.run(["rm", "-rf", *map(str, made)], check=False)
        record.unlink(missing_ok=True)
    assert_no_job_directories_left(cell)
