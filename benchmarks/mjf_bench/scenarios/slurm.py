"""Slurm: the Prolog and Epilog with a Slurm >= 23.02 environment (start and end time
in it: no scontrol call) and as a real 24.11 job recorded them, the sh TaskProlog in its
steady state (the job's values already completed by its first task), and with records
kept the Prolog, TaskEpilog and the Epilog writing the job's record."""

from __future__ import annotations

import os
import shutil
import sys
import time

from .. import FIXTURES
from ..bench import CONFIG, Bench
from ..measure import (
    NOT_MEASURED,
    PYTHON_FLOOR,
    SH_FLOOR,
    Command,
    instructions,
    measure,
)
from ..report import Table
from ..scenario import RecordsKept, Scenario


def job_env(config: str, job_id: str, context: str, start: int) -> dict[str, str]:
    """A Slurm >= 23.02 hook's environment for job ``job_id`` of this machine's user, on
    4 CPUs of node wn1, started at ``start`` for an hour, in ``SLURM_SCRIPT_CONTEXT``."""
    return {"MJF_CONFIG": config, "SLURM_JOB_ID": job_id, "SLURMD_NODENAME": "wn1",
            "SLURM_JOB_NODELIST": "wn1", "SLURM_JOB_CPUS_PER_NODE": "4",
            "SLURM_JOB_UID": str(os.getuid()), "SLURM_JOB_GID": str(os.getgid()),
            "SLURM_JOB_START_TIME": str(start), "SLURM_JOB_END_TIME": str(start + 3600),
            "SLURM_SCRIPT_CONTEXT": context}


def task_job(slurm: list[str], env: dict[str, str], context: str) -> None:
    """The Prolog or Epilog (``context``) of the TaskProlog rows' job: ``slurm``, how
    mjf-slurm is started; ``env``, the TaskProlog's."""
    measure(slurm, {**env, "SLURM_SCRIPT_CONTEXT": context})


def site_config(bench: Bench) -> str:
    """The benchmark's config as a 500-node site might split it: the main file, and ten
    drop-ins in its ``.d`` directory, one of them a table of ``hs06_per_cpu`` for 50 CPU
    models (this host's among them, so that its model is read and matched), one a
    section for GPU nodes. Its path."""
    from mjf_hooks.probe import cpu

    path = bench.file("site.conf", CONFIG.format(base=bench.base))
    drop_ins = f"{path}.d"
    os.mkdir(drop_ins)
    models = [f"Intel(R) Xeon(R) Gold {6100 + number} CPU @ 2.10GHz" for number in range(49)]
    models.append(cpu.model_name() or "this host's")
    table = "".join(f'[machinefeatures cpu="{model}"]\nhs06_per_cpu = {10 + number / 4}\n'
                    for number, model in enumerate(models))
    parts = {"50-hs06.conf": table,
             "60-gpu.conf": "[machinefeatures host=wn-gpu-*]\nhs06_per_cpu = 30\n"}
    parts.update((f"{10 + number}-part.conf", f"[jobfeatures]\nmax_swap_bytes = {number}\n")
                 for number in range(8))
    for name, text in parts.items():
        with open(os.path.join(drop_ins, name), "w") as handle:
            handle.write(text)
    return path


def recorded_env(name: str, config: str) -> dict[str, str]:
    """A hook's environment as Slurm 24.11 gave it in a real job (``name``: cgv1-prolog or
    cgv1-epilog; recorded with ``env``, NAME=value lines), with ``config``."""
    with open(os.path.join(FIXTURES, "slurm-24.11", f"{name}.env")) as handle:
        recorded = dict(line.rstrip("\n").split("=", 1) for line in handle if "=" in line)
    return {**recorded, "MJF_CONFIG": config}


