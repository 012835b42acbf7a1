"""`mjf-pbs` (begin, launch, end, prologue, epilogue, profile) as an installed command,
replaying what a real OpenPBS 23.06 complex handed its hooks (tests/fixtures/pbs-23.06):
the hook adapter's stdin, classic prologue/epilogue argv, a fake qstat (recorded-like,
failing, hanging); and contrib/pbs (mjf.sh, install-hook, the mjf_hook.py adapter run
against a fake `pbs` module)."""

import json
import os
import pwd
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import CHECKOUT_ROOT, FIXTURES, installed_command, require, write_script

PBS = FIXTURES / "pbs-23.06"
HOOK_INPUT = PBS / "hook-input"
CONTRIB = CHECKOUT_ROOT / "contrib" / "pbs"
# begin looks the job's user up: the recorded pbsuser1 becomes a user that exists here.
USER = pwd.getpwuid(os.getuid()).pw_name
MIB = 2**20
GIB = 2**30
HOST = os.uname().nodename.split(".")[0]
TORQUE_ARGV = ["123.torque.example.org", USER, USER, "jobname",
               "neednodes=1:ppn=4,nodes=1:ppn=4,walltime=02:00:00,mem=4gb", "batch", "atlas"]
# What `qstat -f 8.vm` prints for job a (OpenPBS 23.06), on this host.
QSTAT_F = f"""\
Job Id: 8.vm
    Job_Name = jobp
    Job_Owner = pbsuser1@localhost
    job_state = R
    queue = workq
    server = vm
    ctime = Wed Nov 25 22:10:01 2026
    exec_host = {HOST}/0*2
    exec_vnode = ({HOST}:ncpus=2:mem=307200kb)
    Resource_List.mem = 300mb
    Resource_List.ncpus = 2
    Resource_List.nodect = 1
    Resource_List.place = free
    Resource_List.select = 1:ncpus=2:mem=300mb
    Resource_List.walltime = 00:10:00
    session_id = 556441
    euser = pbsuser1
    egroup = pbsuser1
    Variable_List = PBS_O_HOME=/home/pbsuser1,PBS_O_LANG=C.UTF-8,PBS_O_LOGNAME=pbsuse
\tr1,PBS_O_PATH=/usr/bin:/bin,PBS_O_MAIL=/var/mail/pbsuser1,PBS_O_SHELL=/bin/bash
    project = _pbs_project_default

"""


def hook_input(name, **changes):
    """A recorded hook input, its user replaced; ``changes``: attributes to set (None
    removes one)."""
    text = (HOOK_INPUT / f"{name}.txt").read_text().replace("pbsuser1", USER)
    lines = text.splitlines()
    for attribute, value in changes.items():
        attribute = attribute.replace("__", ".")
        index = next((i for i, line in enumerate(lines)
                      if line.partition("=")[0] == attribute), None)
        if index is None:
            lines.append(f"{attribute}={value}")
        elif value is None:
            del lines[index]
        else:
            lines[index] = f"{attribute}={value}"
    return "".join(line + "\n" for line in lines)


def recorded_argv(name):
    """The numbered argv of a recorded prologue/epilogue (`N: word` lines)."""
    argv = []
    for line in (PBS / name).read_text().splitlines():
        if line.startswith("==="):
            break
        number, colon, word = line.partition(": ")
        if colon and number.isdigit():
            argv.append(word)
    return argv


class Site:
    """A PBS mom: a config whose base_dir is in tmp_path, a fake qstat."""

    def __init__(self, tmp_path, write_config):
        self.tmp_path = tmp_path
        self.qstat = tmp_path / "qstat"
        self.qstat_log = tmp_path / "qstat.args"
        self._write_config = write_config
        self.set_qstat(f"cat <<'EOF'\n{QSTAT_F}EOF\n")
        self.configure()

    def configure(self, extra="", mjf="", base_dir=None):
        self.conf, self.base = self._write_config(
            f"command_timeout = 0.5\n{mjf}[pbs]\nqstat = {self.qstat}\n{extra}", base_dir)

    def set_qstat(self, body):
        write_script(self.qstat, f'echo "$@" >> {self.qstat_log}\n{body}')

    def qstat_calls(self):
        return [line.split() for line in self.qstat_log.read_text().splitlines()] \
            if self.qstat_log.exists() else []

    def environ(self, **changes):
        environ = {"MJF_CONFIG": str(self.conf), "PATH": "/usr/bin:/bin"}
        environ.update(changes)
        return environ

    def run(self, *args, stdin="", environ=None):
        data = stdin.encode() if isinstance(stdin, str) else stdin
        return subprocess.run([installed_command("mjf-pbs"), *args], input=data,
                              capture_output=True, timeout=60,
                              env=self.environ() if environ is None else environ)

    def role(self, role, name_or_text, **changes):
        """begin/launch/end with a recorded hook input (``begin-a``...) or a text."""
        text = hook_input(name_or_text, **changes) if (HOOK_INPUT / f"{name_or_text}.txt")\
            .exists() else name_or_text
        return decoded(self.run(role, stdin=text))

    def prologue(self, *argv, **changes):
        return decoded(self.run("prologue", *argv, environ=self.environ(**changes)))

    def epilogue(self, *argv):
        return decoded(self.run("epilogue", *argv))

    def job_dir(self, job):
        return self.base / "jobs" / job

    def job(self, job):
        path = self.job_dir(job) / "jobfeatures"
        return {p.name: p.read_text() for p in path.iterdir()} if path.exists() else None

    def jobs(self):
        jobs = self.base / "jobs"
        return sorted(os.listdir(jobs)) if jobs.exists() else []

    def paths(self):
        """Every path under tmp_path, relative."""
        return sorted(str(p.relative_to(self.tmp_path)) for p in self.tmp_path.rglob("*"))


def decoded(result):
    result.stdout = result.stdout.decode("utf-8", "replace")
    result.stderr = result.stderr.decode("utf-8", "replace")
    return result


@pytest.fixture
def site(tmp_path, write_config):
    return Site(tmp_path, write_config)


def _started_now(job):
    return abs(int(job.pop("jobstart_secs")) - time.time()) < 60


def _without_start_and_scratch(job):
    job = dict(job)
    assert _started_now(job)
    assert int(job.pop("scratch_limit_bytes")) > 0
    return job


# --- begin ----------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "job_id", "expected"), [
    # wall x cpus derives the CPU time limit.
    ("a", "20.vm", {"allocated_cpu": "2", "wall_limit_secs": "600",
                    "max_rss_bytes": "314572800", "cpu_limit_secs": "1200"}),
    ("arr-1", "21[1].vm", {"allocated_cpu": "1", "wall_limit_secs": "300",
                           "max_rss_bytes": str(100 * MIB), "cpu_limit_secs": "300"}),
    ("arr-2", "21[2].vm", {"allocated_cpu": "1", "wall_limit_secs": "300",
                           "max_rss_bytes": str(100 * MIB), "cpu_limit_secs": "300"}),
    ("cput", "22.vm", {"allocated_cpu": "1", "cpu_limit_secs": "120"}),
    ("plain", "23.vm", {"allocated_cpu": "1"}),
    # two chunks on the one host: their sum
    ("multi", "24.vm", {"allocated_cpu": "2", "wall_limit_secs": "300",
                        "max_rss_bytes": str(100 * MIB), "cpu_limit_secs": "600"}),
    # one chunk on each of three moms of one host: each mom its own (vnodes is the job's)
    ("scatter-vm", "270.vm", {"allocated_cpu": "1", "max_rss_bytes": str(100 * MIB)}),
    ("scatter-vm-m1", "270.vm", {"allocated_cpu": "1", "max_rss_bytes": str(100 * MIB)}),
    ("scatter-vm-m2", "270.vm", {"allocated_cpu": "2", "max_rss_bytes": str(200 * MIB)}),
])
def test_begin_writes_the_recorded_jobs_values(site, name, job_id, expected):
    result = site.role("begin", f"begin-{name}")
    # the variables, for the adapter to put into the job's Variable_List
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == (f"MACHINEFEATURES={site.base}/machinefeatures\n"
                             f"JOBFEATURES={site.base}/jobs/{job_id}/jobfeatures\n")
    assert site.jobs() == [job_id]  # a bracketed id is its own directory name
    assert _without_start_and_scratch(site.job(job_id)) == {"job_id": job_id, **expected}
    assert (site.base / "machinefeatures/total_cpu").read_text() == str(os.cpu_count())
    if os.geteuid() == 0:  # the job's: its user's group may read it, nobody writes
        gid = pwd.getpwnam(USER).pw_gid
        for path in (site.job_dir(job_id), site.job_dir(job_id) / "jobfeatures"):
            assert (path.stat().st_uid, path.stat().st_gid) == (0, gid)


