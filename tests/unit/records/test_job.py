"""Job records: the SSS Job Object XML, the APEL message and the JSON dict."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mjf_hooks.json_text import json_text
from mjf_hooks.records import job as job_record
from mjf_hooks.records.job import Record, apel, record_json, sss_xml
from tests.conftest import any_character

GIB, MIB = 2**30, 2**20

SOURCES = {"end_time": "wait4 rusage", "wall_secs": "wait4 rusage",
           "cpu_secs": "cgroup cpu.stat", "peak_memory_bytes": "cgroup memory.peak"}


def full(**changes) -> Record:
    values = dict(user="atlas001", queue="grid", node="wn042.example.org",
                  backend="slurm", allocated_cpu=8, max_rss_bytes=16 * GIB,
                  wall_limit_secs=172800, cpu_limit_secs=1382400,
                  scratch_limit_bytes=80 * GIB, hs06_job=160.0, start_time=1700000000,
                  end_time=1700007200, wall_secs=7200.4, cpu_secs=43200.0,
                  peak_memory_bytes=9 * GIB + 512 * MIB, sources=SOURCES,
                  benchmark="HEPscore23")
    values.update(changes)
    return Record("1234567.0", **values)


def sparse() -> Record:
    return Record("987", start_time=1700000000.6, end_time=1700000100,
                  wall_secs=99.5, cpu_secs=12.2,
                  sources={"end_time": "HTCondor job ad", "wall_secs": "HTCondor job ad",
                           "cpu_secs": "HTCondor job ad"})


FULL_XML = """\
<?xml version="1.0" encoding="UTF-8"?>
<Job>
  <JobId>1234567.0</JobId>
  <UserId>atlas001</UserId>
  <MachineName>wn042.example.org</MachineName>
  <Queue>grid</Queue>
  <StartTime>1700000000</StartTime>
  <EndTime>1700007200</EndTime>
  <Requested>
    <Processors>8</Processors>
    <Memory units="KB">16777216</Memory>
    <WallDuration>172800</WallDuration>
  </Requested>
  <Delivered>
    <Processors consumptionRate="0.75">8</Processors>
    <Memory metric="max" units="KB">9961472</Memory>
    <WallDuration>7200</WallDuration>
  </Delivered>
</Job>
"""

SPARSE_XML = """\
<?xml version="1.0" encoding="UTF-8"?>
<Job>
  <JobId>987</JobId>
  <StartTime>1700000001</StartTime>
  <EndTime>1700000100</EndTime>
  <Delivered>
    <WallDuration>100</WallDuration>
  </Delivered>
