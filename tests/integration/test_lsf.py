"""The LSF hooks on a real LSF-compatible scheduler (volclava 2.2), asserted from inside
the jobs.

Runs as root (CI): a one-host volclava cluster (tests/integration/lsf_cluster.py) whose
queues run ``mjf-lsf`` as docs/lsf.md wires it: ``JOB_STARTER = eval "$(mjf-lsf
exports)";``, the pre-exec and post-exec as the job's user (queue ``mjf``) or as root
(queue ``mjfroot``, ``PRE_POST_EXEC_USER = root``). Jobs of unprivileged users: values
seen inside each, the readers' verdict, and nothing left behind whatever the end (done,
failed, killed, requeued, a pre-exec the queue retried).
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, pending
from tests.integration.lsf_cluster import (
    HOOK_LINES,
    HOOKS_BIN,
    HOST,
    default_queues,
    lsf_cluster,
    mjf,
    seen,
)
from tests.integration.publish_side import ABOVE, HS06, MEETS, assert_matched, install_match_job
from tests.integration.site import (
    SITE,
    SITE_CONFIG,
    assert_no_job_directories_left,
    record_files,
    records_config,
)

pytestmark = pytest.mark.integration

MIB = 2**20
USER = "mjfuser1"
RECORD_JOB = Path(__file__).with_name("record_job.py")
# A queue whose pre-exec fails until a flag file is there: LSF requeues the job and tries
# it again (its own pre-exec, then ours, in one PRE_EXEC).
RETRY_QUEUE = """\
Begin Queue
QUEUE_NAME = retry
PRIORITY = 30
JOB_STARTER = eval "$({bin}/mjf-lsf exports)";
PRE_EXEC = {bin}/mjf-lsf pre-exec && test -e {flag}
POST_EXEC = {bin}/mjf-lsf post-exec
End Queue
"""


def private_store(user: str = USER) -> Path:
    """Where a pre-exec as the job's user writes (it cannot write base_dir): its own."""
    return Path(f"/tmp/mjf-{pwd.getpwnam(user).pw_uid}")


@pytest.fixture(scope="module")
def cluster():
    # Where the retry queue's pre-exec, as the job's user, looks for its flag.
    flag = Path(tempfile.mkdtemp(prefix="mjf-lsf-retry-")) / "ready"
    flag.parent.chmod(0o755)
    queues = default_queues() + RETRY_QUEUE.format(bin=HOOKS_BIN, flag=flag)
    private = private_store()
    existed = private.exists()  # someone's own: left as it is
    with lsf_cluster(queues) as started:
        started.retry_flag = flag
        yield started
    shutil.rmtree(flag.parent)
    if not existed and private.exists():
        assert_no_job_directories_left(private)
        shutil.rmtree(private)


def job_dir(cluster, queue: str, job_id: str) -> Path:
    base = cluster.mjf_base if queue == "mjfroot" else private_store()
    return base / "jobs" / job_id


@pytest.mark.parametrize("queue", ["mjf", "mjfroot"])
def test_a_job_sees_every_value(cluster, queue):
    submitted = time.time()
    name = f"values-{queue}"
    job_id = cluster.bsub(USER, name, "-q", queue, "-n", "2", "-W", "10", "-M", "300",
                          command=f"/usr/bin/python3 {cluster.job_root}/dump.py {name} 0 readers")
    assert cluster.jobs(job_id) == {job_id: "DONE"}, cluster.exit_info(job_id)
    view = seen(cluster, name)
    assert view["env"]["LSB_JOBID"] == job_id
    assert view["env"]["JOBFEATURES"] == f"{job_dir(cluster, queue, job_id)}/jobfeatures"
    job = dict(view["JOBFEATURES"])
    assert abs(int(job.pop("jobstart_secs")) - submitted) < 60
    assert int(job.pop("scratch_limit_bytes")) > 0
    expected = {"job_id": job_id, "allocated_cpu": "2", "wall_limit_secs": "600",
                "cpu_limit_secs": "1200", "hs06_job": "20", "grace_secs_job": "600"}
    rss = view["rlimits"]["rss"]
    if rss > 0:  # volclava enforces -M (MB) as the job's RLIMIT_RSS
        expected["max_rss_bytes"] = str(rss)
    assert job == expected, view
    assert rss == 300 * MIB
    readers = view["readers"]
    # LSF knows no swap limit without cgroups (volclava none at all): a site sets one in
    # its config (docs/lsf.md), and `mjf check` warns of that alone until then.
    problems = [line for line in readers["check"]["out"].splitlines()
                if line.startswith(("WARNING", "ERROR"))]
    assert readers["check"]["rc"] == 1 and len(problems) == 1, readers["check"]
    assert problems[0].endswith("max_swap_bytes is missing (swap limit of the whole job) "
                                "[required]"), readers["check"]
    described = json.loads(readers["describe"]["out"])
    assert described["dirac"]["NumberOfProcessors"] == 2, readers["describe"]
    assert readers["match"]["rc"] == 0, readers["match"]
    for key, text in {**view["MACHINEFEATURES"], **view["JOBFEATURES"]}.items():
        assert key == "job_id" or re.fullmatch(r"[0-9]+(\.[0-9]+)?", text), (key, text)
    assert_no_job_directories_left(job_dir(cluster, queue, job_id).parent.parent)