def test_a_root_begin_gives_the_directory_to_the_jobs_group(site):
    require(os.geteuid() == 0, "needs root to write a directory for another user")
    nobody = pwd.getpwnam("nobody")
    result = site.role("begin", hook_input("begin-a").replace(f"={USER}\n", "=nobody\n"))
    assert (result.returncode, result.stderr) == (0, "")
    for path in (site.job_dir("20.vm"), site.job_dir("20.vm") / "jobfeatures",
                 site.job_dir("20.vm") / "jobfeatures/job_id"):
        assert (path.stat().st_uid, path.stat().st_gid) == (0, nobody.pw_gid)


def test_begin_for_a_user_unknown_here_writes_no_job(site):
    text = (HOOK_INPUT / "begin-a.txt").read_text().replace("pbsuser1", "no-such-user-mjf")
    result = site.role("begin", text)
    assert result.returncode == 0
    assert "the job's user 'no-such-user-mjf' is unknown here" in result.stderr
    assert site.jobs() == []


def test_dry_run_begin_writes_nothing(site):
    result = decoded(site.run("--dry-run", "begin", stdin=hook_input("begin-a")))
    assert result.returncode == 0
    assert f"{site.base}/jobs/20.vm/jobfeatures/allocated_cpu = 2\n" in result.stdout
    assert not site.base.exists()


# --- launch ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["a", "arr-1", "multi"])
def test_launch_after_begin_prints_the_variables(site, name):
    assert site.role("begin", f"begin-{name}").returncode == 0
    [job] = site.jobs()
    result = site.role("launch", f"launch-{name}")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == (f"MACHINEFEATURES={site.base}/machinefeatures\n"
                             f"JOBFEATURES={site.base}/jobs/{job}/jobfeatures\n")


def test_launch_with_jobstatus_prints_it_too(site):
    site.configure(mjf="jobstatus = yes\n")
    assert site.role("begin", "begin-a").returncode == 0
    status = site.job_dir("20.vm") / "jobstatus"
    assert status.is_dir() and os.listdir(status) == []
    result = site.role("launch", "launch-a")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == (f"MACHINEFEATURES={site.base}/machinefeatures\n"
                             f"JOBFEATURES={site.base}/jobs/20.vm/jobfeatures\n"
                             f"JOBSTATUS={status}\n")
    site.configure()
    assert "JOBSTATUS" not in site.role("launch", "launch-a").stdout


def test_launch_without_a_directory_prints_nothing(site):
    result = site.role("launch", "launch-a")
    assert (result.returncode, result.stdout) == (0, "")
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and f"{site.base}/jobs/20.vm/jobfeatures does not exist" in lines[0]
    assert site.jobs() == []
    # on_error = fail: 1, which the adapter turns into a rejected launch.
    site.configure(mjf="on_error = fail\n")
    result = site.role("launch", "launch-a")
    assert (result.returncode, result.stdout) == (1, "")
    assert "does not exist" in result.stderr
    # What works is not failed.
    assert site.role("begin", "begin-a").returncode == 0
    assert site.role("launch", "launch-a").returncode == 0


# --- end ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["a", "arr-1", "arr-2", "cput", "plain", "multi"])
def test_end_removes_the_directory_and_is_idempotent(site, name):
    assert site.role("begin", f"begin-{name}").returncode == 0
    assert len(site.jobs()) == 1
    result = site.role("end", f"end-{name}")
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert site.jobs() == []
    again = site.role("end", f"end-{name}")
    assert (again.returncode, again.stdout, again.stderr) == (0, "", "")


def test_end_removes_only_its_own_array_task(site):
    assert site.role("begin", "begin-arr-1").returncode == 0
    assert site.role("begin", "begin-arr-2").returncode == 0
    assert site.role("end", "end-arr-1").returncode == 0
    assert site.jobs() == ["21[2].vm"]


def _record(records):
    [path] = records.glob("*/*.json")
    return json.loads(path.read_text())


def _keeping_records(site):
    """The site with [records] dir set (records are root's); the records directory."""
    require(os.geteuid() == 0, "needs root: records are root's")
    records = site.tmp_path / "records"
    site.configure(f"[records]\ndir = {records}\n")
    return records


def test_end_records_what_pbs_measured(site):
    records = _keeping_records(site)
    assert site.role("begin", "begin-a").returncode == 0
    started = int(site.job("20.vm")["jobstart_secs"])
    result = site.role("end", "end-a", resources_used__cput="00:00:03",
                       resources_used__mem="20480kb", resources_used__walltime="00:00:05")
    assert (result.returncode, result.stderr) == (0, "")
    assert site.jobs() == []
    record = _record(records)
    assert (record["backend"], record["job_id"], record["user"], record["queue"]) == \
        ("pbs", "20.vm", USER, "workq")
    assert record["requested"]["start_time"] == started
    assert record["requested"]["wall_limit_secs"] == 600
    assert record["requested"]["allocated_cpu"] == 2
    delivered = {name: value["value"] for name, value in record["delivered"].items()}
    assert abs(delivered.pop("end_time") - time.time()) < 60
    assert delivered == {"wall_secs": 5, "cpu_secs": 3, "peak_memory_bytes": 20 * MIB,
                         "consumption_rate": 0.3}
    assert record["delivered"]["cpu_secs"]["source"] == "PBS resources_used.cput=00:00:03"
    # idempotent: no second record
    assert site.role("end", "end-a").returncode == 0
    assert len(list(records.glob("*/*.json"))) == 1


@pytest.mark.parametrize(("mom", "index", "cpus", "memory"), [
    ("vm", 1, 1, 100 * MIB), ("vm-m1", 2, 1, 100 * MIB), ("vm-m2", 3, 2, 200 * MIB)])
def test_each_moms_record_names_its_node_and_its_share(site, mom, index, cpus, memory):
    """A job on three moms of one host (recorded): each mom's record says which node's
    share it is - its place in exec_vnode, of 3 - and its SSS record has the TaskGroup."""
    records = _keeping_records(site)
    name = "scatter-vm" if mom == "vm" else f"scatter-{mom}"
    assert site.role("begin", f"begin-{name}").returncode == 0
    result = site.role("end", f"end-{name}")
    assert (result.returncode, result.stderr) == (0, "")
    record = _record(records)
    assert (record["job_id"], record["node"], record["node_index"], record["node_count"],
            record["requested"]["allocated_cpu"], record["requested"]["max_rss_bytes"]) == \
        ("270.vm", mom, index, 3, cpus, memory)
    [xml] = records.glob("*/*.xml")
    assert f"<TaskGroup>\n    <NodeCount>3</NodeCount>\n    <Task>\n      <Node>{mom}</Node>" \
        in xml.read_text()
    if mom != "vm":  # a sister mom keeps no wall time (it handed over 00:00:00)
        assert record["delivered"]["wall_secs"]["source"] == "end_time - jobstart_secs"


def test_a_job_on_one_mom_is_its_only_node(site):
    records = _keeping_records(site)
    assert site.role("begin", "begin-a").returncode == 0
    assert site.role("end", "end-a").returncode == 0
    record = _record(records)
    assert (record["node_index"], record["node_count"]) == (1, 1)
    assert "TaskGroup" not in next(records.glob("*/*.xml")).read_text()


@pytest.mark.parametrize(("exec_vnode", "why"), [
    ("(vm-m1:ncpus=1)+(vm-m9:ncpus=1)", "names none of this host's vnodes (vm-m2)"),
    ("vm-m2:ncpus=1", "is not (vnode:resource=value)"),
])
def test_a_record_whose_mom_exec_vnode_does_not_place_says_so_in_one_line(site, exec_vnode,
                                                                           why):
    records = _keeping_records(site)
    assert site.role("begin", "begin-scatter-vm-m2").returncode == 0
    result = site.role("end", "end-scatter-vm-m2", exec_vnode=exec_vnode)
    assert result.returncode == 0 and site.jobs() == []
    [warning] = result.stderr.splitlines()
    assert "its record does not say which of the job's nodes this is" in warning
    assert why in warning
    record = _record(records)
    assert "node_index" not in record and record["node"] == "vm-m2"


def test_a_record_of_more_nodes_than_records_count_says_so_and_is_written(site):
    records = _keeping_records(site)
    assert site.role("begin", "begin-scatter-vm-m2").returncode == 0
    many = "(vm-m2:ncpus=2+" + "+".join(f"n{number}" for number in range(100000)) + ")"
    result = site.role("end", "end-scatter-vm-m2", exec_vnode=many)
    assert result.returncode == 0
    [warning] = result.stderr.splitlines()
    assert "its 100001 nodes are more than a record counts (100000)" in warning
    assert "node_index" not in _record(records)


def test_end_without_a_memory_sample_records_no_peak(site):
    records = _keeping_records(site)
    assert site.role("begin", "begin-a").returncode == 0
    # PBS had no sample yet: resources_used.mem=0kb is no peak.
    result = site.role("end", "end-a", resources_used__cput="00:00:01",
                       resources_used__walltime="00:00:02")
    assert (result.returncode, result.stderr) == (0, "")
    delivered = _record(records)["delivered"]
    assert "peak_memory_bytes" not in delivered
    assert (delivered["wall_secs"]["value"], delivered["cpu_secs"]["value"]) == (2, 1)


