"""Host and cgroup probes, on recorded /proc text and pyfakefs cgroup trees."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mjf_hooks.probe import cgroup, cpu
from mjf_hooks.probe.mounts import parse_mountinfo
from mjf_hooks.probe.scratch import filesystem_size_bytes
from tests.conftest import fixture_text

V1_UNLIMITED = "9223372036854771712"  # as recorded in a Slurm 22.05 job (job-cgroup-v1.txt)

HYBRID_MOUNTINFO = fixture_text("host/mountinfo-v1-hybrid.txt")  # read before pyfakefs starts
V2_MOUNTINFO = (
    "24 1 0:22 / /sys rw - sysfs sysfs rw\n"
    "35 24 0:30 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
)


def test_total_cpu_counts_processor_lines_of_recorded_cpuinfo():
    text = fixture_text("host/cpuinfo-amd-epyc-2.txt")
    assert cpu.count_processors(text) == 2
    assert cpu.count_physical_cores(text) == 2


def test_hyperthreads_count_as_processors_not_as_physical_cores():
    blocks = [f"processor\t: {n}\nphysical id\t: 0\ncore id\t\t: {n % 2}\n" for n in range(4)]
    text = "\n".join(blocks)
    assert cpu.count_processors(text) == 4
    assert cpu.count_physical_cores(text) == 2


def test_cpuinfo_without_topology_gives_no_physical_core_count():
    assert cpu.count_physical_cores("processor : 0\nBogoMIPS : 50\n\nprocessor : 1\n") is None
    assert cpu.count_processors("") is None


def test_total_cpu_reads_proc_cpuinfo(fs):
    fs.create_file("/proc/cpuinfo", contents="processor : 0\n\nprocessor : 1\n\nprocessor : 2\n")
    assert cpu.total_cpu() == (3, "/proc/cpuinfo: 3 processor lines")


def test_mountinfo_recorded_hybrid_host():
    mounts = cgroup.cgroup_mounts(parse_mountinfo(HYBRID_MOUNTINFO))
    assert mounts["memory"] == ("/", "/sys/fs/cgroup/memory")
    assert mounts["cpuset"] == ("/", "/sys/fs/cgroup/cpuset")
    assert mounts[""] == ("/", "/sys/fs/cgroup/unified")


def test_mountinfo_unescapes_paths_and_skips_junk():
    text = "1 2 0:3 / /mnt/with\\040space rw - cgroup cgroup rw,memory\ngarbage line\n- - -\n"
    (mount,) = parse_mountinfo(text)
    assert mount.mount_point == "/mnt/with space" and mount.super_options == ["rw", "memory"]


def _v1_slurm_tree(fs, job_limit="209715200", memsw=None):
    """The cgroup v1 layout recorded in a Slurm 22.05 job with ConstrainRAMSpace=yes."""
    memsw = memsw or job_limit
    fs.create_file("/proc/self/mountinfo", contents=HYBRID_MOUNTINFO)
    fs.create_file("/proc/self/cgroup", contents=(
        "4:memory:/slurm_vm/uid_1001/job_2/step_batch/task_0\n"
        "3:cpuset:/slurm_vm/uid_1001/job_2/step_batch\n0::/\n"
    ))
    root = "/sys/fs/cgroup/memory"
    levels = {
        "": (V1_UNLIMITED, V1_UNLIMITED),
        "/slurm_vm": (V1_UNLIMITED, V1_UNLIMITED),
        "/slurm_vm/uid_1001": (V1_UNLIMITED, V1_UNLIMITED),
        "/slurm_vm/uid_1001/job_2": (job_limit, memsw),
        "/slurm_vm/uid_1001/job_2/step_batch": (job_limit, memsw),
        "/slurm_vm/uid_1001/job_2/step_batch/task_0": (V1_UNLIMITED, V1_UNLIMITED),
    }
    for level, (limit, both) in levels.items():
        fs.create_file(f"{root}{level}/memory.limit_in_bytes", contents=limit + "\n")
        fs.create_file(f"{root}{level}/memory.memsw.limit_in_bytes", contents=both + "\n")
    fs.create_file("/sys/fs/cgroup/cpuset/slurm_vm/uid_1001/job_2/step_batch/cpuset.cpus",
                   contents="0-1\n")


def test_v1_limit_is_the_minimum_over_ancestors_like_slurm_sets_it(fs):
    _v1_slurm_tree(fs)
    limits = cgroup.limits()
    assert limits.version == 1
    assert limits.path == "/sys/fs/cgroup/memory/slurm_vm/uid_1001/job_2/step_batch/task_0"
    assert limits.memory_bytes == 209715200
    assert limits.swap_bytes == 0  # ConstrainSwapSpace: memsw == memory, no swap
    assert limits.cpus == 2


def test_v1_swap_is_what_memsw_leaves_over_memory(fs):
    _v1_slurm_tree(fs, job_limit="1000", memsw="1500")
    assert cgroup.limits().swap_bytes == 500


def test_v1_unlimited_everywhere_means_no_limit(fs):
    _v1_slurm_tree(fs, job_limit=V1_UNLIMITED)
    limits = cgroup.limits()
    assert (limits.memory_bytes, limits.swap_bytes) == (None, None)


def _v2_tree(fs, files):
    fs.create_file("/proc/self/mountinfo", contents=V2_MOUNTINFO)
    fs.create_file("/proc/self/cgroup", contents="0::/system.slice/slurmstepd.scope/job_7/step_0\n")
    for path, content in files.items():
        fs.create_file("/sys/fs/cgroup" + path, contents=content)


def test_v2_max_means_unlimited_and_parents_limit(fs):
    _v2_tree(fs, {
        "/system.slice/slurmstepd.scope/job_7/memory.max": "536870912\n",
        "/system.slice/slurmstepd.scope/job_7/memory.swap.max": "max\n",
        "/system.slice/slurmstepd.scope/job_7/step_0/memory.max": "max\n",
        "/system.slice/slurmstepd.scope/job_7/step_0/memory.swap.max": "0\n",
        "/system.slice/slurmstepd.scope/job_7/step_0/cpuset.cpus.effective": "0-3,8,10-11\n",
    })
    limits = cgroup.limits()
    assert limits.version == 2
    assert limits.memory_bytes == 536870912
    assert limits.swap_bytes == 0  # v2 memory.swap.max is swap alone
    assert limits.cpus == 7


def test_v2_without_limit_files(fs):
    _v2_tree(fs, {"/system.slice/slurmstepd.scope/job_7/step_0/cgroup.procs": ""})
    limits = cgroup.limits()
    assert (limits.memory_bytes, limits.swap_bytes, limits.cpus) == (None, None, None)


@pytest.mark.parametrize("version", [1, 2])
def test_a_cgroup_removed_before_its_limits_were_read_gives_none(fs, version):
    # The job ended and its cgroup went while a reader had its /proc/PID/cgroup: the
    # parents' files are still there, and their CPUs are not the job's.
    if version == 1:
        _v1_slurm_tree(fs)
        fs.remove_object("/sys/fs/cgroup/memory/slurm_vm/uid_1001/job_2/step_batch/task_0")
    else:
        _v2_tree(fs, {"/system.slice/slurmstepd.scope/job_7/cpuset.cpus.effective": "0-3\n"})
    assert cgroup.limits() is None


def test_garbage_in_limit_files_is_no_limit_not_a_crash(fs):
    _v2_tree(fs, {
        "/system.slice/slurmstepd.scope/job_7/memory.max": "-1\n",
        "/system.slice/slurmstepd.scope/job_7/step_0/memory.max": "\x00\xff",
        "/system.slice/slurmstepd.scope/job_7/step_0/cpuset.cpus.effective": "3-1",
    })
    limits = cgroup.limits()
    assert (limits.memory_bytes, limits.cpus) == (None, None)


def test_cgroup_namespace_root_is_stripped(fs):
    fs.create_file("/proc/self/mountinfo",
                   contents="35 24 0:30 /job_9 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n")
    fs.create_file("/proc/self/cgroup", contents="0::/job_9/step_0\n")
    fs.create_file("/sys/fs/cgroup/memory.max", contents="1048576\n")
    fs.create_file("/sys/fs/cgroup/step_0/memory.max", contents="max\n")
    limits = cgroup.limits()
    assert limits.path == "/sys/fs/cgroup/step_0" and limits.memory_bytes == 1048576


def test_no_proc_means_no_limits(fs):
    assert cgroup.limits() is None
    assert cgroup.limits(12345) is None


def test_a_process_in_no_mounted_hierarchy(fs):
    fs.create_file("/proc/self/mountinfo", contents="1 0 0:1 / / rw - ext4 /dev/vda rw\n")
    fs.create_file("/proc/self/cgroup", contents="0::/\n")
    assert cgroup.limits() is None


@given(st.text(max_size=40))
def test_limit_parser_accepts_only_plain_byte_counts(text):
    value = cgroup.parse_limit(text)
    assert value is None or (text.strip().isdigit() and value == int(text.strip()))


@given(st.lists(st.tuples(st.integers(0, 512), st.integers(0, 64)), min_size=1, max_size=8))
def test_cpu_list_parser_counts_ranges(ranges):
    text = ",".join(f"{start}-{start + span}" if span else str(start) for start, span in ranges)
    assert cgroup.parse_cpu_list(text) == sum(span + 1 for _, span in ranges)


@given(st.text(max_size=30))
def test_cpu_list_parser_never_raises(text):
    count = cgroup.parse_cpu_list(text)
    assert count is None or count > 0


def test_scratch_is_the_filesystem_size(tmp_path):
    assert filesystem_size_bytes(str(tmp_path)) > 0
    assert filesystem_size_bytes(str(tmp_path / "missing")) is None


@pytest.mark.parametrize("pid", ["self", 1])
def test_real_host_probes_do_not_fail(pid):
    # On the machine running the tests: whatever the cgroup setup, no exception.
    cgroup.limits(pid)
    assert cpu.total_cpu()[0] >= 1 and cpu.affinity_cpus() >= 1


def test_the_nearest_ancestor_of_a_name_is_found_through_wrappers(fs):
    """A Prolog's slurmstepd, through a site's shell wrapper; never past ``hops``."""
    from mjf_hooks.probe import process

    tree = {40: ("slurmstepd", 1), 41: ("sh", 40), 42: ("python3 (x)", 41)}
    for pid, (command, parent) in tree.items():
        fs.create_file(f"/proc/{pid}/stat", contents=f"{pid} ({command}) S {parent} 1 1 0 -1")
    assert process.ancestor_named("slurmstepd", 42) == 40
    assert process.ancestor_named("slurmstepd", 42, hops=2) is None
    assert process.ancestor_named("slurmd", 42) is None
    assert process.ancestor_named("slurmstepd", 99) is None


def test_a_zombie_has_ended(fs):
    """An exited process its parent has not reaped yet keeps its /proc entry and start
    time: it has ended all the same (a slurmstepd whose parent is a slow init)."""
    from mjf_hooks.probe import process

    rest = " ".join(["0"] * 13)  # fields 9 to 21: the start time is field 22
    fs.create_file("/proc/40/stat", contents=f"40 (slurmstepd) Z 1 1 1 0 -1 {rest} 2489887 0")
    fs.create_file("/proc/41/stat", contents=f"41 (slurmstepd) S 1 1 1 0 -1 {rest} 2489887 0")
    assert process.still_running("40 2489887") is False
    assert process.still_running("41 2489887") is True
    assert process.still_running("41 2489888") is False
