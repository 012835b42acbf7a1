"""The reader (local side; HTTP in tests/integration) and `mjf check`, one rule at a time."""

import os
import shutil
import time
from email.message import Message
from pathlib import Path

import pytest

from mjf_hooks import check
from mjf_hooks.reader import Features, JobView, MalformedValue, ReadError, cache_lifetime

NOW = 1795319471
GOOD_MACHINE = {"total_cpu": "16", "hs06": "250", "grace_secs": "3600"}
GOOD_JOB = {"job_id": "42", "allocated_cpu": "4", "jobstart_secs": str(NOW - 100),
            "wall_limit_secs": "3600", "cpu_limit_secs": "14400", "hs06_job": "62.5",
            "max_rss_bytes": str(8 * 2**30), "max_swap_bytes": "0",
            "scratch_limit_bytes": str(10**11), "grace_secs_job": "3600"}


def directory(path, values):
    path.mkdir(parents=True, exist_ok=True)
    for name, value in values.items():
        (path / name).write_text(value)
    return Features(str(path))


@pytest.fixture
def pair(tmp_path):
    def make(machine=None, job=None, drop=()):
        machine_values = {**GOOD_MACHINE, **(machine or {})}
        job_values = {**GOOD_JOB, **(job or {})}
        for name in drop:
            machine_values.pop(name, None)
            job_values.pop(name, None)
        return (directory(tmp_path / "machinefeatures", machine_values),
                directory(tmp_path / "jobfeatures", job_values))
    return make


def test_absent_keys_are_none_and_values_are_typed(pair):
    machine, job = pair()
    view = JobView(machine, job)
    assert view.get("allocated_cpu") == 4 and view.get("hs06") == 250
    assert view.get("shutdowntime") is None and view.get("job_id") == "42"
    assert JobView(None, None).get("total_cpu") is None


def test_malformed_values_name_key_location_and_value(pair, tmp_path):
    _, job = pair(job={"wall_limit_secs": "1h"})
    with pytest.raises(MalformedValue, match=r"jobfeatures/wall_limit_secs = '1h'"):
        job.get("wall_limit_secs")


def test_remaining_seconds_takes_the_earliest_bound(pair):
    machine, job = pair()
    view = JobView(machine, job)
    assert view.remaining_seconds(now=NOW) == 3500
    Path(job.location, "shutdowntime_job").write_text(str(NOW + 600))
    assert view.remaining_seconds(now=NOW) == 600
    Path(machine.location, "shutdowntime").write_text(str(NOW + 60))
    assert view.remaining_seconds(now=NOW) == 60
    assert JobView(None, None).remaining_seconds() is None


def test_a_directory_that_cannot_be_listed_is_a_read_error(tmp_path):
    with pytest.raises(ReadError, match="No such file"):
        Features(str(tmp_path / "missing")).names()


@pytest.mark.parametrize(("headers", "seconds"), [
    ({"Cache-Control": "max-age=60"}, 60), ({"Cache-Control": "public, max-age=5"}, 5),
    ({"Cache-Control": "no-cache, max-age=60"}, 0), ({"Cache-Control": "no-store"}, 0),
    ({"Expires": "Sun, 22 Nov 2026 05:01:00 GMT", "Date": "Sun, 22 Nov 2026 05:00:00 GMT"}, 60),
    ({"Expires": "garbage", "Date": "Sun, 22 Nov 2026 05:00:00 GMT"}, 0), ({}, 0),
])
def test_cache_lifetime(headers, seconds):
    message = Message()
    for name, value in headers.items():
        message[name] = value
    assert cache_lifetime(message) == seconds


def test_a_good_pair_passes_with_only_infos_about_optional_keys(pair):
    findings = check.check(*_one_job(pair()), now=NOW)
    assert {(f.severity, f.key) for f in findings} == {("info", "shutdowntime"),
                                                      ("info", "shutdowntime_job")}
    assert check.EXIT_CODES[check.worst(findings)] == 0


def _one_job(features):
    machine, job = features
    return machine, [job]