def test_a_root_pre_exec_writes_into_base_dir_for_the_jobs_user(cluster):
    job_id = cluster.bsub(USER, "owner", "-q", "mjfroot", "-W", "5", wait=False,
                          command=f"/usr/bin/python3 {cluster.job_root}/dump.py owner 5")
    wait_set_up(cluster, "mjfroot", job_id)
    directory = job_dir(cluster, "mjfroot", job_id)
    features = directory / "jobfeatures"
    assert directory.stat().st_uid == 0
    assert features.stat().st_uid == pwd.getpwnam(USER).pw_uid
    cluster.wait_ended(job_id)
    assert_no_job_directories_left(cluster.mjf_base)


def test_array_elements_each_get_their_own_directory(cluster):
    job_id = cluster.bsub("mjfuser2", "arr", "-q", "mjfroot", "-J", "arr[1-3]", "-W", "3",
                          command=f"/usr/bin/python3 {cluster.job_root}/dump.py arr")
    assert cluster.jobs(job_id) == {f"{job_id}[{index}]": "DONE" for index in (1, 2, 3)}
    for index in (1, 2, 3):
        view = seen(cluster, f"arr.{index}")
        element = f"{job_id}[{index}]"
        assert view["JOBFEATURES"]["job_id"] == element
        assert view["env"]["JOBFEATURES"] == f"{cluster.mjf_base}/jobs/{element}/jobfeatures"
        assert view["JOBFEATURES"]["allocated_cpu"] == "1"
        assert view["JOBFEATURES"]["wall_limit_secs"] == "180"
    assert_no_job_directories_left(cluster.mjf_base)


@pytest.mark.parametrize("queue", ["mjf", "mjfroot"])
def test_a_failing_job_keeps_its_status_and_leaves_nothing(cluster, queue):
    # What a quoted "%USRCMD" would break: a '"' and several commands in one job.
    job_id = cluster.bsub(USER, f"fails-{queue}", "-q", queue,
                          command='echo "it \\"failed\\"" > /dev/null; test -n "$JOBFEATURES"'
                                  ' && exit 3')
    assert cluster.jobs(job_id) == {job_id: "EXIT"}
    assert "Exited with exit code 3" in cluster.exit_info(job_id)
    assert_no_job_directories_left(job_dir(cluster, queue, job_id).parent.parent)


def wait_set_up(cluster, queue: str, job_id: str) -> None:
    """Until the job runs with its directory complete: its pre-exec has ended and its own
    shell's job starter has completed the values (nothing is left pending). LSF runs no
    post-exec for a job killed before its pre-exec ended."""
    directory = job_dir(cluster, queue, job_id)
    deadline = time.monotonic() + 60
    while not (directory / "jobfeatures" / "job_id").exists() or \
            pending(directory.parent.parent, job_id):
        assert time.monotonic() < deadline, f"{directory} not set up"
        time.sleep(0.2)


def test_a_killed_job_leaves_nothing(cluster):
    job_id = cluster.bsub(USER, "killed", "-q", "mjfroot", wait=False,
                          command=f"/usr/bin/python3 {cluster.job_root}/dump.py killed 300")
    wait_set_up(cluster, "mjfroot", job_id)
    cluster.command("bkill", job_id)
    assert cluster.wait_ended(job_id) == {job_id: "EXIT"}
    assert_no_job_directories_left(cluster.mjf_base)


def test_a_requeued_job_runs_again_with_its_values(cluster):
    flag = cluster.job_root / "out" / "requeued.once"
    # The first run waits to be requeued; the second sees its values and ends.
    script = (f"if [ -e {flag} ]; then /usr/bin/python3 {cluster.job_root}/dump.py requeued; "
              f"else touch {flag}; sleep 300; fi")
    job_id = cluster.bsub(USER, "requeued", "-q", "mjfroot", "-W", "10", wait=False,
                          command=script)
    deadline = time.monotonic() + 60
    while not flag.exists():
        assert time.monotonic() < deadline, cluster.exit_info(job_id)
        time.sleep(0.3)
    cluster.command("brequeue", job_id)
    # Killed, pending again, run again: its second run writes what it saw, and ends.
    view = seen(cluster, "requeued")
    assert cluster.wait_ended(job_id) == {job_id: "DONE"}, cluster.exit_info(job_id)
    assert view["JOBFEATURES"]["job_id"] == job_id
    assert view["JOBFEATURES"]["wall_limit_secs"] == "600"
    assert_no_job_directories_left(cluster.mjf_base)


