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

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .http_deadline import Exchange

MAX_VALUE_BYTES = 4096
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
        return None if raw is None else self._typed(name, raw)

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
        return sorted(self._registry_values())

    def read_all(self) -> dict[str, str]:
        if is_url(self.location):  # one request per key, not one to list and one to read
            return dict(sorted(self._registry_values().items()))
        return {name: raw for name in self.names() if (raw := self.raw(name)) is not None}

    def as_dict(self) -> dict:
        """Location and every value, typed where well-formed (as written otherwise)."""
        values: dict[str, object] = {}
        for name, raw in self.read_all().items():
            try:
                values[name] = self._typed(name, raw)
            except MalformedValue:
                values[name] = raw
        return {"location": self.location, "values": values}

    def _registry_values(self) -> dict[str, str]:
        """Every registry key this location serves, asked for by name."""
        candidates = list(spec.KEYS) + [legacy.name for legacy in spec.LEGACY_KEYS]
        return {name: raw for name in candidates if (raw := self.raw(name)) is not None}

    def _typed(self, name: str, raw: str) -> int | float | str:
        try:
            return spec.parse_value(spec.typed_like(name), raw)
        except ValueError as error:
            raise MalformedValue(f"{self.location}/{name} = {raw!r}: {error}") from None

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


REDIRECTS = (301, 302, 303, 307, 308)
MAX_REDIRECTS = 10  # urllib's limits: 10 redirects in all, the same URL at most 4 times
MAX_REPEATS = 4


def _http_get(url: str, timeout_secs: float) -> tuple[str | None, float]:
    """(body or None for 404, seconds it may be cached).

    Whatever goes wrong - no connection, a timeout, an answer that is no valid HTTP - is a
    ReadError naming the URL: callers take anything else for a bug, and None for "absent".
    ``timeout_secs`` bounds the whole read, redirects and a re-opened connection included,
    not each wait on the socket.
    """
    import http.client  # only payloads reading over HTTP pay for it (urllib: _proxy_for)

    from .http_deadline import Exchange

    exchange = Exchange(timeout_secs)
    try:
        current, visited = url, {}
        while True:
            status, reason, headers, body = _get_once(current, exchange)
            location = headers.get("Location") or headers.get("URI")
            if status not in REDIRECTS or not location:
                break
            # As urllib follows them, but only to http(s): never to ftp: or file: (and out of
            # the deadline).
            from urllib.parse import urljoin

            target = urljoin(current, location.replace(" ", "%20"))
            if not is_url(target):
                raise ReadError(f"{url}: HTTP {status}: redirect to {_printable(target)} "
                                "is not http(s)")
            visited[target] = visited.get(target, 0) + 1
            if visited[target] > MAX_REPEATS or len(visited) > MAX_REDIRECTS:
                raise ReadError(f"{url}: HTTP {status}: too many redirects")
            current = target
    except _Invalid as error:
        raise ReadError(f"{url}: {error}") from None
    except (OSError, http.client.HTTPException, ValueError) as error:
        raise ReadError(f"{url}: {_failure(error, timeout_secs)}") from None
    finally:
        exchange.close()
    if status == 404:
        return None, cache_lifetime(headers)
    if status != 200:
        raise ReadError(f"{url}: HTTP {status} {_printable(reason)}")
    if len(body) > MAX_VALUE_BYTES:
        raise ReadError(f"{url}: longer than {MAX_VALUE_BYTES} bytes: not a key value")
    return body.decode("ascii", "replace"), cache_lifetime(headers)


