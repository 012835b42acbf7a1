"""`mjf_hooks.jobstatus`: the draft-0.99 $JOBSTATUS values, updates, and the lock on used_CPU.

The lock tests use real processes on a real filesystem (tmp_path): POSIX record locks
are a process's, and pyfakefs has none.
"""

import errno
import inspect
import os
import stat
import subprocess
import sys
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mjf_hooks import jobstatus
from mjf_hooks.jobstatus import InvalidValue, LockTimeout, StatusError
from tests import lock_holder

T0 = 1795000000  # 2026-11-18: a plausible UNIX time

# --- parse and format_value -----------------------------------------------------------

KEYS_OF_KIND = {kind: [key for key, value in jobstatus.KEYS.items() if value == kind]
                for kind in set(jobstatus.KEYS.values())}


def test_the_keys_are_the_drafts_in_its_order():
    assert list(jobstatus.KEYS) == [
        "used_CPU", "last_job_start", "first_exp_job_end", "last_exp_job_end",
        "last_max_job_end", "add_uncom_time", "add_final_exp_waste", "can_postpone_last_job",
        "priority_factor"]
    assert jobstatus.LOCK_KEY == "used_CPU"


@pytest.mark.parametrize(("key", "text", "value"), [
    ("used_CPU", "0", 0), ("used_CPU", "6", 6), ("used_CPU", "6\n", 6), ("used_CPU", "007", 7),
    ("last_job_start", str(T0), T0), ("last_job_start", f"{T0}\n", T0),
    ("first_exp_job_end", "946684800", 946684800),  # 2000-01-01, the earliest
    ("last_max_job_end", "4102444800", 4102444800),  # 2100-01-01, the latest
    ("add_uncom_time", "0", 0), ("add_final_exp_waste", "123456789", 123456789),
    ("add_uncom_time", "9" * 18, 10**18 - 1),
    ("can_postpone_last_job", "True", True), ("can_postpone_last_job", "False", False),
    ("can_postpone_last_job", "True\n", True),
    ("priority_factor", "5", 5), ("priority_factor", "-5", -5), ("priority_factor", "-0", 0),
    ("priority_factor", "0\n", 0), ("priority_factor", "-" + "9" * 18, -(10**18 - 1)),
])
def test_parse_accepts_each_kinds_values(key, text, value):
    parsed = jobstatus.parse(key, text)
    assert parsed == value and type(parsed) is type(value)


@pytest.mark.parametrize(("key", "text"), [
    # Spaces, signs, exponents, fractions, other digits: what int() or float() would take.
    ("used_CPU", " 6"), ("used_CPU", "6 "), ("used_CPU", "\t6"), ("used_CPU", "6\r\n"),
    ("used_CPU", "6\n\n"), ("used_CPU", "\n"), ("used_CPU", ""), ("used_CPU", "1e3"),
    ("used_CPU", "+5"), ("used_CPU", "-1"), ("used_CPU", ".0"), ("used_CPU", "6.0"),
    ("used_CPU", "1_000"), ("used_CPU", "0x10"), ("used_CPU", "٣"), ("used_CPU", "²"),
    ("used_CPU", "\uff16"), ("used_CPU", "9" * 19), ("used_CPU", "True"),
    ("add_uncom_time", "-1"), ("add_final_exp_waste", "1.5"), ("add_uncom_time", "\uff11"),
    # Times: seconds between 2000 and 2100 only (not milliseconds, not a duration).
    ("last_job_start", "946684799"), ("last_job_start", "4102444801"),
    ("last_job_start", f"{T0}000"), ("last_exp_job_end", "3600"), ("first_exp_job_end", "0"),
    ("last_max_job_end", f"-{T0}"), ("last_job_start", f"{T0}.5"), ("last_job_start", "1e9"),
    # Booleans: exactly True or False.
    ("can_postpone_last_job", "true"), ("can_postpone_last_job", "TRUE"),
    ("can_postpone_last_job", "1"), ("can_postpone_last_job", "0"),
    ("can_postpone_last_job", "yes"), ("can_postpone_last_job", " True"),
    ("can_postpone_last_job", "True\n\n"), ("can_postpone_last_job", ""),
    # Integers: an optional minus, digits.
    ("priority_factor", "+5"), ("priority_factor", "-"), ("priority_factor", "--5"),
    ("priority_factor", "5-"), ("priority_factor", "1e3"), ("priority_factor", " -5"),
    ("priority_factor", "-\u0665"), ("priority_factor", "True"),
    ("priority_factor", "-" + "9" * 19),
])
def test_parse_rejects_what_is_not_the_kinds(key, text):
    with pytest.raises(InvalidValue, match=key):
        jobstatus.parse(key, text)


