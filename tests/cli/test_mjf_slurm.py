"""`mjf-slurm` and `mjf-slurm-taskprolog` as installed commands, replaying recorded
Slurm 22.05 hook environments, with a fake scontrol (working, missing, hanging, garbled)."""

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from mjf_hooks.batch.slurm import parse_local_time
from tests.conftest import fixture_text, installed_command, pending, require, write_script

SCONTROL_OUTPUT = fixture_text("slurm-22.05/scontrol-show-job-o.txt")
START = parse_local_time("2026-11-22T05:11:35")


@pytest.fixture
def slurm_site(tmp_path, write_config):
    """A config whose scontrol is a fake printing a recorded record; returns helpers."""
    scontrol = tmp_path / "scontrol"
    site = Site(tmp_path, scontrol, write_config)
    site.set_scontrol(f"cat <<'EOF'\n{SCONTROL_OUTPUT}EOF\n")
    return site


class Site:
    def __init__(self, tmp_path, scontrol, write_config):
        self.tmp_path = tmp_path
        self.scontrol = scontrol
        self.write_config = write_config
        self.configure()

    def configure(self, extra="", base_dir=None):
        self.conf, self.base = self.write_config(
            f"command_timeout = 0.5\n[slurm]\nscontrol = {self.scontrol}\n{extra}", base_dir)

    def set_scontrol(self, body):
        write_script(self.scontrol, body)

    def env_file(self, name="prolog-sbatch.env", **changes):
        """A recorded hook environment, with variables changed (None removes one)."""
        lines = fixture_text(f"slurm-22.05/{name}").split("# scontrol show job")[0].splitlines()
        environ = dict(line.split("=", 1) for line in lines if "=" in line and line[0] != "#")
        for name_, value in changes.items():
            if value is None:
                environ.pop(name_, None)
            else:
                environ[name_] = value
        path = self.tmp_path / "job.env"
        path.write_text("".join(f"{k}={v}\n" for k, v in environ.items()))
        return path

    def run(self, *args, env_file=None, command="mjf-slurm"):
        argv = [installed_command(command), *args]
        if env_file is not None:
            argv += ["--env-file", str(env_file)]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60,
                              env={"MJF_CONFIG": str(self.conf), "PATH": "/usr/bin:/bin"})

    def job(self, job_id="2"):
        path = self.base / "jobs" / job_id / "jobfeatures"
        return {p.name: p.read_text() for p in path.iterdir()} if path.exists() else None

    def leftovers(self):
        """Everything under tmp_path that is neither ours nor a complete job directory."""
        jobs = self.base / "jobs"
        hidden = [p.name for p in jobs.iterdir() if p.name.startswith(".")] if jobs.exists() else []
        outside = sorted(p.name for p in self.tmp_path.iterdir())
        return hidden, [name for name in outside if name not in ("base", "mjf.conf", "scontrol",
                                                                 "job.env")]


def test_prolog_writes_what_the_recorded_job_requested(slurm_site):
    env = slurm_site.env_file(SLURM_JOB_ID="2", SLURM_JOBID="2")
    result = slurm_site.run("prolog", env_file=env)
    assert result.returncode == 0, result.stderr
    assert _without_scratch(slurm_site.job()) == {
        "job_id": "2", "allocated_cpu": "2", "jobstart_secs": str(START),
        "wall_limit_secs": "300", "cpu_limit_secs": "600", "max_rss_bytes": str(200 * 2**20),
    }
    jobfeatures = slurm_site.base / "jobs/2/jobfeatures"
    if os.geteuid() == 0:  # complete: the job may read, not write
        assert (jobfeatures.stat().st_uid, jobfeatures.stat().st_gid) == (0, 1001)
        assert (jobfeatures.parent.stat().st_uid, jobfeatures.parent.stat().st_gid) == (0, 1001)
    assert (slurm_site.base / "machinefeatures/total_cpu").read_text() == str(os.cpu_count())
    assert slurm_site.leftovers() == ([], [])


def _without_scratch(values):
    values = dict(values)
    assert int(values.pop("scratch_limit_bytes")) > 0
    return values


