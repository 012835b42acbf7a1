"""What the records tests share: a record to write, configs, a second user."""

from __future__ import annotations

import json
import os
from pathlib import Path

from mjf_hooks.config import parse
from mjf_hooks.records import store as record_store
from mjf_hooks.records.job import Record, record_json
from tests.conftest import LeveledLog

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


def everything_under(path: Path) -> list[str]:
    """What is below a records directory, but root's notes of the jobs it recorded."""
    return sorted(str(p.relative_to(path)) for p in path.rglob("*")
                  if p.relative_to(path).parts[0] != record_store.ENDED)


def days(records_dir: Path) -> list[str]:
    """The names in a records directory but root's notes (ended/)."""
    return sorted(name for name in os.listdir(records_dir) if name != record_store.ENDED)


def failing_on_call(real, number: int, error: OSError):
    calls = []

    def fake(*args, **kwargs):
        calls.append(args)
        if len(calls) == number:
            raise error
        return real(*args, **kwargs)

    return fake, calls


def write_several(config) -> list[Record]:
    """Four records over three UTC days, written out of order."""
    written = [record("c", end=1700100000),   # 2023-11-16 02:00 UTC
               record("a", end=1699999000),   # 2023-11-14 21:56:40
               record("d", end=1700150000),   # 2023-11-16 15:53:20
               record("b", end=1700050000)]   # 2023-11-15 12:06:40
    for one in written:
        record_store.write(config, one)
    return written


NOW = 1700006400 + 10 * DAY + 3600  # 2023-11-25 01:00 UTC


DEAD_PID = 2**22 + 123  # above the largest pid_max Linux allows


class Recorded(LeveledLog):
    def at(self, level: str) -> list[str]:
        return [message for seen, message in self.lines if seen == level]


JOB_KEYS = {"job_id": "job.1", "allocated_cpu": "4", "max_rss_bytes": str(2 * GIB),
            "wall_limit_secs": "7200", "cpu_limit_secs": "28800",
            "scratch_limit_bytes": str(10 * GIB), "hs06_job": "40",
            "jobstart_secs": "1700000000"}


def read_record(path: str) -> dict:
    return json.loads(Path(path).read_text())


NOT_A_USERS_FILE = ("not a regular file of one link of a user other than root, of at most "
                    "65536 bytes")


def handed_in_by(uid: int, config, one: Record) -> Path:
    path = Path(record_store.hand_in(config, one))
    os.chown(path, uid, uid)
    return path


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