def _get_once(url: str, exchange: Exchange) -> tuple:
    """GET url without following redirects: (status, reason, headers, body).

    The connection is taken from the pool and put back only when the answer was read to
    its end and may be followed by another. A kept connection the server has closed in the
    meantime, or that breaks before its answer is complete, is opened afresh once, within
    the same deadline: a GET may be repeated, and nothing is kept of the broken answer.
    """
    import http.client

    route = _Route(url)
    connection = _POOL.take(route.key)
    for attempt in (1, 2):
        reused = connection is not None
        if connection is None:
            connection = _new_connection(route)
        connection.exchange = exchange
        try:
            answer = _answer(connection, route, exchange)
        except (http.client.RemoteDisconnected, http.client.IncompleteRead, _Cut,
                ConnectionResetError, ConnectionAbortedError, BrokenPipeError):
            connection.close()
            if not reused or attempt == 2:
                raise
            connection = None
            continue
        except BaseException:
            connection.close()
            raise
        if answer[-1]:
            _POOL.give(route.key, connection)
        else:
            connection.close()
        return answer[:-1]
    raise AssertionError("unreachable")


def _answer(connection, route: _Route, exchange: Exchange) -> tuple:
    """One request and its answer: (status, reason, headers, body, reusable)."""
    connection.request("GET", route.target, headers=route.headers)
    response = connection.getresponse()  # closed by the exchange
    status = response.status
    if status in REDIRECTS:
        # Read whole, as urllib does, to reuse the connection: the answer budget bounds it.
        body = response.read()
    elif status in (200, 404):
        body = response.read(MAX_VALUE_BYTES + 1)
    else:
        body = b""
    # http.client neither checks a short body against Content-Length nor rejects an odd
    # one ("+5", " 5"); a chunked answer has no length to check.
    lengths = [] if response.chunked else response.headers.get_all("Content-Length", [])
    framed = not lengths or (len(set(lengths)) == 1 and _is_digits(lengths[0]))
    if status == 200 and not framed:
        raise _Invalid(f"invalid Content-Length {_printable(', '.join(lengths))}")
    if status == 200 and lengths and len(body) <= MAX_VALUE_BYTES \
            and len(body) != int(lengths[0]):
        raise _Cut(f"body has {len(body)} bytes, Content-Length says {int(lengths[0])}")
    # Only an answer read to its very end, framed beyond doubt, on a connection both sides
    # keep, leaves the connection ready for the next request.
    reusable = framed and response.isclosed() and not response.will_close \
        and connection.sock is not None
    return status, response.reason, response.headers, body, reusable


class _Invalid(Exception):
    """An answer this reader refuses (its framing): the message says why."""


class _Cut(_Invalid):
    """An answer that ended before its Content-Length: the connection broke."""


class _Route:
    """Where a URL's request goes: straight to its host, or through the job's proxy exactly
    as urllib's ProxyHandler sends it (http_proxy/https_proxy/no_proxy)."""

    def __init__(self, url: str) -> None:
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        if not parts.hostname and not parts.netloc:
            raise OSError("no host given")
        self.scheme = parts.scheme
        self.host = parts.netloc.rpartition("@")[2]
        self.target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.headers = {"User-Agent": "mjf-hooks"}
        self.address, self.tls, self.tunnel = self.host, self.scheme == "https", ""
        proxy = _proxy_for(self.scheme, self.host)
        if proxy is not None:
            self._through(proxy, url)
        # One connection per (scheme, host, port) and way of getting there.
        self.key = (self.scheme, self.host, self.address, self.tls, self.tunnel)

    def _through(self, proxy: str, url: str) -> None:
        import base64
        from urllib.parse import unquote
        from urllib.request import _parse_proxy  # the very parser ProxyHandler uses

        kind, user, password, address = _parse_proxy(proxy)
        kind = kind or self.scheme
        if kind not in ("http", "https"):
            raise OSError(f"unknown url type: {kind} (proxy {_printable(proxy)})")
        if user and password:
            secret = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode())
            self.headers["Proxy-Authorization"] = "Basic " + secret.decode("ascii")
        self.address = unquote(address)
        if self.scheme == "https":  # a CONNECT tunnel, then TLS with the host itself
            self.tunnel = self.host
            self.tunnel_headers = {"Proxy-Authorization": self.headers.pop(
                "Proxy-Authorization")} if "Proxy-Authorization" in self.headers else {}
        else:  # the whole URL to the proxy, over TLS if the proxy is https
            self.tls = kind == "https"
            self.target = url.partition("#")[0]


