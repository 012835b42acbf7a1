"""`mjf-htcondor-wrapper` and `mjf-htcondor-cron` as installed commands, with the ads
recorded in a real HTCondor 23.9 job and a fresh scratch directory per run."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.cli.job_view import STATUS_SHOW, show_script
from tests.conftest import FIXTURES, hooks_command, installed_command, require, write_script

ADS = FIXTURES / "htcondor-23.9"
# The job prints its argv and what it sees, as JSON.
SHOW = show_script("FOO")


@pytest.fixture
def starter(tmp_path, write_config):
    return Starter(tmp_path, write_config)


class Starter:
    """What HTCondor's starter gives a USER_JOB_WRAPPER: env, ad files, a scratch dir."""

    def __init__(self, tmp_path, write_config):
        self.tmp_path = tmp_path
        self.scratch = tmp_path / "execute/dir_18677"
        self.scratch.mkdir(parents=True)
        self.scratch.chmod(0o700)
        shutil.copy(ADS / "job.ad", self.scratch / ".job.ad")
        shutil.copy(ADS / "machine.ad", self.scratch / ".machine.ad")
        self._write_config = write_config
        self.conf, self.base = write_config()
        self.env = {
            "_CONDOR_SCRATCH_DIR": str(self.scratch), "TMPDIR": str(self.scratch),
            "_CONDOR_JOB_AD": str(self.scratch / ".job.ad"),
            "_CONDOR_MACHINE_AD": str(self.scratch / ".machine.ad"),
            "_CONDOR_WRAPPER_ERROR_FILE": str(self.scratch / ".job_wrapper_failure"),
            "_CONDOR_SLOT": "slot1_1", "BATCH_SYSTEM": "HTCondor", "FOO": "bar",
            "MJF_CONFIG": str(self.conf),
        }  # no PATH, HOME or USER: as recorded

    def configure(self, extra):
        self.conf, self.base = self._write_config(extra)
        self.env["MJF_CONFIG"] = str(self.conf)

    def run(self, *job_argv, **env_changes):
        env = {**self.env, **env_changes}
        env = {k: v for k, v in env.items() if v is not None}
        return subprocess.run([installed_command("mjf-htcondor-wrapper"), *job_argv],
                              capture_output=True, text=True, env=env, timeout=60)

    def show(self, *extra_args, **env_changes):
        result = self.run(sys.executable, "-c", SHOW, *extra_args, **env_changes)
        return result, json.loads(result.stdout) if result.stdout.startswith("{") else None

    def error_file(self):
        path = self.scratch / ".job_wrapper_failure"
        return path.read_text() if path.exists() else None

    def outside_scratch(self):
        """Files that appeared in tmp_path outside the scratch dir (besides the config)."""
        return sorted(str(p.relative_to(self.tmp_path)) for p in self.tmp_path.rglob("*")
                      if self.scratch not in p.parents and p != self.scratch
                      and p.name != "mjf.conf" and p != self.scratch.parent)


def test_the_job_sees_every_value_and_its_argv_untouched(starter):
    args = ["a b", 'q"uote', "", "new\nline", "$HOME", "--dry-run"]
    result, seen = starter.show(*args)
    assert result.returncode == 0, result.stderr
    assert seen["argv"] == args
    scratch = starter.scratch
    job_dir = f"{scratch}/.mjf/jobs/vm#1.0#1795319385/jobfeatures"
    assert seen["env"] == {"MACHINEFEATURES": f"{scratch}/.mjf/machinefeatures",
                           "JOBFEATURES": job_dir, "FOO": "bar"}
    assert seen["job"] == {
        "job_id": "vm#1.0#1795319385", "jobstart_secs": "1795319470", "allocated_cpu": "1",
        "max_rss_bytes": str(min(384 * 2**20, _cgroup_limit())),
        "scratch_limit_bytes": str(103424 * 1024), "wall_limit_secs": "300",
        "cpu_limit_secs": "300",
    }
    assert starter.outside_scratch() == [] and starter.error_file() is None


def _cgroup_limit():
    from mjf_hooks.probe import cgroup

    limits = cgroup.limits()
    return limits.memory_bytes if limits and limits.memory_bytes else 2**63


def test_exit_status_is_the_jobs(starter):
    assert starter.run("/bin/sh", "-c", "exit 7").returncode == 7


