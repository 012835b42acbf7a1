"""`mjf machine`, `mjf show`, `mjf get`, the backend stubs, and the shared hook frame."""

import ast
import json
import os
import pwd
import re
import shlex
import subprocess
import sys

import pytest

from mjf_hooks.hooks.frame import CommandLine, read_env_file, run_hook
from mjf_hooks.log import Log
from tests.conftest import CHECKOUT_ROOT, FIXTURES, installed_command


def run(command, *args, env=None, **kwargs):
    return subprocess.run([installed_command(command), *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=60, **kwargs)


def test_mjf_machine_writes_and_is_idempotent(write_config):
    conf, base = write_config("[machinefeatures]\nhs06 = 1000\ngrace_secs = 600\n")
    env = {"MJF_CONFIG": str(conf)}
    assert run("mjf", "machine", env=env).returncode == 0
    machine = base / "machinefeatures"
    assert {p.name: p.read_text() for p in machine.iterdir()} == {
        "total_cpu": str(os.cpu_count()), "hs06": "1000", "grace_secs": "600"}
    inode = (machine / "hs06").stat().st_ino
    assert run("mjf", "machine", env=env).returncode == 0
    assert (machine / "hs06").stat().st_ino == inode  # unchanged, not rewritten


def test_mjf_machine_dry_run_and_legacy_keys(write_config):
    conf, base = write_config("[mjf]\nlegacy_keys = yes\n")
    result = run("mjf", "machine", "--dry-run", env={"MJF_CONFIG": str(conf)})
    assert f"{base}/machinefeatures/log_cores = {os.cpu_count()}" in result.stdout
    assert f"{base}/machinefeatures/total_cpu = {os.cpu_count()}" in result.stdout
    assert not base.exists()


def test_mjf_machine_with_a_broken_config_is_one_error_line_and_exit_2(tmp_path):
    conf = tmp_path / "mjf.conf"
    conf.write_text("[mjf]\non_error = sometimes\n")
    result = run("mjf", "machine", env={"MJF_CONFIG": str(conf)})
    assert result.returncode == 2 and result.stdout == ""  # an admin's command, not a hook
    assert "on_error = 'sometimes': must be `continue`" in result.stderr


def test_show_and_get_from_inside_a_job(write_config):
    conf, base = write_config("[machinefeatures]\nhs06 = 100\n")
    script = ("mjf show; mjf show --json; mjf get allocated_cpu; mjf get hs06; "
              "mjf get max_swap_bytes")
    bindir = os.path.dirname(installed_command("mjf"))
    result = run("mjf", "run", "--cpus", "2", "--job-id", "j9", "--", "sh", "-c",
                 script + "; echo status=$?",
                 env={"MJF_CONFIG": str(conf), "PATH": f"{bindir}:{os.environ['PATH']}"})
    out = result.stdout
    assert f"MACHINEFEATURES={base}/machinefeatures" in out
    assert f"JOBFEATURES={base}/jobs/j9/jobfeatures" in out
    start = out.index("{")
    document, end = json.JSONDecoder().raw_decode(out[start:])
    assert document["JOBFEATURES"]["values"]["allocated_cpu"] == 2
    assert document["JOBFEATURES"]["values"]["job_id"] == "j9"
    assert document["MACHINEFEATURES"]["values"]["hs06"] == 100
    assert out[start + end:].split() == ["2", "100", "status=1"]
    assert "max_swap_bytes is not set" in result.stderr


def test_show_a_base_dir_and_get_usage_errors(write_config):
    conf, base = write_config()
    run("mjf", "machine", env={"MJF_CONFIG": str(conf)})
    result = run("mjf", "show", str(base))
    assert result.returncode == 0 and "total_cpu" in result.stdout
    assert run("mjf", "get", "nonsense").returncode == 2
    env = {k: v for k, v in os.environ.items() if k not in ("JOBFEATURES", "MACHINEFEATURES")}
    result = subprocess.run([installed_command("mjf"), "get", "total_cpu"], env=env,
                            capture_output=True, text=True, check=False)
    assert result.returncode == 1 and "MACHINEFEATURES is not set" in result.stderr
    assert run("mjf", "show", env={"JOBFEATURES": "", "MACHINEFEATURES": ""}).returncode == 2


def test_get_and_remaining_exit_2_when_the_location_cannot_be_read(tmp_path):
    closed = {"JOBFEATURES": "http://127.0.0.1:1/jobfeatures", "MACHINEFEATURES": ""}
    for args in (("get", "allocated_cpu"), ("remaining",)):  # 1 would mean "absent"
        result = run("mjf", *args, env=closed)
        assert result.returncode == 2 and result.stdout == "", result.stderr
        assert result.stderr.startswith(f"mjf {args[0]}: http://127.0.0.1:1/jobfeatures/")
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    jobfeatures = tmp_path / "jobfeatures"
    jobfeatures.mkdir()
    (jobfeatures / "allocated_cpu").symlink_to("allocated_cpu")  # a loop: ELOOP, not absent
    local = {"JOBFEATURES": str(jobfeatures)}
    result = run("mjf", "get", "allocated_cpu", env=local)
    assert result.returncode == 2 and result.stderr == (
        f"mjf get: {jobfeatures}/allocated_cpu: Too many levels of symbolic links\n")
    result = run("mjf", "get", "job_id", env=local)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == f"mjf get: job_id is not set in {jobfeatures}\n"


def test_help_lists_the_commands():
    result = run("mjf", "--help")
    for command in ("run", "machine", "show", "get"):
        assert f"  {command} " in result.stdout
    assert "usage: mjf machine" in run("mjf", "machine", "--help").stdout


def test_env_file_reads_a_recorded_slurm_environment():
    environ = read_env_file(str(FIXTURES / "slurm-22.05/prolog-sbatch.env"))
    assert environ["SLURM_JOB_ID"] == "3" and environ["SLURM_SCRIPT_CONTEXT"] == "prolog_slurmd"
    assert "# prolog uid=0 pwd=/var/spool/slurm-ci argv=/etc/slurm/prolog.sh " not in environ


def test_hook_frame_turns_our_bugs_into_one_logged_line(capsys, tmp_path):
    def buggy(context):
        return {}["missing"]

    conf = tmp_path / "mjf.conf"
    conf.write_text("[mjf]\nlog = stderr\n")
    assert run_hook("test hook", ["--config", str(conf)], buggy, CommandLine("usage: test")) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error KeyError at test_mjf_commands.py" in err
    conf.write_text("[mjf]\nlog = stderr\non_error = fail\n")
    assert run_hook("test hook", ["--config", str(conf)], buggy, CommandLine("usage: test")) == 1


@pytest.mark.parametrize(("command", "args", "status"), [
    ("mjf", ["machine", "extra"], 2),
    ("mjf", ["sync", "extra"], 2),
    ("mjf-htcondor-cron", ["extra"], 0),  # a hook: logged, never a failed cron
    ("mjf-htcondor-job-exit", ["exit", "extra"], 0),
])
def test_a_command_without_arguments_refuses_them_in_one_line(write_config, command, args,
                                                              status):
    path, base = write_config()
    result = run(command, *args, env={**os.environ, "MJF_CONFIG": str(path)}, input="")
    assert result.returncode == status
    assert result.stderr.count("\n") == 1 and "unexpected argument 'extra'" in result.stderr
    assert result.stdout == "" and not base.exists()  # nothing done


def test_log_lines_are_single_lines(capsys):
    Log("x", ("stderr",)).error("first\nsecond\n\nthird")
    assert capsys.readouterr().err.endswith("x: error: first | second | third\n")


# What removing a job's directory needs: not the value computation nor the probes.
_COMPUTING = {"mjf_hooks.features", "mjf_hooks.probe.cgroup", "mjf_hooks.probe.cpu",
              "mjf_hooks.probe.scratch"}


@pytest.mark.parametrize(("module", "function", "argv", "needs"), [
    ("mjf_hooks.cli.mjf", "main", ["run", "--dry-run", "--", "true"], _COMPUTING),
    ("mjf_hooks.cli.mjf", "main", ["machine", "--dry-run"], _COMPUTING),
    ("mjf_hooks.hooks.slurm", "main", ["prolog", "--dry-run"], _COMPUTING),
    ("mjf_hooks.hooks.slurm", "main", ["epilog", "--dry-run"], set()),
    ("mjf_hooks.hooks.htcondor", "wrapper_command", ["--dry-run", "--", "true"], _COMPUTING),
    ("mjf_hooks.hooks.lsf", "main", ["--dry-run", "starter", "true"], _COMPUTING | {"resource"}),
    ("mjf_hooks.hooks.lsf", "main", ["--dry-run", "post-exec"], set()),
    # pwd: a root prolog writes for the job's user
    ("mjf_hooks.hooks.gridengine", "main", ["--dry-run", "prolog"], _COMPUTING | {"pwd"}),
    ("mjf_hooks.hooks.gridengine", "main", ["--dry-run", "starter", "true"], _COMPUTING),
    ("mjf_hooks.hooks.gridengine", "main", ["--dry-run", "epilog"], set()),
    # PBS: the job's attributes on stdin (_PBS_STDIN); pwd: root writes for the job's user
    ("mjf_hooks.hooks.pbs", "main", ["--dry-run", "begin"], _COMPUTING | {"pwd"}),
    ("mjf_hooks.hooks.pbs", "main", ["--dry-run", "launch"], set()),
    ("mjf_hooks.hooks.pbs", "main", ["--dry-run", "end"], set()),
    # `mjf describe` (no hook, but an information system's; no json either: it writes its
    # own) of a job directory in every format, and of the machine: probed, none configured.
    # errno: it ends quietly when its reader closes the pipe.
    *(("mjf_hooks.cli.mjf", "main", ["describe", "--format", format_,
                                     str(FIXTURES / "describe/lsf-10.1/jobs/1234")], {"errno"})
      for format_ in ("classad", "dirac", "glue2", "json")),
    ("mjf_hooks.cli.mjf", "main", ["describe", "--format", "glue2"], _COMPUTING | {"errno"}),
])
def test_hook_paths_import_neither_click_nor_heavy_modules(module, function, argv, needs,
                                                           tmp_path):
    # The start-up budget (docs/design.md "The contract"): hooks must not import what they
    # do not use.
    if module in ("mjf_hooks.hooks.gridengine", "mjf_hooks.hooks.lsf"):
        # As a queue gives it: their root roles take no $MJF_CONFIG (the job's environment).
        argv = ["--config", str(tmp_path / "mjf.conf"), *argv]
    code = (f"import sys\nfrom {module} import {function}\n"
            f"try:\n    {function}({argv!r})\nexcept SystemExit:\n    pass\n"
            "print(sorted(sys.modules))")
    # A config to parse; no bjobs or qstat call, wherever LSF or Grid Engine is installed.
    conf = tmp_path / "mjf.conf"
    conf.write_text(f"[mjf]\nlog = stderr\nbase_dir = {tmp_path}/base\n"
                    "[machinefeatures]\nhs06_per_cpu = 10\n"
                    "[lsf]\nquery_bjobs = no\n[gridengine]\nquery_qstat = no\n")
    env = {**os.environ, "MJF_CONFIG": str(conf), "SLURM_JOB_ID": "5",
           "SLURM_JOB_START_TIME": "1", "SLURM_JOB_END_TIME": "61", "LSB_JOBID": "5",
           "JOB_ID": "5", "USER": pwd.getpwuid(os.getuid()).pw_name}
    stdin = None
    if module == "mjf_hooks.hooks.pbs":  # the recorded hook input, for this machine's user
        stdin = (FIXTURES / f"pbs-23.06/hook-input/{argv[-1]}-a.txt").read_text().replace(
            "pbsuser1", env["USER"])
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, env=env, input=stdin)
    bare = subprocess.run([sys.executable, "-c", "import sys; print(sorted(sys.modules))"],
                          capture_output=True, text=True, check=True, env=env)
    # Compared with what this interpreter loads anyway (an editable install's finder, say).
    modules = set(ast.literal_eval(result.stdout.splitlines()[-1])) - set(
        ast.literal_eval(bare.stdout))
    heavy = {"click", "argparse", "logging", "re", "dataclasses", "typing", "subprocess",
             "configparser", "enum", "collections", "datetime", "urllib", "json", "socket",
             "email", "traceback", "pwd", "resource", "select", "syslog", "errno",
             "mjf_hooks.external_command", "encodings.ascii", "classad2", "htcondor",
             *_COMPUTING}
    assert not modules & (heavy - needs)


