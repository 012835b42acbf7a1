"""`mjf check <base_dir>` and `mjf show <base_dir>` as a monitoring probe runs them: on an
idle node, and as a user who may not list jobs/ (``dir_mode = 0711``); `mjf check` as a
Nagios/NRPE plugin: its states, its first line, its exit statuses."""

import json
import os
import subprocess
import sys
import tempfile
import time
import traceback

import pytest
from click.testing import CliRunner

from mjf_hooks import check
from mjf_hooks.cli.interactive import cli
from mjf_hooks.store import Store
from tests.conftest import installed_command, require

NOBODY = 65534
MACHINE = {"total_cpu": "16", "hs06": "250", "grace_secs": "3600"}
JOB = {"allocated_cpu": "4", "wall_limit_secs": "3600", "cpu_limit_secs": "14400",
       "hs06_job": "62.5", "max_rss_bytes": str(8 * 2**30), "max_swap_bytes": "0",
       "scratch_limit_bytes": str(10**11), "grace_secs_job": "3600"}


def run(*args, env=None):
    return subprocess.run([installed_command("mjf"), *args], capture_output=True, text=True,
                          timeout=60, check=False, env=env)


def node(base, jobs=()):
    """A base_dir as the hooks write it: machine features and these jobs' directories."""
    store = Store(str(base))
    store.machine.write(MACHINE, frozenset(MACHINE))
    for job_id in jobs:
        store.create_job(job_id, {**JOB, "job_id": job_id,
                                  "jobstart_secs": str(int(time.time()) - 100)})
    return store


def run_as_nobody(*args):
    """``mjf ARGS`` as user nobody: (exit status, stdout, stderr).

    In a forked child that drops to nobody and calls what the installed ``mjf`` calls:
    the test interpreter may live where nobody cannot run it (pyenv under /root), and
    the copy tests/run installs for other users may predate this checkout.
    """
    require(os.geteuid() == 0, "needs root to run as another user")
    import mjf_hooks.cli.interactive  # noqa: F401  imported here: nobody may not read it
    from mjf_hooks.cli.mjf import main

    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        pid = os.fork()
        if pid == 0:  # the child: never returns into pytest
            code = 99
            try:
                sys.stdout = open(out.fileno(), "w", closefd=False)  # noqa: SIM115
                sys.stderr = open(err.fileno(), "w", closefd=False)  # noqa: SIM115
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
                os.chdir("/")
                code = main(list(args))
            except SystemExit as stop:
                code = stop.code if isinstance(stop.code, int) else 1
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        out.seek(0)
        err.seek(0)
        return os.waitstatus_to_exitcode(status), out.read(), err.read()


def test_a_healthy_idle_node_is_ok(tmp_path):
    base = tmp_path / "base"
    node(base)  # no jobs/ yet
    result = run("check", str(base))
    assert result.returncode == 0, result.stdout
    assert result.stdout.splitlines()[0].startswith("MJF OK - ")
    assert "$JOBFEATURES" not in result.stdout
    node(base, jobs=["7"]).remove_job("7")  # jobs/ there, and empty
    assert (base / "jobs").is_dir()
    result = run("check", str(base))
    assert result.returncode == 0 and result.stdout.splitlines()[0].startswith("MJF OK - ")
    shown = run("show", str(base))
    assert shown.returncode == 0 and "total_cpu" in shown.stdout and not shown.stderr


def test_a_machinefeatures_location_alone_is_a_nodes_check(tmp_path):
    node(tmp_path / "base")
    result = run("check", str(tmp_path / "base/machinefeatures/"))
    assert result.returncode == 0, result.stdout
    assert result.stdout.splitlines()[0] == ("MJF OK - the machine features pass (1 note) | "
                                             "jobs=0 errors=0 warnings=0")
    missing = run("check", str(tmp_path / "elsewhere/machinefeatures"))  # not written: broken
    assert missing.returncode == 2 and missing.stdout.startswith("MJF CRITICAL - "), \
        missing.stdout


