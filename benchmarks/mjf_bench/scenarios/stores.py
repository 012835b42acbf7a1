"""Commands over stores of growing size, each store built once and checked, then timed
in every repeat: ``mjf drain --in 2h`` over job directories, ``mjf status`` over jobs
whose pilots all wrote a full, valid set (checked once with ``--json``), and ``mjf
records --summary`` over records, ``records_per_day`` per day directory (checked once
with ``--summary --json``); their text to /dev/null."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time

from ..bench import Bench, job_store
from ..measure import NOT_MEASURED, PYTHON_FLOOR, Command, measure
from ..report import Table, over_counts, per_floor
from ..scenario import Scenario
from .pilot import pilot_values

# `mjf status`'s floor: its system calls alone, from C.
# Holds a command to one CPU (util-linux, on every Debian and EL host).
TASKSET = "/usr/bin/taskset"
STATUS_SYSCALLS = os.path.join(os.path.dirname(os.path.dirname(__file__)), "status_syscalls.c")


class OverStores(Scenario):
    """One store per count (``size``: which of the sizes); each repeat times
    ``seconds(store, count)`` over every store."""

    startup_table = False
    size = ""
    columns: tuple[str, ...] = ()
    noun = "jobs"

    def __init__(self, bench: Bench) -> None:
        super().__init__(bench)
        self.counts: tuple[int, ...] = getattr(bench.sizes, self.size)
        self.stores: list[str] = []  # per count: the config naming its store
        self.runs: list[list[float]] = []  # per repeat: seconds, one per count

    def prepare(self) -> None:
        self.stores = [self.build(count) for count in self.counts]

    def build(self, count: int) -> str:
        raise NotImplementedError

    def seconds(self, config: str, count: int) -> float:
        raise NotImplementedError

    def repeat(self) -> None:
        self.runs.append([self.seconds(config, count)
                          for config, count in zip(self.stores, self.counts)])

    def tables(self, floors: dict[str, Command]) -> list[Table]:
        table = Table(self.columns)
        for count, ratio, median in over_counts(self.counts, self.runs, floors[PYTHON_FLOOR].ms):
            table.add(f"{count:,} {self.noun}", ratio, f"{median:.2f}",
                      f"{median / count * 1e6:.0f}")
        return [table]

    def mjf(self, config: str, *argv: str, accept: tuple[int, ...] = (0,)) -> float:
        """Seconds of one ``mjf ARGV...`` with ``config``, its text to /dev/null."""
        return measure([self.bench.bin("mjf"), *argv], self.bench.env_for(config), accept)

    def check(self, config: str, *argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([self.bench.bin("mjf"), *argv], capture_output=True, text=True,
                              env=self.bench.env_for(config))


class Drain(OverStores):
    size = "drain"
    columns = ("`mjf drain --in 2h` over", "÷ python floor", "s", "µs per job")

    def build(self, count: int) -> str:
        base = os.path.join(self.bench.work, f"drain-{count}")
        job_store(base, count, lambda number: {"job_id": str(number)})
        return self.bench.file(f"drain-{count}.conf", f"[mjf]\nbase_dir = {base}\nlog = none\n"
                               "[machinefeatures]\ngrace_secs = 600\n")

    def seconds(self, config: str, count: int) -> float:
        """One drain, every job updated (the last drain cancelled first)."""
        self.mjf(config, "drain", "--cancel")
        elapsed = self.mjf(config, "drain", "--in", "2h")
        base = os.path.join(self.bench.work, f"drain-{count}")
        with open(os.path.join(base, "jobs", str(count - 1), "jobfeatures",
                               "shutdowntime_job")) as handle:
            assert handle.read().isdigit()
        return elapsed


class Status(OverStores):
    """Besides ``mjf status`` itself, in every repeat, its floor: the system calls its
    safe-read rules make for the same store, made from C with nothing else
    (status_syscalls.c, built with the machine's ``cc``; without one, not measured); and
    ``mjf status`` held to one CPU (``taskset -c 0``), so that it reads every job in one
    process: what its forked readers (node_status._Worker) save."""

    size = "status"
    columns = ("`mjf status` over, every job reporting", "÷ python floor", "s", "µs per job",
               "µs per job added", "its system calls alone (C), s", "÷ system calls alone",
               "on one CPU (one process), s")

    def __init__(self, bench: Bench) -> None:
        super().__init__(bench)
        self.syscalls: str | None = None  # the floor's program, once built
        self.syscall_runs: list[list[float]] = []  # per repeat: seconds, one per count
        self.one_cpu_runs: list[list[float]] = []  # the same, mjf status on one CPU

    def prepare(self) -> None:
        super().prepare()
        compiler = shutil.which("cc")
        if compiler is not None:
            program = os.path.join(self.bench.work, "status_syscalls")
            subprocess.run([compiler, "-O2", "-o", program, STATUS_SYSCALLS], check=True)
            self.syscalls = program

    def build(self, count: int) -> str:
        """``count`` jobs of 8 cores, started 2 h ago with a 48 h wall limit, each with a
        full, valid set its pilot wrote; checked: every job reports, nothing assumed, no
        problem."""
        base = os.path.join(self.bench.work, f"status-{count}")
        now = int(time.time())
        job_store(base, count, lambda number: {
            "job_id": str(number), "allocated_cpu": "8", "jobstart_secs": str(now - 7200),
            "wall_limit_secs": "172800"}, status=lambda number: pilot_values(now, number))
        config = self.bench.file(f"status-{count}.conf",
                                 f"[mjf]\nbase_dir = {base}\nlog = none\njobstatus = yes\n")
        result = self.check(config, "status", "--json")
        shown = json.loads(result.stdout)["jobs"] if result.returncode == 0 else []
        wrong = [job for job in shown if job["state"] != "reports" or job["problems"]
                 or job["figures"]["assumed"] or len(job["values"]) != 9]
        if len(shown) != count or wrong:
            sys.exit(f"mjf status over {base}: exit {result.returncode}, {len(shown)} jobs, "
                     f"not as written: {wrong[:3]} {result.stderr[:500]}")
        return config

    def seconds(self, config: str, count: int) -> float:
        return self.mjf(config, "status")

    def repeat(self) -> None:
        super().repeat()
        self.one_cpu_runs.append([
            measure([TASKSET, "-c", "0", self.bench.bin("mjf"), "status"],
                    self.bench.env_for(config)) for config in self.stores])
        if self.syscalls is not None:
            self.syscall_runs.append([
                measure([self.syscalls, os.path.join(self.bench.work, f"status-{count}", "jobs"),
                         str(count)], {}) for count in self.counts])

    def tables(self, floors: dict[str, Command]) -> list[Table]:
        """Besides, what each job beyond the row above adds (the slope, start-up left
        out), and the time over its system calls' floor."""
        (table,) = super().tables(floors)
        previous = None
        for index, (cells, (count, _, median)) in enumerate(zip(
                table.rows, over_counts(self.counts, self.runs, floors[PYTHON_FLOOR].ms))):
            cells.append("" if previous is None else
                         f"{(median - previous[1]) / (count - previous[0]) * 1e6:.0f}")
            previous = count, median
            one_cpu = f"{statistics.median(run[index] for run in self.one_cpu_runs):.2f}"
            if not self.syscall_runs:  # no cc on this machine
                cells += [NOT_MEASURED, "", one_cpu]
                continue
            floor = [run[index] for run in self.syscall_runs]
            cells += [f"{statistics.median(floor):.2f}",
                      per_floor([run[index] for run in self.runs], floor), one_cpu]
        return [table]


class RecordsSummary(OverStores):
    size = "summary"
    columns = ("`mjf records --summary` over", "÷ python floor", "s", "µs per record")
    noun = "records"

    def build(self, count: int) -> str:
        """``count`` records laid out and written as :mod:`mjf_hooks.records.store` does (its
        JSON), each a finished job's requested and delivered values, varied (some past a
        promise); checked: every job counted, nothing skipped."""
        from mjf_hooks.records.job import Record, record_json
        from mjf_hooks.records.store import day_name

        per_day = self.bench.sizes.records_per_day
        directory = os.path.join(self.bench.work, f"records-{count}")
        os.mkdir(directory, 0o755)
        first_day = (int(time.time()) // 86400 - (count - 1) // per_day - 1) * 86400
        cgroup = "the job's cgroup, read by its TaskEpilog (as the job's user)"
        sources = {"end_time": "SLURM_JOB_END_TIME", "wall_secs": "end_time - jobstart_secs",
                   "cpu_secs": cgroup, "peak_memory_bytes": cgroup}
        for number in range(count):
            day, index = divmod(number, per_day)
            end = first_day + day * 86400 + index * 60 + 30
            if index == 0:
                day_dir = os.path.join(directory, day_name(end))
                os.mkdir(day_dir, 0o755)
            cores = 8 if number % 3 else 1
            wall = 600 + (number * 7919) % 180000  # a few past the 48 h limit
            record = Record(
                str(1000000 + number), user=f"user{number % 50:02d}", queue="grid",
                node="wn1", backend="slurm", allocated_cpu=cores,
                max_rss_bytes=cores * (2 << 30), wall_limit_secs=172800,
                cpu_limit_secs=172800 * cores, scratch_limit_bytes=cores * 20 * 10**9,
                hs06_job=cores * 12.5, start_time=end - wall, end_time=end, wall_secs=wall,
                cpu_secs=wall * cores * (0.3 + number % 71 / 100),
                peak_memory_bytes=int(cores * (2 << 30) * (0.2 + number % 91 / 100)),
                sources=sources, benchmark="HEPSPEC")
            with open(os.path.join(day_dir, f"{end}-{record.job_id}.json"), "w") as handle:
                json.dump(record_json(record), handle, sort_keys=True)
                handle.write("\n")
        config = self.bench.file(f"records-{count}.conf",
                                 f"[mjf]\nbase_dir = {directory}-base\nlog = none\n"
                                 f"[records]\ndir = {directory}\n")
        result = self.check(config, "records", "--summary", "--json")
        jobs = json.loads(result.stdout)["jobs"] if result.returncode == 0 else None
        if jobs != count or result.stderr:
            sys.exit(f"mjf records --summary over {directory}: exit {result.returncode}, "
                     f"{jobs} jobs, not {count}: {result.stderr[:500]}")
        return config

    def seconds(self, config: str, count: int) -> float:
        return self.mjf(config, "records", "--summary")