</Job>
"""

FULL_APEL_RECORD = """\
Site: UKI-TEST
MachineName: wn042.example.org
Queue: grid
LocalJobId: 1234567.0
LocalUserId: atlas001
WallDuration: 7200
CpuDuration: 43200
Processors: 8
NodeCount: 1
StartTime: 1700000000
EndTime: 1700007200
MemoryReal: 9961472
ServiceLevelType: hepscore23
ServiceLevel: 20
%%
"""

SPARSE_APEL_RECORD = """\
Site: UKI-TEST
LocalJobId: 987
WallDuration: 100
CpuDuration: 12
NodeCount: 1
StartTime: 1700000001
EndTime: 1700000100
%%
"""


# --- golden outputs -------------------------------------------------------------

def test_full_record_xml_golden():
    assert sss_xml(full()) == FULL_XML


def test_sparse_record_xml_golden():
    assert sss_xml(sparse()) == SPARSE_XML


def test_apel_message_golden_full_then_sparse():
    assert apel([full(), sparse()], "UKI-TEST") == (
        "APEL-individual-job-message: v0.3\n" + FULL_APEL_RECORD + SPARSE_APEL_RECORD)


def test_json_golden_full():
    assert record_json(full()) == {
        "job_id": "1234567.0", "user": "atlas001", "queue": "grid",
        "node": "wn042.example.org", "backend": "slurm", "benchmark": "HEPscore23",
        "requested": {"allocated_cpu": 8, "max_rss_bytes": 16 * GIB,
                      "wall_limit_secs": 172800, "cpu_limit_secs": 1382400,
                      "scratch_limit_bytes": 80 * GIB, "hs06_job": 160.0,
                      "start_time": 1700000000},
        "delivered": {
            "end_time": {"value": 1700007200, "source": "wait4 rusage"},
            "wall_secs": {"value": 7200.4, "source": "wait4 rusage"},
            "cpu_secs": {"value": 43200.0, "source": "cgroup cpu.stat"},
            "peak_memory_bytes": {"value": 9 * GIB + 512 * MIB,
                                  "source": "cgroup memory.peak"},
            "consumption_rate": {"value": pytest.approx(43200 / (7200.4 * 8)),
                                 "source": "derived: cpu_secs / (wall_secs * allocated_cpu)"},
        },
    }


def test_json_sparse_leaves_unknowns_out_and_is_serialisable():
    out = record_json(sparse())
    assert out == {"job_id": "987", "requested": {"start_time": 1700000000.6},
                   "delivered": {name: {"value": getattr(sparse(), name),
                                        "source": "HTCondor job ad"}
                                 for name in ("end_time", "wall_secs", "cpu_secs")}}
    assert json.loads(json.dumps(out)) == out
    assert record_json(Record("1")) == {"job_id": "1"}


# --- the spec's structure ---------------------------------------------------------

def test_xml_has_the_spec_structure():
    job = ET.fromstring(sss_xml(full()))
    assert job.tag == "Job"
    assert [child.tag for child in job] == ["JobId", "UserId", "MachineName", "Queue",
                                            "StartTime", "EndTime", "Requested", "Delivered"]
    assert [c.tag for c in job.find("Requested")] == ["Processors", "Memory", "WallDuration"]
    assert [c.tag for c in job.find("Delivered")] == ["Processors", "Memory", "WallDuration"]
    assert job.find("Delivered/Processors").get("consumptionRate") == "0.75"
    assert job.find("Delivered/Memory").attrib == {"metric": "max", "units": "KB"}
    assert job.find("Requested/Memory").attrib == {"units": "KB"}
    assert job.find("Requested/Processors").attrib == {}
    assert int(job.find("Delivered/WallDuration").text) == 7200
    assert int(job.find("Requested/WallDuration").text) == 172800


def test_empty_requested_and_delivered_are_left_out():
    job = ET.fromstring(sss_xml(Record("5")))
    assert [child.tag for child in job] == ["JobId"]


# --- consumption rate ----------------------------------------------------------------

@pytest.mark.parametrize("missing", ["cpu_secs", "wall_secs", "allocated_cpu"])
def test_consumption_rate_only_when_all_inputs_exist(missing):
    record = full(**{missing: None})
    assert record.consumption_rate is None
    assert "consumption_rate" not in record_json(record)["delivered"]
    assert "consumptionRate" not in sss_xml(record)


def test_consumption_rate_zero_wall_or_cpus_is_unknown_not_infinite():
    assert full(wall_secs=0).consumption_rate is None
    assert full(allocated_cpu=0).consumption_rate is None
    assert full(cpu_secs=0).consumption_rate == 0.0


def test_consumption_rate_value():
    assert full(cpu_secs=7200, wall_secs=3600, allocated_cpu=4).consumption_rate == 0.5


# --- escaping of hostile text ------------------------------------------------------------

HOSTILE = "</JobId><Evil a='1' b=\"2\">&amp;&\x00\x01\x1b\x7f\t\n\r\ufffe\uffff\ud800]]>"


def test_hostile_text_is_escaped_and_control_characters_replaced():
    text = sss_xml(Record(HOSTILE, user=HOSTILE, queue=HOSTILE, node=HOSTILE))
    job = ET.fromstring(text)
    expected = ("</JobId><Evil a='1' b=\"2\">&amp;&\ufffd\ufffd\ufffd\x7f\t\n\r"
                "\ufffd\ufffd\ufffd]]>")
    for tag in ("JobId", "UserId", "Queue", "MachineName"):
        assert job.find(tag).text == expected
    assert job.find("Evil") is None
    assert "\x00" not in text and "\x01" not in text and "\r" not in text
    text.encode("utf-8")  # no lone surrogate left


def test_xml_escape_attribute_quotes():
    assert job_record.xml_escape("a\"b'c<d>&") == "a&quot;b&apos;c&lt;d&gt;&amp;"
    assert job_record.xml_escape("plain") == "plain"


def test_apel_values_cannot_inject_fields_or_separators():
    record = Record("1\n%%\nSite: EVIL", user="u\r\nLocalJobId: 2\ud800", start_time=1,
                    end_time=2, wall_secs=1, cpu_secs=1,
                    sources={"end_time": "s", "wall_secs": "s", "cpu_secs": "s"})
    lines = apel([record], "SITE").splitlines()
    assert lines.count("%%") == 1 and lines[-1] == "%%"
    assert [line for line in lines if line.startswith("Site:")] == ["Site: SITE"]
    assert "LocalJobId: 1?%%?Site: EVIL" in lines
    assert "LocalUserId: u??LocalJobId: 2?" in lines
    apel([record], "SITE").encode("utf-8")


# --- APEL mandatory fields and units ----------------------------------------------------------

def apel_fields(message: str) -> list[dict]:
    header, _, body = message.partition("\n")
    assert header == "APEL-individual-job-message: v0.3"
    out = []
    for chunk in body.split("%%\n"):
        if chunk:
            out.append(dict(line.split(": ", 1) for line in chunk.splitlines()))
    return out


def test_apel_has_every_mandatory_field_in_its_unit():
    (fields,) = apel_fields(apel([full()], "UKI-TEST"))
    for name in job_record.APEL_MANDATORY:
        assert name in fields
    assert fields["WallDuration"] == "7200"  # seconds, whole
    assert fields["CpuDuration"] == "43200"
    assert fields["StartTime"] == "1700000000"  # UNIX seconds
    assert fields["EndTime"] == "1700007200"
    assert int(fields["MemoryReal"]) * 1024 == 9 * GIB + 512 * MIB  # KB
    assert fields["ServiceLevel"] == "20"  # 160 HS06 over 8 cores


@pytest.mark.parametrize(("field", "change"), [
    ("WallDuration", {"wall_secs": None}), ("CpuDuration", {"cpu_secs": None}),
    ("StartTime", {"start_time": None}), ("EndTime", {"end_time": None})])
def test_apel_missing_mandatory_field_raises_naming_it(field, change):
    with pytest.raises(ValueError, match=field):
        apel([full(**change)], "UKI-TEST")


@pytest.mark.parametrize("site", ["", "\n"])
def test_apel_needs_a_site(site):
    with pytest.raises(ValueError, match="Site"):
        apel([full()], site)


@pytest.mark.parametrize(("benchmark", "spelled"), [
    ("HEPSPEC", "hepspec"), ("hepspec", "hepspec"), ("HEPscore23", "hepscore23"),
    ("HEPSCORE23", "hepscore23")])
def test_apel_service_level_type_spelling(benchmark, spelled):
    (fields,) = apel_fields(apel([full(benchmark=benchmark)], "S"))
    assert fields["ServiceLevelType"] == spelled


@pytest.mark.parametrize("change", [{"benchmark": None}, {"hs06_job": None},
                                    {"allocated_cpu": None}, {"allocated_cpu": 0}])
def test_apel_service_level_left_out_unless_known_per_core(change):
    (fields,) = apel_fields(apel([full(**change)], "S"))
    assert "ServiceLevelType" not in fields and "ServiceLevel" not in fields


def test_apel_service_level_per_core_decimals():
    (fields,) = apel_fields(apel([full(hs06_job=100.0, allocated_cpu=3)], "S"))
    assert fields["ServiceLevel"] == "33.333"


def test_apel_of_no_records_is_the_header():
    assert apel([], "S") == "APEL-individual-job-message: v0.3\n"


# --- Record validation ----------------------------------------------------------------

def test_delivered_value_needs_its_source():
    with pytest.raises(ValueError, match="cpu_secs"):
        Record("1", cpu_secs=5.0)
    with pytest.raises(ValueError, match="not a Delivered value"):
        Record("1", sources={"allocated_cpu": "x"})


def test_sources_of_unknown_values_are_dropped():
    assert Record("1", sources={"cpu_secs": "x"}).sources == {}


@pytest.mark.parametrize("bad", [{"wall_secs": -1.0, "sources": {"wall_secs": "s"}},
                                 {"allocated_cpu": True}, {"max_rss_bytes": "1"},
                                 {"start_time": float("nan")}, {"hs06_job": float("inf")},
                                 {"user": 5}, {"benchmark": "SPECint"}])
def test_bad_values_are_refused(bad):
    with pytest.raises(ValueError):
        Record("1", **bad)


@pytest.mark.parametrize("job_id", ["", None, 5])
def test_job_id_required(job_id):
    with pytest.raises(ValueError, match="job_id"):
        Record(job_id)


def test_record_has_slots_and_repr():
    record = sparse()
    with pytest.raises(AttributeError):
        record.colour = "red"
    assert repr(record).startswith("Record(job_id='987', start_time=1700000000.6")


def test_module_imports_only_itself():
    # __future__ (annotations) is preloaded from 3.10 on, imported by 3.9: tiny either way.
    code = ("import sys; before = set(sys.modules); import mjf_hooks.records.job; "
            "print(sorted(set(sys.modules) - before - {'__future__'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "['mjf_hooks', 'mjf_hooks.records', 'mjf_hooks.records.job']"


# --- property: any text gives parseable XML --------------------------------------------

ANY_TEXT = st.text(alphabet=any_character(), max_size=40)


@given(job_id=ANY_TEXT.filter(bool), user=ANY_TEXT, queue=ANY_TEXT, node=ANY_TEXT)
def test_sss_xml_always_parses(job_id, user, queue, node):
    text = sss_xml(Record(job_id, user=user, queue=queue, node=node, allocated_cpu=1))
    job = ET.fromstring(text.encode("utf-8"))
    assert job.tag == "Job"
    for tag, value in (("JobId", job_id), ("UserId", user), ("Queue", queue),
                       ("MachineName", node)):
        assert (job.find(tag).text or "") == job_record.xml_clean(value)


# --- the record's JSON, written without the json module -----------------------------

_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2**70, max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=20)


@given(_JSON_VALUES)
def test_json_text_is_what_json_dumps_writes(value):
    import json

    assert json_text(value) == json.dumps(value, sort_keys=True)


@given(_JSON_VALUES, st.sampled_from([0, 2, 4]))
def test_indented_json_text_in_key_order_is_what_json_dumps_writes(value, indent):
    import json

    # As `mjf describe` writes its documents (json.dumps(value, indent=2)).
    assert json_text(value, indent, sort_keys=False) == json.dumps(value, indent=indent)


def test_json_text_of_a_record_reads_back_and_refuses_what_json_cannot_say():
    import json

    data = record_json(full(user="\u00e9t\u00e9\U0001f600\udcff\n\"\\"))
    assert json.loads(json_text(data)) == json.loads(json.dumps(data))
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError):
            json_text(bad)
    with pytest.raises(TypeError):
        json_text({1, 2})


# --- a share of a job of several nodes ---------------------------------------------

def test_a_share_of_a_multi_node_job_says_which_in_every_form():
    share = full(node="mjfn2", node_index=2, node_count=3)
    data = record_json(share)
    assert (data["node"], data["node_index"], data["node_count"]) == ("mjfn2", 2, 3)
    assert record_json(job_record.record_from_json(json.loads(json_text(data)))) == data
    group = ET.fromstring(sss_xml(share)).find("TaskGroup")
    assert group.findtext("NodeCount") == "3" and group.findtext("Task/Node") == "mjfn2"
    # APEL counts this node alone: each node's record is its own share of the job.
    assert "NodeCount: 1\n" in apel([share], "UKI-TEST")


def test_a_job_of_one_node_has_no_task_group():
    assert "TaskGroup" not in sss_xml(full(node_index=1, node_count=1))
    assert sss_xml(full()) == FULL_XML and "node_index" not in record_json(full())


@pytest.mark.parametrize(("index", "count"), [
    (0, 3), (4, 3), (1, None), (None, 2), (True, 2), ("1", 2), (1, 10**6), (-1, 1),
])
def test_a_share_that_is_no_place_among_the_jobs_nodes_is_refused(index, count):
    with pytest.raises(ValueError, match="node_index and node_count must be whole numbers"):
        full(node_index=index, node_count=count)


# --- whose word the Requested values are ----------------------------------------------

def test_where_the_requested_values_came_from_is_said_only_where_a_user_wrote_them():
    said = ("the job's jobfeatures/, its user's word (its jobfeatures/ is uid 65534's); "
            "allocated_cpu 1000000 counted as 16, the machine's total_cpu")
    data = record_json(full(requested_source=said))
    assert data["requested_source"] == said
    assert record_json(job_record.record_from_json(json.loads(json_text(data)))) == data
    assert "requested_source" not in record_json(full())
    assert sss_xml(full(requested_source=said)) == FULL_XML


@pytest.mark.parametrize("bad", ["", 7, ["a"], {"a": 1}])
def test_a_requested_source_that_is_no_text_is_refused(bad):
    with pytest.raises(ValueError, match="requested_source must be text"):
        full(requested_source=bad)
