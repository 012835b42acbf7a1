"""Slurm's cgroup v2 layout, on pyfakefs trees: the limits a job's process finds.

The last tests read a tree recorded from a real Slurm 24.11 on a real cgroup v2
kernel (tests/fixtures/slurm-24.11/cgv2-*, its README says how). The others are
written by hand after Slurm's description of its v2 hierarchy, which the recorded
tree bears out, with two things the description left open: Slurm built as Debian
builds it names its scope ``<node>_slurmstepd.scope`` (not only with
--enable-multiple-slurmd), and it writes the job's limits (memory.max, memory.high,
memory.swap.max, cpuset.cpus) to both ``job_<id>`` and each step's ``user``. What
Slurm does (in our words; sources: https://slurm.schedmd.com/cgroup_v2.html, sections "cgroup/v2
overview" and "Hierarchy overview", and SchedMD/slurm
src/plugins/cgroup/v2/cgroup_v2.c):

* slurmd has systemd create a scope, ``slurmstepd.scope`` (``<node>_slurmstepd
  .scope`` when built with --enable-multiple-slurmd), in ``system.slice``. Its
  directory is ``<PID 1's cgroup, minus its last part>/system.slice/<scope>``
  (``_set_int_cg_ns``): ``/system.slice/slurmstepd.scope`` on a host, under the
  container's own cgroup in a container. With ``IgnoreSystemd=yes`` (hosts
  without systemd) slurmd makes the same directory with mkdir. The slice is a
  constant in the source (``SYSTEM_CGSLICE``); of cgroup.conf, only
  ``CgroupMountpoint`` (testing only) moves the tree. slurmd itself lives apart, in
  ``/system.slice/slurmd.service`` (or ``<scope>/slurmd`` if started by hand).
* Under the scope: ``job_<id>/step_<step>/`` with ``slurm/`` (the slurmstepd)
  and ``user/task_<n>/`` (or ``user/task_special/``) for the user's processes;
  steps are named ``step_0``, ``step_batch``, ``step_extern``,
  ``step_interactive`` (``cgroup_p_step_create``, ``cgroup_p_task_addto``).
  ``system/`` beside the jobs is the waiting area for new slurmstepds.
* Memory (``cgroup_p_constrain_set``): the limit goes to ``memory.max``, the
  soft limit to ``memory.high``, and ``memory.swap.max`` gets memory+swap
  minus memory, i.e. swap alone. The job level is ``job_<id>``; a step limit
  lands in ``step_<x>/user`` (the step level is redirected there), so the
  slurmstepd in ``step_<x>/slurm`` is held by the job limit only.
* The kernel (Documentation/admin-guide/cgroup-v2.rst) reads ``max`` from
  ``memory.max`` and ``memory.swap.max`` where no limit is set; the root
  cgroup has neither file.
"""

import json

import pytest

from mjf_hooks import config, features
from mjf_hooks.batch import slurm
from mjf_hooks.hooks.frame import read_env_file
from mjf_hooks.probe import cgroup
from tests.conftest import FIXTURES, fixture_text

MIB = 1024**2
JOB_LIMIT = 300 * MIB  # 314572800

# A cgroup v2-only host as systemd sets it up (written by hand, the usual fields).
MOUNTINFO = (
    "22 1 252:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n"
    "23 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw\n"
    "24 22 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:2 - sysfs sysfs rw\n"
    "25 24 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 "
    "rw,nsdelegate,memory_recursiveprot\n"
    "26 24 0:24 / /sys/fs/bpf rw,nosuid,nodev,noexec,relatime shared:5 - bpf bpf rw,mode=700\n"
)
ROOT = "/sys/fs/cgroup"
SCOPE = "/system.slice/slurmstepd.scope"
TASK = f"{SCOPE}/job_14/step_0/user/task_0"

# Every cgroup from the top (below the root, which has no limit files) to the task's.
LEVELS = [
    "/system.slice",
    SCOPE,
    f"{SCOPE}/job_14",
    f"{SCOPE}/job_14/step_0",
    f"{SCOPE}/job_14/step_0/user",
    TASK,
]


def _chain(leaf):
    """The non-root cgroups from the top down to ``leaf``."""
    parts = leaf.strip("/").split("/")
    return ["/" + "/".join(parts[:end]) for end in range(1, len(parts) + 1)]


