"""The bad-input corpus of the records drop box: what a job's user hands in.

A job's user can put anything in ``<records dir>/incoming/``; root's `mjf sync` reads it.
Every case starts from the record HTCondor's job-exit hook hands in for the recorded final
job ad (htcondor-23.9/job-exit-hook-stdin.ad) and breaks one thing: the whole file, one
value of it (a number no job reaches, one that makes a conversion raise, a wrong type,
nesting too deep...), its kind (a FIFO, a symlink to a root-only file, a sparse 1 GiB
file), or its name. Whether the hand-in can be filed is decided here, from the broken
input alone (:func:`expected_filed`: docs/records.md's contract of a record), never from a run.

Each case is handed in as another user (uid ``ATTACKER``), beside a good hand-in of a third
(``VICTIM``) and a record root wrote for the same job and end second; then ``ingest``
(`mjf sync`'s filing) runs, as root. It must: not raise; file the case's hand-in exactly
when it is a record (under ``<end>-<job>~<uid>``), else remove it with exactly one line
naming it (one line, no control character, no byte of a root-only file); file the
victim's; leave root's record as it was; leave the drop box empty; and whatever it filed
must read back through what `mjf records` does (figures, summary, the SSS XML) without
raising. A second run has nothing left to do.
"""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path

import pytest

from mjf_hooks import classad_files, spec
from mjf_hooks.batch import htcondor
from mjf_hooks.config import parse
from mjf_hooks.errors import StoreError
from mjf_hooks.records import filing as record_filing
from mjf_hooks.records import reading as record_reading
from mjf_hooks.records import store as record_store
from mjf_hooks.records.job import (
    MAX_NUMBER,
    MAX_TIME,
    Record,
    figures,
    record_from_json,
    record_json,
    sss_xml,
    summary,
)
from mjf_hooks.store import job_dir_name
from tests.conftest import FIXTURES, LeveledLog, require
from tests.corpus.mutations import DIRECTORY, file_mutations

ATTACKER, VICTIM = 4711, 4712
DAY = "2026-11-25"  # of the recorded job's end, 1795630299, in UTC
SECRET = "31337424242"


def recorded_hand_in() -> dict:
    """What the job-exit hook hands in for the recorded final ad: the JSON of its record."""
    ad = classad_files.parse_ad((FIXTURES / "htcondor-23.9/job-exit-hook-stdin.ad").read_text())
    delivered, owner = htcondor.exit_facts(ad)
    job_id, _ = htcondor.job_id_of(ad, "global", [])
    delivered["end_time"] = (1795630299, "the clock as the job's end ran")
    # The share it says it is (node 1 of 1): every case breaks that too.
    record = Record(job_id, user=owner, node="vm", backend="htcondor", node_index=1,
                    node_count=1, allocated_cpu=2,
                    max_rss_bytes=640 * 2**20, start_time=1795630290,
                    **{name: value for name, (value, _) in delivered.items()},
                    sources={name: source for name, (_, source) in delivered.items()})
    return record_json(record)


BASE = recorded_hand_in()
BASE_TEXT = json.dumps(BASE)

# JSON texts for one value: (label, raw JSON).
NUMBERS = [("1e20", "1e20"), ("400-digits", "9" * 400), ("5000-digits", "9" * 5000),
           ("nan", "NaN"), ("infinity", "Infinity"), ("minus-infinity", "-Infinity"),
           ("negative", "-1"), ("minus-zero", "-0.0"), ("1e308", "1e308"),
           ("int64-max", str(2**63 - 1)), ("int64-max+1", str(2**63)), ("2**64", str(2**64)),
           ("year-9999-end", str(MAX_TIME)), ("year-10000", str(MAX_TIME + 1)),
           ("zero", "0"), ("fraction", "0.5")]
OTHERS = [("text", '"12"'), ("true", "true"), ("null", "null"), ("list", "[1]"),
          ("object", "{}"), ("deep", "[" * 20000 + "]" * 20000), ("empty-text", '""'),
          ("huge-text", json.dumps("x" * 60000)), ("control", '"a\\u001b[31m\\nb"'),
          ("surrogate", '"\\ud800"'), ("path", '"../../etc/passwd"')]
VALUES = NUMBERS + OTHERS


def _leaves(data: dict, prefix: tuple = ()) -> list[tuple]:
    paths = []
    for key, value in data.items():
        if isinstance(value, dict):
            paths += _leaves(value, (*prefix, key))
        else:
            paths.append((*prefix, key))
    return paths


def with_value(path: tuple, raw: str | None) -> str:
    """BASE with the value at ``path`` replaced by ``raw`` JSON (None: removed)."""
    data = json.loads(BASE_TEXT)
    target = data
    for key in path[:-1]:
        target = target[key]
    if raw is None:
        del target[path[-1]]
        return json.dumps(data)
    target[path[-1]] = "@MARK@"
    return json.dumps(data).replace('"@MARK@"', raw)