def test_context_variable_dispatches_and_epilog_removes_only_its_job(slurm_site):
    prolog_env = slurm_site.env_file(SLURM_JOB_ID="2")
    assert slurm_site.run(env_file=prolog_env).returncode == 0  # SLURM_SCRIPT_CONTEXT=prolog
    other = slurm_site.env_file(SLURM_JOB_ID="7", SLURM_JOBID="7")
    assert slurm_site.run("prolog", env_file=other).returncode == 0
    epilog_env = slurm_site.env_file("epilog.env", SLURM_JOB_ID="2")
    assert slurm_site.run(env_file=epilog_env).returncode == 0
    assert slurm_site.job("2") is None and slurm_site.job("7")["job_id"] == "7"
    again = slurm_site.run(env_file=epilog_env)  # idempotent
    assert again.returncode == 0 and again.stderr == ""
    assert sorted(os.listdir(slurm_site.base / "jobs")) == ["7"]


def test_dry_run_prints_plan_and_writes_nothing(slurm_site):
    result = slurm_site.run("prolog", "--dry-run", env_file=slurm_site.env_file())
    assert f"{slurm_site.base}/jobs/3/jobfeatures/wall_limit_secs = 300" in result.stdout
    assert not slurm_site.base.exists()


def test_scontrol_is_not_run_when_slurm_23_02_variables_are_there(slurm_site, tmp_path):
    slurm_site.set_scontrol(f"touch {tmp_path}/scontrol-was-run\n")
    env = slurm_site.env_file(SLURM_JOB_START_TIME="1795319471", SLURM_JOB_END_TIME="1795323071")
    assert slurm_site.run("prolog", env_file=env).returncode == 0
    assert not (tmp_path / "scontrol-was-run").exists()
    job = slurm_site.job("3")
    assert job["wall_limit_secs"] == "3600" and job["jobstart_secs"] == "1795319471"
    assert pending(slurm_site.base, "3")  # memory unknown
    if os.geteuid() == 0:  # the job's own TaskProlog will complete it
        jobfeatures = slurm_site.base / "jobs/3/jobfeatures"
        assert (jobfeatures.stat().st_uid, jobfeatures.stat().st_gid) == (1001, 1001)


def test_taskprologs_print_exports_and_complete_pending_values(slurm_site):
    env = slurm_site.env_file(SLURM_JOB_START_TIME="1795319471", SLURM_JOB_END_TIME="1795323071")
    slurm_site.run("prolog", env_file=env)
    task_env = slurm_site.env_file("taskprolog-batchstep.env")
    expected = (f"export MACHINEFEATURES={slurm_site.base}/machinefeatures\n"
                f"export JOBFEATURES={slurm_site.base}/jobs/3/jobfeatures\n")
    environ = dict(line.split("=", 1) for line in task_env.read_text().splitlines())
    sh = subprocess.run([installed_command("mjf-slurm-taskprolog")], capture_output=True,
                        text=True, env={**environ, "MJF_CONFIG": str(slurm_site.conf)})
    assert (sh.returncode, sh.stdout) == (0, expected)
    job = slurm_site.job("3")
    assert job["max_rss_bytes"] == str(300 * 2**20)  # SLURM_MEM_PER_NODE=300
    assert not pending(slurm_site.base, "3")
    python = slurm_site.run("taskprolog", env_file=task_env)
    assert (python.returncode, python.stdout) == (0, expected)


def test_sh_taskprolog_without_a_job_directory_prints_nothing(slurm_site):
    sh = subprocess.run([installed_command("mjf-slurm-taskprolog")], capture_output=True,
                        text=True, env={"SLURM_JOB_ID": "99", "MJF_CONFIG": str(slurm_site.conf)})
    assert (sh.returncode, sh.stdout) == (0, "")
    for bad in ("", "../../etc", "1 2", "1;rm"):
        sh = subprocess.run([installed_command("mjf-slurm-taskprolog")], capture_output=True,
                            text=True, env={"SLURM_JOB_ID": bad,
                                            "MJF_CONFIG": str(slurm_site.conf)})
        assert (sh.returncode, sh.stdout) == (0, "")


