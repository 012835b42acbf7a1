"""`mjf-gridengine` (prolog, epilog, starter) and `mjf-gridengine-starter` as installed
commands, replaying what a Son of Grid Engine 8.1.9 cell gave its hooks (environments,
spool configs, pe_hostfile) with a fake qstat (recorded output, failing, hanging)."""

import json
import os
import pwd
import resource
import shlex
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mjf_hooks.store import Store
from tests.cli.job_view import show_script
from tests.conftest import (
    FIXTURES,
    config_writer,
    hooks_command,
    installed_command,
    pending,
    require,
    write_script,
)

GE = FIXTURES / "gridengine-8.1.9"
# A root prolog writes the job's directory for its user, who must exist here.
USER = pwd.getpwuid(os.getuid()).pw_name
GIB = 2**30
# Run by the job (its shell's `$0` first): what it was given and what it sees.
SHOW = show_script()
# The job's directory name of each recorded job, and its spool directory's.
JOB_DIRS = {"pe-job": "13", "array-task": "14.2", "binary-job": "12"}
SPOOL_DIRS = {"pe-job": "13.1", "array-task": "14.2", "binary-job": "12.1"}
# Where the recording cell's execd kept them.
RECORDED_ACTIVE_JOBS = "/var/spool/gridengine/execd/localhost/active_jobs"


class Site:
    """A node of the recorded cell: the job's spool directory (as execd lays it out:
    ``execd/localhost/active_jobs/13.1``, with its config and pe_hostfile) and scratch
    dir in tmp_path, a config whose qstat is a fake printing the recorded output."""

    def __init__(self, tmp_path, write_config, job="pe-job"):
        self.tmp_path = tmp_path
        self.qstat = tmp_path / "qstat"
        self.qstat_log = tmp_path / "qstat.args"
        self.active_jobs = tmp_path / "execd" / "localhost" / "active_jobs"
        self.cell = tmp_path / "sge"
        self.scratch = tmp_path / "scratch"
        self.scratch.mkdir()
        self.out = tmp_path / "out"  # where the job writes what it saw (any user may)
        self.out.mkdir()
        self.out.chmod(0o777)
        (tmp_path / "show.py").write_text(SHOW)
        self._write_config = write_config
        self.use(job)
        self.configure()

    def use(self, job):
        """Replay another recorded job: its spool config, pe_hostfile and qstat -j."""
        self.name = job
        self.spool = self.active_jobs / SPOOL_DIRS[job]
        self.spool.mkdir(parents=True, exist_ok=True)
        # Its paths moved into tmp_path: the spool directory, and the job's TMPDIR.
        config = (GE / job / "spool-config").read_text().replace(
            f"{RECORDED_ACTIVE_JOBS}/{SPOOL_DIRS[job]}", str(self.spool))
        (self.spool / "config").write_text("".join(
            f"tmpdir={self.scratch}\n" if line.startswith("tmpdir=") else line + "\n"
            for line in config.splitlines()))
        if (GE / job / "pe_hostfile").exists():
            shutil.copy(GE / job / "pe_hostfile", self.spool / "pe_hostfile")
        self.set_qstat(f'case "$1" in\n-j) cat {GE / job / "qstat-j.txt"} ;;\n'
                       f'-F) cat {GE / "qstat-F-queue-instance.txt"} ;;\n*) exit 2 ;;\nesac')

    def configure(self, extra="", base_dir=None, mjf=""):
        self.conf, self.base = self._write_config(
            f"command_timeout = 0.5\n{mjf}[gridengine]\nqstat = {self.qstat}\n{extra}",
            base_dir)

    def set_qstat(self, body):
        write_script(self.qstat, f'echo "$@" >> {self.qstat_log}\n'
                                 f'echo "$SGE_ROOT $SGE_CELL $PATH" > {self.tmp_path}/qstat.env\n'
                                 f"{body}")

    def qstat_calls(self):
        return [line.split() for line in self.qstat_log.read_text().splitlines()] \
            if self.qstat_log.exists() else []

    def environ(self, hook="prolog", **changes):
        """The job's recorded environment for ``hook``, its paths moved into tmp_path;
        ``changes`` set variables (None removes one)."""
        text = (GE / self.name / f"{hook}.env").read_text()
        environ = dict(line.split("=", 1) for line in text.splitlines())
        environ["SGE_JOB_SPOOL_DIR"] = str(self.spool)
        # A cell of its own (no bootstrap unless a test writes one), never this host's.
        environ["SGE_ROOT"] = str(self.cell)
        if "PE_HOSTFILE" in environ:
            environ["PE_HOSTFILE"] = str(self.spool / "pe_hostfile")
        for name in ("TMP", "TMPDIR"):
            if name in environ:
                environ[name] = str(self.scratch)
        # An unprivileged test run's fallback directory: this test's own, not /tmp/mjf-<uid>.
        runtime = self.tmp_path / "runtime"
        runtime.mkdir(mode=0o700, exist_ok=True)
        environ.update({"USER": USER, "LOGNAME": USER, "HOME": str(self.tmp_path),
                        "MJF_CONFIG": str(self.conf), "XDG_RUNTIME_DIR": str(runtime)})
        for name, value in changes.items():
            if value is None:
                environ.pop(name, None)
            else:
                environ[name] = value
        return environ

    def env_file(self, hook="prolog", **changes):
        environ = self.environ(hook, **changes)
        path = self.tmp_path / f"{hook}.env"
        path.write_text("".join(f"{name}={value}\n" for name, value in sorted(environ.items())
                                if name not in ("MJF_CONFIG", "XDG_RUNTIME_DIR")))
        return path

    def run(self, *args, environ=None, command="mjf-gridengine", user=None, limits=None):
        if command == "mjf-gridengine" and "--config" not in args:
            # As a site's queue would: a root prolog takes no $MJF_CONFIG (the job's).
            args = ("--config", str(self.conf), *args)
        argv = [installed_command(command), *args]
        if user is not None:
            argv = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups",
                    hooks_command(command), *args]

        def apply_limits():
            for which, value in (limits or {}).items():
                resource.setrlimit(which, (value, resource.getrlimit(which)[1]))

        return subprocess.run(argv, capture_output=True, text=True, timeout=60,
                              env=self.environ() if environ is None else environ,
                              preexec_fn=apply_limits)

    def prolog(self, *options, **changes):
        return self.run(*options, "prolog", environ=self.environ("prolog", **changes))

    def epilog(self, *options, **changes):
        return self.run(*options, "epilog", environ=self.environ("epilog", **changes))

    def starter(self, *argv, command="mjf-gridengine-starter", **changes):
        """The starter with ``argv`` as the shepherd gives it (the job script and its
        arguments), in the job's recorded starter environment."""
        args = argv if command == "mjf-gridengine-starter" else ("starter", *argv)
        return self.run(*args, environ=self.environ("starter", **changes), command=command)

    def job_script(self, status=0, name="job"):
        """A job script as Grid Engine spools it (no `#!` line, not executable): it
        records its shell's argv, then what it was given and sees."""
        script = self.tmp_path / name
        python = shlex.quote(sys.executable)
        script.write_text(f"tr '\\0' '\\n' < /proc/$$/cmdline > {self.out}/shell-argv\n"
                          f"{python} {self.tmp_path}/show.py \"$0\" \"$@\" > {self.out}/job.json\n"
                          f"exit {status}\n")
        script.chmod(0o644)
        return str(script)

    def seen(self):
        """What the job saw, or None if it did not run."""
        path = self.out / "job.json"
        return json.loads(path.read_text()) if path.exists() else None

    def shell_argv(self):
        return (self.out / "shell-argv").read_text().splitlines()

    def job(self, job_dir=None):
        path = self.base / "jobs" / (job_dir or JOB_DIRS[self.name]) / "jobfeatures"
        return {p.name: p.read_text() for p in path.iterdir()} if path.exists() else None

    def nothing_written(self):
        return not (self.base / "jobs").exists() or os.listdir(self.base / "jobs") == []


