"""`mjf publish` and `mjf submit-args` on the real three-node Slurm 24.11 cluster, end to
end: each node publishes its own hs06 into its ``Extra``, and jobs submitted with the
options `mjf submit-args` prints land only on the nodes that meet the requirement, where
`mjf match` inside says yes; a requirement no node meets stays pending and never runs.

The nodes (:mod:`tests.integration.slurm_multinode`) have hs06 20, 45 and 80 (2, 3 and 4
CPUs at 10, 15 and 20 each); the cluster has ``SchedulerParameters=extra_constraints``.
"""

from __future__ import annotations

import json
import re
import shlex
import time

import pytest

from tests.integration.publish_side import assert_matched, install_match_job
from tests.integration.slurm_cluster import in_queue, sbatch
from tests.integration.slurm_multinode import multinode_cluster

pytestmark = pytest.mark.integration

# mjfn1 has 20, mjfn2 45, mjfn3 80: only the last two meet it.
MEETS = "other.GlueHostArchitectureSMPSize >= 1 && other.MJF_MACHINE_HS06 >= 40"
NO_NODE = "other.MJF_MACHINE_HS06 >= 100"


@pytest.fixture(scope="module")
def cluster():
    with multinode_cluster() as slurm:
        yield slurm


def extra(cluster, node: str) -> dict | None:
    """The node's ``Extra`` as slurmctld holds it (None: unset)."""
    record = cluster.command(["scontrol", "show", "node", "-o", node]).stdout
    match = re.search(r" Extra=(\S+)", record)
    return None if match is None or match.group(1) == "(null)" else json.loads(match.group(1))


def hs06(cluster, node: str) -> int:
    spec = cluster.specs[node]
    return spec.cpus * spec.hs06_per_cpu


def test_each_node_publishes_its_own_hs06_once_and_it_outlives_restarts(cluster):
    for node in cluster.nodes:
        first = cluster.mjf_on(node, "publish")
        assert first.returncode == 0, first.stdout + first.stderr
        assert f"Slurm node {node}: hs06 unset -> {hs06(cluster, node)}" in first.stdout
        again = cluster.mjf_on(node, "publish")  # nothing changed: read, no write, silent
        assert (again.returncode, again.stdout, again.stderr) == (0, "", ""), again
    assert {node: extra(cluster, node) for node in cluster.nodes} == {
        node: {"hs06": hs06(cluster, node)} for node in cluster.nodes}
    # Kept by slurmctld across a node's slurmd restart and a reconfigure (in that order:
    # slurmd re-executes itself on a reconfigure, and may miss a SIGTERM meanwhile).
    cluster.restart_slurmd("mjfn2")
    assert extra(cluster, "mjfn2") == {"hs06": 45}
    cluster.command(["scontrol", "reconfigure"])
    deadline = time.monotonic() + 60
    while any(cluster.node_state(node) not in ("idle", "mixed") for node in cluster.nodes):
        assert time.monotonic() < deadline, [cluster.node_state(n) for n in cluster.nodes]
        time.sleep(0.3)
    assert extra(cluster, "mjfn2") == {"hs06": 45}
    again = cluster.mjf_on("mjfn2", "publish")
    assert (again.returncode, again.stdout) == (0, ""), again.stderr


def test_jobs_land_only_on_nodes_that_meet_the_requirement(cluster):
    for node in cluster.nodes:  # whatever the order of the tests
        assert cluster.mjf_on(node, "publish").returncode == 0
    printed = cluster.mjf_on("mjfn1", "submit-args", "--batch", "slurm", MEETS)
    assert printed.returncode == 0, printed.stderr
    words = shlex.split(printed.stdout)
    assert words == ["--nodes=1", "--ntasks=1", "--cpus-per-task=1", "--extra=hs06>=40"]
    script = install_match_job(cluster.job_root, MEETS, mjf="/usr/bin/mjf")
    jobs = {}
    for index in range(6):  # more jobs than the matching nodes have CPUs at once
        name = f"placed-{index}"
        out = cluster.job_root / "out" / f"{name}.json"
        jobs[sbatch(cluster, "mjfuser1", name, *words, wait=False,
                    script=f"/usr/bin/python3 {script} {out}")] = out
    deadline = time.monotonic() + 180
    for job_id in jobs:
        while in_queue(cluster, job_id):
            assert time.monotonic() < deadline, f"job {job_id} still queued"
            time.sleep(0.2)
    landed = set()
    for out in jobs.values():
        assert_matched(out, lambda: cluster.log("slurmctld"))
        landed.add(json.loads(out.read_text())["env"]["SLURMD_NODENAME"])
    assert landed and landed <= {"mjfn2", "mjfn3"}, landed


def test_a_requirement_no_node_meets_stays_pending_and_never_runs(cluster):
    for node in cluster.nodes:
        assert cluster.mjf_on(node, "publish").returncode == 0
    printed = cluster.mjf_on("mjfn1", "submit-args", "--batch", "slurm", NO_NODE)
    assert printed.returncode == 0, printed.stderr
    out = cluster.job_root / "out" / "nowhere.json"
    job_id = sbatch(cluster, "mjfuser1", "nowhere", *shlex.split(printed.stdout),
                    wait=False, script=f"touch {out}")
    try:
        time.sleep(5)  # several scheduling passes (sched_interval=1)
        state = cluster.command(["squeue", "-h", "-j", job_id, "-o", "%T %r"]).stdout.split()
        assert state == ["PENDING", "Constraints"], state
        assert not out.exists()
    finally:
        cluster.command(["scancel", job_id], check=False)
