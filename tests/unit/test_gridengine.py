"""Grid Engine parsers and facts, on environments, spool configs and qstat output recorded
from a Son of Grid Engine 8.1.9 cell."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mjf_hooks.batch import gridengine
from mjf_hooks.errors import SiteInputError
from mjf_hooks.hooks.frame import read_env_file
from tests.conftest import FIXTURES, fixture_text

GIB = 1024 ** 3
NOW = 1795444160
PE_HOSTFILE_PATH = "/var/spool/gridengine/execd/localhost/active_jobs/13.1/pe_hostfile"
PE_SCRIPT = "/var/spool/gridengine/execd/localhost/job_scripts/13"


def env(job, name):
    return read_env_file(str(FIXTURES / "gridengine-8.1.9" / job / f"{name}.env"))


def spool(job):
    return gridengine.parse_spool_config(fixture_text(f"gridengine-8.1.9/{job}/spool-config"))


def requests(job):
    return gridengine.parse_resource_list(fixture_text(f"gridengine-8.1.9/{job}/qstat-j.txt"))


def starter_argv(job):
    return fixture_text(f"gridengine-8.1.9/{job}/starter-argv").rstrip("\n").split(" ")


QUEUE_LIMITS = gridengine.parse_queue_limits(
    fixture_text("gridengine-8.1.9/qstat-F-queue-instance.txt"))


def values(facts):
    return {key: value for key, (value, _) in facts.items()}


# job_id

@pytest.mark.parametrize(("job", "name", "job_id"), [
    ("pe-job", "prolog", "13"), ("pe-job", "starter", "13"), ("pe-job", "epilog", "13"),
    ("array-task", "prolog", "14.2"), ("array-task", "starter", "14.2"),
    ("array-task", "epilog", "14.2"),
    ("binary-job", "prolog", "12"), ("binary-job", "starter", "12"),
    ("binary-job", "epilog", "12"),
])
def test_recorded_job_ids(job, name, job_id):
    assert gridengine.job_id(env(job, name)) == job_id


@pytest.mark.parametrize(("environ", "job_id"), [
    ({"JOB_ID": "7"}, "7"),
    ({"JOB_ID": "7", "SGE_TASK_ID": "undefined"}, "7"),
    ({"JOB_ID": "7", "SGE_TASK_ID": ""}, "7"),
    ({"JOB_ID": "7", "SGE_TASK_ID": "03"}, "7.3"),
    ({"JOB_ID": "9" * 19}, "9" * 19),
])
def test_job_ids(environ, job_id):
    assert gridengine.job_id(environ) == job_id


@pytest.mark.parametrize(("environ", "message"), [
    ({}, "JOB_ID is missing or empty"),
    ({"JOB_ID": ""}, "JOB_ID is missing or empty"),
    ({"JOB_ID": "12a"}, "is not a Grid Engine job id"),
    ({"JOB_ID": "../1"}, "is not a Grid Engine job id"),
    ({"JOB_ID": "-1"}, "is not a Grid Engine job id"),
    ({"JOB_ID": "١٢"}, "is not a Grid Engine job id"),
    ({"JOB_ID": "1" * 20}, "is not a Grid Engine job id"),  # more digits than any id
    ({"JOB_ID": "1" * 201}, "is not a Grid Engine job id"),
    ({"JOB_ID": "1", "SGE_TASK_ID": "x"}, "is not an array task id"),
    ({"JOB_ID": "1", "SGE_TASK_ID": "-1"}, "is not an array task id"),
    ({"JOB_ID": "1", "SGE_TASK_ID": "\u0661"}, "is not an array task id"),
    ({"JOB_ID": "1", "SGE_TASK_ID": "../2"}, "is not an array task id"),
])
def test_bad_job_ids_are_refused(environ, message):
    with pytest.raises(SiteInputError, match=message):
        gridengine.job_id(environ)


# times and memory values

@pytest.mark.parametrize(("text", "seconds"), [
    ("3600", 3600), ("1:00:00", 3600), ("1::1", 3601), ("::30", 30), ("1.5:0:0", 5400),
    ("0:30:0", 1800), ("0x10", 16), ("0X10", 16), ("010", 8), ("0", 0), (" 600\n", 600),
    ("INFINITY", None), ("infinity", None), ("UNDEFINED", None), ("NONE", None),
])
def test_times(text, seconds):
    assert gridengine.parse_time_secs(text) == seconds


@pytest.mark.parametrize("text", ["1:30", "1h", "abc", "-5", "", "1:2:3:4", "1:-2:0", "0x",
                                  "09", "1e400", "1:x:0", "\uff11\uff12"])
def test_bad_times_raise_value_error(text):
    with pytest.raises(ValueError, match="is not a Grid Engine time"):
        gridengine.parse_time_secs(text)


@given(st.integers(0, 10 ** 12), st.integers(0, 10 ** 12), st.integers(0, 10 ** 12))
def test_h_m_s_is_hours_minutes_and_seconds(hours, minutes, seconds):
    assert gridengine.parse_time_secs(f"{hours}:{minutes}:{seconds}") == (
        hours * 3600 + minutes * 60 + seconds)


@given(st.text(max_size=20))
def test_time_parser_raises_only_value_error(text):
    try:
        seconds = gridengine.parse_time_secs(text)
    except ValueError:
        return
    assert seconds is None or (isinstance(seconds, int) and seconds >= 0)


@pytest.mark.parametrize(("text", "size"), [
    ("1G", 1073741824), ("1g", 10 ** 9), ("300M", 300 * 1024 ** 2), ("300m", 300 * 10 ** 6),
    ("2k", 2000), ("2K", 2048), ("1.5G", 1610612736), ("1073741824", 1073741824),
    ("0x400", 1024), ("0", 0), ("INFINITY", None), ("infinity", None),
])
def test_memory_values(text, size):
    assert gridengine.parse_memory_bytes(text) == size


@pytest.mark.parametrize("text", ["1GB", "G", "-1G", "1T", "", "g1", "1e30"])
def test_bad_memory_values_raise_value_error(text):
    with pytest.raises(ValueError, match="is not a Grid Engine memory value"):
        gridengine.parse_memory_bytes(text)


@given(st.text(max_size=20))
def test_memory_parser_raises_only_value_error(text):
    try:
        size = gridengine.parse_memory_bytes(text)
    except ValueError:
        return
    assert size is None or (isinstance(size, int) and size >= 0)


@given(st.integers(0, 10 ** 6), st.sampled_from(["", "k", "m", "g", "K", "M", "G"]))
def test_memory_multipliers(number, suffix):
    multiplier = {"": 1, "k": 1000, "m": 1000 ** 2, "g": 1000 ** 3,
                  "K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}[suffix]
    assert gridengine.parse_memory_bytes(f"{number}{suffix}") == number * multiplier


# spool config and qstat output

def test_recorded_spool_configs():
    pe_job = spool("pe-job")
    assert (pe_job["h_vmem"], pe_job["h_cpu"], pe_job["host_slots"]) == ("1G", "1800", "2")
    assert (pe_job["s_vmem"], pe_job["s_cpu"], pe_job["h_rss"]) == ("INFINITY",) * 3
    assert pe_job["tmpdir"] == "/tmp/13.1.all.q"
    assert (pe_job["queue"], pe_job["host"]) == ("all.q", "vm")
    assert pe_job["handle_as_binary"] == "0"
    assert pe_job["prolog"] == "root@/tmp/ge-rec/rec2.sh prolog"
    assert pe_job["fs_stdin_host"] == '""' and pe_job["fs_stdin_path"] == ""
    array_task = spool("array-task")
    assert (array_task["host_slots"], array_task["ja_task_id"]) == ("1", "2")
    assert array_task["tmpdir"] == "/tmp/14.2.all.q"
    binary_job = spool("binary-job")
    assert (binary_job["handle_as_binary"], binary_job["no_shell"]) == ("1", "0")
    assert binary_job["script_file"] == "/bin/true"


def test_spool_config_lines_without_a_name_or_equals_are_skipped():
    assert gridengine.parse_spool_config("a=1\n=2\nnoequals\nb=x=y\n\n") == {
        "a": "1", "b": "x=y"}


def test_recorded_resource_lists():
    assert requests("pe-job") == {"h_rt": "3600", "h_vmem": "1G", "h_cpu": "1800"}
    assert requests("array-task") == {"s_rt": "600"}
    assert requests("binary-job") == {}
    assert gridengine.parse_resource_list("") == {}


def test_recorded_queue_limits():
    assert QUEUE_LIMITS == {"s_rt": "infinity", "h_rt": "infinity"}
    assert gridengine.parse_queue_limits("") == {}


# slots on this host

PE_HOSTFILE = fixture_text("gridengine-8.1.9/pe-job/pe_hostfile")


@pytest.mark.parametrize("names", [["vm"], ["vm.example.org"], ["VM"], ["other", "vm"]])
def test_recorded_pe_hostfile(names):
    assert gridengine.cpus_on_host(env("pe-job", "prolog"), PE_HOSTFILE, names) == (
        2, f"PE_HOSTFILE {PE_HOSTFILE_PATH}")


def test_a_short_name_in_pe_hostfile_matches_the_full_one():
    assert gridengine.cpus_on_host({}, "vm.example.org 3 all.q@vm.example.org UNDEFINED\n",
                                   ["vm"])[0] == 3


def test_a_host_listed_twice_gets_both_shares():
    hostfile = "vm 2 all.q@vm UNDEFINED\nother 4 all.q@other UNDEFINED\n\nvm 3 big.q@vm UNDEFINED\n"
    assert gridengine.cpus_on_host({}, hostfile, ["vm"])[0] == 5


def test_without_pe_hostfile_nslots_counts():
    assert gridengine.cpus_on_host(env("array-task", "prolog"), None, ["vm"]) == (1, "NSLOTS=1")


@pytest.mark.parametrize(("environ", "hostfile", "message"), [
    ({}, PE_HOSTFILE, "is not in PE_HOSTFILE"),
    ({}, "", "is not in PE_HOSTFILE"),
    ({}, "vm two all.q@vm UNDEFINED", "line 1: not 'host slots queue"),
    ({}, "vm", "line 1: not 'host slots queue"),
    ({}, "vm 0 all.q@vm UNDEFINED", "line 1: not 'host slots queue"),
    ({}, "vm -2 all.q@vm UNDEFINED", "line 1: not 'host slots queue"),
    ({"NSLOTS": "4", "NHOSTS": "2"}, None, "counts the slots of NHOSTS='2' hosts"),
    ({}, None, "NSLOTS='' is not a number of slots"),
    ({"NSLOTS": "0"}, None, "is not a number of slots"),
    ({"NSLOTS": "x"}, None, "is not a number of slots"),
])
def test_bad_slot_counts(environ, hostfile, message):
    with pytest.raises(SiteInputError, match=message):
        gridengine.cpus_on_host(environ, hostfile, ["other"] if hostfile == PE_HOSTFILE
                                else ["vm"])


# CPU time and memory limits

def test_recorded_pe_job_limits_are_per_slot():
    warnings = []
    assert gridengine.spool_limit_facts(spool("pe-job"), None, warnings) == {
        "cpu_limit_secs": (3600, "h_cpu=1800 (spool config) x 2 slots on this host"),
        "max_rss_bytes": (2 * GIB, "h_vmem=1G (spool config) x 2 slots on this host")}
    assert warnings == []


@pytest.mark.parametrize("job", ["array-task", "binary-job"])
def test_recorded_unlimited_jobs_have_no_limits(job):
    warnings = []
    assert gridengine.spool_limit_facts(spool(job), None, warnings) == {}
    assert warnings == []


def test_rss_limit_is_per_process_and_wins_over_virtual_memory():
    config = {"h_rss": "1G", "h_vmem": "512M", "host_slots": "2"}
    assert gridengine.spool_limit_facts(config) == {
        "max_rss_bytes": (GIB, "h_rss=1G (spool config)")}


def test_a_limit_grid_engine_keeps_per_job_is_not_multiplied():
    config = {"h_cpu": "1800", "h_cpu_is_consumable_job": "1", "h_vmem": "1G",
              "h_vmem_is_consumable_job": "1"}
    assert values(gridengine.limit_facts(config, 4, [])) == {
        "cpu_limit_secs": 1800, "max_rss_bytes": GIB}


def test_the_smaller_of_hard_and_soft_limits_counts():
    config = {"h_cpu": "1800", "s_cpu": "0:10:0", "h_vmem": "2G", "s_vmem": "1G",
              "h_rss": "INFINITY", "s_rss": "INFINITY"}
    assert gridengine.limit_facts(config, 2, []) == {
        "cpu_limit_secs": (1200, "s_cpu=0:10:0 (spool config) x 2 slots on this host"),
        "max_rss_bytes": (2 * GIB, "s_vmem=1G (spool config) x 2 slots on this host")}


def test_a_garbled_limit_is_ignored_with_a_warning():
    warnings = []
    facts = gridengine.limit_facts({"h_cpu": "soon", "s_cpu": "600", "h_vmem": "1GB"}, 1,
                                   warnings)
    assert values(facts) == {"cpu_limit_secs": 600}
    assert warnings == [
        "spool config h_cpu: 'soon' is not a Grid Engine time (seconds or h:m:s); ignored",
        "spool config h_vmem: '1GB' is not a Grid Engine memory value such as 4G; ignored"]


def test_unlimited_and_zero_limits_are_absent():
    config = {"h_cpu": "INFINITY", "s_cpu": "0", "h_vmem": "infinity", "h_rss": "UNDEFINED"}
    assert gridengine.limit_facts(config, 2, []) == {}


def test_spool_limits_need_slots():
    assert gridengine.spool_limit_facts(None, 2) == {}
    assert gridengine.spool_limit_facts({"h_cpu": "60"}) == {}
    assert values(gridengine.spool_limit_facts({"h_cpu": "60"}, 3)) == {"cpu_limit_secs": 180}
    # host_slots wins over the slots the caller counted
    assert values(gridengine.spool_limit_facts({"h_cpu": "60", "host_slots": "2"}, 3)) == {
        "cpu_limit_secs": 120}


# run-time limit

def test_the_smaller_run_time_request_counts():
    assert gridengine.wall_limit({"h_rt": "3600", "s_rt": "600"}, QUEUE_LIMITS, []) == (
        600, "s_rt=600 (qstat -j)")


def test_without_a_request_the_queue_instance_limit_counts():
    assert gridengine.wall_limit({}, {"h_rt": "2:00:00", "s_rt": "infinity"}, []) == (
        7200, "h_rt=2:00:00 (queue instance)")
    assert gridengine.wall_limit(None, {"s_rt": "600"}, []) == (600, "s_rt=600 (queue instance)")


def test_no_request_and_no_queue_limit_is_no_limit():
    assert gridengine.wall_limit({}, QUEUE_LIMITS, []) is None
    assert gridengine.wall_limit(None, None, []) is None


def test_a_garbled_run_time_limit_warns():
    warnings = []
    assert gridengine.wall_limit({"h_rt": "1h"}, None, warnings) is None
    assert warnings == ["qstat -j h_rt: '1h' is not a Grid Engine time (seconds or h:m:s); "
                        "ignored"]


@pytest.mark.parametrize(("requested", "needed"), [
    (None, False), ({}, True), ({"h_vmem": "1G"}, True), ({"h_rt": "3600"}, True),
    ({"s_rt": "600"}, True), ({"h_rt": "3600", "s_rt": "600"}, False),
])
def test_needs_queue_limits(requested, needed):
    assert gridengine.needs_queue_limits(requested) is needed


def test_recorded_jobs_need_the_queue_limits_they_did_not_request():
    for job in ("pe-job", "array-task", "binary-job"):  # none requested both
        assert gridengine.needs_queue_limits(requests(job))


def test_a_run_time_limit_not_requested_is_the_queues():
    # s_rt requested, h_rt not: the queue's h_rt still ends the job.
    assert gridengine.wall_limit({"s_rt": "600"}, {"h_rt": "300", "s_rt": "infinity"}, []) \
        == (300, "h_rt=300 (queue instance)")
    # what the job requested stands for that limit, whatever the queue says
    assert gridengine.wall_limit({"h_rt": "900"}, {"h_rt": "1200", "s_rt": "1000"}, []) \
        == (900, "h_rt=900 (qstat -j)")


# queue instance and scratch directory

@pytest.mark.parametrize("job", ["pe-job", "array-task", "binary-job"])
def test_recorded_queue_instances(job):
    assert gridengine.queue_instance(env(job, "prolog"), spool(job)) == "all.q@vm"


def test_queue_instance_from_the_environment_without_the_spool_config():
    assert gridengine.queue_instance(env("pe-job", "prolog"), {}) == "all.q@vm"
    assert gridengine.queue_instance({}, {}) is None


@pytest.mark.parametrize(("queue", "host"), [
    ("all.q", "v m"), ("all.q", "vm;rm"), ("all q", "vm"), ("all.q", "vm/x"), ("all.q", "$(x)"),
])
def test_odd_queue_instances_are_refused(queue, host):
    assert gridengine.queue_instance({}, {"queue": queue, "host": host}) is None


def test_recorded_scratch_dirs():
    assert gridengine.scratch_dir(env("pe-job", "prolog"), spool("pe-job")) == "/tmp/13.1.all.q"
    assert gridengine.scratch_dir(env("pe-job", "starter"), {}) == "/tmp/13.1.all.q"
    assert gridengine.scratch_dir(env("array-task", "prolog"), {}) == "/tmp/14.2.all.q"


def test_scratch_dir_order():
    assert gridengine.scratch_dir({"TMPDIR": "/a", "TMP": "/b"}, {"tmpdir": "/c"}) == "/a"
    assert gridengine.scratch_dir({"TMP": "/b"}, {"tmpdir": "/c"}) == "/b"
    assert gridengine.scratch_dir({}, {"tmpdir": "/c"}) == "/c"
    assert gridengine.scratch_dir({}, {}) is None


# job facts

@pytest.mark.parametrize(("job", "hostfile", "expected"), [
    ("pe-job", PE_HOSTFILE, {
        "job_id": "13", "jobstart_secs": NOW, "allocated_cpu": 2, "cpu_limit_secs": 3600,
        "max_rss_bytes": 2 * GIB, "wall_limit_secs": 3600}),
    ("array-task", None, {
        "job_id": "14.2", "jobstart_secs": NOW, "allocated_cpu": 1, "wall_limit_secs": 600}),
    ("binary-job", None, {"job_id": "12", "jobstart_secs": NOW, "allocated_cpu": 1}),
])
def test_recorded_job_facts(job, hostfile, expected):
    given = gridengine.JobInput(env(job, "prolog"), ["vm.example.org", "vm"], spool(job),
                                hostfile, requests(job), QUEUE_LIMITS)
    facts, warnings = gridengine.job_facts(given, NOW)
    assert warnings == []
    assert values(facts) == expected


def test_recorded_pe_job_fact_sources():
    given = gridengine.JobInput(env("pe-job", "prolog"), ["vm"], spool("pe-job"), PE_HOSTFILE,
                                requests("pe-job"), QUEUE_LIMITS)
    facts, _ = gridengine.job_facts(given, NOW)
    assert facts == {
        "job_id": ("13", "JOB_ID/SGE_TASK_ID"),
        "jobstart_secs": (NOW, "time the job started"),
        "allocated_cpu": (2, f"PE_HOSTFILE {PE_HOSTFILE_PATH}"),
        "cpu_limit_secs": (3600, "h_cpu=1800 (spool config) x 2 slots on this host"),
        "max_rss_bytes": (2 * GIB, "h_vmem=1G (spool config) x 2 slots on this host"),
        "wall_limit_secs": (3600, "h_rt=3600 (qstat -j)")}


def test_an_unreadable_spool_config_leaves_cpu_and_memory_limits_out():
    given = gridengine.JobInput(env("pe-job", "prolog"), ["vm"], None, PE_HOSTFILE,
                                requests("pe-job"))
    facts, warnings = gridengine.job_facts(given, NOW)
    assert values(facts) == {"job_id": "13", "jobstart_secs": NOW, "allocated_cpu": 2,
                             "wall_limit_secs": 3600}
    assert len(warnings) == 1 and "spool config is not readable" in warnings[0]


def test_a_host_missing_from_pe_hostfile_warns_and_limits_use_host_slots():
    given = gridengine.JobInput(env("pe-job", "prolog"), ["other"], spool("pe-job"),
                                PE_HOSTFILE)
    facts, warnings = gridengine.job_facts(given, NOW)
    assert values(facts) == {"job_id": "13", "jobstart_secs": NOW, "cpu_limit_secs": 3600,
                             "max_rss_bytes": 2 * GIB}
    assert len(warnings) == 1 and warnings[0].startswith("allocated_cpu not written")


def test_job_facts_raise_for_a_bad_identity():
    with pytest.raises(SiteInputError):
        gridengine.job_facts(gridengine.JobInput({"JOB_ID": "x"}, ["vm"], None, None), NOW)


# qstat -xml

def test_jobs_query_for_this_host():
    argv, command_env = gridengine.jobs_query({}, {"SGE_ARCH": "lx-amd64"}, "vm.example.org")
    assert argv == ["/usr/bin/qstat", "-u", "*", "-q", "*@vm*", "-xml"]
    assert "-q" in argv and "*@vm*" in argv and "-xml" in argv
    assert command_env == {"PATH": "/usr/bin:/bin", "SGE_ROOT": "/var/lib/gridengine",
                           "SGE_CELL": "default", "SGE_ARCH": "lx-amd64"}


def test_jobs_query_takes_the_cell_from_the_environment_or_options():
    environ = {"SGE_ROOT": "/opt/sge", "SGE_CELL": "cell1"}
    _, command_env = gridengine.jobs_query({}, environ, "vm")
    assert (command_env["SGE_ROOT"], command_env["SGE_CELL"]) == ("/opt/sge", "cell1")
    options = {"sge_root": "/srv/sge", "sge_cell": "cell2", "qstat": "/opt/sge/bin/qstat"}
    argv, command_env = gridengine.jobs_query(options, environ, "vm")
    assert argv[0] == "/opt/sge/bin/qstat"
    assert (command_env["SGE_ROOT"], command_env["SGE_CELL"]) == ("/srv/sge", "cell2")


@pytest.mark.parametrize("nodename", ["a b", "", ".example.org", "vm;rm", "v*m", "[vm]"])
def test_no_jobs_query_for_an_odd_node_name(nodename):
    assert gridengine.jobs_query({}, {}, nodename) is None


def test_recorded_qstat_xml():
    assert gridengine.running_jobs(fixture_text("gridengine-8.1.9/qstat-xml.txt")) == {
        "14.2", "14.3"}


def job_list(number, tasks=None, state="running"):
    task = f"<tasks>{tasks}</tasks>" if tasks is not None else ""
    return (f'<job_list state="{state}"><JB_job_number>{number}</JB_job_number>'
            f"<state>r</state>{task}</job_list>")


@pytest.mark.parametrize(("output", "names"), [
    (f"<job_info><queue_info>{job_list(7)}</queue_info></job_info>", {"7"}),
    (f"<job_info><queue_info></queue_info><job_info>{job_list(15, '1-3:1', 'pending')}"
     "</job_info></job_info>", {"15"}),
    (f"<job_info><queue_info>{job_list(7)}{job_list(8, '4')}</queue_info>"
     f"<job_info>{job_list(8, '5-9:2', 'pending')}</job_info></job_info>", {"7", "8.4", "8"}),
    ("<job_info></job_info>", set()),
    ("<?xml version='1.0'?>\n<job_info>\n</job_info>\n", set()),
])
def test_qstat_xml(output, names):
    assert gridengine.running_jobs(output) == names


@pytest.mark.parametrize(("output", "message"), [
    ("", "printed no XML"),
    ("error: commlib error: got select error (Connection refused)", "printed no XML"),
    ("<job_info>", "printed no XML"),
    ("<html><body>Bad Gateway</body></html>", "printed <html>"),
    ("<queue_info></queue_info>", "printed <queue_info>"),
    (f"<job_info>{job_list('x')}</job_info>", "is not digits"),
    (f"<job_info>{job_list('')}</job_info>", "is not digits"),
    (f"<job_info>{job_list('-1')}</job_info>", "is not digits"),
])
def test_not_qstat_xml_raises_value_error(output, message):
    with pytest.raises(ValueError, match=message):
        gridengine.running_jobs(output)


# how a starter starts the job

def test_recorded_pe_job_starts_under_a_login_shell():
    argv = starter_argv("pe-job")
    assert argv == [PE_SCRIPT, "a", "b"]
    assert gridengine.job_command(argv, env("pe-job", "starter"), spool("pe-job")) == (
        "/bin/sh", ["-sh", PE_SCRIPT, "a", "b"])


def test_without_a_login_shell_argv0_is_the_shells_name():
    environ = env("pe-job", "starter")
    del environ["SGE_STARTER_USE_LOGIN_SHELL"]
    assert gridengine.job_command(starter_argv("pe-job"), environ, spool("pe-job")) == (
        "/bin/sh", ["sh", PE_SCRIPT, "a", "b"])


def test_unix_behavior_runs_the_script_itself():
    environ = {**env("pe-job", "starter"), "SGE_STARTER_SHELL_START_MODE": "unix_behavior"}
    assert gridengine.job_command(starter_argv("pe-job"), environ, spool("pe-job")) == (
        PE_SCRIPT, [PE_SCRIPT, "a", "b"])


def test_recorded_array_task_starts_under_a_login_shell():
    script = "/var/spool/gridengine/execd/localhost/job_scripts/14"
    assert gridengine.job_command(starter_argv("array-task"), env("array-task", "starter"),
                                  spool("array-task")) == ("/bin/sh", ["-sh", script])


def test_recorded_binary_job_runs_under_shell_c():
    argv = starter_argv("binary-job")
    assert argv == ["/bin/true"]
    assert gridengine.job_command(argv, env("binary-job", "starter"), spool("binary-job")) == (
        "/bin/sh", ["-sh", "-c", "/bin/true"])


def test_a_binary_job_with_arguments_is_one_shell_command():
    assert gridengine.job_command(["/bin/echo", "a", "b"], env("binary-job", "starter"),
                                  spool("binary-job")) == ("/bin/sh", ["-sh", "-c",
                                                                       "/bin/echo a b"])


def test_a_binary_job_without_a_shell_runs_as_it_is():
    config = {**spool("binary-job"), "no_shell": "1"}
    assert gridengine.job_command(["/bin/true"], env("binary-job", "starter"), config) == (
        "/bin/true", ["/bin/true"])


def test_without_the_spool_config_argv_runs_as_it_is():
    assert gridengine.job_command(starter_argv("pe-job"), env("pe-job", "starter"), None) == (
        PE_SCRIPT, [PE_SCRIPT, "a", "b"])


def test_a_relative_shell_path_runs_argv_as_it_is():
    environ = {**env("pe-job", "starter"), "SGE_STARTER_SHELL_PATH": "sh"}
    assert gridengine.job_command(starter_argv("pe-job"), environ, spool("pe-job")) == (
        PE_SCRIPT, [PE_SCRIPT, "a", "b"])


def test_without_the_starter_variables_the_spool_config_names_the_shell():
    config = {**spool("pe-job"), "shell_path": "/bin/bash"}
    assert gridengine.job_command(starter_argv("pe-job"), {}, config) == (
        "/bin/bash", ["bash", PE_SCRIPT, "a", "b"])


def test_job_command_leaves_its_argv_alone():
    argv = starter_argv("pe-job")
    _, command = gridengine.job_command(argv, {}, None)
    command.append("x")
    assert argv == [PE_SCRIPT, "a", "b"]


# installed

def test_installed_when_the_cell_names_its_master(tmp_path):
    options = {"sge_root": str(tmp_path)}
    assert not gridengine.installed(options)
    common = tmp_path / "default" / "common"
    common.mkdir(parents=True)
    assert not gridengine.installed(options)
    (common / "act_qmaster").write_text("vm\n")
    assert gridengine.installed(options)
    assert not gridengine.installed({**options, "sge_cell": "other"})


def test_installed_in_another_cell(tmp_path):
    common = tmp_path / "cell1" / "common"
    common.mkdir(parents=True)
    (common / "act_qmaster").write_text("vm\n")
    assert gridengine.installed({"sge_root": str(tmp_path), "sge_cell": "cell1"})
    assert not gridengine.installed({"sge_root": str(tmp_path)})
