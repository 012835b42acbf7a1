"""The [records] section of the config: every option, every refusal."""

from __future__ import annotations

import pytest

from mjf_hooks.config import Config, load, parse
from mjf_hooks.errors import SiteInputError

PATH = "/etc/mjf/mjf.conf"


def records(body: str, describe: str = "") -> Config:
    """A config of ``describe`` text (before) and a [records] section of ``body``."""
    return parse(f"{describe}[records]\n{body}", PATH)


def test_the_defaults_keep_no_records():
    config = parse("", PATH)
    assert config.records_dir is None
    assert config.record_formats == ("sss",)
    assert config.records_keep_days == 90
    assert config.records_site is None
    assert Config().record_formats == ("sss",)


def test_an_empty_records_section_is_the_defaults():
    config = records("")
    assert (config.records_dir, config.record_formats, config.records_keep_days,
            config.records_site) == (None, ("sss",), 90, None)


def test_each_option_is_parsed():
    config = records("dir = /var/lib/mjf/records\nformat = sss, apel\nkeep_days = 30\n"
                     "site = UKI-NORTHGRID-MAN-HEP\n")
    assert config.records_dir == "/var/lib/mjf/records"
    assert config.record_formats == ("sss", "apel")
    assert config.records_keep_days == 30
    assert config.records_site == "UKI-NORTHGRID-MAN-HEP"


def test_the_dir_is_normalised():
    assert records("dir = /var//lib/./mjf/records/\n").records_dir == "/var/lib/mjf/records"


@pytest.mark.parametrize(("value", "formats"), [
    ("sss", ("sss",)),
    ("apel", ("apel",)),
    ("APEL, SSS", ("apel", "sss")),
    ("sss,sss", ("sss",)),
    ("apel, sss, apel, sss", ("apel", "sss")),
])
def test_the_format_list_is_parsed_and_deduplicated(value, formats):
    config = records(f"dir = /r\nformat = {value}\nsite = SITE\n")
    assert config.record_formats == formats


@pytest.mark.parametrize("value", ["1", "90", "365", "999999"])
def test_keep_days_takes_whole_days(value):
    assert records(f"keep_days = {value}\n").records_keep_days == int(value)


def expect_refusal(body: str, line: int, key: str, reason: str, describe: str = "") -> str:
    with pytest.raises(SiteInputError) as caught:
        records(body, describe)
    message = str(caught.value)
    assert message.startswith(f"{PATH}, line {line}: [records] {key} = "), message
    assert reason in message, message
    return message


@pytest.mark.parametrize(("body", "line", "key", "reason"), [
    ("dir = var/lib/records\n", 2, "dir", "must be an absolute path"),
    ("dir = records\n", 2, "dir", "must be an absolute path"),
    ("dir = /var/lib/../records\n", 2, "dir", "must not contain `..`"),
    ("dir = /var/lib/records/..\n", 2, "dir", "must not contain `..`"),
    ("format = xml\n", 2, "format", "must be sss and/or apel"),
    ("format = sss, xml\n", 2, "format", "must be sss and/or apel"),
    ("format = sss,\n", 2, "format", "must be sss and/or apel"),
    ("format =\n", 2, "format", "must be sss and/or apel"),
    ("format = json\n", 2, "format", "the JSON that `mjf records` reads is always written"),
    ("keep_days = 0\n", 2, "keep_days", "must be a whole number of days, 1 or more"),
    ("keep_days = -1\n", 2, "keep_days", "must be a whole number of days, 1 or more"),
    ("keep_days = abc\n", 2, "keep_days", "must be a whole number of days, 1 or more"),
    ("keep_days = 1.5\n", 2, "keep_days", "must be a whole number of days, 1 or more"),
    ("keep_days =\n", 2, "keep_days", "must be a whole number of days, 1 or more"),
    ("dir = /r\nsite = My Site\n", 3, "site", "must be the site's GOCDB name"),
    ("site = A,B\n", 2, "site", "must be the site's GOCDB name"),
    ("site = \"QUOTED\"\n", 2, "site", "must be the site's GOCDB name"),
    ("site =\n", 2, "site", "must be the site's GOCDB name"),
    ("directory = /r\n", 2, "directory",
     "unknown option; [records] takes dir, format, keep_days, site"),
    ("benchmark = HEPscore23\n", 2, "benchmark", "set [machinefeatures] benchmark"),
])
def test_a_bad_value_names_the_file_line_key_and_reason(body, line, key, reason):
    expect_refusal(body, line, key, reason)


def test_the_value_is_quoted_in_the_message():
    message = expect_refusal("keep_days = abc\n", 2, "keep_days", "1 or more")
    assert "keep_days = 'abc'" in message


def test_the_benchmark_is_refused_in_records_and_points_at_machinefeatures():
    message = expect_refusal("dir = /r\nbenchmark = HEPSPEC\n", 3, "benchmark",
                             "the benchmark is the machine's")
    assert "[machinefeatures] benchmark" in message
    # Where it belongs it is taken.
    assert parse("[machinefeatures]\nbenchmark = HEPSPEC\n", PATH).benchmark == "HEPSPEC"


def test_a_line_number_counts_the_lines_before_the_section():
    with pytest.raises(SiteInputError, match=rf"^{PATH}, line 5: \[records\] keep_days"):
        parse("[mjf]\nlog = stderr\n\n[records]\nkeep_days = 0\n", PATH)


def test_an_option_set_twice_is_refused():
    with pytest.raises(SiteInputError, match=r"line 3: \[records\] dir is set twice"):
        records("dir = /a\ndir = /b\n")


def test_apel_needs_a_site():
    with pytest.raises(SiteInputError) as caught:
        records("dir = /var/lib/mjf/records\nformat = apel\n")
    message = str(caught.value)
    assert message.startswith(f"{PATH}: [records] format apel needs the site's name")
    assert "[records] site" in message and "[describe] site" in message


def test_apel_and_sss_need_a_site_too():
    with pytest.raises(SiteInputError, match="format apel needs the site's name"):
        records("dir = /r\nformat = sss, apel\n")


def test_apel_takes_the_records_site():
    config = records("dir = /r\nformat = apel\nsite = RECORDS-SITE\n")
    assert config.records_site == "RECORDS-SITE" and config.record_formats == ("apel",)


def test_apel_takes_the_describe_site():
    config = records("dir = /r\nformat = apel\n", describe="[describe]\nsite = DESCRIBE-SITE\n")
    assert config.records_site is None and config.describe["site"] == "DESCRIBE-SITE"


def test_the_describe_site_may_come_after_the_records_section():
    config = parse("[records]\ndir = /r\nformat = apel\n[describe]\nsite = LATER\n", PATH)
    assert config.describe["site"] == "LATER"


def test_sss_alone_needs_no_site():
    assert records("dir = /r\nformat = sss\n").records_site is None


def test_apel_without_a_dir_is_not_an_error():
    # Nothing is written without a dir, so no site is needed yet.
    assert records("format = apel\n").record_formats == ("apel",)


def test_a_config_file_with_records_loads(tmp_path):
    path = tmp_path / "mjf.conf"
    path.write_text("[records]\ndir = /var/lib/mjf/records\nkeep_days = 7\n")
    config = load(str(path))
    assert (config.records_dir, config.records_keep_days) == ("/var/lib/mjf/records", 7)
    path.write_text("[records]\nkeep_days = 0\n")
    with pytest.raises(SiteInputError, match=rf"^{tmp_path}/mjf.conf, line 2: "):
        load(str(path))