@pytest.mark.parametrize(("changes", "message"), [
    ({"SLURM_JOB_ID": None, "SLURM_JOBID": None}, "SLURM_JOB_ID is missing or empty"),
    ({"SLURM_JOB_ID": "", "SLURM_JOBID": ""}, "SLURM_JOB_ID is missing or empty"),
    ({"SLURM_JOB_ID": "abc"}, "SLURM_JOB_ID='abc' is not a Slurm job id"),
    ({"SLURM_JOB_ID": "../../x"}, "SLURM_JOB_ID='../../x' is not a Slurm job id"),
    ({"SLURM_JOB_ID": "3/4"}, "SLURM_JOB_ID='3/4' is not a Slurm job id"),
])
def test_bad_job_ids_fail_softly_and_write_no_job(slurm_site, changes, message):
    result = slurm_site.run("prolog", env_file=slurm_site.env_file(**changes))
    assert result.returncode == 0
    assert message in result.stderr and result.stderr.count("\n") == 1
    assert not (slurm_site.base / "jobs").exists() or not os.listdir(slurm_site.base / "jobs")
    assert slurm_site.leftovers() == ([], [])


@pytest.mark.parametrize(("changes", "warning", "missing"), [
    ({"SLURM_JOB_CPUS_PER_NODE": "lots"}, "SLURM_JOB_CPUS_PER_NODE='lots'", "allocated_cpu"),
    ({"SLURMD_NODENAME": "elsewhere", "SLURM_JOB_CPUS_PER_NODE": "2(x2)",
      "SLURM_NODELIST": "vm[1-2]"}, "is not in the job's node list", "allocated_cpu"),
])
def test_bad_cpu_facts_are_warned_and_left_out(slurm_site, changes, warning, missing):
    result = slurm_site.run("prolog", env_file=slurm_site.env_file(**changes))
    assert result.returncode == 0 and warning in result.stderr
    job = slurm_site.job("3")
    assert missing not in job and job["wall_limit_secs"] == "300"


@pytest.mark.parametrize(("scontrol", "message"), [
    (None, "cannot run"),
    ("sleep 30\n", "did not finish within 0.5 s; killed"),
    ("echo 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1\n",
     "exited with status 1: slurm_load_jobs error: Invalid job id specified"),
    ("echo garbage\n", "printed no record: 'garbage\\n'"),
    ("head -c 3000 /dev/urandom\n", "printed no record"),
])
def test_scontrol_trouble_is_a_warning_and_the_job_still_gets_its_directory(
        slurm_site, scontrol, message):
    if scontrol is None:
        slurm_site.scontrol.unlink()
    else:
        slurm_site.set_scontrol(scontrol)
    started = time.monotonic()
    result = slurm_site.run("prolog", env_file=slurm_site.env_file())
    assert time.monotonic() - started < 10
    assert result.returncode == 0 and message in result.stderr
    job = slurm_site.job("3")
    assert job["job_id"] == "3" and job["allocated_cpu"] == "2"
    assert "wall_limit_secs" not in job
    assert pending(slurm_site.base, "3")  # the TaskProlog completes what it can
    assert slurm_site.leftovers() == ([], [])


def test_unwritable_base_dir_fails_softly(slurm_site, tmp_path):
    (tmp_path / "file").write_text("")
    slurm_site.configure(base_dir=tmp_path / "file/base")
    result = slurm_site.run("prolog", env_file=slurm_site.env_file())
    assert result.returncode == 0 and "Not a directory" in result.stderr
    slurm_site.configure("[mjf]\non_error = fail\n", base_dir=tmp_path / "file/base")
    assert slurm_site.run("prolog", env_file=slurm_site.env_file()).returncode == 1


def test_broken_config_and_unknown_roles_fail_softly(slurm_site):
    slurm_site.conf.write_text("[jobfeatures]\nwall_limit_secs = soon\n")
    result = slurm_site.run("prolog", env_file=slurm_site.env_file())
    assert result.returncode == 0 and "wall_limit_secs = 'soon'" in result.stderr
    slurm_site.configure()
    result = slurm_site.run(env_file=slurm_site.env_file(SLURM_SCRIPT_CONTEXT="epilog_slurmctld"))
    assert result.returncode == 0 and "cannot tell the role" in result.stderr
    assert slurm_site.run("postlude").returncode == 0


