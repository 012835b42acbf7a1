"""HTCondor 23.9 on a real cgroup v2 kernel (the VM of :mod:`tests.integration.cgroup2_vm`),
asserted from inside a job.

One boot runs :mod:`tests.integration.guest.htcondor`: the trixie condor chroot (the
hooks installed as a site installs them, contrib/htcondor/mjf.config in its config.d)
as the VM's root, a one-machine pool with ``CGROUP_MEMORY_LIMIT_POLICY = hard``, its
cgroups laid out as systemd lays out ``condor.service`` (``Delegate=true``,
``DelegateSubgroup=leaf``), and one job of an unprivileged user asking for 2 CPUs and
300 MB for 600 s. The job records what the wrapper wrote, its cgroup and the v2 limit
files up its chain, its environment, and what `mjf check` and `mjf describe` said.

``MJF_RECORD_HTCONDOR_V2_FIXTURES=1`` also writes what the job saw to
tests/fixtures/htcondor-23.9/ (``cgroup-v2-*``), the unit tests' recorded v2 tree.
"""

from __future__ import annotations

import json
import os

import pytest

from tests.integration.cgroup2_vm import CHECKOUT, require_vm, run_guest
from tests.integration.htcondor_pool import (
    GOOD_CONFIG,
    POOL_CONFIG,
    ROOT,
    USER,
    CondorPool,
    condor_arguments,
)
from tests.integration.job_side import CGROUP_V2_LIMITS, dump_script, enforced_v2_limit
from tests.integration.site import ensure_user

pytestmark = pytest.mark.integration

MIB = 2**20
CPUS = 2
MEMORY_MB = 300
WALL_SECS = 600
JOB = "v2job"
WORK = "/tmp/mjf-condor-job"  # the submitter's directory, in the VM's /tmp
FIXTURES = CHECKOUT / "tests/fixtures/htcondor-23.9"
# Added to the CI pool's settings in the VM: the memory limit enforced by the kernel
# (HTCondor's default on v2, written out); no swap for jobs, so that the job's swap
# limit is known (HTCondor's default leaves memory.swap.max at max: no max_swap_bytes,
# which `mjf check` warns of); the starter's family handling logged.
CGROUP_CONFIG = ("CGROUP_MEMORY_LIMIT_POLICY = hard\nDISABLE_SWAP_FOR_JOB = true\n"
                 "STARTER_DEBUG = D_FULLDEBUG D_PROCFAMILY\n")
# The starter job hook the last job runs with: the records' job-exit hook, as sites add it.
HOOK_CONFIG = (CHECKOUT / "contrib/htcondor/mjf-records.config").read_text()
# The environment the fixtures keep: what MJF and its readers use, and HTCondor's own.
ENVIRONMENT_KEPT = ("MACHINEFEATURES", "JOBFEATURES", "JOBSTATUS", "TMPDIR", "HOME", "PATH",
                    "OMP_NUM_THREADS", "BATCH_SYSTEM")

# Runs as the job (python3 dump.py NAME): besides dump_script's view, the job's ads,
# its cgroup, mount of the v2 hierarchy and limit files up its chain (CGROUP_V2_LIMITS),
# its environment, `mjf check` and `mjf describe`; then waits (up to a minute) for the
# driver to record the cgroup tree around it (out/NAME.seen).
DUMP = dump_script(("_CONDOR_SCRATCH_DIR",), extra=r'''
import subprocess, time
ads = {}
for var in ("_CONDOR_MACHINE_AD", "_CONDOR_JOB_AD"):
    for line in open(os.environ[var]):
        key, _, value = line.partition(" = ")
        ads[var + ":" + key] = value.strip()
out["ads"] = ads
out["mountinfo_cgroup"] = "".join(line for line in open("/proc/self/mountinfo")
                                  if " - cgroup" in line)
''' + CGROUP_V2_LIMITS + r'''
out["environ"] = {k: v for k, v in os.environ.items()
                  if k.startswith("_CONDOR_") or k in KEPT}
mjf = "/usr/bin/mjf"
for key, args in (("check", ["check"]), ("describe", ["describe", "--format", "json"])):
    result = subprocess.run([mjf, *args], capture_output=True, text=True, timeout=60)
    out[key] = {"rc": result.returncode, "out": result.stdout, "err": result.stderr}
probe = subprocess.run(["/opt/mjf/venv/bin/python", "-c",
                        "from mjf_hooks.probe import cgroup; print(repr(cgroup.limits()))"],
                       capture_output=True, text=True, timeout=60)
out["probe"] = probe.stdout.strip() or probe.stderr
'''.replace("KEPT", repr(ENVIRONMENT_KEPT)), after=r'''
deadline = time.time() + 60
while not os.path.exists(path[:-len(".json")] + ".seen") and time.time() < deadline:
    time.sleep(0.2)
''')



