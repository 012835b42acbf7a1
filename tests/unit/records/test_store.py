"""The records directory: a record written whole or not at all, in its UTC day, with its
modes; directories others could write refused."""

from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from mjf_hooks.config import parse
from mjf_hooks.errors import StoreError
from mjf_hooks.records import reading as record_reading
from mjf_hooks.records import store as record_store
from mjf_hooks.records.job import apel, record_json, sss_xml
from mjf_hooks.store import job_dir_name
from tests.conftest import require
from tests.unit.records.support import (
    OTHER_UID,
    Recorded,
    config_for,
    days,
    everything_under,
    failing_on_call,
    read_record,
    record,
)


def test_writing_a_record_loads_neither_the_reading_nor_the_filing(tmp_path):
    """An end hook writes a record and is measured against a bare interpreter start: what
    reads records (`mjf records`) and files hand-ins (`mjf sync`) is not its to load."""
    (tmp_path / "records").mkdir()
    conf = tmp_path / "mjf.conf"
    conf.write_text(f"[records]\ndir = {tmp_path}/records\nformat = sss, apel\nsite = T\n")
    code = ("import sys\nfrom mjf_hooks import config\n"
            "from mjf_hooks.records import store as record_store\n"
            "from mjf_hooks.records.job import Record\n"
            f"site = config.load({str(conf)!r})\n"
            "print(record_store.write(site, Record('5', end_time=1700000000.0, cpu_secs=60.0,\n"
            "    sources={'end_time': 'test', 'cpu_secs': 'test'})))\n"
            "print(sorted(name for name in sys.modules if name.startswith('mjf_hooks.records')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60)
    assert result.stdout.splitlines() == [f"{tmp_path}/records/2023-11-14/1700000000-5.json",
                                          "['mjf_hooks.records', 'mjf_hooks.records.job', "
                                          "'mjf_hooks.records.store']"], result.stderr


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