def test_a_drain_already_announced_reaches_a_starting_job(slurm_site):
    machine = slurm_site.base / "machinefeatures"
    machine.mkdir(parents=True)
    (machine / "shutdowntime").write_text("1795400000")
    assert slurm_site.run("prolog", env_file=slurm_site.env_file()).returncode == 0
    assert slurm_site.job("3")["shutdowntime_job"] == "1795400000"
    assert (machine / "shutdowntime").read_text() == "1795400000"  # left alone


@pytest.mark.parametrize("text", [
    "[mjf]\nbase_dir = {d}\n",
    "[mjf]\nbase_dir = {d}/   # trailing slash and a comment\n",
    "[MJF]\n  Base_Dir\t=\t{d} ; comment\n[jobfeatures]\nwall_limit_secs = 1\n",
    "[jobfeatures]\nwall_limit_secs = 1\n[mjf]\nlog = none\nbase_dir={d}\n",
    "[ mjf ]\n; base_dir = /commented\nbase_dir = {d}\n",
    "[mjf]\nbase_dir = {d}\nexport = url\nurl_base = http://wn1.example:8480/\n",
    "[mjf]\nbase_dir = {d}\nEXPORT = url   # served\nURL_BASE = https://wn1\n",
])
def test_sh_taskprolog_reads_base_dir_as_the_python_parser_does(tmp_path, text):
    from mjf_hooks import config

    directory = tmp_path / "some dir"
    conf = tmp_path / "mjf.conf"
    conf.write_text(text.format(d=directory))
    loaded = config.load(str(conf))
    base = loaded.base_dir
    (Path(base) / "jobs/5/jobfeatures").mkdir(parents=True, exist_ok=True)
    assert base == str(directory)
    sh = subprocess.run([installed_command("mjf-slurm-taskprolog")], capture_output=True,
                        text=True, env={"SLURM_JOB_ID": "5", "MJF_CONFIG": str(conf)})
    served = loaded.url_base if loaded.export == "url" else base
    assert sh.stdout == (f"export MACHINEFEATURES={served}/machinefeatures\n"
                         f"export JOBFEATURES={served}/jobs/5/jobfeatures\n")
    python = subprocess.run([installed_command("mjf-slurm"), "taskprolog"], capture_output=True,
                            text=True, env={"SLURM_JOB_ID": "5", "MJF_CONFIG": str(conf)})
    assert python.stdout == sh.stdout