@pytest.fixture
def site(tmp_path, write_config):
    return Site(tmp_path, write_config)


def _cgroup_memory():
    from mjf_hooks.probe import cgroup

    limits = cgroup.limits()
    return limits.memory_bytes if limits and limits.memory_bytes else 2**63


def _started_now(job):
    return abs(int(job.pop("jobstart_secs")) - time.time()) < 60


# --- prolog ---------------------------------------------------------------------------

def test_prolog_of_a_parallel_job_writes_its_values_pending(site):
    result = site.prolog()
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    job = site.job()
    assert _started_now(job) and int(job.pop("scratch_limit_bytes")) > 0
    # h_cpu=1800 and h_vmem=1G are per slot, times host_slots=2; h_rt from qstat -j.
    assert job == {"job_id": "13", "allocated_cpu": "2", "cpu_limit_secs": "3600",
                   "max_rss_bytes": str(2 * GIB), "wall_limit_secs": "3600"}
    assert pending(site.base, "13")
    # The job requested h_rt: its queue instance's limits are not asked for.
    assert site.qstat_calls() == [["-j", "13"], ["-F", "h_rt,s_rt", "-q", "all.q@vm"]]
    # qstat runs with the cell's environment, not the job's PATH.
    qstat_env = (site.tmp_path / "qstat.env").read_text()
    assert qstat_env == f"{site.cell} default /usr/bin:/bin\n"  # the job's SGE_ROOT


def test_prolog_replays_an_env_file(site):
    env_file = site.env_file("prolog")
    result = site.run("--env-file", str(env_file), "prolog",
                      environ={"MJF_CONFIG": str(site.conf), "PATH": "/usr/bin:/bin"})
    assert (result.returncode, result.stderr) == (0, "")
    assert site.job()["allocated_cpu"] == "2" and pending(site.base, "13")


def test_prolog_of_an_array_task(tmp_path, write_config):
    site = Site(tmp_path, write_config, "array-task")
    result = site.prolog()
    assert (result.returncode, result.stderr) == (0, "")
    assert os.listdir(site.base / "jobs") == ["14.2"]
    job = site.job()
    assert _started_now(job) and int(job.pop("scratch_limit_bytes")) > 0
    # s_rt=600 requested; no CPU time limit: wall_limit_secs x allocated_cpu.
    assert job == {"job_id": "14.2", "allocated_cpu": "1", "wall_limit_secs": "600",
                   "cpu_limit_secs": "600"}
    assert pending(site.base, "14.2")
    assert site.qstat_calls() == [["-j", "14"], ["-F", "h_rt,s_rt", "-q", "all.q@vm"]]


def test_prolog_of_a_job_without_requests_asks_its_queue_instance(tmp_path, write_config):
    site = Site(tmp_path, write_config, "binary-job")
    result = site.prolog()
    assert (result.returncode, result.stderr) == (0, "")
    assert site.qstat_calls() == [["-j", "12"], ["-F", "h_rt,s_rt", "-q", "all.q@vm"]]
    job = site.job()
    assert job["job_id"] == "12" and job["allocated_cpu"] == "1"  # NSLOTS: no PE_HOSTFILE
    # all.q@vm's h_rt and s_rt are infinity: no limit is known.
    assert "wall_limit_secs" not in job and "cpu_limit_secs" not in job