def submit_file(name: str, arguments: list[str], cpus: int, memory_mb: int) -> str:
    """A vanilla job of python3 with ``arguments`` (``@SHARE@``: the VM's share)."""
    return "\n".join([
        "universe = vanilla", "executable = /usr/bin/python3", "transfer_executable = false",
        "should_transfer_files = YES", f"log = {WORK}/{name}.log",
        f"output = {WORK}/{name}.out", f"error = {WORK}/{name}.err",
        f"request_cpus = {cpus}", f"request_memory = {memory_mb}", "request_disk = 102400",
        f"allowed_job_duration = {WALL_SECS}",
        f"arguments = {condor_arguments(arguments)}", "queue", ""])


@pytest.fixture(scope="module")
def guest():
    require_vm()
    ensure_user(USER)
    CondorPool(ROOT).prepare()  # the hooks from this checkout, mjf.config, the CI config
    plan = {
        "condor_config": POOL_CONFIG + CGROUP_CONFIG, "site_config": GOOD_CONFIG,
        "hook_config": HOOK_CONFIG, "user": USER, "work": WORK, "job_name": JOB,
        "submits": {JOB: submit_file(JOB, ["@SHARE@/dump.py", JOB], CPUS, MEMORY_MB),
                    "hook": submit_file("hook", ["-c", "pass"], 1, 100)},
        "job_start_secs": 90, "job_end_secs": 60,
        "execute": "/var/lib/condor/execute", "base_dir": "/run/mjf",
    }
    run = run_guest(ROOT, "htcondor", plan, {"dump.py": DUMP}, timeout=240)
    if os.environ.get("MJF_RECORD_HTCONDOR_V2_FIXTURES"):
        record_fixtures(run)
    yield run
    run.vm.remove()


def condor_log(guest, name: str) -> str:
    path = guest.vm.share / "condor-log" / name
    return path.read_text(errors="replace") if path.exists() else f"(no {name})"


def job_view(guest) -> dict:
    """What the job saw, once the pool ran it."""
    try:
        guest.check("job")
    except AssertionError as failed:
        raise AssertionError(f"{failed}\n== StarterLog.slot1_1\n"
                             f"{condor_log(guest, 'StarterLog.slot1_1')[-6000:]}") from None
    path = guest.vm.share / "out" / f"{JOB}.json"
    assert path.exists(), f"the job wrote nothing\n{guest.log()}"
    return json.loads(path.read_text())


def record_fixtures(run) -> None:
    view = json.loads((run.vm.share / "out" / f"{JOB}.json").read_text())
    (FIXTURES / "cgroup-v2-job.cgroup").write_text(view["cgroup"])
    (FIXTURES / "cgroup-v2-job.mountinfo").write_text(view["mountinfo_cgroup"])
    (FIXTURES / "cgroup-v2-job.env").write_text(
        "".join(f"{key}={value}\n" for key, value in sorted(view["environ"].items())))
    (FIXTURES / "cgroup-v2-tree.json").write_text(
        json.dumps(run.results["tree"], indent=1, sort_keys=True) + "\n")
    (FIXTURES / "cgroup-v2-jobfeatures.json").write_text(
        json.dumps(view["JOBFEATURES"], indent=1, sort_keys=True) + "\n")


