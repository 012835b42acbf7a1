"""`mjf-lsf` as an installed command: pre-exec, starter and post-exec with environments
written from the LSF 10.1.0 documentation and a fake bjobs (working, hanging, garbled)."""

import json
import os
import resource
import subprocess
import sys
import time

import pytest

from tests.cli.job_view import STATUS_SHOW, show_script
from tests.conftest import (
    FIXTURES,
    config_writer,
    hooks_command,
    installed_command,
    pending,
    require,
    write_script,
)

HOST = os.uname().nodename
# What `bjobs -l` prints of a job with a 30-minute run limit (tests/fixtures/lsf-10.1).
BJOBS_L = f"cat {FIXTURES / 'lsf-10.1' / 'bjobs-l.txt'}"
SHOW = show_script()


class Site:
    def __init__(self, tmp_path, write_config):
        self.tmp_path = tmp_path
        self.bjobs = tmp_path / "bjobs"
        self.set_bjobs(BJOBS_L)
        self._write_config = write_config
        self.configure()

    def configure(self, extra="", base_dir=None):
        self.conf, self.base = self._write_config(
            f"command_timeout = 0.5\n[lsf]\nbjobs = {self.bjobs}\n{extra}", base_dir)

    def set_bjobs(self, body):
        write_script(self.bjobs, f"echo \"$@\" > {self.tmp_path}/bjobs.args\n{body}")

    def environ(self, name="single-host.env", **changes):
        text = (FIXTURES / "lsf-10.1" / name).read_text().replace("@HOST@", HOST)
        environ = dict(line.split("=", 1) for line in text.splitlines())
        # An unprivileged test run's fallback directory: this test's own, not /tmp/mjf-<uid>.
        runtime = self.tmp_path / "runtime"
        runtime.mkdir(mode=0o700, exist_ok=True)
        environ.update({"MJF_CONFIG": str(self.conf), "TMPDIR": str(self.tmp_path),
                        "XDG_RUNTIME_DIR": str(runtime)})
        for key, value in changes.items():
            if value is None:
                environ.pop(key, None)
            else:
                environ[key] = value
        return environ

    def run(self, *args, environ=None, limits=None, user=None):
        if "--config" not in args:
            # As a site's queue would: a root pre-exec takes no $MJF_CONFIG (the job's).
            args = ("--config", str(self.conf), *args)
        command = [installed_command("mjf-lsf"), *args]
        if user is not None:
            command = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups",
                       hooks_command("mjf-lsf"), *args]

        def apply_limits():
            for which, value in (limits or {}).items():
                resource.setrlimit(which, (value, resource.getrlimit(which)[1]))

        return subprocess.run(command, capture_output=True, text=True, timeout=60,
                              env=environ or self.environ(), preexec_fn=apply_limits)

    def starter(self, *extra, **kwargs):
        result = self.run("starter", sys.executable, "-c", SHOW, *extra, **kwargs)
        return result, json.loads(result.stdout) if result.stdout.startswith("{") else None

    def job(self, job_id="1234"):
        path = self.base / "jobs" / job_id / "jobfeatures"
        return {p.name: p.read_text() for p in path.iterdir()} if path.exists() else None


@pytest.fixture
def site(tmp_path, write_config):
    return Site(tmp_path, write_config)


def test_the_starter_sets_up_and_the_job_sees_every_value(site, tmp_path):
    limits = {resource.RLIMIT_CPU: 7200, resource.RLIMIT_RSS: 2 * 2**30}
    result, seen = site.starter("a b", limits=limits)
    assert result.returncode == 0, result.stderr
    assert seen["argv"] == ["a b"]
    assert seen["env"]["JOBFEATURES"] == f"{site.base}/jobs/1234/jobfeatures"
    assert seen["env"]["MACHINEFEATURES"] == f"{site.base}/machinefeatures"
    job = seen["job"]
    start = int(job.pop("jobstart_secs"))
    assert abs(start - time.time()) < 60 and int(job.pop("scratch_limit_bytes")) > 0
    assert job == {"job_id": "1234", "allocated_cpu": "4", "wall_limit_secs": "1800",
                   "cpu_limit_secs": "7200", "max_rss_bytes": str(2 * 2**30)}
    assert (tmp_path / "bjobs.args").read_text().split() == ["-l", "1234"]