def test_end_with_unreadable_usage_warns_and_still_records(site):
    records = _keeping_records(site)
    assert site.role("begin", "begin-a").returncode == 0
    result = site.role("end", "end-a", resources_used__walltime="long",
                       resources_used__mem="lots")
    assert result.returncode == 0
    assert "the record has no wall_secs: resources_used.walltime" in result.stderr
    assert "the record has no peak_memory_bytes: resources_used.mem" in result.stderr
    assert site.jobs() == []
    delivered = _record(records)["delivered"]
    assert "peak_memory_bytes" not in delivered
    assert delivered["wall_secs"]["source"] != "PBS resources_used.walltime=long"


# --- bad input ------------------------------------------------------------------------

@pytest.mark.parametrize(("stdin", "message"), [
    (b"", "the job's id attribute '' is not a PBS job id"),
    (b"garbage\n", "the job's id attribute '' is not a PBS job id"),
    (bytes(range(256)) * 8, "the job's id attribute '' is not a PBS job id"),
    (hook_input("begin-a", id=None).encode(), "the job's id attribute '' is not a PBS job id"),
    (hook_input("begin-a", id="").encode(), "the job's id attribute '' is not a PBS job id"),
    (hook_input("begin-a", id="../x").encode(), "'../x' is not a PBS job id"),
    (hook_input("begin-a", id="4.vm/../x").encode(), "'4.vm/../x' is not a PBS job id"),
    (hook_input("begin-a", id="..").encode(), "'..' is not a PBS job id"),
    (hook_input("begin-a", id="4.vm x").encode(), "'4.vm x' is not a PBS job id"),
    (hook_input("begin-a", id="4." + "a" * 300).encode(), "is not a PBS job id"),
    (b"id=20.vm\n" + b"#" * (2 * MIB), "larger than 1048576 bytes"),
])
@pytest.mark.parametrize("role", ["begin", "launch", "end"])
def test_bad_stdin_is_one_error_line_and_nothing_written(site, stdin, message, role):
    result = decoded(site.run(role, stdin=stdin))
    assert (result.returncode, result.stdout) == (0, "")
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and ": error: " in lines[0] and message in lines[0], lines
    assert site.jobs() == []
    # Nothing anywhere else either (begin writes no machinefeatures for no job).
    assert site.paths() == ["mjf.conf", "qstat"]
    assert not (site.tmp_path / "x").exists() and not (site.base / "x").exists()


@pytest.mark.parametrize("separator", ["\r", "\v", "\x1c", "\x85", "\u2028"])
def test_a_value_holding_a_line_separator_injects_no_attribute(site, separator):
    # A job named `a<separator>id=24.vm` (the adapter replaces \n and \r; lines end at
    # \n only): the job is still 20.vm, its directory is not another job's.
    text = hook_input("begin-a", Job_Name=f"a{separator}id=24.vm")
    assert text.count("\n") == 12
    result = site.role("begin", text)
    assert result.returncode == 0
    assert site.jobs() == ["20.vm"]


def test_bad_stdin_with_on_error_fail_exits_1(site):
    site.configure(mjf="on_error = fail\n")
    for role in ("begin", "launch", "end"):
        result = site.role(role, "garbage\n")
        assert result.returncode == 1 and "is not a PBS job id" in result.stderr
    assert site.jobs() == []


def test_a_garbage_exec_vnode_is_a_warning_and_its_values_are_left_out(site):
    result = site.role("begin", "begin-a", exec_vnode="garbage")
    assert result.returncode == 0
    assert "exec_vnode 'garbage' is not (vnode:resource=value)" in result.stderr
    assert "allocated_cpu not written" in result.stderr
    # The job may span hosts: Resource_List's totals are not this host's.
    assert _without_start_and_scratch(site.job("20.vm")) == {
        "job_id": "20.vm", "wall_limit_secs": "600"}
    assert site.jobs() == ["20.vm"]


@pytest.mark.parametrize("exec_vnode", [
    "(elsewhere:ncpus=2:mem=307200kb)",       # not this host's
    "(vm:ncpus=two)",                          # not a number
    "(vm:ncpus=2:mem=lots)",                   # not a size
    "(vm:ncpus=2",                             # unbalanced
])
def test_an_unusable_exec_vnode_is_a_warning(site, exec_vnode):
    result = site.role("begin", "begin-a", exec_vnode=exec_vnode, vnodes="vm", node="vm")
    assert result.returncode == 0
    assert "not taken from exec_vnode" in result.stderr
    job = site.job("20.vm")
    assert job["job_id"] == "20.vm" and job["wall_limit_secs"] == "600"
    assert "max_rss_bytes" not in job


@pytest.mark.parametrize(("resource", "value", "missing"), [
    ("walltime", "soon", "wall_limit_secs"),
    ("walltime", "1:2:3:4", "wall_limit_secs"),
    ("walltime", "-5", "wall_limit_secs"),
])
def test_a_garbage_walltime_is_a_warning_and_left_out(site, resource, value, missing):
    result = site.role("begin", "begin-a", **{f"Resource_List__{resource}": value})
    assert result.returncode == 0
    assert f"{missing} not written: Resource_List.{resource}: {value!r} is not a PBS duration" \
        in result.stderr
    job = _without_start_and_scratch(site.job("20.vm"))
    # No wall limit, no CPU time limit derived from it.
    assert job == {"job_id": "20.vm", "allocated_cpu": "2", "max_rss_bytes": "314572800"}


def test_a_garbage_cput_is_a_warning(site):
    result = site.role("begin", "begin-cput", Resource_List__cput="00:xx:00")
    assert result.returncode == 0 and "cpu_limit_secs not written" in result.stderr
    assert "cpu_limit_secs" not in site.job("22.vm")


def test_a_broken_config_is_one_line_and_exit_0(site):
    site.conf.write_text("[mjf]\nthis is not a key value line\n")
    for role, name in (("begin", "begin-a"), ("launch", "launch-a"), ("end", "end-a")):
        result = site.role(role, name)
        assert (result.returncode, result.stdout) == (0, "")
        assert result.stderr.count("\n") == 1 and "is not `key = value`" in result.stderr
    for result in (site.prologue(*TORQUE_ARGV), site.epilogue(*TORQUE_ARGV[:3]),
                   decoded(site.run("profile", environ=site.environ(PBS_JOBID="20.vm")))):
        assert (result.returncode, result.stdout) == (0, "")
        assert result.stderr.count("\n") == 1 and "is not `key = value`" in result.stderr
    assert not site.base.exists()
    # on_error = fail in a config that cannot be read is not trusted either.
    site.conf.write_text("[mjf]\non_error = fail\nbogus\n")
    assert site.role("launch", "launch-a").returncode == 0


@pytest.mark.parametrize(("args", "message"), [
    ([], "unknown role ''"),
    (["bogus"], "unknown role 'bogus'"),
    (["begin", "extra"], "begin takes no arguments, got ['extra']"),
    (["profile", "x"], "profile takes no arguments"),
    (["prologue", "8.vm"], "a prologue gets at least job id, user and group"),
    (["epilogue"], "an epilogue gets at least job id, user and group"),
    (["--bogus", "begin"], "unknown option '--bogus'"),
])
def test_a_wrong_command_line_is_a_message_and_exit_0(site, args, message):
    result = decoded(site.run(*args, stdin=hook_input("begin-a")))
    assert result.returncode == 0 and message in result.stderr
    assert site.jobs() == [] and site.qstat_calls() == []


def test_help(site):
    result = decoded(site.run("--help"))
    assert result.returncode == 0 and result.stdout.startswith("usage: mjf-pbs ")
    assert result.stderr == ""


# --- prologue and epilogue: OpenPBS -------------------------------------------------

def test_openpbs_prologue_asks_qstat(site):
    argv = recorded_argv("prologue-argv-env-job8.txt")
    assert argv == ["8.vm", "pbsuser1", "pbsuser1"]  # OpenPBS: id, user and group only
    result = site.prologue("8.vm", USER, USER)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert site.qstat_calls() == [["-f", "8.vm"]]
    assert _without_start_and_scratch(site.job("8.vm")) == {
        "job_id": "8.vm", "allocated_cpu": "2", "wall_limit_secs": "600",
        "max_rss_bytes": str(300 * MIB), "cpu_limit_secs": "1200"}
    if os.geteuid() == 0:  # argv's user, not qstat's euser (pbsuser1 is unknown here)
        assert site.job_dir("8.vm").stat().st_gid == pwd.getpwnam(USER).pw_gid
    # the recorded epilogue removes it
    epilogue = site.epilogue("8.vm", USER, USER, *recorded_argv("epilogue-argv-env-job8.txt")[3:])
    assert (epilogue.returncode, epilogue.stdout, epilogue.stderr) == (0, "", "")
    assert site.jobs() == []
    assert site.qstat_calls() == [["-f", "8.vm"]]  # the epilogue asks nothing