def test_qstat_runs_in_the_configured_cell(site):
    site.configure("sge_root = /opt/sge\nsge_cell = cell2\n")
    assert site.prolog().returncode == 0
    qstat_env = (site.tmp_path / "qstat.env").read_text()
    assert qstat_env == "/opt/sge cell2 /usr/bin:/bin\n"


def test_qstat_can_be_switched_off(site):
    site.configure("query_qstat = no\n")
    result = site.prolog()
    assert (result.returncode, result.stderr) == (0, "")
    assert site.qstat_calls() == []
    job = site.job()
    assert "wall_limit_secs" not in job
    assert job["cpu_limit_secs"] == "3600" and job["allocated_cpu"] == "2"


@pytest.mark.parametrize(("body", "message"), [
    ("echo 'denied: job \"13\" does not exist' >&2; exit 1",
     "exited with status 1: denied: job \"13\" does not exist"),
    ("sleep 30", "did not finish within 0.5 s"),
    (None, "cannot run"),
])
def test_qstat_trouble_leaves_only_the_wall_limit_out(site, body, message):
    if body is None:
        site.qstat.unlink()
    else:
        site.set_qstat(body)
    started = time.monotonic()
    result = site.prolog()
    assert time.monotonic() - started < 10
    assert result.returncode == 0
    assert message in result.stderr and "wall_limit_secs not written" in result.stderr
    job = site.job()
    assert "wall_limit_secs" not in job
    assert job["allocated_cpu"] == "2" and job["cpu_limit_secs"] == "3600"
    # The starter too goes on to run the job.
    script = site.job_script()
    started = time.monotonic()
    assert site.starter(script).returncode == 0
    assert time.monotonic() - started < 10
    assert site.seen()["env"]["JOBFEATURES"] == f"{site.base}/jobs/13/jobfeatures"


def test_qstat_failing_for_the_queue_instance(tmp_path, write_config):
    site = Site(tmp_path, write_config, "binary-job")
    site.set_qstat(f'case "$1" in -j) cat {GE / "binary-job/qstat-j.txt"} ;; *) exit 1 ;; esac')
    result = site.prolog()
    assert result.returncode == 0
    assert "the queue's run-time limit is not known" in result.stderr
    assert site.job()["job_id"] == "12" and len(site.qstat_calls()) == 2


# --- starter --------------------------------------------------------------------------

ARGS = ["a", "--dry-run", "--config", "-h", "--help", "", "two words", "--", "$HOME", "prolog"]


@pytest.mark.parametrize("command", ["mjf-gridengine-starter", "mjf-gridengine"])
def test_the_starter_completes_the_prolog_and_runs_the_job_as_grid_engine_would(site, command):
    assert site.prolog().returncode == 0 and pending(site.base, "13")
    script = site.job_script()
    result = site.starter(script, *ARGS, command=command)
    assert (result.returncode, result.stderr) == (0, "")
    assert not pending(site.base, "13")
    seen = site.seen()
    # posix_compliant with a login shell: /bin/sh as `-sh` runs the script (no `#!`),
    # whose $0 is its path; every argument arrives as it was given.
    assert site.shell_argv()[:2] == ["-sh", script]
    assert seen["argv"] == [script, *ARGS]
    assert seen["env"] == {"MACHINEFEATURES": f"{site.base}/machinefeatures",
                           "JOBFEATURES": f"{site.base}/jobs/13/jobfeatures"}
    job = seen["job"]
    assert job["job_id"] == "13" and job["allocated_cpu"] == "2"
    assert job["wall_limit_secs"] == "3600" and job["cpu_limit_secs"] == "3600"
    assert job["max_rss_bytes"] == str(min(2 * GIB, _cgroup_memory()))
    # the prolog's; the starter asks nothing
    assert site.qstat_calls() == [["-j", "13"], ["-F", "h_rt,s_rt", "-q", "all.q@vm"]]


def test_the_starter_without_a_prolog_writes_the_values_itself(site):
    script = site.job_script()
    result = site.starter(script, "a", "b")
    assert (result.returncode, result.stderr) == (0, "")
    assert not pending(site.base, "13")
    seen = site.seen()
    assert seen["argv"] == [script, "a", "b"]
    assert seen["env"]["JOBFEATURES"] == f"{site.base}/jobs/13/jobfeatures"
    job = seen["job"]
    assert _started_now(job) and int(job.pop("scratch_limit_bytes")) > 0
    assert job == {"job_id": "13", "allocated_cpu": "2", "wall_limit_secs": "3600",
                   "cpu_limit_secs": "3600",
                   "max_rss_bytes": str(min(2 * GIB, _cgroup_memory()))}
    assert site.qstat_calls() == [["-j", "13"], ["-F", "h_rt,s_rt", "-q", "all.q@vm"]]


def test_the_starter_of_an_array_task(tmp_path, write_config):
    site = Site(tmp_path, write_config, "array-task")
    assert site.prolog().returncode == 0
    result = site.starter(site.job_script())
    assert (result.returncode, result.stderr) == (0, "")
    seen = site.seen()
    assert seen["env"]["JOBFEATURES"] == f"{site.base}/jobs/14.2/jobfeatures"
    assert seen["job"]["job_id"] == "14.2" and seen["job"]["wall_limit_secs"] == "600"
    assert not pending(site.base, "14.2")