@pytest.mark.parametrize(("name", "job_id", "cpus"), [
    ("multi-host.env", "5678", "3"), ("array.env", "1234[7]", "1"), ("minimal.env", "42", "2"),
])
def test_hosts_arrays_and_minimal_environments(site, name, job_id, cpus):
    result, seen = site.starter(environ=site.environ(name))
    assert result.returncode == 0, result.stderr
    assert seen["job"]["job_id"] == job_id and seen["job"]["allocated_cpu"] == cpus
    assert seen["env"]["JOBFEATURES"] == f"{site.base}/jobs/{job_id}/jobfeatures"


def test_a_single_argument_is_a_shell_command_line(site):
    result = site.run("starter", 'echo "one two" "$LSB_JOBID" $JOBFEATURES; exit 3')
    assert result.returncode == 3
    assert result.stdout == f"one two 1234 {site.base}/jobs/1234/jobfeatures\n"
    assert site.run("starter", "/nonexistent/job", "x").returncode == 127


def job_shell(site, command, environ=None, extra=""):
    """The job file's shell with ``JOB_STARTER = eval "$(mjf-lsf exports)";`` in it, as
    LSF puts a job starter's text before the job's command."""
    starter = f'eval "$({installed_command("mjf-lsf")} --config {site.conf} exports{extra})";'
    return subprocess.run(["/bin/sh", "-c", f"{starter} {command}"], capture_output=True,
                          text=True, timeout=60, env=environ or site.environ())


def test_exports_in_the_jobs_own_shell_keep_its_command_as_the_user_wrote_it(site):
    # What a quoted "%USRCMD" breaks on: a '"', several commands, the job's own status.
    result = job_shell(site, 'echo "one \\"two\\"" $LSB_JOBID; cat $JOBFEATURES/job_id; '
                             'echo; cat "$JOBFEATURES/wall_limit_secs"; exit 3')
    assert result.returncode == 3, result.stderr
    assert result.stdout == 'one "two" 1234\n1234\n1800'
    job = site.job()
    assert job["allocated_cpu"] == "4" and job["wall_limit_secs"] == "1800"


def test_exports_print_only_shell_words_whatever_the_paths(site, tmp_path):
    odd = tmp_path / "it's $(touch pwned) `x` dir"
    site.configure(base_dir=odd)
    result = job_shell(site, 'printf "%s" "$JOBFEATURES"')
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{odd}/jobs/1234/jobfeatures"
    assert not (tmp_path / "pwned").exists() and not os.path.exists("pwned")


def test_exports_without_mjf_leave_the_job_to_run_and_on_error_fail_ends_it(site):
    # The JOBFEATURES its submitter had (bsub passes the environment on) is not the job's.
    environ = site.environ(LSB_JOBID="not-a-number", JOBFEATURES="/elsewhere/jobfeatures")
    result = job_shell(site, 'echo "ran:${JOBFEATURES:-none}"', environ=environ)
    assert (result.returncode, result.stdout) == (0, "ran:none\n")
    assert "LSB_JOBID='not-a-number'" in result.stderr
    result = site.run("starter", 'echo "ran:${JOBFEATURES:-none}"', environ=environ)
    assert (result.returncode, result.stdout) == (0, "ran:none\n")
    site.conf.write_text(f"[mjf]\nbase_dir = {site.base}\nlog = stderr\non_error = fail\n")
    result = job_shell(site, "echo ran", environ=site.environ(LSB_JOBID="not-a-number"))
    assert (result.returncode, result.stdout) == (1, "")