def test_the_plugin_states_a_monitoring_system_acts_on(tmp_path):
    """OK for a healthy node, WARNING for a draining one, CRITICAL for a broken job
    directory: the first line says which and why, the exit status is the state."""
    base = tmp_path / "base"
    store = node(base, jobs=["7", "8"])
    healthy = run("check", str(base))
    assert healthy.returncode == 0, healthy.stdout
    assert healthy.stdout.splitlines()[0] == (
        "MJF OK - the machine features and 2 job directories pass (3 notes) | "
        "jobs=2 errors=0 warnings=0")
    shutdown = int(time.time()) + 7200
    store.machine.set_key("shutdowntime", str(shutdown))
    draining = run("check", str(base))
    assert draining.returncode == 1, draining.stdout
    first = draining.stdout.splitlines()[0]
    assert first.startswith(f"MJF WARNING - 1 warning in the machine features and 2 job "
                            f"directories: {base}/machinefeatures/shutdowntime: the machine is "
                            f"draining: it shuts down at {shutdown} (")
    assert first.endswith(" [draining] | jobs=2 errors=0 warnings=1")
    (base / "jobs/8/jobfeatures/wall_limit_secs").write_text("1h")
    broken = run("check", str(base))
    assert broken.returncode == 2, broken.stdout
    assert broken.stdout.splitlines()[0].startswith(
        f"MJF CRITICAL - 1 error, 1 warning in the machine features and 2 job directories: "
        f"{base}/jobs/8/jobfeatures/wall_limit_secs: ")
    assert f"ERROR   {base}/jobs/8/jobfeatures/wall_limit_secs: " in broken.stdout
    report = json.loads(run("check", "--json", str(base)).stdout)
    assert (report["status"], report["exit_code"]) == ("error", 2)
    assert report["summary"] == broken.stdout.splitlines()[0]


@pytest.mark.parametrize("args", [["--no-such-option"], ["/no/such/base_dir"], [],
                                  ["--config", "/no/such/mjf.conf", "/no/such/base_dir"]],
                         ids=["unknown option", "no such location", "no location",
                              "a config that cannot be read"])
def test_what_cannot_be_checked_is_unknown_on_the_first_line(args):
    """Exit 3, not click's 2 (CRITICAL to a monitoring system), and said on stdout's first
    line, the only one NRPE passes on."""
    env = {name: value for name, value in os.environ.items()
           if name not in ("MACHINEFEATURES", "JOBFEATURES")}
    result = run("check", *args, env=env)
    assert result.returncode == 3, result.stdout + result.stderr
    assert result.stdout.startswith("MJF UNKNOWN - "), result.stdout
    assert "Traceback" not in result.stderr
    if args:
        document = json.loads(run("check", "--json", "/no/such/base_dir", env=env).stdout)
        assert (document["status"], document["exit_code"]) == ("unknown", 3)


def test_our_own_bug_is_unknown_not_a_warning(monkeypatch, tmp_path):
    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(check, "check", broken)
    result = CliRunner().invoke(cli, ["check", str(tmp_path / "machinefeatures")],
                                catch_exceptions=False)
    assert result.exit_code == 3
    assert result.output.splitlines()[0] == ("MJF UNKNOWN - internal error: RuntimeError: "
                                             "a bug")


def test_a_job_that_does_not_exist_stays_an_error_when_named(tmp_path):
    node(tmp_path / "base")
    missing = str(tmp_path / "base/jobs/7/jobfeatures")
    result = run("check", str(tmp_path / "base"), missing)
    assert result.returncode == 2 and f"{missing}: No such file" in result.stdout
    shown = run("show", missing)
    assert shown.returncode == 1 and shown.stderr == f"mjf show: {missing}: No such file " \
                                                     "or directory\n"


def test_jobs_that_a_monitoring_user_cannot_list_are_a_warning(public_tmp_path):
    require(os.geteuid() == 0, "needs root to run as another user")
    base = public_tmp_path / "base"
    node(base, jobs=["7"])
    (base / "jobs").chmod(0o711)
    assert run("check", str(base)).returncode == 0  # root sees the job, and it is fine
    status, out, err = run_as_nobody("check", str(base))
    assert "Traceback" not in err and status == 1, out + err
    assert (f"WARNING {base}/jobs: cannot be listed (Permission denied): job directories were "
            "not checked (run the check as root) [location]") in out.splitlines()
    assert f"{base}/machinefeatures/shutdowntime" in out  # the machine features were checked
    assert "ERROR" not in out and "/jobs/7" not in out


def test_show_prints_what_a_monitoring_user_can_read(public_tmp_path):
    require(os.geteuid() == 0, "needs root to run as another user")
    base = public_tmp_path / "base"
    node(base, jobs=["7"])
    (base / "jobs").chmod(0o711)
    status, out, err = run_as_nobody("show", str(base))
    assert status == 1 and "Traceback" not in err
    assert err == (f"mjf show: {base}/jobs: cannot be listed (Permission denied): its jobs "
                   "are not shown\n")
    assert out.splitlines()[0] == f"MACHINEFEATURES={base}/machinefeatures"
    assert "  total_cpu   16" in out.splitlines()
    status, out, err = run_as_nobody("show", "--json", str(base))
    assert status == 1 and err.count("\n") == 1
    assert '"total_cpu": 16' in out
