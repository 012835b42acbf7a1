"""ClassAd literals and HTCondor job facts, on ads recorded in a real HTCondor 23.9 job."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mjf_hooks import classad_files
from mjf_hooks.batch import htcondor
from tests.conftest import FIXTURES, fixture_text

JOB_AD = classad_files.parse_ad(fixture_text("htcondor-23.9/job.ad"))
MACHINE_AD = classad_files.parse_ad(fixture_text("htcondor-23.9/machine.ad"))


@pytest.mark.parametrize(("text", "value"), [
    ("1", 1), ("-7", -7), ("2.0", 2.0), ("129736.0", 129736.0), ("1.5E3", 1500.0),
    ("6e-1", 0.6), ("true", True), ("FALSE", False), ("undefined", None),
    ('"vm#1.0#1795319385"', "vm#1.0#1795319385"), ('""', ""),
    ('"say \\"hi\\"\\n"', 'say "hi"\n'), ('"back\\\\slash"', "back\\slash"),
    ('"\\101"', "A"), ("error", classad_files.ERROR),
])
def test_literals(text, value):
    assert classad_files.parse_value(text) == value


@pytest.mark.parametrize("text", [
    "10 * 60", "START && (WithinResourceLimits)", "{ 1, 2 }", "[ a = 1 ]",
    '"a" + "b"', '"unterminated', "LastBenchmark == 0", "1.2.3", "0x10", "--1", "e5", ".",
    "inf", "nan", "1e", "",
])
def test_everything_else_is_an_unevaluated_expression(text):
    assert classad_files.parse_value(text) == classad_files.Expression(text)


def test_recorded_ads():
    assert JOB_AD["globaljobid"] == "vm#1.0#1795319385"
    assert JOB_AD["allowedjobduration"] == 300
    assert JOB_AD["arguments"].startswith("-c echo' 'job' 'FOO=$FOO;'")
    assert MACHINE_AD["cpus"] == 1 and MACHINE_AD["memory"] == 384
    assert MACHINE_AD["totalcpus"] == 2.0
    assert MACHINE_AD["machinemaxvacatetime"] == classad_files.Expression("10 * 60")
    assert MACHINE_AD["addressv1"].startswith("{[ p=\"primary\"")


def test_names_are_case_insensitive_and_junk_lines_skipped():
    ad = classad_files.parse_ad(
        "Cpus = 4\n\n# comment\nnot an attribute\n9x = 1\n a-b = 2\nMEMORY=2\n")
    assert ad == {"cpus": 4, "memory": 2}


@given(st.text(max_size=60))
def test_any_value_text_parses_to_something(text):
    value = classad_files.parse_value(text.strip())
    assert value is None or isinstance(
        value, (bool, int, float, str, classad_files.Expression, classad_files.Error))


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40))
def test_strings_round_trip_through_escaping(text):
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    assert classad_files.parse_value(f'"{escaped}"') == text


def test_facts_from_a_recorded_job():
    facts, warnings = htcondor.job_facts(htcondor.JobInput(MACHINE_AD, JOB_AD), 1)
    assert warnings == []
    assert {name: value for name, (value, _) in facts.items()} == {
        "job_id": "vm#1.0#1795319385", "jobstart_secs": 1795319470, "allocated_cpu": 1,
        "max_rss_bytes": 384 * 2**20, "scratch_limit_bytes": 103424 * 1024,
        "wall_limit_secs": 300,
    }
    assert facts["max_rss_bytes"][1] == "machine ad Memory = 384 MiB"


def test_cluster_proc_ids_and_custom_wall_time_attributes():
    job = {**JOB_AD, "maxwalltimemins": 90}
    facts, _ = htcondor.job_facts(
        htcondor.JobInput(MACHINE_AD, job, "cluster_proc", "MaxWallTimeMins", "minutes"), 1)
    assert facts["job_id"] == ("1.0", "job ad ClusterId.ProcId")
    assert facts["wall_limit_secs"] == (5400, "job ad MaxWallTimeMins = 90 minutes")


def test_fallbacks_when_the_slot_does_not_say():
    machine = {k: v for k, v in MACHINE_AD.items() if k not in ("cpus", "memory", "disk")}
    job = {k: v for k, v in JOB_AD.items()
           if k not in ("jobcurrentstartdate", "globaljobid", "allowedjobduration")}
    facts, warnings = htcondor.job_facts(htcondor.JobInput(machine, job), 42)
    assert facts["allocated_cpu"] == (1, "job ad RequestCpus = 1")
    assert facts["job_id"][0] == "1.0"
    assert facts["jobstart_secs"] == (42, "time the wrapper ran")
    assert "max_rss_bytes" not in facts and "wall_limit_secs" not in facts
    assert warnings == ["job ad GlobalJobId is missing or not a string: using ClusterId.ProcId"]


@pytest.mark.parametrize(("attribute", "value", "warning"), [
    ("cpus", "four", "machine ad Cpus is 'four', not a whole number"),
    ("cpus", classad_files.Expression("RequestCpus * 2"), "machine ad Cpus is an unevaluated"),
    ("cpus", True, "machine ad Cpus is True"),
    ("memory", -1, "machine ad Memory = -1 is out of range"),
    ("memory", 2**80, "is out of range"),
    ("disk", 1.5, "machine ad Disk is 1.5"),
])
def test_bad_slot_values_are_warned_and_left_out(attribute, value, warning):
    facts, warnings = htcondor.job_facts(
        htcondor.JobInput({**MACHINE_AD, attribute: value}, JOB_AD), 1)
    assert any(warning in line for line in warnings)
    key = {"cpus": "allocated_cpu", "memory": "max_rss_bytes", "disk": "scratch_limit_bytes"}
    assert facts.get(key[attribute], (None, ""))[1].startswith("job ad") or \
        key[attribute] not in facts


def test_cron_attributes():
    text = htcondor.cron_attributes({"total_cpu": "8", "hs06": "80.5", "shutdowntime": "17",
                                     "log_cores": "8"})
    assert text == ("MJF_MACHINE_TOTAL_CPU = 8\nMJF_MACHINE_HS06 = 80.5\n"
                    "MJF_MACHINE_SHUTDOWNTIME = 17\nMJF_MACHINE_GRACE_SECS = undefined\n")


def test_read_ad_limits_size_and_decodes_anything(tmp_path):
    path = tmp_path / "ad"
    path.write_bytes(b"Name = \"caf\xe9\"\nCpus = 2\n")
    ad = classad_files.read_ad(str(path))
    assert (ad["name"], ad["cpus"], ad.get("memory")) == ("caf\ufffd", 2, None)
    path.write_bytes(b"Cpus = 2\n" + b" " * classad_files.MAX_AD_BYTES)
    with pytest.raises(ValueError, match="larger than"):
        classad_files.read_ad(str(path))
    with pytest.raises(OSError):
        classad_files.read_ad(str(tmp_path / "missing"))
    assert FIXTURES.exists()


# Lines as ads have them and as they should not: names in any case, spaces around, "="
# in values, repeated names (the last one counts), junk, every line break str.splitlines
# knows, and text that is not ASCII.
_AD_NAMES = ["Cpus", "cpus", "CPUS", "RequestCpus", "Memory", "a_b", "9x", "a-b", "İd", ""]
_AD_LINES = st.tuples(
    st.sampled_from(["", " ", "\t", "\x1f"]), st.sampled_from(_AD_NAMES),
    st.sampled_from(["", " ", "\x0b"]), st.sampled_from(["=", " = ", "==", ""]),
    st.sampled_from(["4", "4.0", '"x = 1"', "Cpus", "true", "10 * 60", '"caf\u00e9"', ""]),
).map("".join)
_AD_TEXTS = st.lists(
    st.tuples(_AD_LINES, st.sampled_from(["\n", "\r\n", "\r", "\x0c", "\x1e", "\u2028"])),
    max_size=12).map(lambda lines: "".join(line + end for line, end in lines))


@given(_AD_TEXTS)
def test_an_ad_found_when_asked_says_what_parsing_every_line_says(text):
    parsed, found = classad_files.parse_ad(text), classad_files.Ad(text)
    for name in {*parsed, *(name.lower() for name in _AD_NAMES), *_AD_NAMES, "x", "a b"}:
        assert found.get(name, "absent") == parsed.get(name, "absent"), name
    assert bool(found) == bool(parsed)


def test_an_ad_found_when_asked_on_the_recorded_ads():
    for name in ("job.ad", "machine.ad", "job-exit-hook-stdin.ad"):
        text = fixture_text(f"htcondor-23.9/{name}")
        parsed, found = classad_files.parse_ad(text), classad_files.Ad(text)
        assert {key: found[key] for key in parsed} == parsed
    with pytest.raises(KeyError):
        classad_files.Ad("Cpus = 1\n")["memory"]
    assert not classad_files.Ad("# nothing\n\n") and classad_files.Ad("x\nCpus = 1")