def test_a_job_across_hosts_has_its_tasks_on_its_other_hosts_set_up_there(site, tmp_path):
    """LSF's RES runs a task a job starts on another of its hosts (lsrun, lsgrun) as
    ``/bin/sh -c "$LSF_JOB_STARTER COMMAND ARGS"``, with the job's environment: the job's
    starter names itself there, before a starter the job already has, so each host sets up
    its own share. Here this host is the job's second: its share is its 3 slots, in its
    own directory, whatever JOBFEATURES the first host's starter exported."""
    ours = f"'{installed_command('mjf-lsf')}' starter"
    result = job_shell(site, 'printf "%s" "$LSF_JOB_STARTER"',
                       environ=site.environ("multi-host.env"))
    assert (result.returncode, result.stdout) == (0, ours), result.stderr
    result = job_shell(site, 'printf "%s" "$LSF_JOB_STARTER"',
                       environ=site.environ("multi-host.env", LSF_JOB_STARTER="/usr/bin/env"))
    assert result.stdout == f"{ours} /usr/bin/env"
    result = job_shell(site, 'printf "%s" "${LSF_JOB_STARTER-none}"')  # this host alone
    assert result.stdout == "none"
    # The task on this host, as RES starts it (the words of its command joined by
    # spaces); the job's files are its own.
    show = tmp_path / "show.py"
    show.write_text(SHOW)
    task = subprocess.run(
        ["/bin/sh", "-c", f"{ours} {sys.executable} {show} one"],
        capture_output=True, text=True, timeout=60,
        env=site.environ("multi-host.env", LSF_JOB_STARTER=ours,
                         JOBFEATURES=f"{tmp_path}/first-host/jobs/5678/jobfeatures"))
    seen = json.loads(task.stdout)
    assert seen["argv"] == ["one"]
    assert seen["env"]["JOBFEATURES"] == f"{site.base}/jobs/5678/jobfeatures"
    assert seen["job"]["allocated_cpu"] == "3" and seen["job"]["job_id"] == "5678"


def test_pre_exec_starter_and_post_exec(site):
    pre = site.run("pre-exec")
    assert (pre.returncode, pre.stdout, pre.stderr) == (0, "", "")
    written = site.job()
    assert written["wall_limit_secs"] == "1800" and pending(site.base, "1234")
    _result, seen = site.starter(limits={resource.RLIMIT_CPU: 600})
    assert seen["env"]["JOBFEATURES"] == f"{site.base}/jobs/1234/jobfeatures"
    # The pre-exec is not the job: the starter completed its limits.
    assert seen["job"]["cpu_limit_secs"] == "600"
    assert not pending(site.base, "1234")
    post = site.run("post-exec")
    assert post.returncode == 0 and site.job() is None
    assert site.run("post-exec").returncode == 0  # idempotent


def test_root_pre_exec_then_the_users_starter(public_tmp_path):
    require(os.geteuid() == 0, "needs root to run the starter as another user")
    site = Site(public_tmp_path, config_writer(public_tmp_path))
    environ = site.environ(USER="nobody", LSB_JOB_EXECUSER="nobody")
    assert site.run("pre-exec", environ=environ).returncode == 0
    features = site.base / "jobs/1234/jobfeatures"
    assert features.stat().st_uid == 65534
    result = site.run("starter", "cat $JOBFEATURES/cpu_limit_secs", environ=environ,
                      limits={resource.RLIMIT_CPU: 900}, user=65534)
    assert (result.returncode, result.stdout) == (0, "900"), result.stderr
    assert not pending(site.base, "1234")
    assert site.run("post-exec", environ=environ).returncode == 0 and site.job() is None


@pytest.mark.parametrize(("bjobs", "message"), [
    ("sleep 30", "did not finish within 0.5 s"),
    ("printf ' RUNLIMIT\\n garbage\\n'", "RUNLIMIT without a value in minutes under it"),
    ("echo 'Job <1234> is not found' >&2; exit 255", "exited with status 255"),
    ("echo 'Job <1234>, User <user1>, Status <RUN>'", None),  # no run limit
])
def test_bjobs_trouble_leaves_only_the_wall_limit_out(site, bjobs, message):
    site.set_bjobs(bjobs)
    started = time.monotonic()
    result, seen = site.starter()
    assert time.monotonic() - started < 10
    assert result.returncode == 0 and seen["argv"] == []
    assert "wall_limit_secs" not in seen["job"] and seen["job"]["allocated_cpu"] == "4"
    if message:
        assert message in result.stderr