@pytest.mark.parametrize(("machine", "job", "drop", "severity", "key", "rule"), [
    ({}, {"wall_limit_secs": "3600\n"}, (), "error", "wall_limit_secs", "format"),
    ({}, {"allocated_cpu": " 4"}, (), "error", "allocated_cpu", "format"),
    ({}, {"cpu_limit_secs": "1.5e4"}, (), "error", "cpu_limit_secs", "format"),
    ({"hs06": "fast"}, {}, (), "error", "hs06", "format"),
    ({}, {"job_id": "a b"}, (), "error", "job_id", "format"),
    ({}, {"Allocated-CPU": "4"}, (), "error", "Allocated-CPU", "file-name"),
    ({}, {"colour": "blue"}, (), "warning", "colour", "unknown-file"),
    ({"allocated_cpu": "4"}, {}, (), "warning", "allocated_cpu", "unknown-file"),
    ({}, {"allocated_CPU": "4"}, (), "info", "allocated_CPU", "legacy-name"),
    ({}, {}, ("total_cpu",), "error", "total_cpu", "required"),
    ({}, {}, ("wall_limit_secs",), "error", "wall_limit_secs", "required"),
    ({}, {}, ("job_id",), "error", "job_id", "required"),
    ({}, {}, ("max_rss_bytes",), "warning", "max_rss_bytes", "required"),
    ({}, {}, ("hs06",), "warning", "hs06", "required"),
    ({}, {}, ("grace_secs_job",), "info", "grace_secs_job", "required"),
    ({}, {"jobstart_secs": str(NOW * 1000)}, (), "error", "jobstart_secs", "units"),
    ({}, {"max_rss_bytes": "8000"}, (), "warning", "max_rss_bytes", "units"),
    ({"total_cpu": "0"}, {}, (), "warning", "total_cpu", "units"),
    ({}, {"allocated_cpu": "32", "hs06_job": "500"}, (), "error", "allocated_cpu",
     "consistency"),
    ({}, {"hs06_job": "70"}, (), "warning", "hs06_job", "consistency"),
    ({}, {"jobstart_secs": str(NOW + 3600)}, (), "error", "jobstart_secs", "consistency"),
    ({"shutdowntime": str(NOW + 600)}, {"shutdowntime_job": str(NOW + 900)}, (), "error",
     "shutdowntime_job", "consistency"),
    ({"shutdowntime": str(NOW + 600)}, {}, ("grace_secs",), "warning", "grace_secs", "grace"),
    ({}, {"shutdowntime_job": str(NOW + 600)}, ("grace_secs_job",), "warning",
     "grace_secs_job", "grace"),
    ({"shutdowntime": str(NOW - 10)}, {}, (), "warning", "shutdowntime", "grace"),
    ({"shutdowntime": str(NOW + 3600)}, {}, (), "warning", "shutdowntime", "draining"),
])
def test_each_rule_finds_its_fault(pair, machine, job, drop, severity, key, rule):
    findings = check.check(*_one_job(pair(machine, job, drop)), now=NOW)
    matching = [f for f in findings if (f.severity, f.key, f.rule) == (severity, key, rule)]
    assert matching, [str(f) for f in findings]
    assert check.worst(findings) in (severity, "error")


def test_nothing_to_check_is_unknown():
    findings = check.check(None, [], now=time.time())
    assert [(f.severity, f.rule) for f in findings] == [("unknown", "location")]
    assert check.EXIT_CODES[check.worst(findings)] == 3
    assert check.summary(findings, False, 0) == (
        "MJF UNKNOWN - nothing to check: no location given, and neither variable is set: "
        "give a base_dir, a .../machinefeatures or a .../jobfeatures location")


def test_named_locations_are_checked_as_given_and_a_jobs_variables_come_in_pairs(pair):
    machine, job = pair()
    alone = check.check(machine, [], now=NOW)  # a node's check: the machine features
    assert check.worst(alone) == "info", [str(f) for f in alone]
    job_alone = check.check(None, [job], now=NOW)
    assert ("info", "$MACHINEFEATURES", "location") in {
        (f.severity, f.location, f.rule) for f in job_alone}
    assert check.EXIT_CODES[check.worst(job_alone)] == 0
    # From a job's environment: one variable without the other is a broken job.
    for given, missing in (((machine, []), "$JOBFEATURES"), ((None, [job]), "$MACHINEFEATURES")):
        findings = check.check(*given, now=NOW, from_environment=True)
        assert ("error", missing) in {(f.severity, f.location) for f in findings}


