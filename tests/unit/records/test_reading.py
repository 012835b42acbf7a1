"""Reading the records directory back: oldest first, since a day, what is not a record
listed as unreadable."""

from __future__ import annotations

import json
import os
import threading

import pytest

from mjf_hooks.errors import StoreError
from mjf_hooks.records import reading as record_reading
from mjf_hooks.records import store as record_store
from mjf_hooks.records.job import record_json
from tests.unit.records.support import (
    days,
    record,
    write_several,
)


def test_a_missing_records_directory_has_no_records(tmp_path):
    listing = record_reading.read_all(str(tmp_path / "absent"))
    assert listing.records == [] and listing.unreadable == []


def test_an_empty_records_directory_has_no_records(records_dir):
    records_dir.mkdir()
    listing = record_reading.read_all(str(records_dir))
    assert listing.records == [] and listing.unreadable == []


def test_a_refused_records_directory_is_an_error(records_dir):
    records_dir.mkdir()
    records_dir.chmod(0o757)
    with pytest.raises(StoreError, match="others can write"):
        record_reading.read_all(str(records_dir))


def test_records_are_read_oldest_first(config, records_dir):
    write_several(config)
    assert days(records_dir) == ["2023-11-14", "2023-11-15", "2023-11-16"]
    listing = record_reading.read_all(str(records_dir))
    assert [data["job_id"] for data in listing.records] == ["a", "b", "c", "d"]
    assert listing.records[0] == record_json(record("a", end=1699999000))
    assert listing.unreadable == []


def test_since_skips_older_days_and_older_files(config, records_dir):
    write_several(config)
    # Garbage in a day wholly before `since`, and in a file named as ending before it: if
    # either were read, it would be listed as unreadable.
    (records_dir / "2023-11-14/1699999999-junk.json").write_text("not json")
    (records_dir / "2023-11-16/1700099999-junk.json").write_text("not json")
    listing = record_reading.read_all(str(records_dir), since=1700100000)
    assert [data["job_id"] for data in listing.records] == ["c", "d"]
    assert listing.unreadable == []
    listing = record_reading.read_all(str(records_dir), since=1700050000)
    assert [data["job_id"] for data in listing.records] == ["b", "c", "d"]
    assert listing.unreadable == [f"{records_dir}/2023-11-16/1700099999-junk.json"]
    listing = record_reading.read_all(str(records_dir), since=1700150001)
    assert listing.records == [] and listing.unreadable == []


def test_since_at_the_start_of_a_day_keeps_that_day(config, records_dir):
    write_several(config)
    start_of_16th = 1700092800  # 2023-11-16 00:00:00 UTC
    listing = record_reading.read_all(str(records_dir), since=start_of_16th)
    assert [data["job_id"] for data in listing.records] == ["c", "d"]


def test_what_is_not_a_record_is_listed_as_unreadable(config, records_dir, tmp_path):
    record_store.write(config, record("good", end=1700000000))
    day = records_dir / "2023-11-14"
    (day / "1700000001-garbage.json").write_text("{not json")
    (day / "1700000002-list.json").write_text("[1, 2]")
    (day / "1700000003-noid.json").write_text('{"user": "x"}')
    (day / "1700000004-binary.json").write_bytes(b"\xff\xfe\x00garbage")
    (day / "1700000005-empty.json").write_text("")
    big = '{"job_id": "big", "pad": "' + "x" * 70000 + '"}'
    (day / "1700000006-big.json").write_text(big)
    os.mkfifo(day / "1700000007-fifo.json")
    target = tmp_path / "target.json"
    target.write_text(json.dumps(record_json(record("linked"))))
    os.symlink(target, day / "1700000008-link.json")
    (day / "1700000009-dir.json").mkdir()
    # Neither read nor listed: hidden temporaries, other formats, other files.
    (day / ".new-json.1.abcdef01").write_text("{partial")
    (day / "1700000010-x.xml").write_text("<Job>")
    (day / "README").write_text("hello")

    result: list = []
    reader = threading.Thread(target=lambda: result.append(
        record_reading.read_all(str(records_dir))), daemon=True)
    reader.start()
    reader.join(10)
    assert not reader.is_alive(), "read_all hangs (on the FIFO?)"
    listing = result[0]
    assert [data["job_id"] for data in listing.records] == ["good"]
    assert listing.unreadable == [f"{day}/{name}" for name in (
        "1700000001-garbage.json", "1700000002-list.json", "1700000003-noid.json",
        "1700000004-binary.json", "1700000005-empty.json", "1700000006-big.json",
        "1700000007-fifo.json", "1700000008-link.json", "1700000009-dir.json")]


def test_a_record_of_exactly_the_largest_size_is_read(records_dir, config):
    records_dir.mkdir()
    day = records_dir / "2023-11-14"
    day.mkdir()
    head = '{"job_id": "edge", "pad": "'
    text = head + "x" * (65536 - len(head) - 2) + '"}'
    assert len(text) == 65536
    (day / "1700000000-edge.json").write_text(text)
    (day / "1700000001-over.json").write_text(text[:-2] + 'x"}')
    listing = record_reading.read_all(str(records_dir))
    assert [data["job_id"] for data in listing.records] == ["edge"]
    assert listing.unreadable == [f"{day}/1700000001-over.json"]


def test_directories_that_are_not_days_are_not_read(config, records_dir, tmp_path):
    record_store.write(config, record("good", end=1700000000))
    for name in ("notaday", "2023-13-45", "2023-1-014", "20231114xx"):
        (records_dir / name).mkdir()
        (records_dir / name / "1700000000-x.json").write_text("garbage")
    (records_dir / "2023-11-13").write_text("a file named like a day")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere/1700000000-x.json").write_text("garbage")
    os.symlink(tmp_path / "elsewhere", records_dir / "2023-11-12")
    listing = record_reading.read_all(str(records_dir))
    assert [data["job_id"] for data in listing.records] == ["good"]
    assert listing.unreadable == []


def test_a_record_whose_delivered_is_not_an_object_is_listed_not_fatal(records_dir):
    (records_dir / "2023-11-14").mkdir(parents=True)
    (records_dir / "2023-11-14/1700000000-x.json").write_text(
        '{"job_id": "x", "delivered": [1]}')
    listing = record_reading.read_all(str(records_dir))
    # Either way is fine, so long as it does not raise: `mjf records` then skips it.
    assert [data["job_id"] for data in listing.records] in (["x"], [])