def test_prologue_with_query_qstat_no_runs_no_qstat(site):
    site.configure("query_qstat = no\n")
    result = site.prologue("8.vm", USER, USER)
    assert (result.returncode, result.stdout) == (0, "")
    assert site.qstat_calls() == []
    job = _without_start_and_scratch(site.job("8.vm"))
    assert job == {"job_id": "8.vm"}
    assert "allocated_cpu not written" in result.stderr


@pytest.mark.parametrize(("body", "message"), [
    ("echo 'qstat: Unknown Job Id 8.vm' >&2; exit 153",
     "exited with status 153: qstat: Unknown Job Id 8.vm"),
    ("sleep 30", "did not finish within 0.5 s"),
    (None, "cannot run"),
    ("echo garbage", "printed no such job: 'garbage\\n'"),
    (f"cat <<'EOF'\n{QSTAT_F.replace('Job Id: 8.vm', 'Job Id: 9.vm')}EOF",
     "printed no such job"),
])
def test_qstat_trouble_is_a_warning_and_the_argv_is_written(site, body, message):
    if body is None:
        site.qstat.unlink()
    else:
        site.set_qstat(body)
    started = time.monotonic()
    result = site.prologue("8.vm", USER, USER)
    assert time.monotonic() - started < 5
    assert (result.returncode, result.stdout) == (0, "")
    assert message in result.stderr
    assert _without_start_and_scratch(site.job("8.vm")) == {"job_id": "8.vm"}


def test_qstat_without_a_config_path_comes_from_pbs_exec(site, tmp_path):
    pbs_exec = tmp_path / "pbs"
    (pbs_exec / "bin").mkdir(parents=True)
    shutil.move(site.qstat, pbs_exec / "bin/qstat")
    site.conf.write_text(f"[mjf]\nbase_dir = {site.base}\nlog = stderr\n"
                         f"[pbs]\npbs_exec = {pbs_exec}\n")
    result = site.prologue("8.vm", USER, USER)
    assert (result.returncode, result.stderr) == (0, "")
    assert site.qstat_calls() == [["-f", "8.vm"]]
    assert site.job("8.vm")["wall_limit_secs"] == "600"


# --- prologue and epilogue: Torque --------------------------------------------------

def test_torque_prologue_reads_its_argv_and_asks_nothing(site):
    result = site.prologue(*TORQUE_ARGV)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert site.qstat_calls() == []
    assert _without_start_and_scratch(site.job("123.torque.example.org")) == {
        "job_id": "123.torque.example.org", "allocated_cpu": "4", "wall_limit_secs": "7200",
        "max_rss_bytes": str(4 * GIB), "cpu_limit_secs": str(4 * 7200)}


@pytest.mark.parametrize("status", ["0", "-1", "271"])
def test_the_ten_word_epilogue_removes_the_job(site, status):
    assert site.prologue(*TORQUE_ARGV).returncode == 0
    argv = recorded_argv("epilogue-argv-env-job8.txt")
    assert len(argv) == 10
    argv = [TORQUE_ARGV[0], USER, USER, *argv[3:9], status]
    result = site.epilogue(*argv)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert site.jobs() == []
    assert site.epilogue(*argv).returncode == 0


def test_an_epilogue_records_the_used_resources_of_its_argv(site):
    records = _keeping_records(site)
    assert site.prologue("8.vm", USER, USER).returncode == 0
    argv = recorded_argv("epilogue-argv-env-job8.txt")
    result = site.epilogue("8.vm", USER, USER, *argv[3:])
    assert (result.returncode, result.stderr) == (0, "")
    record = _record(records)
    assert (record["job_id"], record["user"], record["queue"]) == ("8.vm", USER, "workq")
    delivered = record["delivered"]
    # walltime=00:00:01, cput=00:00:00, mem=0kb (no sample: no peak)
    assert (delivered["wall_secs"]["value"], delivered["cpu_secs"]["value"]) == (1, 0)
    assert "peak_memory_bytes" not in delivered


def test_argv_words_that_look_like_options_are_the_jobs(site):
    # A job named --dry-run: after the role every word is the job's, no option.
    argv = [*TORQUE_ARGV[:3], "--dry-run", *TORQUE_ARGV[4:]]
    result = site.prologue(*argv)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert site.jobs() == ["123.torque.example.org"]
    result = site.epilogue(*TORQUE_ARGV[:3], "--help", "1", "nodes=1", "walltime=00:00:01",
                           "batch", "null", "-1")
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert site.jobs() == []


@pytest.mark.parametrize("job_id", ["../x", "8.vm/../../x", "", "x.vm"])
def test_a_prologue_with_a_bad_job_id_writes_nothing(site, job_id):
    for result in (site.prologue(job_id, USER, USER), site.epilogue(job_id, USER, USER)):
        assert result.returncode == 0 and "is not a PBS job id" in result.stderr
    assert site.jobs() == [] and site.qstat_calls() == []


# --- profile --------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "job"), [("a", "20.vm"), ("arr-1", "21[1].vm")])
def test_profile_prints_export_lines_a_shell_evaluates(site, name, job):
    assert site.role("begin", f"begin-{name}").returncode == 0
    result = decoded(site.run("profile", environ=site.environ(PBS_JOBID=job)))
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == (f"export MACHINEFEATURES='{site.base}/machinefeatures'\n"
                             f"export JOBFEATURES='{site.base}/jobs/{job}/jobfeatures'\n")
    # A glob that would match: the quotes keep `21[1].vm` from becoming `211.vm`.
    (site.base / "jobs" / job.replace("[1]", "1") / "jobfeatures").mkdir(parents=True,
                                                                        exist_ok=True)
    shell = subprocess.run(["sh", "-c", 'eval "$1"; printf "%s\\n" "$MACHINEFEATURES" '
                            '"$JOBFEATURES"', "sh", result.stdout],
                           capture_output=True, text=True, cwd=site.base / "jobs")
    assert shell.stdout == f"{site.base}/machinefeatures\n{site.base}/jobs/{job}/jobfeatures\n"


def test_profile_with_jobstatus(site):
    site.configure(mjf="jobstatus = yes\n")
    assert site.role("begin", "begin-a").returncode == 0
    result = decoded(site.run("profile", environ=site.environ(PBS_JOBID="20.vm")))
    assert result.stdout.endswith(f"export JOBSTATUS='{site.base}/jobs/20.vm/jobstatus'\n")


@pytest.mark.parametrize("jobid", [None, "", "garbage", "../x", "20.vm;rm", "$(id)", "21[1"])
def test_profile_outside_a_job_prints_nothing(site, jobid):
    assert site.role("begin", "begin-a").returncode == 0
    environ = site.environ() if jobid is None else site.environ(PBS_JOBID=jobid)
    result = decoded(site.run("profile", environ=environ))
    assert (result.returncode, result.stdout) == (0, "")


def test_profile_of_a_job_without_a_directory_prints_nothing(site):
    result = decoded(site.run("profile", environ=site.environ(PBS_JOBID="20.vm")))
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


# --- contrib/pbs/mjf.sh ---------------------------------------------------------------

@pytest.fixture
def profile_d(site):
    """contrib/pbs/mjf.sh, its /usr/bin/mjf-pbs the installed command."""
    text = (CONTRIB / "mjf.sh").read_text()
    assert text.count("/usr/bin/mjf-pbs") == 2
    script = site.tmp_path / "mjf.sh"
    script.write_text(text.replace("/usr/bin/mjf-pbs", installed_command("mjf-pbs")))
    return script


def _source(site, script, **environ):
    return subprocess.run(["sh", "-c", '. "$1"; printf "%s|%s\\n" "$MACHINEFEATURES" '
                           '"$JOBFEATURES"', "sh", str(script)],
                          capture_output=True, text=True, timeout=30,
                          env={"PATH": "/usr/bin:/bin", "MJF_CONFIG": str(site.conf),
                               **environ})


def test_mjf_sh_sets_the_variables_in_a_job(site, profile_d):
    assert site.role("begin", "begin-arr-1").returncode == 0
    result = _source(site, profile_d, PBS_JOBID="21[1].vm")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == f"{site.base}/machinefeatures|{site.base}/jobs/21[1].vm/jobfeatures\n"


@pytest.mark.parametrize("environ", [{}, {"PBS_JOBID": ""}, {"PBS_JOBID": "garbage"},
                                     {"PBS_JOBID": "99.vm"}])
def test_mjf_sh_outside_a_job_sets_nothing(site, profile_d, environ):
    assert site.role("begin", "begin-a").returncode == 0
    result = _source(site, profile_d, **environ)
    assert (result.returncode, result.stdout, result.stderr) == (0, "|\n", "")


def test_mjf_sh_leaves_variables_the_hook_set(site, profile_d):
    assert site.role("begin", "begin-a").returncode == 0
    result = _source(site, profile_d, PBS_JOBID="20.vm", JOBFEATURES="/set/by/hook")
    assert (result.returncode, result.stdout) == (0, "|/set/by/hook\n")


