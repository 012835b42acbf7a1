"""The storm: ``--storm`` Slurm Prolog+Epilog pairs started at once, each checking its
job's directory in between; start+end pairs per second, failures and leftovers. Its
floor: as many pairs of bare interpreter starts."""

from __future__ import annotations

import os
import statistics
import sys
import time

from ..bench import Bench
from ..measure import Command, at_once
from ..report import Table, spread
from ..scenario import Scenario
from .slurm import job_env

PAIR = ('"$1" prolog 2>>"$2" && test -s "$3/jobs/$SLURM_JOB_ID/jobfeatures/job_id" '
        '&& "$1" epilog 2>>"$2"')
BARE_PAIR = '"$1" -I -c pass && "$1" -I -c pass'


class Storm(Scenario):
    startup_table = False

    def __init__(self, bench: Bench) -> None:
        super().__init__(bench)
        self.runs: list[dict] = []

    def repeat(self) -> None:
        bench, count = self.bench, self.bench.storm
        first_id = 10000 + len(self.runs) * count  # every repeat's jobs new
        ids = [str(first_id + number) for number in range(count)]
        errors = [os.path.join(bench.work, f"storm-{job_id}.err") for job_id in ids]
        start = int(time.time())
        elapsed, failed = at_once([
            (["/bin/sh", "-c", PAIR, "sh", bench.bin("mjf-slurm"), error, bench.base],
             job_env(bench.config, job_id, "prolog_slurmd", start))
            for job_id, error in zip(ids, errors)])
        floor_elapsed, floor_failed = at_once(
            [(["/bin/sh", "-c", BARE_PAIR, "sh", bench.python], bench.env)] * count)
        if floor_failed:
            sys.exit("the floor storm failed")
        self.runs.append({
            "jobs": count / elapsed, "floor": count / floor_elapsed, "failed": failed,
            "logged": sum(os.path.getsize(path) > 0 for path in errors),
            "left": len(set(ids).intersection(os.listdir(os.path.join(bench.base, "jobs"))))})

    def finish(self) -> list[str]:
        failed = sum(run["failed"] + run["logged"] + run["left"] for run in self.runs)
        return [f"storm {failed}"] if failed else []

    def tables(self, floors: dict[str, Command]) -> list[Table]:
        table = Table([f"storm: {self.bench.storm} start+end pairs at once, {os.cpu_count()} "
                       "CPUs", "jobs/s ÷ floor", "jobs/s", "failed", "logged an error",
                       "directories left"])
        table.add("pairs of `python -I -c pass` (floor)", "(floor)",
                  f"{statistics.median(run['floor'] for run in self.runs):.0f}", "", "", "")
        table.add("`mjf-slurm` Prolog, check, Epilog",
                  spread([run["jobs"] / run["floor"] for run in self.runs]),
                  f"{statistics.median(run['jobs'] for run in self.runs):.0f}",
                  *(str(sum(run[key] for run in self.runs))
                    for key in ("failed", "logged", "left")))
        return [table]
