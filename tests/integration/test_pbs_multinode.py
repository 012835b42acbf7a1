"""Multi-node PBS jobs on a real OpenPBS 23.06 complex of three moms on this host.

Runs as root (CI): the complex of ``pbs_complex`` and two further moms
(``further_moms``), each a node with its own ``resources_available`` and its own MJF
(its /etc/mjf/mjf.conf, hs06 and base_dir, in a mount namespace of its own). A job's
script runs on its first node only: ``pbsdsh`` runs ``node_dump.py`` once per chunk,
each on its node, where it sees that node's MJF.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.integration.job_side import dump_script, install
from tests.integration.pbs_complex import (
    PBS_EXEC,
    MomSpec,
    further_moms,
    mjf,
    mjf_complex,
    pbs_command,
    qsub,
)
from tests.integration.site import SITE_CONFIG, assert_no_job_directories_left, seen_in

pytestmark = pytest.mark.integration

MIB = 2**20
MOMS = (MomSpec("m1", ncpus=4, mem_mib=4096, hs06_per_cpu=15),
        MomSpec("m2", ncpus=3, mem_mib=2048, hs06_per_cpu=20))
# The complex's own mom keeps the site config's hs06_per_cpu and this host's CPUs.
OWN_HS06_PER_CPU = 10
SCATTER = ("-l", "place=scatter", "-l", "walltime=00:10:00")

# Runs on each node of a job (pbsdsh): what that node's MJF says, as
# out/<name>.<node>.json; the node is the mom's PBS_MOM_NODE_NAME in the /etc/pbs.conf
# of its mount namespace, else the host's name. ``node_dump.py NAME [SECONDS]``.
NODE_DUMP = dump_script(("PBS_JOBID", "PBS_TASKNUM"), 'sys.argv[1] + "." + node', extra=r'''
node = os.uname().nodename.split(".")[0]
for line in open("/etc/pbs.conf"):
    key, _, value = line.strip().partition("=")
    if key == "PBS_MOM_NODE_NAME" and value:
        node = value
out["node"] = node
if len(sys.argv) > 2:
    import time
    time.sleep(float(sys.argv[2]))
''')


@pytest.fixture(scope="module")
def complex_():
    with mjf_complex() as started, further_moms(started, MOMS) as moms:
        install(started.job_root, {"node_dump.py": NODE_DUMP})
        started.moms = {mom.name: mom for mom in moms}
        # Each node keeps its own records, as each keeps its own base_dir.
        started.records = {started.node: started.job_root / "records"}
        started.good_config += f"[records]\ndir = {started.records[started.node]}\n"
        SITE_CONFIG.write_text(started.good_config)
        for mom in moms:
            started.records[mom.name] = mom.base.parent / "records"
            (mom.etc / "mjf.conf").write_text(mom.config(
                started.mjf_base, f"[records]\ndir = {started.records[mom.name]}\n"))
        yield started


def node_bases(complex_) -> dict[str, Path]:
    """Each node's base_dir, seen from here."""
    return {complex_.node: complex_.mjf_base,
            **{name: mom.base for name, mom in complex_.moms.items()}}


def hs06_per_cpu(complex_, node: str) -> int:
    return complex_.moms[node].spec.hs06_per_cpu if node in complex_.moms else OWN_HS06_PER_CPU


def chunks(job: dict) -> dict[str, dict[str, int]]:
    """exec_vnode -> {node: {"ncpus": n, "mem": bytes}} (one chunk per node: scatter)."""
    found = {}
    for chunk in job["exec_vnode"].split("+"):
        vnode, *resources = chunk.strip("()").split(":")
        values = dict(resource.split("=") for resource in resources)
        found[vnode] = {"ncpus": int(values["ncpus"]),
                        "mem": int(values["mem"].removesuffix("kb")) * 1024}
    return found


def run_on_every_node(complex_, name: str, select: str, *args: str) -> tuple[str, dict]:
    job_id = qsub(complex_, "mjfuser1", name, "-l", f"select={select}", *SCATTER, command=[
        f"{PBS_EXEC}/bin/pbsdsh", "--", "/usr/bin/python3",
        f"{complex_.job_root}/node_dump.py", name, *args])
    job = complex_.job(job_id)
    assert job["job_state"] == "F" and job.get("Exit_status") == 0, job
    return job_id, job


def assert_every_node_saw_its_share(complex_, name: str, job_id: str, job: dict) -> None:
    shares = chunks(job)
    for node, share in shares.items():
        view = seen_in(complex_.job_root / "out" / f"{name}.{node}.json")
        assert view["node"] == node
        features = view["JOBFEATURES"]
        assert features is not None, (node, view, complex_.moms.get(node) and
                                      complex_.moms[node].log())
        assert (features["job_id"], features["allocated_cpu"], features["max_rss_bytes"],
                features["hs06_job"]) == \
            (job_id, str(share["ncpus"]), str(share["mem"]),
             str(hs06_per_cpu(complex_, node) * share["ncpus"])), (node, job["exec_vnode"])
        machine = view["MACHINEFEATURES"]
        total = complex_.moms[node].spec.ncpus if node in complex_.moms else os.cpu_count()
        assert machine["total_cpu"] == str(total)
        assert machine["hs06"] == str(hs06_per_cpu(complex_, node) * total)