def test_a_binary_job_runs_under_sh_c(tmp_path, write_config):
    site = Site(tmp_path, write_config, "binary-job")
    out = site.out / "binary"
    # The spool config says handle_as_binary=1: the command line is the shell's.
    result = site.starter("echo", "$0", "$JOB_ID", "$JOBFEATURES", ">", str(out))
    assert (result.returncode, result.stderr) == (0, "")
    assert out.read_text() == f"-sh 12 {site.base}/jobs/12/jobfeatures\n"
    assert site.run("/bin/true", environ=site.environ("starter"),
                    command="mjf-gridengine-starter").returncode == 0  # as recorded
    assert site.starter("exit", "5").returncode == 5  # a shell's builtin


def test_a_binary_job_submitted_with_shell_no_is_run_as_it_is(tmp_path, write_config):
    site = Site(tmp_path, write_config, "binary-job")
    config = site.spool / "config"
    config.write_text(config.read_text().replace("no_shell=0", "no_shell=1"))
    # No shell: nothing is expanded, and the command is found in the job's PATH.
    result = site.starter("printenv", "JOBFEATURES", "$JOB_ID")
    assert result.returncode == 1 and result.stdout == f"{site.base}/jobs/12/jobfeatures\n"
    result = site.run("--dry-run", "starter", "printenv", "a b",
                      environ=site.environ("starter"))
    assert "would exec: ['printenv', 'a b']\n" in result.stdout


def test_a_script_run_as_itself_in_unix_behavior(site):
    script = write_script(site.tmp_path / "unix-job", f'echo "$0 $*" > {site.out}/unix')
    result = site.starter(str(script), "x", SGE_STARTER_SHELL_START_MODE="unix_behavior")
    assert (result.returncode, result.stderr) == (0, "")
    assert (site.out / "unix").read_text() == f"{script} x\n"


def test_the_jobs_exit_status_passes_through(site):
    assert site.starter(site.job_script(status=3)).returncode == 3
    assert site.seen()["env"]["JOBFEATURES"] == f"{site.base}/jobs/13/jobfeatures"


@pytest.mark.parametrize(("changes", "named"), [
    # the script itself is run
    ({"SGE_STARTER_SHELL_START_MODE": "unix_behavior"}, "/nonexistent/job"),
    ({"SGE_STARTER_SHELL_PATH": "/nonexistent/shell"},
     "the job's shell (SGE_STARTER_SHELL_PATH) /nonexistent/shell"),
    ({"SGE_STARTER_SHELL_PATH": "/bin/sh\n1"},
     "the job's shell (SGE_STARTER_SHELL_PATH) '/bin/sh\\n1'"),
])
def test_a_job_that_cannot_be_executed_exits_127(site, changes, named):
    result = site.starter("/nonexistent/job", "x", **changes)
    assert result.returncode == 127
    assert f"cannot execute {named}: No such file or directory" in result.stderr
    assert result.stderr.count("\n") == 1


def test_a_missing_script_is_the_shells_to_report(site):
    # posix_compliant: /bin/sh is run, and says what it says (as without a starter).
    result = site.starter("/nonexistent/job")
    assert result.returncode != 0 and "/nonexistent/job" in result.stderr


# --- epilog ---------------------------------------------------------------------------

def test_epilog_removes_the_job_and_a_second_is_a_no_op(site):
    assert site.prolog().returncode == 0
    assert site.starter(site.job_script()).returncode == 0
    result = site.epilog()
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert site.job() is None and not (site.base / "jobs/13").exists()
    again = site.epilog()
    assert (again.returncode, again.stdout, again.stderr) == (0, "", "")


def test_epilog_of_an_array_task_removes_that_task_only(tmp_path, write_config):
    site = Site(tmp_path, write_config, "array-task")
    assert site.prolog().returncode == 0
    assert site.prolog(SGE_TASK_ID="3").returncode == 0
    assert sorted(os.listdir(site.base / "jobs")) == ["14.2", "14.3"]
    assert site.epilog().returncode == 0
    assert os.listdir(site.base / "jobs") == ["14.3"]


# --- fail-safe ------------------------------------------------------------------------

def test_a_broken_config_fails_no_hook_and_the_job_still_runs(site):
    site.conf.write_text("[mjf]\nthis is not a key value line\n")
    for result in (site.prolog(), site.epilog()):
        assert result.returncode == 0 and "is not `key = value`" in result.stderr
    assert site.nothing_written()
    script = site.job_script(status=4)
    result = site.starter(script, "a")
    assert result.returncode == 4 and "is not `key = value`" in result.stderr
    assert site.seen()["argv"] == [script, "a"]
    assert site.seen()["env"] == {"MACHINEFEATURES": None, "JOBFEATURES": None}
    assert site.nothing_written()
    # on_error = fail in a config that cannot be read is not trusted either.
    site.conf.write_text("[mjf]\non_error = fail\nbogus\n")
    assert site.prolog().returncode == 0


def test_on_error_fail_fails_the_job_with_100(site):
    site.configure(mjf="on_error = fail\n")
    prolog = site.prolog(JOB_ID=None)
    assert prolog.returncode == 100 and "JOB_ID is missing" in prolog.stderr
    assert site.epilog(JOB_ID=None).returncode == 100
    starter = site.starter(site.job_script(), JOB_ID=None)
    assert starter.returncode == 100 and "JOB_ID is missing" in starter.stderr
    assert site.seen() is None  # the job did not run
    assert site.nothing_written()
    # What works is not failed.
    assert site.prolog().returncode == 0 and site.epilog().returncode == 0


def _break_base_dir(site):
    (site.tmp_path / "file").write_text("")
    (site.tmp_path / "runtime").mkdir(mode=0o700, exist_ok=True)
    (site.tmp_path / "runtime/mjf").write_text("")  # and the private fallback too