def test_a_pre_exec_the_queue_retries_sets_the_job_up_once_it_runs(cluster):
    job_id = cluster.bsub(USER, "retried", "-q", "retry", "-W", "4", wait=False)
    # LSF requeues a job whose pre-exec fails and tries again: let it fail once (ours
    # ran first and wrote the job's directory), and be pending again.
    written = job_dir(cluster, "retry", job_id)
    deadline = time.monotonic() + 60
    while not written.exists():
        assert time.monotonic() < deadline, cluster.exit_info(job_id)
        time.sleep(0.3)
    cluster.wait_state(job_id, "PEND")
    cluster.retry_flag.touch()
    assert cluster.wait_ended(job_id, timeout=180) == {job_id: "DONE"}, cluster.exit_info(job_id)
    view = seen(cluster, "retried")
    assert view["JOBFEATURES"]["job_id"] == job_id
    assert view["JOBFEATURES"]["wall_limit_secs"] == "240"
    assert_no_job_directories_left(private_store())


def test_the_hooks_wiring_is_what_contrib_gives_a_site():
    contrib = (Path(__file__).resolve().parents[2] / "contrib/lsf/lsb.queues").read_text()
    for line in HOOK_LINES.format(bin="/usr/bin").splitlines():
        key, value = (part.strip() for part in line.split("=", 1))
        assert re.search(rf"^{key}\s*=\s*{re.escape(value)}$", contrib, re.M), line
    assert os.path.exists(HOOKS_BIN / "mjf-lsf")


def test_a_host_an_admin_closes_announces_its_shutdown_through_mjf_sync(cluster):
    # A job that ends by itself once the host is open again (this test is not about a
    # killed job's end: test_a_killed_job_leaves_nothing is).
    job_id = cluster.bsub(USER, "drained", "-q", "mjfroot", "-W", "10", wait=False,
                          command=f"/usr/bin/python3 {cluster.job_root}/dump.py drained 20")
    wait_set_up(cluster, "mjfroot", job_id)
    machine = cluster.mjf_base / "machinefeatures" / "shutdowntime"
    job = job_dir(cluster, "mjfroot", job_id) / "jobfeatures" / "shutdowntime_job"
    try:
        before = time.time()
        cluster.command("badmin", "hclose", HOST)
        synced = mjf(cluster, "sync")
        assert synced.returncode == 0, synced.stdout + synced.stderr
        closed = int(machine.read_text())
        assert int(before) - 1 <= closed <= time.time(), closed  # when LSF closed it
        assert job.read_text() == str(closed)
        cluster.command("badmin", "hopen", HOST)
        synced = mjf(cluster, "sync")
        assert synced.returncode == 0, synced.stdout + synced.stderr
        assert not machine.exists() and not job.exists()
    except BaseException:
        cluster.command("bkill", job_id, check=False)
        raise
    finally:
        cluster.command("badmin", "hopen", HOST, check=False)
    assert cluster.wait_ended(job_id) == {job_id: "DONE"}
    assert_no_job_directories_left(cluster.mjf_base)


def test_mjf_sync_removes_a_jobs_directory_only_once_lsf_lists_it_no_more(cluster):
    job_id = cluster.bsub(USER, "kept", "-q", "mjfroot", "-W", "10", wait=False,
                          command=f"/usr/bin/python3 {cluster.job_root}/dump.py kept 300")
    wait_set_up(cluster, "mjfroot", job_id)
    # A job killed while its pre-exec ran gets no post-exec: its directory, as root's
    # pre-exec wrote it, stays behind.
    gone = {**cluster.env, "LSB_JOBID": "99999", "LSB_JOBINDEX": "0", "USER": USER,
            "LSB_MCPU_HOSTS": f"{os.uname().nodename} 1"}
    written = subprocess.run([str(HOOKS_BIN / "mjf-lsf"), "pre-exec"], env=gone,
                             capture_output=True, text=True, timeout=60)
    assert written.returncode == 0, written.stderr
    assert (cluster.mjf_base / "jobs" / "99999").is_dir()
    try:
        synced = mjf(cluster, "sync")
        assert synced.returncode == 0, synced.stdout + synced.stderr
        assert not (cluster.mjf_base / "jobs" / "99999").exists()
        assert job_dir(cluster, "mjfroot", job_id).is_dir()  # bjobs lists it: kept
    finally:
        cluster.command("bkill", job_id, check=False)
        cluster.wait_ended(job_id)
    # With no job at all, bjobs says so (exit 254): a pass that fails nothing, and leaves
    # nothing.
    synced = mjf(cluster, "sync")
    assert synced.returncode == 0, synced.stdout + synced.stderr
    assert_no_job_directories_left(cluster.mjf_base)


