"""The Slurm hooks on Slurm 24.11 with ``CgroupPlugin=cgroup/v2``, on a real cgroup v2
kernel (the VM of :mod:`tests.integration.cgroup2_vm`), asserted from inside the jobs.

One boot runs both variants of :mod:`tests.integration.guest.slurm`:

- ``contain``: the hooks as a site installs them (``Prolog`` and ``Epilog`` =
  mjf-slurm, ``TaskProlog`` = mjf-slurm-taskprolog, ``PrologFlags=Alloc,Contain``),
  ConstrainCores, ConstrainRAMSpace and ConstrainSwapSpace; a batch job of an
  unprivileged user (``-c 2 --mem=300M -t 10``) that runs the readers, a job step
  (``srun``) and two array elements;
- ``runinjob``: ``PrologFlags=RunInJob``, the Prolog and Epilog from a ``prolog.d/*``
  glob beside a site's own (which records their environment and cgroup: fixtures).

Each variant runs twice, in two boots (the module's parameter):

- ``ignoresystemd``: no systemd in the VM (run.sh is its first process), cgroup.conf has
  ``IgnoreSystemd=yes``, and slurmd makes its ``<node>_slurmstepd.scope`` itself where
  systemd would (docs/slurm.md says why);
- ``systemd``: systemd is the VM's first process, slurmd a service of it as Debian's
  slurmd.service starts it (``Delegate=yes``), and cgroup.conf leaves systemd alone:
  slurmd asks systemd over D-Bus for the steps' scope (Slurm 24.11 names it
  ``<node>_slurmstepd.scope`` too), as at most sites.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.integration.cgroup2_vm import require_vm, run_guest
from tests.integration.job_side import (
    CGROUP_V2_LIMITS,
    READERS_JDL,
    dump_script,
    enforced_v2_limit,
    readers_snippet,
)
from tests.integration.site import USERS, ensure_user
from tests.integration.slurm_cluster import SlurmCluster, slurm24_root

pytestmark = pytest.mark.integration

MIB = 2**20
NODE = "vm2"  # the VM's host name (cgroup2_vm)
BASE_DIR = "/run/mjf"
SITE_CONFIG = (f"[mjf]\nbase_dir = {BASE_DIR}\nbatch_systems = slurm\n"
               "[machinefeatures]\nhs06_per_cpu = 10\ngrace_secs = 600\n")
# Inside the job, after what it sees: with `readers` in its arguments, what the readers
# make of its directory.
READERS = 'out["environ"] = dict(os.environ)\n' + readers_snippet("/usr/bin/mjf") + r'''
suffix = os.environ.get("SLURM_ARRAY_TASK_ID") or os.environ.get("SLURM_PROCID", "0")
'''
DUMP = dump_script(("SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_STEP_ID"),
                   'sys.argv[1] + "." + suffix', argv=None, extra=CGROUP_V2_LIMITS + READERS)
# A site's own Prolog and Epilog, before ours in the glob: the hook's environment and
# cgroup, recorded for the fixtures.
RECORDER = ('#!/bin/sh\nenv > @SHARE@/out/$SLURM_SCRIPT_CONTEXT-$SLURM_JOB_ID.env\n'
            'cat /proc/self/cgroup > @SHARE@/out/$SLURM_SCRIPT_CONTEXT-$SLURM_JOB_ID.cgroup\n')
DUMPED = "python3 @SHARE@/dump.py"


class VMSlurm(SlurmCluster):
    """The config of a one-node Slurm 24.11 in the VM (the guest starts it): the node is
    the VM, its cgroups v2."""

    def __init__(self, variant: str, systemd: bool) -> None:
        super().__init__(Path("/run/slurm-ci") / variant, Path("/usr/bin"), cgroups=True,
                         run_in_job=variant == "runinjob")
        self.variant = variant
        self.systemd = systemd
        self.version = "24.11"
        self.host = self.node = self.controller = NODE
        self.nodes = (NODE,)

    def _version_lines(self) -> str:
        return "MailProg=/bin/true\n"

    def _node_lines(self) -> str:
        return f"NodeName={NODE} CPUs=2 RealMemory=1500 State=UNKNOWN\n"

    def cgroup_conf(self) -> str:
        return ("CgroupPlugin=cgroup/v2\n" + ("" if self.systemd else "IgnoreSystemd=yes\n") +
                "ConstrainCores=yes\nConstrainRAMSpace=yes\nConstrainSwapSpace=yes\n")

    def _hook_lines(self) -> str:
        if not self.run_in_job:
            return super()._hook_lines()
        return (f"Prolog={self.root}/prolog.d/*\nEpilog={self.root}/epilog.d/*\n"
                f"TaskProlog={self.bindir}/mjf-slurm-taskprolog\n")

    def plan(self, jobs: list[dict]) -> dict:
        files = {str(self.conf): self.slurm_conf(), str(self.root / "cgroup.conf"):
                 self.cgroup_conf()}
        links = {}
        if self.run_in_job:
            for hook in ("prolog", "epilog"):
                files[f"{self.root}/{hook}.d/00-site-record"] = RECORDER
                links[f"{self.root}/{hook}.d/50-mjf"] = f"{self.bindir}/mjf-slurm"
        return {"name": self.variant, "root": str(self.root), "files": files, "links": links,
                "jobs": jobs}


def job(name: str, args: list[str], script: str, outputs: tuple[str, ...] = ("0",)) -> dict:
    return {"name": name, "args": args, "script": script,
            "outputs": [f"{name}.{suffix}" for suffix in outputs]}


VARIANTS = {
    "contain": [
        job("batch", ["-c", "2", "--mem=300M", "-t", "10"], f"{DUMPED} batch readers; sleep 2"),
        job("step", ["-c", "2", "--mem=300M", "-t", "5"], f"srun -n 1 -c 1 {DUMPED} step"),
        job("array", ["--array=1-2", "-c", "1", "--mem=100M", "-t", "3"], f"{DUMPED} array",
            outputs=("1", "2")),
    ],
    "runinjob": [job("runinjob", ["-c", "2", "--mem=300M", "-t", "10"], f"{DUMPED} runinjob")],
}


SCOPE = f"{NODE}_slurmstepd.scope"  # Slurm 24.11's name, whether systemd makes it or not


@pytest.fixture(scope="module", params=("ignoresystemd", "systemd"))
def guest(request):
    require_vm()
    for user in USERS:
        ensure_user(user)
    root = slurm24_root()
    systemd = request.param == "systemd"
    plan = {"site_config": SITE_CONFIG, "base_dir": BASE_DIR, "systemd": systemd,
            "variants": [VMSlurm(name, systemd).plan(jobs) for name, jobs in VARIANTS.items()]}
    run = run_guest(root.root, "slurm", plan, {"dump.py": DUMP, "two.jdl": READERS_JDL},
                    timeout=420, systemd=systemd)
    run.systemd = systemd
    yield run
    run.vm.remove()


def seen(guest, variant: str, name: str) -> tuple[dict, str]:
    """What job ``name`` (``name.suffix``) of ``variant`` saw, and its job id."""
    results = guest.check(variant)["variants"][variant]
    view = json.loads((guest.vm.share / "out" / f"{name}.json").read_text())
    return view, results["jobs"][name.split(".")[0]]


def test_a_batch_jobs_values_come_from_its_v2_cgroup(guest):
    view, job_id = seen(guest, "contain", "batch.0")
    features = dict(view["JOBFEATURES"])
    assert int(features.pop("jobstart_secs")) > 0 and int(features.pop("scratch_limit_bytes"))
    assert features == {"job_id": job_id, "allocated_cpu": "2", "wall_limit_secs": "600",
                        "cpu_limit_secs": "1200", "max_rss_bytes": str(300 * MIB),
                        "max_swap_bytes": "0", "hs06_job": "20", "grace_secs_job": "600"}
    # What the kernel enforces on the job: the same limits.
    assert enforced_v2_limit(view, "memory.max") == 300 * MIB
    assert enforced_v2_limit(view, "memory.swap.max") == 0
    path = view["cgroup"].strip()
    assert re.fullmatch(rf"0::/system.slice/{re.escape(SCOPE)}/job_{job_id}/step_batch"
                        r"/user/task_0", path), path
    assert view["MACHINEFEATURES"] == {"grace_secs": "600", "hs06": "20", "total_cpu": "2"}


def test_the_readers_accept_the_jobs_directory(guest):
    view, _ = seen(guest, "contain", "batch.0")
    readers = view["readers"]
    assert readers["check"]["rc"] == 0, readers["check"]
    described = json.loads(readers["describe"]["out"])
    assert described["dirac"]["NumberOfProcessors"] == 2, readers["describe"]
    assert readers["match"]["rc"] == 0, readers["match"]
    # glideinWMS's pattern for a number, which every value but the job id must match.
    for name, text in {**view["MACHINEFEATURES"], **view["JOBFEATURES"]}.items():
        assert name == "job_id" or re.fullmatch(r"[0-9]+(\.[0-9]+)?", text), (name, text)


def test_a_job_step_sees_its_jobs_values(guest):
    view, job_id = seen(guest, "contain", "step.0")
    features = view["JOBFEATURES"]
    assert view["env"]["SLURM_STEP_ID"] == "0"
    assert "/step_0/user/task_0" in view["cgroup"]
    assert (features["job_id"], features["allocated_cpu"], features["max_rss_bytes"],
            features["max_swap_bytes"], features["wall_limit_secs"]) == \
        (job_id, "2", str(300 * MIB), "0", "300")


def test_array_elements_each_see_their_own(guest):
    views = [seen(guest, "contain", f"array.{element}")[0] for element in (1, 2)]
    for view in views:
        features = view["JOBFEATURES"]
        assert features["job_id"] == view["env"]["SLURM_JOB_ID"]
        assert (features["allocated_cpu"], features["max_rss_bytes"],
                features["max_swap_bytes"], features["wall_limit_secs"]) == \
            ("1", str(100 * MIB), "0", "180")
        assert enforced_v2_limit(view, "memory.max") == 100 * MIB
    assert views[0]["JOBFEATURES"]["job_id"] != views[1]["JOBFEATURES"]["job_id"]


def test_a_prolog_that_runs_in_the_job(guest):
    view, job_id = seen(guest, "runinjob", "runinjob.0")
    features = view["JOBFEATURES"]
    assert (features["job_id"], features["allocated_cpu"], features["max_rss_bytes"],
            features["max_swap_bytes"]) == (job_id, "2", str(300 * MIB), "0")
    prolog = (guest.vm.share / "out" / f"prolog_slurmd-{job_id}.cgroup").read_text()
    assert f"/job_{job_id}/step_extern" in prolog, prolog


@pytest.mark.parametrize("variant", VARIANTS)
def test_nothing_is_left_behind(guest, variant):
    results = guest.check(variant)["variants"][variant]
    assert results["left"] == [] and results["cgroups_left"] == [], results


def test_the_steps_scope_is_systemds_where_systemd_runs(guest):
    """With systemd, slurmd (a delegated service) asked it for the steps' scope and got
    it; without, no systemd ran in the VM."""
    results = guest.check("contain")
    if not guest.systemd:
        assert results["init"] == "sh" and "units" not in results["variants"]["contain"]
        return
    assert results["init"] == "systemd"
    units = results["variants"]["contain"]["units"]
    assert units["slurmd.service"]["ActiveState"] == "active", units
    assert units["slurmd.service"]["Delegate"] == "yes", units
    scope = units[SCOPE]
    assert (scope["ActiveState"], scope["Transient"], scope["Delegate"],
            scope["ControlGroup"]) == ("active", "yes", "yes", f"/system.slice/{SCOPE}"), units