def standalone(job, backend="standalone"):
    """Mark ``job`` as made by ``backend``, as its hook does: ``state/backend`` beside it."""
    state = Path(job.location).parent / "state"
    state.mkdir()
    (state / "backend").write_text(backend)
    return state / "backend"


LIMITS = ("wall_limit_secs", "cpu_limit_secs", "max_rss_bytes", "max_swap_bytes")


def test_a_standalone_job_without_limits_has_notes_that_say_why(pair):
    machine, job = pair(drop=LIMITS)
    standalone(job)
    findings = check.check(machine, [job], now=NOW)
    missing = {f.key: f for f in findings if f.rule == "required" and f.key in LIMITS}
    assert {key: f.severity for key, f in missing.items()} == dict.fromkeys(LIMITS, "info")
    assert "a standalone job (mjf run) has no such limit unless it is given one (mjf run " \
           "--wall-limit or [jobfeatures] wall_limit_secs)" in missing["wall_limit_secs"].message
    assert check.EXIT_CODES[check.worst(findings)] == 0


@pytest.mark.parametrize("backend", ["slurm", "standalone\n", None])
def test_a_batch_jobs_missing_limits_keep_their_severity(pair, backend):
    machine, job = pair(drop=LIMITS)
    if backend is not None:
        standalone(job, backend)
    findings = check.check(machine, [job], now=NOW)
    severities = {f.key: f.severity for f in findings if f.key in LIMITS}
    assert severities == {"wall_limit_secs": "error", "cpu_limit_secs": "error",
                          "max_rss_bytes": "warning", "max_swap_bytes": "warning"}


def test_a_planted_backend_marker_neither_hangs_nor_counts(pair):
    machine, job = pair(drop=LIMITS)
    marker = standalone(job)
    marker.unlink()
    os.mkfifo(marker)  # a reader that waited on it would hang the check
    assert check.worst(check.check(machine, [job], now=NOW)) == "error"
    marker.unlink()
    marker.symlink_to(marker.name)  # a loop: unreadable, so no standalone job
    assert check.worst(check.check(machine, [job], now=NOW)) == "error"


def test_a_draining_machine_says_when_it_shuts_down(pair):
    machine, job = pair(machine={"shutdowntime": str(NOW + 3900)})
    findings = check.check(machine, [job], now=NOW)
    drains = [f for f in findings if f.rule == "draining"]
    assert [(f.severity, f.key) for f in drains] == [("warning", "shutdowntime")]
    assert drains[0].message == (f"the machine is draining: it shuts down at {NOW + 3900} "
                                 f"({time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(NOW + 3900))}"
                                 " UTC, in 1 h 05 min)")
    assert check.EXIT_CODES[check.worst(findings)] == 1


def test_the_summary_line_names_the_state_what_was_checked_and_why(pair):
    machine, job = pair()
    ok = check.check(machine, [job], now=NOW)
    assert check.summary(ok, True, 1) == ("MJF OK - the machine features and 1 job directory "
                                          "pass (2 notes) | jobs=1 errors=0 warnings=0")
    # A drain is the headline, ahead of a warning found before it.
    machine, job = pair(machine={"shutdowntime": str(NOW + 600)})
    Path(machine.location, "hs06").unlink()  # a warning found before the drain's
    draining = check.check(machine, [job, job], now=NOW)
    line = check.summary(draining, True, 2)
    assert line.startswith("MJF WARNING - 2 warnings in the machine features and 2 job "
                           f"directories: {machine.location}/shutdowntime: the machine is "
                           "draining: it shuts down at ")
    assert line.endswith(" | jobs=2 errors=0 warnings=2")
    # The first error decides a CRITICAL; a | in what a file holds cannot start perfdata.
    Path(machine.location, "shutdowntime").unlink()
    machine, job = pair(job={"allocated_cpu": " 4|", "x|y": "1"})
    broken = check.check(machine, [job], now=NOW)
    line = check.summary(broken, True, 1)
    assert line == (f"MJF CRITICAL - 2 errors in the machine features and 1 job directory: "
                    f"{job.location}/allocated_cpu: ' 4\\x7c' has surrounding whitespace or a "
                    "newline; strict readers fail [format] | jobs=1 errors=2 warnings=0")
    assert check.plugin_safe(str(broken[-1])).count("|") == 0