def _tree(fs, leaf=TASK, memory=None, swap=None, mountinfo=MOUNTINFO, namespaced=False):
    """The process in cgroup ``leaf``; ``max`` in both limit files at every level
    except those ``memory``/``swap`` ({cgroup: file content}) name. ``namespaced``:
    in a private cgroup namespace, whose root (mounted at /sys/fs/cgroup, and the
    ``/`` that ``leaf`` is relative to) is a host cgroup, with limit files."""
    memory, swap = memory or {}, swap or {}
    fs.create_file("/proc/self/mountinfo", contents=mountinfo)
    fs.create_file("/proc/self/cgroup", contents=f"0::{leaf}\n")
    for level in _chain(leaf):
        fs.create_file(f"{ROOT}{level}/memory.max", contents=memory.get(level, "max\n"))
        fs.create_file(f"{ROOT}{level}/memory.swap.max", contents=swap.get(level, "max\n"))
    if namespaced:
        fs.create_file(f"{ROOT}/memory.max", contents=memory.get("/", "max\n"))
        fs.create_file(f"{ROOT}/memory.swap.max", contents=swap.get("/", "max\n"))


def _job_keys(limits):
    """What the job's directory would say, from these cgroup limits alone."""
    conf = config.parse("")
    machine = features.machine_features(conf, (16, "test"), physical_cores=8)
    batch = {"job_id": ("14", "test"), "jobstart_secs": (1795319471, "test")}
    return features.render(features.job_features(conf, machine, batch, limits))


def test_the_job_level_limit_is_the_jobs_memory_and_swap(fs):
    job = f"{SCOPE}/job_14"
    _tree(fs, memory={job: f"{JOB_LIMIT}\n"}, swap={job: "0\n"})
    limits = cgroup.limits("self")
    assert limits.version == 2
    assert limits.path == ROOT + TASK
    assert (limits.memory_bytes, limits.swap_bytes) == (JOB_LIMIT, 0)
    keys = _job_keys(limits)
    assert (keys["max_rss_bytes"], keys["max_swap_bytes"]) == ("314572800", "0")


def test_swap_allowed_by_slurm_is_swap_alone(fs):
    # AllowedSwapSpace: Slurm writes memory+swap - memory, so 100M of swap reads as 100M.
    job = f"{SCOPE}/job_14"
    _tree(fs, memory={job: f"{JOB_LIMIT}\n"}, swap={job: f"{100 * MIB}\n"})
    limits = cgroup.limits("self")
    assert (limits.memory_bytes, limits.swap_bytes) == (JOB_LIMIT, 100 * MIB)


def test_the_smallest_of_several_finite_levels_wins(fs):
    job, user = f"{SCOPE}/job_14", f"{SCOPE}/job_14/step_0/user"
    _tree(fs,
          memory={"/system.slice": f"{8192 * MIB}\n", job: f"{JOB_LIMIT}\n",
                  user: f"{200 * MIB}\n"},
          swap={job: f"{64 * MIB}\n", user: f"{32 * MIB}\n"})
    limits = cgroup.limits("self")
    assert (limits.memory_bytes, limits.swap_bytes) == (200 * MIB, 32 * MIB)


def test_a_step_limit_above_the_jobs_does_not_raise_it(fs):
    job, user = f"{SCOPE}/job_14", f"{SCOPE}/job_14/step_0/user"
    _tree(fs, memory={job: f"{JOB_LIMIT}\n", user: f"{400 * MIB}\n"})
    assert cgroup.limits("self").memory_bytes == JOB_LIMIT


@pytest.mark.parametrize("level", LEVELS)
def test_a_limit_at_any_single_level_is_found(fs, level):
    _tree(fs, memory={level: "123456789\n"}, swap={level: "4096\n"})
    limits = cgroup.limits("self")
    assert (limits.memory_bytes, limits.swap_bytes) == (123456789, 4096)


def test_max_everywhere_is_no_limit(fs):
    _tree(fs)
    limits = cgroup.limits("self")
    assert limits.version == 2 and limits.path == ROOT + TASK
    assert (limits.memory_bytes, limits.swap_bytes, limits.cpus) == (None, None, None)
    keys = _job_keys(limits)
    assert "max_rss_bytes" not in keys and "max_swap_bytes" not in keys


