"""Jobs of several nodes on a real Slurm 24.11 cluster of three nodes, asserted from
inside the jobs on every node.

The cluster (:mod:`tests.integration.slurm_multinode`) runs each slurmd in its own
namespaces, the nodes differing in CPUs, memory and hs06_per_cpu, each with its own
mjf.conf, base_dir and records. Jobs of 2 and 3 nodes with uneven tasks run one
``srun`` step or more; each task writes what its node gave it. Every node must show
its own share (``allocated_cpu``, ``max_rss_bytes``, ``hs06_job``) of one ``job_id``,
remove its own directory as the job ends and write a record saying which share it
was; `mjf drain` and `mjf sync` on one node touch that node alone.
"""

from __future__ import annotations

import datetime
import json
import time
from collections import Counter

import pytest

from mjf_hooks.store import Store
from tests.integration.site import assert_no_job_directories_left, seen_in
from tests.integration.slurm_cluster import sbatch
from tests.integration.slurm_multinode import multinode_cluster

pytestmark = pytest.mark.integration

MIB = 2**20


@pytest.fixture(scope="module")
def cluster():
    with multinode_cluster() as slurm:
        yield slurm


def dump_steps(cluster, name: str, *steps: str) -> str:
    """A batch script of ``srun`` steps (their options), each dumping what its tasks see
    as ``<name>-<step>.<task>``."""
    return " && ".join(f"srun {options} /usr/bin/python3 {cluster.job_root}/dump.py "
                       f"{name}-{index}" for index, options in enumerate(steps))


def submit(cluster, name: str, options: list[str], script: str, wait: bool = True) -> str:
    """A batch job of mjfuser1; with ``wait``, until it has left the queue."""
    return sbatch(cluster, "mjfuser1", name, *options, wait=wait, script=script)


def task_views(cluster, name: str, tasks: int) -> list[dict]:
    """What each of a step's ``tasks`` saw (its dump), in task order."""
    return [seen_in(cluster.job_root / "out" / f"{name}.{task}.json") for task in range(tasks)]


def assert_each_node_sees_its_share(cluster, job_id: str, views: list[dict]) -> dict:
    """Every task saw its own node's share of job ``job_id``; returns {node: CPUs}."""
    tasks = Counter(view["env"]["SLURMD_NODENAME"] for view in views)
    for view in views:
        node = view["env"]["SLURMD_NODENAME"]
        spec = cluster.specs[node]
        cpus = tasks[node]  # one CPU per task: the node's share is its tasks
        base = cluster.node_base(node)
        assert view["env"]["JOBFEATURES"] == f"{base}/jobs/{job_id}/jobfeatures"
        assert view["env"]["MACHINEFEATURES"] == f"{base}/machinefeatures"
        assert view["MACHINEFEATURES"] == {
            "grace_secs": "600", "total_cpu": str(spec.cpus),
            "hs06": str(spec.cpus * spec.hs06_per_cpu)}
        job = dict(view["JOBFEATURES"])
        assert int(job.pop("scratch_limit_bytes")) > 0 and int(job.pop("jobstart_secs")) > 0
        assert job == {"job_id": job_id, "allocated_cpu": str(cpus),
                       "max_rss_bytes": str(100 * MIB * cpus), "wall_limit_secs": "300",
                       "cpu_limit_secs": str(300 * cpus),
                       "hs06_job": str(spec.hs06_per_cpu * cpus), "grace_secs_job": "600"}, node
        assert int(view["env"]["SLURM_CPUS_ON_NODE"]) == cpus, node  # Slurm agrees
    return dict(tasks)


def assert_each_node_recorded_its_share(cluster, job_id: str, shares: dict) -> None:
    """Each node of the job wrote one record, of its own share, saying which it is."""
    order = sorted(shares)  # the job's node list: mjfn1, mjfn2, ... in order
    for node, cpus in shares.items():
        records = list((cluster.node_dir(node) / "records").glob(f"*/*-{job_id}.json"))
        assert len(records) == 1, (node, records)
        data = json.loads(records[0].read_text())
        assert (data["node"], data["node_index"], data["node_count"]) == \
            (node, order.index(node) + 1, len(order))
        assert data["requested"]["allocated_cpu"] == cpus
        assert data["requested"]["hs06_job"] == cluster.specs[node].hs06_per_cpu * cpus
        assert data["requested"]["max_rss_bytes"] == 100 * MIB * cpus


