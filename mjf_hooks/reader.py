"""The consumer side: read machine and job features the way a payload does.

A location is a local directory or an http(s) URL, as HSF-TN-2016-02 allows
(``$MACHINEFEATURES``/``$JOBFEATURES`` may be either). Absent keys are None,
never an exception; a malformed value raises :class:`MalformedValue` naming the
key, the location and the value; an HTTP error other than 404, or no answer in
time, raises :class:`ReadError` naming the URL. HTTP answers are kept as long
as their ``Cache-Control: max-age`` (or ``Expires``) allows, so a job polling
every minute does not ask the server every minute.

Usage::

    from mjf_hooks.reader import JobView
    view = JobView.from_environ()
    cores = view.get("allocated_cpu")          # int or None
    left = view.remaining_seconds()           # int or None
"""

from __future__ import annotations

import os
import stat
import time

from . import spec
from .errors import MJFError

MAX_VALUE_BYTES = 4096
MAX_ANSWER_BYTES = 1 << 20  # status line, headers and body of one HTTP answer
DEFAULT_TIMEOUT_SECS = 10.0


class ReadError(MJFError):
    """A location could not be read (HTTP error, timeout, permission)."""


class MalformedValue(MJFError):
    """A key holds a value that does not follow the spec."""


def is_url(location: str) -> bool:
    return location.startswith(("http://", "https://"))


class Features:
    """One features location: a directory or a URL."""

    def __init__(self, location: str, timeout_secs: float = DEFAULT_TIMEOUT_SECS,
                 clock=time.monotonic) -> None:
        self.location = location.rstrip("/") or "/"
        self.timeout_secs = timeout_secs
        self._clock = clock
        self._cache: dict[str, tuple[float, str | None]] = {}

    def raw(self, name: str) -> str | None:
        """A key's content as written, or None if absent."""
        if is_url(self.location):
            return self._fetch(name)
        return _read_file(os.path.join(self.location, name))

    def get(self, name: str) -> int | float | str | None:
        """A key's value as its registry type; None if absent."""
        raw = self.raw(name)
        if raw is None:
            return None
        try:
            return spec.parse_value(spec.typed_like(name), raw)
        except ValueError as error:
            raise MalformedValue(f"{self.location}/{name} = {raw!r}: {error}") from None

    def names(self) -> list[str]:
        """The keys present: a directory's files; for a URL, or a directory this user may
        enter but not list (``dir_mode = 0711``), the registry keys it serves."""
        if not is_url(self.location):
            try:
                entries = os.listdir(self.location)
            except PermissionError:
                pass  # the keys can still be opened by name, as over HTTP
            except OSError as error:
                raise ReadError(f"{self.location}: {error.strerror}") from None
            else:
                return sorted(name for name in entries if not name.startswith("."))
        candidates = list(spec.KEYS) + [legacy.name for legacy in spec.LEGACY_KEYS]
        return sorted(name for name in candidates if self.raw(name) is not None)

    def read_all(self) -> dict[str, str]:
        return {name: raw for name in self.names() if (raw := self.raw(name)) is not None}

    def as_dict(self) -> dict:
        """Location and every value, typed where well-formed (as written otherwise)."""
        values: dict[str, object] = {}
        for name, raw in self.read_all().items():
            try:
                values[name] = self.get(name)
            except MalformedValue:
                values[name] = raw
        return {"location": self.location, "values": values}

    def _fetch(self, name: str) -> str | None:
        url = f"{self.location}/{name}"
        cached = self._cache.get(url)
        if cached is not None and cached[0] > self._clock():
            return cached[1]
        value, lifetime = _http_get(url, self.timeout_secs)
        if lifetime > 0:
            self._cache[url] = (self._clock() + lifetime, value)
        return value


