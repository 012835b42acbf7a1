"""A job across two hosts of a three-host volclava cluster, asserted from inside it on each.

The cluster (tests/integration/lsf_multihost.py) runs each host's daemons in namespaces
of its own, with its own /etc/mjf (hs06_per_cpu 10, 15, 20), base_dir and /tmp. The
job (``bsub -n 4 -R "span[ptile=2]"``) runs on its first host, where the queue's
pre-exec and job starter set it up, and starts a task on its other host through RES
(``lsrun -m HOST``, volclava having no ``blaunch``): that task passes through the
``LSF_JOB_STARTER`` the job's starter exported, which sets up that host's share. No
post-exec runs there: `mjf sync` on that host removes it once the job has ended.
"""

from __future__ import annotations

import os
import pwd
import time

import pytest

from tests.integration.lsf_cluster import seen
from tests.integration.lsf_multihost import HOSTS, multihost_cluster

pytestmark = pytest.mark.integration

USER = "mjfuser1"
SPECS = {host.name: host for host in HOSTS}
# The job: on each of its hosts (LSB_HOSTS names each once per slot) what dump.py sees -
# here, and through RES on the others; then the first host's share is read once more, to
# be sure a task on another host changed nothing here.
JOB = ("for host in $(printf '%s\\n' $LSB_HOSTS | sort -u); do "
       'if [ "$host" = "$(hostname)" ]; then /usr/bin/python3 {root}/dump.py {name}.$host 0 '
       "readers; else lsrun -m $host /usr/bin/python3 {root}/dump.py {name}.$host 0 readers; "
       "fi; done; /usr/bin/python3 {root}/dump.py {name}.after")


@pytest.fixture(scope="module")
def cluster():
    with multihost_cluster() as started:
        yield started


@pytest.mark.parametrize("queue", ["mjfroot", "mjf"])
def test_a_job_across_two_hosts_reads_each_hosts_own_share_on_each(cluster, queue):
    name = f"span-{queue}"
    job = cluster.bsub(USER, name, "-q", queue, "-n", "4", "-R", "span[ptile=2]", "-W", "10",
                       "-M", "300",
                       command=JOB.format(root=cluster.job_root, name=name))
    assert cluster.jobs(job) == {job: "DONE"}, cluster.exit_info(job)
    first = seen(cluster, f"{name}.after")
    hosts = sorted(set(first["env"]["LSB_HOSTS"].split()))
    assert len(hosts) == 2 and first["env"]["LSB_MCPU_HOSTS"].split()[1::2] == ["2", "2"]
    uid = pwd.getpwnam(USER).pw_uid
    for host in hosts:
        inside = seen(cluster, f"{name}.{host}")
        features = inside["JOBFEATURES"]
        assert features["job_id"] == job and features["allocated_cpu"] == "2", (host, inside)
        assert features["hs06_job"] == str(2 * SPECS[host].hs06_per_cpu), (host, features)
        assert features["wall_limit_secs"] == "600", (host, features)
        assert inside["MACHINEFEATURES"]["hs06"] == str(2 * SPECS[host].hs06_per_cpu)
        # Where its starter could write: base_dir where a root pre-exec made the job's
        # directory (the first host of queue mjfroot), else its user's own, on that host.
        where = (cluster.host_base(host)
                 if host == first_host(first) and queue == "mjfroot" else f"/tmp/mjf-{uid}")
        assert inside["env"]["JOBFEATURES"] == f"{where}/jobs/{job}/jobfeatures"
        assert features["max_rss_bytes"] == str(300 * 2**20), (host, features)
        # The readers accept it; `mjf check` warns of the one value LSF sets no limit of.
        readers = inside["readers"]
        problems = [line for line in readers["check"]["out"].splitlines()
                    if line.startswith(("WARNING", "ERROR"))]
        assert readers["check"]["rc"] == 1 and len(problems) == 1, (host, readers["check"])
        assert "max_swap_bytes is missing" in problems[0], (host, readers["check"])
        assert (readers["describe"]["rc"], readers["match"]["rc"]) == (0, 0), (host, readers)
    assert first["JOBFEATURES"] == seen(cluster, f"{name}.{first_host(first)}")["JOBFEATURES"]
    # The job's first host's share went with its post-exec; the other host's stays until
    # `mjf sync` there sees LSF no longer runs the job on it.
    other = next(host for host in hosts if host != first_host(first))
    left = cluster.host_dir(other) / "tmp" / f"mjf-{uid}" / "jobs" / job
    assert left.is_dir()
    deadline = time.monotonic() + 30  # LSF may say DONE while the post-exec still runs
    while jobs_on(cluster, first_host(first), uid) and time.monotonic() < deadline:
        time.sleep(0.3)
    assert jobs_on(cluster, first_host(first), uid) == []
    synced = cluster.mjf_on(other, "sync")
    assert synced.returncode == 0, synced.stdout + synced.stderr
    assert f"removed job {job}: LSF no longer runs it on this node" in synced.stdout
    assert not left.exists()
    for host in SPECS:
        assert jobs_on(cluster, host, uid) == [], host


def first_host(dump: dict) -> str:
    return dump["env"]["LSB_HOSTS"].split()[0]


def jobs_on(cluster, host: str, uid: int) -> list[str]:
    """The job directories on ``host``: in its base_dir and its user's own."""
    found = []
    for jobs in (cluster.host_base(host) / "jobs",
                 cluster.host_dir(host) / "tmp" / f"mjf-{uid}" / "jobs"):
        if jobs.is_dir():
            found += [f"{jobs}/{entry}" for entry in os.listdir(jobs)
                      if not entry.startswith(".")]
    return found
