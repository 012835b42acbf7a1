"""MJF over HTTP: contrib/nginx/mjf.conf served by a real nginx on loopback.

The reader, `mjf check`, `mjf remaining` and `mjf show` over URLs; the cache
honoured (requests counted in nginx's access log); a 404 is absent, a 500 or a
silent server is an error naming the URL; `export = url` makes the hooks
export URLs that work.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from mjf_hooks import spec
from mjf_hooks.reader import Features, JobView, ReadError, close_connections
from mjf_hooks.store import Store
from tests.conftest import CHECKOUT_ROOT, ConfigPath, installed_command, require
from tests.integration.boot_dirs import make_boot_dirs

pytestmark = pytest.mark.integration

NGINX = "/usr/sbin/nginx"
# jobstart_secs is set when the server starts: the module may be collected minutes earlier.
JOB = {"job_id": "vm#1.0#17", "allocated_cpu": "2",
       "wall_limit_secs": "3600", "cpu_limit_secs": "7200", "max_rss_bytes": str(2**31),
       "max_swap_bytes": "0", "scratch_limit_bytes": str(10**11), "hs06_job": "25",
       "grace_secs_job": "600"}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Server:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.base = root / "base"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.access_log = root / "access.log"
        self.connections_log = root / "connections.log"  # nginx's connection serial number

    def start(self) -> None:
        site = (CHECKOUT_ROOT / "contrib/nginx/mjf.conf").read_text()
        site = site.replace("listen 127.0.0.1:8480;", f"listen 127.0.0.1:{self.port};")
        site = site.replace("root /run/mjf;", f"root {self.base};\n"
                            "    location /broken/ { return 500; }")
        (self.root / "nginx.conf").write_text(f"""
