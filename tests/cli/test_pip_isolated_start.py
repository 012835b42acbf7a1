"""A pip install given the packages' `-IS` start the one way docs/install.md documents:
its command, taken from that page, run on a real pip install of this checkout into a
new virtualenv, gives every Python command `-IS` once (twice run, nothing changes), and
leaves the sh TaskProlog a script sh still runs, as Slurm runs it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CHECKOUT_ROOT, run
from tests.packaging.sources import commands
from tests.unit.test_docs_drift import section

HEADING = "## pip: starting the commands as the packages do"
JOB = "7"


def documented_command() -> str:
    """The one shell line of that section's code block."""
    text = section((CHECKOUT_ROOT / "docs/install.md").read_text(), HEADING)
    (block,) = re.findall(r"^```sh\n(.*?)^```$", text, re.M | re.S)
    (line,) = block.splitlines()
    assert "BINDIR" in line, line
    return line


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A virtualenv with this checkout pip-installed, as a pip user has it."""
    base = tmp_path_factory.mktemp("pip")
    run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir",
         str(base / "wheel"), str(CHECKOUT_ROOT)], timeout=180)
    (wheel,) = (base / "wheel").glob("mjf_hooks-*.whl")
    venv = base / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    run([sys.executable, "-m", "pip", "--python", str(venv / "bin/python"), "install",
         "--quiet", "--no-deps", "--no-index", str(wheel)], timeout=180)
    return venv


def first_lines(bindir: Path) -> dict[str, str]:
    return {name: (bindir / name).read_text().split("\n", 1)[0] for name in commands()}


def test_the_documented_way_gives_every_python_command_its_options_once(venv):
    bindir = venv / "bin"
    installed = first_lines(bindir)
    assert installed["mjf-slurm-taskprolog"] == "#!/bin/sh"
    assert all(" " not in line for line in installed.values())  # pip dropped every option
    apply = documented_command().replace("BINDIR", str(bindir))
    run(["sh", "-c", apply])
    isolated = first_lines(bindir)
    for name, line in isolated.items():
        expected = "#!/bin/sh" if name == "mjf-slurm-taskprolog" else f"{installed[name]} -IS"
        assert line == expected, name
    texts = {name: (bindir / name).read_bytes() for name in commands()}
    run(["sh", "-c", apply])
    assert {name: (bindir / name).read_bytes() for name in commands()} == texts
    # A hook started so finds its package in the virtualenv without site.
    assert "usage: mjf-slurm" in run([str(bindir / "mjf-slurm"), "--help"]).stdout


def test_the_taskprolog_still_runs_as_slurm_runs_it(venv, tmp_path):
    """Slurm execs the TaskProlog's path as the job's user: its first line is sh's."""
    bindir = venv / "bin"
    run(["sh", "-c", documented_command().replace("BINDIR", str(bindir))])
    base = tmp_path / "base"
    (base / "jobs" / JOB / "jobfeatures").mkdir(parents=True)
    conf = tmp_path / "mjf.conf"
    conf.write_text(f"[mjf]\nbase_dir = {base}\n")
    result = subprocess.run([str(bindir / "mjf-slurm-taskprolog")], capture_output=True,
                            text=True, timeout=30,
                            env={"PATH": "/usr/bin:/bin", "SLURM_JOB_ID": JOB,
                                 "SLURMD_NODENAME": "wn1", "MJF_CONFIG": str(conf)})
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.splitlines() == [f"export MACHINEFEATURES={base}/machinefeatures",
                                          f"export JOBFEATURES={base}/jobs/{JOB}/jobfeatures"]


def test_the_test_suite_installs_its_commands_the_documented_way():
    """tests/run gives its two installs' commands -IS with the very line the docs give."""
    command = documented_command()
    lines = [line.strip() for line in (CHECKOUT_ROOT / "tests/run").read_text().splitlines()
             if line.strip().startswith("sed -i '1s")]
    assert lines == [command.replace("BINDIR", '"$hooks_venv"/bin'),
                     command.replace("BINDIR", '"$venv"/bin')]
