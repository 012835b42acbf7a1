"""The PBS hook on a real OpenPBS 23.06 complex, asserted from inside the jobs.

Runs as root (CI): a one-node complex whose hook ``mjf`` (contrib/pbs/install-hook for
the installed commands) runs ``mjf-pbs begin|launch|end``; jobs submitted by
unprivileged users. After every failure the job must have run once (PBS requeues a job
whose execjob_begin fails, and holds it after 21 attempts) and the node must be free.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from tests.integration.pbs_complex import (
    MOM_HOOK,
    assert_no_job_directories_left,
    mjf,
    mjf_complex,
    pbs_command,
    qmgr,
    qsub,
    seen,
)
from tests.integration.site import HOOKS_BIN, SITE_CONFIG, job_values, run

pytestmark = pytest.mark.integration

MIB = 2**20
REQUEST = ("-l", "select=1:ncpus=2:mem=300mb", "-l", "walltime=00:10:00")


@pytest.fixture(scope="module")
def complex_():
    with mjf_complex() as started:
        yield started


def assert_ran_once_and_node_free(complex_, job_id: str) -> dict:
    job = complex_.job(job_id)
    assert job["job_state"] == "F", job
    assert job.get("run_count") == 1 and job.get("Exit_status") == 0, job
    assert complex_.node_state() == "free"
    return job


def test_a_job_sees_every_value(complex_):
    submitted = time.time()
    job_id = qsub(complex_, "mjfuser1", "values", *REQUEST)
    view = seen(complex_, "values")
    assert job_values(view, complex_.mjf_base, job_id, submitted) == {
        "job_id": job_id, "allocated_cpu": "2", "wall_limit_secs": "600",
        "cpu_limit_secs": "1200", "max_rss_bytes": str(300 * MIB),
        "hs06_job": "20", "grace_secs_job": "600"}
    assert view["env"]["TMPDIR"] == f"/var/tmp/pbs.{job_id}"
    assert_ran_once_and_node_free(complex_, job_id)
    assert_no_job_directories_left(complex_)


def test_array_sub_jobs_each_get_their_own_directory(complex_):
    array_id = qsub(complex_, "mjfuser2", "array", "-J", "1-2",
                    "-l", "select=1:ncpus=1:mem=100mb", "-l", "walltime=00:05:00")
    number, server = array_id.split("[]")
    for index in (1, 2):
        view = seen(complex_, f"array.{index}")
        job_id = f"{number}[{index}]{server}"
        assert view["JOBFEATURES"]["job_id"] == job_id
        assert view["env"]["JOBFEATURES"] == f"{complex_.mjf_base}/jobs/{job_id}/jobfeatures"
        assert view["JOBFEATURES"]["allocated_cpu"] == "1"
        assert view["JOBFEATURES"]["max_rss_bytes"] == str(100 * MIB)
        assert view["JOBFEATURES"]["wall_limit_secs"] == "300"
    assert_no_job_directories_left(complex_)


def test_two_concurrent_jobs_of_two_users(complex_):
    ids = {}

    def submit(user, name):
        ids[name] = qsub(complex_, user, name, "-l", "select=1:ncpus=1:mem=50mb",
                         command=["/usr/bin/python3", f"{complex_.job_root}/dump.py", name, "2"])

    threads = [threading.Thread(target=submit, args=("mjfuser1", "first")),
               threading.Thread(target=submit, args=("mjfuser2", "second"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for name in ("first", "second"):
        job = seen(complex_, name)["JOBFEATURES"]
        assert (job["job_id"], job["allocated_cpu"], job["max_rss_bytes"]) == \
            (ids[name], "1", str(50 * MIB))
        assert "wall_limit_secs" not in job  # none requested, none enforced
        assert_ran_once_and_node_free(complex_, ids[name])
    assert_no_job_directories_left(complex_)


def test_cput_becomes_the_cpu_limit(complex_):
    qsub(complex_, "mjfuser1", "cput", "-l", "cput=00:02:00")
    job = seen(complex_, "cput")["JOBFEATURES"]
    assert job["cpu_limit_secs"] == "120" and job["allocated_cpu"] == "1"


@contextlib.contextmanager
def site_config(complex_, text: str):
    SITE_CONFIG.write_text(text)
    try:
        yield
    finally:
        SITE_CONFIG.write_text(complex_.good_config)


def test_a_broken_config_runs_the_job_and_leaves_the_node_free(complex_):
    with site_config(complex_, "[mjf\nbroken"):
        job_id = qsub(complex_, "mjfuser1", "broken")
    assert seen(complex_, "broken")["env"]["JOBFEATURES"] is None  # ran, without MJF
    assert_ran_once_and_node_free(complex_, job_id)
    assert "mjf-pbs" in complex_.mom_log()  # the reason is in the mom's log


def test_a_full_base_dir_runs_the_job_without_mjf(complex_):
    mount = complex_.job_root / "full"
    mount.mkdir()
    # In the mom's mount namespace (pbs-up.sh may start the daemons in a private one).
    in_mom = ["nsenter", "-t", str(complex_.mom_pid()), "-m"]
    run([*in_mom, "mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)])
    try:
        run([*in_mom, "sh", "-c", f"cat /dev/zero > {mount}/filler"], check=False)
        with site_config(complex_, f"[mjf]\nbase_dir = {mount}/base\n"):
            job_id = qsub(complex_, "mjfuser1", "full")
        assert seen(complex_, "full")["env"]["JOBFEATURES"] is None
        assert_ran_once_and_node_free(complex_, job_id)
    finally:
        run([*in_mom, "umount", str(mount)])


def test_on_error_fail_ends_only_the_job(complex_):
    unwritable = complex_.job_root / "unwritable"
    unwritable.write_text("a file where base_dir should be\n")
    with site_config(complex_, f"[mjf]\nbase_dir = {unwritable}/base\non_error = fail\n"):
        job_id = qsub(complex_, "mjfuser1", "fail")
    job = complex_.job(job_id)
    # The launch was rejected: the job ended without running, once, and is not held.
    assert job["job_state"] == "F" and job.get("run_count") == 1, job
    assert job.get("Exit_status") != 0
    assert not (complex_.job_root / "out" / "fail.json").exists()
    assert complex_.node_state() == "free"


@contextlib.contextmanager
def hook_commands(complex_, script: str):
    """The hook installed for a directory whose mjf-pbs is ``script``; restored after."""
    bindir = complex_.job_root / "bin"
    bindir.mkdir(exist_ok=True)
    (bindir / "mjf-pbs").write_text(script)
    (bindir / "mjf-pbs").chmod(0o755)
    result = complex_.install_hook(bindir)
    assert result.returncode == 0, result.stderr
    try:
        yield bindir
    finally:
        result = complex_.install_hook(HOOKS_BIN)
        assert result.returncode == 0, result.stderr
        shutil.rmtree(bindir)


def test_a_missing_command_runs_the_job(complex_):
    with hook_commands(complex_, "#!/bin/sh\nexit 0\n") as bindir:
        (bindir / "mjf-pbs").unlink()
        job_id = qsub(complex_, "mjfuser1", "missing")
        assert seen(complex_, "missing")["env"]["JOBFEATURES"] is None
    assert_ran_once_and_node_free(complex_, job_id)


def test_a_command_that_crashes_runs_the_job(complex_):
    """mjf-pbs killed by a signal in every event, after printing garbage: the job runs."""
    script = "#!/bin/sh\nprintf 'JOBFEATURES\\377\\nLD_PRELOAD=/x\\n'\nkill -9 $$\n"
    with hook_commands(complex_, script):
        job_id = qsub(complex_, "mjfuser1", "crash")
        view = seen(complex_, "crash")
    assert view["env"]["JOBFEATURES"] is None
    assert_ran_once_and_node_free(complex_, job_id)


def test_a_hung_command_is_killed_and_the_job_runs(complex_):
    pids = complex_.job_root / "hung.pids"
    script = (f'#!/bin/sh\nif [ "$1" = begin ]; then echo $$ >> {pids}; exec sleep 100; fi\n'
              f'exec {HOOKS_BIN}/mjf-pbs "$@"\n')
    with hook_commands(complex_, script):
        started = time.monotonic()
        job_id = qsub(complex_, "mjfuser1", "hung")
        took = time.monotonic() - started
    assert seen(complex_, "hung")["env"]["JOBFEATURES"] is None
    assert_ran_once_and_node_free(complex_, job_id)
    assert 14 < took < 30  # the adapter's 15 s, well inside PBS's 30 s alarm
    pid = int(pids.read_text().split()[0])
    assert not Path(f"/proc/{pid}").exists()  # killed with its process group


def test_begin_gives_the_variables_and_launch_runs_nothing(complex_):
    """execjob_begin puts the variables into the job's Variable_List (over any the job
    brought along), so execjob_launch starts no mjf-pbs."""
    roles = complex_.job_root / "roles"
    script = f'#!/bin/sh\necho "$1" >> {roles}\nexec {HOOKS_BIN}/mjf-pbs "$@"\n'
    with hook_commands(complex_, script):
        job_id = qsub(complex_, "mjfuser1", "roles", *REQUEST, "-v",
                      "JOBFEATURES=/stale/jobs/1.vm/jobfeatures,MACHINEFEATURES=/stale")
    view = seen(complex_, "roles")
    assert view["env"]["JOBFEATURES"] == f"{complex_.mjf_base}/jobs/{job_id}/jobfeatures"
    assert view["JOBFEATURES"]["job_id"] == job_id
    assert roles.read_text().split() == ["begin", "end"]
    assert_ran_once_and_node_free(complex_, job_id)


@contextlib.contextmanager
def hook_noting_starts(complex_, python: str | None = None):
    """The hook installed for a directory holding a copy of the installed mjf-pbs, so
    that install-hook records where its package lives and for which Python; then that
    mjf-pbs becomes a wrapper noting each start in the file yielded. ``python``: the
    version the installed hook is then told it was recorded for. Restored after."""
    started = complex_.job_root / "started"
    bindir = complex_.job_root / "bin"
    bindir.mkdir(exist_ok=True)
    shutil.copy(HOOKS_BIN / "mjf-pbs", bindir / "mjf-pbs")
    result = complex_.install_hook(bindir)
    assert result.returncode == 0, result.stderr
    # The hooks' venv is of the Python PBS was built with: its code runs in pbs_python.
    assert "it runs mjf-pbs's code from /" in result.stdout, result.stdout
    (bindir / "mjf-pbs").write_text(f'#!/bin/sh\necho "$1" >> {started}\n'
                                    f'exec {HOOKS_BIN}/mjf-pbs "$@"\n')
    try:
        if python:
            recorded = [line for line in MOM_HOOK.read_text().splitlines()
                        if line.startswith("MJF_PYTHON = ")]
            complex_.change_hook(recorded[0], f'MJF_PYTHON = "{python}"')
        yield started
    finally:
        result = complex_.install_hook(HOOKS_BIN)
        assert result.returncode == 0, result.stderr
        shutil.rmtree(bindir)
        started.unlink(missing_ok=True)


@pytest.mark.parametrize("python", [None, "3.0"])
def test_the_hook_runs_mjf_pbs_in_pbs_python_else_starts_it(complex_, python):
    """Where PBS's Python is the one install-hook recorded, begin and end run mjf-pbs's
    code in pbs_python itself: mjf-pbs is never started. Where it is another (here a
    recorded 3.0), the hook starts mjf-pbs for both. The job sees the same either way."""
    with hook_noting_starts(complex_, python) as started:
        submitted = time.time()
        # $MJF_CONFIG of the job's is no config of the hook's, here or in mjf-pbs.
        name = "where-here" if python is None else "where-started"
        job_id = qsub(complex_, "mjfuser1", name, *REQUEST, "-v",
                      "JOBFEATURES=/stale/jobs/1.vm/jobfeatures,MJF_CONFIG=/nowhere")
        view = seen(complex_, name)
        assert job_values(view, complex_.mjf_base, job_id, submitted) == {
            "job_id": job_id, "allocated_cpu": "2", "wall_limit_secs": "600",
            "cpu_limit_secs": "1200", "max_rss_bytes": str(300 * MIB),
            "hs06_job": "20", "grace_secs_job": "600"}
        # what PBS itself gives the job is the job's
        assert (view["env"]["PBS_JOBID"], view["env"]["TMPDIR"]) == \
            (job_id, f"/var/tmp/pbs.{job_id}")
        assert_ran_once_and_node_free(complex_, job_id)
        assert_no_job_directories_left(complex_)
        roles = started.read_text().split() if started.exists() else []
    assert roles == ([] if python is None else ["begin", "end"])


def test_a_hung_step_in_pbs_python_is_stopped_and_the_job_runs(complex_):
    """mjf-pbs's code, run in pbs_python, waits for ever opening its config (a FIFO nobody
    writes): stopped after 15 s, well inside PBS's alarm, as one line in the mom's log."""
    SITE_CONFIG.unlink()
    os.mkfifo(SITE_CONFIG)
    try:
        job_id = qsub(complex_, "mjfuser1", "stuck", wait=False)
        deadline = time.monotonic() + 60
        stopped = "mjf: RuntimeError: mjf-pbs begin (in pbs_python) did not finish in 15 s: " \
                  "stopped"
        while stopped not in complex_.mom_log():
            assert time.monotonic() < deadline, complex_.mom_log()
            time.sleep(0.2)
    finally:
        SITE_CONFIG.unlink()
        SITE_CONFIG.write_text(complex_.good_config)
    complex_.wait_finished(job_id)
    assert seen(complex_, "stuck")["env"]["JOBFEATURES"] is None  # ran, without MJF
    assert_ran_once_and_node_free(complex_, job_id)
    assert "alarm call" not in complex_.mom_log()  # PBS's own, which would fail the event


def test_sync_removes_only_what_pbs_no_longer_runs(complex_):
    job_id = qsub(complex_, "mjfuser1", "long", wait=False, command=["/bin/sleep", "30"])
    jobs = complex_.mjf_base / "jobs"
    deadline = time.monotonic() + 30
    while not (jobs / job_id).exists():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    # A directory whose job PBS no longer runs (an execjob_end that never ran).
    stale = jobs / f"999999.{complex_.node}"
    (stale / "jobfeatures").mkdir(parents=True)
    (stale / "state").mkdir()
    (stale / "state" / "backend").write_text("pbs")
    try:
        result = mjf("sync")
        assert result.returncode == 0, result.stderr
        assert f"removed job {stale.name}: PBS no longer runs it on this node" in result.stdout
        assert not stale.exists()
        assert (jobs / job_id / "jobfeatures").is_dir()  # running: kept
        drained = mjf("drain", "--in", "2h")
        assert drained.returncode == 0, drained.stderr
        shutdown = (complex_.mjf_base / "machinefeatures" / "shutdowntime").read_text()
        assert (jobs / job_id / "jobfeatures" / "shutdowntime_job").read_text() == shutdown
        assert mjf("drain", "--cancel").returncode == 0
        assert not (jobs / job_id / "jobfeatures" / "shutdowntime_job").exists()
    finally:
        pbs_command("qdel", "-W", "force", job_id, check=False)
    complex_.wait_finished(job_id)
    assert_no_job_directories_left(complex_)
    assert complex_.node_state() == "free"


def test_a_maintenance_reservation_becomes_the_shutdown_time(complex_):
    start = int(time.time()) // 60 * 60 + 7200
    # pbs_rsub --hosts (a maintenance reservation) needs root in acl_roots.
    added = "root@*" not in qmgr("list server acl_roots").stdout
    if added:
        qmgr("set server acl_roots += root@*")
    try:
        result = pbs_command("pbs_rsub", "--hosts", complex_.node,
                             "-R", time.strftime("%Y%m%d%H%M", time.localtime(start)),
                             "-E", time.strftime("%Y%m%d%H%M", time.localtime(start + 3600)))
        reservation = result.stdout.split()[0]
        assert reservation.startswith("M"), result.stdout
        try:
            deadline = time.monotonic() + 30
            while "RESV_CONFIRMED" not in pbs_command("pbs_rstat", "-f", reservation).stdout:
                assert time.monotonic() < deadline
                time.sleep(0.2)
            # Only PBS is asked: the site config names it (this host has the other
            # batch systems' commands too).
            synced = mjf("sync")
            assert synced.returncode == 0, synced.stderr
            shutdown = complex_.mjf_base / "machinefeatures" / "shutdowntime"
            assert shutdown.read_text() == str(start), synced.stdout + synced.stderr
            pbs_command("pbs_rdel", reservation)
            deadline = time.monotonic() + 30
            while reservation in pbs_command("pbs_rstat", check=False).stdout:
                assert time.monotonic() < deadline
                time.sleep(0.2)
            assert mjf("sync").returncode == 0
            assert not shutdown.exists()  # withdrawn with the reservation
        finally:
            pbs_command("pbs_rdel", reservation, check=False)
    finally:
        if added:
            qmgr("set server acl_roots -= root@*", check=False)


def test_the_record_holds_what_pbs_measured(complex_):
    records = complex_.job_root / "records"
    with site_config(complex_, complex_.good_config + f"[records]\ndir = {records}\n"):
        # One line: an argument holding a newline does not survive PBS's execjob_launch
        # (seen here: the job then ends at once, with any launch hook that sets a variable).
        job_id = qsub(complex_, "mjfuser1", "record", *REQUEST, command=[
            "/usr/bin/python3", "-c",
            "import time; end = time.time() + 12; any(time.time() > end for _ in iter(int, 1))"])
    log = (complex_.job_root / "out" / "record.log").read_text()
    files = sorted(records.glob("*/*.json"))
    assert len(files) == 1
    record = json.loads(files[0].read_text())
    assert record["job_id"] == job_id and record["user"] == "mjfuser1"
    assert record["queue"] == "workq" and record["backend"] == "pbs"
    assert record["requested"]["allocated_cpu"] == 2
    delivered = record["delivered"]
    # PBS samples what a job uses every few seconds: the last sample, before its end.
    assert 1 <= delivered["cpu_secs"]["value"] <= 13, (delivered, log)
    assert 1 <= delivered["wall_secs"]["value"] <= 14, delivered
    assert delivered["cpu_secs"]["source"].startswith("PBS resources_used.cput")


PBS_MOM_PRIV = Path("/var/spool/pbs/mom_priv")
PROFILE_D = Path("/etc/profile.d/mjf.sh")


def test_classic_prologue_and_profile_d_without_the_hook(complex_):
    """OpenPBS's own classic mom_priv/prologue and epilogue (argv: job id, user, group;
    the rest from qstat -f) and the profile.d snippet for the job's login shell."""
    contrib = Path(__file__).resolve().parents[2] / "contrib" / "pbs"
    installed = []
    complex_.delete_hook()
    try:
        for name in ("prologue", "epilogue"):
            path = PBS_MOM_PRIV / name
            path.write_text((contrib / name).read_text().replace("/usr/bin/", f"{HOOKS_BIN}/"))
            path.chmod(0o700)
            installed.append(path)
        PROFILE_D.write_text((contrib / "mjf.sh").read_text().replace("/usr/bin/",
                                                                       f"{HOOKS_BIN}/"))
        installed.append(PROFILE_D)
        script = complex_.job_root / "classic.sh"
        script.write_text(f"#!/bin/bash\n/usr/bin/python3 {complex_.job_root}/dump.py classic\n")
        script.chmod(0o755)
        submitted = time.time()
        # A job script (not `qsub -- CMD`) runs in the user's login shell, which reads
        # /etc/profile.d.
        job_id = qsub(complex_, "mjfuser1", "classic", *REQUEST, script=script)
        view = seen(complex_, "classic")
        assert job_values(view, complex_.mjf_base, job_id, submitted) == {
            "job_id": job_id, "allocated_cpu": "2", "wall_limit_secs": "600",
            "cpu_limit_secs": "1200", "max_rss_bytes": str(300 * MIB),
            "hs06_job": "20", "grace_secs_job": "600"}
        assert_ran_once_and_node_free(complex_, job_id)
        assert_no_job_directories_left(complex_)  # the epilogue removed it
    finally:
        for path in installed:
            path.unlink()
        result = complex_.install_hook()
        assert result.returncode == 0, result.stderr