@pytest.mark.parametrize("on_error", ["continue", "fail"])
def test_an_unwritable_base_dir(site, on_error):
    _break_base_dir(site)
    site.configure(base_dir=site.tmp_path / "file/base", mjf=f"on_error = {on_error}\n")
    status = 100 if on_error == "fail" else 0
    prolog = site.prolog()
    assert prolog.returncode == status  # never 1: that would blame the queue instance
    assert ("Not a directory" if os.geteuid() == 0 else "is not a directory of uid") \
        in prolog.stderr
    starter = site.starter(site.job_script(status=6))
    if on_error == "fail":
        assert starter.returncode == 100 and site.seen() is None
    else:
        assert starter.returncode == 6
        assert site.seen()["env"] == {"MACHINEFEATURES": None, "JOBFEATURES": None}


# --- bad input ------------------------------------------------------------------------

@pytest.mark.parametrize(("changes", "message"), [
    ({"JOB_ID": None}, "JOB_ID is missing or empty"),
    ({"JOB_ID": ""}, "JOB_ID is missing or empty"),
    ({"JOB_ID": "12x"}, "JOB_ID='12x' is not a Grid Engine job id"),
    ({"JOB_ID": "../13"}, "JOB_ID='../13' is not a Grid Engine job id"),
    ({"SGE_TASK_ID": "abc"}, "SGE_TASK_ID='abc' is not an array task id"),
])
def test_bad_job_ids_are_one_error_line_and_nothing_written(site, changes, message):
    for result in (site.prolog(**changes), site.epilog(**changes)):
        assert result.returncode == 0
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and ": error: " in lines[0] and message in lines[0], lines
    assert site.nothing_written() and site.qstat_calls() == []
    result = site.starter(site.job_script(), **changes)
    assert result.returncode == 0 and message in result.stderr
    assert site.seen()["env"]["JOBFEATURES"] is None
    assert site.nothing_written()


@pytest.mark.parametrize("spool_dir", ["missing", "relative", "config-is-a-directory"])
def test_an_unreadable_spool_config_is_a_warning(tmp_path, write_config, spool_dir):
    site = Site(tmp_path, write_config, "array-task")
    changes = {"missing": str(tmp_path / "no-such-spool"), "relative": "spool",
               "config-is-a-directory": str(tmp_path / "odd")}
    (tmp_path / "odd/config").mkdir(parents=True)
    result = site.prolog(SGE_JOB_SPOOL_DIR=changes[spool_dir])
    assert result.returncode == 0
    assert "the job's spool config is not readable" in result.stderr
    job = site.job()
    # What remains: NSLOTS, and qstat -j's s_rt (its queue instance: from QUEUE/HOSTNAME).
    assert job["job_id"] == "14.2" and job["allocated_cpu"] == "1"
    assert job["wall_limit_secs"] == "600"
    # Without the spool config the starter runs the job's argv as it is.
    script = write_script(tmp_path / "direct-job", f'echo "$JOBFEATURES" > {site.out}/direct')
    starter = site.starter(str(script), SGE_JOB_SPOOL_DIR=changes[spool_dir])
    assert starter.returncode == 0
    assert (site.out / "direct").read_text() == f"{site.base}/jobs/14.2/jobfeatures\n"


def test_an_unreadable_spool_config_falls_back_to_the_environments_queue(tmp_path,
                                                                        write_config):
    site = Site(tmp_path, write_config, "binary-job")
    result = site.prolog(SGE_JOB_SPOOL_DIR=str(tmp_path / "no-such-spool"))
    assert result.returncode == 0
    assert site.qstat_calls()[-1] == ["-F", "h_rt,s_rt", "-q", "all.q@vm"]


def test_an_unreadable_pe_hostfile_is_a_warning(site):
    missing = site.tmp_path / "no-pe_hostfile"
    result = site.prolog(PE_HOSTFILE=str(missing))
    assert result.returncode == 0
    assert f"PE_HOSTFILE {missing} is not read: not {site.spool}/pe_hostfile, where Grid " \
        "Engine puts it" in result.stderr
    job = site.job()
    assert job["allocated_cpu"] == "2"  # NSLOTS, on the one host (NHOSTS=1)
    assert job["wall_limit_secs"] == "3600" and job["cpu_limit_secs"] == "3600"


def test_a_pe_hostfile_without_this_host(site):
    (site.spool / "pe_hostfile").write_text("elsewhere 2 all.q@elsewhere UNDEFINED\n")
    result = site.prolog()
    assert result.returncode == 0 and "allocated_cpu not written" in result.stderr
    job = site.job()
    # h_cpu and h_vmem still times the spool config's host_slots.
    assert "allocated_cpu" not in job and job["cpu_limit_secs"] == "3600"


# --- usage ----------------------------------------------------------------------------

@pytest.mark.parametrize(("args", "message"), [
    (["bogus"], "unknown role 'bogus'"),
    ([], "unknown role ''"),
    (["prolog", "extra"], "prolog takes no arguments, got ['extra']"),
    (["epilog", "extra"], "epilog takes no arguments"),
    (["starter"], "the starter needs the job's command"),
    (["--bogus", "prolog"], "unknown option '--bogus'"),
    (["--config"], "--config needs a value"),
])
def test_a_wrong_command_line_is_a_message_and_exit_0(site, args, message):
    result = site.run(*args)
    assert result.returncode == 0 and message in result.stderr
    assert site.nothing_written() and site.qstat_calls() == []


