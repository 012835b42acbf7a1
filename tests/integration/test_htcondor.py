"""The HTCondor wrapper and cron on a real HTCondor 23.9 pool, asserted from inside jobs.

Runs as root (CI): a one-machine pool in a Debian trixie chroot whose config.d
holds contrib/htcondor/mjf.config; vanilla jobs submitted by an unprivileged
user with request_cpus, request_memory, request_disk and allowed_job_duration.
"""

from __future__ import annotations

import contextlib
import json
import os
import time

import pytest

from tests.integration.htcondor_pool import GOOD_CONFIG, USER, condor_arguments, condor_pool
from tests.integration.job_side import MEMORY_LIMITS, dump_script, enforced_memory_limit, install
from tests.integration.trixie_root import VENV

pytestmark = pytest.mark.integration

# Also: the machine and job ads, the memory limits enforced; exits $DUMP_EXIT.
DUMP = dump_script(("_CONDOR_SCRATCH_DIR",), argv="sys.argv[2:]", extra=r'''
ads = {}
for var in ("_CONDOR_MACHINE_AD", "_CONDOR_JOB_AD"):
    for line in open(os.environ[var]):
        name, _, value = line.partition(" = ")
        ads[var + ":" + name] = value.strip()
out["ads"] = ads
''' + MEMORY_LIMITS, after='sys.exit(int(os.environ.get("DUMP_EXIT", "0")))\n')


@pytest.fixture(scope="module")
def pool():
    with condor_pool() as condor:
        install(condor.work, {"dump.py": DUMP})
        yield condor


def submit_and_wait(pool, name, jobs, extra=""):
    """Submit one cluster (one `queue` per job: (name, args, environment)); wait for it."""
    log = pool.work / f"{name}.log"
    lines = [
        "universe = vanilla", "executable = /usr/bin/python3", "transfer_executable = false",
        "should_transfer_files = YES", f"log = {log}", f"output = {pool.work}/out/{name}.out",
        f"error = {pool.work}/out/{name}.err", "request_cpus = 1", "request_memory = 300",
        "request_disk = 102400", "allowed_job_duration = 600", extra,
    ]
    for job_name, args, environment in jobs:
        argv = [str(pool.work / "dump.py"), job_name, *args]
        lines.append(f"arguments = {condor_arguments(argv)}")
        lines.append(f'environment = "{environment}"')
        lines.append("queue")
    submit_file = pool.work / f"{name}.sub"
    submit_file.write_text("\n".join(lines) + "\n")
    pool.submit(USER, submit_file)
    return pool.wait(USER, log)


def seen(pool, name):
    return json.loads((pool.work / "out" / f"{name}.json").read_text())


def test_the_job_sees_every_value_and_keeps_its_argv_and_exit_code(pool):
    weird = ["a b", "it's", 'q"uote', "$HOME", "--dry-run"]
    log = submit_and_wait(pool, "main", [("main", [], ""), ("argv", weird, "DUMP_EXIT=7")])
    assert "return value 7" in log and "return value 0" in log
    view = seen(pool, "main")
    ads = view["ads"]
    scratch = view["env"]["_CONDOR_SCRATCH_DIR"]
    job_id = json.loads(ads["_CONDOR_JOB_AD:GlobalJobId"])
    assert view["env"]["JOBFEATURES"] == f"{scratch}/.mjf/jobs/{job_id}/jobfeatures"
    assert view["env"]["MACHINEFEATURES"] == f"{scratch}/.mjf/machinefeatures"
    slot_memory = int(ads["_CONDOR_MACHINE_AD:Memory"]) * 2**20
    enforced = enforced_memory_limit(view) or 2**63
    job = view["JOBFEATURES"]
    assert job == {
        "job_id": job_id,
        "jobstart_secs": ads["_CONDOR_JOB_AD:JobCurrentStartDate"],
        "allocated_cpu": ads["_CONDOR_MACHINE_AD:Cpus"],
        "max_rss_bytes": str(min(slot_memory, enforced)),
        "scratch_limit_bytes": str(int(ads["_CONDOR_MACHINE_AD:Disk"]) * 1024),
        "wall_limit_secs": "600", "cpu_limit_secs": "600",
        "hs06_job": job["hs06_job"], "grace_secs_job": "900",
    }
    total = int(view["MACHINEFEATURES"]["total_cpu"])
    assert float(job["hs06_job"]) == pytest.approx(123.5 / total, abs=0.01)
    assert view["MACHINEFEATURES"] == {"total_cpu": str(total), "hs06": "123.5",
                                       "grace_secs": "900"}
    assert seen(pool, "argv")["argv"] == weird


