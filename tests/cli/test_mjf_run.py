"""`mjf run` end to end, as a real subprocess: what the job sees, exit codes, signals."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from tests.conftest import installed_command, require

# The job dumps what it sees: its MJF variables and every file's exact bytes.
DUMP = (
    "import json, os\n"
    "out = {'env': {k: os.environ.get(k) for k in ('MACHINEFEATURES', 'JOBFEATURES')}}\n"
    "for var in ('MACHINEFEATURES', 'JOBFEATURES'):\n"
    "    d = os.environ[var]\n"
    "    out[var] = {n: open(os.path.join(d, n), 'rb').read().decode() for n in os.listdir(d)}\n"
    "print(json.dumps(out))\n"
)


def mjf(*args, config=None, check=False, **kwargs):
    env = {**os.environ, **kwargs.pop("env", {})}
    if config is not None:
        env["MJF_CONFIG"] = str(config)
    return subprocess.run([installed_command("mjf"), *args], env=env, capture_output=True,
                          text=True, check=check, timeout=60, **kwargs)


def test_the_job_sees_every_value(write_config, tmp_path):
    conf, base = write_config("[machinefeatures]\nhs06_per_cpu = 10\ngrace_secs = 3600\n")
    result = mjf("run", "--cpus", "1", "--wall-limit", "600", "--memory", "1000000",
                 "--job-id", "job.1", "--", sys.executable, "-c", DUMP, config=conf,
                 env={"TMPDIR": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert seen["env"] == {"MACHINEFEATURES": f"{base}/machinefeatures",
                           "JOBFEATURES": f"{base}/jobs/job.1/jobfeatures"}
    total = str(os.cpu_count())
    assert seen["MACHINEFEATURES"] == {"total_cpu": total, "hs06": str(10 * int(total)),
                                       "grace_secs": "3600"}
    job = seen["JOBFEATURES"]
    start = int(job.pop("jobstart_secs"))
    assert abs(start - time.time()) < 60
    scratch = os.statvfs(tmp_path)
    assert job == {
        "job_id": "job.1", "allocated_cpu": "1", "wall_limit_secs": "600",
        "cpu_limit_secs": "600", "max_rss_bytes": "1000000", "hs06_job": "10",
        "grace_secs_job": "3600", "scratch_limit_bytes": str(scratch.f_blocks * scratch.f_frsize),
    }
    assert os.listdir(base / "jobs") == []  # cleaned up after the job


def test_defaults_come_from_this_process(write_config):
    conf, _ = write_config()
    result = mjf("run", "--", "sh", "-c", 'cat "$JOBFEATURES/allocated_cpu" "$JOBFEATURES/job_id"',
                 config=conf)
    allocated = str(len(os.sched_getaffinity(0)))
    assert result.stdout.startswith(allocated)
    assert result.stdout[len(allocated):].startswith(os.uname().nodename + ".")


@pytest.mark.parametrize(("command", "status"), [
    (["sh", "-c", "exit 7"], 7), (["true"], 0), (["/nonexistent/cmd"], 127),
    (["sh", "-c", "kill -TERM $$"], -signal.SIGTERM),
])
def test_exit_status_is_the_commands(write_config, command, status):
    conf, base = write_config()
    result = mjf("run", "--", *command, config=conf)
    assert result.returncode == status, result.stderr
    assert os.listdir(base / "jobs") == []


def test_signals_reach_the_job_and_cleanup_still_happens(write_config, tmp_path):
    conf, base = write_config()
    marker = tmp_path / "got"
    script = f'trap "echo TERM > {marker}; exit 42" TERM; echo ready; while :; do sleep 0.05; done'
    process = subprocess.Popen([installed_command("mjf"), "run", "--", "sh", "-c", script],
                               env={**os.environ, "MJF_CONFIG": str(conf)},
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "ready"
    assert len(os.listdir(base / "jobs")) == 1
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 42
    assert marker.read_text().strip() == "TERM"
    assert os.listdir(base / "jobs") == []


def test_dry_run_prints_the_plan_and_touches_nothing(write_config):
    conf, base = write_config()
    result = mjf("run", "--dry-run", "--cpus", "2", "--job-id", "j1", "--", "false", config=conf)
    assert result.returncode == 0
    assert f"{base}/jobs/j1/jobfeatures/allocated_cpu = 2" in result.stdout
    assert f"export JOBFEATURES={base}/jobs/j1/jobfeatures" in result.stdout
    assert f"export MACHINEFEATURES={base}/machinefeatures" in result.stdout
    assert not base.exists()


def test_verbose_says_where_each_value_came_from(write_config):
    conf, _ = write_config()
    result = mjf("run", "--verbose", "--cpus", "2", "--", "true", config=conf)
    assert "allocated_cpu = 2  (mjf run --cpus)" in result.stderr
    assert "total_cpu" in result.stderr and "/proc/cpuinfo" in result.stderr


def test_env_file_replaces_the_environment(write_config, tmp_path):
    conf, _ = write_config()
    env_file = tmp_path / "job.env"
    env_file.write_text(f"# recorded\nPATH=/usr/bin:/bin\nFOO=bar baz\nMJF_CONFIG={conf}\n")
    result = mjf("run", "--env-file", str(env_file), "--", "/usr/bin/env", config=conf)
    lines = set(result.stdout.splitlines())
    assert {"FOO=bar baz", "PATH=/usr/bin:/bin"} <= lines
    assert not any(line.startswith("HOME=") for line in lines)


def test_a_broken_config_still_runs_the_job(tmp_path):
    conf = tmp_path / "mjf.conf"
    conf.write_text("[machinefeatures]\nhs06 = fast\n")
    result = mjf("run", "--", "sh", "-c", 'echo "ran:${JOBFEATURES:-none}"; exit 3', config=conf)
    assert result.returncode == 3
    assert result.stdout.strip() == "ran:none"
    assert f"{conf}, line 2: [machinefeatures] hs06 = 'fast'" in result.stderr


def test_a_store_error_still_runs_the_job_unless_on_error_is_fail(tmp_path):
    (tmp_path / "file").write_text("")
    # Unprivileged, the unwritable base_dir sends the job to its private directory: make
    # that one fail too.
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    (runtime / "mjf").write_text("")
    env = {"XDG_RUNTIME_DIR": str(runtime)}
    conf = tmp_path / "mjf.conf"
    conf.write_text(f"[mjf]\nbase_dir = {tmp_path}/file/base\nlog = stderr\n")
    result = mjf("run", "--", "sh", "-c", "echo ran", config=conf, env=env)
    assert (result.returncode, result.stdout) == (0, "ran\n")
    assert ("Not a directory" if os.geteuid() == 0 else "is not a directory of uid") \
        in result.stderr
    conf.write_text(f"[mjf]\nbase_dir = {tmp_path}/file/base\nlog = stderr\non_error = fail\n")
    result = mjf("run", "--", "sh", "-c", "echo ran", config=conf, env=env)
    assert (result.returncode, result.stdout) == (1, "")


def test_usage_errors(write_config):
    conf, _ = write_config()
    assert mjf("run", config=conf).returncode == 2
    result = mjf("run", "--cpus", "zero", "--", "true", config=conf)
    assert result.returncode == 2 and "--cpus must be a positive whole number" in result.stderr
    assert mjf("run", "--bogus", "--", "true", config=conf).returncode == 2
    assert "usage: mjf run" in mjf("run", "--help", config=conf).stdout


def test_unprivileged_user_falls_back_to_a_private_dir():
    require(os.geteuid() == 0, "needs root to run as another user")
    directory = tempfile.mkdtemp(prefix="mjf-test-")  # readable by nobody, unlike tmp_path
    os.chmod(directory, 0o755)
    conf = os.path.join(directory, "mjf.conf")
    with open(conf, "w") as handle:
        handle.write("[mjf]\nbase_dir = /root/not-for-nobody/mjf\nlog = stderr\n")
    os.chmod(conf, 0o644)
    uid = 65534
    private = f"/tmp/mjf-{uid}"
    existed = os.path.lexists(private)  # someone's own: left as it is
    command = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
               installed_command("mjf"), "run", "--", "sh", "-c", 'echo "$JOBFEATURES"']
    env = {"MJF_CONFIG": str(conf), "PATH": "/usr/bin:/bin"}
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60,
                            cwd="/")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"/tmp/mjf-{uid}/jobs/")
    assert f"using /tmp/mjf-{uid} for this job" in result.stderr
    assert not os.path.exists("/root/not-for-nobody")
    shutil.rmtree(directory)
    if not existed:  # what this test made
        shutil.rmtree(private)


def test_stale_machine_features_are_brought_up_to_date(write_config):
    conf, base = write_config()
    (base / "machinefeatures").mkdir(parents=True)
    (base / "machinefeatures/total_cpu").write_text("999")
    result = mjf("run", "--", "sh", "-c", 'cat "$MACHINEFEATURES/total_cpu"', config=conf)
    assert result.stdout == str(os.cpu_count())


# Signals that stop rather than end a process: a shell would wait for the job too.
_STOPPING = {signal.SIGSTOP, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU}


@pytest.mark.parametrize("number", [number for number in range(1, 32)
                                    if number not in _STOPPING] + [signal.SIGRTMIN])
def test_a_job_killed_by_any_signal_ends_mjf_run_as_it_ended(write_config, tmp_path, number):
    conf, base = write_config()
    mjf_command = installed_command("mjf")
    # What a calling shell reports: the job run bare, then run by mjf run.
    job = f"kill -{number} $$"
    bare = subprocess.run(["sh", "-c", f"sh -c '{job}'; echo $?"], capture_output=True,
                          text=True, timeout=60, cwd=tmp_path)
    wrapped = subprocess.run(["sh", "-c", f"{mjf_command} run -- sh -c '{job}'; echo $?"],
                             capture_output=True, text=True, timeout=60, cwd=tmp_path,
                             env={**os.environ, "MJF_CONFIG": str(conf)})
    assert wrapped.stdout == bare.stdout, (number, wrapped.stderr)
    assert "internal error" not in wrapped.stderr and "Traceback" not in wrapped.stderr
    assert os.listdir(base / "jobs") == []
    assert not list(tmp_path.glob("core*"))