def test_slurmstepd_beside_user_is_held_by_the_job_limit_only(fs):
    # step_<x>/slurm is not below step_<x>/user, where Slurm puts a step's limit.
    step = f"{SCOPE}/job_14/step_extern"
    _tree(fs, leaf=f"{step}/slurm", memory={f"{SCOPE}/job_14": f"{JOB_LIMIT}\n"})
    fs.create_file(f"{ROOT}{step}/user/memory.max", contents=f"{100 * MIB}\n")
    assert cgroup.limits("self").memory_bytes == JOB_LIMIT


def test_cpus_come_from_the_tasks_effective_cpuset(fs):
    _tree(fs)
    fs.create_file(f"{ROOT}{SCOPE}/job_14/cpuset.cpus.effective", contents="0-7\n")
    fs.create_file(f"{ROOT}{TASK}/cpuset.cpus.effective", contents="2-3\n")
    assert cgroup.limits("self").cpus == 2


# Where the scope can be, per Slurm: on a host; built with --enable-multiple-slurmd;
# inside a container sharing the host's cgroup tree (below PID 1's cgroup). Each with
# the step kinds Slurm creates and the task directories.
SCOPES = [
    "/system.slice/slurmstepd.scope",
    "/system.slice/node01_slurmstepd.scope",
    "/docker.slice/docker-3f2a9c.scope/system.slice/slurmstepd.scope",
]
STEPS = ["step_0/user/task_0", "step_batch/user/task_0", "step_extern/user/task_0",
         "step_interactive/user/task_0", "step_1/user/task_special", "step_2/user/task_17"]


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("step", STEPS)
def test_every_place_slurm_puts_a_job(fs, scope, step):
    job = f"{scope}/job_14"
    _tree(fs, leaf=f"{job}/{step}", memory={job: f"{JOB_LIMIT}\n"}, swap={job: "0\n"})
    limits = cgroup.limits("self")
    assert limits.path == f"{ROOT}{job}/{step}"
    assert (limits.memory_bytes, limits.swap_bytes) == (JOB_LIMIT, 0)


def test_in_a_private_cgroup_namespace_the_containers_limit_counts(fs):
    # /proc/self/cgroup is relative to the namespace's root, which is mounted at
    # /sys/fs/cgroup; that root is the container's cgroup on the host, with its limit.
    job = f"{SCOPE}/job_14"
    _tree(fs, memory={"/": f"{100 * MIB}\n", job: f"{JOB_LIMIT}\n"}, namespaced=True)
    assert cgroup.limits("self").memory_bytes == 100 * MIB


def test_only_a_cgroup2_mount_is_used(fs):
    # The same tree but cgroup2 not mounted (a tmpfs at /sys/fs/cgroup): nothing to read.
    _tree(fs, mountinfo=MOUNTINFO.replace("cgroup2 cgroup2", "tmpfs tmpfs"),
          memory={f"{SCOPE}/job_14": f"{JOB_LIMIT}\n"})
    assert cgroup.limits("self") is None


# parse_limit takes plain ASCII digits (surrounding whitespace stripped), below
# cgroup v1's "unlimited"; anything else is no limit at that level, and the
# other levels still count.
GARBLED = [
    "",
    "\n",
    "abc\n",
    "-1\n",
    f"-{JOB_LIMIT}\n",
    "+314572800\n",
    "3.5e8\n",
    "300M\n",
    "0x12C00000\n",
    "MAX\n",
    "max max\n",
    "314 572 800\n",
    "99999999999999999999\n",  # 20 digits
    "9223372036854771712\n",  # cgroup v1's "unlimited" (LONG_MAX rounded to a page)
    "\x00\xff",
    "\u0661\u0662\n",  # non-ASCII digits
]


@pytest.mark.parametrize("content", GARBLED)
def test_a_garbled_level_is_skipped_and_the_others_still_count(fs, content):
    job, user = f"{SCOPE}/job_14", f"{SCOPE}/job_14/step_0/user"
    _tree(fs, memory={job: content, user: f"{400 * MIB}\n"}, swap={job: content})
    limits = cgroup.limits("self")
    assert (limits.memory_bytes, limits.swap_bytes) == (400 * MIB, None)