def test_the_starter_command_with_no_job(site):
    result = site.run(environ=site.environ("starter"), command="mjf-gridengine-starter")
    assert result.returncode == 0 and "the starter needs the job's command" in result.stderr


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help(site, flag):
    result = site.run(flag)
    assert result.returncode == 0 and result.stdout.startswith("usage: mjf-gridengine ")
    assert "--dry-run" in result.stdout and result.stderr == ""


# --- dry run --------------------------------------------------------------------------

def test_dry_run_prolog_writes_nothing_and_prints_the_keys(site):
    result = site.prolog("--dry-run")
    assert (result.returncode, result.stderr) == (0, "")
    jobfeatures = f"{site.base}/jobs/13/jobfeatures"
    for line in ("allocated_cpu = 2", "cpu_limit_secs = 3600", "wall_limit_secs = 3600",
                 f"max_rss_bytes = {2 * GIB}", "job_id = 13"):
        assert f"{jobfeatures}/{line}\n" in result.stdout
    assert f"export JOBFEATURES={jobfeatures}\n" in result.stdout
    assert not site.base.exists()


def test_dry_run_starter_and_epilog(site):
    assert site.prolog().returncode == 0
    result = site.run("--dry-run", "starter", "/spool/job_scripts/13", "a",
                      environ=site.environ("starter"))
    assert result.returncode == 0
    assert "would exec: ['-sh', '/spool/job_scripts/13', 'a'] (/bin/sh)" in result.stdout
    assert pending(site.base, "13")  # not completed
    result = site.epilog("--dry-run")
    assert result.returncode == 0
    assert result.stdout.startswith(f"would remove {site.base}/jobs/13/jobfeatures\n")
    assert site.job() is not None


# --- as root, for another user --------------------------------------------------------

def test_root_prolog_then_the_users_starter(public_tmp_path):
    require(os.geteuid() == 0, "needs root to run the starter as another user")
    site = Site(public_tmp_path, config_writer(public_tmp_path))
    nobody = {"USER": "nobody", "LOGNAME": "nobody"}
    assert site.run("prolog", environ=site.environ("prolog", **nobody)).returncode == 0
    features = site.base / "jobs/13/jobfeatures"
    assert features.stat().st_uid == 65534 and pending(site.base, "13")
    assert site.run("epilog", environ=site.environ("epilog", **nobody)).returncode == 0
    site.use("binary-job")
    out = site.out / "root-test"
    assert site.run("prolog", environ=site.environ("prolog", **nobody)).returncode == 0
    result = site.run("echo", "$JOBFEATURES", ">", str(out), user=65534,
                      environ=site.environ("starter", **nobody),
                      command="mjf-gridengine-starter")
    assert (result.returncode, result.stderr) == (0, "")
    assert out.read_text() == f"{site.base}/jobs/12/jobfeatures\n"
    assert not pending(site.base, "12")
    assert site.run("epilog", environ=site.environ("epilog", **nobody)).returncode == 0
    assert not (site.base / "jobs/12").exists()


def test_a_root_epilogs_record_takes_the_slots_execd_gave_not_those_the_user_wrote(
        public_tmp_path):
    """After a root prolog the job's user owns its jobfeatures/ (its starter completes
    them) and, as that user, writes a million slots there. Root's epilog records the
    slots its pe_hostfile gives, and says whose word the rest is."""
    require(os.geteuid() == 0, "needs root to make a job's jobfeatures/ another user's")
    site = Site(public_tmp_path, config_writer(public_tmp_path))
    site.configure(f"[records]\ndir = {public_tmp_path / 'records'}\n")
    nobody = {"USER": "nobody", "LOGNAME": "nobody"}
    assert site.run("prolog", environ=site.environ("prolog", **nobody)).returncode == 0
    features = site.base / "jobs/13/jobfeatures"
    assert features.stat().st_uid == 65534 and pending(site.base, "13")
    subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh",
                    "-c", f"printf 1000000 > {features}/.new && mv {features}/.new "
                    f"{features}/allocated_cpu"], check=True)
    Store(str(site.base)).machine.set_key("total_cpu", "16")  # more than the job's 2
    ended = site.run("epilog", environ=site.environ("epilog", **nobody))
    assert ended.returncode == 0 and not (site.base / "jobs/13").exists(), ended.stderr
    [path] = (public_tmp_path / "records").glob("*/*.json")
    record = json.loads(path.read_text())
    assert record["job_id"] == "13" and record["requested"]["allocated_cpu"] == 2
    assert (f"allocated_cpu 1000000 counted as 2, PE_HOSTFILE {site.spool}/pe_hostfile"
            in record["requested_source"])


def test_a_root_epilog_finds_what_a_starter_alone_put_in_its_users_private_directory(
        public_tmp_path):
    require(os.geteuid() == 0, "needs root to run the starter as another user")
    private = Path("/tmp/mjf-65534")
    require(not private.exists(), f"{private} exists already: not this test's to remove")
    site = Site(public_tmp_path, config_writer(public_tmp_path))
    site.use("binary-job")
    (site.base / "jobs").mkdir(parents=True)  # root's, 0755: nobody cannot write there
    nobody = {"USER": "nobody", "LOGNAME": "nobody"}
    try:
        out = site.out / "private"
        result = site.run("echo", "$JOBFEATURES", ">", str(out), user=65534,
                          environ=site.environ("starter", **nobody),
                          command="mjf-gridengine-starter")
        assert result.returncode == 0, result.stderr
        assert out.read_text() == f"{private}/jobs/12/jobfeatures\n"
        result = site.run("epilog", environ=site.environ("epilog", **nobody))
        assert (result.returncode, result.stderr) == (0, "")
        assert not (private / "jobs" / "12").exists()
    finally:
        shutil.rmtree(private, ignore_errors=True)