def test_mjf_sh_without_mjf_pbs_does_nothing(site):
    assert site.role("begin", "begin-a").returncode == 0
    script = site.tmp_path / "mjf-absent.sh"
    script.write_text((CONTRIB / "mjf.sh").read_text().replace(
        "/usr/bin/mjf-pbs", str(site.tmp_path / "absent" / "mjf-pbs")))
    result = _source(site, script, PBS_JOBID="20.vm")
    assert (result.returncode, result.stdout, result.stderr) == (0, "|\n", "")


# --- contrib/pbs/install-hook ---------------------------------------------------------

def _install_hook(*args, pbs_exec):
    environ = {"PATH": "/usr/bin:/bin", "PBS_EXEC": str(pbs_exec)}
    return subprocess.run([str(CONTRIB / "install-hook"), *args], capture_output=True,
                          text=True, timeout=30, env=environ)


def _fake_qmgr(tmp_path, list_status):
    """PBS_EXEC with a bin/qmgr logging its commands (and keeping the imported file)."""
    pbs_exec = tmp_path / "pbs"
    write_script(pbs_exec / "bin/qmgr", f"""[ "$1" = -c ] || exit 9
printf '%s\\n' "$2" >> {tmp_path}/qmgr.log
case $2 in
"list hook "*) exit {list_status} ;;
"import hook "*) set -- $2; cp "$6" {tmp_path}/imported.py ;;
esac""")
    return pbs_exec


@pytest.mark.parametrize(("list_status", "create"), [(1, True), (0, False)])
def test_install_hook_creates_and_configures_the_hook(tmp_path, list_status, create):
    bindir = str(Path(installed_command("mjf-pbs")).parent)
    pbs_exec = _fake_qmgr(tmp_path, list_status)
    result = _install_hook(bindir, pbs_exec=pbs_exec)
    assert result.returncode == 0, result.stderr
    assert f"hook mjf installed: {bindir}/mjf-pbs" in result.stdout
    log = (tmp_path / "qmgr.log").read_text().splitlines()
    imported = [line for line in log if line.startswith("import hook")]
    assert len(imported) == 1
    assert imported[0].startswith("import hook mjf application/x-python default /")
    assert log == ["list hook mjf", *(["create hook mjf"] if create else []),
                   "set hook mjf event = 'execjob_begin,execjob_launch,execjob_end'",
                   "set hook mjf order = 200", "set hook mjf alarm = 30",
                   "set hook mjf fail_action = none", imported[0],
                   "set hook mjf enabled = true"]
    text = (tmp_path / "imported.py").read_text()
    assert f'MJF_PBS = "{bindir}/mjf-pbs"\n' in text and "@MJF_" not in text
    compile(text, "mjf_hook.py", "exec")
    # Where the installed package lives, for this Python: the hook runs its code there.
    site = text.split('\nMJF_SITE = "', 1)[1].split('"', 1)[0]
    assert (Path(site) / "mjf_hooks" / "hooks" / "pbs.py").is_file()
    assert text == (CONTRIB / "mjf_hook.py").read_text().replace(
        "@MJF_PBS@", f"{bindir}/mjf-pbs").replace("@MJF_SITE@", site).replace(
        "@MJF_PYTHON@", f"{sys.version_info[0]}.{sys.version_info[1]}")
    # The temporary hook file is gone.
    assert not os.path.exists(imported[0].split()[-1])


def test_install_hook_with_another_name(tmp_path):
    bindir = str(Path(installed_command("mjf-pbs")).parent)
    pbs_exec = _fake_qmgr(tmp_path, 1)
    result = _install_hook(bindir + "/", "mjf_test", pbs_exec=pbs_exec)
    assert result.returncode == 0, result.stderr
    log = (tmp_path / "qmgr.log").read_text()
    assert "create hook mjf_test\n" in log and "set hook mjf_test enabled = true\n" in log
    assert f'MJF_PBS = "{bindir}/mjf-pbs"' in (tmp_path / "imported.py").read_text()


def test_install_hook_usage_errors(tmp_path):
    bindir = str(Path(installed_command("mjf-pbs")).parent)
    pbs_exec = _fake_qmgr(tmp_path, 1)
    empty = tmp_path / "empty"
    empty.mkdir()
    not_executable = tmp_path / "noexec"
    not_executable.mkdir()
    (not_executable / "mjf-pbs").write_text("#!/bin/sh\n")
    for args, message in (([], "usage:"), ([bindir, "a", "b"], "usage:"),
                          (["bin"], "BINDIR must be an absolute path: bin"),
                          ([str(empty)], f"{empty}/mjf-pbs is not an executable file"),
                          ([str(not_executable)], "is not an executable file"),
                          ([bindir, "bad-name"], "bad hook name: bad-name"),
                          ([bindir, "a b"], "bad hook name: a b")):
        result = _install_hook(*args, pbs_exec=pbs_exec)
        assert result.returncode == 2 and message in result.stderr, (args, result.stderr)
    assert not (tmp_path / "qmgr.log").exists()


def test_install_hook_without_qmgr_or_with_a_failing_one(tmp_path):
    bindir = str(Path(installed_command("mjf-pbs")).parent)
    result = _install_hook(bindir, pbs_exec=tmp_path / "nowhere")
    assert result.returncode == 1 and "qmgr not found (set PBS_EXEC)" in result.stderr
    pbs_exec = tmp_path / "pbs"
    write_script(pbs_exec / "bin/qmgr", "echo 'qmgr: cannot connect' >&2\nexit 3")
    result = _install_hook(bindir, pbs_exec=pbs_exec)
    assert result.returncode == 1 and "installed" not in result.stdout


# --- contrib/pbs/mjf_hook.py outside PBS ----------------------------------------------

# A stand-in for PBS's embedded `pbs` module: the event is described by $FAKE_PBS_EVENT
# (JSON), and accept()/reject() write what happened to $FAKE_PBS_OUT.
FAKE_PBS = '''
import json, os, signal, sys

EXECJOB_BEGIN = 64
EXECJOB_PROLOGUE = 128
EXECJOB_EPILOGUE = 256
EXECJOB_END = 512
EXECJOB_LAUNCH = 2048
LOG_WARNING = 4

_spec = json.load(open(os.environ["FAKE_PBS_EVENT"]))
_messages = []
_environ = dict(os.environ)  # the hook process's own, before the hook runs
# As a mom starts its hooks: with the signals it blocks in its critical sections blocked.
MOM_BLOCKED = {signal.SIGHUP, signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGUSR1,
               signal.SIGUSR2, signal.SIGPIPE}
signal.pthread_sigmask(signal.SIG_BLOCK, MOM_BLOCKED)
if _spec.get("usr1_handler"):  # as if PBS had claimed SIGUSR1
    signal.signal(signal.SIGUSR1, lambda signum, frame: None)


class _Resources:
    def __init__(self, values, broken=False):
        self._values = {name: _Value(value) for name, value in values.items()}
        self._broken = broken

    def keys(self):
        if self._broken:
            raise RuntimeError("Resource_List cannot be read")
        return list(self._values)

    def __getitem__(self, name):
        return self._values[name]


class _Value:  # pbs.duration, pbs.size...: what str() gives is what PBS shows
    def __init__(self, text):
        self._text = text

    def __str__(self):
        return self._text


class _Queue:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return "queue object " + self.name


class _Job:
    pass


class _Event:
    def __init__(self):
        self.type = globals()[_spec["type"]]
        self.env = {"PBS_JOBID": _spec["attributes"].get("id", ""), **_spec.get("env", {})}
        self.vnode_list = {name: object() for name in _spec["vnodes"]}
        job = _Job()
        resources = {"Resource_List": {}, "resources_used": {}}
        for name, value in _spec["attributes"].items():
            prefix, dot, resource = name.partition(".")
            if dot and prefix in resources:
                resources[prefix][resource] = value
            elif name == "queue":
                job.queue = _Queue(value)
            elif name not in ("vnodes", "node"):
                setattr(job, name, value)
        job.Account_Name = None  # an attribute PBS has, unset
        job.Variable_List = {}  # the job's environment to be
        for prefix, values in resources.items():
            setattr(job, prefix, _Resources(values, prefix in _spec.get("broken", [])))
        self.job = job

    def accept(self):
        _finish("accept", None)
        raise SystemExit(0)

    def reject(self, message=""):
        _finish("reject", message)
        raise SystemExit(1)


def _finish(outcome, message):
    with open(os.environ["FAKE_PBS_OUT"], "w") as out:
        json.dump({"outcome": outcome, "message": message, "env": _event.env,
                   "variable_list": _event.job.Variable_List, "log": _messages,
                   # what the hook process itself is left with
                   "process_env_kept": dict(os.environ) == _environ, "path": sys.path,
                   "usr1_default": signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL,
                   "mask_kept": signal.pthread_sigmask(signal.SIG_BLOCK, []) == MOM_BLOCKED},
                  out)


def logmsg(level, text):
    _messages.append([level, text])


def get_local_nodename():
    return _spec["node"]


_event = _Event()


def event():
    return _event
'''


