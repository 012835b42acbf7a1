"""Our Slurm hooks beside a site's own, on both real Slurm versions.

Most Slurm sites already run a Prolog (node health checks), an Epilog and often a
TaskProlog. Both 22.05 and 24.11 take a glob for ``Prolog=``/``Epilog=``
(``prolog.d/*``: the site's script and a link to ``mjf-slurm``), and one
TaskProlog, whose output lines Slurm reads: the site's prints its own, then execs
ours (``docs/slurm.md``). Both must take effect, and a failing site
script is Slurm's to report, not ours to hide.
"""

from __future__ import annotations

import time

import pytest

from tests.integration.slurm_cluster import (
    VERSIONS,
    assert_no_job_directories_left,
    mjf_cluster,
    sbatch,
    seen,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module", params=VERSIONS, ids=lambda version: f"slurm-{version}")
def cluster(request):
    with mjf_cluster(cgroups=False, version=request.param, site_hooks=True) as slurm:
        yield slurm


def site_log(cluster, hook: str) -> list[str]:
    path = cluster.root / f"site-{hook}.log"
    return path.read_text().split() if path.exists() else []


def test_the_sites_hooks_and_ours_both_take_effect(cluster):
    job_id = sbatch(cluster, "mjfuser1", "beside", "--time=5", "--mem=100M", "-c", "1")
    view = seen(cluster, "beside")
    assert view["env"]["SITE_TASKPROLOG"] == "ran"  # the site's TaskProlog line
    assert view["env"]["JOBFEATURES"] == f"{cluster.mjf_base}/jobs/{job_id}/jobfeatures"
    assert view["JOBFEATURES"]["job_id"] == job_id  # and ours, run by it
    assert view["JOBFEATURES"]["wall_limit_secs"] == "300"
    assert job_id in site_log(cluster, "prolog")
    cluster.wait_until_no_jobs()
    deadline = time.monotonic() + 30
    while job_id not in site_log(cluster, "epilog") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert job_id in site_log(cluster, "epilog")
    assert_no_job_directories_left(cluster)


def test_a_failing_site_prolog_is_not_hidden(cluster):
    (cluster.root / "site-prolog.fail").touch()
    try:
        result = cluster.as_user("mjfuser1", ["sbatch", "--parsable", "--time=2",
                                              "--mem=100M", "-o", "/dev/null", "--wrap",
                                              "true"])
        job_id = result.stdout.strip()
        deadline = time.monotonic() + 60
        while "drain" not in cluster.node_state() and time.monotonic() < deadline:
            time.sleep(0.2)
        # Slurm drains the node for the site's failure, as it would without MJF.
        assert "drain" in cluster.node_state()
        reason = cluster.command(["scontrol", "show", "node", cluster.node]).stdout
        assert "Prolog error" in reason or "prolog" in reason.lower(), reason
    finally:
        (cluster.root / "site-prolog.fail").unlink()
        cluster.command(["scancel", job_id], check=False)
        cluster.wait_until_no_jobs()
        cluster.resume()
    deadline = time.monotonic() + 30
    while cluster.node_state() != "idle" and time.monotonic() < deadline:
        time.sleep(0.2)
    assert cluster.node_state() == "idle"
    # Our Prolog ran beside it or not (the order is Slurm's); the Epilog or `mjf sync`
    # removes what it wrote.
    cluster.mjf("sync")
    assert_no_job_directories_left(cluster)
