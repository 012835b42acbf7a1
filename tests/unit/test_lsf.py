"""LSF parsers and facts, on environments written from the LSF 10.1.0 documentation."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mjf_hooks.batch import lsf
from mjf_hooks.errors import SiteInputError
from mjf_hooks.hooks.frame import read_env_file
from tests.conftest import FIXTURES


def fixture_env(name, host="wn01"):
    environ = read_env_file(str(FIXTURES / "lsf-10.1" / name))
    return {key: value.replace("@HOST@", host) for key, value in environ.items()}


@pytest.mark.parametrize(("name", "job_id"), [
    ("single-host.env", "1234"), ("array.env", "1234[7]"), ("minimal.env", "42"),
    ("multi-host.env", "5678"),
])
def test_job_ids(name, job_id):
    assert lsf.job_id(fixture_env(name)) == job_id


@pytest.mark.parametrize(("environ", "message"), [
    ({}, "LSB_JOBID is missing"), ({"LSB_JOBID": "12a"}, "is not an LSF job id"),
    ({"LSB_JOBID": "../1"}, "is not an LSF job id"),
    ({"LSB_JOBID": "1", "LSB_JOBINDEX": "x"}, "is not an array index"),
])
def test_bad_job_ids(environ, message):
    with pytest.raises(SiteInputError, match=message):
        lsf.job_id(environ)


@pytest.mark.parametrize(("name", "names", "cpus"), [
    ("single-host.env", ["wn01"], 4),
    ("multi-host.env", ["wn01"], 3),  # short name matches wn01.example.org
    ("multi-host.env", ["wn01.example.org"], 3),
    ("array.env", ["WN01"], 1),
    ("minimal.env", ["wn01"], 2),  # LSB_DJOB_NUMPROC
])
def test_this_hosts_share(name, names, cpus):
    assert lsf.cpus_on_host(fixture_env(name), names)[0] == cpus


def test_a_host_listed_twice_gets_both_shares():
    assert lsf.cpus_on_host({"LSB_MCPU_HOSTS": "a 2 b 1 a 3"}, ["a"]) == (
        5, "LSB_MCPU_HOSTS=a 2 b 1 a 3")


@pytest.mark.parametrize(("environ", "message"), [
    ({"LSB_MCPU_HOSTS": "wn01"}, "is not pairs of host and count"),
    ({"LSB_MCPU_HOSTS": "wn01 four"}, "is not pairs"),
    ({"LSB_MCPU_HOSTS": "wn01 0"}, "is not pairs"),
    ({"LSB_MCPU_HOSTS": "other 4"}, "is not in LSB_MCPU_HOSTS"),
    ({}, "neither LSB_MCPU_HOSTS nor LSB_DJOB_NUMPROC"),
    ({"LSB_DJOB_NUMPROC": "-1"}, "neither"),
])
def test_bad_cpu_variables(environ, message):
    with pytest.raises(SiteInputError, match=message):
        lsf.cpus_on_host(environ, ["wn01"])


@pytest.mark.parametrize(("name", "seconds"), [
    ("lsf-10.1/bjobs-l.txt", 1800),  # "30.0 min of hostA", after a CPULIMIT
    ("volclava-2.2/bjobs-l-run.txt", 600),
    ("volclava-2.2/bjobs-l-array-element.txt", 5400),
    ("volclava-2.2/bjobs-l-cpu-and-run.txt", 7200),
    ("volclava-2.2/bjobs-l-no-limit.txt", None),
])
def test_the_run_limit_is_read_from_bjobs_l_of_ibm_lsf_and_volclava(name, seconds):
    assert lsf.parse_bjobs_run_limit_secs((FIXTURES / name).read_text()) == seconds


@pytest.mark.parametrize("text", [
    " RUNLIMIT\n",  # the last line
    " RUNLIMIT\n soon\n",
    " CPULIMIT   RUNLIMIT\n 20.0 min\n",  # a value short
    " RUNLIMIT\n -5 min\n", " RUNLIMIT\n 0.0 min\n", " RUNLIMIT\n nan min\n",
    " RUNLIMIT\n 1e20 min\n", " RUNLIMIT\n x min\n",
])
def test_a_run_limit_that_is_not_minutes_is_an_error(text):
    with pytest.raises(ValueError, match="RUNLIMIT"):
        lsf.parse_bjobs_run_limit_secs(text)


def test_the_word_runlimit_in_a_jobs_command_is_not_its_limit():
    text = ("Job <5>, User <u>, Status <RUN>, Command <echo RUNLIMIT>\n"
            "Thu Dec  3: Submitted from host <vm>, CWD </tmp/9 min 9 min>;\n")
    assert lsf.parse_bjobs_run_limit_secs(text) is None


@given(st.text(max_size=200))
def test_run_limit_parser_raises_only_value_error(text):
    try:
        seconds = lsf.parse_bjobs_run_limit_secs(text)
    except ValueError:
        return
    assert seconds is None or seconds > 0


def test_rlimits_become_limits_unless_unlimited():
    infinity = -1
    assert lsf.limit_facts(3600, 2**31, infinity) == {
        "cpu_limit_secs": (3600, "RLIMIT_CPU (LSF's CPULIMIT, in real seconds)"),
        "max_rss_bytes": (2**31, "RLIMIT_RSS (LSF's MEMLIMIT)")}
    assert lsf.limit_facts(infinity, infinity, infinity) == {}


def test_job_facts_are_a_pure_function_of_the_environment_limits_and_bjobs():
    environ = {"LSB_JOBID": "1234", "LSB_JOBINDEX": "7", "LSB_MCPU_HOSTS": "hostA 4 hostB 2"}
    limits = lsf.limit_facts(3600, None, -1)
    facts, warnings = lsf.job_facts(
        lsf.JobInput(environ, ["hostB.example.org"], limits, (7200, "bjobs")), 1795400000)
    assert warnings == []
    assert {key: value for key, (value, _) in facts.items()} == {
        "job_id": "1234[7]", "jobstart_secs": 1795400000, "allocated_cpu": 2,
        "cpu_limit_secs": 3600, "wall_limit_secs": 7200}
    facts, warnings = lsf.job_facts(lsf.JobInput({"LSB_JOBID": "5"}, ["hostC"]), 1795400000)
    assert "allocated_cpu" not in facts and warnings[0].startswith("allocated_cpu not written")


def hhist(name):
    return (FIXTURES / "volclava-2.2" / name).read_text()


def local(text):
    import time

    return int(time.mktime(time.strptime(text, "%Y %b %d %H:%M:%S")))


def test_a_host_an_admin_closed_drains_from_then_until_it_is_opened():
    now = local("2026 Dec 03 07:00:00")
    assert lsf.drains(hhist("badmin-hhist-closed.txt"), "vm", now) == [
        (local("2026 Dec 03 06:57:23"), "LSF host closed by administrator <root>")]
    assert lsf.drains(hhist("badmin-hhist-opened.txt"), "vm", now) == []
    assert lsf.drains(hhist("badmin-hhist-closed.txt"), "other", now) == []
    assert lsf.drains("", "vm", now) == []


def test_a_close_without_a_year_is_the_latest_not_after_tomorrow():
    line = "Thu Dec 31 23:00:00: Host <vm> closed by administrator <root>.\n"
    assert lsf.drains(line, "vm", local("2027 Jan 01 01:00:00")) == [
        (local("2026 Dec 31 23:00:00"), "LSF host closed by administrator <root>")]
    with_year = "Thu Dec 31 23:00:00 2026: Host <vm.example.org> closed by administrator <a>."
    assert lsf.drains(with_year, "vm", local("2027 Jan 01 01:00:00"))[0][0] == \
        local("2026 Dec 31 23:00:00")


@given(st.text(max_size=300))
def test_hhist_parser_never_raises(text):
    assert all(isinstance(when, int) for when, _ in lsf.drains(text, "vm", 1.8e9))


def test_the_jobs_bjobs_lists_are_its_jobs_and_array_elements():
    listed = (FIXTURES / "volclava-2.2" / "bjobs-u-all-w-m.txt").read_text()
    assert lsf.running_jobs(listed) == {"1", "1[1]", "1[2]", "2"}
    none = (FIXTURES / "volclava-2.2" / "bjobs-u-all-w-m-none.txt").read_text()
    assert lsf.running_jobs(none) == set()


@pytest.mark.parametrize("text", [
    "", "LSF is down. Please wait ...\n", "vm: Bad host name, host group name or cluster name\n",
    "No unfinished job found\nbut something else\n",
])
def test_bjobs_output_that_is_no_list_of_jobs_proves_nothing(text):
    with pytest.raises(ValueError):
        lsf.running_jobs(text)


def test_the_queries_run_lsfs_commands_beside_the_configured_bjobs():
    options = {"bjobs": "/opt/lsf/bin/bjobs"}
    argv, env = lsf.drain_query(options, {"LSF_ENVDIR": "/opt/lsf/conf", "X": "y"}, "vm.example")
    assert argv == ["/opt/lsf/bin/badmin", "hhist", "vm"]
    assert env == {"PATH": "/usr/bin:/bin", "LC_ALL": "C", "LSF_ENVDIR": "/opt/lsf/conf"}
    argv, _ = lsf.jobs_query(options, {}, "vm")
    assert argv[-6:] == ["/opt/lsf/bin/bjobs", "-u", "all", "-w", "-m", "vm"]
    assert lsf.jobs_query(options, {}, "bad;name") is None


def test_an_ended_jobs_usage_is_read_from_bjobs_l():
    done = (FIXTURES / "volclava-2.2" / "bjobs-l-done.txt").read_text()
    assert lsf.parse_bjobs_usage(done, "bjobs -l") == {
        "cpu_secs": (4.4, "bjobs -l: CPU time used"),
        "peak_memory_bytes": (5 * 2**20, "bjobs -l: MAX MEM")}
    ibm = " MAX MEM: 1.5 Gbytes;  AVG MEM: 1 Gbytes\n Done successfully. The CPU time used " \
          "is 7200.0 seconds.\n"
    assert lsf.parse_bjobs_usage(ibm, "x") == {"cpu_secs": (7200.0, "x: CPU time used"),
                                               "peak_memory_bytes": (3 * 2**29, "x: MAX MEM")}
    running = (FIXTURES / "volclava-2.2" / "bjobs-l-cpu-and-run.txt").read_text()
    assert lsf.parse_bjobs_usage(running, "x") == {}


@given(st.text(max_size=200))
def test_usage_parser_never_raises(text):
    for value, _ in lsf.parse_bjobs_usage(text, "x").values():
        assert value >= 0


@pytest.mark.parametrize(("hosts", "current", "starter"), [
    ("wn1.example.org 2 wn2 2 ", "", "S starter"),           # short and full names match
    ("wn2 2 wn1 2", "/bin/csh -c", "S starter /bin/csh -c"),  # the job's own goes behind
    ("wn2 2 wn1 2", "S starter /bin/csh -c", None),          # a task's own job: already there
    ("wn1 2", "", None), ("wn1 2 WN1.example.org 1", "", None),  # this host alone
    ("", "", None),                                          # not known: none
])
def test_a_job_across_hosts_starts_its_other_hosts_tasks_through_the_starter(
        hosts, current, starter):
    environ = {"LSB_MCPU_HOSTS": hosts, "LSF_JOB_STARTER": current}
    assert lsf.remote_task_starter(environ, ["wn1"], "S starter") == starter