@pytest.mark.parametrize("key", ["used_cpu", "USED_CPU", "allocated_cpu", "", "__class__"])
def test_parse_and_format_value_reject_unknown_keys(key):
    with pytest.raises(InvalidValue, match="is not a \\$JOBSTATUS key"):
        jobstatus.parse(key, "1")
    with pytest.raises(InvalidValue, match="is not a \\$JOBSTATUS key"):
        jobstatus.format_value(key, 1)


def test_a_rejected_value_is_named_briefly():
    with pytest.raises(InvalidValue) as raised:
        jobstatus.parse("used_CPU", "x" * 10_000)
    assert len(str(raised.value)) < 200 and "a number of cores" in str(raised.value)


@pytest.mark.parametrize(("key", "value", "content"), [
    ("used_CPU", 6, "6"), ("used_CPU", "6", "6"), ("used_CPU", "6\n", "6"),
    ("used_CPU", "006", "6"), ("last_job_start", T0, str(T0)),
    ("last_job_start", str(T0), str(T0)), ("add_uncom_time", 0, "0"),
    ("can_postpone_last_job", True, "True"), ("can_postpone_last_job", False, "False"),
    ("can_postpone_last_job", "False", "False"), ("priority_factor", -3, "-3"),
    ("priority_factor", "-0", "0"), ("priority_factor", "12", "12"),
])
def test_format_value_gives_the_canonical_file_content(key, value, content):
    assert jobstatus.format_value(key, value) == content


@pytest.mark.parametrize(("key", "value"), [
    # bool is an int to Python, not to the draft; and an int is not a boolean.
    ("used_CPU", True), ("priority_factor", False), ("add_uncom_time", True),
    ("last_job_start", True), ("can_postpone_last_job", 1), ("can_postpone_last_job", 0),
    ("can_postpone_last_job", "true"), ("can_postpone_last_job", None),
    ("used_CPU", 6.0), ("used_CPU", -1), ("used_CPU", 10**19), ("used_CPU", "1e3"),
    ("used_CPU", b"6"), ("used_CPU", [6]), ("last_job_start", T0 * 1000),
    ("last_job_start", 3600), ("last_job_start", float(T0)), ("priority_factor", "+5"),
    ("priority_factor", 1.5), ("add_final_exp_waste", -5),
])
def test_format_value_rejects_what_is_not_the_kinds(key, value):
    with pytest.raises(InvalidValue, match=key):
        jobstatus.format_value(key, value)


# Text that is often a valid value of some kind, and often nearly one.
_ALMOST = st.one_of(
    st.text(),
    st.text(alphabet="0123456789-+.e \n\tTrueFalse٣²", max_size=25),
    st.from_regex(r"-?[0-9]{1,20}\n?", fullmatch=True),
    st.integers(min_value=jobstatus.EARLIEST_TIME - 5, max_value=jobstatus.LATEST_TIME + 5)
    .map(str),
    st.sampled_from(["True", "False", "True\n", "False\n", "true", "None"]),
)


@settings(max_examples=400, deadline=None)
@given(key=st.sampled_from(list(jobstatus.KEYS)), text=_ALMOST)
def test_parse_raises_only_invalid_value_and_format_round_trips(key, text):
    try:
        value = jobstatus.parse(key, text)
    except InvalidValue:
        with pytest.raises(InvalidValue):
            jobstatus.format_value(key, text)  # a pilot's text: refused alike
        return
    kind = jobstatus.KEYS[key]
    assert isinstance(value, bool) == (kind == jobstatus.BOOLEAN)
    content = jobstatus.format_value(key, value)
    assert content == jobstatus.format_value(key, text)  # the Python value or its text
    assert jobstatus.parse(key, content) == value  # and back
    assert jobstatus.format_value(key, jobstatus.parse(key, content)) == content
    assert content.isascii() and "\n" not in content and len(content) <= 20


# --- set_problems ---------------------------------------------------------------------

@pytest.mark.parametrize(("values", "allocated", "expected"), [
    ({}, None, []),
    ({"used_CPU": 4}, 4, []),
    ({"used_CPU": 4}, None, []),  # the bound unknown: not checked
    ({"used_CPU": 5}, 4, ["used_CPU 5 is more than the job's allocated_cpu 4"]),
    ({"first_exp_job_end": T0, "last_exp_job_end": T0, "last_max_job_end": T0}, None, []),
    ({"first_exp_job_end": T0 + 1, "last_exp_job_end": T0}, None,
     [f"first_exp_job_end {T0 + 1} is after last_exp_job_end {T0}"]),
    ({"last_exp_job_end": T0 + 1, "last_max_job_end": T0}, None,
     [f"last_exp_job_end {T0 + 1} is after last_max_job_end {T0}"]),
    # first after max, with no last between them: not compared (the draft orders pairs).
    ({"first_exp_job_end": T0 + 1, "last_max_job_end": T0}, None, []),
    ({"used_CPU": 9, "first_exp_job_end": T0 + 2, "last_exp_job_end": T0 + 1,
      "last_max_job_end": T0}, 8,
     ["used_CPU 9 is more than the job's allocated_cpu 8",
      f"first_exp_job_end {T0 + 2} is after last_exp_job_end {T0 + 1}",
      f"last_exp_job_end {T0 + 1} is after last_max_job_end {T0}"]),
])
def test_set_problems(values, allocated, expected):
    assert jobstatus.set_problems(values, allocated) == expected