def test_the_pool_comes_up_with_cgroups_as_systemd_lays_them_out(guest):
    results = guest.check("pool")
    assert "cpuset" in results["controllers"] and "memory" in results["controllers"]
    assert results["driver_cgroup"] == "0::/mjf-driver\n"
    assert results["slots"].split()[0].endswith("@vm2"), results["slots"]


def test_the_job_runs_in_the_cgroup_htcondor_made_beside_its_daemons(guest):
    view = job_view(guest)
    # The starter puts the job in a sibling of its own cgroup (its parent's child
    # htcondor/, BASE_CGROUP): the service's cgroup, not the leaf the daemons are in.
    assert view["cgroup"] == (
        "0::/system.slice/condor.service/htcondor/"
        "condor_var_lib_condor_execute_slot1_1@vm2\n"), view["cgroup"]


def test_the_wrapper_gives_the_slots_cpus(guest):
    assert job_view(guest)["JOBFEATURES"]["allocated_cpu"] == str(CPUS)


def test_max_rss_bytes_is_the_limit_the_kernel_enforces(guest):
    view = job_view(guest)
    enforced = enforced_v2_limit(view, "memory.max")
    slot_memory = int(view["ads"]["_CONDOR_MACHINE_AD:Memory"]) * MIB
    assert enforced == slot_memory, view["cgroup_v2"]
    assert view["JOBFEATURES"]["max_rss_bytes"] == str(enforced)


def test_wall_limit_and_job_id(guest):
    view = job_view(guest)
    features = view["JOBFEATURES"]
    assert features["wall_limit_secs"] == str(WALL_SECS)
    assert features["job_id"] == json.loads(view["ads"]["_CONDOR_JOB_AD:GlobalJobId"])


def test_no_swap_for_the_job_is_max_swap_bytes_0(guest):
    view = job_view(guest)
    assert enforced_v2_limit(view, "memory.swap.max") == 0, view["cgroup_v2"]
    assert view["JOBFEATURES"]["max_swap_bytes"] == "0"


def test_mjf_check_accepts_the_jobs_directories(guest):
    checked = job_view(guest)["check"]
    assert checked["rc"] == 0, checked


def test_mjf_describe_gives_dirac_the_slots_processors(guest):
    described = job_view(guest)["describe"]
    assert described["rc"] == 0, described
    assert json.loads(described["out"])["dirac"]["NumberOfProcessors"] == CPUS


def test_nothing_is_left_after_the_job(guest):
    results = guest.check("after")
    assert results["execute_left"] == [], results["execute_left"]
    assert not [path for path in results["base_left"] if "/jobs/" in path], results["base_left"]
    assert not [path for path in results["tree_after"] if "/htcondor/condor_" in path]


def test_the_vm_run_takes_well_under_three_minutes(guest):
    guest.check("job")
    assert guest.vm.seconds < 150, f"{guest.vm.seconds:.0f} s"


def test_a_starter_hook_on_htcondor_23_9_kills_every_process(guest):
    """HTCondor 23.9's starter on cgroup v2 (fixed in 23.10.21 and 24.0.5, HTCONDOR-2871):
    a starter job hook is a child it never put in a cgroup; when it exits, the starter
    looks its cgroup up, gets the empty name - the root - and SIGKILLs every process in
    every cgroup. docs/htcondor.md warns sites of it: this test fails once the chroot's
    HTCondor no longer does it, to update that warning."""
    results = guest.check("after")
    assert "trap_survived" not in results, "HTCondor spared the driver: update docs/htcondor.md"
    assert "hook_trap" not in results["seconds"], "the part returned, though killed"
    starter = condor_log(guest, "StarterLog.slot1_1")
    assert 'HOOK_JOB_EXIT (/usr/bin/mjf-htcondor-job-exit) invoked' in starter
    killed = f"killing with signal 9 to pid {results['trap_driver_pid']} in cgroup mjf-driver"
    assert killed in starter, starter[-6000:]
