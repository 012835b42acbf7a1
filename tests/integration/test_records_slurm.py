"""Job records on real Slurm clusters: what MJF promised a job against what it used.

A job keeps two CPUs busy for a known CPU time and touches a known amount of memory
(``record_job.py``); its record must hold what MJF told it (Requested) and, within a
stated tolerance, what it did (Delivered). Slurm removes the job's cgroups before the
Epilog runs (seen on 22.05 and 24.11, with and without RunInJob), so the figures come
from our TaskEpilog, which reads the job cgroup's counters as the job's user; the
Epilog, as root, writes the record. Tolerances, and why:

* CPU time: the job cgroup's cpuacct.usage counts every process of the job - the
  batch script's shell and python's start-up too - so it is at least the job's own
  rusage and at most 1.5 s more;
* peak memory: memory.max_usage_in_bytes of the job's cgroup, page cache included: at
  least the 200 MiB touched, at most 150 MiB more;
* wall time: from jobstart_secs (whole seconds) to the end the Epilog knows (24.11's
  SLURM_JOB_END_TIME, else its own clock): at least the script's own wall time less
  1 s, at most 5 s more.
"""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.integration.site import SITE_CONFIG, admin_mjf
from tests.integration.slurm_cluster import assert_no_job_directories_left, mjf_cluster

pytestmark = pytest.mark.integration

MIB = 2**20
RECORD_JOB = Path(__file__).with_name("record_job.py")


@pytest.fixture(scope="module", params=[("22.05", False), ("24.11", False), ("24.11", True)],
                ids=lambda param: f"slurm-{param[0]}{'-runinjob' if param[1] else ''}")
def cluster(request):
    version, run_in_job = request.param
    # RunInJob's Epilog recorded: slurmstepd's race may start it with the job user's ids.
    with mjf_cluster(cgroups=True, version=version, run_in_job=run_in_job,
                     records=True, record_hooks=run_in_job) as slurm:
        slurm.records = slurm.job_root / "records"
        SITE_CONFIG.write_text(slurm.good_config + f"[records]\ndir = {slurm.records}\n"
                               "format = sss, apel\nsite = MJF-CI\n")
        shutil.copy(RECORD_JOB, slurm.job_root / "record_job.py")
        (slurm.job_root / "record_job.py").chmod(0o644)
        yield slurm


def run_record_job(cluster, name: str, cpu_per_child: float, mib: int) -> tuple[str, dict]:
    out = cluster.job_root / "out" / f"{name}.json"
    argv = ["sbatch", "--parsable", "-J", name, "-o", f"{cluster.job_root}/out/{name}.log",
            "-c", "2", "--mem=600M", "--time=5", "--wrap",
            f"/usr/bin/python3 {cluster.job_root}/record_job.py {out} {cpu_per_child} {mib}"]
    result = cluster.as_user("mjfuser1", argv, check=False)
    assert result.returncode == 0, result.stderr + cluster.log("slurmd")
    job_id = result.stdout.strip().split(";")[0]
    cluster.wait_until_no_jobs(timeout=120)
    assert out.exists(), (cluster.job_root / "out" / f"{name}.log").read_text() \
        + cluster.log("slurmd")
    return job_id, json.loads(out.read_text())


def records_of(cluster, job_id: str) -> list[Path]:
    return sorted(path for path in cluster.records.glob(f"*/*-{job_id}.json"))


def record_of(cluster, job_id: str) -> Path:
    """The job's one record. Where slurmstepd started the Epilog with all the job user's
    ids (its race on a loaded machine, which the recorded hooks show), that Epilog cannot
    write root's record and leaves the job's directory: what ends such a job then - `mjf
    sync`, as the site's timer runs it - writes the record its Epilog would have."""
    found = records_of(cluster, job_id)
    if not found and cluster.record_hooks and ("epilog", job_id, True) in \
            cluster.hooks_started_switched():
        synced = cluster.mjf("sync")
        assert synced.returncode == 0, synced.stdout + synced.stderr
        found = records_of(cluster, job_id)
    assert len(found) == 1, (found, cluster.hook_record() if cluster.record_hooks else "")
    return found[0]