def test_bjobs_can_be_switched_off_and_a_config_default_used(site, tmp_path):
    site.configure("query_bjobs = no\n[jobfeatures]\nwall_limit_secs = 86400\n")
    _result, seen = site.starter(environ=site.environ())
    assert seen["job"]["wall_limit_secs"] == "86400"
    assert not (tmp_path / "bjobs.args").exists()


@pytest.mark.parametrize(("changes", "message"), [
    ({"LSB_JOBID": None}, "LSB_JOBID is missing"),
    ({"LSB_JOBID": "12/3"}, "is not an LSF job id"),
    ({"LSB_JOBINDEX": "seven"}, "is not an array index"),
])
def test_bad_job_ids_never_fail_the_pre_exec_and_the_job_still_runs(site, changes, message):
    environ = site.environ(**changes)
    pre = site.run("pre-exec", environ=environ)
    assert pre.returncode == 0 and message in pre.stderr
    result, seen = site.starter(environ=environ)
    assert result.returncode == 0 and seen["env"]["JOBFEATURES"] is None
    assert not (site.base / "jobs").exists() or os.listdir(site.base / "jobs") == []


@pytest.mark.parametrize(("changes", "message"), [
    ({"LSB_MCPU_HOSTS": "garbage"}, "is not pairs of host and count"),
    ({"LSB_MCPU_HOSTS": "elsewhere 4"}, "is not in LSB_MCPU_HOSTS"),
])
def test_bad_cpu_variables_leave_allocated_cpu_out(site, changes, message):
    result, seen = site.starter(environ=site.environ(**changes))
    assert message in result.stderr and "allocated_cpu" not in seen["job"]


def test_pre_exec_never_fails_unless_configured(site, tmp_path):
    (tmp_path / "file").write_text("")
    site.configure(base_dir=tmp_path / "file/base")
    site.environ()  # makes the private fallback directory's parent (unprivileged runs)
    (tmp_path / "runtime/mjf").write_text("")  # and breaks the fallback too
    result = site.run("pre-exec")
    assert result.returncode == 0
    assert ("Not a directory" if os.geteuid() == 0 else "is not a directory of uid") \
        in result.stderr
    site.conf.write_text("[mjf]\non_error = sometimes\n")
    assert site.run("pre-exec").returncode == 0
    site.conf.write_text(f"[mjf]\nbase_dir = {tmp_path}/file/base\non_error = fail\n")
    assert site.run("pre-exec").returncode == 1  # never 99
    assert site.run("bogus").returncode == 0


def test_dry_run(site):
    result = site.run("--dry-run", "starter", "/bin/true")
    assert f"{site.base}/jobs/1234/jobfeatures/allocated_cpu = 4" in result.stdout
    assert "would exec: ['/bin/sh', '-c', '/bin/true']" in result.stdout
    assert not site.base.exists()


def test_what_the_starter_writes_passes_mjf_check(site):
    mjf = installed_command("mjf")
    environ = site.environ(LSB_MCPU_HOSTS=f"{HOST} {min(2, os.cpu_count())}")
    result = site.run("starter", f"{mjf} check; echo status=$?", environ=environ)
    assert result.stdout.splitlines()[-1] == "status=1", result.stdout  # no hs06: warnings
    assert "ERROR" not in result.stdout


@pytest.mark.parametrize("pre_exec", [False, True])
def test_with_jobstatus_the_job_gets_one_beside_its_jobfeatures(site, pre_exec):
    site.configure("[mjf]\njobstatus = yes\n")
    if pre_exec:  # the pre-exec makes the job's directory, the starter completes it
        assert site.run("pre-exec").returncode == 0
    result = site.run("starter", STATUS_SHOW)
    assert result.returncode == 0, result.stderr
    status, is_dir, entries, features = result.stdout.split("\n")[:4]
    job = f"{site.base}/jobs/1234"
    assert (status, is_dir, entries.strip(), features) == (
        f"{job}/jobstatus", "directory", "0", f"{job}/jobfeatures")
    assert site.run("post-exec").returncode == 0 and not os.path.exists(job)
    site.configure()
    assert site.run("starter", STATUS_SHOW).stdout.split("\n")[0] == "unset"


