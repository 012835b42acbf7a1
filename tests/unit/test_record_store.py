"""The records directory: writing a record whole or not at all, reading them
back, expiring old ones; and how a job's end writes its record (lifecycle)."""

from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from mjf_hooks import lifecycle, record_filing, record_reading, record_store
from mjf_hooks.config import parse
from mjf_hooks.errors import StoreError
from mjf_hooks.job_record import Record, apel, record_json, sss_xml
from mjf_hooks.store import job_dir_name
from mjf_hooks.store_locations import store_for
from tests.conftest import LeveledLog, require

GIB = 2**30
DAY = 86400
# 2023-11-14 23:59:59.7 UTC: the last second of a UTC day (already the 15th east of UTC).
END = 1700006399.7
OTHER_UID = 54321


def as_other_user(action) -> None:
    """Run ``action`` in a child that became OTHER_UID (a real second user); it must
    succeed (its traceback, if any, is printed)."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgid(OTHER_UID)
            os.setuid(OTHER_UID)
            action()
            os._exit(0)
        except BaseException:
            import traceback

            traceback.print_exc()
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0

SOURCES = {"end_time": "wait4 rusage", "wall_secs": "mjf run's clock",
           "cpu_secs": "wait4 rusage", "peak_memory_bytes": "wait4 rusage"}


def record(job_id: str = "1234.0", end: float | None = END, **changes) -> Record:
    values = dict(user="atlas001", queue="grid", node="wn042.example.org", backend="slurm",
                  allocated_cpu=4, max_rss_bytes=8 * GIB, wall_limit_secs=7200,
                  start_time=None if end is None else end - 3600, end_time=end,
                  wall_secs=3600, cpu_secs=10000.0, peak_memory_bytes=3 * GIB,
                  sources=SOURCES)
    values.update(changes)
    if end is None:
        values["sources"] = {k: v for k, v in values["sources"].items() if k != "end_time"}
    return Record(job_id, **values)


def config_for(directory: Path, formats: str = "sss, apel", keep_days: int = 90):
    return parse(f"[records]\ndir = {directory}\nformat = {formats}\nkeep_days = {keep_days}\n"
                 "site = TEST-SITE\n", "/test/mjf.conf")


@pytest.fixture
def records_dir(tmp_path):
    return tmp_path / "records"


@pytest.fixture
def config(records_dir):
    return config_for(records_dir)


@pytest.fixture
def east_of_utc(monkeypatch):
    """Local time 9 hours ahead of UTC, so a local date would be the wrong day."""
    monkeypatch.setenv("TZ", "JST-9")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def everything_under(path: Path) -> list[str]:
    """What is below a records directory, but root's notes of the jobs it recorded."""
    return sorted(str(p.relative_to(path)) for p in path.rglob("*")
                  if p.relative_to(path).parts[0] != record_store.ENDED)


def days(records_dir: Path) -> list[str]:
    """The names in a records directory but root's notes (ended/)."""
    return sorted(name for name in os.listdir(records_dir) if name != record_store.ENDED)


# --- write ------------------------------------------------------------------------

