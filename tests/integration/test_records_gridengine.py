"""Job records on a real Son of Grid Engine 8.1.9 cell.

Runs as root (CI): the cell of ``gridengine_cell`` with ``[records] dir`` set in the site
config. The epilog runs as root (``root@`` in the queue), so it writes the record
directly, from the shepherd's ``usage`` file in the job's spool directory. The job is
``record_job.py``: two children burn a known CPU time while the job holds 200 MiB; it
writes what it saw in $JOBFEATURES and what the kernel accounted to it, and the record
is checked against that.
"""

from __future__ import annotations

import json
import shutil
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.integration.gridengine_cell import (
    assert_no_job_directories_left,
    mjf,
    mjf_cell,
    qsub,
    seen,
)
from tests.integration.site import SITE, SITE_CONFIG, record_files, records_config

pytestmark = pytest.mark.integration

MIB = 2**20
RECORD_JOB = Path(__file__).with_name("record_job.py")
CPU_PER_CHILD, TOUCHED_MIB = 3, 200


@pytest.fixture(scope="module")
def cell():
    with mjf_cell() as started:
        # The job root is root's (0755): the root epilog may write records below it.
        started.records = started.job_root / "records"
        started.good_config += records_config(started.records)
        SITE_CONFIG.write_text(started.good_config)
        shutil.copy(RECORD_JOB, started.job_root / "record_job.py")
        (started.job_root / "record_job.py").chmod(0o644)
        yield started


def submit_record_job(cell, name: str, config: str | None = None) -> str:
    # Written again for each job: the site config is the host's, shared with other
    # batch systems' tests that may have replaced it meanwhile.
    SITE_CONFIG.parent.mkdir(exist_ok=True)
    SITE_CONFIG.write_text(config or cell.good_config)
    return qsub(cell, "mjfuser1", name, "-pe", "mjf_smp", "2",
                "-l", "h_rt=0:10:0,h_rss=1G",
                command=["-b", "y", "/usr/bin/python3", f"{cell.job_root}/record_job.py",
                         f"{cell.job_root}/out/{name}.json", str(CPU_PER_CHILD),
                         str(TOUCHED_MIB)])


def test_a_parallel_job_gets_a_record_of_what_it_used(cell):
    job_id = submit_record_job(cell, "rec")
    job = seen(cell, "rec")
    found = record_files(cell.records)
    assert len(found) == 1, found
    path = found[0]
    record = json.loads(path.read_text())
    print(f"\njob {job_id}'s own: cpu {job['cpu_secs']:.3f} s, wall "
          f"{job['end'] - job['start']:.3f} s, maxrss {job['maxrss_kib']} KiB\n"
          f"record {path.name}: {json.dumps(record, indent=1)}")
    assert path.parent.name == time.strftime("%Y-%m-%d", time.gmtime(job["end"]))
    assert path.name.endswith(f"-{job_id}.json")
    assert record["job_id"] == job_id and record["backend"] == "gridengine"
    assert record["user"] == "mjfuser1"

    # Requested: what the job saw in $JOBFEATURES.
    features = job["features"]
    requested = record["requested"]
    assert requested["allocated_cpu"] == int(features["allocated_cpu"]) == 2
    assert requested["start_time"] == int(features["jobstart_secs"])
    assert requested["wall_limit_secs"] == int(features["wall_limit_secs"]) == 600
    assert requested["max_rss_bytes"] == int(features["max_rss_bytes"]) == 1024 * MIB
    for name in ("cpu_limit_secs", "scratch_limit_bytes", "hs06_job"):
        if name in features:
            assert requested[name] == pytest.approx(float(features[name]))
        else:
            assert name not in requested

    # Delivered: the shepherd's usage file, against the job's own figures.
    delivered = record["delivered"]
    for name in ("end_time", "wall_secs", "cpu_secs", "peak_memory_bytes"):
        assert "/usage: " in delivered[name]["source"], (name, delivered[name])
    cpu = delivered["cpu_secs"]["value"]
    assert cpu >= 2 * CPU_PER_CHILD
    # ru_utime + ru_stime of the job's process tree: the job's own rusage (self and
    # children) plus what the starter took before exec; 10% or 0.5 s.
    assert abs(cpu - job["cpu_secs"]) <= max(0.1 * job["cpu_secs"], 0.5), (cpu, job)
    wall = delivered["wall_secs"]["value"]
    # ru_wallclock is whole seconds, and includes the starter and Python's start.
    assert abs(wall - (job["end"] - job["start"])) <= 2, (wall, job)
    assert delivered["end_time"]["value"] >= job["end"] - 1
    peak = delivered["peak_memory_bytes"]["value"]
    # ru_maxrss: the largest process (the parent holding the 200 MiB), not a sum.
    assert TOUCHED_MIB * MIB <= peak < 400 * MIB, peak
    assert delivered["consumption_rate"]["value"] == pytest.approx(cpu / (wall * 2))

    # The SSS Job Object.
    root = ET.parse(path.with_suffix(".xml")).getroot()
    assert root.tag == "Job"
    assert root.findtext("JobId") == job_id
    assert [child.tag for child in root if child.tag in ("Requested", "Delivered")] == \
        ["Requested", "Delivered"]
    processors = root.find("Delivered/Processors")
    assert processors is not None and processors.text == "2"
    assert float(processors.get("consumptionRate")) == pytest.approx(cpu / (wall * 2),
                                                                       abs=1e-4)
    assert root.findtext("Requested/Processors") == "2"
    assert root.findtext("Delivered/WallDuration") == str(round(wall))

    # The APEL message.
    text = path.with_suffix(".apel").read_text()
    lines = text.splitlines()
    assert lines[0] == "APEL-individual-job-message: v0.3" and lines[-1] == "%%"
    fields = dict(line.split(": ", 1) for line in lines[1:-1])
    assert fields["Site"] == SITE and fields["LocalJobId"] == job_id
    assert fields["WallDuration"] == str(round(wall))
    assert fields["CpuDuration"] == str(round(cpu))
    assert fields["StartTime"] == str(requested["start_time"])
    assert fields["EndTime"] == str(round(delivered["end_time"]["value"]))
    assert fields["MemoryReal"] == str(round(peak / 1024))
    assert fields["Processors"] == "2"

    for file in path.parent.iterdir():
        assert file.stat().st_uid == 0 and file.stat().st_mode & 0o777 == 0o644, file

    listed = mjf(cell, "records", "--json")
    assert listed.returncode == 0, listed.stderr
    shown = json.loads(listed.stdout)
    assert [entry["job_id"] for entry in shown] == [job_id]
    assert shown[0]["delivered"]["cpu_secs"]["value"] == cpu
    assert_no_job_directories_left(cell)


def test_an_unwritable_records_dir_still_runs_the_job_and_removes_its_directory(cell):
    blocked = cell.job_root / "records-file"
    blocked.write_text("a file where the records directory should be\n")
    try:
        submit_record_job(cell, "unrecorded",
                          cell.good_config.replace(str(cell.records), str(blocked)))
        job = seen(cell, "unrecorded")
    finally:
        SITE_CONFIG.write_text(cell.good_config)
    assert job["features"]["allocated_cpu"] == "2"  # ran, with MJF
    assert job["cpu_secs"] >= 2 * CPU_PER_CHILD
    assert_no_job_directories_left(cell)
    assert cell.queue_states() == ""  # no E: the epilog did not fail
    assert blocked.read_text() == "a file where the records directory should be\n"