def expected_filed(text: str | bytes) -> bool:
    """Whether a hand-in of ``text`` is a record root files (docs/records.md): a JSON
    object of at most 64 KiB whose job_id is a job id, identity values text, its share
    (node_index of node_count) none or whole numbers 1 <= index <= count <= 100000, Requested and
    Delivered values numbers from 0 to 2**63 - 1 (a time to the end of year 9999), each
    Delivered one with a source, an end_time among them; a benchmark HEPSPEC or
    HEPscore23. JSON is read as Python reads it (NaN and Infinity are numbers there)."""
    data = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text
    if len(data) > 65536:
        return False
    try:
        data = json.loads(data.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return False
    if not isinstance(data, dict):
        return False
    job_id = data.get("job_id")
    if not isinstance(job_id, str) or not spec.is_valid_job_id(job_id) \
            or "/" in job_id or job_id in (".", ".."):
        return False
    try:
        dir_name = job_dir_name(job_id)
    except StoreError:
        return False
    for name in ("user", "queue", "node", "backend"):
        if data.get(name) is not None and not isinstance(data[name], str):
            return False
    share = [data.get("node_index"), data.get("node_count")]
    if share != [None, None] and not (
            all(isinstance(value, int) and not isinstance(value, bool) for value in share)
            and 1 <= share[0] <= share[1] <= 100000):
        return False  # no place among at most 100,000 nodes of a job
    benchmark = data.get("benchmark")
    if benchmark is not None and (not isinstance(benchmark, str) or benchmark.lower() not in (
            "hepspec", "hs06", "hepscore23")):
        return False
    requested, delivered = data.get("requested", {}), data.get("delivered", {})
    if not isinstance(requested, dict) or not isinstance(delivered, dict):
        return False

    def number_ok(name, value):
        if value is None:
            return True
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if isinstance(value, float) and math.isnan(value):
            return False
        limit = MAX_TIME if name in ("start_time", "end_time") else MAX_NUMBER
        return 0 <= value <= limit

    from mjf_hooks.records.job import DELIVERED, REQUESTED

    if not all(number_ok(name, requested.get(name)) for name in REQUESTED):
        return False
    for name in DELIVERED:
        entry = delivered.get(name)
        if entry is None:
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get("source"), str):
            return False
        if entry.get("value") is not None and not entry["source"]:
            return False
        if not number_ok(name, entry.get("value")):
            return False
    end = delivered.get("end_time")
    if not isinstance(end, dict) or end.get("value") is None:
        return False
    # The name root files it under, and its longest file's, fit a file name.
    return len(f"{int(end['value'])}-{dir_name}~{ATTACKER}.apel") <= 255


def build_cases() -> list[tuple[str, object]]:
    """(label, what is handed in): bytes, or a special file (as the corpus lays them)."""
    cases: list[tuple[str, object]] = [("baseline", BASE_TEXT.encode())]
    for label, content in file_mutations(BASE_TEXT.encode()):
        if content is not None:
            cases.append((f"file:{label}", content))
    cases += [("file:fifo", ("fifo",)), ("file:sparse-1g", ("sparse", 1 << 30)),
              ("file:symlink-root-only", ("symlink", "secret")),
              ("file:hardlink-root-only", ("hardlink", "secret")),
              ("json:not-an-object", b"[1, 2]"), ("json:deep", b"[" * 30000 + b"]" * 30000),
              ("json:duplicate-job-id", BASE_TEXT.replace(
                  '"job_id": ', '"job_id": "a b", "job_id": ', 1).encode())]
    for path in _leaves(BASE):
        where = ".".join(path)
        cases.append((f"{where}:missing", with_value(path, None).encode()))
        for label, raw in VALUES:
            cases.append((f"{where}:{label}", with_value(path, raw).encode(
                "utf-8", "surrogatepass")))
    for section in ("requested", "delivered"):
        for label, raw in OTHERS:
            cases.append((f"{section}:{label}", with_value((section,), raw).encode(
                "utf-8", "surrogatepass")))
    return cases


CASES = build_cases()
NAMES = [("hidden", ".a1"), ("not-json", "1795630299-x.1.txt"),
         ("no-end", "x-1795630299.json"), ("long-end", "9" * 13 + "-x.json"),
         ("non-ascii", "1795630299-\u00e9.json"), ("no-digits", "-x.json"),
         ("space", "1795630299-a b.json")]




@pytest.fixture
def site(tmp_path):
    require(os.geteuid() == 0, "needs root: a hand-in is another user's file in root's drop box")
    (tmp_path / "secret").write_text(f"cpu_secs {SECRET}\n")
    (tmp_path / "secret").chmod(0o600)
    records = tmp_path / "records"
    config = parse(f"[mjf]\nbase_dir = {tmp_path}/base\n[records]\ndir = {records}\n"
                   "format = sss, apel\nsite = TEST\n", "/test/mjf.conf")
    assert record_filing.ingest(config, LeveledLog()) == 0  # the drop box, as `mjf sync` makes it
    return config, records, tmp_path


