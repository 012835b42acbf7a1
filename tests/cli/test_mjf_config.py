"""The config of the admin commands: a file named by --config or $MJF_CONFIG that cannot be
read, a broken one, `mjf config check` and `mjf config show`, and -h wherever --help is."""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import installed_command, run

# Every subcommand of `mjf` but htcondor-wrapper (the HTCondor wrapper hook itself, replayed:
# it keeps the hook's rule), with arguments it would otherwise run with.
SUBCOMMANDS = [
    ["machine", "--dry-run"], ["sync"], ["publish", "--dry-run"], ["drain", "--cancel"],
    ["status"], ["status", "set", "used_CPU=1"], ["records"], ["metrics"], ["check"],
    ["show"], ["get", "total_cpu"], ["remaining"], ["describe"], ["match", "true"],
    ["submit-args", "--batch", "slurm", "true"], ["container-args"], ["config", "show"],
    ["config", "check"],
]
# The subcommands that read the config, which a broken one stops.
READING = [args for args in SUBCOMMANDS if args[0] not in (
    "check", "show", "get", "remaining", "container-args") and args[:2] != ["status", "set"]
    and args[:2] != ["config", "check"]]
# The readers a job runs, which read no config: a $MJF_CONFIG they inherit is not theirs to
# judge (only a --config typed on their own command line is).
JOB_SIDE = [args for args in SUBCOMMANDS if args[0] in ("check", "show", "get", "remaining")
            or args[:2] == ["status", "set"]]
# A config every command reads the same way: broken on its last line.
BROKEN = "[mjf]\nlog = stderr\non_error = sometimes\n"


def mjf(*args: str, config: str | None = None, cwd=None):
    """The installed `mjf`, outside any job, with ``config`` as its $MJF_CONFIG."""
    env = {name: value for name, value in os.environ.items()
           if name not in ("MACHINEFEATURES", "JOBFEATURES", "JOBSTATUS", "MJF_CONFIG")}
    if config is not None:
        env["MJF_CONFIG"] = config
    return run([installed_command("mjf"), *args], check=False, env=env, cwd=cwd, input="")


def names_the_unreadable(result, path: str, why: str = "No such file or directory") -> bool:
    """Exit 2, nothing on stdout, and one line on stderr naming the path and why; for
    `mjf check`, a monitoring plugin, UNKNOWN: exit 3 and that line its first on stdout."""
    said = f"{path}: cannot read the config: {why}"
    if result.args[1:2] == ["check"]:
        return result.returncode == 3 and result.stdout.startswith("MJF UNKNOWN - ") \
            and said in result.stdout.splitlines()[0]
    [line] = result.stderr.splitlines()
    return result.returncode == 2 and result.stdout == "" and said in line


@pytest.mark.parametrize("args", SUBCOMMANDS, ids=" ".join)
def test_a_config_named_by_the_option_that_is_not_there_exits_2_naming_it(args, tmp_path):
    typo = str(tmp_path / "x.cnof")
    result = mjf(*args, "--config", typo, cwd=tmp_path)
    assert names_the_unreadable(result, typo), result


@pytest.mark.parametrize("args", SUBCOMMANDS, ids=" ".join)
def test_a_config_named_that_cannot_be_read_exits_2_naming_it(args, tmp_path):
    result = mjf(*args, "--config", str(tmp_path), cwd=tmp_path)  # a directory
    assert names_the_unreadable(result, str(tmp_path), "Is a directory"), result


@pytest.mark.parametrize("args", [args for args in SUBCOMMANDS if args not in JOB_SIDE],
                         ids=" ".join)
def test_a_config_named_by_mjf_config_that_is_not_there_exits_2_naming_it(args, tmp_path):
    typo = str(tmp_path / "x.cnof")
    assert names_the_unreadable(mjf(*args, config=typo, cwd=tmp_path), typo)


@pytest.mark.parametrize("args", JOB_SIDE, ids=" ".join)
def test_a_jobs_reader_is_not_failed_by_the_mjf_config_it_inherits(args, tmp_path):
    typo = str(tmp_path / "x.cnof")
    result = mjf(*args, config=typo, cwd=tmp_path)
    assert result.returncode != 2 or "cannot read the config" not in result.stderr, result
    assert typo not in result.stderr


def test_the_issues_dry_run_with_a_mistyped_config_plans_nothing(tmp_path):
    result = mjf("machine", "--dry-run", "--config", "x.cnof", cwd=tmp_path)
    assert names_the_unreadable(result, "x.cnof") and "total_cpu" not in result.stdout


