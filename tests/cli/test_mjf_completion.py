"""Bash completion for mjf (contrib/bash-completion/mjf): the installed script is what the
command's own definitions generate (mjf_hooks.cli.completion), and bash, loading it,
completes every subcommand - the click-free ones (run, machine, sync, publish,
htcondor-wrapper, status set) too - their options, and their options' values."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from mjf_hooks.cli import completion, mjf
from mjf_hooks.spec import JOB_KEYS

CHECKOUT = Path(__file__).resolve().parents[2]
SCRIPT = CHECKOUT / "contrib" / "bash-completion" / "mjf"


def test_the_installed_script_is_what_the_definitions_generate():
    assert SCRIPT.read_text() == completion.bash_script(), (
        "regenerate it: python3 -m mjf_hooks.cli.completion > contrib/bash-completion/mjf")


def test_every_click_free_subcommand_has_its_command_line_here():
    assert set(completion.CLICK_FREE_LINES) == set(mjf.CLICK_FREE)


def complete(line: str) -> list[str]:
    """What bash offers for ``line`` (the cursor at its end), the script loaded."""
    words = line.split(" ")
    program = (f"source {SCRIPT}\n"
               f"COMP_WORDS=({' '.join(repr(word) for word in words)})\n"
               f"COMP_CWORD={len(words) - 1}\n"
               "_mjf\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n")
    result = subprocess.run([shutil.which("bash") or "/bin/bash", "--norc", "-c", program],
                            capture_output=True, text=True, timeout=30, cwd="/")
    assert result.returncode == 0 and result.stderr == "", result
    return sorted(word for word in result.stdout.split("\n") if word)


def test_the_subcommands_are_offered():
    offered = complete("mjf ")
    assert {"sync", "machine", "run", "publish", "status", "config", "describe",
            "htcondor-wrapper", "drain", "match"} <= set(offered)
    assert complete("mjf sy") == ["sync"]
    assert complete("mjf config ") == ["check", "show"]
    assert complete("mjf status ") == ["set"]


@pytest.mark.parametrize(("line", "expected"), [
    ("mjf sync --", ["--config", "--dry-run", "--env-file", "--help", "--verbose"]),
    ("mjf sync ", ["--config", "--dry-run", "--env-file", "--help", "--verbose", "-h"]),
    ("mjf machine --d", ["--dry-run"]),
    ("mjf publish --v", ["--verbose"]),
    ("mjf status set --", ["--config", "--dir", "--help", "--timeout"]),
    ("mjf config check --h", ["--help", "--host"]),
    ("mjf run --w", ["--wall-limit"]),
])
def test_each_subcommands_options_are_offered(line, expected):
    assert complete(line) == expected


def test_an_options_value_is_completed_as_it_takes_one():
    assert complete("mjf describe --format ") == ["classad", "dirac", "glue2", "json"]
    assert complete("mjf describe --format di") == ["dirac"]
    assert complete("mjf submit-args --batch ") == ["gridengine", "htcondor", "lsf", "pbs",
                                                    "slurm"]
    assert "/tmp" in complete("mjf sync --config /tm")
    assert "/etc" in complete("mjf config check /et")
    assert complete("mjf run --cpus ") == []  # a number: nothing to offer
    assert complete("mjf get allocated_") == ["allocated_cpu"]


def test_a_pilots_status_keys_are_offered():
    offered = complete("mjf status set ")
    assert "used_CPU=" in offered and all(word.endswith("=") for word in offered)
    assert complete("mjf status set --timeout 5 last_max") == ["last_max_job_end="]
    assert "allocated_cpu" in JOB_KEYS


def test_the_command_a_job_runs_is_completed_as_a_command_then_its_arguments_as_files():
    assert "bash" in complete("mjf run -- bas")
    assert "bash" in complete("mjf run --cpus 2 bas")
    assert "/etc" in complete("mjf run -- cat /et")
    assert "/etc" in complete("mjf htcondor-wrapper --dry-run -- cat /et")
