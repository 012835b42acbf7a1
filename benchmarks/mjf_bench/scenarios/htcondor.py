"""HTCondor: the USER_JOB_WRAPPER with the recorded ads and a fresh scratch directory each
run; a shell wrapper doing the same, the way existing ones do (the reference); and with
records kept the wrapper and the job-exit hook writing the job's record."""

from __future__ import annotations

import functools
import json
import os

from .. import BENCHMARKS, FIXTURES
from ..bench import Bench
from ..measure import PYTHON_FLOOR, Command
from ..scenario import RecordsKept, Scenario

RECORDED = os.path.join(FIXTURES, "htcondor-23.9")


def starter_env(config: str, scratch: str, job_ad: str, machine_ad: str) -> dict[str, str]:
    """A starter's environment for the job wrapper: its scratch directory and ads."""
    return {"MJF_CONFIG": config, "_CONDOR_SCRATCH_DIR": scratch, "TMPDIR": scratch,
            "_CONDOR_JOB_AD": job_ad, "_CONDOR_MACHINE_AD": machine_ad,
            "PATH": "/usr/bin:/bin"}


def wrapper_env(bench: Bench) -> dict[str, str]:
    """The recorded job's starter environment with a fresh scratch directory, as for
    every job."""
    return starter_env(bench.config, bench.scratch_dir(), os.path.join(RECORDED, "job.ad"),
                       os.path.join(RECORDED, "machine.ad"))


class HTCondor(Scenario):
    def __init__(self, bench: Bench) -> None:
        super().__init__(bench)
        self.commands = [
            Command("`mjf-htcondor-wrapper /bin/true`",
                    [bench.bin("mjf-htcondor-wrapper"), "/bin/true"], PYTHON_FLOOR,
                    functools.partial(wrapper_env, bench)),
        ]


class ShellWrapper(Scenario):
    """Held against the python floor: it does the job our wrapper does."""

    def __init__(self, bench: Bench) -> None:
        super().__init__(bench)
        self.commands = [
            Command("shell wrapper doing the same (reference)",
                    [os.path.join(BENCHMARKS, "shell-wrapper-reference.sh"), "/bin/true"],
                    PYTHON_FLOOR, functools.partial(wrapper_env, bench)),
        ]


class HTCondorRecords(RecordsKept):
    """The job-exit hook reads a real final job ad on stdin; the wrapper's job ad is the
    recorded one with that ad's GlobalJobId, so the exit hook finds the job. Both use one
    scratch directory, run after run (the wrapper replaces the job directory the last
    run's exit hook removed)."""

    def __init__(self, bench: Bench) -> None:
        super().__init__(bench)
        from mjf_hooks.store import job_dir_name

        exit_ad = os.path.join(RECORDED, "job-exit-hook-stdin.ad")
        with open(exit_ad) as handle:
            global_id = next(line for line in handle if line.startswith("GlobalJobId ="))
        self.job = job_dir_name(json.loads(global_id.split("=", 1)[1]))
        with open(os.path.join(RECORDED, "job.ad")) as source:
            job_ad = bench.file("records-job.ad", "".join(
                global_id if line.startswith("GlobalJobId =") else line for line in source))
        scratch = os.path.join(bench.work, "scratch-records")
        os.mkdir(scratch, 0o700)
        env = starter_env(bench.records_config, scratch, job_ad,
                          os.path.join(RECORDED, "machine.ad"))
        self.commands = [
            Command("`mjf-htcondor-wrapper /bin/true`, records kept",
                    [bench.bin("mjf-htcondor-wrapper"), "/bin/true"], PYTHON_FLOOR,
                    env),
            Command("`mjf-htcondor-job-exit`, writing the job's record",
                    [bench.bin("mjf-htcondor-job-exit")], PYTHON_FLOOR, env, stdin=exit_ad),
        ]
