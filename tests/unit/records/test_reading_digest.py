"""`mjf records --summary` through each day's digest: the same totals and the same
messages as reading every record, whatever the records directory holds."""

from __future__ import annotations

import json
import marshal
import os

import pytest

from mjf_hooks.records import filing as record_filing
from mjf_hooks.records import job as job_record
from mjf_hooks.records import reading as record_reading
from mjf_hooks.records.job import Record, record_json
from mjf_hooks.records.store import DIGESTS, day_name

DAY = 86400
FIRST = 1_790_000_000 // DAY * DAY


def write_record(top, number: int, end: int, **changes) -> None:
    cores = 1 + number % 4
    wall = 600 + number * 37
    record = Record(str(7000 + number), user="u", queue="q", node="wn1", backend="slurm",
                    allocated_cpu=cores, max_rss_bytes=cores << 30, wall_limit_secs=3600,
                    cpu_limit_secs=3600 * cores, start_time=end - wall, end_time=end,
                    wall_secs=wall, cpu_secs=wall * cores * (0.2 + number % 9 / 10),
                    peak_memory_bytes=(cores << 30) * (number % 5 + 1) // 4,
                    sources={"end_time": "x", "wall_secs": "x", "cpu_secs": "x",
                             "peak_memory_bytes": "x"})
    data = {**record_json(record), **changes}
    day = top / day_name(end)
    day.mkdir(exist_ok=True)
    (day / f"{end}-{record.job_id}.json").write_text(json.dumps(data))


@pytest.fixture
def top(tmp_path):
    top = tmp_path / "records"
    top.mkdir(mode=0o755)
    for number in range(30):  # three days, some jobs past a promise
        write_record(top, number, FIRST + (number // 10) * DAY + number * 60)
    day = top / day_name(FIRST + DAY)
    (day / f"{FIRST + DAY + 5}-junk.json").write_text("{not json")
    (day / f"{FIRST + DAY + 6}-other.json").write_text('{"no": "job id"}')
    write_record(top, 99, FIRST + 2 * DAY + 7, requested={"allocated_cpu": "many"})
    return top


def by_reading_every_record(top, since=None) -> tuple[dict, list[str]]:
    """What the summary was before digests: every record read and checked."""
    listing = record_reading.read_all(str(top), since)
    found = []
    for data in listing.records:
        try:
            found.append(job_record.record_from_json(data))
        except (ValueError, TypeError):
            listing.unreadable.append(f"the record of job {data['job_id']}")
    return job_record.summary(found), listing.unreadable


def through_digests(top, since=None) -> tuple[dict, list[str]]:
    rows, handed_in, skipped = record_reading.summary_rows(str(top), since)
    assert handed_in == []
    return job_record.summary_of(rows), skipped


@pytest.mark.parametrize("since", [None, FIRST + DAY + 300])
def test_the_same_totals_and_messages_first_and_from_the_digests(top, since):
    expected = by_reading_every_record(top, since)
    assert expected[0]["jobs"] > 5 and len(expected[1]) == (3 if since is None else 1)
    assert through_digests(top, since) == expected  # reads every record, writes digests
    assert sorted(os.listdir(top / DIGESTS)) == sorted(
        f"{day}.marshal" for day in os.listdir(top) if day[0].isdigit()
        and (since is None or day >= day_name(since)))
    assert through_digests(top, since) == expected  # from the digests


def test_a_digest_is_used_while_its_day_is_unchanged(top, monkeypatch):
    through_digests(top)
    read = []
    monkeypatch.setattr(record_reading, "_read_day", lambda day: read.append(day.path) or [])
    through_digests(top)
    assert read == []
    write_record(top, 40, FIRST + DAY + 900)  # a late record, handed in and filed
    monkeypatch.undo()
    assert through_digests(top) == by_reading_every_record(top)
    assert through_digests(top)[0]["jobs"] == 31


@pytest.mark.parametrize("digest", [
    b"", marshal.dumps([]), marshal.dumps({"format": 2, "day": [1, 2, 3], "entries": []}),
    b"garbage\0", b"\xff" * 40, marshal.dumps(compile("1", "x", "eval")), "OLD_FORMAT",
    "TRUNCATED", "STAMP_BAD_ENTRY"])
def test_a_digest_that_is_not_its_days_is_read_past(top, digest):
    expected = by_reading_every_record(top)
    through_digests(top)
    target = top / DIGESTS / f"{day_name(FIRST)}.marshal"
    written = marshal.loads(target.read_bytes())
    if digest == "OLD_FORMAT":  # the right day, an earlier version's format
        digest = marshal.dumps({**written, "format": 1})
    elif digest == "TRUNCATED":  # as a crash might leave it, if one could
        digest = target.read_bytes()[:-7]
    elif digest == "STAMP_BAD_ENTRY":  # the right day, an entry that is no entry
        written["entries"][0] = [None, 0, "row", ["1", None, None, None, []]]
        digest = marshal.dumps(written)
    target.write_bytes(digest)
    assert through_digests(top) == expected


def test_expire_removes_an_earlier_versions_digests(top):
    through_digests(top)
    earlier = top / DIGESTS / f"{day_name(FIRST)}.json"
    earlier.write_text('{"format": 1}')
    config = type("Config", (), {"records_dir": str(top), "records_keep_days": 1000})()
    record_filing.expire(config, now=FIRST + 10 * DAY)
    assert not earlier.exists()
    assert os.listdir(top / DIGESTS)  # this version's stay while their days do


def test_digests_others_can_write_are_neither_used_nor_written(top):
    expected = by_reading_every_record(top)
    (top / DIGESTS).mkdir()
    os.chmod(top / DIGESTS, 0o777)
    assert through_digests(top) == expected
    assert os.listdir(top / DIGESTS) == []


def test_expire_removes_the_digests_of_days_that_are_gone(top, tmp_path):
    through_digests(top)
    config = type("Config", (), {"records_dir": str(top), "records_keep_days": 1})()
    record_filing.expire(config, now=FIRST + 10 * DAY)
    assert not [day for day in os.listdir(top) if day[0].isdigit()]
    assert os.listdir(top / DIGESTS) == []