def reported(**values):
    status = jobstatus.Status()
    status.values = dict(values)
    return status


def test_what_no_job_can_have_done_is_refused():
    """A pilot's word is bounded by its job's: no payload started before the job, no more
    uncommitted CPU time than its cores had since, no more waste at its end than its cores
    have until its wall limit (each a problem, its value not taken)."""
    # 4 cores, started 1000 s ago, its wall limit 500 s ahead (a second more each: times
    # are whole seconds).
    within = reported(used_CPU=4, last_job_start=T0 - 1000, add_uncom_time=4004,
                      add_final_exp_waste=2004)
    jobstatus.bound_by_job(within, 4, T0 - 1000, T0 + 500, T0)
    assert within.problems == {} and len(within.values) == 4
    beyond = reported(used_CPU=5, last_job_start=T0 - 1001, add_uncom_time=4005,
                      add_final_exp_waste=2005)
    jobstatus.bound_by_job(beyond, 4, T0 - 1000, T0 + 500, T0)
    assert beyond.values == {}
    assert beyond.problems == {
        "used_CPU": "used_CPU 5 is more than the job's allocated_cpu 4",
        "last_job_start": f"last_job_start {T0 - 1001} is before the job's jobstart_secs "
                          f"{T0 - 1000}",
        "add_uncom_time": "add_uncom_time 4005 is more than the job's 4 allocated_cpu give "
                          "in its 1001 s since jobstart_secs (4004)",
        "add_final_exp_waste": "add_final_exp_waste 2005 is more than the job's 4 "
                               "allocated_cpu give in its 501 s to its wall limit (2004)"}
    # What is not known bounds nothing.
    unknown = reported(used_CPU=5, last_job_start=T0 - 1001, add_uncom_time=10**17,
                       add_final_exp_waste=10**17)
    jobstatus.bound_by_job(unknown, None, None, None, T0)
    assert unknown.problems == {} and len(unknown.values) == 4


# --- update and read ------------------------------------------------------------------

@pytest.fixture
def directory(tmp_path, monkeypatch):
    """An empty $JOBSTATUS; no $JOBFEATURES (so no allocated_cpu bound unless given)."""
    path = tmp_path / "jobstatus"
    path.mkdir()
    monkeypatch.delenv("JOBFEATURES", raising=False)
    monkeypatch.delenv("JOBSTATUS", raising=False)
    return path


def files(path):
    """Every file in the directory: name -> (content, inode)."""
    return {entry.name: (entry.read_text(), entry.stat().st_ino) for entry in path.iterdir()}


def contents(path):
    return {name: content for name, (content, _) in files(path).items()}


def test_update_writes_each_key_and_read_gives_the_set(directory):
    jobstatus.update({"used_CPU": 6, "last_job_start": T0, "can_postpone_last_job": True,
                      "priority_factor": "-2", "add_uncom_time": "10\n"}, str(directory))
    assert contents(directory) == {"used_CPU": "6", "last_job_start": str(T0),
                                   "can_postpone_last_job": "True", "priority_factor": "-2",
                                   "add_uncom_time": "10"}
    status = jobstatus.read(str(directory))
    assert status.values == {"used_CPU": 6, "last_job_start": T0, "can_postpone_last_job": True,
                             "priority_factor": -2, "add_uncom_time": 10}
    assert status.raw["priority_factor"] == "-2" and status.problems == {}
    assert status.reported


def test_an_empty_directory_reports_nothing(directory):
    status = jobstatus.read(str(directory))
    assert (status.values, status.raw, status.problems, status.reported) == ({}, {}, {}, False)


def test_the_first_update_must_set_used_cpu_and_a_refused_one_leaves_nothing(directory):
    with pytest.raises(InvalidValue, match="used_CPU must be set with the first update"):
        jobstatus.update({"last_job_start": T0}, str(directory))
    assert os.listdir(directory) == []  # not even the used_CPU it locked
    assert not jobstatus.read(str(directory)).reported
    jobstatus.update({"used_CPU": 1}, str(directory))
    jobstatus.update({"last_job_start": T0}, str(directory))  # later ones need not
    assert contents(directory) == {"used_CPU": "1", "last_job_start": str(T0)}