# -- a base_dir probed on a live node: jobs come and go ------------------------------------


def base_dir(path, jobs=()):
    """A node's base_dir: machinefeatures/ and a jobs/ holding ``jobs``; (machine, listing)."""
    machine = directory(path / "machinefeatures", GOOD_MACHINE)
    (path / "jobs").mkdir()
    for name in jobs:
        directory(path / "jobs" / name / "jobfeatures", GOOD_JOB)
    return machine, check.list_jobs(str(path))


@pytest.mark.parametrize("with_jobs_dir", [True, False])
def test_an_idle_node_is_ok(tmp_path, with_jobs_dir):
    machine, _ = base_dir(tmp_path)
    if not with_jobs_dir:
        (tmp_path / "jobs").rmdir()  # no job has run here yet
    listing = check.list_jobs(str(tmp_path))
    findings = check.check(machine, [], now=NOW, listings=[listing])
    assert check.EXIT_CODES[check.worst(findings)] == 0, [str(f) for f in findings]


def test_a_listed_job_that_ended_before_it_was_read_is_no_error(tmp_path):
    machine, listing = base_dir(tmp_path, jobs=["7", "8"])
    shutil.rmtree(tmp_path / "jobs" / "7")  # its Epilog ran after the listing
    findings = check.check(machine, [], now=NOW, listings=[listing])
    assert check.worst(findings) == "info", [str(f) for f in findings]
    ended = [f for f in findings if f.location == str(tmp_path / "jobs/7/jobfeatures")]
    assert [(f.severity, f.rule) for f in ended] == [("info", "location")]
    assert "ended during the check" in ended[0].message
    # Named by the user, the same location is an error: it should be there.
    named = check.check(machine, [Features(str(tmp_path / "jobs/7/jobfeatures"))], now=NOW)
    assert check.worst(named) == "error"


def test_a_listed_job_that_ends_while_it_is_read_is_no_error(tmp_path):
    machine, listing = base_dir(tmp_path, jobs=["7"])
    job = listing.jobs[0]
    read = job.raw

    def read_then_end(name):  # the Epilog removes the job's directory after the first key
        value = read(name)
        shutil.rmtree(tmp_path / "jobs" / "7", ignore_errors=True)
        return value

    job.raw = read_then_end
    findings = check.check(machine, [], now=NOW, listings=[listing])
    assert check.worst(findings) == "info", [str(f) for f in findings]
    # What such a half-read gives is a broken job: named, it is reported.
    directory(tmp_path / "jobs/7/jobfeatures", GOOD_JOB)
    named = check.check(machine, [job], now=NOW)
    assert ("error", "required") in {(f.severity, f.rule) for f in named}


def test_a_listed_job_directory_without_jobfeatures_is_broken_not_ended(tmp_path):
    machine, _ = base_dir(tmp_path, jobs=["7"])
    (tmp_path / "jobs/8").mkdir()  # jobs end by their whole directory vanishing, never so
    findings = check.check(machine, [], now=NOW, listings=[check.list_jobs(str(tmp_path))])
    broken = [f for f in findings if f.location == str(tmp_path / "jobs/8/jobfeatures")]
    assert [(f.severity, f.rule) for f in broken] == [("error", "location")], \
        [str(f) for f in findings]
    assert "No such file or directory" in broken[0].message


def test_a_jobs_dir_that_cannot_be_listed_is_a_warning_not_a_traceback(tmp_path):
    machine = directory(tmp_path / "machinefeatures", {**GOOD_MACHINE, "hs06": "fast"})
    (tmp_path / "jobs").write_text("")  # not a directory: like EACCES, any OSError but ENOENT
    listing = check.list_jobs(str(tmp_path))
    findings = check.check(machine, [], now=NOW, listings=[listing])
    unlisted = [f for f in findings if f.location == str(tmp_path / "jobs")]
    assert [(f.severity, f.rule) for f in unlisted] == [("warning", "location")]
    assert unlisted[0].message.startswith("cannot be listed (Not a directory): job directories")
    # The machine features are still checked.
    assert ("error", "hs06", "format") in {(f.severity, f.key, f.rule) for f in findings}