class Adapter:
    """contrib/pbs/mjf_hook.py in tmp_path, beside a fake `pbs` module, its MJF_PBS a
    fake mjf-pbs script that keeps its argv, stdin and environment."""

    def __init__(self, tmp_path, timeout=None, site="", python="", command_env=""):
        """``site`` and ``python``: what install-hook recorded (none: mjf-pbs is always
        started); ``command_env``: more of the command's environment (Python source)."""
        self.tmp_path = tmp_path
        self.command = tmp_path / "fake-mjf-pbs"
        self.seen = tmp_path / "seen"
        self.seen.mkdir()
        source = (CONTRIB / "mjf_hook.py").read_text()
        assert source.count('"@MJF_PBS@"') == 1 and source.count("TIMEOUT_SECS = 15\n") == 1
        assert source.count('"@MJF_SITE@"') == 1 and source.count('"@MJF_PYTHON@"') == 1
        assert source.count('"LC_ALL": "C"}') == 1
        source = source.replace("@MJF_PBS@", str(self.command)).replace(
            "@MJF_SITE@", str(site)).replace("@MJF_PYTHON@", python).replace(
            '"LC_ALL": "C"}', '"LC_ALL": "C"' + command_env + "}")
        if timeout is not None:
            source = source.replace("TIMEOUT_SECS = 15\n", f"TIMEOUT_SECS = {timeout}\n")
        (tmp_path / "mjf_hook.py").write_text(source)
        (tmp_path / "pbs.py").write_text(FAKE_PBS)
        self.set_command("exit 0")

    def set_command(self, body):
        write_script(self.command, f'echo "$@" > {self.seen}/argv\n'
                                   f"cat > {self.seen}/stdin\nenv > {self.seen}/env\n{body}")

    def run(self, event_type, name, broken=(), inputs=HOOK_INPUT, env=None, **spec):
        """The hook for an event of a recorded job (its hook input in ``inputs``): (exit
        status, what the fake pbs saw: outcome, message, env, log)."""
        attributes = dict(line.split("=", 1) for line in
                          (inputs / f"{name}.txt").read_text().splitlines())
        spec = {"type": event_type, "attributes": attributes,
                "vnodes": attributes["vnodes"].split(","), "node": attributes["node"],
                "broken": list(broken), "env": env or {}, **spec}
        (self.tmp_path / "event.json").write_text(json.dumps(spec))
        out = self.tmp_path / "out.json"
        if out.exists():
            out.unlink()
        result = subprocess.run([sys.executable, str(self.tmp_path / "mjf_hook.py")],
                                capture_output=True, text=True, timeout=30,
                                env={"FAKE_PBS_EVENT": str(self.tmp_path / "event.json"),
                                     "FAKE_PBS_OUT": str(out), "PATH": "/usr/bin:/bin"})
        assert result.stderr == "", result.stderr  # no traceback: accept() or reject()
        return result.returncode, json.loads(out.read_text())

    def stdin(self):
        return (self.seen / "stdin").read_text()

    def argv(self):
        return (self.seen / "argv").read_text().split()


@pytest.fixture
def adapter(tmp_path):
    return Adapter(tmp_path)


@pytest.mark.parametrize("name", ["a", "arr-1", "cput", "plain", "multi"])
@pytest.mark.parametrize(("event_type", "role"), [("EXECJOB_BEGIN", "begin"),
                                                  ("EXECJOB_LAUNCH", "launch"),
                                                  ("EXECJOB_END", "end")])
def test_the_adapter_hands_the_recorded_attribute_lines(adapter, event_type, role, name):
    status, seen = adapter.run(event_type, f"{role}-{name}")
    assert (status, seen["outcome"], seen["log"]) == (0, "accept", [])
    assert adapter.argv() == [role]
    # exactly what the real hook handed the recording mjf-pbs on the real complex
    assert adapter.stdin() == (HOOK_INPUT / f"{role}-{name}.txt").read_text()
    # the command runs in a clean environment
    env = dict(line.split("=", 1) for line in (adapter.seen / "env").read_text().splitlines())
    assert env["PATH"] == "/usr/bin:/bin" and env["LC_ALL"] == "C"
    assert "FAKE_PBS_EVENT" not in env


@pytest.mark.parametrize("event_type", ["EXECJOB_PROLOGUE", "EXECJOB_EPILOGUE"])
def test_the_adapter_ignores_other_events(adapter, event_type):
    status, seen = adapter.run(event_type, "begin-a")
    assert (status, seen["outcome"], seen["log"]) == (0, "accept", [])
    assert not (adapter.seen / "argv").exists()


def test_the_adapter_sets_only_the_mjf_variables_in_a_launch(adapter):
    adapter.set_command("printf '%s\\n' MACHINEFEATURES=/b/machinefeatures "
                        "JOBFEATURES=/b/jobs/20.vm/jobfeatures JOBSTATUS=/b/jobs/20.vm/jobstatus "
                        "LD_PRELOAD=/x.so PATH=/evil 'JOBFEATURES_X=y' garbage "
                        "'echo hello' =1")
    status, seen = adapter.run("EXECJOB_LAUNCH", "launch-a")
    assert (status, seen["outcome"]) == (0, "accept")
    assert seen["env"] == {"PBS_JOBID": "20.vm", "MACHINEFEATURES": "/b/machinefeatures",
                           "JOBFEATURES": "/b/jobs/20.vm/jobfeatures",
                           "JOBSTATUS": "/b/jobs/20.vm/jobstatus"}


def test_the_adapter_logs_the_commands_stderr(adapter):
    adapter.set_command("echo 'mjf[1]: mjf-pbs begin job 20.vm: warning: w' >&2\n"
                        "i=0; while [ $i -lt 30 ]; do echo line $i >&2; i=$((i+1)); done")
    status, seen = adapter.run("EXECJOB_BEGIN", "begin-a")
    assert (status, seen["outcome"]) == (0, "accept")
    assert seen["log"][0] == [4, "mjf: mjf[1]: mjf-pbs begin job 20.vm: warning: w"]
    assert len(seen["log"]) == 20  # bounded


@pytest.mark.parametrize(("event_type", "role", "outcome"), [
    ("EXECJOB_BEGIN", "begin", "accept"),    # a rejected begin would requeue the job
    ("EXECJOB_LAUNCH", "launch", "reject"),  # on_error = fail: the job does not run
    ("EXECJOB_END", "end", "accept"),
])
def test_status_1_rejects_only_a_launch(adapter, event_type, role, outcome):
    adapter.set_command("echo JOBFEATURES=/b/j; exit 1")
    status, seen = adapter.run(event_type, f"{role}-a")
    assert (status, seen["outcome"]) == (0 if outcome == "accept" else 1, outcome)
    if outcome == "reject":
        assert "on_error = fail" in seen["message"]
    assert "JOBFEATURES" not in seen["env"]


@pytest.mark.parametrize("exit_status", [2, 100, 127])
def test_other_failures_of_a_launch_are_accepted_without_variables(adapter, exit_status):
    adapter.set_command(f"echo JOBFEATURES=/b/j; exit {exit_status}")
    status, seen = adapter.run("EXECJOB_LAUNCH", "launch-a")
    assert (status, seen["outcome"]) == (0, "accept")
    assert seen["env"] == {"PBS_JOBID": "20.vm"}


@pytest.mark.parametrize("event_type", ["EXECJOB_BEGIN", "EXECJOB_LAUNCH", "EXECJOB_END"])
def test_a_missing_command_is_one_log_line_and_accepted(adapter, event_type):
    adapter.command.unlink()
    status, seen = adapter.run(event_type, "launch-a")
    assert (status, seen["outcome"]) == (0, "accept")
    [[level, message]] = seen["log"]  # the forked child's line, before it exits 127
    assert level == 4 and message.startswith(f"mjf: cannot run {adapter.command}: ")
    assert "No such file or directory" in message


@pytest.mark.parametrize("event_type", ["EXECJOB_BEGIN", "EXECJOB_LAUNCH"])
def test_a_hanging_command_is_killed_and_the_event_accepted(tmp_path, event_type):
    adapter = Adapter(tmp_path, timeout=1)
    adapter.set_command(f"echo JOBFEATURES=/b/j\nsleep 100 &\necho $! > {tmp_path}/sleep.pid\n"
                        "wait")
    started = time.monotonic()
    status, seen = adapter.run(event_type, "launch-a")
    elapsed = time.monotonic() - started
    assert 1 <= elapsed < 5
    assert (status, seen["outcome"]) == (0, "accept")
    assert seen["env"] == {"PBS_JOBID": "20.vm"}
    [[_, message]] = seen["log"]
    assert message == f"mjf: RuntimeError: {adapter.command} " \
        f"{'begin' if event_type == 'EXECJOB_BEGIN' else 'launch'} did not finish in 1 s: killed"
    # The whole session went: the command's own children too.
    pid = int((tmp_path / "sleep.pid").read_text())
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.02)
    assert not _alive(pid)