def test_later_updates_merge_and_none_removes_a_key(directory):
    jobstatus.update({"used_CPU": 2, "last_job_start": T0, "priority_factor": 3},
                     str(directory))
    before = files(directory)
    jobstatus.update({"used_CPU": 4, "priority_factor": None}, str(directory))
    assert contents(directory) == {"used_CPU": "4", "last_job_start": str(T0)}
    # An untouched key is not rewritten; a changed one is replaced, not written into.
    assert files(directory)["last_job_start"] == before["last_job_start"]
    assert files(directory)["used_CPU"][1] != before["used_CPU"][1]
    jobstatus.update({"add_uncom_time": None}, str(directory))  # absent already: fine
    assert jobstatus.read(str(directory)).values == {"used_CPU": 4, "last_job_start": T0}


def test_used_cpu_cannot_be_removed(directory):
    jobstatus.update({"used_CPU": 2}, str(directory))
    with pytest.raises(InvalidValue, match="used_CPU cannot be removed"):
        jobstatus.update({"used_CPU": None, "last_job_start": T0}, str(directory))
    assert contents(directory) == {"used_CPU": "2"}


def test_used_cpu_above_allocated_cpu_is_refused_and_nothing_written(directory, tmp_path,
                                                                     monkeypatch):
    jobstatus.update({"used_CPU": 2, "last_job_start": T0}, str(directory), allocated_cpu=4)
    before = files(directory)
    with pytest.raises(InvalidValue, match="used_CPU 5 is more than the job's allocated_cpu 4"):
        jobstatus.update({"used_CPU": 5, "last_job_start": T0 + 1, "priority_factor": 1},
                         str(directory), allocated_cpu=4)
    assert files(directory) == before
    # By default the bound is the job's $JOBFEATURES/allocated_cpu.
    features = tmp_path / "jobfeatures"
    features.mkdir()
    (features / "allocated_cpu").write_text("4\n")
    monkeypatch.setenv("JOBFEATURES", str(features) + "/")
    assert jobstatus.allocated_cpu_from_environ() == 4
    with pytest.raises(InvalidValue, match="allocated_cpu 4"):
        jobstatus.update({"used_CPU": 5}, str(directory))
    jobstatus.update({"used_CPU": 4}, str(directory))
    assert contents(directory)["used_CPU"] == "4"
    # Where it cannot be read, there is no bound.
    (features / "allocated_cpu").write_text("many")
    jobstatus.update({"used_CPU": 64}, str(directory))
    monkeypatch.setenv("JOBFEATURES", "relative/jobfeatures")
    assert jobstatus.allocated_cpu_from_environ() is None


@pytest.mark.parametrize("values", [
    {"used_CPU": 3, "first_exp_job_end": T0 + 10},  # after last_exp_job_end (T0 + 5)
    {"used_CPU": 3, "last_max_job_end": T0},  # before last_exp_job_end
    {"used_CPU": 3, "priority_factor": 1.5},
    {"used_CPU": 3, "bogus": 1},
    {"used_CPU": "three"},
    {"used_CPU": 3, "last_job_start": 0},
])
def test_a_failed_update_changes_nothing(directory, values):
    jobstatus.update({"used_CPU": 2, "last_exp_job_end": T0 + 5}, str(directory))
    before = files(directory)
    with pytest.raises(InvalidValue):
        jobstatus.update(values, str(directory))
    assert files(directory) == before
    assert sorted(os.listdir(directory)) == ["last_exp_job_end", "used_CPU"]


def test_a_write_that_fails_changes_nothing_and_leaves_no_temporary_file(directory,
                                                                         monkeypatch):
    jobstatus.update({"used_CPU": 2, "last_job_start": T0}, str(directory))
    before = files(directory)
    real_write = os.write

    def full_disk(fd, data):
        if stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", full_disk)
    with pytest.raises(StatusError, match="No space left on device; nothing was changed"):
        jobstatus.update({"used_CPU": 3, "last_job_start": T0 + 1, "priority_factor": 1},
                         str(directory))
    monkeypatch.undo()
    assert files(directory) == before


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o777, 0o000])
def test_files_are_0644_whatever_the_umask(directory, umask):
    old = os.umask(umask)
    try:
        jobstatus.update({"used_CPU": 1, "last_job_start": T0}, str(directory))
        jobstatus.update({"used_CPU": 2, "priority_factor": 7}, str(directory))
    finally:
        os.umask(old)
    modes = {entry.name: stat.S_IMODE(entry.stat().st_mode) for entry in directory.iterdir()}
    assert modes == {"used_CPU": 0o644, "last_job_start": 0o644, "priority_factor": 0o644}