def test_a_job_record_holds_what_mjf_promised_and_what_the_job_used(cluster):
    job_id, job = run_record_job(cluster, "burner", 3, 200)
    path = record_of(cluster, job_id)
    record = json.loads(path.read_text())
    assert path.stat().st_uid == 0 and path.stat().st_mode & 0o777 == 0o644
    features = job["features"]
    requested = record["requested"]
    assert requested["allocated_cpu"] == int(features["allocated_cpu"]) == 2
    assert requested["max_rss_bytes"] == int(features["max_rss_bytes"]) == 600 * MIB
    assert requested["wall_limit_secs"] == int(features["wall_limit_secs"]) == 300
    assert requested["cpu_limit_secs"] == int(features["cpu_limit_secs"])
    assert requested["start_time"] == int(features["jobstart_secs"])
    assert record["job_id"] == job_id and record["user"] == "mjfuser1"
    assert record["backend"] == "slurm" and record["queue"] == "debug"

    delivered = record["delivered"]
    cpu = delivered["cpu_secs"]
    assert job["cpu_secs"] >= 6
    assert job["cpu_secs"] <= cpu["value"] <= job["cpu_secs"] + 1.5, (cpu, job["cpu_secs"])
    assert "TaskEpilog" in cpu["source"]
    peak = delivered["peak_memory_bytes"]["value"]
    assert 200 * MIB <= peak <= 350 * MIB, peak
    wall = delivered["wall_secs"]["value"]
    own_wall = job["end"] - job["start"]
    assert own_wall - 1 <= wall <= own_wall + 5, (wall, own_wall)
    rate = delivered["consumption_rate"]["value"]
    assert rate == pytest.approx(cpu["value"] / (wall * 2))

    stem = str(path)[:-len(".json")]
    sss = ET.parse(stem + ".xml").getroot()
    assert sss.tag == "Job" and sss.findtext("JobId") == job_id
    assert sss.find("Requested/Processors").text == "2"
    assert sss.find("Requested/Memory").text == str(600 * 1024)
    assert sss.find("Delivered/Processors").get("consumptionRate")
    assert sss.find("Delivered/Memory").get("metric") == "max"
    apel = Path(stem + ".apel").read_text().splitlines()
    assert apel[0] == "APEL-individual-job-message: v0.3" and apel[-1] == "%%"
    fields = dict(line.split(": ", 1) for line in apel[1:-1])
    assert fields["Site"] == "MJF-CI" and fields["LocalJobId"] == job_id
    assert fields["CpuDuration"] == str(round(cpu["value"]))
    assert fields["MemoryReal"] == str(round(peak / 1024))
    assert fields["Processors"] == "2" and fields["ServiceLevelType"] == "hepspec"
    assert fields["ServiceLevel"] == "10"  # hs06_per_cpu = 10 in the site config

    listed = admin_mjf(cluster.env, "records", "--json")
    assert listed.returncode == 0, listed.stderr
    [shown] = [entry for entry in json.loads(listed.stdout) if entry["job_id"] == job_id]
    assert shown["figures"]["over"] == []
    assert_no_job_directories_left(cluster)


def test_an_unwritable_records_dir_loses_no_job_and_drains_no_node(cluster):
    blocked = cluster.job_root / "blocked"
    blocked.write_text("a file where the records directory should be\n")
    SITE_CONFIG.write_text(cluster.good_config + f"[records]\ndir = {blocked}\n")
    try:
        job_id, job = run_record_job(cluster, "blocked", 0.2, 10)
    finally:
        SITE_CONFIG.write_text(cluster.good_config + f"[records]\ndir = {cluster.records}\n"
                               "format = sss, apel\nsite = MJF-CI\n")
    assert job["features"]["allocated_cpu"] == "2"
    assert "drain" not in cluster.node_state()
    assert_no_job_directories_left(cluster)
    assert not records_of(cluster, job_id)
