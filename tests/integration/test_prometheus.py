"""`mjf metrics` read by the real thing: Debian's prometheus-node-exporter with its
textfile collector pointed at the file `mjf sync` writes ([metrics] output), Prometheus
scraping it on loopback (own ports, own data directory, contrib/prometheus/mjf-rules.yml
loaded), and PromQL through Prometheus's HTTP API giving the right values while a real
Slurm 22.05 job runs and reports its $JOBSTATUS, after a hook failed, and after a
maintenance reservation drains the node (the drain alert then fires); and a sync whose
scontrol cannot reach its controller makes the sync alert fire.

Runs as root (CI); each daemon is started by the test, as a process of its own, and
stopped by its pid.
"""

from __future__ import annotations

import datetime
import json
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import CHECKOUT_ROOT, require
from tests.integration.site import HOOKS_BIN, SITE_CONFIG
from tests.integration.slurm_cluster import mjf_cluster
from tests.integration.test_http import free_port

pytestmark = pytest.mark.integration

EXPORTER = "/usr/bin/prometheus-node-exporter"
PROMETHEUS = "/usr/bin/prometheus"
RULES = CHECKOUT_ROOT / "contrib/prometheus/mjf-rules.yml"
# The shipped MJFSyncFailing waits 10 minutes before it fires: loaded with a few seconds
# instead, its expression as shipped.
SYNC_ALERT_WAIT = ("      - alert: MJFSyncFailing\n        expr: mjf_sync_failed_phases > 0\n"
                   "        for: {}\n")


class Stack:
    """node_exporter and Prometheus on loopback, in ``root``; ``query`` asks Prometheus."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.textfiles = root / "textfile"
        self.textfiles.mkdir(mode=0o755)
        self.exporter_port, self.prometheus_port = free_port(), free_port()
        self.processes: list[subprocess.Popen] = []

    def start(self) -> None:
        self._start("exporter", [
            EXPORTER, f"--web.listen-address=127.0.0.1:{self.exporter_port}",
            "--collector.disable-defaults", "--collector.textfile",
            f"--collector.textfile.directory={self.textfiles}"])
        config = self.root / "prometheus.yml"
        rules = RULES.read_text()
        assert rules.count(SYNC_ALERT_WAIT.format("10m")) == 1
        (self.root / "mjf-rules.yml").write_text(
            rules.replace(SYNC_ALERT_WAIT.format("10m"), SYNC_ALERT_WAIT.format("2s")))
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "rule_files:\n  - mjf-rules.yml\n"
            "scrape_configs:\n  - job_name: node\n    static_configs:\n"
            f"      - targets: ['127.0.0.1:{self.exporter_port}']\n")
        self._start("prometheus", [
            PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={self.root}/data",
            f"--web.listen-address=127.0.0.1:{self.prometheus_port}"])

    def _start(self, name: str, argv: list[str]) -> None:
        log = open(self.root / f"{name}.log", "wb")  # noqa: SIM115 - the daemon's, kept open
        self.processes.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                               cwd=self.root, start_new_session=True))
        log.close()

    def stop(self) -> None:
        for process in reversed(self.processes):  # each by the pid it was started as
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def logs(self) -> str:
        return "".join(f"--- {path.name}\n{path.read_text(errors='replace')[-3000:]}"
                       for path in sorted(self.root.glob("*.log")))

    def query(self, promql: str) -> list[dict]:
        """The instant vector a PromQL query gives now (empty while Prometheus starts)."""
        url = (f"http://127.0.0.1:{self.prometheus_port}/api/v1/query?"
               + urllib.parse.urlencode({"query": promql}))
        try:
            with urllib.request.urlopen(url, timeout=10) as answer:
                found = json.load(answer)
        except OSError:
            return []
        assert found["status"] == "success", found
        return found["data"]["result"]

    def wait_for(self, promql: str, accept, why: str, timeout: float = 120) -> list[dict]:
        """The query's result once ``accept`` takes it (scrapes come every second)."""
        deadline = time.monotonic() + timeout
        while True:
            result = self.query(promql)
            if result and accept(result):
                return result
            assert time.monotonic() < deadline, f"{why}: {promql} gives {result}\n{self.logs()}"
            time.sleep(0.5)