def _alive(pid):
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


@pytest.mark.parametrize("broken", ["Resource_List", "resources_used"])
def test_an_exception_gathering_attributes_is_logged_and_accepted(adapter, broken):
    status, seen = adapter.run("EXECJOB_LAUNCH", "launch-a", broken=[broken])
    assert (status, seen["outcome"]) == (0, "accept")
    assert seen["log"] == [[4, "mjf: RuntimeError: Resource_List cannot be read"]]
    assert not (adapter.seen / "argv").exists()  # the command never ran


def test_begin_puts_the_variables_into_the_jobs_variable_list(adapter):
    adapter.set_command("printf '%s\\n' MACHINEFEATURES=/b/machinefeatures "
                        "JOBFEATURES=/b/jobs/20.vm/jobfeatures LD_PRELOAD=/evil.so")
    status, seen = adapter.run("EXECJOB_BEGIN", "begin-a")
    assert (status, seen["outcome"]) == (0, "accept")
    assert seen["variable_list"] == {"MACHINEFEATURES": "/b/machinefeatures",
                                     "JOBFEATURES": "/b/jobs/20.vm/jobfeatures"}


def test_a_launch_after_begin_set_the_variables_runs_nothing(adapter, tmp_path):
    job_dir = tmp_path / "b" / "jobs" / "20.vm" / "jobfeatures"
    job_dir.mkdir(parents=True)
    env = {"MACHINEFEATURES": str(tmp_path / "b" / "machinefeatures"),
           "JOBFEATURES": str(job_dir)}
    status, seen = adapter.run("EXECJOB_LAUNCH", "launch-a", env=env)
    assert (status, seen["outcome"], seen["log"]) == (0, "accept", [])
    assert not (adapter.seen / "argv").exists()  # mjf-pbs not started
    assert seen["env"]["JOBFEATURES"] == str(job_dir)


@pytest.mark.parametrize("stale", ["/b/jobs/19.vm/jobfeatures", "/b/jobs/20.vm/jobfeatures"])
def test_variables_naming_another_or_no_directory_are_asked_again(adapter, stale):
    """A job submitted with qsub -V from inside another job brings that job's values; a
    begin that failed set none: mjf-pbs launch says what the job gets."""
    adapter.set_command("exit 0")
    env = {"MACHINEFEATURES": "/b/machinefeatures", "JOBFEATURES": stale}
    status, seen = adapter.run("EXECJOB_LAUNCH", "launch-a", env=env)
    assert (status, seen["outcome"]) == (0, "accept")
    assert adapter.argv() == ["launch"]


# --- the adapter running mjf-pbs's code in its own interpreter ------------------------

PYTHON = f"{sys.version_info[0]}.{sys.version_info[1]}"
COMMAND_ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}
# A stand-in for mjf_hooks.hooks.pbs, beside the package's own pbs_embedded: its run()
# keeps what it was called with and how it ran, then does what the action file (Python
# source, setting `result`) says.
FAKE_RUN = '''
import json, os, sys

def run(argv, stdin):
    with open({seen!r}, "w") as out:
        json.dump({{"argv": argv, "stdin": stdin, "environ": dict(os.environ),
                   "path": sys.path[0]}}, out)
    namespace = {{}}
    with open({action!r}) as action:
        exec(action.read(), namespace)
    return namespace["result"]
'''


class InProcess(Adapter):
    """The adapter with a recorded site holding a stand-in mjf_hooks (``site``)."""

    def __init__(self, tmp_path, timeout=None, python=PYTHON):
        self.site = tmp_path / "site"
        self.in_process = tmp_path / "in-process.json"
        self.action = tmp_path / "action.py"
        package = self.site / "mjf_hooks"
        (package / "hooks").mkdir(parents=True)
        (package / "hooks" / "__init__.py").write_text("")
        (package / "hooks" / "pbs.py").write_text(FAKE_RUN.format(
            seen=str(self.in_process), action=str(self.action)))
        # the package's own, pbs_embedded bounding the run
        installed = Path(installed_command("mjf-pbs")).parents[1] / "lib" / \
            f"python{PYTHON}" / "site-packages" / "mjf_hooks"
        shutil.copy(installed / "__init__.py", package)
        shutil.copy(installed / "hooks" / "pbs_embedded.py", package / "hooks")
        self.act("result = (0, '', '')")
        super().__init__(tmp_path, timeout=timeout, site=self.site, python=python)

    def act(self, source):
        self.action.write_text(source)

    def ran_here(self):
        """What the stand-in run() saw; None where mjf-pbs was started instead."""
        if not self.in_process.exists():
            assert (self.seen / "argv").exists()
            return None
        assert not (self.seen / "argv").exists()
        return json.loads(self.in_process.read_text())


def assert_hook_left_as_it_was(seen, site):
    """The hook process after the in-process run: its environment and import path its
    own again, STOP_SIGNAL back to its default action, its signal mask the mom's."""
    assert seen["process_env_kept"]
    assert str(site) not in seen["path"]
    assert seen["usr1_default"] and seen["mask_kept"]


@pytest.fixture
def in_process(tmp_path):
    return InProcess(tmp_path)


@pytest.mark.parametrize(("event_type", "role"), [("EXECJOB_BEGIN", "begin"),
                                                  ("EXECJOB_LAUNCH", "launch"),
                                                  ("EXECJOB_END", "end")])
def test_in_process_the_commands_code_runs_as_the_command_would(in_process, event_type, role):
    status, seen = in_process.run(event_type, f"{role}-a")
    assert (status, seen["outcome"], seen["log"]) == (0, "accept", [])
    ran = in_process.ran_here()
    assert ran["argv"] == [role]
    assert ran["stdin"] == (HOOK_INPUT / f"{role}-a.txt").read_text()
    # the command's environment and its own package first
    assert ran["environ"] == COMMAND_ENV
    assert ran["path"] == str(in_process.site)
    assert_hook_left_as_it_was(seen, in_process.site)


def test_in_process_output_is_read_as_the_commands(in_process):
    in_process.act("result = (0, 'MACHINEFEATURES=/b/machinefeatures\\n"
                   "JOBFEATURES=/b/jobs/20.vm/jobfeatures\\nLD_PRELOAD=/x.so\\n', "
                   "'mjf[1]: mjf-pbs launch job 20.vm: warning: w\\n')")
    status, seen = in_process.run("EXECJOB_LAUNCH", "launch-a")
    assert (status, seen["outcome"]) == (0, "accept")
    assert seen["env"] == {"PBS_JOBID": "20.vm", "MACHINEFEATURES": "/b/machinefeatures",
                           "JOBFEATURES": "/b/jobs/20.vm/jobfeatures"}
    assert seen["log"] == [[4, "mjf: mjf[1]: mjf-pbs launch job 20.vm: warning: w"]]
    status, seen = in_process.run("EXECJOB_BEGIN", "begin-a")
    assert seen["variable_list"] == {"MACHINEFEATURES": "/b/machinefeatures",
                                     "JOBFEATURES": "/b/jobs/20.vm/jobfeatures"}


@pytest.mark.parametrize(("event_type", "role", "outcome"), [
    ("EXECJOB_BEGIN", "begin", "accept"),
    ("EXECJOB_LAUNCH", "launch", "reject"),
    ("EXECJOB_END", "end", "accept"),
])
def test_in_process_status_1_rejects_only_a_launch(in_process, event_type, role, outcome):
    in_process.act("result = (1, 'JOBFEATURES=/b/j\\n', '')")
    status, seen = in_process.run(event_type, f"{role}-a")
    assert (status, seen["outcome"]) == (0 if outcome == "accept" else 1, outcome)
    assert "JOBFEATURES" not in seen["env"]


@pytest.mark.parametrize(("event_type", "role"), [("EXECJOB_BEGIN", "begin"),
                                                  ("EXECJOB_LAUNCH", "launch"),
                                                  ("EXECJOB_END", "end")])
def test_an_exception_in_process_is_one_log_line_and_accepted(in_process, event_type, role):
    in_process.act("raise RuntimeError('boom')")
    status, seen = in_process.run(event_type, "launch-a")
    assert (status, seen["outcome"]) == (0, "accept")
    assert seen["env"] == {"PBS_JOBID": "20.vm"} and seen["variable_list"] == {}
    assert seen["log"] == [[4, "mjf: RuntimeError: boom"]]
    assert_hook_left_as_it_was(seen, in_process.site)


@pytest.mark.parametrize(("event_type", "role"), [("EXECJOB_BEGIN", "begin"),
                                                  ("EXECJOB_LAUNCH", "launch")])