def test_cron_attributes_reach_the_slot_ads(pool):
    deadline = time.monotonic() + 60
    while True:
        ads = pool.machine_ads()
        if "MJF_MACHINE_HS06 = 123.5" in ads or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert "MJF_MACHINE_HS06 = 123.5" in ads
    assert "MJF_MACHINE_GRACE_SECS = 900" in ads
    assert f"MJF_MACHINE_TOTAL_CPU = {os.cpu_count()}" in ads
    assert "MJF_MACHINE_SHUTDOWNTIME = undefined" in ads  # no drain announced
    for old in ("MJF_TOTAL_CPU", "MJF_HS06", "MJF_GRACE_SECS", "MJF_SHUTDOWNTIME"):
        assert f"\n{old} = " not in ads  # the names before glideinWMS's


def test_the_start_policy_keeps_a_job_wanting_more_hs06_idle(pool):
    """contrib's START: RequiredMachineHS06 above the slot's MJF_MACHINE_HS06 (123.5)
    never starts; exactly that runs. The refused job is queued first, so every
    negotiation that started the other one also weighed (and refused) it."""
    too_much = pool.work / "hs06-too-much.sub"
    too_much.write_text(
        "universe = vanilla\nexecutable = /bin/true\ntransfer_executable = false\n"
        f"log = {pool.work}/hs06-too-much.log\nrequest_cpus = 1\nrequest_memory = 100\n"
        '+MJFTest = "hs06-too-much"\n+RequiredMachineHS06 = 123.6\nqueue\n')
    pool.submit(USER, too_much)
    query = ["condor_q", "-allusers", "-constraint", 'MJFTest == "hs06-too-much"',
             "-af", "JobStatus", "NumJobStarts ?: 0"]
    try:
        log = submit_and_wait(pool, "hs06-enough", [("hs06-enough", [], "")],
                              extra="+RequiredMachineHS06 = 123.5")
        assert "return value 0" in log
        assert seen(pool, "hs06-enough")["MACHINEFEATURES"]["hs06"] == "123.5"
        deadline = time.monotonic() + 6  # three more negotiator cycles (2 s)
        while True:
            state = pool.chroot(query).stdout.split()  # [] once it ran and left the queue
            assert state == ["1", "0"], f"the job wanting more HS06 left Idle: {state}"
            if time.monotonic() > deadline:
                break
            time.sleep(1)
    finally:
        pool.chroot(["condor_rm", "-constraint", 'MJFTest == "hs06-too-much"'], check=False)
    assert "Job executing" not in (pool.work / "hs06-too-much.log").read_text()


@contextlib.contextmanager
def site_config(pool, text):
    """The pool's /etc/mjf/mjf.conf reads ``text`` for the jobs submitted meanwhile."""
    pool.site_config.write_text(text)
    try:
        yield
    finally:
        pool.site_config.write_text(GOOD_CONFIG)


def test_a_broken_config_still_runs_the_job(pool):
    with site_config(pool, "[htcondor]\nwall_limit_unit = fortnights\n"):
        log = submit_and_wait(pool, "broken", [("broken", ["x"], "")])
    assert "return value 0" in log
    view = seen(pool, "broken")
    assert view["argv"] == ["x"] and view["env"]["JOBFEATURES"] is None


def test_a_chained_wrapper_runs_the_job(pool):
    chained = pool.work / "chained-wrapper"
    chained.write_text(f'#!/bin/sh\necho "$JOBFEATURES" > {pool.work}/out/chained.txt\n'
                       'exec "$@"\n')
    chained.chmod(0o755)
    with site_config(pool, GOOD_CONFIG + f"[htcondor]\nnext_wrapper = {chained}\n"):
        log = submit_and_wait(pool, "chain", [("chain", ["y z"], "")])
    assert "return value 0" in log
    view = seen(pool, "chain")
    assert view["argv"] == ["y z"]
    assert (pool.work / "out/chained.txt").read_text().strip() == view["env"]["JOBFEATURES"]


