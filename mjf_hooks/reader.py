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
        """The keys present: a directory's files; for a URL, the registry keys it serves."""
        if not is_url(self.location):
            try:
                entries = os.listdir(self.location)
            except OSError as error:
                raise ReadError(f"{self.location}: {error.strerror}") from None
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
    """(body or None for 404, seconds it may be cached)."""
    import urllib.error  # only payloads reading over HTTP pay for urllib
    import urllib.request

    # Only http(s) locations get here (is_url): no file: or custom schemes.
    request = urllib.request.Request(url, headers={"User-Agent": "mjf-hooks"})  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=timeout_secs) as response:  # noqa: S310
            body = response.read(MAX_VALUE_BYTES).decode("ascii", "replace")
            return body, cache_lifetime(response.headers)
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return None, cache_lifetime(error.headers)
        raise ReadError(f"{url}: HTTP {error.code} {error.reason}") from None
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", None) or error
        raise ReadError(f"{url}: {reason}") from None


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
        ends = [self.get("shutdowntime_job"), self.get("shutdowntime")]
        start, wall = self.get("jobstart_secs"), self.get("wall_limit_secs")
        if start is not None and wall is not None:
            ends.append(start + wall)
        known = [end for end in ends if end is not None]
        return int(min(known) - now) if known else None

    def as_dict(self) -> dict:
        """Everything, typed where well-formed, for a JSON dump."""
        return {label: source.as_dict()
                for label, source in (("MACHINEFEATURES", self.machine),
                                      ("JOBFEATURES", self.job)) if source is not None}