@pytest.mark.parametrize("args", READING, ids=" ".join)
def test_a_broken_config_makes_every_admin_command_exit_2(args, tmp_path):
    conf = tmp_path / "mjf.conf"
    conf.write_text(BROKEN)
    result = mjf(*args, config=str(conf), cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert f"{conf}, line 3: [mjf] on_error = 'sometimes'" in result.stderr


@pytest.mark.parametrize("broken", ["missing", "broken"])
def test_mjf_run_runs_its_command_without_mjf_and_says_why(broken, tmp_path):
    conf = tmp_path / "mjf.conf"
    if broken == "broken":
        conf.write_text(BROKEN)
    result = mjf("run", "--config", str(conf), "--", "sh", "-c",
                 'echo "${JOBFEATURES-none}"; exit 3', cwd=tmp_path)
    assert result.returncode == 3 and result.stdout == "none\n"
    assert str(conf) in result.stderr and "running the command without MJF" in result.stderr


def test_config_check_lists_every_problem_with_its_line(tmp_path):
    conf = tmp_path / "mjf.conf"
    conf.write_text("[mjf]\nbase_dir = relative\nbogus = 1\n[nope]\nx = 1\n"
                    "[machinefeatures]\nhs06 = 1.234\ntotal_cpu = 4\nno equals sign\n"
                    "[records]\ndir = /var/lib/mjf\nformat = apel\n")
    result = mjf("config", "check", str(conf))
    assert result.returncode == 1 and result.stderr == ""
    *problems, summary = result.stdout.splitlines()
    assert [problem.split(": ")[0] for problem in problems] == [
        f"{conf}, line {line}" for line in (2, 3, 4, 7, 9)] + [str(conf)]
    assert "must be an absolute path" in problems[0] and "apel needs" in problems[-1]
    assert summary == f"{conf}: 6 problem(s)"


def test_config_check_of_a_valid_file_and_of_one_that_cannot_be_read(tmp_path):
    conf = tmp_path / "mjf.conf"
    conf.write_text("[machinefeatures]\nhs06 = 100\n")
    assert mjf("config", "check", str(conf)).stdout == f"{conf}: valid\n"
    assert mjf("config", "check", "--config", str(conf)).returncode == 0
    assert names_the_unreadable(mjf("config", "check", str(tmp_path / "x")), str(tmp_path / "x"))
    conf.write_bytes(b"[mjf]\nbase_dir = /\xff\n")
    result = mjf("config", "check", str(conf))
    assert result.returncode == 1 and "not UTF-8" in result.stdout


def test_config_show_says_where_each_value_came_from(tmp_path):
    conf = tmp_path / "mjf.conf"
    conf.write_text("[mjf]\nlog = stderr\n\n[Machinefeatures]\nhs06_per_cpu = 12.5\n"
                    "total_cpu = 4\n[slurm]\nnodename = n1\n")
    shown = mjf("config", "show", "--config", str(conf))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"# the config in force: {conf}\n[mjf]\n")
    lines = [line.split("  # ") for line in shown.stdout.splitlines()]
    origin = {text.strip(): where for text, *where in lines if where}
    assert origin["log = stderr"] == [f"{conf}, line 2, [mjf]"]
    assert origin["total_cpu = 4"] == [f"{conf}, line 6, [machinefeatures]"]
    assert origin["hs06 = 50"] == ["derived: hs06_per_cpu x total_cpu"]
    assert origin["base_dir = /run/mjf"] == ["default"]
    assert origin["url_base (unset)"] == ["default"]
    assert origin["nodename = n1"] == [f"{conf}, line 8, [slurm]"]
    data = json.loads(mjf("config", "show", "--json", config=str(conf)).stdout)
    assert data["file"] == str(conf)
    assert data["sections"]["machinefeatures"]["hs06_per_cpu"] == {
        "value": "12.5", "origin": {"kind": "file", "file": str(conf), "line": 5,
                                    "section": "machinefeatures"}}
    assert data["sections"]["mjf"]["url_base"] == {"value": None,
                                                   "origin": {"kind": "default"}}


def test_config_show_of_this_host_says_total_cpu_is_probed():
    data = json.loads(mjf("config", "show", "--json", "--config", "/dev/null").stdout)
    total = data["sections"]["machinefeatures"]["total_cpu"]
    assert total["origin"]["kind"] == "probed" and total["value"] == str(os.cpu_count())


@pytest.mark.parametrize("args", [
    [], ["drain"], ["status"], ["show"], ["config"], ["config", "show"], ["describe"],
    ["run"], ["sync"], ["machine"], ["publish"], ["htcondor-wrapper"], ["status", "set"],
], ids=lambda args: " ".join(args) or "mjf")
def test_h_is_help_wherever_help_is(args):
    helped, h = mjf(*args, "--help"), mjf(*args, "-h")
    assert helped.returncode == h.returncode == 0 and h.stdout == helped.stdout != ""


# Not the wrappers that take the job's command line as it is (mjf-htcondor-wrapper,
# mjf-gridengine-starter): "--help" there is the job's.
@pytest.mark.parametrize("command", [
    "mjf-slurm", "mjf-htcondor-cron", "mjf-htcondor-job-exit", "mjf-lsf", "mjf-gridengine",
    "mjf-pbs"])
def test_h_is_help_for_the_hook_entry_points(command):
    helped = run([installed_command(command), "--help"], input="")
    assert run([installed_command(command), "-h"], input="").stdout == helped.stdout != ""