def test_site_machine_features_are_exported_as_they_are(starter):
    machine = starter.base / "machinefeatures"
    machine.mkdir(parents=True)
    (machine / "total_cpu").write_text("64")
    _, seen = starter.show()
    assert seen["env"]["MACHINEFEATURES"] == str(machine)
    assert os.listdir(machine) == ["total_cpu"]


def test_a_chained_wrapper_runs_with_the_job_argv(starter):
    chained = write_script(starter.tmp_path / "apptainer-wrapper",
                           f'echo "chained:$JOBFEATURES" > {starter.tmp_path}/chain.log\n'
                           'exec "$@"')
    starter.configure(f"[htcondor]\nnext_wrapper = {chained}\n")
    result, seen = starter.show("x y")
    assert result.returncode == 0 and seen["argv"] == ["x y"]
    log = (starter.tmp_path / "chain.log").read_text()
    assert log.startswith("chained:") and log.strip().endswith("/jobfeatures")


def test_custom_wall_time_attribute_and_job_ids(starter):
    with open(starter.scratch / ".job.ad", "a") as ad:
        ad.write("MaxWallTimeMins = 90\n")
    starter.configure("[htcondor]\nwall_limit_attribute = MaxWallTimeMins\n"
                      "wall_limit_unit = minutes\njob_id = cluster_proc\n")
    _, seen = starter.show()
    assert seen["job"]["wall_limit_secs"] == "5400" and seen["job"]["job_id"] == "1.0"


@pytest.mark.parametrize(("ad", "content", "logged", "missing"), [
    # Without the slot's values: RequestCpus, and the scratch filesystem's size, stand in.
    (".machine.ad", None, "_CONDOR_MACHINE_AD", ["max_rss_bytes"]),
    (".machine.ad", "", "the machine ad has no attributes", ["max_rss_bytes"]),
    (".machine.ad", "Cpus = \"four\"\nMemory = 10 * 60\nDisk = 99999999999999999999999\n",
     "machine ad Cpus is 'four'", ["max_rss_bytes"]),
    (".machine.ad", "Cpus = 2\nMemory = \xff\xfe\n", "machine ad Memory", ["max_rss_bytes"]),
    (".job.ad", "GlobalJobId = \"vm#1.0#17", "GlobalJobId is missing", []),
])
def test_bad_ads_still_run_the_job(starter, ad, content, logged, missing):
    path = starter.scratch / ad
    if content is None:
        path.unlink()
    else:
        path.write_bytes(content.encode("latin-1"))
    result, seen = starter.show("arg")
    assert result.returncode == 0 and seen["argv"] == ["arg"]
    assert logged in result.stderr
    if seen["job"] is not None:
        assert not set(missing) & set(seen["job"])
    assert starter.outside_scratch() == [] and starter.error_file() is None


def test_no_job_ad_means_no_job_id_and_no_mjf_but_the_job_runs(starter):
    (starter.scratch / ".job.ad").unlink()
    result, seen = starter.show()
    assert result.returncode == 0 and seen["env"]["JOBFEATURES"] is None
    assert "cannot tell the job's id" in result.stderr


@pytest.mark.parametrize("scratch", [None, "relative/dir", "/nonexistent/dir"])
def test_unusable_scratch_still_runs_the_job(starter, scratch):
    result, seen = starter.show(_CONDOR_SCRATCH_DIR=scratch)
    assert result.returncode == 0 and seen["env"]["JOBFEATURES"] is None
    assert "mjf-htcondor-wrapper: error:" in result.stderr
    assert starter.outside_scratch() == []


def test_unwritable_scratch_still_runs_the_job(starter):
    require(os.geteuid() == 0, "needs root to run as another user")
    os.chmod(starter.tmp_path, 0o755)
    os.chmod(starter.conf, 0o644)
    result = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
         hooks_command("mjf-htcondor-wrapper"), "/bin/sh", "-c", "echo ran $JOBFEATURES"],
        capture_output=True, text=True, env=starter.env, timeout=60)
    assert result.stdout == "ran\n"
    assert "Permission denied" in result.stderr
    assert not (starter.scratch / ".mjf").exists()


