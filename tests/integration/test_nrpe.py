"""Monitoring with Nagios/Icinga: contrib/nagios/mjf.cfg in a real NRPE (Debian's
nagios-nrpe-server) on loopback, asked by the real check_nrpe, as a monitoring server asks
a worker node: OK on a healthy node, WARNING on a draining one, CRITICAL on a broken job
directory, UNKNOWN on a bad call (a command line naming no base_dir). NRPE runs the check
as its own user (nagios), as on a site's node: the command is the hooks' install (the
system Python's, as a package's), which that user can run."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from mjf_hooks.store import Store
from tests.conftest import CHECKOUT_ROOT, require
from tests.integration.site import HOOKS_BIN

pytestmark = pytest.mark.integration

NRPE = "/usr/sbin/nrpe"
CHECK_NRPE = "/usr/lib/nagios/plugins/check_nrpe"
JOB = {"job_id": "7", "allocated_cpu": "2", "wall_limit_secs": "3600",
       "cpu_limit_secs": "7200", "max_rss_bytes": str(2**31), "max_swap_bytes": "0",
       "scratch_limit_bytes": str(10**11), "hs06_job": "20"}  # hs06_per_cpu 10 x 2 CPUs


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Node:
    """A worker node's base_dir and config, and an NRPE serving the example's check of
    it (plus the same line with a base_dir mistyped) on a port of its own."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.base = root / "base"
        self.config = root / "mjf.conf"
        self.config.write_text(f"[mjf]\nbase_dir = {self.base}\nlog = none\n"
                               "[machinefeatures]\ngrace_secs = 600\nhs06_per_cpu = 10\n")
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    def mjf(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(HOOKS_BIN / "mjf"), *args], capture_output=True,
                              text=True, timeout=60,
                              env={"PATH": "/usr/bin:/bin", "MJF_CONFIG": str(self.config)})

    def start(self) -> None:
        example = (CHECKOUT_ROOT / "contrib/nagios/mjf.cfg").read_text()
        line = next(line for line in example.splitlines() if line.startswith("command["))
        ours = line.replace("/usr/bin/mjf", str(HOOKS_BIN / "mjf")).replace(
            " /run/mjf", f" {self.base}")
        typo = ours.replace("check_mjf", "check_mjf_typo").replace(
            f" {self.base}", f" {self.base}-typo")
        (self.root / "mjf.cfg").write_text(f"{ours}\n{typo}\n")
        (self.root / "nrpe.cfg").write_text(f"""\
pid_file={self.root}/nrpe.pid
server_port={self.port}
server_address=127.0.0.1
nrpe_user=nagios
nrpe_group=nagios
allowed_hosts=127.0.0.1
dont_blame_nrpe=0
command_timeout=60
connection_timeout=60
include={self.root}/mjf.cfg
""")
        self.process = subprocess.Popen([NRPE, "-c", str(self.root / "nrpe.cfg"), "-f"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"nrpe ended: {self.process.stderr.read().decode()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("nrpe did not listen within 20 s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=20)

    def ask(self, command: str = "check_mjf") -> tuple[int, str]:
        """What the monitoring server gets: check_nrpe's exit status and first line."""
        result = subprocess.run([CHECK_NRPE, "-H", "127.0.0.1", "-p", str(self.port),
                                 "-c", command], capture_output=True, text=True, timeout=90)
        return result.returncode, result.stdout.splitlines()[0] if result.stdout else ""


@pytest.fixture(scope="module")
def node():
    require(os.geteuid() == 0 and os.access(NRPE, os.X_OK) and os.access(CHECK_NRPE, os.X_OK),
            "needs root, Debian's nagios-nrpe-server and nagios-nrpe-plugin "
            "(tests/setup-system)")
    require((HOOKS_BIN / "mjf").exists(), f"needs the hooks installed in {HOOKS_BIN} "
            "(tests/run does it)")
    # Not under the test's own tmp: NRPE's user must reach base_dir and the config.
    root = Path(tempfile.mkdtemp(prefix="mjf-nrpe-", dir="/var/tmp"))
    os.chmod(root, 0o755)
    running = Node(root)
    try:
        written = running.mjf("machine")
        assert written.returncode == 0, written.stderr
        running.start()
        yield running
    finally:
        running.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_a_healthy_node_is_ok(node):
    status, line = node.ask()
    assert status == 0 and line.startswith("MJF OK - "), line


def test_a_draining_node_is_a_warning(node):
    assert node.mjf("drain", "--in", "2h").returncode == 0
    try:
        status, line = node.ask()
        assert status == 1 and line.startswith("MJF WARNING - "), line
        assert "draining" in line
    finally:
        assert node.mjf("drain", "--cancel").returncode == 0
    assert node.ask()[0] == 0


def test_a_broken_job_directory_is_critical(node):
    store = Store(str(node.base))
    store.create_job("7", {**JOB, "jobstart_secs": str(int(time.time()) - 60)})
    status, line = node.ask()
    assert status == 0, line  # a whole job: still OK
    with open(node.base / "jobs/7/jobfeatures/allocated_cpu", "w") as handle:
        handle.write("two\n")
    try:
        status, line = node.ask()
        assert status == 2 and line.startswith("MJF CRITICAL - "), line
        assert "jobs/7/jobfeatures/allocated_cpu" in line
    finally:
        store.remove_job("7")


def test_a_bad_call_is_unknown(node):
    status, line = node.ask("check_mjf_typo")
    assert status == 3 and line.startswith("MJF UNKNOWN - "), line
