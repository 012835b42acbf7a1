"""`mjf run` and the cgroup probe on a real cgroup v2 kernel (the VM of
:mod:`tests.integration.cgroup2_vm`), asserted from inside the jobs.

One boot runs every case of :mod:`tests.integration.guest.standalone`: `mjf run` in a
cgroup set up as systemd sets up a ``systemd-run --scope -p MemoryMax=300M -p
MemorySwapMax=0 -p AllowedCPUs=0`` unit (as root, and as a user), in one whose limits
are all ``max``, in one whose parent is tighter than its own limits; then the probe
reading processes whose cgroups are being removed.
"""

from __future__ import annotations

import json

import pytest

from tests.integration.cgroup2_vm import require_vm, run_guest
from tests.integration.job_side import CGROUP_V2_LIMITS, dump_script, enforced_v2_limit
from tests.integration.site import USERS, ensure_user
from tests.integration.slurm_cluster import slurm24_root

pytestmark = pytest.mark.integration

MIB = 2**20
SITE_CONFIG = "[mjf]\nbase_dir = /run/mjf\n[machinefeatures]\nhs06_per_cpu = 10\n"
SCOPE_LIMITS = {"memory.max": str(300 * MIB), "memory.swap.max": "0", "cpuset.cpus": "0"}
CASES = {
    # systemd-run --scope -p MemoryMax=300M -p MemorySwapMax=0 -p AllowedCPUs=0
    "scope": {"levels": {"system.slice": {}, "system.slice/run-u1.scope": SCOPE_LIMITS}},
    "user-scope": {"levels": {"user.slice/user-1001.slice/run-u2.scope": {
        "memory.max": str(250 * MIB), "cpuset.cpus": "1"}}, "user": USERS[0]},
    "all-max": {"levels": {"system.slice/run-u3.scope": {}}},
    # A slice tighter than the unit it holds: the parent's limits are the job's.
    "nested": {"levels": {
        "system.slice/tight.slice": {"memory.max": str(200 * MIB), "cpuset.cpus": "1"},
        "system.slice/tight.slice/run-u4.scope": {"memory.max": str(300 * MIB),
                                                   "cpuset.cpus": "0-1"}}},
}
RACE_ROUNDS = 200
DUMP = dump_script((), extra=CGROUP_V2_LIMITS)


@pytest.fixture(scope="module")
def guest():
    require_vm()
    for user in USERS:
        ensure_user(user)
    root = slurm24_root()  # the hooks installed as a site installs them, Python 3.13
    run = run_guest(root.root, "standalone", {"site_config": SITE_CONFIG, "cases": CASES,
                                             "race_rounds": RACE_ROUNDS},
                    {"dump.py": DUMP}, timeout=300)
    yield run
    run.vm.remove()


def job(guest, name: str) -> dict:
    """What case ``name``'s payload saw, after `mjf run` exited 0."""
    case = guest.check("standalone")["cases"][name]
    assert case["rc"] == 0, f"{json.dumps(case, indent=1)}\n{guest.log()}"
    view = json.loads((guest.vm.share / "out" / f"{name}.json").read_text())
    assert view["JOBFEATURES"], f"no job features in case {name}: {case}"
    return view


def test_a_scope_with_memory_swap_and_cpus_set(guest):
    view = job(guest, "scope")
    features = view["JOBFEATURES"]
    assert view["cgroup"] == "0::/system.slice/run-u1.scope\n"
    assert features["max_rss_bytes"] == str(300 * MIB) == str(enforced_v2_limit(
        view, "memory.max"))
    assert features["max_swap_bytes"] == "0"
    assert features["allocated_cpu"] == "1"
    assert view["MACHINEFEATURES"]["total_cpu"] == "2"


def test_a_users_scope(guest):
    view = job(guest, "user-scope")
    features = view["JOBFEATURES"]
    assert features["max_rss_bytes"] == str(250 * MIB)
    assert features["allocated_cpu"] == "1"
    assert "max_swap_bytes" not in features  # memory.swap.max is max


def test_limits_that_are_max_are_no_limits(guest):
    view = job(guest, "all-max")
    features = view["JOBFEATURES"]
    assert all(files.get("memory.max") == "max" for _, files in view["cgroup_v2"])
    assert "max_rss_bytes" not in features and "max_swap_bytes" not in features
    assert features["allocated_cpu"] == "2"


def test_a_parent_tighter_than_the_jobs_own_limits_wins(guest):
    view = job(guest, "nested")
    features = view["JOBFEATURES"]
    assert features["max_rss_bytes"] == str(200 * MIB) == str(enforced_v2_limit(
        view, "memory.max"))
    assert features["allocated_cpu"] == "1"  # cpuset.cpus 0-1, effective 1


def test_cgroups_removed_while_the_probe_reads_them(guest):
    race = json.loads(guest.check("race")["race"])
    assert race["errors"] == [] and race["other"] == [], race
    assert race["whole"] > 0 and race["none"] > 0, race  # both sides of the race were seen
    # Gone before its files were read: nothing, not the parents' CPUs as the job's.
    assert race["gone_dir"] == "None", race
    assert race["gone_usage"] == "None", race
