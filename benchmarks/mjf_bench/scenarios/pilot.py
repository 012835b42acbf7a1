"""A pilot's ``$JOBSTATUS`` update of all 9 keys, in its own table: a fresh ``python -c
'from mjf_hooks import jobstatus; jobstatus.update({...})'`` and ``mjf status set
KEY=VALUE...`` (``$JOBSTATUS`` and ``$JOBFEATURES`` set), both started among the start-up
commands, and ``jobstatus.update()`` in a running interpreter: ``--rounds`` batches of
``UPDATE_CALLS`` calls, the median batch's time per call."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import time

from ..bench import Bench
from ..measure import PYTHON_FLOOR, Command
from ..report import Table, command_cells, per_floor
from ..scenario import Scenario

UPDATE_CALLS = 50  # jobstatus.update() calls per timed batch

# Run by the venv's interpreter, as a pilot would: the library imported, then
# batches of updates of the same 9 values timed; prints the median batch's ms per call.
_UPDATE = """\
import json, statistics, sys, time
from mjf_hooks import jobstatus
values, batches, calls = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
jobstatus.update(values)
times = []
for _ in range(batches):
    start = time.perf_counter()
    for _ in range(calls):
        jobstatus.update(values)
    times.append((time.perf_counter() - start) / calls)
print(statistics.median(times) * 1000)
"""


def pilot_values(now: int, number: int = 0) -> dict[str, object]:
    """A full, valid $JOBSTATUS set (used_CPU at most the 8 cores allocated), varied by
    ``number`` so that jobs sort differently."""
    return {"used_CPU": 1 + number % 8, "last_job_start": now - 60 - number % 3600,
            "first_exp_job_end": now + 600, "last_exp_job_end": now + 3600,
            "last_max_job_end": now + 7200, "add_uncom_time": 100,
            "add_final_exp_waste": 50, "can_postpone_last_job": number % 2 == 0,
            "priority_factor": number % 5}


class Pilot(Scenario):
    startup_table = False

    def __init__(self, bench: Bench) -> None:
        super().__init__(bench)
        from mjf_hooks.store import Store

        # A job with an (empty) jobstatus/ of its own, and the pilot's environment.
        store = Store(os.path.join(bench.work, "pilot"))
        store.create_job("5000", {"job_id": "5000", "allocated_cpu": "8"}, status=True)
        self.values = pilot_values(int(time.time()), 5)
        self.env = {"PATH": "/usr/bin:/bin", "JOBSTATUS": store.job_status_dir("5000"),
                    "JOBFEATURES": store.job_features_dir("5000")}
        self.updates: list[float] = []  # per repeat: ms per jobstatus.update() call
        self.commands = [
            Command("a fresh `python -c 'from mjf_hooks import jobstatus; "
                    "jobstatus.update({...})'`",
                    [bench.python, "-c", "from mjf_hooks import jobstatus; "
                     f"jobstatus.update({self.values!r})"], PYTHON_FLOOR, self.env),
            Command("`mjf status set used_CPU=6 last_job_start=... ...`",
                    [bench.bin("mjf"), "status", "set",
                     *(f"{key}={value}" for key, value in self.values.items())],
                    PYTHON_FLOOR, self.env),
        ]

    def repeat(self) -> None:
        """ms per ``jobstatus.update()`` of all 9 keys in a running interpreter, the pilot's
        environment ($JOBSTATUS, $JOBFEATURES) giving the directory and allocated_cpu."""
        self.updates.append(float(subprocess.run(
            [self.bench.python, "-c", _UPDATE, json.dumps(self.values), str(self.bench.rounds),
             str(UPDATE_CALLS)], capture_output=True, text=True, check=True,
            env=self.env).stdout))

    def tables(self, floors: dict[str, Command]) -> list[Table]:
        table = Table(["a pilot's `$JOBSTATUS` update, all 9 keys", "÷ python floor", "time",
                       "peak RSS ÷ python floor", "MiB"])
        table.add("`jobstatus.update({...})` in a running interpreter",
                  per_floor(self.updates, floors[PYTHON_FLOOR].ms, 4),
                  f"{statistics.median(self.updates) * 1000:.0f} µs", "(the pilot's)", "")
        for command in self.commands:
            table.add(command.label, *command_cells(command, floors, " ms"))
        return [table]