def hand_in(drop: Path, name: str, content, uid: int, tmp_path: Path) -> None:
    path = drop / name
    if content is DIRECTORY:
        path.mkdir()
        (path / "inside.json").write_text(BASE_TEXT)
    elif isinstance(content, tuple) and content[0] == "fifo":
        os.mkfifo(path)
    elif isinstance(content, tuple) and content[0] == "sparse":
        with open(path, "wb") as handle:
            handle.truncate(content[1])
    elif isinstance(content, tuple) and content[0] == "symlink":
        os.symlink(tmp_path / content[1], path)
    elif isinstance(content, tuple) and content[0] == "hardlink":
        os.link(tmp_path / content[1], path)
        return  # root's file: a user cannot chown it (nor link it, where protected)
    else:
        path.write_bytes(content)
    os.lchown(path, uid, uid)


def everything(directory: Path) -> dict[str, bytes | None]:
    return {str(path.relative_to(directory)): (path.read_bytes() if path.is_file() else None)
            for path in sorted(directory.rglob("*")) if "incoming" not in path.parts}


def check_filed(records: Path) -> list[dict]:
    """The records filed, through what `mjf records` does with them."""
    found = []
    for data in record_reading.read_all(str(records)).records:
        record = record_from_json(data)
        figures(record)
        sss_xml(record)
        found.append(data)
    summary(record_from_json(data) for data in found)
    return found


@pytest.mark.parametrize("label, content", CASES, ids=[label for label, _ in CASES])
def test_hand_in(site, label, content):
    config, records, tmp_path = site
    drop = records / "incoming"
    # Root's own record of the job, same end second: what an attacker would replace.
    root_record = Record("vm#1.0#1795630282", end_time=1795630299,
                         sources={"end_time": "the epilog's clock"})
    record_store.write(config, root_record)
    # Without root's note that the job was root's (an earlier version wrote none): the
    # hand-in is then filed when it is a record - under a name of its own.
    for note in (records / "ended").glob("*/*"):
        note.unlink()
    name = "1795630299-vm#1.0#1795630282.1.json"
    hand_in(drop, name, content, ATTACKER, tmp_path)
    victim = dict(BASE, job_id="victim")
    hand_in(drop, "1795630299-victim.2.json", json.dumps(victim).encode(), VICTIM, tmp_path)
    before = everything(records)
    log = LeveledLog()
    filed = record_filing.ingest(config, log)
    expected = isinstance(content, bytes) and expected_filed(content)
    messages = [message for _, message in log.lines]
    assert os.listdir(drop) == [], os.listdir(drop)
    assert (records / DAY / f"1795630299-victim~{VICTIM}.json").exists()
    # Root's record, and everything else that was there, as it was.
    after = everything(records)
    for path, data in before.items():
        assert after.get(path, b"gone") == data, path
    about = [message for message in messages if repr(name) in message]
    for message in messages:
        assert "\n" not in message and "\x1b" not in message and SECRET not in message
        assert len(message) < 700, message
    found = check_filed(records)
    for data in found:
        assert SECRET not in json.dumps(data)
    attackers = [data for data in found if f"handed in by uid {ATTACKER}" in json.dumps(data)]
    if expected:
        assert filed == 2, messages
        assert about == [], about
        assert len(attackers) == 1
        assert len(list(records.glob(f"*/*~{ATTACKER}.json"))) == 1
    else:
        assert filed == 1, messages
        assert len(about) == 1, messages
        assert attackers == []
    assert record_filing.ingest(config, LeveledLog()) == 0


@pytest.mark.parametrize("label, name", NAMES, ids=[label for label, _ in NAMES])
def test_a_name_that_is_no_hand_in_is_removed(site, label, name):
    config, records, tmp_path = site
    drop = records / "incoming"
    hand_in(drop, name, BASE_TEXT.encode(), ATTACKER, tmp_path)
    hand_in(drop, "1795630299-victim.2.json", json.dumps(dict(BASE, job_id="victim")).encode(),
            VICTIM, tmp_path)
    log = LeveledLog()
    assert record_filing.ingest(config, log) == 1
    assert os.listdir(drop) == []
    (line,) = [message for _, message in log.lines]
    assert "removed 1 file(s) that are not records handed in by a user" in line


def test_the_corpus_is_what_it_says():
    """The model files the recorded hand-in; every case label is unique."""
    assert expected_filed(BASE_TEXT)
    labels = [label for label, _ in CASES]
    assert len(labels) == len(set(labels))
    assert len(CASES) > 300
    assert stat.S_ISREG(os.stat(FIXTURES / "htcondor-23.9/job-exit-hook-stdin.ad").st_mode)