def test_the_pbs_cgroups_memory_limit_is_the_jobs_when_lower(complex_):
    """PBS's bundled pbs_cgroups hook (order 100, ours 200) limits a job that asked for no
    memory to its default, 256 MB: that is the job's max_rss_bytes."""
    before = json.loads(pbs_command("pbsnodes", "-v", complex_.node, "-F", "json").stdout)
    qmgr("set hook pbs_cgroups enabled = true")
    try:
        # The server hands the mom the enabled hook at its own pace (seconds here, its copy
        # of the hook's settings up to two minutes later): jobs until one is in a cgroup.
        deadline = time.monotonic() + 120
        for attempt in range(1000):
            qsub(complex_, "mjfuser1", f"cgroup{attempt}", "-l", "select=1:ncpus=1")
            job = seen(complex_, f"cgroup{attempt}")["JOBFEATURES"]
            if "max_rss_bytes" in job or time.monotonic() > deadline:
                break
            time.sleep(1)
        qsub(complex_, "mjfuser1", "cgroup-mem", "-l", "select=1:ncpus=1:mem=100mb")
    finally:
        qmgr("set hook pbs_cgroups enabled = false")
        mom_copy = PBS_MOM_PRIV / "hooks" / "pbs_cgroups.HK"
        deadline = time.monotonic() + 30
        while "enabled=true" in mom_copy.read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        # What pbs_cgroups leaves once disabled: its empty job hierarchy.
        for top in Path("/sys/fs/cgroup").glob("*/pbs_jobs.service"):
            for directory in sorted(top.rglob("*"), key=lambda path: -len(path.parts)):
                if directory.is_dir():
                    with contextlib.suppress(OSError):
                        directory.rmdir()
            with contextlib.suppress(OSError):
                top.rmdir()
    assert job.get("max_rss_bytes") == str(256 * MIB), job
    assert seen(complex_, "cgroup-mem")["JOBFEATURES"]["max_rss_bytes"] == str(100 * MIB)
    after = json.loads(pbs_command("pbsnodes", "-v", complex_.node, "-F", "json").stdout)
    node = complex_.node
    assert after["nodes"][node]["resources_available"]["mem"] == \
        before["nodes"][node]["resources_available"]["mem"]
    assert complex_.node_state() == "free"
    assert_no_job_directories_left(complex_)