def test_what_the_prolog_writes_passes_mjf_check(slurm_site):
    assert slurm_site.run("prolog", env_file=slurm_site.env_file()).returncode == 0
    result = subprocess.run([installed_command("mjf"), "check", str(slurm_site.base)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result.stdout  # warnings only: hs06 is not configured
    assert "ERROR" not in result.stdout and "hs06" in result.stdout


def test_with_jobstatus_the_prolog_makes_it_the_users_and_both_taskprologs_export_it(
        slurm_site):
    slurm_site.configure("[mjf]\njobstatus = yes\n")
    env = slurm_site.env_file(SLURM_JOB_START_TIME="1795319471", SLURM_JOB_END_TIME="1795323071")
    assert slurm_site.run("prolog", env_file=env).returncode == 0
    jobstatus_dir = slurm_site.base / "jobs/3/jobstatus"  # beside jobfeatures/
    assert jobstatus_dir.is_dir() and os.listdir(jobstatus_dir) == []
    if os.geteuid() == 0:  # the pilot's to write: its user's (SLURM_JOB_UID), always
        assert (jobstatus_dir.stat().st_uid, jobstatus_dir.stat().st_gid) == (1001, 1001)
        # Also where the values are final at once and jobfeatures/ stays root's.
        final = slurm_site.env_file(SLURM_JOB_ID="2", SLURM_JOBID="2")
        assert slurm_site.run("prolog", env_file=final).returncode == 0
        assert not pending(slurm_site.base, "2")
        assert (slurm_site.base / "jobs/2/jobfeatures").stat().st_uid == 0
        assert (slurm_site.base / "jobs/2/jobstatus").stat().st_uid == 1001
    task_env = slurm_site.env_file("taskprolog-batchstep.env")
    expected = (f"export MACHINEFEATURES={slurm_site.base}/machinefeatures\n"
                f"export JOBFEATURES={slurm_site.base}/jobs/3/jobfeatures\n"
                f"export JOBSTATUS={jobstatus_dir}\n")
    environ = dict(line.split("=", 1) for line in task_env.read_text().splitlines())
    sh = subprocess.run([installed_command("mjf-slurm-taskprolog")], capture_output=True,
                        text=True, env={**environ, "MJF_CONFIG": str(slurm_site.conf)})
    assert (sh.returncode, sh.stdout) == (0, expected)
    python = slurm_site.run("taskprolog", env_file=task_env)
    assert (python.returncode, python.stdout) == (0, expected)
    # Served by URL, the features are URLs; $JOBSTATUS, which the pilot writes, a path.
    slurm_site.configure("[mjf]\njobstatus = yes\nexport = url\nurl_base = http://wn1:8480\n")
    sh = subprocess.run([installed_command("mjf-slurm-taskprolog")], capture_output=True,
                        text=True, env={**environ, "MJF_CONFIG": str(slurm_site.conf)})
    python = slurm_site.run("taskprolog", env_file=task_env)
    assert sh.stdout == python.stdout == (
        "export MACHINEFEATURES=http://wn1:8480/machinefeatures\n"
        "export JOBFEATURES=http://wn1:8480/jobs/3/jobfeatures\n"
        f"export JOBSTATUS={jobstatus_dir}\n")
    # What the pilot wrote goes with the job.
    (jobstatus_dir / "used_CPU").write_text("2")
    epilog = slurm_site.run(env_file=slurm_site.env_file("epilog.env"))
    assert epilog.returncode == 0 and not (slurm_site.base / "jobs/3").exists()


def test_without_jobstatus_no_taskprolog_exports_it(slurm_site):
    slurm_site.run("prolog", env_file=slurm_site.env_file())
    assert not (slurm_site.base / "jobs/3/jobstatus").exists()
    task_env = slurm_site.env_file("taskprolog-batchstep.env")
    environ = dict(line.split("=", 1) for line in task_env.read_text().splitlines())
    sh = subprocess.run([installed_command("mjf-slurm-taskprolog")], capture_output=True,
                        text=True, env={**environ, "MJF_CONFIG": str(slurm_site.conf)})
    python = slurm_site.run("taskprolog", env_file=task_env)
    assert sh.stdout == python.stdout and sh.stdout.count("export ") == 2
    assert "JOBSTATUS" not in sh.stdout


def test_an_epilog_reading_an_emptied_config_says_it_found_nothing_in_one_line(slurm_site):
    """What a config truncated mid-rewrite did to an Epilog: it read defaults (base_dir
    /run/mjf, where no Prolog wrote) and removed nothing, silently. Now one warning line
    names the job, the base_dir it looked in and the config it read; it still exits 0."""
    assert slurm_site.run("prolog", env_file=slurm_site.env_file(SLURM_JOB_ID="9")).returncode == 0
    written = slurm_site.conf.read_text()
    # An emptied config's base_dir is /run/mjf; one no Prolog wrote to stands for it here.
    elsewhere = slurm_site.tmp_path / "elsewhere"
    slurm_site.conf.write_text(f"[mjf]\nbase_dir = {elsewhere}\n")
    result = slurm_site.run("epilog", env_file=slurm_site.env_file("epilog.env", SLURM_JOB_ID="9"))
    assert result.returncode == 0 and result.stdout == ""
    [line] = result.stderr.splitlines()
    assert "warning: job 9: no directory to remove in base_dir " in line
    assert f"{elsewhere} ({elsewhere} does not exist); config {slurm_site.conf}" in line
    slurm_site.conf.write_text(written)
    assert slurm_site.job("9") is not None  # the Epilog of the right config still removes it
    again = slurm_site.run("epilog", env_file=slurm_site.env_file("epilog.env", SLURM_JOB_ID="9"))
    assert (again.returncode, again.stderr) == (0, "") and slurm_site.job("9") is None


def test_sh_taskprolog_help_is_for_a_person_and_exits_0(slurm_site):
    """Slurm runs the TaskProlog without arguments; --help prints the text its manual page
    is made from, reads no config and prints no export line."""
    sh = subprocess.run([installed_command("mjf-slurm-taskprolog"), "--help"],
                        capture_output=True, text=True,
                        env={"SLURM_JOB_ID": "3", "MJF_CONFIG": "/nonexistent"})
    assert sh.returncode == 0 and sh.stderr == ""
    assert sh.stdout.startswith("usage: mjf-slurm-taskprolog [--help]\n")
    assert "export MACHINEFEATURES=" not in sh.stdout


def test_an_epilog_started_wholly_as_another_user_says_so_and_leaves_the_directory(
        public_tmp_path):
    """Slurm 24.11's slurmstepd now and then forks the Epilog with all its uids the job
    user's: nothing unprivileged takes root back. One warning says so (exit 0: Slurm
    would drain the node otherwise) and root's directory is left for the next hook."""
    require(os.geteuid() == 0, "needs root to start the Epilog as another user")
    conf = public_tmp_path / "mjf.conf"
    conf.write_text(f"[mjf]\nbase_dir = {public_tmp_path}/base\nlog = stderr\n")
    lines = fixture_text("slurm-22.05/prolog-sbatch.env").split("# scontrol")[0].splitlines()
    env = public_tmp_path / "job.env"
    env.write_text("".join(f"{line}\n" for line in lines if "=" in line and line[0] != "#")
                   + "SLURM_JOB_END_TIME=1795400000\nSLURM_JOB_START_TIME=1795399700\n"
                   "SLURM_JOB_UID=65534\nSLURM_JOB_GID=65534\n")
    env.chmod(0o644)
    environ = {"MJF_CONFIG": str(conf), "PATH": "/usr/bin:/bin"}
    command = installed_command("mjf-slurm")
    started = subprocess.run([command, "prolog", "--env-file", str(env)], env=environ,
                             capture_output=True, text=True, timeout=60)
    assert started.returncode == 0 and (public_tmp_path / "base/jobs/3").is_dir(), started.stderr
    ended = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            command, "epilog", "--env-file", str(env)], env=environ,
                           capture_output=True, text=True, timeout=60)
    assert ended.returncode == 0
    [line] = ended.stderr.splitlines()
    assert "mjf-slurm epilog job 3: warning: started as uid 65534, not root" in line
    assert (public_tmp_path / "base/jobs/3/jobfeatures").is_dir()
    # Another user than the job's, by hand: no race of Slurm's; it tries, as before.
    other = env.read_text().replace("SLURM_JOB_UID=65534", "SLURM_JOB_UID=1001")
    env.write_text(other)
    ended = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            command, "epilog", "--env-file", str(env)], env=environ,
                           capture_output=True, text=True, timeout=60)
    assert ended.returncode == 0 and "started as uid" not in ended.stderr
    assert "Permission denied" in ended.stderr


