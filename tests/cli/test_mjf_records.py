"""`mjf records` over a records directory of hand-written records, and the record `mjf run`
writes of what its command used."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from tests.conftest import installed_command, require

GIB, MIB = 2**30, 2**20


def mjf(*args, config=None, env=None, **kwargs):
    """The installed `mjf`, as a process."""
    environ = {key: value for key, value in os.environ.items()
               if key not in ("JOBSTATUS", "JOBFEATURES", "MACHINEFEATURES", "MJF_CONFIG")}
    if config is not None:
        environ["MJF_CONFIG"] = str(config)
    environ.update(env or {})
    return subprocess.run([installed_command("mjf"), *args], capture_output=True, text=True,
                          timeout=60, env=environ, **kwargs)


def delivered(**values) -> dict:
    return {name: {"value": value, "source": "hand-written"} for name, value in values.items()}


# Three jobs, as `mjf records` shows them:
# 101: 4 cores x 3600 s, 7200 CPU s -> 50%; 1 GiB of 4 GiB -> 25%; 3600 of 7200 s -> 50%
# 102: 2 cores x 1800 s, 3960 CPU s -> 110% (cores); 3 GiB of 2 GiB -> 150% (memory);
#      1800 of 1200 s -> 150% (wall)
# 103: no core count: no efficiency; 1 GiB of 4 GiB -> 25%; 600 of 2400 s -> 25%
JOBS = [
    ("101", "alice", {"allocated_cpu": 4, "max_rss_bytes": 4 * GIB, "wall_limit_secs": 7200},
     {"wall_secs": 3600, "cpu_secs": 7200, "peak_memory_bytes": GIB}),
    ("102", "bob", {"allocated_cpu": 2, "max_rss_bytes": 2 * GIB, "wall_limit_secs": 1200},
     {"wall_secs": 1800, "cpu_secs": 3960, "peak_memory_bytes": 3 * GIB}),
    ("103", "carol", {"max_rss_bytes": 4 * GIB, "wall_limit_secs": 2400},
     {"wall_secs": 600, "cpu_secs": 500, "peak_memory_bytes": GIB}),
]
# 2023-11-14 22:13:20, 2023-11-15 12:06:40, 2023-11-16 02:00:00 UTC
FIXED_ENDS = (1700000000, 1700050000, 1700100000)


def write_records(directory, ends=FIXED_ENDS) -> dict[str, str]:
    """The three jobs' JSON files, ending at ``ends``, as the records directory lays them
    out; their paths by job id."""
    directory.mkdir(mode=0o755, exist_ok=True)
    paths = {}
    for (job_id, user, requested, used), end in zip(JOBS, ends):
        day = directory / time.strftime("%Y-%m-%d", time.gmtime(end))
        day.mkdir(mode=0o755, exist_ok=True)
        data = {"job_id": job_id, "user": user, "backend": "slurm",
                "requested": {**requested, "start_time": end - used["wall_secs"]},
                "delivered": delivered(end_time=end, **used)}
        path = day / f"{end}-{job_id}.json"
        path.write_text(json.dumps(data))
        paths[job_id] = str(path)
    return paths


@pytest.fixture
def site(tmp_path, write_config):
    records = tmp_path / "records"
    conf, _ = write_config(f"[records]\ndir = {records}\n")
    return conf, records


def rows(stdout: str) -> list[list[str]]:
    return [line.split() for line in stdout.splitlines()]


def test_the_table_has_a_header_and_a_line_per_job(site):
    conf, records = site
    write_records(records)
    result = mjf("records", config=conf)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    header, *lines = rows(result.stdout)
    assert header == ["END", "(UTC)", "JOB", "USER", "CPUS", "CPU", "EFF", "PEAK", "MEM",
                      "OF", "MAX", "WALL", "OF", "LIMIT", "OVER"]
    assert lines == [
        ["2023-11-14", "22:13:20", "101", "alice", "4", "50%", "1024M", "25%", "1:00:00",
         "50%", "-"],
        ["2023-11-15", "12:06:40", "102", "bob", "2", "110%", "3072M", "150%", "0:30:00",
         "150%", "wall,memory,cores"],
        ["2023-11-16", "02:00:00", "103", "carol", "?", "?", "1024M", "25%", "0:10:00",
         "25%", "-"],
    ]


def test_the_summary(site):
    conf, records = site
    write_records(records)
    result = mjf("records", "--summary", config=conf)
    assert result.returncode == 0, result.stderr
    # allocated: 4 x 3600 + 2 x 1800 = 18000 core-s = 5.0 core-hours
    # used: 7200 + 3960 = 11160 core-s = 3.1; idle 6840 core-s = 1.9; efficiency 62%
    # memory fractions 0.25, 1.5, 0.25 -> median 25%; wall 0.5, 1.5, 0.25 -> median 50%
    assert result.stdout.splitlines() == [
        "jobs: 3 (2 with CPU figures)",
        "core-hours: 5.0 allocated, 3.1 used, 1.9 idle; CPU efficiency 62%",
        "median peak memory of max_rss_bytes: 25%; median wall time of wall_limit_secs: 50%",
        "jobs over a promise: 1 (wall 1, memory 1, cpu 0, cores 1)",
    ]


def test_the_summary_as_json(site):
    conf, records = site
    write_records(records)
    result = mjf("records", "--summary", "--json", config=conf)
    assert result.returncode == 0, result.stderr
    totals = json.loads(result.stdout)
    assert totals["jobs"] == 3 and totals["jobs_with_cpu_figures"] == 2
    assert totals["allocated_core_hours"] == pytest.approx(5.0)
    assert totals["used_core_hours"] == pytest.approx(3.1)
    assert totals["idle_core_hours"] == pytest.approx(1.9)
    assert totals["cpu_efficiency"] == pytest.approx(0.62)
    assert totals["over"] == {"wall": 1, "memory": 1, "cpu": 0, "cores": 1}


def test_the_summary_keeps_what_users_handed_in_apart(site):
    """A record a job's user handed in (filed as ``<end>-<job>~<uid>.json``) is that
    user's word: the summary's figures are root's records alone, the hand-ins a line
    of their own."""
    conf, records = site
    paths = write_records(records)
    data = json.loads(Path(paths["101"]).read_text())
    data["requested"]["allocated_cpu"] = 2**62
    Path(paths["101"].replace("-101.json", "-forged~65534.json")).write_text(json.dumps(data))
    result = mjf("records", "--summary", config=conf)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:2] == ["jobs: 3 (2 with CPU figures)",
                         "core-hours: 5.0 allocated, 3.1 used, 1.9 idle; CPU efficiency 62%"]
    assert lines[4].startswith("handed in by jobs' users (their word, not in the figures "
                               "above): 1 job(s), ")
    totals = json.loads(mjf("records", "--summary", "--json", config=conf).stdout)
    assert totals["jobs"] == 3 and totals["handed_in"]["jobs"] == 1
    # 3600 s x 2**62 cores
    assert totals["handed_in"]["allocated_core_hours"] == pytest.approx(2**62)


def test_json_is_a_list_of_records_with_their_figures(site):
    conf, records = site
    write_records(records)
    result = mjf("records", "--json", config=conf)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert [data["job_id"] for data in found] == ["101", "102", "103"]
    first = found[0]
    assert first["requested"] == {"allocated_cpu": 4, "max_rss_bytes": 4 * GIB,
                                  "wall_limit_secs": 7200, "start_time": 1700000000 - 3600}
    assert first["delivered"]["cpu_secs"] == {"value": 7200, "source": "hand-written"}
    assert first["figures"] == {"cpu_efficiency": 0.5, "memory_used_fraction": 0.25,
                                "wall_used_fraction": 0.5, "cpu_used_fraction": None,
                                "over": []}
    assert found[1]["figures"]["over"] == ["wall", "memory", "cores"]
    assert found[1]["figures"]["cpu_efficiency"] == pytest.approx(1.1)
    assert found[2]["figures"]["cpu_efficiency"] is None


def test_an_empty_records_directory(site):
    conf, records = site
    result = mjf("records", "--json", config=conf)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []
    result = mjf("records", "--summary", config=conf)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "jobs: 0 (0 with CPU figures)"
    assert not records.exists()  # reading makes nothing


def ids(result) -> list[str]:
    assert result.returncode == 0, result.stderr
    return [data["job_id"] for data in json.loads(result.stdout)]


@pytest.fixture
def recent(site):
    """The three jobs, ended 5 days, 2 days and an hour ago."""
    conf, records = site
    now = int(time.time())
    write_records(records, (now - 5 * 86400, now - 2 * 86400, now - 3600))
    return conf, now


@pytest.mark.parametrize(("since", "expected"), [
    ("1d", ["103"]),
    ("3d", ["102", "103"]),
    ("2h", ["103"]),
    ("10d", ["101", "102", "103"]),
    ("30m", []),
])
def test_since_a_duration_ago(recent, since, expected):
    conf, _ = recent
    assert ids(mjf("records", "--json", "--since", since, config=conf)) == expected


def test_since_a_unix_time(recent):
    conf, now = recent
    assert ids(mjf("records", "--json", "--since", str(now - 3 * 86400), config=conf)) \
        == ["102", "103"]
    # A job that ended at exactly the time given is in.
    assert ids(mjf("records", "--json", "--since", str(now - 2 * 86400), config=conf)) \
        == ["102", "103"]
    assert ids(mjf("records", "--json", "--since", str(now - 2 * 86400 + 1), config=conf)) \
        == ["103"]


def test_since_an_iso_time(recent):
    conf, now = recent
    moment = datetime.fromtimestamp(now - 3 * 86400, timezone.utc)
    for text in (moment.strftime("%Y-%m-%dT%H:%M:%SZ"), moment.isoformat(),
                 moment.astimezone().isoformat()):
        assert ids(mjf("records", "--json", "--since", text, config=conf)) == ["102", "103"]


def test_since_applies_to_the_summary_and_the_table(recent):
    conf, _ = recent
    result = mjf("records", "--summary", "--since", "1d", config=conf)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "jobs: 1 (0 with CPU figures)"
    result = mjf("records", "--since", "3d", config=conf)
    assert [line[2] for line in rows(result.stdout)[1:]] == ["102", "103"]


def test_since_something_else_is_an_error(site):
    conf, records = site
    write_records(records)
    result = mjf("records", "--since", "yesterday", config=conf)
    assert result.returncode == 1
    assert result.stdout == ""
    assert "'yesterday' is not a duration" in result.stderr


def test_without_a_records_dir_it_says_so(write_config):
    conf, _ = write_config("")
    result = mjf("records", config=conf)
    assert result.returncode == 1
    assert result.stdout == ""
    assert f"{conf}: no records are kept here: set [records] dir" in result.stderr


def test_a_broken_config_is_an_error(write_config):
    conf, _ = write_config("[records]\ndir = relative\n")
    result = mjf("records", config=conf)
    assert result.returncode == 2
    assert "[records] dir = 'relative': must be an absolute path" in result.stderr


def test_a_refused_records_directory_is_an_error(site):
    conf, records = site
    write_records(records)
    records.chmod(0o777)
    result = mjf("records", config=conf)
    assert result.returncode == 1
    assert "refusing a records directory others can write" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_garbage_file_is_warned_about_and_the_others_listed(site):
    conf, records = site
    paths = write_records(records)
    garbage = os.path.join(os.path.dirname(paths["102"]), "1700050001-junk.json")
    with open(garbage, "w") as handle:
        handle.write("{this is not json\x1b[31m")
    # Valid JSON, but not a record: a CPU time without its source.
    with open(paths["103"], "w") as handle:
        json.dump({"job_id": "103", "delivered": {"cpu_secs": 5}}, handle)
    result = mjf("records", "--json", config=conf)
    assert ids(result) == ["101", "102"]
    assert result.stderr.splitlines() == [
        f"mjf records: {garbage} is not a record: skipped",
        "mjf records: the record of job 103 is not a record: skipped",
    ]


def test_a_job_id_with_control_characters_is_shown_safely(site):
    conf, records = site
    day = records / "2023-11-14"
    day.mkdir(parents=True)
    (day / "1700000000-x.json").write_text(json.dumps({
        "job_id": "evil\x1b[2J\nforged", "user": "u\rv",
        "delivered": delivered(end_time=1700000000)}))
    result = mjf("records", config=conf)
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout and "\r" not in result.stdout
    assert len(result.stdout.splitlines()) == 2
    assert "evil?[2J?forged" in result.stdout


# --- mjf run writes a record of what its command used ----------------------------------

# One process: ~100 MiB touched (b"x" * n writes every page), then ~1 s of CPU.
# Burns 1 s of CPU holding 100 MiB, then writes its own rusage to argv[1] and exits at
# once (os._exit: no interpreter teardown after the measurement).
BURN = (
    "import json, os, resource, sys, time\n"
    f"block = b'x' * (100 * {MIB})\n"
    "while time.process_time() < 1.0:\n"
    "    pass\n"
    "own = resource.getrusage(resource.RUSAGE_SELF)\n"
    "open(sys.argv[1], 'w').write(json.dumps([own.ru_utime + own.ru_stime, own.ru_maxrss]))\n"
    "os._exit(0)\n"
)


def test_mjf_run_records_what_its_command_used(tmp_path, write_config):
    require(os.geteuid() == 0, "needs root: records are root's, a user's `mjf run` writes "
                               "none unless the records directory exists and is writable")
    records = tmp_path / "records"
    conf, base = write_config(f"[records]\ndir = {records}\nformat = sss\n")
    before = time.time()
    result = mjf("run", "--cpus", "1", "--wall-limit", "600", "--job-id", "burn.1", "--",
                 sys.executable, "-c", BURN, str(tmp_path / "own.json"), config=conf,
                 env={"TMPDIR": str(tmp_path)})
    after = time.time()
    assert result.returncode == 0, result.stderr
    assert os.listdir(base / "jobs") == []  # the job's directory went after the record
    # Beside the day: root's note that the record of job burn.1 is root's (no hand-in for
    # it is ever filed).
    day, ended = sorted(os.listdir(records))
    assert ended == "ended" and [path.name for path in (records / ended).glob("*/*")] == \
        ["burn.1"]
    names = sorted(os.listdir(records / day))
    assert len(names) == 2 and names[0].endswith("-burn.1.json") and names[1].endswith(".xml")
    data = json.loads((records / day / names[0]).read_text())
    assert data["job_id"] == "burn.1" and data["backend"] == "standalone"
    assert data["requested"]["allocated_cpu"] == 1
    assert data["requested"]["wall_limit_secs"] == 600
    assert before - 1 <= data["requested"]["start_time"] <= after
    used = {name: entry["value"] for name, entry in data["delivered"].items()}
    sources = {name: entry["source"] for name, entry in data["delivered"].items()}
    # The kernel's account of the child is the child's own, to the write and exit after
    # it measured itself: exact up to those few milliseconds.
    own_cpu, own_maxrss_kib = json.loads((tmp_path / "own.json").read_text())
    assert own_cpu <= used["cpu_secs"] <= own_cpu + 0.05
    assert used["cpu_secs"] == pytest.approx(1.0, abs=0.3)
    assert sources["cpu_secs"] == "wait4 rusage: user + system time"
    assert used["peak_memory_bytes"] == own_maxrss_kib * 1024 >= 100 * MIB
    assert sources["peak_memory_bytes"].startswith("wait4 rusage")
    assert used["wall_secs"] >= 1.0
    assert sources["wall_secs"] == "mjf run's clock, spawn to exit"
    assert before <= used["end_time"] <= after
    assert names[0].startswith(f"{int(used['end_time'])}-")
    # One core, busy all along: the consumption rate is at most 1.
    assert 0 < used["consumption_rate"] <= 1.01  # one core at most; under load, less
    shown = mjf("records", "--json", config=conf)
    assert ids(shown) == ["burn.1"]
    assert json.loads(shown.stdout)[0]["figures"]["over"] == []


@pytest.mark.parametrize("args", [(), ("--summary",), ("--json",), ("--summary", "--json")])
def test_records_beyond_any_job_are_skipped_never_a_traceback(site, args):
    """Stored records (another version's, a hand edit) with a number no job reaches - 400
    digits, 1e20 as an end, NaN - or nested too deep: each is skipped with one line, and
    the others are listed and totalled (every conversion of a number someone
    else wrote)."""
    conf, records = site
    paths = write_records(records)
    day = os.path.dirname(paths["101"])
    broken = {
        "digits": json.dumps({"job_id": "digits", "requested": {"allocated_cpu": 4},
                              "delivered": delivered(wall_secs=10, cpu_secs=10)}).replace(
            '"cpu_secs": {"value": 10', '"cpu_secs": {"value": ' + "9" * 400),
        "end": json.dumps({"job_id": "end", "delivered": delivered(end_time=1e20)}),
        "nan": json.dumps({"job_id": "nan", "requested": {"allocated_cpu": float("nan")}}),
        "deep": '{"job_id": "deep", "requested": ' + "[" * 20000 + "]" * 20000 + "}",
    }
    for name, text in broken.items():
        with open(os.path.join(day, f"1700000001-{name}.json"), "w") as handle:
            handle.write(text)
    result = mjf("records", *args, config=conf)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.splitlines()) == 4, result.stderr
    for line in result.stderr.splitlines():
        assert line.endswith("is not a record: skipped"), line
    if args == ("--json",):
        assert ids(result) == ["101", "102", "103"]
    elif "--summary" in args and "--json" in args:
        assert json.loads(result.stdout)["jobs"] == 3
