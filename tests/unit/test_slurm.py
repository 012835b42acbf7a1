"""Slurm parsers and facts, on environments and scontrol output recorded from Slurm 22.05."""

import time
import tracemalloc

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mjf_hooks.batch import slurm
from mjf_hooks.errors import SiteInputError
from mjf_hooks.hooks.frame import read_env_file
from tests.conftest import FIXTURES, fixture_text

PROLOG_ENV = read_env_file(str(FIXTURES / "slurm-22.05/prolog-sbatch.env"))
SCONTROL_JOB = slurm.parse_scontrol_record(fixture_text("slurm-22.05/scontrol-show-job-o.txt"))
SCONTROL_PARTITION = slurm.parse_scontrol_record(
    fixture_text("slurm-22.05/scontrol-show-partition-o.txt"))


def recorded_scontrol(name):
    """The multi-line `scontrol show job` output recorded after the env in a sample."""
    text = fixture_text(f"slurm-22.05/{name}")
    lines = text.split("# scontrol show job\n", 1)[1].splitlines()
    return slurm.parse_scontrol_record(" ".join(lines))


def test_recorded_scontrol_record_fields():
    assert SCONTROL_JOB["JobId"] == "2"
    assert SCONTROL_JOB["TimeLimit"] == "00:05:00"
    assert SCONTROL_JOB["MinMemoryNode"] == "200M"
    assert SCONTROL_JOB["TRES"] == "cpu=2,mem=200M,node=1,billing=2"
    assert SCONTROL_JOB["AllocNode:Sid"] == "localhost:1067"
    assert SCONTROL_PARTITION["DefaultTime"] == "00:30:00"


def test_a_value_with_spaces_stays_whole():
    record = slurm.parse_scontrol_record("JobId=5 Command=/home/u/my job.sh arg=1 WorkDir=/tmp")
    assert record["Command"] == "/home/u/my job.sh arg=1" and record["WorkDir"] == "/tmp"


@pytest.mark.parametrize(("environ", "message"), [
    ({}, "SLURM_JOB_ID is missing or empty"),
    ({"SLURM_JOB_ID": ""}, "missing or empty"),
    ({"SLURM_JOB_ID": "abc"}, "is not a Slurm job id"),
    ({"SLURM_JOB_ID": "../../etc"}, "is not a Slurm job id"),
    ({"SLURM_JOB_ID": "12/3"}, "is not a Slurm job id"),
    ({"SLURM_JOB_ID": "١٢"}, "is not a Slurm job id"),
])
def test_bad_job_ids_are_refused(environ, message):
    with pytest.raises(SiteInputError, match=message):
        slurm.job_id(environ)


@pytest.mark.parametrize(("text", "hosts"), [
    ("vm", ["vm"]),
    ("vm[1-3]", ["vm1", "vm2", "vm3"]),
    ("n[01-03,7]", ["n01", "n02", "n03", "n7"]),
    ("a[1-2]b[3-4]", ["a1b3", "a1b4", "a2b3", "a2b4"]),
    ("x,y[1-2],z", ["x", "y1", "y2", "z"]),
    ("gpu[009-011]-ib", ["gpu009-ib", "gpu010-ib", "gpu011-ib"]),
])
def test_hostlists_expand(text, hosts):
    assert slurm.expand_hostlist(text) == hosts


@pytest.mark.parametrize("text", ["vm[", "vm]", "vm[3-1]", "vm[a]", "vm[1-]", "", "a,,b"])
def test_bad_hostlists_raise_value_error(text):
    with pytest.raises(ValueError):
        slurm.expand_hostlist(text)


@pytest.mark.parametrize("text", ["a[0-99999]b[0-99999]", "a[0-9999999999999999999]",
                                  "a[0-99999],b", "a[0-50000],b[0-50000]", "a[1-2]" * 40000,
                                  "a[0-99999]" + "[0-1]" * 60, "n[" + "1-99999," * 8 + "1]"])