def _proxy_for(scheme: str, host: str) -> str | None:
    """The proxy urllib would use for this scheme and host, or None.

    urllib.request costs more to import than http.client: it is imported only when the
    environment names a proxy (on Linux getproxies() reads only the environment, so
    without a *_proxy variable urllib would go straight).
    """
    import sys

    if sys.platform in ("linux", "linux2") and not any(
            name.lower().endswith("_proxy") for name in os.environ):
        return None
    from urllib.request import getproxies, proxy_bypass

    proxy = getproxies().get(scheme)
    if proxy is None or (host and proxy_bypass(host)):
        return None
    return proxy


def _new_connection(route: _Route):
    from . import http_deadline

    if route.tls:
        if http_deadline.HTTPSConnection is None:
            raise OSError("this Python has no ssl module: https is not available")
        # No context given: HTTPSConnection makes the default one, verifying certificates.
        connection = http_deadline.HTTPSConnection(route.address)
    else:
        connection = http_deadline.HTTPConnection(route.address)
    if route.tunnel:
        connection.set_tunnel(route.tunnel, headers=route.tunnel_headers)
    return connection


class _Pool:
    """At most one idle connection per route, kept for the next request, in this process
    only: a payload that forks must not have its child talk on its parent's socket."""

    def __init__(self) -> None:
        self.idle: dict[tuple, object] = {}
        self.pid = os.getpid()
        self.registered = False

    def take(self, key: tuple):
        """The idle connection for a route, if it is still fit for a request."""
        self._forget_if_forked()
        connection = self.idle.pop(key, None)  # atomic: two threads never get the same
        if connection is None:
            return None
        import select

        # Idle, a connection has nothing to read: if it has, the server closed it (or sent
        # what nobody asked for). Either way, a fresh one. (poll, not select: a payload may
        # hold over 1024 descriptors.)
        idle = select.poll()
        idle.register(connection.sock, select.POLLIN)
        if idle.poll(0):
            connection.close()
            return None
        return connection

    def give(self, key: tuple, connection) -> None:
        self._forget_if_forked()
        if self.idle.setdefault(key, connection) is not connection:
            connection.close()  # another thread kept one meanwhile
        elif not self.registered:
            import atexit

            atexit.register(self.close)
            self.registered = True

    def close(self) -> None:
        while self.idle:
            _, connection = self.idle.popitem()
            connection.close()

    def _forget_if_forked(self) -> None:
        if self.pid != os.getpid():
            # The child closes its copies of the descriptors only: close() sends nothing
            # (no shutdown), so the parent's connections go on.
            self.pid = os.getpid()
            self.close()


_POOL = _Pool()


def close_connections() -> None:
    """Close the kept HTTP connections now (they are closed at exit otherwise)."""
    _POOL.close()


def _is_digits(text: str) -> bool:
    # str.isdigit() would take "²" or "٣"; int() would take " 5", "+5" and "5_0".
    return bool(text) and all("0" <= char <= "9" for char in text)


def _printable(text: str, limit: int = 200) -> str:
    """Server-chosen text made safe for one line of a terminal or a log: escaped, cut short."""
    return repr(text)[1:-1][:limit]


def _failure(error: BaseException, timeout_secs: float) -> str:
    """A short reason for a failed request."""
    import http.client
    import socket

    if isinstance(error, (socket.timeout, TimeoutError)):
        return f"timed out after {timeout_secs:g} s"
    if isinstance(error, OSError) and not isinstance(error, http.client.RemoteDisconnected):
        # refused, unknown host, TLS, no host given
        return _printable(error.strerror or str(error))
    # BadStatusLine, RemoteDisconnected, LineTooLong, InvalidURL, ValueError...
    return f"{type(error).__name__}: {_printable(str(error))}"


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