def value_of(result: list[dict]) -> float:
    assert len(result) == 1, result
    return float(result[0]["value"][1])


@pytest.fixture
def stack():
    require(shutil.which(EXPORTER) is not None and shutil.which(PROMETHEUS) is not None,
            "needs Debian's prometheus and prometheus-node-exporter (tests/setup-system)")
    root = Path(tempfile.mkdtemp(prefix="mjf-prometheus-"))
    root.chmod(0o755)
    running = Stack(root)
    try:
        running.start()
        yield running
    finally:
        running.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def slurm(stack):
    metrics = f"[mjf]\njobstatus = yes\n[metrics]\noutput = {stack.textfiles}/mjf.prom\n"
    with mjf_cluster(cgroups=False, extra_config=metrics) as cluster:
        yield cluster


def test_prometheus_sees_a_running_job_a_hook_failure_and_a_drain(stack, slurm):
    now = int(time.time())
    report = (f"{HOOKS_BIN}/mjf status set used_CPU=1 last_job_start={now} "
              f"last_exp_job_end={now + 3000} first_exp_job_end={now + 2000} && sleep 300")
    submitted = slurm.as_user("mjfuser1", ["sbatch", "--parsable", "-J", "watched", "-c", "2",
                                           "--mem=100M", "--time=10", "-o", "/dev/null",
                                           "--wrap", report])
    job_id = submitted.stdout.strip().split(";")[0]
    reservation = None
    try:
        status = slurm.mjf_base / "jobs" / job_id / "jobstatus" / "used_CPU"
        deadline = time.monotonic() + 60
        while not status.exists():
            assert time.monotonic() < deadline, slurm.log("slurmd")
            time.sleep(0.1)
        # A hook failing as a batch system would call it, wrongly wired.
        wrong = subprocess.run([str(HOOKS_BIN / "mjf-slurm"), "nonsense"], capture_output=True,
                               env={"MJF_CONFIG": str(SITE_CONFIG)}, timeout=60)
        assert wrong.returncode == 0  # fail-safe: logged and counted
        synced = slurm.mjf("sync")
        assert synced.returncode == 0, synced.stdout + synced.stderr
        written = (stack.textfiles / "mjf.prom").read_text()
        checked = subprocess.run(["promtool", "check", "metrics"], input=written, text=True,
                                 capture_output=True, timeout=60)
        assert checked.returncode == 0, checked.stdout + checked.stderr + written

        job = f'job_id="{job_id}",batch_system="slurm"'
        stack.wait_for(f"mjf_job_used_cpu{{{job}}}", lambda result: True, "the running job")
        assert value_of(stack.query(f"mjf_job_used_cpu{{{job}}}")) == 1
        assert value_of(stack.query(f"mjf_job_allocated_cpu{{{job}}}")) == 2
        assert value_of(stack.query(f"mjf_job_status_reported{{{job}}}")) == 1
        assert value_of(stack.query(f"mjf_job_last_exp_job_end_timestamp_seconds{{{job}}}")) \
            == now + 3000
        # What an admin types: the cores the node's jobs hold, by batch system.
        assert value_of(stack.query('sum by (batch_system) (mjf_jobs{batch_system="slurm"})')) \
            == 1
        assert value_of(stack.query("sum(mjf_job_allocated_cpu)")) == 2
        assert value_of(stack.query("mjf_machine_draining")) == 0
        assert value_of(stack.query("mjf_machine_grace_seconds")) == 600
        failures = stack.query('mjf_hook_failures_total{entry_point="mjf-slurm"}')
        assert [(series["metric"]["reason"], series["value"][1]) for series in failures] \
            == [("input", "1")]
        assert stack.query('ALERTS{alertname="MJFNodeDrainsWithinGrace"}') == []

        # A maintenance reservation in 5 minutes, within grace_secs (600): mjf sync
        # announces it, and Prometheus sees the drain and fires the alert.
        start = datetime.datetime.now().replace(microsecond=0) + datetime.timedelta(minutes=5)
        reservation = "mjfpromdrain"
        slurm.command(["scontrol", "create", "reservation", f"ReservationName={reservation}",
                       f"StartTime={start.isoformat()}", "Duration=10",
                       f"Nodes={slurm.node}", "Flags=MAINT,IGNORE_JOBS", "Users=root"])
        synced = slurm.mjf("sync")
        assert f"from Slurm maintenance reservation {reservation}" in synced.stdout, \
            synced.stdout + synced.stderr
        expected = int(start.timestamp())
        stack.wait_for("mjf_machine_draining", lambda result: value_of(result) == 1,
                       "the drain")
        assert value_of(stack.query("mjf_machine_shutdowntime_timestamp_seconds")) == expected
        left = value_of(stack.query(
            "mjf_machine_shutdowntime_timestamp_seconds - time()"))
        assert 0 < left <= 300
        alert = stack.wait_for('ALERTS{alertname="MJFNodeDrainsWithinGrace",'
                               'alertstate="firing"}', lambda result: True, "the drain alert")
        assert alert[0]["metric"]["instance"] == f"127.0.0.1:{stack.exporter_port}"
        # The job still runs, and is still there.
        assert value_of(stack.query(f"mjf_job_used_cpu{{{job}}}")) == 1
    finally:
        if reservation:
            slurm.command(["scontrol", "delete", f"reservation={reservation}"], check=False)
        slurm.command(["scancel", job_id], check=False)
        slurm.wait_until_no_jobs()
    synced = slurm.mjf("sync")
    assert "withdrawn" in synced.stdout, synced.stdout + synced.stderr
    stack.wait_for("mjf_machine_draining", lambda result: value_of(result) == 0,
                   "the drain withdrawn")
    stack.wait_for('mjf_jobs{batch_system="slurm"}', lambda result: value_of(result) == 0,
                   "the job gone")
    assert stack.query("mjf_job_used_cpu") == []