def test_a_host_list_of_more_than_100000_hosts_fails_fast_without_expanding(text):
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(ValueError, match=r"names more than 100000 hosts|longer than 255"):
            slurm.expand_hostlist(text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - started < 0.5
    assert peak < 10 * 2**20


def test_a_host_list_names_the_limit_and_host_names_stay_host_sized():
    with pytest.raises(ValueError, match=r"'a\[0-99999\]b\[0-99999\]' names more than 100000"):
        slurm.expand_hostlist("a[0-99999]b[0-99999]")
    assert len(slurm.expand_hostlist("n[000001-100000]")) == 100000
    assert slurm.expand_hostlist("n" * 250 + "[1-2]") == ["n" * 250 + "1", "n" * 250 + "2"]
    for text in ("n" * 256, "a[1]" * 1000, "n" * 200 + "[1-2]" + "m" * 60):
        with pytest.raises(ValueError, match="longer than 255 characters"):
            slurm.expand_hostlist(text)


def test_a_huge_node_list_is_a_message_naming_the_variable():
    environ = {"SLURM_JOB_CPUS_PER_NODE": "4(x2)", "SLURMD_NODENAME": "a1b1",
               "SLURM_JOB_NODELIST": "a[0-99999]b[0-99999]"}
    with pytest.raises(SiteInputError,
                       match=r"SLURM_JOB_NODELIST='a\[0-99999\]b\[0-99999\]': .* 100000 hosts"):
        slurm.cpus_on_node(environ)


@given(st.lists(st.tuples(st.text("abx-", min_size=1, max_size=3),
                          st.lists(st.tuples(st.integers(0, 120), st.integers(0, 5),
                                             st.integers(1, 3)), min_size=1, max_size=3)),
                min_size=1, max_size=3))
def test_nested_ranges_expand_in_order(pattern):
    """Each bracket multiplies: every prefix, then every number, left to right."""
    text, expected = "", [""]
    for literal, ranges in pattern:
        group = ",".join(f"{low:0{width}d}-{low + span}" for low, span, width in ranges)
        numbers = [f"{n:0{width}d}" for low, span, width in ranges
                   for n in range(low, low + span + 1)]
        text += f"{literal}[{group}]"
        expected = [name + literal + number for name in expected for number in numbers]
    assert slurm.expand_hostlist(text) == expected


@given(st.sets(st.integers(0, 999), min_size=1, max_size=30))
def test_hostlist_ranges_round_trip(numbers):
    text = "node[" + ",".join(f"{n:03d}" for n in sorted(numbers)) + "]"
    assert slurm.expand_hostlist(text) == [f"node{n:03d}" for n in sorted(numbers)]


@pytest.mark.parametrize(("text", "counts"), [
    ("2", [2]), ("4(x2),2", [4, 4, 2]), ("1(x3)", [1, 1, 1]), ("8,16(x2)", [8, 16, 16]),
])
def test_cpus_per_node(text, counts):
    assert slurm.parse_cpus_per_node(text) == counts


@pytest.mark.parametrize("text", ["", "x", "0", "4(x0)", "4(x2", "4(2)", "-1", "4,,2", "4(x)"])
def test_bad_cpus_per_node(text):
    with pytest.raises(ValueError):
        slurm.parse_cpus_per_node(text)


@given(st.text(max_size=20))
def test_cpus_per_node_parser_raises_only_value_error(text):
    try:
        counts = slurm.parse_cpus_per_node(text)
    except ValueError:
        return
    assert counts and all(count > 0 for count in counts)


def multi_node(node, cpus="4(x2),2", nodelist="wn[01-02],gpu7"):
    return {"SLURMD_NODENAME": node, "SLURM_JOB_CPUS_PER_NODE": cpus,
            "SLURM_JOB_NODELIST": nodelist}


@pytest.mark.parametrize(("node", "cpus"), [("wn01", 4), ("wn02", 4), ("gpu7", 2)])
def test_each_node_gets_its_own_share(node, cpus):
    count, source = slurm.cpus_on_node(multi_node(node))
    assert count == cpus and "of 3" in source


@pytest.mark.parametrize(("node", "share"), [("wn01", (1, 3)), ("wn02", (2, 3)),
                                             ("gpu7", (3, 3))])
def test_each_node_knows_which_share_it_is(node, share):
    assert slurm.node_share(multi_node(node)) == share
    assert slurm.node_share({"SLURMD_NODENAME": "vm", "SLURM_NODELIST": "vm"}) == (1, 1)


@pytest.mark.parametrize(("environ", "message"), [
    (multi_node("wn09"), "not in the job's node list"),
    (multi_node("wn01", cpus="4(x2)"), "has 2 entries for 3 nodes"),
    (multi_node("wn01", cpus="four"), "SLURM_JOB_CPUS_PER_NODE='four'"),
    (multi_node("wn01", nodelist="wn[01-"), "SLURM_JOB_NODELIST='wn\\[01-'"),
    ({"SLURMD_NODENAME": "vm"}, "SLURM_JOB_CPUS_PER_NODE=''"),
])
def test_cpu_share_errors_name_the_variable(environ, message):
    with pytest.raises(SiteInputError, match=message):
        slurm.cpus_on_node(environ)


@pytest.mark.parametrize(("text", "seconds"), [
    ("00:05:00", 300), ("1-00:00:00", 86400), ("2-03:04:05", 183845), ("30", 1800),
    ("10:30", 630), ("1-2", 93600), ("1-02:30", 95400), ("UNLIMITED", None),
    ("Partition_Limit", None), ("NONE", None),
])
def test_time_limits(text, seconds):
    assert slurm.parse_duration_secs(text) == seconds


@pytest.mark.parametrize("text", ["1:2:3:4", "a", "1-", "-1", "00:0x:00"])
def test_bad_time_limits(text):
    with pytest.raises(ValueError):
        slurm.parse_duration_secs(text)


@pytest.mark.parametrize(("text", "size"), [
    ("200M", 200 * 2**20), ("4G", 4 * 2**30), ("1024", 2**30), ("512K", 2**19),
    ("1T", 2**40), ("0", None), ("0M", None), ("(null)", None),
])
def test_memory_sizes(text, size):
    assert slurm.parse_memory_bytes(text) == size


def test_local_time_is_read_in_the_local_zone():
    assert slurm.parse_local_time("2026-11-22T05:11:42") == int(
        time.mktime(time.strptime("2026-11-22T05:11:42", "%Y-%m-%dT%H:%M:%S")))
    assert slurm.parse_local_time("Unknown") is None


def test_prolog_facts_from_a_recorded_slurm_22_05_job():
    facts, warnings = slurm.job_facts(
        slurm.JobInput(PROLOG_ENV, recorded_scontrol("prolog-sbatch.env")), 1)
    assert warnings == []
    values = {name: value for name, (value, _) in facts.items()}
    assert values == {
        "job_id": "3", "allocated_cpu": 2, "wall_limit_secs": 300,
        "max_rss_bytes": 300 * 2**20,
        "jobstart_secs": slurm.parse_local_time("2026-11-22T03:46:44"),
    }
    assert facts["wall_limit_secs"][1] == "scontrol TimeLimit=00:05:00"


def test_slurm_23_02_variables_make_scontrol_unnecessary():
    environ = {**PROLOG_ENV, "SLURM_JOB_START_TIME": "1795319471",
               "SLURM_JOB_END_TIME": "1795323071"}
    assert not slurm.needs_scontrol(environ)
    assert slurm.needs_scontrol(PROLOG_ENV)
    facts, _ = slurm.job_facts(slurm.JobInput(environ, None, None), 1)
    assert facts["jobstart_secs"] == (1795319471, "SLURM_JOB_START_TIME")
    assert facts["wall_limit_secs"][0] == 3600
    assert "max_rss_bytes" not in facts  # left for the TaskProlog to complete


def test_memory_per_cpu_is_multiplied_by_this_nodes_cpus():
    job = {**SCONTROL_JOB, "MinMemoryCPU": "100M"}
    del job["MinMemoryNode"]
    facts, _ = slurm.job_facts(slurm.JobInput(PROLOG_ENV, job, None), 1)
    assert facts["max_rss_bytes"][0] == 2 * 100 * 2**20


def test_partition_limit_uses_the_partition_default():
    job = {**SCONTROL_JOB, "TimeLimit": "Partition_Limit"}
    facts, _ = slurm.job_facts(slurm.JobInput(PROLOG_ENV, job, SCONTROL_PARTITION), 1)
    assert facts["wall_limit_secs"] == (1800, "scontrol partition DefaultTime=00:30:00")


def test_unlimited_jobs_get_no_wall_limit():
    facts, warnings = slurm.job_facts(
        slurm.JobInput(PROLOG_ENV, {**SCONTROL_JOB, "TimeLimit": "UNLIMITED"}), 1)
    assert "wall_limit_secs" not in facts and warnings == []


def test_garbage_in_scontrol_fields_is_a_warning_not_a_guess():
    job = {**SCONTROL_JOB, "TimeLimit": "soon", "MinMemoryNode": "lots", "StartTime": "x"}
    facts, warnings = slurm.job_facts(slurm.JobInput(PROLOG_ENV, job, None), 42)
    assert "wall_limit_secs" not in facts and "max_rss_bytes" not in facts
    assert facts["jobstart_secs"] == (42, "time the Prolog ran")
    assert len(warnings) == 2 and "'soon'" in warnings[0] and "'lots'" in warnings[1]


def test_node_not_in_list_leaves_allocated_cpu_out_with_a_warning():
    environ = {**PROLOG_ENV, "SLURMD_NODENAME": "other", "SLURM_JOB_CPUS_PER_NODE": "2(x2)",
               "SLURM_NODELIST": "vm[1-2]"}
    facts, warnings = slurm.job_facts(slurm.JobInput(environ, SCONTROL_JOB, None), 1)
    assert "allocated_cpu" not in facts
    assert warnings == ["allocated_cpu not written: this node (SLURMD_NODENAME='other') is not "
                        "in the job's node list SLURM_NODELIST='vm[1-2]'"]


def test_task_memory_from_a_recorded_taskprolog_environment():
    environ = read_env_file(str(FIXTURES / "slurm-22.05/taskprolog-batchstep.env"))
    assert slurm.task_memory_facts(environ) == {
        "max_rss_bytes": (300 * 2**20, "SLURM_MEM_PER_NODE=300")}
    per_cpu = {"SLURM_MEM_PER_CPU": "100", "SLURM_CPUS_ON_NODE": "4"}
    assert slurm.task_memory_facts(per_cpu)["max_rss_bytes"][0] == 400 * 2**20
    assert slurm.task_memory_facts({"SLURM_MEM_PER_NODE": "x"}) == {}


def test_settings_files():
    settings = slurm.parse_settings("ConstrainRAMSpace=yes # why\nTmpFS = /scratch\n#x=1\n")
    assert settings == {"constrainramspace": "yes", "tmpfs": "/scratch"}


def test_cpus_per_node_naming_more_nodes_than_a_cluster_has_fails_fast():
    started = time.monotonic()
    with pytest.raises(ValueError, match="more than 100000 nodes"):
        slurm.parse_cpus_per_node(",".join(["1(x100000)"] * 11000))
    assert time.monotonic() - started < 1


# PrologFlags=RunInJob (recorded from Slurm 24.11): the Prolog runs in the job's cgroup.
@pytest.mark.parametrize(("sample", "job_id", "inside"), [
    ("runinjob-prolog.cgroup", "14", True),
    ("runinjob-prolog.cgroup", "1", False),  # another job's (job_1 is not job_14)
    ("cgv1-prolog.cgroup", "14", False),  # Contain without RunInJob: slurmd's own cgroup
    ("runinjob-epilog.cgroup", "14", False),  # the Epilog: only the job's freezer cgroup
    # cgroup v2 (recorded on a real v2 kernel): both in the job's step_extern/slurm.
    ("cgv2-runinjob-prolog.cgroup", "1", True),
    ("cgv2-runinjob-prolog.cgroup", "14", False),
    ("cgv2-runinjob-epilog.cgroup", "1", True),
    ("cgv2-job.cgroup", "1", True),
])
def test_a_prolog_knows_when_it_runs_inside_the_jobs_cgroup(sample, job_id, inside):
    text = fixture_text(f"slurm-24.11/{sample}")
    assert slurm.in_job_cgroup(text, job_id) is inside


@pytest.mark.parametrize("text", [
    "0::/system.slice/slurmstepd.scope/job_14/step_extern/slurm\n",  # cgroup v2
    "4:memory:/slurm_wn1/uid_1/job_14/step_extern\n",
])
def test_in_job_cgroup_on_both_cgroup_versions(text):
    assert slurm.in_job_cgroup(text, "14")
    assert not slurm.in_job_cgroup(text, "1")
    assert not slurm.in_job_cgroup("0::/\n4:memory:/\n", "14")


@pytest.mark.parametrize(("start", "end"), [
    ("1795393552", "1795393252"),  # the end before the start
    ("abc", "1795393552"), ("0", "1795393552"), ("17953", "1795393552"),  # not a time
    ("1795393252", "9223372036854775807"),  # no plausible end
])
def test_a_start_and_end_pair_that_is_no_time_limit_is_named(start, end):
    environ = {"SLURM_JOB_ID": "9", "SLURM_JOB_CPUS_PER_NODE": "2", "SLURMD_NODENAME": "vm",
               "SLURM_JOB_NODELIST": "vm", "SLURM_JOB_START_TIME": start,
               "SLURM_JOB_END_TIME": end}
    facts, warnings = slurm.job_facts(slurm.JobInput(environ, None, None), 1795393300)
    assert "wall_limit_secs" not in facts
    assert len(warnings) == 1 and warnings[0].startswith("wall_limit_secs not written: ")
    assert "SLURM_JOB_START_TIME" in warnings[0] and "SLURM_JOB_END_TIME" in warnings[0]