def test_writing_a_record_loads_neither_the_reading_nor_the_filing(tmp_path):
    """An end hook writes a record and is measured against a bare interpreter start: what
    reads records (`mjf records`) and files hand-ins (`mjf sync`) is not its to load."""
    (tmp_path / "records").mkdir()
    conf = tmp_path / "mjf.conf"
    conf.write_text(f"[records]\ndir = {tmp_path}/records\nformat = sss, apel\nsite = T\n")
    code = ("import sys\nfrom mjf_hooks import config, record_store\n"
            "from mjf_hooks.job_record import Record\n"
            f"site = config.load({str(conf)!r})\n"
            "print(record_store.write(site, Record('5', end_time=1700000000.0, cpu_secs=60.0,\n"
            "    sources={'end_time': 'test', 'cpu_secs': 'test'})))\n"
            "print(sorted(name for name in sys.modules if name.startswith('mjf_hooks.record')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60)
    assert result.stdout.splitlines() == [f"{tmp_path}/records/2023-11-14/1700000000-5.json",
                                          "['mjf_hooks.record_store']"], result.stderr


def test_a_record_is_three_files_in_its_utc_day(config, records_dir, east_of_utc):
    one = record()
    path = record_store.write(config, one)
    day = records_dir / "2023-11-14"
    assert path == f"{day}/1700006399-1234.0.json"
    assert days(records_dir) == ["2023-11-14"]
    assert sorted(os.listdir(day)) == ["1700006399-1234.0.apel", "1700006399-1234.0.json",
                                       "1700006399-1234.0.xml"]
    assert (day / "1700006399-1234.0.xml").read_text() == sss_xml(one)
    assert (day / "1700006399-1234.0.apel").read_text() == apel([one], "TEST-SITE")
    assert json.loads((day / "1700006399-1234.0.json").read_text()) == record_json(one)
    assert (day / "1700006399-1234.0.json").read_text().endswith("}\n")


def test_the_files_and_directories_have_their_modes_whatever_the_umask(config, records_dir):
    previous = os.umask(0o077)
    try:
        record_store.write(config, record())
    finally:
        os.umask(previous)
    day = records_dir / "2023-11-14"
    for name in os.listdir(day):
        assert stat.S_IMODE(os.stat(day / name).st_mode) == 0o644, name
    # The directories as mkdir made them under that umask: never writable by others.
    for directory in (records_dir, day):
        assert not os.stat(directory).st_mode & 0o022


def test_the_xml_parses_and_its_root_is_job(config, records_dir):
    record_store.write(config, record())
    root = ET.parse(records_dir / "2023-11-14/1700006399-1234.0.xml").getroot()
    assert root.tag == "Job"
    assert root.findtext("JobId") == "1234.0"
    assert root.find("Delivered/Processors").get("consumptionRate") == "0.6944"


def test_the_file_names_carry_the_job_directory_name(config, records_dir):
    assert job_dir_name("job$1") == "job%241"
    path = record_store.write(config, record("job$1", end=1700000000))
    assert path == f"{records_dir}/2023-11-14/1700000000-job%241.json"
    assert json.loads(Path(path).read_text())["job_id"] == "job$1"


def test_a_requeued_job_gets_a_record_of_its_own(config, records_dir):
    record_store.write(config, record("9", end=1700000000))
    record_store.write(config, record("9", end=1700000500))
    assert sorted(os.listdir(records_dir / "2023-11-14")) == [
        "1700000000-9.apel", "1700000000-9.json", "1700000000-9.xml",
        "1700000500-9.apel", "1700000500-9.json", "1700000500-9.xml"]


def test_the_apel_site_falls_back_to_the_describe_site(records_dir):
    config = parse(f"[describe]\nsite = DESCRIBED\n[records]\ndir = {records_dir}\n"
                   "format = apel\n")
    record_store.write(config, record())
    assert sorted(os.listdir(records_dir / "2023-11-14")) == [
        "1700006399-1234.0.apel", "1700006399-1234.0.json"]
    assert "Site: DESCRIBED\n" in (records_dir / "2023-11-14/1700006399-1234.0.apel").read_text()


def test_without_formats_only_the_json_is_written(config, records_dir):
    config.record_formats = ()
    record_store.write(config, record())
    assert everything_under(records_dir) == ["2023-11-14", "2023-11-14/1700006399-1234.0.json"]


def test_a_record_without_an_end_goes_in_todays_directory(config, records_dir):
    config.record_formats = ("sss",)
    before = int(time.time())
    path = Path(record_store.write(config, record(end=None, start_time=1700000000)))
    after = int(time.time())
    assert path.parent.name in {record_store.day_name(before), record_store.day_name(after)}
    assert before <= int(path.name.split("-")[0]) <= after


def test_a_format_that_cannot_express_the_record_is_left_out_with_a_warning(config,
                                                                           records_dir):
    # APEL needs a CPU time, which not every batch system gives: the rest is written.
    log = Recorded()
    path = record_store.write(config, record(cpu_secs=None), log)
    assert sorted(os.listdir(records_dir / "2023-11-14")) == [
        "1700006399-1234.0.json", "1700006399-1234.0.xml"]
    assert "cpu_secs" not in read_record(path)["delivered"]
    warnings = log.at("warning")
    assert len(warnings) == 1 and "no APEL file" in warnings[0] and "CpuDuration" in warnings[0]
    # Without a log it is left out silently.
    record_store.write(config, record("other", cpu_secs=None))
    assert len(os.listdir(records_dir / "2023-11-14")) == 4


def test_the_parent_of_the_records_directory_is_not_made(tmp_path):
    config = config_for(tmp_path / "missing/records")
    with pytest.raises(StoreError, match="missing/records"):
        record_store.write(config, record())
    assert not (tmp_path / "missing").exists()


def test_a_group_writable_records_directory_is_refused(config, records_dir):
    records_dir.mkdir()
    records_dir.chmod(0o775)
    with pytest.raises(StoreError, match="refusing a records directory others can write"):
        record_store.write(config, record())
    assert os.listdir(records_dir) == []


def test_a_world_writable_day_directory_is_refused(config, records_dir):
    (records_dir / "2023-11-14").mkdir(parents=True)
    (records_dir / "2023-11-14").chmod(0o777)
    with pytest.raises(StoreError, match="others can write"):
        record_store.write(config, record())
    assert everything_under(records_dir) == ["2023-11-14"]


def test_a_day_directory_that_is_a_symlink_is_not_followed(config, records_dir, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    records_dir.mkdir()
    os.symlink(tmp_path / "elsewhere", records_dir / "2023-11-14")
    with pytest.raises(StoreError, match="is not a directory"):
        record_store.write(config, record())
    assert os.listdir(tmp_path / "elsewhere") == []


def test_a_records_directory_symlink_planted_by_another_user_is_refused(config, records_dir,
                                                                       tmp_path):
    require(os.geteuid() == 0, "needs root to plant a symlink as another user")
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", records_dir)
    os.lchown(records_dir, OTHER_UID, OTHER_UID)
    with pytest.raises(StoreError, match=f"belongs to uid {OTHER_UID}"):
        record_store.write(config, record())
    assert os.listdir(tmp_path / "elsewhere") == []


def test_a_records_directory_owned_by_another_user_is_refused(config, records_dir):
    require(os.geteuid() == 0, "needs root to own a directory as another user")
    records_dir.mkdir()
    os.chown(records_dir, OTHER_UID, OTHER_UID)
    with pytest.raises(StoreError, match=f"belongs to uid {OTHER_UID}"):
        record_store.write(config, record())
    assert os.listdir(records_dir) == []


def test_a_records_directory_below_another_users_directory_is_refused(config, tmp_path):
    require(os.geteuid() == 0, "needs root to own a directory as another user")
    (tmp_path / "theirs").mkdir()
    os.chown(tmp_path / "theirs", OTHER_UID, OTHER_UID)
    config.records_dir = str(tmp_path / "theirs/records")
    with pytest.raises(StoreError, match=f"belongs to uid {OTHER_UID}"):
        record_store.write(config, record())
    assert os.listdir(tmp_path / "theirs") == []


def failing_on_call(real, number: int, error: OSError):
    calls = []

    def fake(*args, **kwargs):
        calls.append(args)
        if len(calls) == number:
            raise error
        return real(*args, **kwargs)

    return fake, calls


@pytest.mark.parametrize("failing", [1, 2, 3])
def test_a_failed_rename_leaves_no_file(config, records_dir, monkeypatch, failing):
    fake, calls = failing_on_call(os.rename, failing, OSError(errno.EIO, "I/O error"))
    monkeypatch.setattr(record_store.os, "rename", fake)
    with pytest.raises(StoreError) as caught:
        record_store.write(config, record())
    monkeypatch.undo()
    assert len(calls) == failing
    assert "1700006399-1234.0.json" in str(caught.value)
    assert os.listdir(records_dir / "2023-11-14") == []  # no record, no temporary file
    assert record_reading.read_all(str(records_dir)).records == []


@pytest.mark.parametrize("failing", [1, 2, 3])
def test_a_full_disk_leaves_no_file(config, records_dir, monkeypatch, failing):
    fake, calls = failing_on_call(os.write, failing, OSError(errno.ENOSPC, "No space left"))
    monkeypatch.setattr(record_store.os, "write", fake)
    with pytest.raises(StoreError, match="No space left"):
        record_store.write(config, record())
    monkeypatch.undo()
    assert len(calls) == failing
    assert os.listdir(records_dir / "2023-11-14") == []


def test_after_a_failure_the_next_record_is_written(config, records_dir, monkeypatch):
    fake, _ = failing_on_call(os.write, 1, OSError(errno.ENOSPC, "No space left"))
    monkeypatch.setattr(record_store.os, "write", fake)
    with pytest.raises(StoreError):
        record_store.write(config, record())
    monkeypatch.undo()
    record_store.write(config, record())
    assert len(os.listdir(records_dir / "2023-11-14")) == 3


# --- read_all ---------------------------------------------------------------------

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


def write_several(config) -> list[Record]:
    """Four records over three UTC days, written out of order."""
    written = [record("c", end=1700100000),   # 2023-11-16 02:00 UTC
               record("a", end=1699999000),   # 2023-11-14 21:56:40
               record("d", end=1700150000),   # 2023-11-16 15:53:20
               record("b", end=1700050000)]   # 2023-11-15 12:06:40
    for one in written:
        record_store.write(config, one)
    return written


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


# --- expire -----------------------------------------------------------------------

NOW = 1700006400 + 10 * DAY + 3600  # 2023-11-25 01:00 UTC
DEAD_PID = 2**22 + 123  # above the largest pid_max Linux allows


def test_the_test_pid_is_dead():
    with pytest.raises(ProcessLookupError):
        os.kill(DEAD_PID, 0)


def test_expire_removes_old_records_and_keeps_newer_ones(records_dir):
    config = config_for(records_dir, keep_days=3)
    cutoff = NOW - 3 * DAY  # 2023-11-22 01:00 UTC
    old = [record("old1", end=NOW - 5 * DAY), record("old2", end=NOW - 5 * DAY + 60),
           record("older", end=NOW - 9 * DAY)]
    # The day of the cutoff: one record before it (goes), one after (stays).
    edge_old, edge_new = record("edge-old", end=cutoff - 1), record("edge-new", end=cutoff + 1)
    new = [record("new", end=NOW - DAY), record("today", end=NOW - 60)]
    for one in [*old, edge_old, edge_new, *new]:
        record_store.write(config, one)
    assert record_filing.expire(config, now=NOW) == 4
    assert days(records_dir) == ["2023-11-22", "2023-11-24", "2023-11-25"]
    kept = record_reading.read_all(str(records_dir)).records
    assert [data["job_id"] for data in kept] == ["edge-new", "new", "today"]
    # The .xml and .apel files went with their JSON.
    assert sorted(os.listdir(records_dir / "2023-11-22")) == [
        f"{int(cutoff + 1)}-edge-new.{suffix}" for suffix in ("apel", "json", "xml")]
    assert record_filing.expire(config, now=NOW) == 0


def test_expire_removes_empty_past_days_but_not_today(records_dir):
    config = config_for(records_dir, keep_days=90)
    records_dir.mkdir()
    for name in ("2023-11-20", "2023-11-24", "2023-11-25"):
        (records_dir / name).mkdir()
    assert record_filing.expire(config, now=NOW) == 0
    assert os.listdir(records_dir) == ["2023-11-25"]


def test_expire_removes_what_dead_writers_left(records_dir):
    config = config_for(records_dir, keep_days=90)
    record_store.write(config, record("kept", end=NOW - DAY))
    day = records_dir / "2023-11-24"
    dead = [f".new-json.{DEAD_PID}.0123abcd", f".new-xml.{DEAD_PID}.deadbeef",
            f".new-apel.{DEAD_PID}.00000000"]
    alive = [f".new-json.{os.getpid()}.0123abcd", f".new-xml.{os.getppid()}.89abcdef"]
    others = [".new-json.notapid.0123abcd", f".new-json.{DEAD_PID}.short", ".hidden"]
    for name in dead + alive + others:
        (day / name).write_text("partial")
    assert record_filing.expire(config, now=NOW) == 0
    remaining = sorted(os.listdir(day))
    assert [name for name in remaining if name.startswith(".")] == sorted(alive + others)
    assert len(remaining) == len(alive + others) + 3  # the record's three files


def test_expire_removes_a_day_emptied_of_dead_writers_temporaries(records_dir):
    config = config_for(records_dir, keep_days=90)
    (records_dir / "2023-11-20").mkdir(parents=True)
    (records_dir / "2023-11-20" / f".new-json.{DEAD_PID}.0123abcd").write_text("{")
    record_filing.expire(config, now=NOW)
    assert days(records_dir) == []


def test_expire_ignores_directories_that_are_not_days(records_dir, tmp_path):
    config = config_for(records_dir, keep_days=1)
    records_dir.mkdir()
    for name in ("notaday", "2023-13-45", "1999-01-0x"):
        (records_dir / name).mkdir()
        (records_dir / name / "1000000000-x.json").write_text("{}")
        (records_dir / name / f".new-json.{DEAD_PID}.0123abcd").write_text("{")
    (records_dir / "2023-01-01").write_text("a file named like a day")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere/1000000000-x.json").write_text("{}")
    os.symlink(tmp_path / "elsewhere", records_dir / "2023-01-02")
    before = everything_under(records_dir)
    assert record_filing.expire(config, now=NOW) == 0
    assert everything_under(records_dir) == before
    assert os.listdir(tmp_path / "elsewhere") == ["1000000000-x.json"]


def test_expire_without_records_or_a_directory(tmp_path):
    assert record_filing.expire(parse(""), now=NOW) == 0
    assert record_filing.expire(config_for(tmp_path / "absent"), now=NOW) == 0
    assert not (tmp_path / "absent").exists()


def test_expire_refuses_a_directory_others_can_write(records_dir):
    records_dir.mkdir()
    records_dir.chmod(0o777)
    with pytest.raises(StoreError):
        record_filing.expire(config_for(records_dir), now=NOW)


# --- lifecycle: a job's end writes its record ----------------------------------------

class Recorded(LeveledLog):
    def at(self, level: str) -> list[str]:
        return [message for seen, message in self.lines if seen == level]


JOB_KEYS = {"job_id": "job.1", "allocated_cpu": "4", "max_rss_bytes": str(2 * GIB),
            "wall_limit_secs": "7200", "cpu_limit_secs": "28800",
            "scratch_limit_bytes": str(10 * GIB), "hs06_job": "40",
            "jobstart_secs": "1700000000"}


@pytest.fixture
def site(tmp_path):
    config = parse(f"[mjf]\nbase_dir = {tmp_path}/base\n[machinefeatures]\nbenchmark = "
                   f"HEPSPEC\n[records]\ndir = {tmp_path}/records\nformat = sss\n")
    store = store_for(config)
    store.create_job("job.1", JOB_KEYS)
    return config, store


@pytest.fixture
def as_root():
    """record_job writes the record itself only as root; a user's is handed in."""
    require(os.geteuid() == 0, "needs root: as a job's user record_job hands the record in")


def read_record(path: str) -> dict:
    return json.loads(Path(path).read_text())


def test_a_record_holds_the_jobs_promise_and_what_it_used(as_root, site, tmp_path):
    config, store = site
    ending = lifecycle.JobEnd("slurm", {"end_time": (1700003600, "the epilog's clock"),
                                        "cpu_secs": (10000.5, "cgroup cpu.stat"),
                                        "peak_memory_bytes": (GIB, "cgroup memory.peak")},
                              user="alice", queue="short")
    log = Recorded()
    path = lifecycle.record_job(config, store, log, "job.1", ending, now=1800000000)
    assert path == f"{tmp_path}/records/2023-11-14/1700003600-job.1.json"
    data = read_record(path)
    assert data["requested"] == {"allocated_cpu": 4, "max_rss_bytes": 2 * GIB,
                                 "wall_limit_secs": 7200, "cpu_limit_secs": 28800,
                                 "scratch_limit_bytes": 10 * GIB, "hs06_job": 40,
                                 "start_time": 1700000000}
    # wall_secs = end_time - jobstart_secs = 1700003600 - 1700000000 = 3600
    # consumption rate = 10000.5 / (3600 * 4)
    assert data["delivered"] == {
        "end_time": {"value": 1700003600, "source": "the epilog's clock"},
        "wall_secs": {"value": 3600, "source": "end_time - jobstart_secs"},
        "cpu_secs": {"value": 10000.5, "source": "cgroup cpu.stat"},
        "peak_memory_bytes": {"value": GIB, "source": "cgroup memory.peak"},
        "consumption_rate": {"value": pytest.approx(10000.5 / 14400),
                             "source": "derived: cpu_secs / (wall_secs * allocated_cpu)"},
    }
    assert data["job_id"] == "job.1" and data["user"] == "alice" and data["queue"] == "short"
    assert data["backend"] == "slurm" and data["node"] == os.uname().nodename
    assert data["benchmark"] == "HEPSPEC"
    assert sorted(os.listdir(Path(path).parent)) == ["1700003600-job.1.json",
                                                     "1700003600-job.1.xml"]
    assert any(path in line for line in log.at("info"))
    assert log.at("error") == [] and log.at("warning") == []
    assert os.path.isdir(store.job_features_dir("job.1"))  # record_job removes nothing


def test_without_an_end_time_the_clock_is_the_end(as_root, site):
    config, store = site
    path = lifecycle.record_job(config, store, Recorded(), "job.1",
                                lifecycle.JobEnd("lsf"), now=1700000500.5)
    data = read_record(path)
    assert data["delivered"]["end_time"] == {"value": 1700000500.5,
                                             "source": "the clock as the job's end ran"}
    assert data["delivered"]["wall_secs"] == {"value": 500.5,
                                              "source": "end_time - jobstart_secs"}
    assert Path(path).name == "1700000500-job.1.json"


def test_a_measured_wall_time_is_kept_and_unknown_values_left_out(as_root, site):
    config, store = site
    ending = lifecycle.JobEnd("standalone", {"end_time": (1700003600, "clock"),
                                             "wall_secs": (3599.25, "mjf run's clock"),
                                             "cpu_secs": (None, "not measured")})
    data = read_record(lifecycle.record_job(config, store, Recorded(), "job.1", ending))
    assert data["delivered"]["wall_secs"] == {"value": 3599.25, "source": "mjf run's clock"}
    assert "cpu_secs" not in data["delivered"] and "consumption_rate" not in data["delivered"]
    assert "user" not in data and "queue" not in data


def test_an_end_before_the_start_gives_no_negative_wall_time(as_root, site):
    config, store = site
    ending = lifecycle.JobEnd("slurm", {"end_time": (1699999000, "a wrong clock")})
    data = read_record(lifecycle.record_job(config, store, Recorded(), "job.1", ending))
    assert data["delivered"]["wall_secs"]["value"] == 0


def test_a_job_without_a_directory_gets_no_record(site, tmp_path):
    config, store = site
    log = Recorded()
    ending = lifecycle.JobEnd("slurm", {"end_time": (1700003600, "clock")})
    assert lifecycle.record_job(config, store, log, "other", ending) is None
    assert not (tmp_path / "records").exists()
    assert log.at("error") == [] and log.at("warning") == []


def test_an_invalid_key_value_is_left_out_with_a_warning(as_root, site, tmp_path):
    config, store = site
    store.create_job("job.2", {**JOB_KEYS, "job_id": "job.2", "allocated_cpu": "four",
                               "max_rss_bytes": "-5"})
    log = Recorded()
    ending = lifecycle.JobEnd("slurm", {"end_time": (1700003600, "clock"),
                                        "cpu_secs": (100, "cgroup")})
    data = read_record(lifecycle.record_job(config, store, log, "job.2", ending))
    assert "allocated_cpu" not in data["requested"]
    assert "max_rss_bytes" not in data["requested"]
    assert data["requested"]["wall_limit_secs"] == 7200
    warnings = log.at("warning")
    assert len(warnings) == 2
    assert any("job.2" in line and "allocated_cpu" in line and "'four'" in line
               for line in warnings)
    assert any("max_rss_bytes" in line for line in warnings)


def test_end_job_writes_the_record_then_removes_the_directory(as_root, site, tmp_path):
    config, store = site
    log = Recorded()
    ending = lifecycle.JobEnd("slurm", {"end_time": (1700003600, "clock")})
    assert lifecycle.end_job(config, store, log, "job.1", ending=ending)
    assert not os.path.exists(store.job_features_dir("job.1"))
    assert [data["job_id"] for data in
            record_reading.read_all(str(tmp_path / "records")).records] == ["job.1"]


def test_an_unwritable_records_directory_does_not_keep_the_jobs_files(site, tmp_path):
    config, store = site
    (tmp_path / "records").write_text("a regular file where the directory should be")
    log = Recorded()
    ending = lifecycle.JobEnd("slurm", {"end_time": (1700003600, "clock")})
    assert lifecycle.end_job(config, store, log, "job.1", ending=ending)
    assert not os.path.exists(os.path.dirname(store.job_features_dir("job.1")))
    errors = log.at("error")
    assert len(errors) == 1 and "job job.1 not recorded" in errors[0]
    assert "\n" not in errors[0]
    assert (tmp_path / "records").read_text().startswith("a regular file")


def test_an_internal_error_in_the_record_does_not_keep_the_jobs_files(site, tmp_path,
                                                                     monkeypatch):
    config, store = site

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(lifecycle, "record_job", broken)
    log = Recorded()
    ending = lifecycle.JobEnd("slurm", {"end_time": (1700003600, "clock")})
    assert lifecycle.end_job(config, store, log, "job.1", ending=ending)
    assert not os.path.exists(store.job_features_dir("job.1"))
    assert log.at("error") == ["job job.1 not recorded: internal error RuntimeError: a bug"]


def test_a_dry_run_writes_no_record_and_removes_nothing(site, tmp_path, capsys):
    config, store = site
    ending = lifecycle.JobEnd("slurm", {"end_time": (1700003600, "clock")})
    assert not lifecycle.end_job(config, store, Recorded(), "job.1", dry_run=True, ending=ending)
    assert capsys.readouterr().out == f"would remove {store.job_features_dir('job.1')}\n"
    assert os.path.isdir(store.job_features_dir("job.1"))
    assert not (tmp_path / "records").exists()


def test_end_job_without_an_ending_or_a_records_dir_writes_no_record(site, tmp_path):
    config, store = site
    assert lifecycle.end_job(config, store, Recorded(), "job.1")
    assert not (tmp_path / "records").exists()
    store.create_job("job.1", JOB_KEYS)
    config.records_dir = None
    ending = lifecycle.JobEnd("slurm", {"end_time": (1700003600, "clock")})
    assert lifecycle.end_job(config, store, Recorded(), "job.1", ending=ending)
    assert not (tmp_path / "records").exists()


# --- defects found while testing, fixed ------------------------------------------------

def test_a_record_whose_delivered_is_not_an_object_is_listed_not_fatal(records_dir):
    (records_dir / "2023-11-14").mkdir(parents=True)
    (records_dir / "2023-11-14/1700000000-x.json").write_text(
        '{"job_id": "x", "delivered": [1]}')
    listing = record_reading.read_all(str(records_dir))
    # Either way is fine, so long as it does not raise: `mjf records` then skips it.
    assert [data["job_id"] for data in listing.records] in (["x"], [])


def test_a_failed_rewrite_leaves_the_existing_record_whole(config, records_dir, monkeypatch):
    record_store.write(config, record())
    day = records_dir / "2023-11-14"
    before = {name: (day / name).read_bytes() for name in os.listdir(day)}
    fake, _ = failing_on_call(os.write, 3, OSError(errno.ENOSPC, "No space left"))
    monkeypatch.setattr(record_store.os, "write", fake)
    with pytest.raises(StoreError):
        record_store.write(config, record())
    monkeypatch.undo()
    assert {name: (day / name).read_bytes() for name in os.listdir(day)} == before


# --- records handed in by a job's user, filed by root (hand_in, ingest) ---------------

@pytest.fixture
def drop_box(as_root, config, records_dir):
    """The records directory with root's drop box, as the first `mjf sync` makes it."""
    assert record_filing.ingest(config, Recorded()) == 0
    incoming = records_dir / record_store.INCOMING
    info = os.lstat(incoming)
    assert stat.S_ISDIR(info.st_mode) and info.st_uid == 0
    assert stat.S_IMODE(info.st_mode) == 0o1733
    return incoming


NOT_A_USERS_FILE = ("not a regular file of one link of a user other than root, of at most "
                    "65536 bytes")


def handed_in_by(uid: int, config, one: Record) -> Path:
    path = Path(record_store.hand_in(config, one))
    os.chown(path, uid, uid)
    return path


def test_without_a_drop_box_nothing_is_handed_in(config, records_dir):
    records_dir.mkdir()
    with pytest.raises(StoreError, match="incoming does not exist"):
        record_store.hand_in(config, record())
    assert os.listdir(records_dir) == []


def test_a_drop_box_that_is_not_roots_is_not_used(as_root, config, records_dir):
    (records_dir / "incoming").mkdir(parents=True)
    (records_dir / "incoming").chmod(0o755)
    with pytest.raises(StoreError, match="is not root's drop box"):
        record_store.hand_in(config, record())
    with pytest.raises(StoreError, match="is not root's drop box"):
        record_filing.ingest(config, Recorded())
    assert os.listdir(records_dir / "incoming") == []


def test_a_handed_in_record_is_filed_with_the_uid_that_handed_it_in(config, records_dir,
                                                                   drop_box):
    said = "the job's jobfeatures/, its user's word (its directory is uid 1001's)"
    path = handed_in_by(OTHER_UID, config, record(requested_source=said))
    assert path.parent == drop_box
    assert path.name.startswith(f"1700006399-1234.0.{os.getpid()}.")
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    log = Recorded()
    assert record_filing.ingest(config, log) == 1
    assert os.listdir(drop_box) == []
    # Root names it: its end, its job, and the uid that handed it in.
    stem = f"1700006399-1234.0~{OTHER_UID}"
    assert sorted(os.listdir(records_dir / "2023-11-14")) == [
        f"{stem}.apel", f"{stem}.json", f"{stem}.xml"]
    (filed,) = record_reading.read_all(str(records_dir)).records
    assert filed["delivered"]["cpu_secs"]["source"] == \
        f"wait4 rusage; handed in by uid {OTHER_UID}"
    assert filed["requested"] == record_json(record())["requested"]
    assert filed["requested_source"] == f"{said}; handed in by uid {OTHER_UID}"
    assert log.at("warning") == [] and log.at("error") == []


def test_what_is_not_a_users_record_is_removed_from_the_drop_box(config, records_dir,
                                                                 drop_box):
    handed_in_by(OTHER_UID, config, record("good"))
    root_owned = Path(record_store.hand_in(config, record("roots")))  # not a user's
    garbage = drop_box / "1700000000-junk.json"
    garbage.write_text("{not json")
    os.chown(garbage, OTHER_UID, OTHER_UID)
    no_source = drop_box / "1700000001-nosource.json"
    no_source.write_text('{"job_id": "x", "delivered": {"cpu_secs": 5}}')
    os.chown(no_source, OTHER_UID, OTHER_UID)
    os.mkfifo(drop_box / "1700000002-fifo.json")
    dead = drop_box / f".new-json.{DEAD_PID}.0123abcd"
    alive = drop_box / f".new-json.{os.getpid()}.0123abcd"
    for temp in (dead, alive):
        temp.write_text("{")
    planted = drop_box / "planted"  # not named as a hand-in
    planted.write_text("{}")
    log = Recorded()
    assert record_filing.ingest(config, log) == 1
    assert os.listdir(drop_box) == [alive.name]
    assert [data["job_id"] for data in record_reading.read_all(str(records_dir)).records] == \
        ["good"]
    # One line for each hand-in removed, naming it and why; one for all that are not.
    warnings = sorted(log.at("warning"), key=lambda line: ("file(s)" in line, line))
    assert len(warnings) == 5, warnings
    prefix = f"{records_dir}/incoming: removed the hand-in "
    assert warnings[0].startswith(f"{prefix}'1700000000-junk.json' of uid {OTHER_UID}: "
                                  "not a record: JSONDecodeError: ")
    assert warnings[1] == (f"{prefix}'1700000001-nosource.json' of uid {OTHER_UID}: not a "
                           "record: ValueError: delivered cpu_secs must be {value, source}")
    assert warnings[2] == f"{prefix}'1700000002-fifo.json': " + NOT_A_USERS_FILE
    assert warnings[3] == f"{prefix}{root_owned.name!r}: " + NOT_A_USERS_FILE
    assert warnings[4] == (f"{records_dir}/incoming: removed 2 file(s) that are not records "
                           f"handed in by a user: {dead.name!r}, 'planted'") or \
        warnings[4] == (f"{records_dir}/incoming: removed 2 file(s) that are not records "
                        f"handed in by a user: 'planted', {dead.name!r}")
    assert not root_owned.exists()


def test_a_handed_in_record_with_an_impossible_job_id_does_not_block_the_others(
        config, records_dir, drop_box):
    bad = drop_box / "1000000000-a.json"  # sorts before every real record
    bad.write_text(json.dumps({"job_id": "a b/c"}))
    os.chown(bad, OTHER_UID, OTHER_UID)
    handed_in_by(OTHER_UID, config, record("good"))
    record_filing.ingest(config, Recorded())
    assert os.listdir(drop_box) == []
    assert [data["job_id"] for data in record_reading.read_all(str(records_dir)).records] == \
        ["good"]


def test_a_real_user_can_hand_in_through_a_drop_box_it_cannot_read(config, records_dir,
                                                                  drop_box, tmp_path):
    """The drop box is 1733: a user may enter it and add files, not list it. Run as a
    real other uid, in a child process (pyfakefs and root would not see the difference)."""
    records_dir.chmod(0o755)
    for parent in records_dir.parents:  # tmp_path's parents: the user must get through
        if parent == Path("/tmp"):
            break
        parent.chmod(parent.stat().st_mode | 0o005)
    def hand_in() -> None:
        assert not os.access(drop_box, os.R_OK)
        record_store.hand_in(config, record("users"))

    as_other_user(hand_in)
    (handed,) = os.listdir(drop_box)
    assert os.stat(drop_box / handed).st_uid == OTHER_UID
    assert record_filing.ingest(config, Recorded()) == 1
    assert [data["job_id"] for data in record_reading.read_all(str(records_dir)).records] == \
        ["users"]


# --- the drop box cannot be used against root or other users ---------------------------

ATTACKER_UID, VICTIM_UID = 54322, 54323


def planted(drop_box: Path, name: str, text: str | bytes, uid: int) -> Path:
    """A file a user of ``uid`` put in the drop box."""
    path = drop_box / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    os.chown(path, uid, uid)
    return path


def forged(data: dict, **changes) -> str:
    """A record's JSON, changed as a user would: delivered values given as plain numbers
    become ``{"value": ..., "source": ...}``."""
    out = json.loads(json.dumps(data))
    for name, value in changes.items():
        out.setdefault("delivered", {})[name] = {"value": value, "source": "forged"}
    return json.dumps(out)


def test_a_hand_in_never_replaces_a_record_root_wrote(config, records_dir, drop_box):
    """A user copies root's world-readable record, changes the figures and hands it in
    with the same job id and end second: root's record stays as it is."""
    path = Path(record_store.write(config, record("4242")))
    day = path.parent
    before = {name: (day / name).read_bytes() for name in os.listdir(day)}
    original = json.loads(path.read_text())
    planted(drop_box, path.name.replace(".json", ".999.json"),
            forged(original, cpu_secs=1.0, wall_secs=1), ATTACKER_UID)
    log = Recorded()
    assert record_filing.ingest(config, log) == 0
    assert {name: (day / name).read_bytes() for name in os.listdir(day)} == before
    assert os.listdir(drop_box) == []
    (warning,) = log.at("warning")
    assert f"of uid {ATTACKER_UID}: job '4242' ended here under root's hooks: its record " \
           f"is root's, not uid {ATTACKER_UID}'s" in warning
    assert [data["job_id"] for data in record_reading.read_all(str(records_dir)).records] == \
        ["4242"]


def test_a_hand_in_never_replaces_another_users_record(config, records_dir, drop_box):
    """A user's record (handed in, filed) is not replaced by another user's copy of it,
    nor by a second hand-in of its own: each is filed under a name of its own uid, never
    over one that is there."""
    handed_in_by(VICTIM_UID, config, record("vm#1.0#1795319385"))
    assert record_filing.ingest(config, Recorded()) == 1
    day = records_dir / "2023-11-14"
    stem = f"1700006399-vm#1.0#1795319385~{VICTIM_UID}"
    victims = {name: (day / name).read_bytes() for name in os.listdir(day)}
    assert sorted(victims) == [f"{stem}.apel", f"{stem}.json", f"{stem}.xml"]
    copied = json.loads((day / f"{stem}.json").read_text())
    for uid in (ATTACKER_UID, VICTIM_UID):
        planted(drop_box, f"1700006399-vm#1.0#1795319385.{uid}.json",
                forged(copied, cpu_secs=1.0), uid)
    log = Recorded()
    assert record_filing.ingest(config, log) == 1  # the attacker's, under its own name
    assert os.listdir(drop_box) == []
    for name, data in victims.items():
        assert (day / name).read_bytes() == data, name
    attackers = json.loads((day / f"1700006399-vm#1.0#1795319385~{ATTACKER_UID}.json")
                           .read_text())
    assert attackers["delivered"]["cpu_secs"]["source"] == \
        f"forged; handed in by uid {ATTACKER_UID}"
    (warning,) = log.at("warning")  # the victim's second one: filed already
    assert f"of uid {VICTIM_UID}: job 'vm#1.0#1795319385' handed in by uid {VICTIM_UID} " \
           f"with that end is filed already ({stem}.json)" in warning


def test_a_filing_killed_before_its_json_is_completed_by_the_next(config, records_dir,
                                                                   drop_box):
    """What a filing killed after its .xml left is no record: the next filing of that
    hand-in replaces it (only the JSON, linked last, makes a record)."""
    handed_in_by(VICTIM_UID, config, record("7"))
    day = records_dir / "2023-11-14"
    day.mkdir()
    (day / f"1700006399-7~{VICTIM_UID}.xml").write_text("<half")
    assert record_filing.ingest(config, Recorded()) == 1
    assert (day / f"1700006399-7~{VICTIM_UID}.xml").read_text().startswith("<?xml")


@pytest.fixture
def site_with_records(tmp_path, records_dir):
    config = parse(f"[mjf]\nbase_dir = {tmp_path}/base\n[records]\ndir = {records_dir}\n"
                   "format = sss\n")
    (tmp_path / "base/jobs").mkdir(parents=True)
    assert record_filing.ingest(config, Recorded()) == 0  # makes the drop box
    return config, tmp_path / "base/jobs", records_dir / "incoming"


@pytest.mark.parametrize("entry", ["1234", f".old-1234.{DEAD_PID}.0123abcd"])
def test_a_hand_in_for_a_job_roots_hooks_run_here_is_refused(as_root, site_with_records,
                                                              entry):
    """While a root hook's job directory for the job is there (or in the trash of its
    end), a user's hand-in for it is refused: its record will be root's."""
    config, jobs, drop_box = site_with_records
    (jobs / entry).mkdir()
    planted(drop_box, "1700006399-1234.1.json", json.dumps(record_json(record("1234"))),
            ATTACKER_UID)
    handed_in_by(VICTIM_UID, config, record("1235"))
    log = Recorded()
    assert record_filing.ingest(config, log) == 1
    assert [data["job_id"] for data in record_reading.read_all(config.records_dir).records] == \
        ["1235"]
    (warning,) = log.at("warning")
    assert "job '1234' " in warning and "under root's hooks" in warning


def test_a_hand_in_for_a_job_of_a_users_directory_is_filed(as_root, site_with_records):
    """A job directory its user made (a user's `mjf run` in a base_dir it may write) is no
    root hook's: its hand-in is filed."""
    config, jobs, _ = site_with_records
    (jobs / "1234").mkdir()
    os.chown(jobs / "1234", VICTIM_UID, VICTIM_UID)
    handed_in_by(VICTIM_UID, config, record("1234"))
    assert record_filing.ingest(config, Recorded()) == 1


def test_roots_notes_of_the_jobs_it_recorded_go_with_keep_days(records_dir):
    config = config_for(records_dir, keep_days=3)
    record_store.write(config, record("a"))
    (note,) = (records_dir / "ended").glob("*/a")
    assert stat.S_IMODE(os.stat(records_dir / "ended").st_mode) == 0o700
    today = time.time()
    record_filing.expire(config, now=today + 3 * DAY)  # the record (of 2023) goes
    assert note.exists()  # its day is not wholly before the cutoff yet
    record_filing.expire(config, now=today + 4 * DAY + 1)
    assert os.listdir(records_dir / "ended") == []


# Hand-ins that make a conversion raise, or are no record: (label, the JSON text).
GOOD = record_json(record("poison"))


def _with(path: tuple[str, ...], value_text: str) -> str:
    """GOOD's JSON with the value at ``path`` replaced by ``value_text`` (raw JSON)."""
    marker = "\"@@MARK@@\""
    data = json.loads(json.dumps(GOOD))
    target = data
    for key in path[:-1]:
        target = target.setdefault(key, {})
    target[path[-1]] = "@@MARK@@"
    return json.dumps(data).replace(marker, value_text)


END = ("delivered", "end_time", "value")
POISONED = [
    ("end-1e20", _with(END, "1e20")),
    ("end-400-digits", _with(END, "9" * 400)),
    ("end-5000-digits", _with(END, "9" * 5000)),
    ("end-nan", _with(END, "NaN")),
    ("end-infinity", _with(END, "Infinity")),
    ("end-negative", _with(END, "-1")),
    ("end-1e308", _with(END, "1e308")),
    ("end-year-10000", _with(END, "253402300800")),
    ("end-text", _with(END, '"1700006399"')),
    ("end-true", _with(END, "true")),
    ("end-list", _with(END, "[1700006399]")),
    ("end-missing", json.dumps({**GOOD, "delivered": {
        k: v for k, v in GOOD["delivered"].items() if k != "end_time"}})),
    ("cpu-400-digits", _with(("delivered", "cpu_secs", "value"), "9" * 400)),
    ("memory-1e300", _with(("delivered", "peak_memory_bytes", "value"), "1e300")),
    ("cores-400-digits", _with(("requested", "allocated_cpu"), "9" * 400)),
    ("cores-2**64", _with(("requested", "allocated_cpu"), str(2**64))),
    ("wall-limit-nan", _with(("requested", "wall_limit_secs"), "NaN")),
    ("start-1e20", _with(("requested", "start_time"), "1e20")),
    ("source-number", _with(("delivered", "cpu_secs", "source"), "5")),
    ("delivered-list", _with(("delivered",), "[1]")),
    ("requested-deep", _with(("requested",), "[" * 30000 + "]" * 30000)),
    ("benchmark-deep", _with(("benchmark",), "[" * 900 + "]" * 900)),
    ("benchmark-number", _with(("benchmark",), "1")),
    ("user-object", _with(("user",), "{}")),
    ("job-id-number", _with(("job_id",), "42")),
    ("job-id-path", _with(("job_id",), '"../../etc"')),
    ("job-id-long", _with(("job_id",), json.dumps("x" * 201))),
    ("job-id-control", _with(("job_id",), '"a\\u001b[31mb"')),
    ("not-an-object", "[1, 2]"),
    ("deep", "[" * 30000 + "]" * 30000),  # within a record's 64 KiB: json's RecursionError
    ("not-json", "{"),
    ("empty", ""),
]


@pytest.mark.parametrize("label, text", POISONED, ids=[label for label, _ in POISONED])
def test_a_poisoned_hand_in_is_removed_with_one_line_and_filing_goes_on(
        config, records_dir, drop_box, label, text):
    # Named to sort (and so be looked at) first.
    name = "1000000000-poison.1.json"
    planted(drop_box, name, text, ATTACKER_UID)
    handed_in_by(VICTIM_UID, config, record("good"))
    log = Recorded()
    assert record_filing.ingest(config, log) == 1
    assert os.listdir(drop_box) == []
    (warning,) = log.at("warning")
    assert warning.startswith(f"{records_dir}/incoming: removed the hand-in {name!r} of uid "
                              f"{ATTACKER_UID}: "), warning
    assert "\n" not in warning and "\x1b" not in warning and len(warning) < 600
    assert log.at("error") == []
    assert [data["job_id"] for data in record_reading.read_all(str(records_dir)).records] == \
        ["good"]
    # And the next run has nothing left to stumble on.
    assert record_filing.ingest(config, Recorded()) == 0


def test_planted_hidden_names_keep_no_record_out(config, records_dir, drop_box, monkeypatch):
    """10,000 hidden files ``.aN`` (they sort before every hand-in) no longer stop filing:
    they are removed, and the victim's record is filed in the same run. (Removing them all
    must not depend on how busy the machine is: the time budget is not what is tested.)"""
    monkeypatch.setattr(record_filing, "JUNK_BUDGET_SECS", 3600.0)
    for number in range(10000):
        planted(drop_box, f".a{number}", b"", ATTACKER_UID)
    handed_in_by(VICTIM_UID, config, record("victim"))
    log = Recorded()
    assert record_filing.ingest(config, log) == 1
    assert os.listdir(drop_box) == []
    (warning,) = log.at("warning")
    assert "removed 10000 file(s) that are not records handed in by a user" in warning


def test_one_users_flood_of_hand_ins_keeps_no_other_users_record_out(config, records_dir,
                                                                     drop_box):
    """An attacker hands in 10,000 (more than one run looks at of a uid) named to sort
    before the victim's: the victim's is filed in the first run; of the attacker's, PER_UID
    are looked at a run and the rest wait, each run."""
    for number in range(10000):
        planted(drop_box, f"1000000000-flood{number}.1.json", b"{", ATTACKER_UID)
    handed_in_by(VICTIM_UID, config, record("victim"))
    log = Recorded()
    assert record_filing.ingest(config, log) == 1
    assert [data["job_id"] for data in record_reading.read_all(str(records_dir)).records] == \
        ["victim"]
    assert len(os.listdir(drop_box)) == 10000 - record_filing.PER_UID
    # One line for each of the first few, then their count: no flood of lines either.
    warnings = log.at("warning")
    assert len(warnings) == 11
    assert warnings[-1].endswith(f"and {record_filing.PER_UID - 10} more hand-in(s) removed")


def test_a_hand_in_that_cannot_be_written_stays_and_the_others_are_filed(
        config, records_dir, drop_box, monkeypatch):
    """A write that fails (a full disk) is not the hand-in's fault: it stays for the next
    run, the others are still filed, and the run says what was left."""
    handed_in_by(VICTIM_UID, config, record("first", end=1700006399))
    handed_in_by(VICTIM_UID, config, record("second", end=1600000000))
    real = record_filing._link_whole
    calls = []

    def full_once(directory, stem, files):
        calls.append(stem)
        if len(calls) == 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(directory, stem, files)

    monkeypatch.setattr(record_filing, "_link_whole", full_once)
    with pytest.raises(StoreError, match=r"1 handed-in record\(s\) not filed, left for the "
                                         r"next run: .*No space left on device"):
        record_filing.ingest(config, Recorded())
    assert len(os.listdir(drop_box)) == 1
    monkeypatch.undo()
    assert record_filing.ingest(config, Recorded()) == 1
    assert sorted(data["job_id"] for data in
                  record_reading.read_all(str(records_dir)).records) == ["first", "second"]


def test_a_real_user_cannot_replace_roots_record_through_the_drop_box(config, records_dir,
                                                                      drop_box):
    """As a real other uid (a child process): read root's record, change it, hand it in
    with hand_in itself. Root's record stays; the hand-in is removed."""
    records_dir.chmod(0o755)
    for parent in records_dir.parents:
        if parent == Path("/tmp"):
            break
        parent.chmod(parent.stat().st_mode | 0o005)
    path = Path(record_store.write(config, record("4243")))
    before = path.read_bytes()
    def forge() -> None:
        from mjf_hooks.job_record import record_from_json

        stolen = record_from_json(json.loads(path.read_text()))
        stolen.cpu_secs = 1.0
        record_store.hand_in(config, stolen)

    as_other_user(forge)
    assert len(os.listdir(drop_box)) == 1
    log = Recorded()
    assert record_filing.ingest(config, log) == 0
    assert path.read_bytes() == before
    assert os.listdir(drop_box) == []
    assert "its record is root's" in log.at("warning")[0]


# --- the bounds of a record: no conversion of its numbers can raise -------------------

def test_a_stored_record_beyond_the_bounds_is_skipped_not_fatal(records_dir):
    """`mjf records` (read_all, then record_from_json, figures, summary) over records
    another version or a hand edit left: none of them raises."""
    from mjf_hooks.job_record import figures, record_from_json, summary

    day = records_dir / "2023-11-14"
    day.mkdir(parents=True)
    for label, text in POISONED:
        (day / f"1700000000-{label}.json").write_text(text)
    (day / "1700000001-good.json").write_text(json.dumps({**GOOD, "job_id": "good"}))
    found = []
    for data in record_reading.read_all(str(records_dir)).records:
        try:
            found.append(record_from_json(data))
        except (ValueError, TypeError, RecursionError):
            continue
    for one in found:
        figures(one)
        sss_xml(one)
    summary(found)
    assert "good" in {one.job_id for one in found}


def test_a_value_no_job_reaches_is_left_out_of_a_record_not_the_record(as_root, site):
    config, store = site
    log = Recorded()
    ending = lifecycle.JobEnd("htcondor", {"end_time": (1e20, "a broken clock"),
                                           "peak_memory_bytes": (2**70, "a broken ad"),
                                           "cpu_secs": (100.0, "cgroup")})
    path = lifecycle.record_job(config, store, log, "job.1", ending, now=1700003600)
    data = read_record(path)
    assert data["delivered"]["end_time"] == {"value": 1700003600,
                                             "source": "the clock as the job's end ran"}
    assert "peak_memory_bytes" not in data["delivered"]
    assert data["delivered"]["cpu_secs"]["value"] == 100.0
    warnings = log.at("warning")
    assert len(warnings) == 2
    assert any("end_time from a broken clock must be a number from 0 to 253402300799, not 1e+20"
               in line for line in warnings)