worker_processes 1;
pid {self.root}/nginx.pid;
error_log {self.root}/error.log;
events {{ worker_connections 64; }}
http {{
    access_log {self.access_log};
    log_format connections '$connection $request';
    access_log {self.connections_log} connections;
    client_body_temp_path {self.root}/tmp;
    proxy_temp_path {self.root}/tmp;
    fastcgi_temp_path {self.root}/tmp;
    uwsgi_temp_path {self.root}/tmp;
    scgi_temp_path {self.root}/tmp;
{site}
}}
""")
        (self.root / "tmp").mkdir(exist_ok=True)
        subprocess.run([NGINX, "-c", str(self.root / "nginx.conf"), "-p", str(self.root)],
                       check=True, capture_output=True, timeout=30)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("nginx did not start: " + (self.root / "error.log").read_text())

    def stop(self) -> None:
        subprocess.run([NGINX, "-c", str(self.root / "nginx.conf"), "-p", str(self.root),
                        "-s", "stop"], check=False, capture_output=True, timeout=30)

    def requests_for(self, path: str) -> int:
        time.sleep(0.05)  # nginx writes its log line after answering
        text = self.access_log.read_text() if self.access_log.exists() else ""
        return sum(f"GET {path} " in line for line in text.splitlines())


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    require(os.geteuid() == 0 and Path(NGINX).exists(),
            "needs root and Debian's nginx (tests/setup-system)")
    make_boot_dirs(Path("/"), ("nginx", "nginx-common"))
    root = Path(tmp_path_factory.mktemp("nginx"))
    os.chmod(root, 0o755)
    for parent in root.parents:  # nginx's workers (nobody) must reach base_dir
        if parent != Path("/") and not os.stat(parent).st_mode & 0o001:
            os.chmod(parent, os.stat(parent).st_mode | 0o711)
    running = Server(root)
    store = Store(str(running.base))
    store.machine.write({"total_cpu": "16", "hs06": "200", "grace_secs": "600"}, frozenset())
    store.create_job("vm#1.0#17", {**JOB, "jobstart_secs": str(int(time.time()) - 60)})
    running.start()
    yield running
    running.stop()
    shutil.rmtree(root, ignore_errors=True)


def job_url(server):
    return f"{server.url}/jobs/vm%231.0%2317/jobfeatures"


def test_the_reader_gets_typed_values_and_absent_keys(server):
    view = JobView(Features(f"{server.url}/machinefeatures"), Features(job_url(server)))
    assert view.get("total_cpu") == 16 and view.get("hs06") == 200
    assert view.get("job_id") == "vm#1.0#17" and view.get("max_rss_bytes") == 2**31
    assert view.get("shutdowntime") is None and view.get("shutdowntime_job") is None
    assert 3400 < view.remaining_seconds() <= 3540
    assert view.machine.names() == ["grace_secs", "hs06", "total_cpu"]


def test_one_connection_carries_every_request_of_both_locations(server):
    close_connections()  # none kept from an earlier test
    time.sleep(0.05)  # nginx writes its log line after answering
    before = len(server.connections_log.read_text().splitlines())
    view = JobView(Features(f"{server.url}/machinefeatures"), Features(job_url(server)))
    values = {**view.machine.read_all(), **view.job.read_all()}
    time.sleep(0.05)
    lines = server.connections_log.read_text().splitlines()[before:]
    assert len(values) == 3 + len(JOB) + 1
    assert len(lines) == 2 * (len(spec.KEYS) + len(spec.LEGACY_KEYS))  # each key once
    assert len({line.split()[0] for line in lines}) == 1


def test_answers_are_reused_while_their_max_age_lasts(server):
    now = [1000.0]
    features = Features(job_url(server), clock=lambda: now[0])
    path = "/jobs/vm%231.0%2317/jobfeatures/allocated_cpu"
    before = server.requests_for(path)
    for _ in range(5):
        assert features.get("allocated_cpu") == 2
    assert server.requests_for(path) == before + 1
    now[0] += 31  # past max-age=30
    assert features.get("allocated_cpu") == 2
    assert server.requests_for(path) == before + 2
    absent = "/jobs/vm%231.0%2317/jobfeatures/shutdowntime_job"
    before = server.requests_for(absent)
    for _ in range(3):
        assert features.get("shutdowntime_job") is None
    assert server.requests_for(absent) == before + 1  # a 404 is cached too


def test_404_is_empty_and_hidden_or_symlinked_files_are_not_served(server):
    import urllib.error
    import urllib.request

    (server.base / "jobs/vm#1.0#17/state").mkdir()
    (server.base / "jobs/vm#1.0#17/state/pending").write_text("")
    (server.base / "jobs/vm#1.0#17/jobfeatures/.tmp").write_text("")
    os.symlink("/etc/hostname", server.base / "machinefeatures/planted")
    try:
        for path in ("/machinefeatures/nope", "/machinefeatures/planted", "/jobs/",
                     "/jobs/vm%231.0%2317/jobfeatures/.tmp", "/jobs/vm%231.0%2317/state/pending",
                     "/../etc/passwd"):
            with pytest.raises(urllib.error.HTTPError) as raised:
                urllib.request.urlopen(server.url + path, timeout=5)
            assert raised.value.code in (400, 404)
            if raised.value.code == 404:
                assert raised.value.read() == b""
                assert raised.value.headers["Cache-Control"] == "max-age=30"
    finally:
        os.unlink(server.base / "machinefeatures/planted")
        shutil.rmtree(server.base / "jobs/vm#1.0#17/state")
        os.unlink(server.base / "jobs/vm#1.0#17/jobfeatures/.tmp")


def test_a_server_error_and_a_silent_server_name_the_url(server):
    with pytest.raises(ReadError, match=rf"{server.url}/broken/x/total_cpu: HTTP 500"):
        Features(f"{server.url}/broken/x").get("total_cpu")
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)
    port = silent.getsockname()[1]
    accepted = []
    thread = threading.Thread(target=lambda: accepted.append(silent.accept()), daemon=True)
    thread.start()
    started = time.monotonic()
    with pytest.raises(ReadError, match=rf"http://127.0.0.1:{port}/m/total_cpu: .*timed out"):
        Features(f"http://127.0.0.1:{port}/m", timeout_secs=0.5).get("total_cpu")
    assert time.monotonic() - started < 5
    silent.close()


def test_mjf_check_show_and_remaining_over_http(server):
    env = {**os.environ, "MACHINEFEATURES": f"{server.url}/machinefeatures",
           "JOBFEATURES": job_url(server)}
    mjf = installed_command("mjf")
    check = subprocess.run([mjf, "check"], capture_output=True, text=True, env=env, timeout=60)
    assert check.returncode == 0, check.stdout
    remaining = subprocess.run([mjf, "remaining"], capture_output=True, text=True, env=env,
                               timeout=60)
    assert 3400 < int(remaining.stdout) <= 3540
    show = subprocess.run([mjf, "show", job_url(server)], capture_output=True, text=True,
                          timeout=60)
    assert "allocated_cpu" in show.stdout and "vm#1.0#17" in show.stdout
    broken = subprocess.run([mjf, "check", f"{server.url}/broken/machinefeatures",
                             job_url(server)], capture_output=True, text=True, timeout=60)
    assert broken.returncode == 2 and "HTTP 500" in broken.stdout


def test_export_url_makes_hooks_export_working_urls(server, tmp_path):
    conf = ConfigPath(tmp_path / "mjf.conf")
    conf.write_text(f"[mjf]\nbase_dir = {server.base}\nexport = url\nurl_base = {server.url}\n"
                    "log = stderr\n")
    bindir = os.path.dirname(installed_command("mjf"))
    result = subprocess.run(
        [installed_command("mjf"), "run", "--cpus", "1", "--job-id", "web#1", "--", "sh", "-c",
         'echo "$MACHINEFEATURES $JOBFEATURES"; mjf get allocated_cpu; mjf get total_cpu'],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "MJF_CONFIG": str(conf), "PATH": f"{bindir}:{os.environ['PATH']}"})
    assert result.returncode == 0, result.stderr
    variables, allocated, total = result.stdout.splitlines()
    assert variables == (f"{server.url}/machinefeatures "
                         f"{server.url}/jobs/web%231/jobfeatures")
    assert (allocated, total) == ("1", str(os.cpu_count()))