def test_each_node_of_a_multi_node_job_records_its_own_share(slurm_site):
    require(os.geteuid() == 0, "needs root: as another user the Epilog hands its record in")
    slurm_site.configure(f"[records]\ndir = {slurm_site.tmp_path / 'records'}\n")
    nodes = {"SLURM_JOB_NODELIST": "vm,wn[2-3]", "SLURM_NODELIST": "vm,wn[2-3]",
             "SLURMD_NODENAME": "wn2", "SLURM_JOB_CPUS_PER_NODE": "2,4(x2)",
             "SLURM_JOB_ID": "2", "SLURM_JOBID": "2"}
    assert slurm_site.run("prolog", env_file=slurm_site.env_file(**nodes)).returncode == 0
    assert slurm_site.job()["allocated_cpu"] == "4"
    ended = slurm_site.run("epilog", env_file=slurm_site.env_file("epilog.env", **nodes))
    assert ended.returncode == 0 and ended.stderr == ""
    [record] = (slurm_site.tmp_path / "records").glob("*/*.json")
    data = json.loads(record.read_text())
    assert (data["node_index"], data["node_count"]) == (2, 3)
    assert data["requested"]["allocated_cpu"] == 4


def test_a_record_whose_node_is_not_in_the_jobs_node_list_says_so_in_one_line(slurm_site):
    require(os.geteuid() == 0, "needs root: as another user the Epilog hands its record in")
    slurm_site.configure(f"[records]\ndir = {slurm_site.tmp_path / 'records'}\n")
    job = {"SLURM_JOB_ID": "2", "SLURM_JOBID": "2"}
    assert slurm_site.run("prolog", env_file=slurm_site.env_file(**job)).returncode == 0
    ended = slurm_site.run("epilog", env_file=slurm_site.env_file(
        "epilog.env", SLURM_NODELIST="wn[1-2]", SLURMD_NODENAME="vm", **job))
    assert ended.returncode == 0 and slurm_site.job() is None
    [warning] = ended.stderr.splitlines()
    assert "warning: job 2: its record does not say which of its nodes" in warning
    assert "SLURMD_NODENAME='vm') is not in the job's node list" in warning
    [record] = (slurm_site.tmp_path / "records").glob("*/*.json")
    assert "node_index" not in json.loads(record.read_text())


