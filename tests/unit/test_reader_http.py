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
from mjf_hooks.reader import MAX_VALUE_BYTES, Features, JobView, ReadError, close_connections
from tests.conftest import require

# An answer left for the GC to close shows up as an "unraisable" exception: fail on it.
pytestmark = pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")

OK = b"HTTP/1.1 200 OK\r\n"
CLOSE = b"Connection: close\r\n"


class ScriptedServer:
    """Listens on 127.0.0.1; for each connection reads the request head, then plays the
    script: bytes are sent, numbers are pauses in seconds. ``then`` holds the scripts of
    the next requests on the same connection (an empty one answers nothing). Then it closes
    the connection, or with ``hold`` keeps it open until the client goes away or the server
    stops. ``later``, if given, is what every connection after the first gets instead."""

    def __init__(self, *script: bytes | float, hold: bool = False,
                 then: tuple[tuple[bytes | float, ...], ...] = (),
                 later: tuple[tuple[bytes | float, ...], ...] | None = None) -> None:
        self.script = script
        self.then = then
        self.later = later
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
        # Each connection answered by a thread of its own: a client may open another while
        # it keeps one.
        answering: list[threading.Thread] = []
        while not self._stop.is_set():
            try:
                connection, _ = self._listener.accept()
            except socket.timeout:
                continue
            self.connections.append(connection)
            answering.append(threading.Thread(target=self._converse, args=(connection,),
                                              daemon=True))
            answering[-1].start()
        for thread in answering:
            thread.join(5)

    def _converse(self, connection: socket.socket) -> None:
        with connection:
            try:
                self._answer(connection)
            except OSError:
                pass  # the client gave up mid-script: what timeout tests expect

    def _answer(self, connection: socket.socket) -> None:
        connection.settimeout(0.05)
        first = connection is self.connections[0]
        for script in ((self.script, *self.then) if first or self.later is None
                       else self.later):
            request = b""
            while b"\r\n\r\n" not in request and not self._stop.is_set():
                try:
                    chunk = connection.recv(65536)
                except socket.timeout:
                    continue
                if not chunk:
                    return
                request += chunk
            if self._stop.is_set():
                return
            self.requests.append(request)
            for step in script:
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
        close_connections()  # the kept ones: closed by the reader, at exit or when asked
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

        def as_nobody() -> str:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            try:
                os.listdir(directory)
                return "listable"
            except PermissionError:
                return ",".join(Features(str(directory)).names())

        result = in_child(as_nobody)
    finally:
        shutil.rmtree(parent)
    assert result == ",".join(EXPECTED_NAMES)


def in_child(work) -> str:
    """What ``work()`` returns when run in a forked child, which must exit 0."""
    reader, writer = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # a fork with threads running
        pid = os.fork()
    if pid == 0:  # the child: report through the pipe, never return into pytest
        status = 1
        try:
            os.close(reader)
            os.write(writer, work().encode())
            status = 0
        finally:
            os._exit(status)
    os.close(writer)
    with os.fdopen(reader, "rb") as pipe:
        result = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return result


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


# Kept-alive answers: no "Connection: close", so the client may ask again on the connection.
SIXTEEN = OK + b"Content-Length: 2\r\n\r\n16"


def test_one_connection_serves_every_key_of_both_locations():
    keys = len(spec.KEYS) + len(spec.LEGACY_KEYS)
    with ScriptedServer(SIXTEEN, then=((SIXTEEN,),) * (2 * keys)) as server:
        view = JobView(Features(server.url("/machinefeatures")),
                       Features(server.url("/jobs/7/jobfeatures")))
        machine, job = view.machine.read_all(), view.job.read_all()
    assert machine["total_cpu"] == job["job_id"] == "16"
    assert len(server.connections) == 1
    # No Cache-Control: still one request per key, not one to list it and one to read it.
    assert len(server.requests) == 2 * keys


def test_a_connection_the_server_closed_while_idle_is_opened_afresh():
    # The server closes after each answer without saying so (a keep-alive timeout).
    with ScriptedServer(SIXTEEN) as server:
        features = Features(server.url("/machinefeatures"))
        assert features.get("total_cpu") == 16
        assert features.get("hs06") == 16
    assert len(server.connections) == len(server.requests) == 2