def test_a_root_post_exec_records_the_job_before_removing_its_directory(site):
    require(os.geteuid() == 0, "needs root: records are root's (a user's post-exec hands "
                               "its record in, see tests/unit/records/test_filing.py)")
    records = site.tmp_path / "records"
    site.configure(f"[records]\ndir = {records}\n")
    assert site.run("pre-exec").returncode == 0
    started = int(site.job()["jobstart_secs"])
    # What LSF says the ended job used (bjobs -l, recorded from volclava).
    site.set_bjobs(f"cat {FIXTURES / 'volclava-2.2' / 'bjobs-l-done.txt'}")
    assert site.run("post-exec").returncode == 0 and site.job() is None
    [path] = records.glob("*/*-1234.json")
    record = json.loads(path.read_text())
    assert (record["backend"], record["user"], record["queue"]) == \
        ("lsf", site.environ()["LSB_JOB_EXECUSER"], site.environ()["LSB_QUEUE"])
    assert record["requested"]["start_time"] == started
    assert record["requested"]["wall_limit_secs"] == 1800
    # A post-exec runs after the job, outside it: when it ended, and what LSF reports.
    delivered = record["delivered"]
    assert sorted(delivered) == ["consumption_rate", "cpu_secs", "end_time",
                                 "peak_memory_bytes", "wall_secs"], delivered
    assert delivered["wall_secs"]["source"] == "end_time - jobstart_secs"
    assert delivered["cpu_secs"]["value"] == 4.4
    assert delivered["peak_memory_bytes"]["value"] == 5 * 2**20
    assert delivered["cpu_secs"]["source"].endswith("bjobs -l: CPU time used")
    assert site.run("post-exec").returncode == 0  # idempotent: no second record
    assert len(list(records.glob("*/*.json"))) == 1


# --- what a job's user can name to a root pre-exec or post-exec ------------------------
#
# With LSB_PRE_POST_EXEC_USER=root they run as root with the job's environment, which is
# its user's (LSF copies the submission environment): no program, library, config or
# directory it names may be run, loaded, read or removed by root.



@pytest.fixture
def as_root():
    require(os.geteuid() == 0, "a root pre-exec's checks: needs root")


needs_root = pytest.mark.usefixtures("as_root")


def fake_bjobs(directory, marker):
    """A bjobs of the job's user's: records that it ran, and with what environment."""
    return write_script(directory / "bjobs", f"env > {marker}\necho 99:00:00")


@needs_root
def test_a_root_pre_exec_never_runs_the_bjobs_of_the_jobs_lsf_bindir(site, tmp_path):
    users_bin = tmp_path / "users-bin"
    marker = tmp_path / "ran-as-root"
    fake_bjobs(users_bin, marker)
    site.configure()  # as it is: bjobs configured
    conf = tmp_path / "no-bjobs.conf"
    conf.write_text(site.conf.read_text().replace(f"bjobs = {site.bjobs}\n", ""))
    result = site.run("--config", str(conf), "pre-exec",
                      environ=site.environ(LSF_BINDIR=str(users_bin)))
    assert result.returncode == 0
    assert not marker.exists()
    assert "wall_limit_secs" not in site.job()  # where no bjobs of the host's was found


@needs_root
def test_a_root_pre_exec_gives_bjobs_none_of_the_jobs_environment(site, tmp_path):
    marker = tmp_path / "bjobs.env"
    site.set_bjobs(f"env > {marker}\n{BJOBS_L}")
    root_envdir = tmp_path / "lsf-conf"
    root_envdir.mkdir()
    users_envdir = tmp_path / "users-conf"
    users_envdir.mkdir()
    os.chown(users_envdir, 1, 1)
    environ = site.environ(LD_PRELOAD="/nonexistent/evil.so", PYTHONPATH="/nonexistent",
                           LSF_ENVDIR=str(root_envdir))
    assert site.run("pre-exec", environ=environ).returncode == 0
    given = dict(line.split("=", 1) for line in marker.read_text().splitlines()
                 if "=" in line)
    given.pop("PWD", None), given.pop("SHLVL", None), given.pop("_", None)
    assert given == {"PATH": "/usr/bin:/bin", "LSF_ENVDIR": str(root_envdir)}
    assert site.job()["wall_limit_secs"] == "1800"
    # An LSF_ENVDIR of the user's (their lsf.conf naming their own master): not given.
    assert site.run("post-exec", environ=environ).returncode == 0
    result = site.run("pre-exec", environ={**environ, "LSF_ENVDIR": str(users_envdir)})
    assert f"$LSF_ENVDIR not given to bjobs: {users_envdir} belongs to uid 1, not to root" \
        in result.stderr
    assert "LSF_ENVDIR" not in marker.read_text()