@pytest.mark.parametrize("hang", ["sleep", "fifo", "loop", "caught"])
def test_a_hung_step_in_process_is_stopped_and_the_event_accepted(tmp_path, event_type, role,
                                                                  hang):
    """Stopped in a sleep, in a system call that waits for ever (opening a FIFO nobody
    writes), in a loop, and where mjf-pbs's fail-safe frame catches every Exception."""
    in_process = InProcess(tmp_path, timeout=1)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    in_process.act({"sleep": "import time\ntime.sleep(100)",
                    "fifo": f"open({str(fifo)!r})",
                    "loop": "while True:\n    pass",
                    "caught": "import time\nwhile True:\n    try:\n        time.sleep(100)\n"
                              "    except Exception:\n        pass"}[hang])
    status, seen = in_process.run(event_type, "launch-a")
    assert (status, seen["outcome"]) == (0, "accept")
    assert seen["env"] == {"PBS_JOBID": "20.vm"} and seen["variable_list"] == {}
    assert seen["log"] == [
        [4, f"mjf: RuntimeError: mjf-pbs {role} (in pbs_python) did not finish in 1 s: stopped"]]
    assert_hook_left_as_it_was(seen, in_process.site)


def test_pbs_alarm_still_reaches_the_hook_during_an_in_process_run(tmp_path):
    """PBS's hook alarm (alarm(2), a handler that interrupts the hook) goes to the hook's
    thread, not to the watchdog, even in a system call waiting for ever."""
    in_process = InProcess(tmp_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    in_process.act(f"open({str(fifo)!r})")
    hook = tmp_path / "mjf_hook.py"
    hook.write_text("import signal\n\n\ndef alarmed(signum, frame):\n"
                    "    raise KeyboardInterrupt('the hook alarm')\n\n\n"
                    "signal.signal(signal.SIGALRM, alarmed)\nsignal.alarm(1)\n"
                    + hook.read_text())
    attributes = dict(line.split("=", 1) for line in
                      (HOOK_INPUT / "begin-a.txt").read_text().splitlines())
    (tmp_path / "event.json").write_text(json.dumps({
        "type": "EXECJOB_BEGIN", "attributes": attributes,
        "vnodes": attributes["vnodes"].split(","), "node": attributes["node"]}))
    result = subprocess.run([sys.executable, str(hook)], capture_output=True, text=True,
                            timeout=30, env={"FAKE_PBS_EVENT": str(tmp_path / "event.json"),
                                             "FAKE_PBS_OUT": str(tmp_path / "out.json"),
                                             "PATH": "/usr/bin:/bin"})
    assert result.returncode != 0
    assert "KeyboardInterrupt: the hook alarm" in result.stderr


def _writable_by_others(in_process):
    in_process.site.chmod(0o777)


def _package_dir_writable(in_process):
    (in_process.site / "mjf_hooks" / "hooks").chmod(0o775)


def _through_a_symlink(in_process):
    in_process.site.rename(in_process.tmp_path / "real-site")
    in_process.site.symlink_to(in_process.tmp_path / "real-site")


def _in_a_directory_others_write(in_process):
    in_process.tmp_path.chmod(0o777)


def _not_importable(in_process):
    shutil.rmtree(in_process.site / "mjf_hooks")


def _failing_import(in_process):
    (in_process.site / "mjf_hooks" / "__init__.py").write_text("raise OSError('broken')\n")


def _another_users(in_process):
    require(os.geteuid() == 0, "root: a directory of another user's")
    os.chown(in_process.site / "mjf_hooks", 65534, 65534)


def _signal_taken(in_process):
    in_process.spec["usr1_handler"] = True


@pytest.mark.parametrize(("python", "spoil"), [
    ("3.0", None),  # another Python than install-hook found
    ("", None),     # install-hook found none: the command is a wrapper
    (PYTHON, _writable_by_others),
    (PYTHON, _package_dir_writable),
    (PYTHON, _through_a_symlink),
    (PYTHON, _in_a_directory_others_write),
    (PYTHON, _not_importable),
    (PYTHON, _failing_import),
    (PYTHON, _another_users),
    (PYTHON, _signal_taken),
])
def test_the_adapter_starts_mjf_pbs_where_it_cannot_run_it_in_process(tmp_path, python,
                                                                       spoil):
    in_process = InProcess(tmp_path, python=python)
    in_process.spec = {}
    if spoil:
        spoil(in_process)
    try:
        status, seen = in_process.run("EXECJOB_BEGIN", "begin-a", **in_process.spec)
    finally:
        tmp_path.chmod(0o700)
    assert (status, seen["outcome"], seen["log"]) == (0, "accept", [])
    assert in_process.ran_here() is None  # started, exactly as without a recorded site
    assert in_process.argv() == ["begin"]
    assert in_process.stdin() == (HOOK_INPUT / "begin-a.txt").read_text()
    env = dict(line.split("=", 1) for line in (in_process.seen / "env").read_text().splitlines())
    assert env["PATH"] == "/usr/bin:/bin" and env["LC_ALL"] == "C"


def test_a_relative_site_is_not_imported(tmp_path):
    adapter = Adapter(tmp_path, site="site", python=PYTHON)
    (tmp_path / "site").mkdir()
    status, seen = adapter.run("EXECJOB_BEGIN", "begin-a")
    assert (status, seen["outcome"], seen["log"]) == (0, "accept", [])
    assert adapter.argv() == ["begin"]


def _recorded(tmp_path):
    """What install-hook records for the installed mjf-pbs: (site, python)."""
    bindir = str(Path(installed_command("mjf-pbs")).parent)
    result = _install_hook(bindir, pbs_exec=_fake_qmgr(tmp_path, 1))
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "imported.py").read_text()
    site = text.split('\nMJF_SITE = "', 1)[1].split('"', 1)[0]
    python = text.split('\nMJF_PYTHON = "', 1)[1].split('"', 1)[0]
    assert f"in PBS's Python {python} it runs mjf-pbs's code from {site} itself" in \
        result.stdout
    return site, python


@pytest.mark.parametrize("recorded", [True, False])
def test_the_adapter_with_the_real_package(tmp_path, write_config, recorded):
    """The installed mjf-pbs's code in the adapter's own interpreter (and, with nothing
    recorded, the installed mjf-pbs started): begin, launch, end, on_error = fail."""
    conf, base = write_config()
    site, python = _recorded(tmp_path / "install") if recorded else ("", "")
    adapter = Adapter(tmp_path, site=site, python=python,
                      command_env=f", 'MJF_CONFIG': {str(conf)!r}")
    if recorded:  # the command is never started
        write_script(adapter.command, "echo started >&2; exit 3")
    else:
        shutil.copy(installed_command("mjf-pbs"), adapter.command)
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    for role in ("begin", "launch", "end"):
        (inputs / f"{role}.txt").write_text(hook_input(f"{role}-arr-1"))
    status, seen = adapter.run("EXECJOB_BEGIN", "begin", inputs=inputs)
    assert (status, seen["outcome"], seen["log"]) == (0, "accept", [])
    assert (base / "jobs/21[1].vm/jobfeatures/job_id").read_text() == "21[1].vm"
    assert seen["variable_list"] == {"MACHINEFEATURES": f"{base}/machinefeatures",
                                     "JOBFEATURES": f"{base}/jobs/21[1].vm/jobfeatures"}
    status, seen = adapter.run("EXECJOB_LAUNCH", "launch", inputs=inputs)
    assert (status, seen["outcome"], seen["log"]) == (0, "accept", [])
    assert seen["env"] == {"PBS_JOBID": "21[1].vm",
                           "MACHINEFEATURES": f"{base}/machinefeatures",
                           "JOBFEATURES": f"{base}/jobs/21[1].vm/jobfeatures"}
    status, seen = adapter.run("EXECJOB_END", "end", inputs=inputs)
    assert (status, seen["outcome"], seen["log"]) == (0, "accept", [])
    assert not (base / "jobs/21[1].vm").exists()
    status, seen = adapter.run("EXECJOB_LAUNCH", "launch", inputs=inputs)
    assert (status, seen["outcome"]) == (0, "accept")
    assert seen["env"] == {"PBS_JOBID": "21[1].vm"}
    [[_, message]] = seen["log"]
    assert "jobs/21[1].vm/jobfeatures does not exist" in message
    assert "mjf-pbs launch job 21[1].vm: error: " in message
    conf.write_text(conf.read_text() + "on_error = fail\n")
    status, seen = adapter.run("EXECJOB_LAUNCH", "launch", inputs=inputs)
    assert (status, seen["outcome"]) == (1, "reject")
    assert "on_error = fail" in seen["message"]


def test_install_hook_records_nothing_for_a_wrapper_script(tmp_path):
    bindir = tmp_path / "bin"
    write_script(bindir / "mjf-pbs", f'exec {installed_command("mjf-pbs")} "$@"')
    result = _install_hook(str(bindir), pbs_exec=_fake_qmgr(tmp_path, 1))
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "imported.py").read_text()
    assert '\nMJF_SITE = ""\n' in text and '\nMJF_PYTHON = ""\n' in text
    assert "runs mjf-pbs's code" not in result.stdout
