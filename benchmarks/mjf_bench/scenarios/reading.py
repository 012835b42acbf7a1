"""Reading all 15 keys in a fresh interpreter, from the directory and through nginx
(contrib/nginx/mjf.conf, when root and /usr/sbin/nginx are there): first read and
re-read; and, as the yardstick of the first read, one key read the same way."""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import time

from .. import CHECKOUT
from ..bench import Bench
from ..measure import NOT_MEASURED, PYTHON_FLOOR, Command
from ..report import Table, per_floor
from ..scenario import Scenario

NGINX = "/usr/sbin/nginx"
LOCAL, HTTP = "local directory", "HTTP (nginx, loopback)"

# Run by the venv's interpreter, as a payload would: reader imported, then timed.
_READ = """\
import sys, time
from mjf_hooks.reader import Features
root = sys.argv[1]
start = time.perf_counter()
machine, job = Features(root + "/machinefeatures"), Features(root + "/jobs/7/jobfeatures")
values = {**machine.read_all(), **job.read_all()}
first = time.perf_counter() - start
assert len(values) == 15, values
start = time.perf_counter()
again = {**machine.read_all(), **job.read_all()}
second = time.perf_counter() - start
assert again == values
print(first * 1000, second * 1000)
"""

# The same for one key: what a single request costs a payload, import of the HTTP client
# included, as it is in the first read of all 15.
_READ_ONE = """\
import sys, time
from mjf_hooks.reader import Features
root = sys.argv[1]
start = time.perf_counter()
value = Features(root + "/machinefeatures").raw("total_cpu")
first = time.perf_counter() - start
assert value == "16", value
print(first * 1000)
"""


class Reading(Scenario):
    startup_table = False

    def __init__(self, bench: Bench) -> None:
        super().__init__(bench)
        self.locations: dict[str, str] = {}
        self.nginx: list[str] = []  # the command that started it, while it runs
        # per repeat: ms per location, of the first read, the re-read and one key's read
        self.runs: list[dict[str, tuple[float, float, float]]] = []

    def prepare(self) -> None:
        """A machine and one job with all 15 keys, served by nginx where it can be."""
        from mjf_hooks.store import Store

        store = Store(os.path.join(self.bench.work, "read"))
        store.machine.write({"total_cpu": "16", "hs06": "200", "grace_secs": "600",
                             "shutdowntime": "1900000000"}, frozenset())
        store.create_job("7", {"job_id": "7", "allocated_cpu": "2",
                               "jobstart_secs": "1800000000", "wall_limit_secs": "3600",
                               "cpu_limit_secs": "7200", "max_rss_bytes": "2000000000",
                               "max_swap_bytes": "0", "scratch_limit_bytes": "100000000000",
                               "hs06_job": "25", "grace_secs_job": "600",
                               "shutdowntime_job": "1900000000"})
        self.locations[LOCAL] = store.base_dir
        if os.geteuid() == 0 and os.path.exists(NGINX):
            self.locations[HTTP] = self._serve(store.base_dir)

    def _serve(self, base: str) -> str:
        """Start contrib/nginx/mjf.conf on a free loopback port; its URL."""
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        with open(os.path.join(CHECKOUT, "contrib", "nginx", "mjf.conf")) as handle:
            site = handle.read().replace("listen 127.0.0.1:8480;", f"listen 127.0.0.1:{port};")
        site = site.replace("root /run/mjf;", f"root {base};")
        prefix = os.path.join(self.bench.work, "nginx")
        os.makedirs(os.path.join(prefix, "tmp"), exist_ok=True)
        for path in (self.bench.work, base):  # nginx's workers run as another user
            os.chmod(path, 0o755)  # noqa: S103 - world-readable is what MJF's files are
        temp = " ".join(f"{kind}_temp_path {prefix}/tmp;" for kind in
                        ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        conf = self.bench.file("nginx/nginx.conf",
                               f"worker_processes 1; pid {prefix}/nginx.pid; error_log "
                               f"{prefix}/error.log; events {{ worker_connections 64; }} "
                               f"http {{ access_log off; {temp} {site} }}")
        self.nginx = [NGINX, "-c", conf, "-p", prefix]
        subprocess.run(self.nginx, check=True, capture_output=True)
        time.sleep(0.2)
        return f"http://127.0.0.1:{port}"

    def repeat(self) -> None:
        """ms of the first read and of a re-read of all 15 keys, and of one key's read, per
        location."""
        figures = {}
        for label, root in self.locations.items():
            first, again = (float(value) for value in self._run(_READ, root).split())
            figures[label] = first, again, float(self._run(_READ_ONE, root))
        self.runs.append(figures)

    def _run(self, script: str, root: str) -> str:
        return subprocess.run([self.bench.python, "-c", script, root], capture_output=True,
                              text=True, check=True, env=self.bench.env).stdout

    def tables(self, floors: dict[str, Command]) -> list[Table]:
        python_floor = floors[PYTHON_FLOOR].ms
        table = Table(["reading all 15 keys", "first read ÷ python floor", "ms",
                       "÷ one key's first read", "re-read ÷ python floor", "ms",
                       "one key's first read, ms"])
        for label in (LOCAL, HTTP):
            if label not in self.locations:
                table.add(label, NOT_MEASURED, "", "", "", "", "")
                table.note = ("(HTTP skipped: needs root and /usr/sbin/nginx, "
                              "see tests/setup-system)")
                continue
            first, again, one = ([run[label][index] for run in self.runs] for index in range(3))
            table.add(label, per_floor(first, python_floor), f"{statistics.median(first):.1f}",
                      per_floor(first, one), per_floor(again, python_floor, 3),
                      f"{statistics.median(again):.2f}", f"{statistics.median(one):.2f}")
        return [table]

    def close(self) -> None:
        """Stop nginx and wait (a few seconds at most) until it has exited: its files are
        in the work directory, removed next."""
        if not self.nginx:
            return
        with open(os.path.join(self.nginx[-1], "nginx.pid")) as handle:
            master = int(handle.read())
        subprocess.run([*self.nginx, "-s", "stop"], check=False, capture_output=True)
        self.nginx = []
        deadline = time.monotonic() + 5
        while os.path.exists(f"/proc/{master}") and time.monotonic() < deadline:
            time.sleep(0.02)
