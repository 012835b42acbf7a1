"""The Slurm hooks on real Slurm clusters, asserted from inside the jobs.

Runs as root (CI): a throwaway one-node cluster whose slurm.conf names the
installed hooks (Prolog, Epilog, the sh TaskProlog), jobs submitted by
unprivileged users with sbatch and srun. The whole module runs four times: Slurm
22.05 (the host's) and 24.11 (in a trixie chroot, whose Prolog environment carries
the job's start and end), each without cgroups and with cgroup v1 enforcement,
where max_rss_bytes must equal the limit the kernel enforces on the job. The test
ids name the version.
"""

from __future__ import annotations

import time

import pytest

from tests.integration.job_side import enforced_memory_limit
from tests.integration.site import SITE_CONFIG, job_values
from tests.integration.slurm_cluster import (
    VERSIONS,
    assert_no_job_directories_left,
    mjf_cluster,
    sbatch,
    seen,
)

pytestmark = pytest.mark.integration

MIB = 2**20


@pytest.fixture(scope="module", params=[*((version, cgroups) for version in VERSIONS
                                          for cgroups in ("plain", "cgroup-v1")),
                                        ("24.11", "cgroup-v1-runinjob")],
                ids=lambda param: f"slurm-{param[0]}-{param[1]}")
def cluster(request):
    version, cgroups = request.param
    run_in_job = cgroups.endswith("runinjob")
    # RunInJob: slurmstepd may start a hook with the job user's ids (docs/slurm.md);
    # every Prolog and Epilog run is recorded, for the failure that would show it.
    with mjf_cluster(cgroups=cgroups != "plain", version=version, run_in_job=run_in_job,
                     record_hooks=run_in_job) as slurm:
        yield slurm


def test_sbatch_job_sees_every_value(cluster):
    submitted = time.time()
    job_id = sbatch(cluster, "mjfuser1", "batch", "--time=5", "--mem=200M", "-c", "2")
    view = seen(cluster, "batch")
    job = job_values(view, cluster.mjf_base, job_id, submitted)
    expected = {"job_id": job_id, "allocated_cpu": "2", "wall_limit_secs": "300",
                "cpu_limit_secs": "600", "max_rss_bytes": str(200 * MIB), "hs06_job": "20",
                "grace_secs_job": "600"}
    if cluster.cgroups:
        assert enforced_memory_limit(view) == 200 * MIB
        expected["max_swap_bytes"] = "0"  # ConstrainSwapSpace, AllowedSwapSpace=0
    assert job == expected
    # Values the job's cgroup decides, or a memory request the Prolog is not told (24.11
    # passes none, and it asks no scontrol), are completed by the job's first task, as
    # the job's user; a Prolog that runs in the job (RunInJob) writes them itself: the
    # directory stays root's.
    completed_by_task = not cluster.run_in_job and (cluster.cgroups or cluster.version != "22.05")
    uid = int(cluster.command(["id", "-u", "mjfuser1"]).stdout)
    assert view["owner"] == (uid if completed_by_task else 0)
    assert_no_job_directories_left(cluster)


def test_srun_tasks_see_the_same_values(cluster):
    result = cluster.as_user("mjfuser2", [
        "srun", "-n", "2", "-c", "1", "--mem-per-cpu=100M", "--time=2", "-J", "srun",
        "/usr/bin/python3", f"{cluster.job_root}/dump.py", "srun"], check=False)
    assert result.returncode == 0, result.stderr
    views = [seen(cluster, "srun", task) for task in (0, 1)]
    assert views[0]["JOBFEATURES"] == views[1]["JOBFEATURES"]
    job = views[0]["JOBFEATURES"]
    assert job["allocated_cpu"] == "2" and job["wall_limit_secs"] == "120"
    assert job["max_rss_bytes"] == str(200 * MIB)
    if cluster.cgroups:
        assert enforced_memory_limit(views[0]) == 200 * MIB
    assert_no_job_directories_left(cluster)


def test_job_array_elements_get_their_own_directories(cluster):
    sbatch(cluster, "mjfuser1", "array", "--array=1-2", "--time=3", "--mem=100M")
    views = [seen(cluster, "array", element) for element in (1, 2)]
    for view in views:
        assert view["JOBFEATURES"]["job_id"] == view["env"]["SLURM_JOB_ID"]
        assert view["env"]["JOBFEATURES"].endswith(f"/jobs/{view['env']['SLURM_JOB_ID']}"
                                                   "/jobfeatures")
        assert view["JOBFEATURES"]["wall_limit_secs"] == "180"
    assert views[0]["JOBFEATURES"]["job_id"] != views[1]["JOBFEATURES"]["job_id"]
    cluster.wait_until_no_jobs()
    assert_no_job_directories_left(cluster)