def test_a_failing_exec_is_one_line_for_htcondor(starter):
    result = starter.run("/nonexistent/job", "arg")
    assert result.returncode == 1
    assert starter.error_file() == ("mjf-htcondor-wrapper: cannot execute /nonexistent/job: "
                                    "No such file or directory\n")


def test_on_error_fail_reports_and_does_not_run_the_job(starter, tmp_path):
    starter.configure("[mjf]\non_error = fail\n")
    result = starter.run("/bin/sh", "-c", f"touch {tmp_path}/ran", _CONDOR_SCRATCH_DIR=None)
    assert result.returncode == 1 and not (tmp_path / "ran").exists()
    assert starter.error_file().count("\n") == 1


def test_a_broken_config_still_runs_the_job(starter):
    starter.conf.write_text("[htcondor]\nwall_limit_unit = fortnights\n")
    result, seen = starter.show()
    assert result.returncode == 0 and seen["env"]["JOBFEATURES"] is None
    assert "wall_limit_unit = 'fortnights': must be one of seconds, minutes, hours" \
        in result.stderr


def test_replay_by_hand_with_dry_run(starter, tmp_path):
    env_file = tmp_path / "wrapper.env"
    env_file.write_text("".join(f"{k}={v}\n" for k, v in starter.env.items()))
    result = subprocess.run([installed_command("mjf"), "htcondor-wrapper", "--dry-run",
                             "--env-file", str(env_file), "--", "/bin/true", "x"],
                            capture_output=True, text=True, timeout=60,
                            env={"MJF_CONFIG": str(starter.conf)})
    assert result.returncode == 0, result.stderr
    assert "/jobs/vm#1.0#1795319385/jobfeatures/wall_limit_secs = 300" in result.stdout
    assert "would exec: ['/bin/true', 'x']" in result.stdout
    assert not (starter.scratch / ".mjf").exists()


def test_cron_prints_machine_attributes(starter):
    starter.configure("[machinefeatures]\nhs06 = 100\ngrace_secs = 3600\n")
    (starter.base / "machinefeatures").mkdir(parents=True)
    (starter.base / "machinefeatures/shutdowntime").write_text("1795400000")
    result = subprocess.run([installed_command("mjf-htcondor-cron")], capture_output=True,
                            text=True, env={"MJF_CONFIG": str(starter.conf)}, timeout=60)
    assert result.returncode == 0
    assert sorted(result.stdout.splitlines()) == [
        "MJF_MACHINE_GRACE_SECS = 3600", "MJF_MACHINE_HS06 = 100",
        "MJF_MACHINE_SHUTDOWNTIME = 1795400000", f"MJF_MACHINE_TOTAL_CPU = {os.cpu_count()}"]
    assert os.listdir(starter.base / "machinefeatures") == ["shutdowntime"]  # not written
    (starter.base / "machinefeatures/shutdowntime").unlink()  # drain cancelled
    result = subprocess.run([installed_command("mjf-htcondor-cron")], capture_output=True,
                            text=True, env={"MJF_CONFIG": str(starter.conf)}, timeout=60)
    assert "MJF_MACHINE_SHUTDOWNTIME = undefined" in result.stdout.splitlines()


def test_what_the_wrapper_writes_passes_mjf_check(starter):
    bindir = os.path.dirname(installed_command("mjf"))
    result = starter.run("/bin/sh", "-c", f"{bindir}/mjf check; echo status=$?")
    assert result.stdout.splitlines()[-1] == "status=1", result.stdout  # no hs06: warnings
    assert "ERROR" not in result.stdout


def test_with_jobstatus_the_job_gets_one_beside_its_jobfeatures(starter):
    starter.configure("[mjf]\njobstatus = yes\n")
    result = starter.run("/bin/sh", "-c", STATUS_SHOW)
    assert result.returncode == 0, result.stderr
    status, is_dir, entries, features = result.stdout.split("\n")[:4]
    job = f"{starter.scratch}/.mjf/jobs/vm#1.0#1795319385"
    assert (status, is_dir, entries.strip(), features) == (
        f"{job}/jobstatus", "directory", "0", f"{job}/jobfeatures")
    assert starter.outside_scratch() == [] and starter.error_file() is None
    starter.configure("[mjf]\njobstatus = no\n")
    result = starter.run("/bin/sh", "-c", STATUS_SHOW)
    assert result.stdout.split("\n")[0] == "unset"