def _read_file(path: str) -> str | None:
    try:
        # A FIFO in place of a key would block a reader for good: never wait on one.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as error:
        raise ReadError(f"{path}: {error.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, MAX_VALUE_BYTES).decode("ascii", "replace")
    finally:
        os.close(fd)


def _http_get(url: str, timeout_secs: float) -> tuple[str | None, float]:
    """(body or None for 404, seconds it may be cached).

    Whatever goes wrong - no connection, a timeout, an answer that is no valid HTTP - is a
    ReadError naming the URL: callers take anything else for a bug, and None for "absent".
    ``timeout_secs`` bounds the whole request, not each wait on the socket.
    """
    import http.client  # only payloads reading over HTTP pay for urllib
    import urllib.error
    import urllib.request

    exchange = _Exchange(timeout_secs)
    # ProxyHandler: sites rely on the job's http_proxy/https_proxy being honoured. Built
    # by hand, not with build_opener: http(s) only, so no redirect leads to ftp: or
    # file: (and out of the deadline).
    opener = urllib.request.OpenerDirector()
    for handler in (urllib.request.ProxyHandler(), urllib.request.UnknownHandler(),
                    urllib.request.HTTPDefaultErrorHandler(),
                    urllib.request.HTTPRedirectHandler(), urllib.request.HTTPErrorProcessor(),
                    *_deadline_handlers(exchange)):
        opener.add_handler(handler)
    try:
        # Only http(s) locations get here (is_url): no file: or custom schemes.
        request = urllib.request.Request(url, headers={"User-Agent": "mjf-hooks"})  # noqa: S310
        with opener.open(request, timeout=timeout_secs) as response:
            body = response.read(MAX_VALUE_BYTES + 1)
            # http.client neither checks a short body against Content-Length nor rejects an
            # odd one ("+5", " 5"); a chunked answer has no length to check.
            lengths = [] if response.chunked else response.headers.get_all("Content-Length", [])
            lifetime = cache_lifetime(response.headers)
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return None, cache_lifetime(error.headers)
        raise ReadError(f"{url}: HTTP {error.code} {_printable(str(error.reason))}") from None
    except (OSError, http.client.HTTPException, ValueError) as error:
        raise ReadError(f"{url}: {_failure(error, timeout_secs)}") from None
    finally:
        exchange.close()
    if len(body) > MAX_VALUE_BYTES:
        raise ReadError(f"{url}: longer than {MAX_VALUE_BYTES} bytes: not a key value")
    if lengths:
        if len(set(lengths)) > 1 or not _is_digits(lengths[0]):
            raise ReadError(f"{url}: invalid Content-Length {_printable(', '.join(lengths))}")
        if len(body) != int(lengths[0]):
            raise ReadError(f"{url}: body has {len(body)} bytes, "
                            f"Content-Length says {int(lengths[0])}")
    return body.decode("ascii", "replace"), lifetime


def _is_digits(text: str) -> bool:
    # str.isdigit() would take "²" or "٣"; int() would take " 5", "+5" and "5_0".
    return bool(text) and all("0" <= char <= "9" for char in text)


def _printable(text: str, limit: int = 200) -> str:
    """Server-chosen text made safe for one line of a terminal or a log: escaped, cut short."""
    return repr(text)[1:-1][:limit]


def _failure(error: BaseException, timeout_secs: float) -> str:
    """A short reason for a failed request."""
    import socket
    import urllib.error

    cause = error.reason if isinstance(error, urllib.error.URLError) else error
    if isinstance(cause, (socket.timeout, TimeoutError)):
        return f"timed out after {timeout_secs:g} s"
    if isinstance(cause, OSError):  # refused, unknown host, TLS, closed without an answer
        return _printable(cause.strerror or str(cause))
    if isinstance(cause, BaseException):  # BadStatusLine, LineTooLong, InvalidURL, ValueError...
        return f"{type(cause).__name__}: {_printable(str(cause))}"
    return _printable(str(cause))


class _Exchange:
    """One HTTP request: the deadline all its steps share, and the answers it opened.

    urllib leaves an answer open when reading it fails inside a handler (a redirect's body):
    closing them all here frees the sockets now rather than whenever the GC gets to them.
    """

    def __init__(self, timeout_secs: float) -> None:
        self.deadline = time.monotonic() + timeout_secs
        self.answers: list = []  # http.client.HTTPResponse

    def time_left(self) -> float:
        """Seconds left, for a socket timeout (never 0, which would mean non-blocking)."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            import socket

            raise socket.timeout("timed out")
        return left

    def close(self) -> None:
        for answer in self.answers:
            answer.close()


_HANDLER_CLASSES: tuple = ()  # defined on first use, by _define_handler_classes


def _deadline_handlers(exchange: _Exchange) -> list:
    """urllib handlers for http and https whose requests keep to ``exchange``'s deadline."""
    global _HANDLER_CLASSES
    if not _HANDLER_CLASSES:
        _HANDLER_CLASSES = _define_handler_classes()
    return [handler(exchange) for handler in _HANDLER_CLASSES]


def _define_handler_classes() -> tuple:
    """urllib handlers whose connections share one deadline over connect, TLS handshake,
    request, status line, headers and body.

    A socket timeout bounds each wait, not the request: a server trickling one header line a
    second would hold a 3 s reader for as long as it likes. Here each wait gets only what is
    left. (Name resolution stays unbounded: getaddrinfo takes no timeout.) Defined here, not
    at module level, so that hooks never import http.client.
    """
    import functools
    import http.client
    import io
    import socket
    import urllib.request

    class DeadlineReader(io.RawIOBase):
        """A socket's input where every recv waits at most until the deadline."""

        def __init__(self, sock, exchange: _Exchange) -> None:
            super().__init__()
            self._sock = sock
            self._exchange = exchange
            # The socket's own raw stream keeps it open until the answer is closed: urllib
            # closes the connection before the body is read.
            self._stream = sock.makefile("rb", buffering=0)
            # http.client reads some bodies whole (a redirect's; a chunk of negative size):
            # a server must not fill memory for as long as the deadline lasts.
            self._budget = MAX_ANSWER_BYTES

        def readable(self) -> bool:
            return True

        def readinto(self, buffer) -> int | None:
            if self._budget <= 0:
                raise http.client.HTTPException(f"answer longer than {MAX_ANSWER_BYTES} bytes")
            self._sock.settimeout(self._exchange.time_left())
            count = self._stream.readinto(memoryview(buffer)[:self._budget])
            self._budget -= count or 0
            return count

        def fileno(self) -> int:
            return self._stream.fileno()

        def close(self) -> None:
            self._stream.close()
            super().close()

    class DeadlineSocket:
        """What http.client.HTTPResponse uses of a socket - makefile("rb") - under the deadline."""

        def __init__(self, sock, exchange: _Exchange) -> None:
            self._sock = sock
            self._exchange = exchange

        def makefile(self, mode: str = "rb") -> io.BufferedReader:
            return io.BufferedReader(DeadlineReader(self._sock, self._exchange))

    class DeadlineConnection:
        """Mixin for http.client connections: every step waits only until the deadline."""

        def __init__(self, host: str, *, exchange: _Exchange, **kwargs) -> None:
            super().__init__(host, **kwargs)
            self._exchange = exchange
            self._create_connection = self._connect_socket  # an instance attribute upstream

        def _connect_socket(self, address, timeout=None, source_address=None):
            """socket.create_connection, with one deadline over every address tried (an IPv6
            address that drops packets must not take the whole timeout per address)."""
            host, port = address
            error: OSError = OSError(f"{host}: no address")
            for family, kind, proto, _, target in socket.getaddrinfo(host, port, 0,
                                                                     socket.SOCK_STREAM):
                sock = socket.socket(family, kind, proto)
                try:
                    if source_address:
                        sock.bind(source_address)
                    sock.settimeout(self._exchange.time_left())
                    sock.connect(target)
                    # A TLS handshake takes the socket timeout as its total: what is left.
                    sock.settimeout(self._exchange.time_left())
                    return sock
                except OSError as failure:
                    sock.close()
                    error = failure
            raise error

        def connect(self) -> None:
            super().connect()
            # The request is one sendall, which takes the socket timeout as its total.
            self.sock.settimeout(self._exchange.time_left())

        def response_class(self, sock, *args, **kwargs) -> http.client.HTTPResponse:
            # http.client reads every answer - a proxy's answer to CONNECT too - through the
            # response_class it makes from the socket.
            answer = http.client.HTTPResponse(DeadlineSocket(sock, self._exchange), *args,
                                              **kwargs)
            self._exchange.answers.append(answer)
            return answer

    class HTTPConnection(DeadlineConnection, http.client.HTTPConnection):
        pass

    class HTTPHandler(urllib.request.HTTPHandler):
        def __init__(self, exchange: _Exchange) -> None:
            super().__init__()
            self._connection = functools.partial(HTTPConnection, exchange=exchange)

        def http_open(self, req):
            return self.do_open(self._connection, req)

    if not hasattr(http.client, "HTTPSConnection"):  # a Python built without ssl
        return (HTTPHandler,)

    class HTTPSConnection(DeadlineConnection, http.client.HTTPSConnection):
        pass

    class HTTPSHandler(urllib.request.HTTPSHandler):
        def __init__(self, exchange: _Exchange) -> None:
            super().__init__()
            self._connection = functools.partial(HTTPSConnection, exchange=exchange)

        def https_open(self, req):
            # No context given: HTTPSConnection makes the default one, verifying certificates.
            return self.do_open(self._connection, req)

    return HTTPHandler, HTTPSHandler


def cache_lifetime(headers) -> float:
    """Seconds an answer may be reused: ``max-age``, else ``Expires`` - ``Date``; 0 if none."""
    if headers is None:
        return 0.0
    control = (headers.get("Cache-Control") or "").lower()
    directives = [part.strip() for part in control.split(",")]
    if "no-store" in directives or "no-cache" in directives:
        return 0.0
    for directive in directives:
        name, _, value = directive.partition("=")
        if name.strip() == "max-age" and value.strip().isdigit():
            return float(value.strip())
    if headers.get("Expires"):
        from email.utils import parsedate_to_datetime

        try:
            expires = parsedate_to_datetime(headers["Expires"]).timestamp()
            date = parsedate_to_datetime(headers["Date"]).timestamp() \
                if headers.get("Date") else time.time()
        except (TypeError, ValueError):
            return 0.0
        return max(0.0, expires - date)
    return 0.0


def job_end(jobstart_secs, wall_limit_secs, shutdowntime_job, shutdowntime):
    """When a job must be done: the earliest of jobstart_secs + wall_limit_secs,
    shutdowntime_job and shutdowntime (each None where unknown); None if none is known."""
    ends = [end for end in (shutdowntime_job, shutdowntime) if end is not None]
    if jobstart_secs is not None and wall_limit_secs is not None:
        ends.append(jobstart_secs + wall_limit_secs)
    return min(ends) if ends else None


class JobView:
    """What a job sees: its machine features and its job features (either may be missing)."""

    def __init__(self, machine: Features | None, job: Features | None) -> None:
        self.machine = machine
        self.job = job

    @classmethod
    def from_environ(cls, environ=None, timeout_secs: float = DEFAULT_TIMEOUT_SECS) -> JobView:
        environ = os.environ if environ is None else environ
        locations = [environ.get(name) for name in ("MACHINEFEATURES", "JOBFEATURES")]
        machine, job = (Features(location, timeout_secs) if location else None
                        for location in locations)
        return cls(machine, job)

    def source_for(self, name: str) -> Features | None:
        """The location that holds a key, by the key's scope."""
        legacy = {alias.name: alias.scope for alias in spec.LEGACY_KEYS}
        scope = spec.KEYS[name].scope if name in spec.KEYS else legacy.get(name)
        if scope is None:
            raise KeyError(name)
        return self.machine if scope == spec.MACHINE else self.job

    def get(self, name: str) -> int | float | str | None:
        source = self.source_for(name)
        return source.get(name) if source is not None else None

    def remaining_seconds(self, now: float | None = None) -> int | None:
        """Seconds the job may still run: the earliest of jobstart_secs + wall_limit_secs,
        shutdowntime_job and shutdowntime, minus now; None when none of them is known."""
        now = time.time() if now is None else now
        end = job_end(self.get("jobstart_secs"), self.get("wall_limit_secs"),
                      self.get("shutdowntime_job"), self.get("shutdowntime"))
        return None if end is None else int(end - now)

    def as_dict(self) -> dict:
        """Everything, typed where well-formed, for a JSON dump."""
        return {label: source.as_dict()
                for label, source in (("MACHINEFEATURES", self.machine),
                                      ("JOBFEATURES", self.job)) if source is not None}
