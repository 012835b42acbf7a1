"""Timing: one process from spawn to exit, its peak memory, many started at once; and
the commands every repeat starts round-robin (the start-up rows)."""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import time
from typing import Callable, Union

TIME = "/usr/bin/time"  # GNU time (Debian package `time`)
PYTHON_FLOOR = "python floor"
# A bare start that execs the job, as a hook that execs its job (a wrapper, a job starter)
# ends: the least such a hook costs, shown beside those rows (docs/performance.md).
EXEC_JOB = "import os; os.execv('/bin/true', ['/bin/true'])"
SH_FLOOR = "sh floor"
NOT_INSTALLED = "not installed"
NOT_MEASURED = "not measured"

Env = Union[dict, Callable[[], dict]]


def measure(argv: list[str], env: dict[str, str], accept: tuple[int, ...] = (0,),
            stdin: str | None = None) -> float:
    """Wall seconds of one run of argv, from spawn to exit; an exit status not in
    ``accept`` ends the benchmark. With ``stdin``, that file is its standard input
    (opened by the spawn, inside the timed span, as a shell's ``<`` would)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    actions = [(os.POSIX_SPAWN_DUP2, devnull, 1), (os.POSIX_SPAWN_DUP2, devnull, 2)]
    if stdin is not None:
        actions.append((os.POSIX_SPAWN_OPEN, 0, stdin, os.O_RDONLY, 0))
    start = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, env, file_actions=actions)
    _, status = os.waitpid(pid, 0)
    elapsed = time.perf_counter() - start
    os.close(devnull)
    if os.waitstatus_to_exitcode(status) not in accept:
        sys.exit(f"benchmark command failed: {' '.join(argv)}")
    return elapsed


def peak_rss_mib(argv: list[str], env: dict[str, str], work: str,
                 stdin: str | None = None) -> float:
    """Peak RSS of argv, through GNU time.

    Not wait4() on our own child: a child spawned from this (large) Python
    process inherits its RSS high-water mark, so every figure would read ~12 MiB.
    """
    report = os.path.join(work, "rss")
    measure([TIME, "-f", "%M", "-o", report, *argv], env, stdin=stdin)
    with open(report) as handle:
        return int(handle.read().split()[-1]) / 1024


def at_once(runs: list[tuple[list[str], dict[str, str]]]) -> tuple[float, int]:
    """Every (argv, env) started at once: wall seconds until the last has exited, and how
    many exited non-zero."""
    start = time.perf_counter()
    pids = [os.posix_spawn(argv[0], argv, env) for argv, env in runs]
    failed = sum(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) != 0 for pid in pids)
    return time.perf_counter() - start, failed


class Command:
    """One start-up row: what to start, in which environment (a mapping, or a function
    making a fresh one for each start), with ``stdin`` which file on its standard input,
    against which floor. ``is_floor``: it is that floor. ``missing``: why it cannot run
    here ("not installed", "not measured"); its row says so instead of figures."""

    def __init__(self, label: str, argv: list[str], floor: str, env: Env,
                 stdin: str | None = None, is_floor: bool = False,
                 missing: str | None = None) -> None:
        self.label = label
        self.argv = argv
        self.floor = floor
        self._env = env
        self.stdin = stdin
        self.is_floor = is_floor
        self.missing = missing
        self.ms: list[float] = []  # per repeat: median start-up
        self.mib: list[float] = []  # per repeat: peak RSS

    def env(self) -> dict[str, str]:
        return self._env() if callable(self._env) else self._env

    def run(self) -> float:
        return measure(self.argv, self.env(), stdin=self.stdin)


def startup(commands: list[Command], rounds: int, work: str) -> None:
    """One repeat of the start-up and peak-memory measurements: every command started
    ``rounds`` times, round-robin so that drift on a busy machine hits all alike."""
    samples: dict[str, list[float]] = {command.label: [] for command in commands}
    for _ in range(rounds):
        for command in commands:
            samples[command.label].append(command.run())
    for command in commands:
        command.ms.append(statistics.median(samples[command.label]) * 1000)
        command.mib.append(peak_rss_mib(command.argv, command.env(), work, command.stdin))


def instructions(argv: list[str], env: dict[str, str]) -> int:
    """The instructions one run of argv executes, as valgrind's callgrind counts them."""
    result = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                             *argv], env=env, capture_output=True, text=True)
    found = re.search(r"Collected : (\d+)", result.stderr)
    if result.returncode != 0 or found is None:
        sys.exit(f"callgrind of {' '.join(argv)}: exit {result.returncode} "
                 f"{result.stderr[-500:]}")
    return int(found.group(1))