@pytest.mark.parametrize("start, cpus_per_node, cores, how", [
    ("0", None, 16, "the machine's total_cpu"),
    ("future", "2", 2, "SLURM_JOB_CPUS_PER_NODE=2"),
])
def test_the_epilogs_record_of_a_pending_job_bounds_what_its_user_wrote(
        slurm_site, start, cpus_per_node, cores, how):
    """A pending job's user owns its jobfeatures/ (the Prolog left its values to complete
    from inside it) and writes a million cores, a start in 1970 or far ahead, another
    job's id, a whole machine's benchmark to each core and a usage report of 10^12 CPU
    seconds. Root's Epilog records the job
    by its own id, its cores as its environment gives them (else bounded by the
    machine's total_cpu), its start bounded by the boot and its end, its hs06_job by the
    machine's hs06 per core, its CPU time by the machine's CPUs over its wall time; and
    says whose word they are."""
    from mjf_hooks.probe import process
    from mjf_hooks.store import Store
    from tests.cli.test_mjf_status import pending_job

    require(os.geteuid() == 0, "needs root: the jobfeatures/ is another user's")
    slurm_site.configure(f"[records]\ndir = {slurm_site.tmp_path / 'records'}\n")
    store = Store(str(slurm_site.base))
    store.machine.set_key("total_cpu", "16")
    store.machine.set_key("hs06", "160")
    began = int(time.time())
    pending_job(store, "5", job_id="7", allocated_cpu="1000000", hs06_job="1000000",
                jobstart_secs="0" if start == "0" else str(began + 10**6))
    usage = slurm_site.base / "jobs/5/usage"  # its TaskEpilog's report, as the user
    usage.mkdir()
    (usage / "report").write_text(f"cpu_secs {10**12}\n")
    for path in (usage, usage / "report"):
        os.chown(path, 65534, 65534)
    ended = slurm_site.run("epilog", env_file=slurm_site.env_file(
        "epilog.env", SLURM_JOB_ID="5", SLURM_JOBID="5", SLURM_JOB_UID="65534",
        SLURM_JOB_CPUS_PER_NODE=cpus_per_node))
    assert ended.returncode == 0 and slurm_site.job("5") is None, ended.stderr
    [path] = (slurm_site.tmp_path / "records").glob("*/*.json")
    assert path.name.endswith("-5.json")
    record = json.loads(path.read_text())
    requested, delivered = record["requested"], record["delivered"]
    assert record["job_id"] == "5"
    assert requested["allocated_cpu"] == cores
    assert requested["hs06_job"] == 10 * cores
    end = delivered["end_time"]["value"]
    assert process.boot_time() <= requested["start_time"] <= end
    assert delivered["wall_secs"]["value"] <= end - process.boot_time()
    assert "the job's user's word" in delivered["wall_secs"]["source"]
    wall = delivered["wall_secs"]["value"]
    assert delivered["cpu_secs"]["value"] == 16 * (wall + 1)
    assert (f"cpu_secs {10**12} counted as {16 * (wall + 1)}, the machine's total_cpu x "
            "(wall_secs + 1)") in delivered["cpu_secs"]["source"]
    said = record["requested_source"]
    assert "its user's word (its jobfeatures/ is uid 65534's)" in said
    assert f"allocated_cpu 1000000 counted as {cores}, {how}" in said
    assert ("when the machine booted" if start == "0" else "the job's end") in said
