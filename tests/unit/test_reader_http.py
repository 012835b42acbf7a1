"""The HTTP reader against servers that misbehave, on real loopback sockets.

Each server answers every connection with a scripted byte sequence (with pauses), so a
test says exactly what goes over the wire; urllib and http.client are never mocked. Every
failure must be a ReadError naming the URL - `mjf get` and `mjf remaining` take anything
else for a crash or for "absent" - and the timeout must bound the whole request.
"""

from __future__ import annotations

import gc
import os
import re
import shutil
import socket
import tempfile
import threading
import time
import warnings
from pathlib import Path

import pytest

from mjf_hooks import check, spec
from mjf_hooks.reader import MAX_VALUE_BYTES, Features, JobView, ReadError
from tests.conftest import require

# An answer left for the GC to close shows up as an "unraisable" exception: fail on it.
pytestmark = pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")

OK = b"HTTP/1.1 200 OK\r\n"
CLOSE = b"Connection: close\r\n"


class ScriptedServer:
    """Listens on 127.0.0.1; for each connection reads the request head, then plays the
    script: bytes are sent, numbers are pauses in seconds. Then it closes the connection,
    or with ``hold`` keeps it open until the client goes away or the server stops."""

    def __init__(self, *script: bytes | float, hold: bool = False) -> None:
        self.script = script
        self.hold = hold
        self.requests: list[bytes] = []
        self.connections: list[socket.socket] = []
        self._stop = threading.Event()
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(8)
        # accept() is not woken by close() from another thread: poll for the stop instead.
        self._listener.settimeout(0.05)
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, name=f"scripted:{self.port}",
                                        daemon=True)

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def __enter__(self) -> ScriptedServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join(5)
        self._listener.close()
        assert not self._thread.is_alive(), "the server thread did not stop"
        assert self._listener.fileno() == -1
        assert all(connection.fileno() == -1 for connection in self.connections)

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self._listener.accept()
            except socket.timeout:
                continue
            self.connections.append(connection)
            with connection:
                try:
                    self._answer(connection)
                except OSError:
                    pass  # the client gave up mid-script: what timeout tests expect

    def _answer(self, connection: socket.socket) -> None:
        connection.settimeout(0.05)
        request = b""
        while b"\r\n\r\n" not in request and not self._stop.is_set():
            try:
                chunk = connection.recv(65536)
            except socket.timeout:
                continue
            if not chunk:
                return
            request += chunk
        self.requests.append(request)
        for step in self.script:
            if isinstance(step, bytes):
                connection.sendall(step)
            elif self._stop.wait(step):
                return
        while self.hold and not self._stop.is_set():
            try:
                if not connection.recv(65536):
                    return
            except socket.timeout:
                continue


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch):
    """Requests go straight to the loopback servers, whatever proxy the environment names."""
    for name in list(os.environ):
        if name.lower().endswith("_proxy"):
            monkeypatch.delenv(name)


@pytest.fixture(autouse=True)
def no_leaks():
    """Every server thread stopped, every socket closed (by the reader, not by the GC)."""
    threads = set(threading.enumerate())
    fds = open_fds()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        yield
        gc.collect()
    assert set(threading.enumerate()) <= threads
    assert [str(warning.message) for warning in caught
            if issubclass(warning.category, ResourceWarning)] == []
    assert open_fds() <= fds


def read_error(base: str, timeout_secs: float = 5.0, name: str = "total_cpu") -> str:
    """The ReadError message of reading a key as `mjf get` does; it must name the URL."""
    with pytest.raises(ReadError) as raised:
        Features(base, timeout_secs=timeout_secs).get(name)
    message = str(raised.value)
    assert message.startswith(f"{base}/{name}: "), message
    assert "\n" not in message
    return message


def answer(body: bytes, *headers: bytes) -> bytes:
    return OK + CLOSE + b"".join(header + b"\r\n" for header in headers) + b"\r\n" + body