class Slurm(Scenario):
    def __init__(self, bench: Bench) -> None:
        super().__init__(bench)
        start = int(time.time())
        slurm = bench.bin("mjf-slurm")
        # The TaskProlog's job: its own id, so it never meets the Prolog's and Epilog's.
        self.task_env = {**job_env(bench.config, "2000", "prolog_task", start),
                         "SLURM_MEM_PER_NODE": "2000"}
        # The site-config Prolog's job: its own id too, ended by finish().
        self.site_env = job_env(site_config(bench), "1001", "prolog_slurmd", start)
        self.instructions: list[int] = []  # per config (_configs), then a bare start's
        self.commands = [
            Command("`mjf-slurm` Prolog", [slurm], PYTHON_FLOOR,
                    job_env(bench.config, "1000", "prolog_slurmd", start)),
            Command("`mjf-slurm` Epilog", [slurm], PYTHON_FLOOR,
                    job_env(bench.config, "1000", "epilog_slurmd", start)),
            Command("`mjf-slurm` Prolog, a recorded Slurm 24.11 job", [slurm], PYTHON_FLOOR,
                    recorded_env("cgv1-prolog", bench.config)),
            Command("`mjf-slurm` Epilog, a recorded Slurm 24.11 job", [slurm], PYTHON_FLOOR,
                    recorded_env("cgv1-epilog", bench.config)),
            Command("`mjf-slurm-taskprolog` (per task), reading `$MJF_CONFIG` itself",
                    [bench.bin("mjf-slurm-taskprolog")],
                    SH_FLOOR, self.task_env),
            Command("`mjf-slurm` Prolog, one config for a cluster: ten drop-ins, one an "
                    "hs06 table of 50 CPU models", [slurm], PYTHON_FLOOR, self.site_env),
        ]

    def prepare(self) -> None:
        """The TaskProlog's job exists and its first task has completed its values."""
        self._task_job("prolog_slurmd")
        measure([self.bench.bin("mjf-slurm-taskprolog")], self.task_env)

    def finish(self) -> list[str]:
        """The two configs' Prologs counted in instructions, each making its job (the plain
        one's Epilog row has ended its job; the other's is ended first), then both ended."""
        site_epilog = {**self.site_env, "SLURM_SCRIPT_CONTEXT": "epilog_slurmd"}
        if shutil.which("valgrind") is not None:
            measure([self.bench.bin("mjf-slurm")], site_epilog)
            self.instructions = [
                *(instructions(command.argv, command.env()) for command in self._configs()),
                instructions([self.bench.python, "-I", "-c", "pass"], self.bench.env)]
            measure(self.commands[1].argv, self.commands[1].env())
        self._task_job("epilog_slurmd")
        measure([self.bench.bin("mjf-slurm")], site_epilog)
        return []

    def tables(self, floors: dict[str, Command]) -> list[Table]:
        """What one config for a cluster costs the Prolog, in instructions: wall time moves
        by about a tenth of a bare start between runs, instructions do not."""
        table = Table(("the Slurm Prolog's config", "instructions ÷ a bare start's",
                       "million instructions"))
        if not self.instructions:
            for command in self._configs():
                table.add(command.label, NOT_MEASURED, "")
            return [table]
        *counts, floor = self.instructions
        for command, count in zip(self._configs(), counts):
            table.add(command.label, f"{count / floor:.3f}", f"{count / 1e6:.1f}")
        return [table]

    def _configs(self) -> list[Command]:
        """The Prolog with one config file, and with the site's drop-ins."""
        return [self.commands[0], self.commands[-1]]

    def _task_job(self, context: str) -> None:
        task_job([self.bench.bin("mjf-slurm")], self.task_env, context)


class SlurmRecords(RecordsKept):
    job = "1100"

    def __init__(self, bench: Bench) -> None:
        super().__init__(bench)
        start = int(time.time())
        slurm = bench.bin("mjf-slurm")
        self._epilog_env = job_env(bench.records_config, self.job, "epilog_slurmd", start)
        self.commands = [
            Command("`mjf-slurm` Prolog, records kept", [slurm], PYTHON_FLOOR,
                    job_env(bench.records_config, self.job, "prolog_slurmd", start)),
            Command("`mjf-slurm` TaskEpilog, records kept (per task)", [slurm], PYTHON_FLOOR,
                    job_env(bench.records_config, self.job, "epilog_task", start)),
            Command("`mjf-slurm` Epilog, writing the job's record (SSS + APEL + JSON)", [slurm],
                    PYTHON_FLOOR, self.epilog_env),
        ]

    def epilog_env(self) -> dict[str, str]:
        """The Epilog's environment, the job's usage report left as its TaskEpilog leaves
        it in a Slurm job (here, outside one, the TaskEpilog finds no cgroup to read): the
        record gets the CPU time APEL needs, as a real job's does."""
        from mjf_hooks.records.job import usage_report
        from mjf_hooks.store import Store

        source = "the benchmark, as a TaskEpilog"
        report = usage_report({"cpu_secs": (3456.5, source),
                               "peak_memory_bytes": (1500000000, source)})
        if not Store(self.bench.base).write_usage_report(self.job, report):
            sys.exit(f"job {self.job} has no usage/: its Prolog kept no records?")
        return self._epilog_env
