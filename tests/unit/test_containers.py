"""mjf_hooks.containers: binds and variables for each runtime, quoting, errors."""

from __future__ import annotations

import json
import shlex

import pytest

from mjf_hooks import containers
from mjf_hooks.containers import Bind, ContainerError, plan, render, runtime_args

MF, JF, JS = "/run/mjf/machinefeatures", "/run/mjf/jobs/7/jobfeatures", "/run/mjf/jobs/7/jobstatus"
JOB = {"MACHINEFEATURES": MF, "JOBFEATURES": JF, "JOBSTATUS": JS, "PATH": "/usr/bin"}


def served(path: str) -> str | None:
    prefix = "/run/mjf/"
    return "http://node:8480/" + path[len(prefix):] if path.startswith(prefix) else None


def test_paths_are_bound_at_the_same_path_read_only_but_jobstatus():
    the_plan = plan(JOB)
    assert the_plan.binds == (Bind(MF, MF, False), Bind(JF, JF, False), Bind(JS, JS, True))
    assert dict(the_plan.environment) == {"MACHINEFEATURES": MF, "JOBFEATURES": JF,
                                          "JOBSTATUS": JS}
    assert the_plan.names == ["MACHINEFEATURES", "JOBFEATURES", "JOBSTATUS"]


def test_every_runtime_words():
    the_plan = plan(JOB)
    assert runtime_args("bubblewrap", the_plan) == ([
        "--ro-bind", MF, MF, "--ro-bind", JF, JF, "--bind", JS, JS,
        "--setenv", "MACHINEFEATURES", MF, "--setenv", "JOBFEATURES", JF,
        "--setenv", "JOBSTATUS", JS], [])
    assert runtime_args("apptainer", the_plan) == ([
        "--bind", f"{MF}:{MF}:ro", "--bind", f"{JF}:{JF}:ro", "--bind", f"{JS}:{JS}",
        "--env", f"MACHINEFEATURES={MF}", "--env", f"JOBFEATURES={JF}",
        "--env", f"JOBSTATUS={JS}"], [])
    assert runtime_args("charliecloud", the_plan) == ([
        f"--bind={MF}", f"--bind={JF}", f"--bind={JS}", f"--set-env=MACHINEFEATURES={MF}",
        f"--set-env=JOBFEATURES={JF}", f"--set-env=JOBSTATUS={JS}"], [])


def test_inside_a_directory():
    the_plan = plan(JOB, inside="/mjf/")
    assert the_plan.binds[1] == Bind(JF, "/mjf/jobfeatures", False)
    assert dict(the_plan.environment)["JOBSTATUS"] == "/mjf/jobstatus"
    words, _ = runtime_args("charliecloud", the_plan)
    assert words[0] == f"--bind={MF}:/mjf/machinefeatures"


def test_urls_bind_nothing_and_leave_jobstatus_out():
    the_plan = plan(JOB, urls=True, served=served)
    assert the_plan.binds == ()
    assert dict(the_plan.environment) == {
        "MACHINEFEATURES": "http://node:8480/machinefeatures",
        "JOBFEATURES": "http://node:8480/jobs/7/jobfeatures"}
    assert the_plan.unset == ("JOBSTATUS",)
    assert runtime_args("bubblewrap", the_plan)[0][-2:] == ["--unsetenv", "JOBSTATUS"]
    assert runtime_args("charliecloud", the_plan)[0][-1] == "--unset-env=JOBSTATUS"
    assert runtime_args("apptainer", the_plan)[0][-2:] == ["--env", "JOBSTATUS="]


def test_a_url_already_exported_is_passed_as_it_is():
    the_plan = plan({**JOB, "MACHINEFEATURES": "https://x/mf"})
    assert the_plan.binds[0].source == JF
    assert dict(the_plan.environment)["MACHINEFEATURES"] == "https://x/mf"


def test_a_path_no_url_serves_is_an_error():
    with pytest.raises(ContainerError, match="not under base_dir"):
        plan({**JOB, "JOBFEATURES": "/scratch/dir_1/.mjf/jobs/1/jobfeatures"},
             urls=True, served=served)


@pytest.mark.parametrize("environ", [{}, {"MACHINEFEATURES": MF}, {"JOBFEATURES": ""}])
def test_no_jobfeatures_is_no_mjf(environ):
    with pytest.raises(ContainerError, match=r"\$JOBFEATURES is not set"):
        plan(environ)


@pytest.mark.parametrize("value", ["relative/jobfeatures", "/run/mjf/../etc"])
def test_odd_paths_are_refused(value):
    with pytest.raises(ContainerError):
        plan({"JOBFEATURES": value})


ODD = "/run/mjf/jobs/a b'c\"$d`e,f;g#h/jobfeatures"


@pytest.mark.parametrize("runtime", sorted(containers.RUNTIMES))
def test_shell_format_round_trips_odd_paths(runtime):
    the_plan = plan({"JOBFEATURES": ODD})
    words, _ = runtime_args(runtime, the_plan)
    text = render("shell", runtime, the_plan, words)
    assert text.endswith("\n") and text.count("\n") == 1
    assert shlex.split(text) == words
    assert render("lines", runtime, the_plan, words).splitlines() == words
    assert json.loads(render("json", runtime, the_plan, words))["args"] == words


def test_apptainer_mount_quotes_commas_and_colons():
    path = "/run/mjf/jobs/a,b:c/jobfeatures"
    words, warnings = runtime_args("apptainer", plan({"JOBFEATURES": path}))
    assert words[:2] == ["--mount", f'type=bind,"src={path}","dst={path}",ro']
    assert "--env" not in words and "APPTAINERENV_JOBFEATURES" in warnings[0]


def test_charliecloud_cannot_bind_a_colon_and_escapes_dollars():
    with pytest.raises(ContainerError, match="`:`"):
        runtime_args("charliecloud", plan({"JOBFEATURES": "/a:b/jobfeatures"}))
    words, _ = runtime_args("charliecloud", plan({"JOBFEATURES": "/a$b/jobfeatures"}))
    assert "--env-no-expand" in words
    assert words.index("--env-no-expand") < words.index("--set-env=JOBFEATURES=/a$b/jobfeatures")


def test_names_json_and_newlines():
    the_plan = plan(JOB)
    words, _ = runtime_args("bubblewrap", the_plan)
    assert render("names", "bubblewrap", the_plan, words) == \
        "MACHINEFEATURES\nJOBFEATURES\nJOBSTATUS\n"
    document = json.loads(render("json", "bubblewrap", the_plan, words))
    assert document["binds"][2] == {"source": JS, "destination": JS, "read_only": False}
    newline = plan({"JOBFEATURES": "/a\nb/jobfeatures"})
    with pytest.raises(ContainerError, match="newline"):
        render("lines", "bubblewrap", newline, runtime_args("bubblewrap", newline)[0])
    assert render("shell", "bubblewrap", plan({"JOBFEATURES": "https://x/jf"}),
                  ["--setenv", "JOBFEATURES", "https://x/jf"]).startswith("--setenv")
    assert render("shell", "bubblewrap", plan({"JOBFEATURES": "https://x/jf"}), []) == ""
