"""`mjf publish` and `mjf sync` as installed commands, with a fake ``qconf`` that keeps one
host's complex_values in a file and records every call: exit statuses, one warning line
per failure, and a second publish that runs the read alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import installed_command

HOST = os.uname().nodename.split(".")[0]

FAKE_QCONF = r'''#!PYTHON
import json, sys
state_path, log_path = STATE, LOG
with open(log_path, "a") as log:
    log.write(" ".join(sys.argv[1:]) + "\n")
with open(state_path) as handle:
    state = json.load(handle)
args = sys.argv[1:]
if state.get("fail"):
    sys.stderr.write("error: commlib error: got select error (Connection refused)\n")
    sys.exit(1)
if args[0] == "-se":
    values = ",".join(f"{k}={v}" for k, v in state["values"].items()) or "NONE"
    print(f"hostname              {args[1]}\nload_scaling          NONE\n"
          f"complex_values        {values}\nprocessors            2")
    sys.exit(0)
verb, _, _, pairs, host = args
for pair in pairs.split(","):
    name, value = pair.split("=")
    if name not in state["complexes"]:
        print(f'denied: complex "{name}" does not exist')  # and exit 0, as qconf does
        sys.exit(0)
    state["values"][name] = value
with open(state_path, "w") as handle:
    json.dump(state, handle)
'''


class Cell:
    def __init__(self, tmp_path, write_config):
        self.state, self.log = tmp_path / "state.json", tmp_path / "qconf.log"
        self.qconf = tmp_path / "qconf"
        self.qconf.write_text(FAKE_QCONF.replace("PYTHON", sys.executable)
                              .replace("STATE", repr(str(self.state)))
                              .replace("LOG", repr(str(self.log))))
        self.qconf.chmod(0o755)
        self.set(complexes=["hs06"], values={})
        self.write_config = write_config
        self.configure("")

    def set(self, **state):
        self.state.write_text(json.dumps(state))

    def values(self) -> dict:
        return json.loads(self.state.read_text())["values"]

    def configure(self, extra: str):
        self.conf, _ = self.write_config(
            "[mjf]\nbatch_systems = gridengine\n[machinefeatures]\nhs06 = 40\n"
            f"total_cpu = 4\n[gridengine]\nqconf = {self.qconf}\n{extra}")

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def mjf(self, *args):
        return subprocess.run([installed_command("mjf"), *args], capture_output=True,
                              text=True, timeout=60, env={"MJF_CONFIG": str(self.conf)})


@pytest.fixture
def cell(tmp_path, write_config):
    return Cell(tmp_path, write_config)


def warnings(result) -> list[str]:
    return [line for line in result.stderr.splitlines() if ": warning: " in line]


def test_publish_writes_once_then_only_reads(cell):
    first = cell.mjf("publish")
    assert (first.returncode, first.stderr) == (0, "")
    assert first.stdout == f"Grid Engine node {HOST}: hs06 unset -> 40\n"
    assert cell.values() == {"hs06": "40"}
    assert cell.calls() == [f"-se {HOST}", f"-aattr exechost complex_values hs06=40 {HOST}",
                            f"-se {HOST}"]
    again = cell.mjf("publish")
    assert (again.returncode, again.stdout, again.stderr) == (0, "", "")
    assert cell.calls()[3:] == [f"-se {HOST}"]


def test_a_refused_write_is_one_warning_and_exit_1(cell):
    cell.configure("[publish]\nfacts = hs06, total_cpu\n")
    result = cell.mjf("publish")
    assert result.returncode == 1 and result.stdout == ""
    [line] = warnings(result)
    assert line.endswith(f"Grid Engine node {HOST}: the write of hs06, total_cpu did not "
                         "take (the next run tries again)")
    assert cell.values() == {}  # qconf refused the one argument whole


def test_a_failed_read_is_one_warning_and_exit_1(cell):
    cell.set(complexes=["hs06"], values={}, fail=True)
    result = cell.mjf("publish")
    assert result.returncode == 1
    [line] = warnings(result)
    assert f"qconf -se {HOST} exited with status 1: error: commlib error" in line
    assert line.endswith("nothing published to Grid Engine this time")
    assert cell.calls() == [f"-se {HOST}"]


def test_a_dry_run_writes_nothing(cell):
    result = cell.mjf("publish", "--dry-run")
    assert result.returncode == 0
    assert f"would run {cell.qconf} -aattr exechost complex_values hs06=40 {HOST}" \
        in result.stdout
    assert cell.values() == {} and cell.calls() == [f"-se {HOST}"]


def test_a_wrong_command_line_and_a_broken_config_are_one_error_line_and_exit_2(cell):
    assert cell.mjf("publish", "extra").returncode == 2
    cell.configure("[publish]\nfacts = shutdowntime\n")
    broken = cell.mjf("publish")  # an admin's command (a timer's): a failure it can see
    assert broken.returncode == 2 and broken.stdout == ""
    [line] = broken.stderr.splitlines()
    assert ": error: " in line and "must be node facts" in line
    assert cell.calls() == []
    assert "usage: mjf publish" in cell.mjf("publish", "--help").stdout


def test_sync_publishes_when_told_to_and_its_failure_fails_the_pass(cell):
    assert cell.mjf("sync").returncode == 0 and cell.calls() == []  # off by default
    cell.configure("[publish]\nsync = yes\n")
    synced = cell.mjf("sync")
    assert synced.returncode == 0, synced.stderr
    assert f"Grid Engine node {HOST}: hs06 unset -> 40" in synced.stdout
    assert cell.values() == {"hs06": "40"}
    cell.set(complexes=["hs06"], values={"hs06": "40"}, fail=True)
    failed = cell.mjf("sync")
    assert failed.returncode == 1 and len(warnings(failed)) == 1