def test_no_temporary_file_is_left_behind(directory):
    for number in range(50):
        jobstatus.update({"used_CPU": number % 4, "last_job_start": T0 + number,
                          "can_postpone_last_job": number % 2 == 0}, str(directory))
    # A writer of this pid that died left its temporary file: the next one replaces it.
    (directory / f".priority_factor.{os.getpid()}.new").write_text("stale")
    jobstatus.update({"priority_factor": 1}, str(directory))
    assert sorted(os.listdir(directory)) == ["can_postpone_last_job", "last_job_start",
                                             "priority_factor", "used_CPU"]


def test_the_directory_defaults_to_jobstatus(directory, monkeypatch):
    with pytest.raises(StatusError, match="JOBSTATUS is not set"):
        jobstatus.update({"used_CPU": 1})
    monkeypatch.setenv("JOBSTATUS", "relative/dir")
    with pytest.raises(StatusError, match="is not a directory path"):
        jobstatus.read()
    monkeypatch.setenv("JOBSTATUS", str(directory))
    jobstatus.update({"used_CPU": 1})
    assert jobstatus.read().values == {"used_CPU": 1}
    monkeypatch.setenv("JOBSTATUS", str(directory / "missing"))
    with pytest.raises(StatusError, match="missing"):
        jobstatus.read()
    with pytest.raises(StatusError, match="missing"):
        jobstatus.update({"used_CPU": 1})


def test_read_moves_used_cpu_above_allocated_cpu_to_problems(directory):
    jobstatus.update({"used_CPU": 8, "last_job_start": T0}, str(directory))
    status = jobstatus.read(str(directory), allocated_cpu=4)
    assert status.values == {"last_job_start": T0}
    assert status.problems == {"used_CPU": "used_CPU 8 is more than the job's allocated_cpu 4"}
    assert status.raw["used_CPU"] == "8"


def test_keys_written_without_the_lock_are_read_with_a_problem(directory):
    (directory / "last_job_start").write_text(f"{T0}\n")
    status = jobstatus.read(str(directory))
    assert status.values == {"last_job_start": T0}
    assert status.problems == {"used_CPU": "absent: the other keys were written without the "
                                           "lock"}


def test_hostile_files_are_problems_of_their_keys_never_followed_or_waited_on(directory,
                                                                              tmp_path):
    jobstatus.update({"used_CPU": 2, "priority_factor": 1}, str(directory))
    secret = tmp_path / "secret"
    secret.write_text("1795000000")
    os.symlink(secret, directory / "last_job_start")
    os.mkfifo(directory / "first_exp_job_end")  # a reader that opened it would hang
    (directory / "last_exp_job_end").write_text("1" * 41)
    (directory / "last_max_job_end").write_bytes(b"\xff\xfe")
    os.link(secret, directory / "add_uncom_time")
    (directory / "add_final_exp_waste").mkdir()
    started = time.monotonic()
    status = jobstatus.read(str(directory))
    assert time.monotonic() - started < 2
    assert status.values == {"used_CPU": 2, "priority_factor": 1}
    problems = status.problems
    assert problems["last_job_start"] == "a symlink: not followed"
    assert "first_exp_job_end is not a regular file" in problems["first_exp_job_end"]
    assert problems["last_exp_job_end"] == "longer than 40 bytes: not read"
    assert problems["last_max_job_end"] == "not ASCII text"
    assert problems["add_uncom_time"] == "add_uncom_time has 2 links: a file from elsewhere"
    assert "add_final_exp_waste is not a regular file" in problems["add_final_exp_waste"]
    assert "can_postpone_last_job" not in problems


def test_files_of_another_owner_are_refused(directory):
    jobstatus.update({"used_CPU": 2}, str(directory))
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert jobstatus.read_at(fd, "label", 0.1, owner=os.getuid()).values == {"used_CPU": 2}
        with pytest.raises(StatusError, match=f"label/used_CPU belongs to uid {os.getuid()}"):
            jobstatus.read_at(fd, "label", 0.1, owner=os.getuid() + 1)
    finally:
        os.close(fd)


@pytest.mark.parametrize("kind", ["directory", "symlink", "fifo", "link"])
def test_a_used_cpu_that_cannot_be_locked_is_an_error_not_a_hang(directory, tmp_path, kind):
    target = tmp_path / "elsewhere"
    target.write_text("4")
    lock_file = directory / "used_CPU"
    if kind == "directory":
        lock_file.mkdir()
    elif kind == "symlink":
        os.symlink(target, lock_file)
    elif kind == "fifo":
        os.mkfifo(lock_file)
    else:
        os.link(target, lock_file)
    started = time.monotonic()
    with pytest.raises(StatusError) as raised:
        jobstatus.read(str(directory), timeout=5)
    assert not isinstance(raised.value, LockTimeout)
    assert str(raised.value).startswith(f"{directory}/used_CPU")
    with pytest.raises(StatusError):
        jobstatus.update({"used_CPU": 1}, str(directory), timeout=5)
    assert time.monotonic() - started < 2
    assert target.read_text() == "4"