WAIT_FOR_DRAIN = r'''
import os, sys, time
out = os.path.join(os.path.dirname(__file__), "out")
open(os.path.join(out, "waiting"), "w").close()
path = os.path.join(os.environ["JOBFEATURES"], "shutdowntime_job")
deadline = time.time() + 120
while not os.path.exists(path) and time.time() < deadline:
    time.sleep(0.5)
with open(os.path.join(out, "drained.txt"), "w") as f:
    f.write(open(path).read() if os.path.exists(path) else "never")
'''


def test_a_drain_reaches_a_running_job(pool):
    script = pool.work / "wait_for_drain.py"
    script.write_text(WAIT_FOR_DRAIN)
    script.chmod(0o644)
    log = pool.work / "drain.log"
    submit = pool.work / "drain.sub"
    submit.write_text(
        "universe = vanilla\nexecutable = /usr/bin/python3\ntransfer_executable = false\n"
        f"arguments = {script}\nlog = {log}\nrequest_cpus = 1\nrequest_memory = 100\n"
        "queue\n")
    pool.submit(USER, submit)
    deadline = time.monotonic() + 120
    while not (pool.work / "out/waiting").exists():
        assert time.monotonic() < deadline, "the job did not start"
        time.sleep(0.5)
    drained = pool.chroot([f"{VENV}/bin/mjf", "drain", "--in", "1h"], check=False)
    try:
        assert drained.returncode == 0, drained.stderr
        assert "updated in 1 job(s)" in drained.stdout
        pool.wait(USER, log)
        shutdown = (pool.root / "run/mjf/machinefeatures/shutdowntime").read_text()
        assert (pool.work / "out/drained.txt").read_text() == shutdown
    finally:
        pool.chroot([f"{VENV}/bin/mjf", "drain", "--cancel"], check=False)


def test_a_graceful_drain_becomes_shutdowntime_through_sync(pool):
    """Last in this module: the drain stops the machine from taking jobs."""
    names = pool.chroot(["condor_status", "-af", "Name"]).stdout.split()
    name = next(name for name in names if "@" in name)  # a slot: drains its startd
    shutdown_file = pool.root / "run/mjf/machinefeatures/shutdowntime"
    drained_at = int(time.time())
    pool.chroot(["condor_drain", "-graceful", name])
    try:
        deadline = time.monotonic() + 60
        while "true" not in pool.chroot(["condor_status", "-startd", "-af", "Draining"]).stdout:
            assert time.monotonic() < deadline, "the startd never reported Draining"
            time.sleep(1)
        # HTCondor re-estimates the completion time while it drains: a window, not a value.
        # (the StartD ad's estimate may predate the drain request by an update interval).
        window = range(drained_at - 120, int(time.time()) + 300)
        # The cron (as the condor user) publishes it at once (an earlier value may be
        # in the ad until its next run)...
        deadline = time.monotonic() + 60
        published = None
        while published not in window and time.monotonic() < deadline:
            for line in pool.machine_ads().splitlines():
                name, _, value = line.partition(" = ")
                if name == "MJF_MACHINE_SHUTDOWNTIME" and value.isdigit():
                    published = int(value)
            time.sleep(1)
        assert published in window
        # ... and `mjf sync` (root) writes it where jobs read it.
        synced = pool.chroot([f"{VENV}/bin/mjf", "sync"], check=False)
        assert "from HTCondor graceful drain" in synced.stdout, synced.stdout + synced.stderr
        assert int(shutdown_file.read_text()) in window
        again = pool.chroot([f"{VENV}/bin/mjf", "sync"], check=False)
        assert "graceful drain" not in again.stdout  # announced once
    finally:
        pool.chroot(["condor_drain", "-cancel", name], check=False)
    deadline = time.monotonic() + 60
    while "true" in pool.chroot(["condor_status", "-startd", "-af", "Draining"]).stdout \
            and time.monotonic() < deadline:
        time.sleep(1)
    synced = pool.chroot([f"{VENV}/bin/mjf", "sync"], check=False)
    assert "withdrawn" in synced.stdout, synced.stdout + synced.stderr
    assert not shutdown_file.exists()