def test_check_and_remaining_from_inside_a_job(write_config):
    conf, _ = write_config("[machinefeatures]\nhs06 = 100\ngrace_secs = 60\n"
                           "[jobfeatures]\nmax_swap_bytes = 0\n")
    bindir = os.path.dirname(installed_command("mjf"))
    env = {"MJF_CONFIG": str(conf), "PATH": f"{bindir}:{os.environ['PATH']}"}
    script = "mjf check; echo check=$?; mjf remaining; echo remaining=$?"
    result = run("mjf", "run", "--wall-limit", "600", "--memory", "2000000000", "--", "sh",
                 "-c", script, env=env)
    lines = result.stdout.splitlines()
    assert "check=0" in lines, result.stdout  # infos only: no shutdown announced
    remaining = int(lines[lines.index("check=0") + 1])
    assert 590 <= remaining <= 600 and lines[-1] == "remaining=0"
    unbounded = run("mjf", "run", "--", "sh", "-c", "mjf remaining; echo $?", env=env)
    assert unbounded.stdout == "1\n"


def readme_demo_commands() -> list[list[str]]:
    """The `mjf run` commands README.md's "Two commands" shows a new admin, as argv with
    the installed `mjf`: its code blocks' and those named in its text."""
    text = (CHECKOUT_ROOT / "README.md").read_text()
    section = text[text.index("\n## Two commands\n") + 1:]
    section = section[:section.index("\n## ")]
    blocks = re.findall(r"^```sh\n(.*?)^```", section, re.S | re.M)
    spans = re.findall(r"`([^`\n]+)`", re.sub(r"^```.*?^```", "", section, flags=re.S | re.M))
    commands = [shlex.split(part) for snippet in blocks + spans for part in snippet.split("&&")
                if "mjf run " in part and " -- " in part]  # a command, not its name
    return [[installed_command("mjf") if word == "venv/bin/mjf" else word for word in argv]
            for argv in commands]