# --- $JOBSTATUS -----------------------------------------------------------------------

@pytest.mark.parametrize("command", ["mjf-gridengine-starter", "mjf-gridengine"])
@pytest.mark.parametrize("prolog", [True, False])
def test_with_jobstatus_the_job_gets_one_beside_its_jobfeatures(site, command, prolog):
    site.configure(mjf="jobstatus = yes\n")
    if prolog:
        assert site.prolog().returncode == 0
    script = site.tmp_path / "status-job"
    script.write_text(f'{{ echo "${{JOBSTATUS-unset}}"; test -d "${{JOBSTATUS-}}" && echo dir; '
                      f'ls -A "${{JOBSTATUS-/nonexistent}}" | wc -l; echo "$JOBFEATURES"; }} '
                      f'> {site.out}/status\n')
    result = site.starter(str(script), command=command)
    assert (result.returncode, result.stderr) == (0, "")
    status, is_dir, entries, features = (site.out / "status").read_text().split("\n")[:4]
    assert (status, is_dir, entries.strip(), features) == (
        f"{site.base}/jobs/13/jobstatus", "dir", "0", f"{site.base}/jobs/13/jobfeatures")
    site.configure()
    assert site.starter(str(script), command=command).returncode == 0
    assert (site.out / "status").read_text().split("\n")[0] == "unset"


# --- what a job's user can name to a root prolog or epilog ----------------------------
#
# A prolog and an epilog run as root with the job's environment, in which the job's user
# sets what they like (qsub -v PE_HOSTFILE=...), and Grid Engine writes their stderr to the
# job's own error file. Nothing of a file the user names may be read, quoted or waited on.

SECRET = "mjf-secret-marker"


@pytest.fixture
def as_root():
    require(os.geteuid() == 0, "a root prolog's checks: needs root")


needs_root = pytest.mark.usefixtures("as_root")
DAEMON = 1  # a uid neither root's nor the job's, to own a spool directory as sgeadmin would


def root_only_secret(site):
    """A root-only file (mode 0600) that would give this host 31337 slots if read."""
    directory = site.tmp_path / "private"
    directory.mkdir(mode=0o700, exist_ok=True)
    secret = directory / "secret"
    secret.write_text(f"vm 31337 all.q@vm UNDEFINED\n{SECRET} line two\n")
    secret.chmod(0o600)
    return secret


def assert_nothing_of(secret_result, *results):
    for result in (secret_result, *results):
        assert SECRET not in result.stdout + result.stderr
        assert "31337" not in result.stdout + result.stderr.replace("mjf[31337]", "")


@needs_root
def test_a_pe_hostfile_the_job_names_is_neither_read_nor_quoted(site):
    secret = root_only_secret(site)
    result = site.prolog(PE_HOSTFILE=str(secret))
    assert result.returncode == 0
    assert_nothing_of(result)
    assert f"PE_HOSTFILE {secret} is not read: not {site.spool}/pe_hostfile, where Grid " \
        "Engine puts it" in result.stderr
    job = site.job()
    assert job["allocated_cpu"] == "2"  # NSLOTS, on the one host
    assert job["cpu_limit_secs"] == "3600" and job["max_rss_bytes"] == str(2 * GIB)


@needs_root
def test_a_job_without_a_parallel_environment_reads_no_pe_hostfile(tmp_path, write_config):
    site = Site(tmp_path, write_config, "binary-job")
    secret = root_only_secret(site)
    result = site.prolog(PE_HOSTFILE=str(secret))
    assert_nothing_of(result)
    assert f"PE_HOSTFILE {secret} is not read: the job has no parallel environment" \
        in result.stderr
    assert site.job()["allocated_cpu"] == "1"
    # ...not even one in its own spool directory, where execd leaves one for every job
    (site.spool / "pe_hostfile").write_text("vm 31337 all.q@vm UNDEFINED\n")
    assert site.epilog().returncode == 0
    result = site.prolog(PE_HOSTFILE=str(site.spool / "pe_hostfile"))
    assert site.job()["allocated_cpu"] == "1"
    assert_nothing_of(result)


