"""The consumer side: read machine or job features the way a job does.

Local directories only for now; http(s) locations come with the HTTP work.
Absent keys are None, never an exception.
"""

from __future__ import annotations

import os
import stat

from . import spec
from .errors import MJFError

_MAX_VALUE_BYTES = 4096


def read_key(location: str, name: str) -> str | None:
    """The raw value of one key, or None if absent."""
    _require_local(location)
    try:
        fd = os.open(os.path.join(location, name), os.O_RDONLY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as error:
        raise MJFError(f"{location}/{name}: {error.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, _MAX_VALUE_BYTES).decode("ascii", "replace")
    finally:
        os.close(fd)


def read_all(location: str) -> dict[str, str]:
    """Every key file in a features directory (hidden temporary files skipped)."""
    _require_local(location)
    try:
        names = sorted(os.listdir(location))
    except OSError as error:
        raise MJFError(f"{location}: {error.strerror}") from None
    values = {}
    for name in names:
        if name.startswith("."):
            continue
        value = read_key(location, name)
        if value is not None:
            values[name] = value
    return values


def typed(name: str, raw: str) -> int | float | str:
    """A value as its registry type; unknown keys and malformed values stay text."""
    if name not in spec.KEYS:
        return raw
    try:
        return spec.parse_value(name, raw)
    except ValueError:
        return raw


def _require_local(location: str) -> None:
    if location.startswith(("http://", "https://")):
        raise MJFError(f"{location}: reading features over HTTP is not supported yet")