def test_two_concurrent_jobs_each_see_their_own(cluster):
    ids = []
    for user, name in (("mjfuser1", "concurrent-a"), ("mjfuser2", "concurrent-b")):
        script = f"sleep 2; /usr/bin/python3 {cluster.job_root}/dump.py {name}"
        result = cluster.as_user(user, ["sbatch", "--parsable", "-c", "1", "--mem=100M",
                                        "--time=2", "-o", "/dev/null", "--wrap", script])
        ids.append(result.stdout.strip())
    a, b = seen(cluster, "concurrent-a"), seen(cluster, "concurrent-b")
    assert a["JOBFEATURES"]["job_id"] == ids[0] and b["JOBFEATURES"]["job_id"] == ids[1]
    assert a["env"]["JOBFEATURES"] != b["env"]["JOBFEATURES"]
    assert any(view["jobs_seen"] == sorted(ids) for view in (a, b))  # they did overlap
    cluster.wait_until_no_jobs()
    assert_no_job_directories_left(cluster)


def test_a_broken_config_neither_blocks_the_job_nor_drains_the_node(cluster):
    # An earlier test's job ending under the broken config (which names no base_dir)
    # could not remove its directory; this test is about its own job alone.
    cluster.wait_until_no_jobs()
    SITE_CONFIG.write_text("[jobfeatures]\nwall_limit_secs = soon\n")
    try:
        sbatch(cluster, "mjfuser1", "broken", "--time=2", "--mem=100M")
        view = seen(cluster, "broken")
    finally:
        SITE_CONFIG.write_text(cluster.good_config)
    assert view["env"]["JOBFEATURES"] is None  # the job ran, without MJF
    cluster.wait_until_no_jobs()
    state = cluster.node_state()
    assert "drain" not in state and state.startswith("idle"), state
    assert_no_job_directories_left(cluster)


def test_a_maintenance_reservation_reaches_running_jobs_through_sync(cluster):
    import datetime

    from mjf_hooks.store import Store

    result = cluster.as_user("mjfuser1", ["sbatch", "--parsable", "-c", "1", "--mem=100M",
                                          "--time=5", "-o", "/dev/null", "--wrap", "sleep 60"])
    job_id = result.stdout.strip()
    job = cluster.mjf_base / "jobs" / job_id / "jobfeatures"
    deadline = time.time() + 30
    while not job.exists() and time.time() < deadline:
        time.sleep(0.1)
    # The running job's Prolog recorded who runs it; a long-gone one said the same.
    assert (job.parent / "state/backend").read_text() == "slurm"
    Store(str(cluster.mjf_base)).create_job("99999", {"job_id": "99999"},
                                            state={"backend": "slurm"})
    start = datetime.datetime.now().replace(microsecond=0) + datetime.timedelta(hours=1)
    cluster.command(["scontrol", "create", "reservation", "ReservationName=mjfmaint",
                     f"StartTime={start.isoformat()}", "Duration=10", f"Nodes={cluster.node}",
                     "Flags=MAINT,IGNORE_JOBS", "Users=root"])
    try:
        synced = cluster.mjf("sync")
        expected = str(int(start.timestamp()))
        assert f"shutdowntime = {expected} from Slurm maintenance reservation mjfmaint" \
            in synced.stdout, synced.stdout + synced.stderr
        assert (cluster.mjf_base / "machinefeatures/shutdowntime").read_text() == expected
        assert (job / "shutdowntime_job").read_text() == expected
        assert "removed job 99999: Slurm no longer runs it" in synced.stdout
        assert job.exists()  # the running job is not stale
    finally:
        cluster.command(["scontrol", "delete", "reservation=mjfmaint"], check=False)
    synced = cluster.mjf("sync")
    assert "withdrawn" in synced.stdout
    assert not (cluster.mjf_base / "machinefeatures/shutdowntime").exists()
    assert not (job / "shutdowntime_job").exists()
    cluster.command(["scancel", job_id], check=False)
    cluster.wait_until_no_jobs()
    assert_no_job_directories_left(cluster)  # the cancelled job's Epilog removed it


def test_the_prolog_asks_scontrol_only_where_slurm_passes_no_time_limit(cluster):
    # From 23.02 the Prolog's environment has the job's start and end: no scontrol call.
    recorder = cluster.job_root / "scontrol-recorder"
    calls = cluster.job_root / "out" / "scontrol.calls"
    recorder.write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexec /usr/bin/scontrol "$@"\n')
    recorder.chmod(0o755)
    SITE_CONFIG.write_text(cluster.good_config + f"[slurm]\nscontrol = {recorder}\n"
                           if "[slurm]" not in cluster.good_config else
                           cluster.good_config + f"scontrol = {recorder}\n")
    try:
        job_id = sbatch(cluster, "mjfuser1", "timed", "--time=7", "--mem=100M")
        view = seen(cluster, "timed")
    finally:
        SITE_CONFIG.write_text(cluster.good_config)
    prolog_calls = [line for line in (calls.read_text().splitlines() if calls.exists() else [])
                    if line.startswith("show job")]
    if cluster.version == "22.05":
        assert prolog_calls == [f"show job -o {job_id}"]
    else:
        assert prolog_calls == []  # SLURM_JOB_END_TIME - SLURM_JOB_START_TIME, nothing else
    assert view["JOBFEATURES"]["wall_limit_secs"] == "420"
    assert_no_job_directories_left(cluster)