@needs_root
def test_a_root_pre_exec_measures_only_the_temporary_directory_lsf_made(site, tmp_path):
    made = tmp_path / "1234.tmpdir"  # LSF_TMPDIR/<job>.tmpdir, the job's user's
    made.mkdir()
    os.chown(made, 1, 1)
    assert site.run("pre-exec", environ=site.environ(TMPDIR=str(made))).returncode == 0
    info = os.statvfs(made)
    assert site.job()["scratch_limit_bytes"] == str(info.f_blocks * info.f_frsize)
    assert site.run("post-exec").returncode == 0
    # Another filesystem the user names (/dev/shm): no size; the starter, the user's, may.
    assert site.run("pre-exec", environ=site.environ(TMPDIR="/dev/shm")).returncode == 0
    assert "scratch_limit_bytes" not in site.job()
    assert site.run("post-exec").returncode == 0
    # An array element's: <job>_<index>.tmpdir
    element = tmp_path / "1234_7.tmpdir"
    element.mkdir()
    environ = site.environ("array.env", TMPDIR=str(element))
    assert site.run("pre-exec", environ=environ).returncode == 0
    assert "scratch_limit_bytes" in site.job("1234[7]")


@needs_root
def test_a_root_post_exec_removes_nothing_where_the_jobs_xdg_runtime_dir_points(site, tmp_path):
    """$XDG_RUNTIME_DIR names the private directory of a job runner's own user: as root
    that is the job's user's to name (a directory of root's, whose jobs/1234 it would
    remove)."""
    elsewhere = tmp_path / "roots" / "mjf" / "jobs" / "1234" / "jobfeatures"
    elsewhere.mkdir(parents=True)
    (elsewhere / "job_id").write_text("1234\n")
    environ = site.environ(XDG_RUNTIME_DIR=str(tmp_path / "roots"))
    assert site.run("pre-exec", environ=environ).returncode == 0
    assert site.run("post-exec", environ=environ).returncode == 0
    assert site.job() is None and (elsewhere / "job_id").exists()


@needs_root
def test_a_root_pre_exec_takes_no_mjf_config_from_the_job(site, tmp_path):
    secret = tmp_path / "private" / "secret"
    secret.parent.mkdir(mode=0o700)
    secret.write_text("[mjf]\nbase_dir = /etc\nmjf-secret-marker\n")
    secret.chmod(0o600)
    environ = site.environ(MJF_CONFIG=str(secret))
    result = subprocess.run([installed_command("mjf-lsf"), "--dry-run", "pre-exec"],
                            capture_output=True, text=True, timeout=60, env=environ)
    assert result.returncode == 0 and "mjf-secret-marker" not in result.stderr
    assert f"$MJF_CONFIG '{secret}' is not used" in result.stderr


def test_the_elim_reports_the_nodes_facts_as_lsf_resources(site):
    site.configure("[machinefeatures]\nhs06 = 123.5\n[publish]\nfacts = hs06, total_cpu\n"
                   "[submit]\nhs06_name = HEPscore\n")
    elim = subprocess.Popen([installed_command("mjf-lsf"), "--config", str(site.conf), "elim"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = elim.stdout.readline()
        assert line == f"2 HEPscore 123.5 total_cpu {os.cpu_count()}\n", elim.stderr
    finally:
        elim.kill()
        elim.wait(timeout=10)
        elim.stdout.close()
        elim.stderr.close()