# --- the lock, with real processes ----------------------------------------------------

# A consistent set: every key derived from one number m (several writers use disjoint m).
def consistent_set(m):
    return {"used_CPU": m, "last_job_start": T0 + m, "first_exp_job_end": T0 + 10**6 + m,
            "last_exp_job_end": T0 + 2 * 10**6 + m, "last_max_job_end": T0 + 3 * 10**6 + m,
            "add_uncom_time": 7 * m, "add_final_exp_waste": 11 * m,
            "can_postpone_last_job": m % 2 == 0, "priority_factor": -m}


def assert_one_set(status):
    """The status is exactly one writer's whole set: every key, all from the same m."""
    assert status.problems == {}, status.problems
    assert status.values == consistent_set(status.values["used_CPU"])


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# What the processes below run first: this checkout, and the two helpers as source (so
# that they need not import this module, pytest and hypothesis).
PROLOGUE = (f"import sys\nsys.path[:0] = [{ROOT!r}]\nT0 = {T0}\n"
            + inspect.getsource(consistent_set) + inspect.getsource(assert_one_set))

# Writes whole sets, m = first, first + 1, ... for a while; prints the last m written.
# (Bounded by time, not count: a rename here costs milliseconds on a loaded ext4.)
WRITER = PROLOGUE + """
import time
from mjf_hooks import jobstatus
directory, first, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
print("ready", flush=True)
sys.stdin.readline()
deadline = time.monotonic() + seconds
m = first
while True:
    jobstatus.update(consistent_set(m), directory, timeout=30)
    if time.monotonic() >= deadline or m == first + 9999:
        break
    time.sleep(0.001 * (m % 3))  # now and then a pause: the other writer gets its turn
    m += 1
print(m, flush=True)
"""

# Reads until the file `stop` exists, checking every set it sees; prints how many.
READER = PROLOGUE + """
import os, time
from mjf_hooks import jobstatus
directory, stop = sys.argv[1], sys.argv[2]
print("ready", flush=True)
sys.stdin.readline()
seen = 0
while not os.path.exists(stop):
    status = jobstatus.read(directory, timeout=30)
    if status.reported:
        assert_one_set(status)
        seen += 1
    time.sleep(0.001)  # a busy loop of shared locks would keep every writer out
print(seen, flush=True)
"""