def assert_every_node_recorded_its_share(complex_, job_id: str, job: dict) -> None:
    """One record per node of the job, in that node's records, naming the node, which of
    the job's nodes it is (its place in exec_vnode; its SSS record's TaskGroup) and
    holding its share."""
    shares = chunks(job)
    for index, (node, share) in enumerate(shares.items(), 1):
        deadline = time.monotonic() + 30
        while True:
            found = [(path, json.loads(path.read_text()))
                     for path in complex_.records[node].glob("*/*.json")]
            found = [(path, record) for path, record in found if record["job_id"] == job_id]
            if found or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert len(found) == 1, (node, found)
        path, record = found[0]
        assert (record["node"], record["node_index"], record["node_count"],
                record["requested"]["allocated_cpu"], record["requested"]["max_rss_bytes"],
                record["requested"]["hs06_job"]) == \
            (node, index, len(shares), share["ncpus"], share["mem"],
             hs06_per_cpu(complex_, node) * share["ncpus"]), job["exec_vnode"]
        assert f"<NodeCount>{len(shares)}</NodeCount>" in path.with_suffix(".xml").read_text()
        # A sister mom hands over walltime=00:00:00 (it keeps none): no measurement.
        assert not record["delivered"]["wall_secs"]["source"].endswith("=00:00:00"), record


def assert_no_directory_left_anywhere(complex_) -> None:
    for base in node_bases(complex_).values():
        assert_no_job_directories_left(base)


def test_a_job_of_three_chunks_sees_each_nodes_share_on_each_node(complex_):
    name = "three"
    job_id, job = run_on_every_node(complex_, name,
                                    "2:ncpus=1:mem=100mb+1:ncpus=2:mem=200mb")
    assert len(chunks(job)) == 3, job["exec_vnode"]
    assert_every_node_saw_its_share(complex_, name, job_id, job)
    assert_no_directory_left_anywhere(complex_)
    assert_every_node_recorded_its_share(complex_, job_id, job)


def test_a_job_of_two_chunks_leaves_the_third_node_alone(complex_):
    name = "two"
    job_id, job = run_on_every_node(complex_, name, "1:ncpus=1:mem=64mb+1:ncpus=2:mem=128mb")
    assert len(chunks(job)) == 2, job["exec_vnode"]
    assert_every_node_saw_its_share(complex_, name, job_id, job)
    assert_no_directory_left_anywhere(complex_)


def test_sync_and_drain_on_one_node_touch_only_its_share(complex_):
    """A job running on two nodes; a directory of a job PBS no longer runs on each node.
    `mjf sync` on one node removes its own stale one only, and keeps the running job's;
    a drain of that node reaches that node's share only."""
    first, second = sorted(complex_.moms.values(), key=lambda mom: mom.name)
    select = f"1:host={first.name}:ncpus=1+1:host={complex_.node}:ncpus=1"
    job_id = qsub(complex_, "mjfuser2", "long", "-l", f"select={select}", *SCATTER,
                  wait=False, command=[f"{PBS_EXEC}/bin/pbsdsh", "--", "/bin/sleep", "60"])
    bases = node_bases(complex_)
    running = {node: bases[node] / "jobs" / job_id for node in (first.name, complex_.node)}
    deadline = time.monotonic() + 30
    while not all(path.exists() for path in running.values()):
        assert time.monotonic() < deadline, running
        time.sleep(0.1)
    stale = {}
    for node, base in bases.items():
        stale[node] = base / "jobs" / f"999999.{complex_.node}"
        (stale[node] / "jobfeatures").mkdir(parents=True)
        (stale[node] / "state").mkdir()
        (stale[node] / "state" / "backend").write_text("pbs")
    try:
        synced = first.mjf("sync")
        assert synced.returncode == 0, synced.stderr
        assert f"removed job {stale[first.name].name}: PBS no longer runs it on this node" \
            in synced.stdout, synced.stdout + synced.stderr
        assert not stale[first.name].exists()
        assert stale[complex_.node].exists() and stale[second.name].exists()
        assert all((path / "jobfeatures").is_dir() for path in running.values())
        drained = first.mjf("drain", "--in", "2h")
        assert drained.returncode == 0, drained.stderr
        assert (running[first.name] / "jobfeatures" / "shutdowntime_job").exists()
        assert not (running[complex_.node] / "jobfeatures" / "shutdowntime_job").exists()
        assert not (bases[complex_.node] / "machinefeatures" / "shutdowntime").exists()
        assert first.mjf("drain", "--cancel").returncode == 0
        # Each other node's own sync removes its own.
        assert mjf("sync").returncode == 0
        assert second.mjf("sync").returncode == 0
        assert not stale[complex_.node].exists() and not stale[second.name].exists()
        assert all((path / "jobfeatures").is_dir() for path in running.values())
    finally:
        pbs_command("qdel", "-W", "force", job_id, check=False)
    complex_.wait_finished(job_id)
    assert_no_directory_left_anywhere(complex_)