@pytest.mark.parametrize("content", GARBLED)
def test_a_garbled_only_limit_is_no_limit(fs, content):
    _tree(fs, memory={f"{SCOPE}/job_14": content})
    assert cgroup.limits("self").memory_bytes is None


@pytest.mark.parametrize(("content", "value"), [
    (" 314572800 \n", JOB_LIMIT),  # whitespace around the digits is stripped
    ("314572800", JOB_LIMIT),  # no newline
    ("1099511627776\n", 1024**4),  # huge but real: 1 TiB
    ("9223372036852678655\n", 2**63 - 2**21 - 1),  # just below v1's "unlimited"
    ("0\n", 0),
])
def test_odd_but_plain_byte_counts_are_taken(fs, content, value):
    _tree(fs, memory={f"{SCOPE}/job_14": content})
    assert cgroup.limits("self").memory_bytes == value


def test_an_unreadable_limit_file_is_no_limit(fs):
    job = f"{SCOPE}/job_14"
    _tree(fs, memory={f"{job}/step_0": f"{400 * MIB}\n"})
    fs.remove(f"{ROOT}{job}/memory.max")
    fs.create_dir(f"{ROOT}{job}/memory.max")  # open() fails: IsADirectoryError
    assert cgroup.limits("self").memory_bytes == 400 * MIB


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("step", [*STEPS, "step_extern/slurm", "step_batch/slurm"])
def test_in_job_cgroup_knows_the_jobs_v2_cgroup(scope, step):
    text = f"0::{scope}/job_14/{step}\n"
    assert slurm.in_job_cgroup(text, "14")
    for other in ("1", "4", "140", "114", "15"):
        assert not slurm.in_job_cgroup(text, other)


@pytest.mark.parametrize("text", [
    "0::/system.slice/slurmd.service\n",  # slurmd's own cgroup
    "0::/system.slice/slurmstepd.scope/system\n",  # the waiting area for new slurmstepds
    "0::/system.slice/slurmstepd.scope/slurmd\n",  # a slurmd started by hand
    "0::/\n",
    "",
])
def test_in_job_cgroup_outside_any_job(text):
    assert not slurm.in_job_cgroup(text, "14")


def _recorded_tree(fs, proc_cgroup: str):
    """The cgroup tree recorded under slurmd's scope on a real v2 kernel, with the
    process in ``proc_cgroup`` (a recorded /proc/self/cgroup)."""
    tree = json.loads(fixture_text("slurm-24.11/cgv2-tree.json"))
    fs.create_file("/proc/self/mountinfo", contents=MOUNTINFO)
    fs.create_file("/proc/self/cgroup", contents=proc_cgroup)
    fs.create_file(f"{ROOT}/system.slice/memory.max", contents="max\n")
    for directory, files in tree.items():
        for name, text in files.items():
            fs.create_file(f"{ROOT}{directory}/{name}", contents=text + "\n")


@pytest.mark.parametrize("recorded", ["cgv2-job.cgroup", "cgv2-runinjob-prolog.cgroup",
                                      "cgv2-runinjob-epilog.cgroup"])
def test_the_recorded_tree_gives_the_jobs_limits(fs, recorded):
    # The batch job's task, and the RunInJob Prolog and Epilog in step_extern/slurm:
    # all under the job's 300M, no swap, 2 CPUs (sbatch -c 2 --mem=300M).
    fs.add_real_directory(str(FIXTURES))
    _recorded_tree(fs, fixture_text(f"slurm-24.11/{recorded}"))
    limits = cgroup.limits("self")
    assert (limits.version, limits.memory_bytes, limits.swap_bytes, limits.cpus) == \
        (2, JOB_LIMIT, 0, 2)


def test_the_recorded_jobs_keys():
    # What the recorded tree's limits and the recorded Prolog's environment make: the
    # values the job read in the VM.
    environ = read_env_file(str(FIXTURES / "slurm-24.11/cgv2-runinjob-prolog.env"))
    facts, warnings = slurm.job_facts(slurm.JobInput(environ),
                                      int(environ["SLURM_JOB_START_TIME"]))
    assert warnings == []
    assert (facts["job_id"][0], facts["allocated_cpu"][0], facts["wall_limit_secs"][0]) == \
        ("1", 2, 600)