def start(script, *args):
    """A Python process running ``script``, once it is ready; released by go()."""
    process = subprocess.Popen([sys.executable, "-c", script, *map(str, args)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                               env={key: value for key, value in os.environ.items()
                                    if key not in ("JOBFEATURES", "JOBSTATUS")})
    assert process.stdout.readline() == "ready\n"
    return process


def go(*processes):
    for process in processes:
        process.stdin.write("go\n")
        process.stdin.flush()


def finish(process, timeout=30):
    out, _ = process.communicate(timeout=timeout)
    assert process.returncode == 0
    return out


def test_two_writers_never_interleave_and_readers_see_only_whole_sets(directory, tmp_path):
    # Two writer processes writing whole sets for 2 s, m from 10000 and from 20000;
    # meanwhile this process and another read, and check every set they see.
    stop = tmp_path / "stop"
    writers = [start(WRITER, directory, 10000, 2), start(WRITER, directory, 20000, 2)]
    reader = start(READER, directory, stop)
    go(*writers, reader)
    seen_here = 0
    while any(writer.poll() is None for writer in writers):
        status = jobstatus.read(str(directory), timeout=30)
        if status.reported:
            assert_one_set(status)
            seen_here += 1
        time.sleep(0.001)
    last = [int(finish(writer)) for writer in writers]
    stop.write_text("")
    assert int(finish(reader)) > 0 and seen_here > 0
    assert last[0] > 10000 and last[1] > 20000  # both wrote several sets
    final = jobstatus.read(str(directory))
    assert_one_set(final)
    assert final.values["used_CPU"] in last
    assert sorted(os.listdir(directory)) == sorted(jobstatus.KEYS)  # no temporary file


def test_a_reader_looping_while_a_writer_loops_sees_no_mixed_set(directory, tmp_path):
    # The reader starts before the first update: what it reads then must not be half of
    # that update either.
    stop = tmp_path / "stop"
    writer = start(WRITER, directory, 1, 1.5)
    reader = start(READER, directory, stop)
    go(reader, writer)
    last = int(finish(writer))
    stop.write_text("")
    assert int(finish(reader)) > 0
    assert jobstatus.read(str(directory)).values == consistent_set(last)




def test_a_held_lock_makes_read_and_update_time_out(directory):
    jobstatus.update(consistent_set(1), str(directory))
    before = files(directory)
    holder = lock_holder.start(directory / "used_CPU")
    try:
        started = time.monotonic()
        with pytest.raises(LockTimeout, match=r"stayed locked by another process for 0\.2 s"):
            jobstatus.read(str(directory), timeout=0.2)
        assert 0.2 <= time.monotonic() - started < 1.5
        started = time.monotonic()
        with pytest.raises(LockTimeout, match="stayed locked"):
            jobstatus.update(consistent_set(2), str(directory), timeout=0.2)
        assert 0.2 <= time.monotonic() - started < 1.5
        assert files(directory) == before
        with pytest.raises(LockTimeout):  # timeout 0: one try
            jobstatus.read(str(directory), timeout=0)
    finally:
        lock_holder.release(holder)
    assert_one_set(jobstatus.read(str(directory), timeout=0))


def test_readers_share_the_lock_and_writers_wait_for_them(directory):
    jobstatus.update(consistent_set(1), str(directory))
    holder = lock_holder.start(directory / "used_CPU", exclusive=False)
    try:
        assert_one_set(jobstatus.read(str(directory), timeout=0))  # shared: at once
        with pytest.raises(LockTimeout):
            jobstatus.update(consistent_set(2), str(directory), timeout=0.1)
        # A writer waits for the reader's lock, then writes.
        done = []
        thread = threading.Thread(target=lambda: done.append(jobstatus.update(
            consistent_set(3), str(directory), timeout=10)))
        thread.start()
        time.sleep(0.3)
        assert not done and thread.is_alive()
    finally:
        lock_holder.release(holder)
    thread.join(10)
    assert done == [None]
    assert jobstatus.read(str(directory)).values == consistent_set(3)


# A writer that is not this module: locks used_CPU, waits, then commits set 2 by rename,
# used_CPU last, and releases by exiting.
SLOW_WRITER = PROLOGUE + """
import fcntl, os
from mjf_hooks.jobstatus import format_value
directory = sys.argv[1]
fd = os.open(os.path.join(directory, "used_CPU"), os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_EX)
print("ready", flush=True)
sys.stdin.readline()
values = consistent_set(2)
for key in sorted(values, key=lambda name: name == "used_CPU"):
    temp = os.path.join(directory, "." + key + ".tmp")
    with open(temp, "w") as handle:
        handle.write(format_value(key, values[key]))
    os.rename(temp, os.path.join(directory, key))
"""


def test_a_reader_that_waited_on_a_replaced_used_cpu_reads_the_new_set(directory):
    # The reader opens used_CPU (set 1's) and waits; the writer commits set 2 by
    # replacing used_CPU and lets go of the old one. Read through the old file, used_CPU
    # would be 1 beside set 2's other keys: the reader must lock the new one instead.
    jobstatus.update(consistent_set(1), str(directory))
    writer = start(SLOW_WRITER, directory)
    results = []
    thread = threading.Thread(target=lambda: results.append(
        jobstatus.read(str(directory), timeout=10)))
    thread.start()
    time.sleep(0.3)
    assert thread.is_alive()
    go(writer)
    finish(writer)
    thread.join(10)
    assert_one_set(results[0])
    assert results[0].values["used_CPU"] == 2


def test_a_read_racing_the_first_update_never_returns_half_of_it(directory, monkeypatch):
    # The reader finds no used_CPU (nothing committed) and reads unlocked; meanwhile a
    # first update has begun: it made used_CPU to lock, and renamed some keys already.
    real_read_set = jobstatus._read_set
    holder = []

    def racing(dir_fd, label, lock_fd, owner):
        if lock_fd is None and not holder:
            (directory / "used_CPU").write_text("")
            holder.append(lock_holder.start(directory / "used_CPU"))
            (directory / "last_job_start").write_text(str(T0))
        return real_read_set(dir_fd, label, lock_fd, owner)

    monkeypatch.setattr(jobstatus, "_read_set", racing)
    try:
        with pytest.raises(LockTimeout):  # it waits for that update, not half of it
            jobstatus.read(str(directory), timeout=0.2)
    finally:
        lock_holder.release(holder[0])
    # An update that then fails leaves no used_CPU: the rest was written unlocked.
    (directory / "used_CPU").unlink()
    status = jobstatus.read(str(directory), timeout=0.2)
    assert status.values == {"last_job_start": T0} and "absent" in status.problems["used_CPU"]


def test_an_empty_used_cpu_is_a_first_update_under_way_not_a_value(directory):
    # A writer's first update makes used_CPU (empty) to lock it; a reader may lock it
    # first. Nothing is committed then: the pilot reports nothing yet.
    (directory / "used_CPU").write_text("")
    status = jobstatus.read(str(directory))
    assert (status.values, status.raw, status.problems, status.reported) == ({}, {}, {}, False)
    (directory / "last_job_start").write_text(str(T0))  # beside it, written unlocked
    status = jobstatus.read(str(directory))
    assert status.values == {"last_job_start": T0} and "absent" in status.problems["used_CPU"]
    # One left by a writer that died: the next first update goes on as usual.
    with pytest.raises(InvalidValue, match="must be set with the first update"):
        jobstatus.update({"priority_factor": 1}, str(directory))
    assert sorted(os.listdir(directory)) == ["last_job_start"]
    jobstatus.update({"used_CPU": 1}, str(directory))
    assert jobstatus.read(str(directory)).values == {"used_CPU": 1, "last_job_start": T0}


def test_a_used_cpu_replaced_just_after_it_was_opened_is_not_a_file_from_elsewhere(
        directory, monkeypatch):
    # Between a reader's open of used_CPU and its look at the file, a writer commits:
    # the file opened has no link left. That is the old set's: lock the new one.
    jobstatus.update(consistent_set(1), str(directory))
    real_fstat = os.fstat
    replaced = []

    def commit_first(fd):
        if not replaced:
            replaced.append(True)
            for key, value in sorted(consistent_set(2).items(), key=lambda i: i[0] == "used_CPU"):
                (directory / f".{key}.new").write_text(jobstatus.format_value(key, value))
                os.rename(directory / f".{key}.new", directory / key)
        return real_fstat(fd)

    monkeypatch.setattr(os, "fstat", commit_first)
    status = jobstatus.read(str(directory), timeout=1)
    monkeypatch.undo()
    assert replaced and status.values == consistent_set(2)
    replaced.clear()
    monkeypatch.setattr(os, "fstat", commit_first)  # a writer, too, opens the new one
    jobstatus.update({"priority_factor": 5}, str(directory), timeout=1)
    monkeypatch.undo()
    assert jobstatus.read(str(directory)).values == {**consistent_set(2), "priority_factor": 5}


def test_a_set_replaced_while_read_under_the_lock_is_read_again(directory, monkeypatch):
    # A pilot's own writer that does not wait for the lock commits while a reader reads
    # under it: the used_CPU read has no link left (once taken for "a file from
    # elsewhere", a set without used_CPU). The reader reads the new set, whole.
    jobstatus.update(consistent_set(1), str(directory))
    real_read_set = jobstatus._read_set
    commits = []

    def committing(dir_fd, label, lock_fd, owner):
        if lock_fd is not None and len(commits) < limit[0]:
            commits.append(True)
            for key, value in sorted(consistent_set(2).items(), key=lambda i: i[0] == "used_CPU"):
                (directory / f".{key}.new").write_text(jobstatus.format_value(key, value))
                os.rename(directory / f".{key}.new", directory / key)
        return real_read_set(dir_fd, label, lock_fd, owner)

    limit = [1]
    monkeypatch.setattr(jobstatus, "_read_set", committing)
    status = jobstatus.read(str(directory), timeout=1)
    assert commits == [True] and status.values == consistent_set(2) and not status.problems
    # One that never stops: the reader says so when its time is up.
    limit[0] = 10**9
    with pytest.raises(LockTimeout, match="kept being replaced"):
        jobstatus.read(str(directory), timeout=0.2)
    # Removed while read: what is left, read unlocked.
    limit[0] = 0
    real = committing

    def removing(dir_fd, label, lock_fd, owner):
        if lock_fd is not None:
            (directory / "used_CPU").unlink()
        return real(dir_fd, label, lock_fd, owner)

    monkeypatch.setattr(jobstatus, "_read_set", removing)
    status = jobstatus.read(str(directory), timeout=1)
    assert "used_CPU" not in status.values and "absent" in status.problems["used_CPU"]


def test_threads_of_one_process_updating_at_once_do_not_corrupt(directory):
    jobstatus.update(consistent_set(0), str(directory))
    errors, seen, last = [], [], {}
    deadline = time.monotonic() + 1.5

    def write(first):
        try:
            m = first
            while time.monotonic() < deadline and m < first + 99:
                jobstatus.update(consistent_set(m), str(directory), timeout=30)
                last[first] = m
                m += 1
        except BaseException as error:
            errors.append(error)

    def read():
        try:
            while any(thread.is_alive() for thread in writers):
                status = jobstatus.read(str(directory), timeout=30)
                assert_one_set(status)
                seen.append(status.values["used_CPU"])
                time.sleep(0.001)
        except BaseException as error:
            errors.append(error)

    writers = [threading.Thread(target=write, args=(first,)) for first in (100, 200, 300, 400)]
    readers = [threading.Thread(target=read) for _ in range(2)]
    for thread in writers + readers:
        thread.start()
    for thread in writers + readers:
        thread.join(60)
    assert errors == []
    assert len(last) == 4 and seen  # every thread wrote
    final = jobstatus.read(str(directory))
    assert_one_set(final)
    assert final.values["used_CPU"] in last.values()
    assert sorted(os.listdir(directory)) == sorted(jobstatus.KEYS)
