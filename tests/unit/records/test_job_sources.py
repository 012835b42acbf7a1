"""Where each backend's Delivered values come from, fed recorded or hand-made input:
the job cgroup's counters (Slurm's TaskEpilog), the Slurm Epilog's environment, Grid
Engine's usage file, HTCondor's final job ad, and the usage report between the
TaskEpilog (the job's user) and the Epilog (root)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mjf_hooks import classad_files
from mjf_hooks.batch import gridengine, htcondor, slurm
from mjf_hooks.probe import cgroup
from mjf_hooks.records import job as job_record

FIXTURES = Path(__file__).parents[2] / "fixtures"
MIB = 2**20
V1_MOUNTS = {"cpuacct": ("/", "/sys/fs/cgroup/cpuacct"),
             "memory": ("/", "/sys/fs/cgroup/memory"),
             "freezer": ("/", "/sys/fs/cgroup/freezer"), "": ("/", "/sys/fs/cgroup/unified")}
JOB = "/slurm_vm/uid_1001/job_7"
# Slurm 22.05 and 24.11 (cgroup v1) run the TaskEpilog in the job's memory and freezer
# cgroups but in the root cpuacct one (seen on both, jobacct_gather/cgroup).
TASK_EPILOG = {"memory": f"{JOB}/step_batch", "freezer": JOB, "cpuacct": "/",
               "cpuset": f"{JOB}/step_batch", "": "/"}


def test_the_task_epilog_reads_the_jobs_counters_in_every_v1_hierarchy(fs):
    fs.create_file(f"/sys/fs/cgroup/cpuacct{JOB}/cpuacct.usage", contents="9776223780\n")
    fs.create_file(f"/sys/fs/cgroup/memory{JOB}/memory.max_usage_in_bytes",
                   contents="215949312\n")
    usage = cgroup.usage_from(TASK_EPILOG, V1_MOUNTS, slurm.job_cgroup_level("7"))
    assert usage.version == 1
    assert usage.cpu_secs == pytest.approx(9.776223780)
    assert usage.peak_memory_bytes == 215949312
    assert usage.facts() == {
        "cpu_secs": (usage.cpu_secs, f"cgroup /sys/fs/cgroup/cpuacct{JOB}/cpuacct.usage"),
        "peak_memory_bytes": (215949312,
                              f"cgroup /sys/fs/cgroup/memory{JOB}/memory.max_usage_in_bytes")}


def test_without_cpu_accounting_only_the_peak_is_known(fs):
    # jobacct_gather/none: Slurm makes no cpuacct cgroup for the job.
    fs.create_file(f"/sys/fs/cgroup/memory{JOB}/memory.max_usage_in_bytes", contents="5\n")
    usage = cgroup.usage_from(TASK_EPILOG, V1_MOUNTS, slurm.job_cgroup_level("7"))
    assert (usage.cpu_secs, usage.peak_memory_bytes) == (None, 5)
    assert list(usage.facts()) == ["peak_memory_bytes"]


def test_outside_a_job_or_once_its_cgroup_is_gone_nothing_is_known(fs):
    # The Epilog runs in slurmd's cgroups; and a job's own once Slurm removed them.
    epilog = {"memory": "/process_api/a7", "cpuacct": "/", "": "/"}
    assert cgroup.usage_from(epilog, V1_MOUNTS, slurm.job_cgroup_level("7")) is None
    assert cgroup.usage_from(TASK_EPILOG, V1_MOUNTS, slurm.job_cgroup_level("7")) is None
    # Another job's cgroup is not this job's: job_70 is not job_7.
    other = {"memory": "/slurm_vm/uid_1001/job_70/step_batch", "": "/"}
    assert cgroup.usage_from(other, V1_MOUNTS, slurm.job_cgroup_level("7")) is None


def test_cgroup_v2_usage_is_read_from_cpu_stat_and_memory_peak(fs):
    scope = "/system.slice/slurmstepd.scope/job_7"
    fs.create_file(f"/sys/fs/cgroup{scope}/cpu.stat",
                   contents="usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n")
    fs.create_file(f"/sys/fs/cgroup{scope}/memory.peak", contents="104857600\n")
    usage = cgroup.usage_from({"": f"{scope}/step_0/user/task_0"},
                              {"": ("/", "/sys/fs/cgroup")}, slurm.job_cgroup_level("7"))
    assert (usage.version, usage.cpu_secs, usage.peak_memory_bytes) == (2, 2.5, 100 * MIB)
    assert usage.facts()["cpu_secs"][1] == f"cgroup /sys/fs/cgroup{scope}/cpu.stat usage_usec"


@pytest.mark.parametrize("text", ["", "junk\n", "-5\n", "1e9\n", "max\n"])
def test_a_counter_that_is_not_a_number_is_not_taken(fs, text):
    fs.create_file(f"/sys/fs/cgroup/cpuacct{JOB}/cpuacct.usage", contents=text)
    fs.create_file(f"/sys/fs/cgroup/memory{JOB}/memory.max_usage_in_bytes", contents=text)
    assert cgroup.usage_from(TASK_EPILOG, V1_MOUNTS, slurm.job_cgroup_level("7")) is None


def test_the_usage_report_carries_the_two_values_and_root_names_its_own_source():
    report = job_record.usage_report({"cpu_secs": (9.7762, "x"), "peak_memory_bytes": (5, "y"),
                                   "wall_secs": (3, "z")})
    assert report == "cpu_secs 9.7762\npeak_memory_bytes 5\n"
    assert job_record.parse_usage_report(report, "the TaskEpilog") == {
        "cpu_secs": (9.7762, "the TaskEpilog"), "peak_memory_bytes": (5, "the TaskEpilog")}


@pytest.mark.parametrize("text", [
    "cpu_secs -1\n", "cpu_secs 1e9\n", "cpu_secs inf\n", "cpu_secs nan\n", "cpu_secs 1.\n",
    "cpu_secs \u0661\n", "cpu_secs 99999999999999999999999\n", "wall_secs 5\n",
    "end_time 5\n", "cpu_secs\n", "cpu_secs 5 6\n", "\0\0\0",
])
def test_a_report_value_that_is_not_a_plain_bounded_number_is_left_out(text):
    assert job_record.parse_usage_report(text, "s") == {}


@given(st.text(max_size=300))
def test_no_report_text_makes_the_parser_fail_or_yield_a_bad_value(text):
    for value, source in job_record.parse_usage_report(text, "s").values():
        assert 0 <= value < 1e16 and source == "s"


@pytest.mark.parametrize(("environ", "now", "expected"), [
    # Slurm 24.11 without RunInJob: the real end.
    ({"SLURM_JOB_END_TIME": "1795630214"}, 1795630215, {"end_time": (1795630214,
                                                                     "SLURM_JOB_END_TIME")}),
    # With RunInJob it is the start plus the time limit: not an end yet.
    ({"SLURM_JOB_END_TIME": "1795632038"}, 1795630246, {}),
    ({}, 1795630246, {}),  # Slurm 22.05 gives none
    ({"SLURM_JOB_END_TIME": "soon"}, 1795630246, {}),
])
def test_the_epilog_takes_slurms_end_time_only_when_it_is_past(environ, now, expected):
    delivered, user, partition = slurm.ending({**environ, "SLURM_JOB_USER": "mjfuser1",
                                               "SLURM_JOB_PARTITION": "debug"}, now)
    assert (delivered, user, partition) == (expected, "mjfuser1", "debug")


def test_grid_engines_usage_file_recorded_at_epilog_time():
    path = "/var/spool/gridengine/execd/localhost/active_jobs/1.1/usage"
    facts = gridengine.usage_facts((FIXTURES / "gridengine-8.1.9/usage").read_text(), path)
    assert facts == {
        "end_time": (1795630268, f"{path}: end_time"),
        "wall_secs": (6, f"{path}: ru_wallclock"),
        "cpu_secs": (pytest.approx(9.861065 + 0.166563), f"{path}: ru_utime + ru_stime"),
        "peak_memory_bytes": (213080 * 1024, f"{path}: ru_maxrss (the largest resident "
                                             "set of one of its processes)"),
    }


@pytest.mark.parametrize("text", ["", "end_time=0\n", "ru_utime=1\n", "ru_maxrss=-5\n",
                                  "ru_wallclock=1e5\n", "garbage\n\n==\n"])
def test_a_usage_file_without_usable_values_gives_what_it_has(text):
    facts = gridengine.usage_facts(text, "u")
    assert set(facts) <= {"wall_secs"} and all(value >= 0 for value, _ in facts.values())


def test_htcondors_final_job_ad_given_to_the_job_exit_hook():
    # Recorded on HTCondor 23.9 (procd sampling every second, no cgroups on that host).
    ad = classad_files.parse_ad((FIXTURES / "htcondor-23.9/job-exit-hook-stdin.ad").read_text())
    facts, owner = htcondor.exit_facts(ad)
    assert owner == "mjfuser1"
    assert facts == {
        "wall_secs": (8.612048, "HTCondor's final job ad: JobDuration"),
        "cpu_secs": (4.0, "HTCondor's final job ad: RemoteUserCpu + RemoteSysCpu"),
        "peak_memory_bytes": (218544 * 1024,
                              "HTCondor's final job ad: ResidentSetSize (KiB, peak)"),
    }
    assert htcondor.job_id_of(ad, "global", []) == ("vm#1.0#1795630282", "job ad GlobalJobId")


def test_an_exit_ad_with_odd_values_gives_only_the_sound_ones():
    ad = classad_files.parse_ad('JobDuration = "long"\nRemoteUserCpu = -1.0\nRemoteSysCpu = 0.0\n'
                          "ResidentSetSize = true\nOwner = 5\n")
    assert htcondor.exit_facts(ad) == ({}, None)