@pytest.mark.parametrize(("script", "reason"), [
    pytest.param([b"SSH-2.0-OpenSSH_9.6\r\n"], r"BadStatusLine",
                 id="garbage-status-line"),
    pytest.param([OK + b"".join(b"X-Filler-%d: y\r\n" % n for n in range(120)) + b"\r\n16"],
                 r"HTTPException: got more than 100 headers",
                 id="120-headers"),
    pytest.param([OK + b"X-Big: " + b"a" * 70_000 + b"\r\n\r\n16"],
                 r"LineTooLong", id="70kB-header-line"),
    pytest.param([OK + CLOSE + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n16\r\n0\r\n\r\n"],
                 r"IncompleteRead", id="bad-chunk-size"),
    pytest.param([OK + CLOSE + b"Transfer-Encoding: chunked\r\n\r\n2\r\n16\r\n"],
                 r"IncompleteRead", id="chunked-body-cut-short"),
    pytest.param([OK + b"Content-Length: 10\r\n\r\n16"],
                 r"body has 2 bytes, Content-Length says 10", id="body-short-of-content-length"),
    pytest.param([answer(b"1" * 5000, b"Content-Length: 5000")],
                 rf"longer than {MAX_VALUE_BYTES} bytes: not a key value", id="body-over-4096"),
    pytest.param([answer(b"1" * 5000)],
                 rf"longer than {MAX_VALUE_BYTES} bytes: not a key value",
                 id="body-over-4096-until-close"),
    pytest.param([answer(b"16", b"Content-Length: +2")], r"invalid Content-Length \+2",
                 id="content-length-not-digits"),
    pytest.param([answer(b"16", b"Content-Length: 2", b"Content-Length: 3")],
                 r"invalid Content-Length 2, 3", id="two-content-lengths"),
    pytest.param([b""], r"Remote end closed connection without response",
                 id="closed-without-answer"),
    pytest.param([b"HTTP/1.1 500 \x1b[2JOops\r\n" + CLOSE + b"\r\n"], r"HTTP 500 \\x1b\[2JOops",
                 id="error-reason-escaped"),
])
def test_a_misbehaving_server_is_a_read_error_naming_the_url(script, reason):
    with ScriptedServer(*script) as server:
        assert re.search(reason, read_error(server.url("/machinefeatures")))


def test_large_headers_within_the_limits_still_work():
    # The control for the header cases above: a 60 kB line is under http.client's 64 kB.
    with ScriptedServer(answer(b"16", b"Content-Length: 2", b"X-Big: " + b"a" * 60_000)) as server:
        assert Features(server.url("/machinefeatures")).get("total_cpu") == 16


def test_a_redirect_body_cannot_fill_memory():
    # urllib reads a redirect's body whole before following it; the answer budget stops it.
    endless = OK.replace(b"200 OK", b"302 Found") + b"Location: /elsewhere\r\n" \
        + b"Transfer-Encoding: chunked\r\n\r\n" + b"100000\r\n" + b"x" * 0x100000 + b"\r\n" \
        + b"100000\r\n" + b"x" * 0x100000 + b"\r\n"
    with ScriptedServer(endless, hold=True) as server:
        message = read_error(server.url("/m"))
    assert re.search(r"answer longer than \d+ bytes", message), message


def test_a_refused_connection_is_a_read_error():
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    assert re.search("Connection refused", read_error(f"http://127.0.0.1:{port}/m"))


@pytest.mark.parametrize(("base", "reason"), [
    ("http://127.0.0.1:abc/m", "InvalidURL: nonnumeric port"),
    ("http://[::1/m", "ValueError: Invalid IPv6 URL"),
    ("http:///m", "no host given"),
])
def test_a_url_that_cannot_be_requested_is_a_read_error(base, reason):
    assert reason in read_error(base)


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_a_server_that_never_answers_times_out_in_time(scheme):
    # Over https the wait is in the TLS handshake, over http for the status line.
    with ScriptedServer(hold=True) as server:
        started = time.monotonic()
        message = read_error(server.url("/m").replace("http", scheme, 1), timeout_secs=1.0)
        elapsed = time.monotonic() - started
    assert "timed out after 1 s" in message
    assert 0.9 <= elapsed < 2.0


@pytest.mark.parametrize("where", ["headers", "body"])
def test_a_trickling_server_cannot_stretch_the_timeout(where):
    # One line (or byte) every 0.5 s: each recv is quick, the request as a whole is not.
    if where == "headers":
        script = [OK] + [step for n in range(20) for step in (0.5, b"X-Slow-%d: y\r\n" % n)]
    else:
        script = [OK + b"Content-Length: 20\r\n\r\n"] + [step for _ in range(20)
                                                         for step in (0.5, b"1")]
    with ScriptedServer(*script) as server:
        started = time.monotonic()
        message = read_error(server.url("/m"), timeout_secs=1.5)
        elapsed = time.monotonic() - started
    assert "timed out after 1.5 s" in message
    assert 1.4 <= elapsed < 3.0


@pytest.mark.parametrize("body", [
    pytest.param(b"16", id="content-length"),
    pytest.param(b"1\r\n1\r\n1\r\n6\r\n0\r\n\r\n", id="chunked"),
])
def test_a_good_answer_is_read_and_cached(body):
    framing = b"Transfer-Encoding: chunked" if b"\r\n" in body else b"Content-Length: 2"
    with ScriptedServer(answer(body, framing, b"Cache-Control: max-age=60")) as server:
        features = Features(server.url("/machinefeatures/"))
        assert features.get("total_cpu") == 16
        assert features.get("total_cpu") == 16
    assert len(server.requests) == 1
    assert server.requests[0].startswith(b"GET /machinefeatures/total_cpu HTTP/1.1\r\n")


def test_the_environment_proxy_is_used(monkeypatch):
    with ScriptedServer(answer(b"16", b"Content-Length: 2")) as proxy:
        monkeypatch.setenv("http_proxy", proxy.url())
        assert Features("http://mjf.example.invalid/machinefeatures").get("total_cpu") == 16
    assert proxy.requests[0].startswith(
        b"GET http://mjf.example.invalid/machinefeatures/total_cpu HTTP/1.1\r\n")


def test_a_trickling_proxy_cannot_stretch_the_timeout_of_an_https_request(monkeypatch):
    # The proxy's answer to CONNECT comes before any TLS: it too must keep to the deadline.
    script = [OK.replace(b"OK", b"Connection established")]
    script += [step for n in range(20) for step in (0.5, b"X-Slow-%d: y\r\n" % n)]
    with ScriptedServer(*script) as proxy:
        monkeypatch.setenv("https_proxy", proxy.url())
        started = time.monotonic()
        message = read_error("https://mjf.example.invalid/m", timeout_secs=1.5)
        elapsed = time.monotonic() - started
    assert proxy.requests[0].startswith(b"CONNECT mjf.example.invalid:443 HTTP/1.")
    assert "timed out after 1.5 s" in message
    assert 1.4 <= elapsed < 3.0


def test_a_404_is_absent_and_cached():
    not_found = b"HTTP/1.1 404 Not Found\r\n" + CLOSE + b"Content-Length: 0\r\n" \
        + b"Cache-Control: max-age=30\r\n\r\n"
    with ScriptedServer(not_found) as server:
        features = Features(server.url("/jobfeatures"))
        assert features.get("shutdowntime_job") is None
        assert features.raw("shutdowntime_job") is None
    assert len(server.requests) == 1


def test_check_and_remaining_report_a_broken_server_as_a_read_error():
    with ScriptedServer(b"garbage\r\n") as server:
        machine = Features(server.url("/machinefeatures"))
        job = Features(server.url("/jobfeatures"))
        findings = check.check(machine, [job])
        with pytest.raises(ReadError, match=re.escape(server.url("/jobfeatures/"))):
            JobView(machine, job).remaining_seconds()
    locations = [finding for finding in findings if finding.rule == "location"]
    assert {finding.location for finding in locations} == {machine.location, job.location}
    assert all(server.url() in finding.message for finding in locations)


def unlistable(parent):
    """A features directory as written with dir_mode 0711: enterable, not listable."""
    directory = parent / "machinefeatures"
    directory.mkdir()
    (directory / "total_cpu").write_text("16")
    (directory / "shutdowntime").write_text("1795319471")
    (directory / "not_a_key").write_text("x")
    for path in directory.iterdir():
        path.chmod(0o644)
    directory.chmod(0o711)
    return directory


EXPECTED_NAMES = ["shutdowntime", "total_cpu"]


def refuse_listing(path):
    """os.listdir as a user without read permission on the directory sees it."""
    raise PermissionError(13, "Permission denied", path)


def test_a_directory_that_may_be_entered_but_not_listed_is_read_key_by_key(tmp_path,
                                                                           monkeypatch):
    directory = unlistable(tmp_path)
    monkeypatch.setattr(os, "listdir", refuse_listing)
    features = Features(str(directory))
    assert features.names() == EXPECTED_NAMES
    assert features.read_all() == {"shutdowntime": "1795319471", "total_cpu": "16"}


def test_an_unlistable_directory_as_another_user_really_sees_it():
    """The same without simulation: needs root, to become nobody in a child process."""
    # Without root the directory is ours, and an owner may list it: the simulation above
    # stands in for a developer; CI runs this.
    require(os.geteuid() == 0, "needs root to read a directory as another user")
    # Not under tmp_path: pytest makes that 0700, which nobody cannot enter.
    parent = Path(tempfile.mkdtemp(prefix="mjf-unlistable-"))
    try:
        parent.chmod(0o755)
        directory = unlistable(parent)
        reader, writer = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report through the pipe, never return into pytest
            status = 1
            try:
                os.close(reader)
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
                try:
                    os.listdir(directory)
                    result = "listable"
                except PermissionError:
                    result = ",".join(Features(str(directory)).names())
                os.write(writer, result.encode())
                status = 0
            finally:
                os._exit(status)
        os.close(writer)
        with os.fdopen(reader, "rb") as pipe:
            result = pipe.read().decode()
        _, status = os.waitpid(pid, 0)
    finally:
        shutil.rmtree(parent)
    assert os.waitstatus_to_exitcode(status) == 0
    assert result == ",".join(EXPECTED_NAMES)


def test_other_listing_errors_stay_read_errors(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(ReadError, match="Not a directory"):
        Features(str(tmp_path / "file")).names()
    with pytest.raises(ReadError, match="No such file"):
        Features(str(tmp_path / "missing")).names()


def test_the_fallback_asks_for_every_registry_key(tmp_path, monkeypatch):
    asked = []
    monkeypatch.setattr(os, "listdir", refuse_listing)
    features = Features(str(tmp_path))
    monkeypatch.setattr(features, "raw", lambda name: asked.append(name))
    assert features.names() == []
    assert sorted(asked) == sorted(list(spec.KEYS) + [key.name for key in spec.LEGACY_KEYS])
