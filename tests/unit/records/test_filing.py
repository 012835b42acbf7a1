"""`mjf sync`'s part: old records expired, and records handed in by jobs' users filed as
root's - never against root or another user."""

from __future__ import annotations

import errno
import json
import os
import stat
import time
from pathlib import Path

import pytest

from mjf_hooks import lifecycle
from mjf_hooks.config import parse
from mjf_hooks.errors import StoreError
from mjf_hooks.records import filing as record_filing
from mjf_hooks.records import reading as record_reading
from mjf_hooks.records import store as record_store
from mjf_hooks.records.job import record_json, sss_xml
from tests.unit.records.support import (
    ATTACKER_UID,
    DAY,
    DEAD_PID,
    GOOD,
    NOT_A_USERS_FILE,
    NOW,
    OTHER_UID,
    POISONED,
    VICTIM_UID,
    Recorded,
    as_other_user,
    config_for,
    days,
    everything_under,
    forged,
    handed_in_by,
    planted,
    read_record,
    record,
)


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
        from mjf_hooks.records.job import record_from_json

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


def test_a_stored_record_beyond_the_bounds_is_skipped_not_fatal(records_dir):
    """`mjf records` (read_all, then record_from_json, figures, summary) over records
    another version or a hand edit left: none of them raises."""
    from mjf_hooks.records.job import figures, record_from_json, summary

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