def assert_no_directories_left_on_any_node(cluster) -> None:
    for node in cluster.nodes:
        assert_no_job_directories_left(cluster.node_base(node))


def test_the_nodes_differ_and_each_is_a_host_of_its_own(cluster):
    listed = cluster.command(["sinfo", "-h", "-N", "-p", "debug", "-o", "%N %c %m"]).stdout
    assert sorted(listed.split("\n")[:-1]) == [
        f"{node.name} {node.cpus} {node.memory_mib}" for node in cluster.specs.values()]
    config = cluster.command(["scontrol", "show", "config"]).stdout
    assert "extra_constraints" in config  # for jobs that match on node facts (--extra)
    for node in cluster.nodes:
        assert cluster.on_node(node, ["hostname"]).stdout.strip() == node
        address = cluster.on_node(node, ["cat", "/proc/net/fib_trie"]).stdout
        assert cluster.specs[node].address in address and "127.0.0.1" in address
        assert cluster.on_node(node, ["cat", "/etc/mjf/mjf.conf"]).stdout \
            == cluster.node_config(node)


def test_a_job_of_two_nodes_with_uneven_tasks(cluster):
    job_id = submit(cluster, "two", ["-N2", "--ntasks=3", "--mem-per-cpu=100M", "--time=5"],
                    dump_steps(cluster, "two", ""))
    views = task_views(cluster, "two-0", 3)
    shares = assert_each_node_sees_its_share(cluster, job_id, views)
    assert sorted(shares.values()) == [1, 2], shares  # uneven
    assert_no_directories_left_on_any_node(cluster)
    assert_each_node_recorded_its_share(cluster, job_id, shares)


def test_a_job_of_three_nodes_and_two_steps(cluster):
    job_id = submit(cluster, "three", ["-N3", "--ntasks=5", "--mem-per-cpu=100M", "--time=5"],
                    dump_steps(cluster, "three", "", "-N3 -n3"))
    first = task_views(cluster, "three-0", 5)
    shares = assert_each_node_sees_its_share(cluster, job_id, first)
    assert len(shares) == 3 and sum(shares.values()) == 5 and len(set(shares.values())) > 1
    # A later step, of one task a node, sees each node's share of the job, not its own.
    for view in task_views(cluster, "three-1", 3):
        node = view["env"]["SLURMD_NODENAME"]
        assert view["JOBFEATURES"]["allocated_cpu"] == str(shares[node])
        assert view["JOBFEATURES"]["job_id"] == job_id
    assert_no_directories_left_on_any_node(cluster)
    assert_each_node_recorded_its_share(cluster, job_id, shares)


def test_a_node_whose_first_step_is_narrower_than_the_job_still_gets_its_whole_share(cluster):
    # The batch script runs on the first node alone: on the others a step's first task
    # completes the values (the memory request reaches no Prolog), and that step uses
    # fewer of the node's CPUs than the job holds there (one task of one CPU a node).
    job_id = submit(cluster, "narrow", ["-N2", "--ntasks=5", "--mem-per-cpu=100M",
                                        "--time=5"], dump_steps(cluster, "narrow", "-N2 -n2", ""))
    shares = assert_each_node_sees_its_share(cluster, job_id, task_views(cluster, "narrow-1", 5))
    assert max(shares.values()) > 1, shares
    for view in task_views(cluster, "narrow-0", 2):
        cpus = shares[view["env"]["SLURMD_NODENAME"]]
        assert (view["JOBFEATURES"]["allocated_cpu"], view["JOBFEATURES"]["max_rss_bytes"]) \
            == (str(cpus), str(100 * MIB * cpus)), view["env"]["SLURMD_NODENAME"]
    assert_no_directories_left_on_any_node(cluster)
    assert_each_node_recorded_its_share(cluster, job_id, shares)


