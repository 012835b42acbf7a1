"""Times and durations as an admin types them (`mjf drain --at/--in`, `mjf records --since`)."""

import pytest

from mjf_hooks.errors import SiteInputError
from mjf_hooks.timeparse import parse_duration_secs, parse_since, parse_time


@pytest.mark.parametrize(("text", "seconds"), [
    ("90", 90), ("90s", 90), ("90m", 5400), ("2h", 7200), ("1d", 86400), ("1h30m", 5400),
    ("1w", 604800),
])
def test_durations(text, seconds):
    assert parse_duration_secs(text) == seconds


@pytest.mark.parametrize("text", ["", "h", "2x", "-1h", "1.5h"])
def test_bad_durations(text):
    with pytest.raises(SiteInputError):
        parse_duration_secs(text)


def test_times():
    assert parse_time("1800000000") == 1800000000
    assert parse_time("2027-01-15T08:00:00Z") == 1800000000  # 2027-01-15 08:00 UTC
    assert parse_time("2027-01-15T09:00:00+01:00") == parse_time("2027-01-15T08:00:00Z")
    with pytest.raises(SiteInputError):
        parse_time("tomorrow")


def test_since_is_a_time_or_a_duration_ago():
    assert parse_since("1800000000", now=1900000000) == 1800000000
    assert parse_since("2027-01-15T08:00:00Z", now=1900000000) == 1800000000
    assert parse_since("7d", now=1900000000) == 1900000000 - 7 * 86400
    with pytest.raises(SiteInputError):
        parse_since("tomorrow", now=1900000000)