def test_each_job_gets_a_record_of_what_lsf_says_it_used(cluster):
    records = cluster.job_root / "records"
    shutil.copy(RECORD_JOB, cluster.job_root / "record_job.py")
    (cluster.job_root / "record_job.py").chmod(0o644)
    SITE_CONFIG.write_text(cluster.good_config + records_config(records))
    try:
        job_id = cluster.bsub(USER, "record", "-q", "mjfroot", "-n", "2", "-W", "10",
                              command=f"/usr/bin/python3 {cluster.job_root}/record_job.py "
                                      f"{cluster.job_root}/out/record.json 2 100")
        found = record_files(records)
    finally:
        SITE_CONFIG.write_text(cluster.good_config)
    job = json.loads((cluster.job_root / "out" / "record.json").read_text())
    assert len(found) == 1 and found[0].name.endswith(f"-{job_id}.json"), found
    record = json.loads(found[0].read_text())
    if os.environ.get("MJF_RECORD_VOLCLAVA_FIXTURES"):
        (FIXTURES / "volclava-2.2" / "bjobs-l-done.txt").write_text(cluster.exit_info(job_id))
    assert record["job_id"] == job_id and record["backend"] == "lsf"
    assert record["user"] == USER and record["queue"] == "mjfroot"
    assert record["requested"]["allocated_cpu"] == 2
    assert record["requested"]["wall_limit_secs"] == 600
    delivered = record["delivered"]
    cpu = delivered["cpu_secs"]
    assert "bjobs -l: CPU time used" in cpu["source"], cpu
    # LSF's figure is the job's rusage at its end, to 0.1 s: two children burnt 2 s each.
    assert abs(cpu["value"] - job["cpu_secs"]) <= max(0.1 * job["cpu_secs"], 0.5), (cpu, job)
    assert delivered["peak_memory_bytes"]["source"].endswith("bjobs -l: MAX MEM")
    text = found[0].with_suffix(".apel").read_text()
    fields = dict(line.split(": ", 1) for line in text.splitlines()[1:-1])
    assert fields["Site"] == SITE and fields["LocalJobId"] == job_id
    assert fields["CpuDuration"] == str(round(cpu["value"]))
    assert found[0].with_suffix(".xml").exists()


def test_the_elim_publishes_hs06_and_submit_args_places_jobs_by_it(cluster):
    # LIM started the ELIM with the cluster: the host's hs06, as `mjf machine` gives it.
    deadline = time.monotonic() + 90
    load = ""
    while f" {HS06}" not in load.replace(".0", ""):
        assert time.monotonic() < deadline, load
        time.sleep(1)
        load = cluster.command("lsload", "-I", "hs06", "-w", check=False).stdout
    # The options mjf submit-args prints (with lsf.conf's LSF_UNIT_FOR_LIMITS), exactly,
    # as the job's user submits them.
    printed = mjf(cluster, "submit-args", "--batch", "lsf", MEETS)
    assert printed.returncode == 0, printed.stderr
    words = shlex.split(printed.stdout)
    assert words == ["-n", "2", "-R", f"select[hs06>={HS06 - 5}] span[hosts=1]",
                     "-M", "200", "-W", "10"], words
    script = install_match_job(cluster.job_root, MEETS)
    out = cluster.job_root / "out" / "placed.json"
    job_id = cluster.bsub(USER, "placed", "-q", "mjfroot", *words,
                          command=f"/usr/bin/python3 {script} {out}")
    assert_matched(out, lambda: cluster.exit_info(job_id))
    assert cluster.jobs(job_id) == {job_id: "DONE"}
    # Above the host's hs06: pending, never run, LSF saying why.
    above = mjf(cluster, "submit-args", "--batch", "lsf", ABOVE)
    job_id = cluster.bsub(USER, "above", "-q", "mjfroot", *shlex.split(above.stdout),
                          command="/bin/true", wait=False)
    try:
        time.sleep(8)  # several scheduling rounds (MBD_SLEEP_TIME = 2)
        assert cluster.jobs(job_id) == {job_id: "PEND"}, cluster.exit_info(job_id)
    finally:
        cluster.command("bkill", job_id, check=False)