def wait_for_directories(cluster, job_id: str) -> None:
    deadline = time.monotonic() + 60
    while not all((cluster.node_base(node) / "jobs" / job_id / "jobfeatures").is_dir()
                  for node in cluster.nodes):
        assert time.monotonic() < deadline, f"job {job_id}'s directories did not appear"
        time.sleep(0.2)


def test_drain_and_sync_on_one_node_touch_that_node_alone(cluster):
    running = submit(cluster, "sleeper", ["-N3", "--ntasks=3", "--mem-per-cpu=100M",
                                          "--time=5"], "srun sleep 120", wait=False)
    wait_for_directories(cluster, running)
    first, second, third = cluster.nodes
    # Directories of jobs long gone, on two nodes.
    for node, stale in ((first, "99998"), (second, "99999")):
        Store(str(cluster.node_base(node))).create_job(stale, {"job_id": stale},
                                                       state={"backend": "slurm"})
    try:
        drained = cluster.mjf_on(second, "drain", "--in", "2h")
        assert drained.returncode == 0, drained.stdout + drained.stderr
        synced = cluster.mjf_on(second, "sync")
        assert synced.returncode == 0, synced.stdout + synced.stderr
        assert "removed job 99999: Slurm no longer runs it" in synced.stdout, synced.stdout
        # On the drained node: its machine and its share of the running job know; the
        # running job's directory stays there.
        base = cluster.node_base(second)
        shutdown = (base / "machinefeatures/shutdowntime").read_text()
        assert (base / "jobs" / running / "jobfeatures/shutdowntime_job").read_text() \
            == shutdown
        assert not (base / "jobs/99999").exists()
        # The other nodes' shares of the same job, and their directories, are untouched.
        for node in (first, third):
            other = cluster.node_base(node)
            assert not (other / "machinefeatures/shutdowntime").exists()
            assert not (other / "jobs" / running / "jobfeatures/shutdowntime_job").exists()
        assert (cluster.node_base(first) / "jobs/99998").is_dir()
    finally:
        cluster.mjf_on(second, "drain", "--cancel")
    assert not (cluster.node_base(second) / "machinefeatures/shutdowntime").exists()
    # A maintenance reservation of one node reaches that node's share alone.
    start = datetime.datetime.now().replace(microsecond=0) + datetime.timedelta(hours=1)
    cluster.command(["scontrol", "create", "reservation", "ReservationName=mjfmaint",
                     f"StartTime={start.isoformat()}", "Duration=10", f"Nodes={third}",
                     "Flags=MAINT,IGNORE_JOBS", "Users=root"])
    try:
        for node in cluster.nodes:
            synced = cluster.mjf_on(node, "sync")
            assert synced.returncode == 0, synced.stdout + synced.stderr
        expected = str(int(start.timestamp()))
        for node in cluster.nodes:
            job = cluster.node_base(node) / "jobs" / running / "jobfeatures"
            assert job.is_dir(), node  # still running: never removed
            shutdown = job / "shutdowntime_job"
            assert (shutdown.read_text() if shutdown.exists() else None) == \
                (expected if node == third else None), node
        assert not (cluster.node_base(first) / "jobs/99998").exists()  # its own sync
    finally:
        cluster.command(["scontrol", "delete", "reservation=mjfmaint"], check=False)
    cluster.command(["scancel", running], check=False)
    cluster.wait_until_no_jobs()
    for node in cluster.nodes:
        cluster.mjf_on(node, "sync")  # the reservation's drain withdrawn
    assert_no_directories_left_on_any_node(cluster)


def test_a_restarted_slurmd_rejoins_in_its_own_namespaces(cluster):
    last = cluster.nodes[-1]
    cluster.restart_slurmd(last)
    job_id = submit(cluster, "again", ["-N3", "--ntasks=3", "--mem-per-cpu=100M",
                                       "--time=5"], dump_steps(cluster, "again", ""))
    shares = assert_each_node_sees_its_share(cluster, job_id, task_views(cluster, "again-0", 3))
    assert shares == {node: 1 for node in cluster.nodes}
    assert_no_directories_left_on_any_node(cluster)
