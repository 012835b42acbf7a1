"""contrib/ansible's role, applied by the real ansible-core (Debian trixie's) to a trixie
node (tests/integration/ansible_node.py): the .deb built from the checkout installed,
the site's drop-in written and checked, slurm.conf's hook lines and the sync timer.

A first run changes the node and a second changes nothing (its PLAY RECAP says
changed=0; both recaps are printed). Then Slurm 24.11 starts on that node with the
slurm.conf the role completed, and a job of an unprivileged user reads the values the
role's settings decide. A bad setting fails the play before the drop-in lands: the
node keeps the one it had. Wired for HTCondor, the node gets the package's config
file. The node is a chroot: the role enables the timer without starting it, and asks
neither Slurm nor HTCondor to reconfigure (contrib/ansible/README.md).
"""

from __future__ import annotations

import os
import time

import pytest

from tests.conftest import require
from tests.integration.ansible_node import ROLE_KEYS, ansible_node, cpu_model
from tests.integration.slurm_cluster import (
    assert_no_job_directories_left,
    require_slurm,
    sbatch,
    seen,
)
from tests.integration.trixie_root import CHECKOUT
from tests.packaging.bookworm_root import build_prerequisites

pytestmark = pytest.mark.integration

DROP_IN = "etc/mjf/mjf.conf.d/50-site.conf"
TIMER_LINK = "etc/systemd/system/timers.target.wants/mjf-sync.timer"
# The per-CPU HS06 of this machine's CPU model (a `cpu=` section): not the plain one.
MODEL_HS06_PER_CPU = 15


def settings(node, **overrides) -> dict:
    """The role's variables for this node: the .deb, the cluster's slurm.conf, and
    settings whose values a job reads."""
    variables = {
        "mjf_package_file": str(node.deb),
        "mjf_slurm_conf": str(node.cluster.conf),
        "mjf_config": {
            "mjf": {"base_dir": str(node.site.base), "batch_systems": ["slurm"]},
            "slurm": {"nodename": node.cluster.node},
            "machinefeatures": {"hs06_per_cpu": 10, "grace_secs": 600},
        },
        "mjf_node_sections": [{"section": "machinefeatures", "cpu": node.model,
                               "options": {"hs06_per_cpu": MODEL_HS06_PER_CPU}}],
    }
    return {**variables, **overrides}


@pytest.fixture(scope="module")
def node():
    require_slurm("24.11")
    missing = build_prerequisites()
    require(not missing, f"needs {', '.join(missing)} to build the .deb (tests/setup-system)")
    model = cpu_model()
    require(model is not None, "needs a CPU model name in /proc/cpuinfo (a cpu= section)")
    with ansible_node() as node:
        node.model = model
        node.first = node.play(settings(node))
        node.second = node.play(settings(node))
        yield node


def test_a_first_run_changes_the_node_and_a_second_nothing(node, capsys):
    with capsys.disabled():
        print(f"\nfirst run:  {node.first.recap}\nsecond run: {node.second.recap}")
    assert node.first.returncode == 0, node.first.output
    assert node.first.counts["failed"] == 0 and node.first.counts["changed"] >= 4, \
        node.first.output
    assert node.second.returncode == 0, node.second.output
    assert node.second.counts["changed"] == 0, node.second.output
    root = node.merged
    status = node.root.chroot(["dpkg-query", "-W", "-f", "${db:Status-Status} ${Version}",
                               "mjf-hooks"]).stdout
    assert status.startswith("installed "), status
    assert not (root / "usr/bin/mjf-slurm").is_symlink()  # the package's, not the wheels'
    drop_in = (root / DROP_IN).read_text()
    assert f'[machinefeatures cpu="{node.model}"]\nhs06_per_cpu = {MODEL_HS06_PER_CPU}\n' \
        in drop_in
    assert "batch_systems = slurm\n" in drop_in  # a list, comma-separated
    lines = [line for line in node.cluster.conf.read_text().splitlines()
             if line.split("=")[0] in ROLE_KEYS]
    assert lines == ["Prolog=/usr/bin/mjf-slurm", "Epilog=/usr/bin/mjf-slurm",
                     "TaskProlog=/usr/bin/mjf-slurm-taskprolog", "PrologFlags=Alloc",
                     "PrologEpilogTimeout=60"]
    # Enabled (a link), not started: systemd does not run this node.
    assert os.readlink(root / TIMER_LINK).endswith("/systemd/system/mjf-sync.timer")
    assert "RUNNING HANDLER [mjf_hooks : Reconfigure Slurm]" in node.first.output


def test_a_job_reads_the_values_the_role_set(node, capsys):
    cluster = node.cluster
    try:
        cluster.start()
        submitted = time.time()
        job_id = sbatch(cluster, "mjfuser1", "ansible", "--time=5", "--mem=200M", "-c", "2")
        view = seen(cluster, "ansible")
        with capsys.disabled():
            print(f"\njob {job_id} read: MACHINEFEATURES {view['MACHINEFEATURES']}, "
                  f"JOBFEATURES {view['JOBFEATURES']}")
        assert view["env"]["MACHINEFEATURES"] == f"{node.site.base}/machinefeatures"
        assert view["env"]["JOBFEATURES"] == f"{node.site.base}/jobs/{job_id}/jobfeatures"
        cpus = os.cpu_count()
        assert view["MACHINEFEATURES"] == {"grace_secs": "600", "total_cpu": str(cpus),
                                           "hs06": str(MODEL_HS06_PER_CPU * cpus)}
        job = view["JOBFEATURES"]
        assert {key: job[key] for key in ("job_id", "allocated_cpu", "wall_limit_secs",
                                          "hs06_job")} == \
            {"job_id": job_id, "allocated_cpu": "2", "wall_limit_secs": "300",
             "hs06_job": str(2 * MODEL_HS06_PER_CPU)}
        assert abs(int(job["jobstart_secs"]) - submitted) < 30
        assert_no_job_directories_left(cluster)
    finally:
        cluster.stop()


def test_htcondor_gets_the_packages_config_file(node):
    (node.merged / "etc/condor/config.d").mkdir(parents=True)
    conf_before = node.cluster.conf.read_text()
    result = node.play(settings(node, mjf_batch_system="htcondor"))
    assert result.returncode == 0, result.output
    assert result.counts["changed"] == 1, result.output  # the file; condor_reconfig skipped
    assert (node.merged / "etc/condor/config.d/50-mjf.config").read_text() == \
        (CHECKOUT / "contrib/htcondor/mjf.config").read_text()
    assert node.cluster.conf.read_text() == conf_before


def test_a_bad_setting_fails_before_the_drop_in_lands(node, capsys):
    kept = (node.merged / DROP_IN).read_bytes()
    bad = settings(node)
    bad["mjf_config"]["machinefeatures"]["hs06_per_cpu"] = "lots"
    result = node.play(bad)
    with capsys.disabled():
        print(f"\na bad hs06_per_cpu: {result.recap}")
    assert result.returncode != 0 and result.counts.get("failed") == 1, result.output
    assert "failed to validate" in result.output and "must be a plain number" in result.output, \
        result.output
    assert (node.merged / DROP_IN).read_bytes() == kept