@needs_root
@pytest.mark.parametrize("kind", ["symlink", "fifo", "sparse", "device", "users"])
def test_a_pe_hostfile_replaced_on_the_way_is_refused_at_once(site, kind):
    secret = root_only_secret(site)
    planted = site.spool / "pe_hostfile"
    planted.unlink()
    if kind == "symlink":
        planted.symlink_to(secret)
    elif kind == "fifo":
        os.mkfifo(planted)
    elif kind == "sparse":  # a gibibyte of the user's: read whole, 10 s and 2 GB of memory
        with planted.open("wb") as handle:
            handle.truncate(2**30)
    elif kind == "device":
        os.mknod(planted, 0o644 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's
    else:  # written by someone other than root and the cell's admin user
        planted.write_text("vm 31337 all.q@vm UNDEFINED\n")
        os.chown(planted, DAEMON, DAEMON)
    started = time.monotonic()
    # Whatever it is, the prolog never holds the file in memory (an OOM kill would be a
    # signal exit: the queue instance's error state).
    result = site.run("prolog", environ=site.environ("prolog"),
                      limits={resource.RLIMIT_AS: 512 * 2**20})
    assert time.monotonic() - started < 10
    assert result.returncode == 0 and "internal error" not in result.stderr
    assert_nothing_of(result)
    assert f"{planted} " in result.stderr  # the warning names the path...
    assert site.job()["allocated_cpu"] == "2"  # ...and NSLOTS stands in


@needs_root
@pytest.mark.parametrize("where", ["elsewhere", "through-a-symlink", "other-task", "relative"])
def test_a_spool_directory_that_is_not_execds_for_this_job_is_not_read(site, where):
    secret = root_only_secret(site)
    if where == "elsewhere":  # a copy of its files, somewhere of the user's choosing
        named = site.tmp_path / "copy"
        shutil.copytree(site.spool, named)
        shutil.copy(secret, named / "pe_hostfile")
    elif where == "through-a-symlink":
        (site.tmp_path / "alias").symlink_to(site.tmp_path / "execd")
        named = site.tmp_path / "alias" / "localhost" / "active_jobs" / "13.1"
    elif where == "other-task":
        named = site.active_jobs / "13.2"
        shutil.copytree(site.spool, named)
    else:
        named = site.active_jobs / "13.2" / ".." / "13.1"
    result = site.prolog(SGE_JOB_SPOOL_DIR=str(named), PE_HOSTFILE=f"{named}/pe_hostfile")
    assert result.returncode == 0
    assert_nothing_of(result)
    assert "the job's spool config is not readable (" in result.stderr
    job = site.job()
    # NSLOTS; the CPU time derived from the wall limit, not the spool config's h_cpu x 2
    assert job["allocated_cpu"] == "2" and job["cpu_limit_secs"] == "7200"


@needs_root
def test_as_root_the_spool_directory_is_root_or_the_admin_users_never_the_jobs(
        site, tmp_path):
    os.chown(site.spool, DAEMON, DAEMON)  # as sgeadmin: not known without the cell's word
    result = site.prolog()
    assert f"{site.spool} belongs to uid {DAEMON}, not to root (Grid Engine's admin user " \
        "is not known: " in result.stderr
    assert site.job()["cpu_limit_secs"] == "7200"  # not the spool config's 1800 x 2
    # The cell's bootstrap names its admin user: execd writes as them.
    cell = site.cell
    (cell / "default" / "common").mkdir(parents=True)
    bootstrap = cell / "default" / "common" / "bootstrap"
    admin = pwd.getpwuid(DAEMON).pw_name
    bootstrap.write_text(f"admin_user              {admin}\nqmaster_spool_dir /x\n")
    for path in (site.spool / "config", site.spool / "pe_hostfile"):
        os.chown(path, DAEMON, DAEMON)
    assert site.epilog().returncode == 0
    result = site.prolog()
    assert (result.returncode, result.stderr) == (0, "")
    assert site.job()["cpu_limit_secs"] == "3600"
    # The job's user is the admin user: they could have written the spool config.
    config = site.spool / "config"
    config.write_text(config.read_text().replace("job_owner=mjfuser1", f"job_owner={admin}"))
    assert site.epilog().returncode == 0
    result = site.prolog()
    assert f"the job's user {admin} is Grid Engine's admin user" in result.stderr
    assert site.job()["cpu_limit_secs"] == "7200"
    # A bootstrap the job's user could have written names no one.
    os.chown(bootstrap.parent, 65534, 65534)
    assert site.epilog().returncode == 0
    assert "admin user is not known" in site.prolog().stderr


@needs_root
def test_a_root_prolog_and_epilog_take_no_mjf_config_from_the_job(site):
    """$MJF_CONFIG would have root read a file the user names (quoting its lines in the
    errors a broken config gives), and write where it says: only --config counts."""
    secret = root_only_secret(site)
    for role in ("prolog", "epilog"):
        environ = site.environ(role, MJF_CONFIG=str(secret))
        result = subprocess.run([installed_command("mjf-gridengine"), "--dry-run", role],
                                capture_output=True, text=True, timeout=60, env=environ)
        assert result.returncode == 0
        assert_nothing_of(result)
        assert f"$MJF_CONFIG '{secret}' is not used: this hook runs as root with the job's " \
            "environment" in result.stderr
    # The starter (the job's user) still takes it: it has no options.
    result = site.starter(site.job_script(), MJF_CONFIG=str(site.conf))
    assert (result.returncode, result.stderr) == (0, "")


@needs_root
def test_a_root_prolog_measures_the_scratch_execd_made_not_what_the_job_names(site):
    # TMP (a prolog's TMPDIR) named elsewhere: another filesystem (/dev/shm, a tmpfs)
    result = site.prolog(TMP="/dev/shm", TMPDIR="/dev/shm")
    assert result.returncode == 0
    info = os.statvfs(site.scratch)
    assert site.job()["scratch_limit_bytes"] == str(info.f_blocks * info.f_frsize)
    # The job's scratch (its user's, in a sticky directory of root's) replaced by a
    # symlink of the user's: no size at all.
    assert site.epilog().returncode == 0
    site.scratch.rmdir()
    site.scratch.symlink_to("/dev/shm")
    os.lchown(site.scratch, DAEMON, DAEMON)
    assert site.prolog().returncode == 0
    assert "scratch_limit_bytes" not in site.job()


@needs_root
def test_a_root_epilog_reads_no_usage_file_the_job_planted(site):
    """Where records are kept: the usage file read only where execd writes it, bounded."""
    records = site.tmp_path / "records"
    site.configure(mjf=f"[records]\ndir = {records}\n")
    assert site.prolog().returncode == 0
    secret = root_only_secret(site)
    (site.spool / "usage").symlink_to(secret)
    started = time.monotonic()
    result = site.epilog()
    assert result.returncode == 0 and time.monotonic() - started < 10
    assert_nothing_of(result)
    assert f"{site.spool}/usage is a symbolic link: not followed" in result.stderr
    assert not (site.base / "jobs" / "13").exists()