def test_the_readmes_first_job_passes_mjf_check(write_config):
    """What the README shows first runs, and `mjf check` finds no error in that job: its
    missing limits are notes saying why, and only the site's unset hs06 warns."""
    demo, *others = readme_demo_commands()
    conf, _ = write_config()  # the README's job as root, in a base_dir of the test's
    env = {"MJF_CONFIG": str(conf)}
    shown = run(*demo, env=env)
    assert shown.returncode == 0 and shown.stdout.strip().isdigit(), shown.stdout + shown.stderr
    runner = demo[1:demo.index("--") + 1]  # the same job, with mjf check as its command
    assert [argv[1:argv.index("--") + 1] for argv in others] == [runner]
    checked = run("mjf", *runner, installed_command("mjf"), "check", "--json", env=env)
    report = json.loads(checked.stdout)
    assert checked.returncode == 1 and report["exit_code"] == 1, checked.stdout
    assert {(f["severity"], f["key"]) for f in report["findings"]
            if f["severity"] != "info"} == {("warning", "hs06"), ("warning", "hs06_job")}
    notes = {f["key"]: f["message"] for f in report["findings"] if f["severity"] == "info"}
    assert "a standalone job (mjf run) has no such limit" in notes["wall_limit_secs"]
    conf, _ = write_config("[machinefeatures]\nhs06 = 100\n")  # as a site sets it up
    for argv in others:  # the check the README names, as it names it
        result = run(*argv, env=env)
        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout.startswith("MJF OK - the machine features and 1 job directory "
                                        "pass (")


def test_check_json_and_exit_codes(tmp_path):
    machine = tmp_path / "machinefeatures"
    machine.mkdir()
    (machine / "total_cpu").write_text("4\n")
    result = run("mjf", "check", "--json", str(machine), str(tmp_path / "x/jobfeatures"))
    document = json.loads(result.stdout)
    assert result.returncode == 2 and document["exit_code"] == 2
    assert {"severity": "error", "location": str(machine), "key": "total_cpu",
            "rule": "format"} == {k: v for k, v in document["findings"][0].items()
                                  if k != "message"}
    assert run("mjf", "check", str(tmp_path / "x")).returncode == 3  # neither kind: UNKNOWN
