"""docs/performance.md's tables: hook costs as ratios to floors measured in the same run.

The whole measurement is repeated N times (``--repeats``); every repeat measures its
own floors, a bare start of the interpreter (``<venv>/bin/python -I -c pass``) and
``/bin/sh -c :``, and turns each figure into a ratio to its floor. The tables give
min / median / max of those ratios over the repeats, absolute values beside them. One
repeat: every scenario's commands started ``--rounds`` times, round-robin so that drift
on a busy machine hits all alike, the wall time from spawn to exit, median per command;
every command once under GNU time, its peak RSS; then each scenario's own measurement
(scenarios/: what each one measures, on what).

The job directories live in ``--work-dir`` (default /dev/shm, a tmpfs like /run/mjf, the
default base_dir, on a systemd host), removed at the end unless something failed.

``--smoke``: every scenario once on tiny stores (1 repeat, 1 round, a storm of 2 unless
given), to show that each still runs; its figures mean nothing. It says on stderr how
many rows each scenario gave.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

from .bench import FULL, SMOKE, Bench
from .measure import Command, startup
from .report import Table, document
from .scenario import Scenario
from .scenarios import ALL

DEFAULTS = {"repeats": 5, "rounds": 20, "storm": 200}
SMOKE_DEFAULTS = {"repeats": 1, "rounds": 1, "storm": 2}
STARTUP_COLUMNS = ["command", "floor", "start-up ÷ floor", "ms", "peak RSS ÷ floor", "MiB"]


def parser() -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--venv", default=os.path.dirname(os.path.dirname(sys.executable)))
    options.add_argument("--repeats", type=int, help="whole measurements (default 5)")
    options.add_argument("--rounds", type=int,
                         help="starts of every command per repeat (default 20)")
    options.add_argument("--storm", type=int,
                         help="Prolog+Epilog pairs started at once (default 200)")
    options.add_argument("--work-dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None,
                         help="where the base dirs are made (default /dev/shm: tmpfs, as "
                         "/run/mjf is on a systemd host)")
    options.add_argument("--deb", help="also time the hooks of this Debian package, "
                         "installed into a clean bookworm chroot (root; else \"not measured\")")
    options.add_argument("--smoke", action="store_true",
                         help="every scenario once on tiny stores: does each still run?")
    return options


def main(argv: list[str] | None = None) -> None:
    options = parser()
    args = options.parse_args(argv)
    for name, value in (SMOKE_DEFAULTS if args.smoke else DEFAULTS).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    began = time.perf_counter()
    work = tempfile.mkdtemp(prefix="mjf-bench-", dir=args.work_dir)
    bench = Bench(args.venv, work, SMOKE if args.smoke else FULL, args.rounds, args.storm,
                  args.deb)
    scenarios: list[Scenario] = []
    try:
        for kind in ALL:
            scenarios.append(kind(bench))
        problems = run(bench, scenarios, args.repeats, began)
        printed, counts = tables(scenarios)
        print(document(title(bench, args, options), printed))
    finally:
        for scenario in reversed(scenarios):
            scenario.close()
    if args.smoke:
        for name, count in counts.items():
            print(f"smoke: {name}: {count} rows", file=sys.stderr)
    if problems:
        sys.exit(f"failures or leftovers: {'; '.join(problems)} (see {work})")
    shutil.rmtree(work)


def run(bench: Bench, scenarios: list[Scenario], repeats: int, began: float) -> list[str]:
    """Every scenario prepared, its commands warmed up, then measured ``repeats`` times;
    what failed or was left behind."""
    for scenario in scenarios:
        scenario.prepare()
    commands = [command for scenario in scenarios for command in scenario.commands
                if not command.missing]
    for command in commands:  # warm the page cache
        command.run()
    for repeat in range(repeats):
        print(f"repeat {repeat + 1} of {repeats} at {time.perf_counter() - began:.0f} s",
              file=sys.stderr)
        startup(commands, bench.rounds, bench.work)
        for scenario in scenarios:
            scenario.repeat()
    problems = [problem for scenario in scenarios for problem in scenario.finish()]
    jobs = os.path.join(bench.base, "jobs")  # none where no scenario ran a job
    left = os.listdir(jobs) if os.path.isdir(jobs) else []
    return problems + ([f"job directories {left}"] if left else [])


def floors(scenarios: list[Scenario]) -> dict[str, Command]:
    return {command.floor: command for scenario in scenarios for command in scenario.commands
            if command.is_floor and not command.missing}


def tables(scenarios: list[Scenario]) -> tuple[list[Table], dict[str, int]]:
    """The start-up table and every scenario's own; and how many rows each scenario gave."""
    measured = floors(scenarios)
    startup_table = Table(STARTUP_COLUMNS, left=2)
    own: list[Table] = []
    counts: dict[str, int] = {}
    for scenario in scenarios:
        startup_rows, its_tables = scenario.startup_rows(measured), scenario.tables(measured)
        startup_table.rows += startup_rows
        own += its_tables
        counts[type(scenario).__name__] = len(startup_rows) + sum(
            len(table.rows) for table in its_tables)
    return [startup_table, *own], counts


def title(bench: Bench, args: argparse.Namespace, options: argparse.ArgumentParser) -> str:
    version = subprocess.run([bench.python, "-c", "import sys; print(sys.version.split()[0])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    given = f"--repeats {args.repeats} --rounds {args.rounds} --storm {args.storm}"
    if args.work_dir != options.get_default("work_dir"):
        given += f" --work-dir {args.work_dir}"
    if args.deb:
        given += " --deb DEB"
    if args.smoke:
        given += " --smoke"
    with open(bench.bin("mjf-slurm")) as command:
        interpreter = command.readline().strip()
    # The packages start every command `python3 -IS`; pip drops the options.
    started = ("the commands started `-IS`, as the packages start them" if
               interpreter.endswith(" -IS") else
               f"the commands started as pip installed them (`{interpreter}`), not `-IS` "
               "as the packages start them")
    return (f"Measured {time.strftime('%Y-%m-%d')} on {os.cpu_count()} CPUs, Python "
            f"{version}: `benchmarks/run --venv VENV {given}`, {started}. Each figure is "
            f"min / median / max over {args.repeats} repeats of its ratio to the floor "
            "measured in the same repeat; ms and MiB are medians.")

