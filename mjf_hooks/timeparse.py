"""Times and durations as an admin types them: ``mjf drain --at/--in/--within``,
``mjf records --since``."""

from __future__ import annotations

from datetime import datetime

from . import spec
from .errors import SiteInputError

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration_secs(text: str) -> int:
    """``90``, ``90s``, ``90m``, ``2h``, ``1d``, ``1h30m`` -> seconds."""
    text = text.strip().lower()
    problem = SiteInputError(f"{text[:40]!r} is not a duration such as 90m, 2h or 1h30m")
    total, number = 0, ""
    for char in text:
        if char in "0123456789":
            number += char
        elif char in _UNITS and number:
            total += _bounded(number, problem) * _UNITS[char]
            number = ""
        else:
            raise problem
    if number:
        total += _bounded(number, problem)
    if not text:
        raise problem
    if total > spec.LATEST_TIME:
        raise SiteInputError(f"{text[:40]!r} is longer than this century")
    return total


def _bounded(digits: str, problem: SiteInputError) -> int:
    value = spec.digits_value(digits)
    if value is None:
        raise problem
    return value


def parse_time(text: str) -> int:
    """UNIX seconds, or ISO-8601 (``2026-12-01T08:00``, ``...Z``, ``...+01:00``; local if
    no zone) -> UNIX seconds."""
    text = text.strip()
    problem = SiteInputError(f"{text[:40]!r} is not a UNIX time or an ISO-8601 time such as "
                             "2026-12-01T08:00 or 2026-12-01T08:00:00+01:00")
    if text.isascii() and text.isdigit():
        return _bounded(text, problem)
    try:
        moment = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
        return int(moment.timestamp())
    except (ValueError, OverflowError, OSError):
        raise problem from None


def parse_since(text: str, now: int) -> int:
    """A time (as :func:`parse_time` reads it), or a duration before ``now`` (``7d``)."""
    try:
        return parse_time(text)
    except SiteInputError:
        return now - parse_duration_secs(text)
