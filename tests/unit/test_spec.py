"""The key registry and the file format every reader depends on."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mjf_hooks import spec


def test_registry_has_every_hsf_tn_2016_02_key():
    assert set(spec.MACHINE_KEYS) == {"total_cpu", "hs06", "shutdowntime", "grace_secs"}
    assert set(spec.JOB_KEYS) == {
        "allocated_cpu", "hs06_job", "shutdowntime_job", "grace_secs_job", "jobstart_secs",
        "job_id", "wall_limit_secs", "cpu_limit_secs", "max_rss_bytes", "max_swap_bytes",
        "scratch_limit_bytes",
    }
    assert all(spec.is_valid_key_name(name) for name in spec.KEYS)


def test_legacy_names_are_the_draft_099_ones_and_break_the_2016_naming_rule():
    assert {"allocated_CPU", "mem_limit_MB", "disk_limit_GB", "log_cores", "phys_cores",
            "jobslots", "cpufactor_lrms", "wall_limit_secs_lrms",
            "cpu_limit_secs_lrms"} == spec.LEGACY_NAMES
    assert not spec.is_valid_key_name("allocated_CPU")


@pytest.mark.parametrize(("name", "value", "text"), [
    ("total_cpu", 64, "64"),
    ("max_rss_bytes", 0, "0"),
    ("hs06", 2400.0, "2400"),
    ("hs06", 2400.5, "2400.5"),
    ("hs06_job", 10 / 3, "3.33"),
    ("job_id", "vm#1.0#1795319385", "vm#1.0#1795319385"),
])
def test_format_value_writes_bare_values(name, value, text):
    assert spec.format_value(name, value) == text


@pytest.mark.parametrize(("name", "value"), [
    ("total_cpu", -1), ("total_cpu", 1.5), ("wall_limit_secs", True), ("total_cpu", "4"),
    ("total_cpu", 2**63), ("job_id", "a b"), ("job_id", ""), ("job_id", "é"),
    ("hs06", float("inf")), ("hs06", float("nan")), ("hs06", -3.0),
])
def test_format_value_refuses_what_readers_would_misread(name, value):
    with pytest.raises(ValueError, match=name):
        spec.format_value(name, value)


@pytest.mark.parametrize(("name", "text"), [
    ("total_cpu", ""), ("total_cpu", " 4"), ("total_cpu", "4\n"), ("total_cpu", "+4"),
    ("total_cpu", "1e3"), ("total_cpu", "4.0"), ("total_cpu", "٤"), ("hs06", "1."),
    ("hs06", ".5"), ("hs06", "1.2.3"), ("total_cpu", "99999999999999999999"),
])
def test_parse_value_refuses_malformed_text(name, text):
    with pytest.raises(ValueError):
        spec.parse_value(name, text)


@given(st.integers(min_value=0, max_value=spec.MAX_INTEGER))
def test_integers_round_trip(number):
    text = spec.format_value("max_rss_bytes", number)
    assert text.isdigit() and spec.parse_value("max_rss_bytes", text) == number


@given(st.floats(min_value=0, max_value=1e12, allow_nan=False))
def test_decimals_always_match_the_strictest_reader_pattern(number):
    # glideinWMS: ^[0-9]+(.[0-9]+)?$ ; PanDA: int(float(value))
    text = spec.format_value("hs06", number)
    whole, _, fraction = text.partition(".")
    assert whole.isdigit() and (fraction == "" or fraction.isdigit())
    assert "e" not in text and abs(float(text) - number) <= 0.005 + 1e-9 * number


@given(st.text(max_size=300))
def test_job_id_validation_is_printable_non_whitespace_ascii(text):
    expected = 0 < len(text) <= spec.MAX_JOB_ID_LENGTH and all(33 <= ord(c) <= 126 for c in text)
    assert spec.is_valid_job_id(text) == expected


@given(st.text(max_size=30))
def test_parse_value_raises_only_value_error(text):
    for name in ("total_cpu", "hs06", "job_id"):
        try:
            value = spec.parse_value(name, text)
        except ValueError:
            continue
        written = spec.format_value(name, value)
        assert spec.parse_value(name, written) == value
        # What we write is canonical: the text itself, unless it had leading zeros ("007"
        # is read as 7 and written as "7") or is an hs06 (written with 2 decimals at most).
        assert written == text or name == "hs06" or (text[:1] == "0" and len(text) > 1)