@pytest.mark.parametrize("broken", [
    pytest.param((), id="closed-on-the-next-request"),
    pytest.param((OK + b"Content-Length: 2\r\n\r\n1",), id="cut-short-on-the-next-request"),
    pytest.param((OK + b"Transfer-Encoding: chunked\r\n\r\n2\r\n1",),
                 id="chunks-cut-short-on-the-next-request"),
])
def test_a_kept_connection_that_breaks_is_opened_again_once(broken):
    # The broken answer is never taken for a value: the request is made again, on a new
    # connection, whose first answer is whole.
    with ScriptedServer(SIXTEEN, then=(broken,)) as server:
        features = Features(server.url("/machinefeatures"))
        assert features.get("total_cpu") == 16
        assert features.get("hs06") == 16
    assert len(server.connections) == 2
    assert len(server.requests) == 3


def test_a_kept_connection_is_opened_again_only_once():
    # The kept connection breaks on the next request, and so does the fresh one.
    with ScriptedServer(SIXTEEN, then=((),), later=((),)) as server:
        features = Features(server.url("/machinefeatures"))
        assert features.get("total_cpu") == 16
        with pytest.raises(ReadError, match="hs06: RemoteDisconnected: Remote end closed"):
            features.get("hs06")
    assert len(server.connections) == 2
    assert len(server.requests) == 3


def test_each_request_on_a_kept_connection_has_its_own_deadline():
    # Two answers that each take 1.2 s of a 2 s timeout: 2.4 s in all on one connection.
    slow = (1.2, SIXTEEN)
    with ScriptedServer(SIXTEEN, then=(slow, slow)) as server:
        features = Features(server.url("/machinefeatures"), timeout_secs=2.0)
        assert [features.get(name) for name in ("total_cpu", "hs06", "grace_secs")] \
            == [16, 16, 16]
    assert len(server.connections) == 1


def test_a_trickling_answer_on_a_kept_connection_still_times_out():
    trickle = (OK, *(step for n in range(20) for step in (0.5, b"X-Slow-%d: y\r\n" % n)))
    with ScriptedServer(SIXTEEN, then=(trickle,)) as server:
        features = Features(server.url("/machinefeatures"), timeout_secs=1.5)
        assert features.get("total_cpu") == 16
        with pytest.raises(ReadError, match=r"hs06: timed out after 1\.5 s"):
            features.get("hs06")
    assert len(server.connections) == 1  # a timeout is not a broken connection: no retry


def test_a_forked_child_opens_its_own_connection():
    with ScriptedServer(SIXTEEN, then=((SIXTEEN,),) * 4) as server:
        features = Features(server.url("/machinefeatures"))
        assert features.get("total_cpu") == 16  # the parent's connection, kept
        result = in_child(lambda: str(Features(server.url("/machinefeatures")).get("hs06")))
        assert features.get("grace_secs") == 16  # the parent's connection still works
    assert result == "16"
    # The parent's connection for its two reads, the child's own for its one.
    assert len(server.connections) == 2
    assert len(server.requests) == 3


def test_locations_on_other_hosts_get_their_own_connections():
    with ScriptedServer(SIXTEEN, then=((SIXTEEN,),) * 4) as server:
        one = Features(server.url("/machinefeatures"))
        other = Features(server.url("/machinefeatures").replace("127.0.0.1", "localhost"))
        assert [one.get("total_cpu"), other.get("total_cpu"), one.get("hs06"),
                other.get("hs06")] == [16] * 4
    assert len(server.connections) == 2


def test_a_redirect_is_followed_on_the_kept_connection():
    found = b"HTTP/1.1 302 Found\r\nLocation: /elsewhere/total_cpu\r\n" \
        + b"Content-Length: 5\r\n\r\nmoved"
    with ScriptedServer(found, then=((SIXTEEN,),)) as server:
        assert Features(server.url("/machinefeatures")).get("total_cpu") == 16
    assert server.requests[1].startswith(b"GET /elsewhere/total_cpu HTTP/1.1\r\n")
    assert len(server.connections) == 1


@pytest.mark.parametrize("target", [b"file:///etc/passwd", b"ftp://example.invalid/x"])
def test_a_redirect_leads_only_to_http(target):
    found = answer(b"", b"Location: " + target).replace(b"200 OK", b"302 Found")
    with ScriptedServer(found) as server:
        assert "is not http(s)" in read_error(server.url("/m"))
