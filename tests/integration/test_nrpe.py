"""Monitoring with Nagios/Icinga: contrib/nagios/mjf.cfg in a real NRPE (Debian's
nagios-nrpe-server) on loopback, asked by the real check_nrpe, as a monitoring server asks
a worker node: OK on a healthy node, WARNING on a draining one, CRITICAL on a broken job
directory, UNKNOWN on a bad call (a command line naming no base_dir). NRPE runs the check
as its own user (nagios), as on a site's node: the command is the hooks' install (the
system Python's, as a package's), which that user can run. Then the Icinga 2 example
(contrib/nagios/mjf-icinga2.conf) in a real Icinga 2, through that NRPE and as an agent."""

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


def end(process: subprocess.Popen) -> None:
    """Stop a daemon this test started (by its own pid): asked first, then killed."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)


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
        if self.process is not None:
            end(self.process)

    def ask(self, command: str = "check_mjf") -> tuple[int, str]:
        """What the monitoring server gets: check_nrpe's exit status and first line."""
        result = subprocess.run([CHECK_NRPE, "-H", "127.0.0.1", "-p", str(self.port),
                                 "-c", command], capture_output=True, text=True, timeout=90)
        line = result.stdout.splitlines()[0] if result.stdout else ""
        print(f"check_nrpe -c {command}: exit {result.returncode}: {line}")  # pytest -s
        return result.returncode, line


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


ICINGA2 = "/usr/sbin/icinga2"


class Icinga:
    """Debian's Icinga 2 in the foreground with contrib/nagios/mjf-icinga2.conf as a site
    includes it: a host for the node, its service through the ITL's ``nrpe`` (asking the
    node's NRPE) and the example's CheckCommand run directly, as an Icinga agent on the node
    runs it. Each check result is written by a PerfdataWriter, its first line marked."""

    def __init__(self, root: Path, node: Node) -> None:
        self.root, self.results = root, root / "results"
        for sub in ("data", "cache", "spool", "log", "run", "results"):
            (root / sub).mkdir()
        example = (CHECKOUT_ROOT / "contrib/nagios/mjf-icinga2.conf").read_text()
        (root / "mjf-icinga2.conf").write_text(
            example.replace('"/usr/bin/mjf"', f'"{HOOKS_BIN / "mjf"}"'))
        (root / "icinga2.conf").write_text(f"""\
const PluginDir = "/usr/lib/nagios/plugins"
include <itl>
include <plugins>
object IcingaApplication "app" {{ }}
object CheckerComponent "checker" {{ }}
object PerfdataWriter "results" {{
  service_perfdata_path = "{self.results}/service"
  service_temp_path = "{self.results}/service.tmp"
  host_perfdata_path = "{self.results}/host"
  host_temp_path = "{self.results}/host.tmp"
  service_format_template = "RESULT\\t$service.name$\\t$service.state$\\t$service.output$"
  rotation_interval = 1s
}}
object Host "wn-001" {{
  address = "127.0.0.1"
  check_command = "dummy"
  enable_active_checks = false
  vars.mjf_worker_node = true
  vars.nrpe_port = {node.port}
  vars.mjf_base_dir = "{node.base}"
}}
template Service "generic-service" {{
  check_interval = 1s
  retry_interval = 1s
}}
apply Service "mjf-agent" {{
  import "generic-service"
  check_command = "mjf"
  assign where host.vars.mjf_worker_node
}}
include "{root}/mjf-icinga2.conf"
""")
        shutil.chown(root, "nagios", "nagios")
        for path in root.rglob("*"):
            shutil.chown(path, "nagios", "nagios")
        self.process: subprocess.Popen | None = None

    def command(self, *extra: str) -> list[str]:
        places = {"DataDir": "data", "CacheDir": "cache", "SpoolDir": "spool",
                  "LogDir": "log", "InitRunDir": "run"}
        return [ICINGA2, "daemon", "-c", str(self.root / "icinga2.conf"),
                *[f"-D{name}={self.root / sub}" for name, sub in places.items()],
                "-DRunAsUser=nagios", "-DRunAsGroup=nagios", *extra]

    def results_of(self, timeout: float = 60) -> dict[str, tuple[str, str]]:
        """Each service's first result (state, output), once both have one."""
        self.process = subprocess.Popen(self.command(), stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, start_new_session=True)
        seen: dict[str, tuple[str, str]] = {}
        deadline = time.monotonic() + timeout
        while len(seen) < 2 and time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            for written in sorted(self.results.glob("service.[0-9]*")):
                # A result's output goes on over the lines after its first: the first is
                # the plugin's summary.
                for line in written.read_text().splitlines():
                    if line.startswith("RESULT\t"):
                        name, state, output = line.split("\t", 3)[1:]
                        seen.setdefault(name, (state, output))
            time.sleep(0.2)
        return seen

    def stop(self) -> str:
        if self.process is None:
            return ""
        end(self.process)
        return self.process.stdout.read().decode(errors="replace")


def test_icinga2_asks_through_nrpe_and_runs_the_check_command(node):
    """The Icinga 2 example, in a real Icinga 2: its CheckCommand as an agent runs it, and
    its service through the node's NRPE, both OK on a healthy node."""
    require(os.access(ICINGA2, os.X_OK), "needs Debian's icinga2-bin (tests/setup-system)")
    root = Path(tempfile.mkdtemp(prefix="mjf-icinga2-", dir="/var/tmp"))
    icinga = Icinga(root, node)
    try:
        checked = subprocess.run(icinga.command("-C"), capture_output=True, text=True,
                                 timeout=60)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        seen = icinga.results_of()
        log = icinga.stop()
        assert set(seen) == {"mjf", "mjf-agent"}, log[-3000:]
        for name, (state, output) in seen.items():
            assert state == "OK" and output.startswith("MJF OK - "), (name, state, output)
    finally:
        icinga.stop()
        shutil.rmtree(root, ignore_errors=True)