def test_a_sync_whose_scontrol_cannot_reach_its_controller_fires_the_sync_alert(stack, slurm):
    """Slurm's controller is unreachable for `mjf sync` (its slurm.conf names a port nobody
    listens on): the drains cannot be asked, the pass fails - exit 1, one error line naming
    the phase, mjf_sync_failed_phases 1 - and MJFSyncFailing fires; the next pass that
    reaches it clears the metric."""
    unreachable = slurm.conf.with_name("slurm-unreachable.conf")
    unreachable.write_text("".join(
        line for line in slurm.conf.read_text().splitlines(keepends=True)
        if not line.startswith("SlurmctldPort=")) + f"SlurmctldPort={free_port()}\n")
    synced = slurm.command([str(slurm.bindir / "mjf"), "sync"], check=False, timeout=120,
                           env={"MJF_CONFIG": str(SITE_CONFIG), "SLURM_CONF": str(unreachable)})
    assert synced.returncode == 1, synced.stdout + synced.stderr
    errors = [line for line in synced.stderr.splitlines() if ": error: " in line]
    assert len(errors) == 1 and "sync: drains failed: Slurm could not be asked" in errors[0], \
        synced.stderr
    stack.wait_for("mjf_sync_failed_phases", lambda result: value_of(result) == 1,
                   "the failed phase")
    alert = stack.wait_for('ALERTS{alertname="MJFSyncFailing",alertstate="firing"}',
                           lambda result: True, "the sync alert")
    assert alert[0]["metric"]["instance"] == f"127.0.0.1:{stack.exporter_port}"
    synced = slurm.mjf("sync")
    assert synced.returncode == 0, synced.stdout + synced.stderr
    stack.wait_for("mjf_sync_failed_phases", lambda result: value_of(result) == 0,
                   "the failed phase cleared")
