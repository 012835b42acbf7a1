"""`mjf container-args` as the installed command: output forms, exit statuses, messages."""

from __future__ import annotations

import json
import os
import shlex
import subprocess

import pytest

from mjf_hooks.store import Store
from tests.conftest import installed_command


@pytest.fixture
def job(write_config, tmp_path):
    conf, base = write_config("jobstatus = yes\nurl_base = http://node.example:8480/\n")
    store = Store(str(base))
    store.machine.write({"total_cpu": "4"}, frozenset())
    features = store.create_job("12#a,b", {"job_id": "12#a,b"}, status=True)
    env = {"PATH": os.environ["PATH"], "MJF_CONFIG": str(conf),
           "MACHINEFEATURES": str(base / "machinefeatures"), "JOBFEATURES": features,
           "JOBSTATUS": os.path.join(os.path.dirname(features), "jobstatus")}
    return env, base


def container_args(env, *args):
    return subprocess.run([installed_command("mjf"), "container-args", *args],
                          capture_output=True, text=True, timeout=60, env=env)


def test_shell_words_for_eval(job):
    env, _ = job
    result = container_args(env, "--runtime", "bubblewrap")
    assert result.returncode == 0, result.stderr
    words = shlex.split(result.stdout)
    assert words[:3] == ["--ro-bind", env["MACHINEFEATURES"], env["MACHINEFEATURES"]]
    assert ["--bind", env["JOBSTATUS"], env["JOBSTATUS"]] == words[6:9]
    # What a pilot does: eval into "$@", each word whole.
    shell = subprocess.run(["sh", "-c", f'eval "set -- {result.stdout.strip()}"; '
                                        'printf "%s\\n" "$@"'],
                           capture_output=True, text=True, check=True)
    assert shell.stdout.splitlines() == words


def test_lines_json_and_names(job):
    env, _ = job
    lines = container_args(env, "--runtime", "charliecloud", "--format", "lines")
    assert lines.stdout.splitlines()[0] == f"--bind={env['MACHINEFEATURES']}"
    document = json.loads(container_args(env, "--format", "json").stdout)
    assert document["runtime"] == "apptainer"
    assert document["environment"]["JOBFEATURES"] == env["JOBFEATURES"]
    names = container_args(env, "--format", "names")
    assert names.stdout == "MACHINEFEATURES\nJOBFEATURES\nJOBSTATUS\n"


def test_url_uses_the_configured_url_base(job):
    env, _ = job
    result = container_args(env, "--url", "--runtime", "bubblewrap", "--format", "json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["binds"] == []
    assert document["environment"] == {
        "MACHINEFEATURES": "http://node.example:8480/machinefeatures",
        "JOBFEATURES": "http://node.example:8480/jobs/12%23a,b/jobfeatures"}
    assert document["args"][-2:] == ["--unsetenv", "JOBSTATUS"]


def test_url_without_url_base_is_exit_1(job, tmp_path):
    env, base = job
    conf = tmp_path / "plain.conf"
    conf.write_text(f"[mjf]\nbase_dir = {base}\n")
    result = container_args({**env, "MJF_CONFIG": str(conf)}, "--url")
    assert result.returncode == 1 and result.stdout == ""
    assert "--url needs [mjf] url_base" in result.stderr


def test_a_job_without_mjf_is_exit_1_with_a_message(job):
    env, _ = job
    bare = {"PATH": env["PATH"]}
    result = container_args(bare, "--runtime", "bubblewrap")
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.strip() == ("mjf container-args: $JOBFEATURES is not set: this is not "
                                     "a job with MJF, so there is nothing to pass into a "
                                     "container")


def test_a_directory_that_is_gone_is_exit_1(job):
    env, _ = job
    result = container_args({**env, "JOBFEATURES": "/nonexistent/jobfeatures"})
    assert result.returncode == 1 and result.stdout == ""
    assert "/nonexistent/jobfeatures is not a directory here" in result.stderr


def test_unknown_runtime_is_a_usage_error(job):
    env, _ = job
    result = container_args(env, "--runtime", "docker")
    assert result.returncode == 2 and result.stdout == ""
    assert "'docker' is not one of" in result.stderr


def test_a_runtime_not_installed_is_a_warning(job, tmp_path):
    env, _ = job
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    result = subprocess.run([installed_command("mjf"), "container-args", "--runtime",
                             "charliecloud"], capture_output=True, text=True, timeout=60,
                            env={**env, "PATH": str(empty)})
    assert result.returncode == 0 and result.stdout.startswith("--bind=")
    assert result.stderr.strip() == ("mjf container-args: warning: charliecloud (ch-run) is not "
                                     "installed here (not on PATH); the arguments are printed "
                                     "anyway")
