"""Matchmaking, in its own tables: ``mjf describe`` (ClassAd, DIRAC, GLUE 2) of a job
directory and of the machine (no location: its config's base_dir), ``mjf
match EXPRESSION --location JOB`` and a bare ``python -I -c 'import classad2'``
(HTCondor's ClassAd library, which ``mjf match`` imports on top of ``mjf describe``'s
start), each started among the start-up commands; and ``mjf match --jdl DIR
--location JOB`` over small JDL files (half gLite ``Requirements = other.GlueHostBenchmarkSI00
> N ? ... : ...``, half DIRAC ``NumberOfProcessors``/``CPUTime``, varied; checked once:
every file judged, none unreadable): its seconds, and µs per requirement once the same
repeat's ``mjf match`` start is subtracted; and ``mjf submit-args --batch lsf --jdl`` of a
DIRAC JDL listing 10,000 and 60,000 tags (checked once: every tag printed), its seconds
against the smaller one's, which stays near 6 while the work grows as the tags do. The
venv is not changed: without ``classad2`` (the ``match`` extra) the rows needing it say
"not installed"."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

from ..bench import Bench
from ..measure import NOT_INSTALLED, PYTHON_FLOOR, Command, measure
from ..report import Table, command_cells, per_floor
from ..scenario import Scenario

MATCH_EXPRESSION = "TARGET.MJF_JOB_ALLOCATED_CPU >= 1"
DESCRIBED = ("classad", "dirac", "glue2")  # the text formats, each a row
CLASSAD_IMPORT = "`python -I -c 'import classad2'` (the ClassAd library's import alone)"
MATCH_START = f"`mjf match '{MATCH_EXPRESSION}' --location JOB`"
# `mjf submit-args`, one row per kind of requirement (what each costs over its start).
SUBMIT_ARGS = [
    ("slurm", "cores, memory, wall time",
     "other.GlueHostArchitectureSMPSize >= 8 && other.GlueHostMainMemoryRAMSize >= 16000 "
     "&& other.GlueCEPolicyMaxWallClockTime >= 1440"),
    ("pbs", "node facts and a tag",
     "other.GlueHostBenchmarkSI00 >= 2500 && other.MJF_MACHINE_TOTAL_CPU >= 16 && "
     "member(\"cvmfs\", other.GlueHostApplicationSoftwareRunTimeEnvironment)"),
    ("gridengine", "the gLite conditional",
     "other.GlueHostBenchmarkSI00 > 500 ? other.GlueCEPolicyMaxCPUTime > 1000 "
     ": other.GlueCEPolicyMaxCPUTime > 2000"),
]
SUBMIT_JDL = '[ NumberOfProcessors = 8; MaxRAM = 16000; CPUTime = 3600000; Tags = {"cvmfs"}; ]\n'


class Match(Scenario):
    startup_table = False

    def __init__(self, bench: Bench) -> None:
        super().__init__(bench)
        self.classad = subprocess.run([bench.python, "-I", "-c", "import classad2"],
                                      capture_output=True).returncode == 0
        self.slot = self._slot_job()
        self.jdl = os.path.join(bench.work, "jdl")
        self.matched = 0  # JDL files the slot satisfies
        self.runs: list[float] = []  # per repeat: seconds of `mjf match --jdl DIR`
        # per size of bench.sizes.tags: its JDL, and per repeat seconds of its submit-args
        self.tag_jdls = {count: os.path.join(bench.work, f"tags-{count}.jdl")
                         for count in bench.sizes.tags}
        self.tag_runs: dict[int, list[float]] = {count: [] for count in bench.sizes.tags}
        mjf = bench.bin("mjf")
        missing = None if self.classad else NOT_INSTALLED
        submit_jdl = os.path.join(bench.work, "submit.jdl")
        with open(submit_jdl, "w") as handle:
            handle.write(SUBMIT_JDL)
        # `mjf describe` with no location, as an admin runs it on the node: the slot's
        # machine (its config's base_dir is the slot's store).
        machine_env = bench.env_for(bench.file(
            "slot.conf", f"[mjf]\nbase_dir = {os.path.join(bench.work, 'slot')}\nlog = none\n"))
        self.commands = [
            *(Command(f"`mjf describe --format {format_}` of a job directory",
                      [mjf, "describe", "--format", format_, self.slot], PYTHON_FLOOR,
                      bench.env) for format_ in DESCRIBED),
            *(Command(f"`mjf describe --format {format_}` of the machine (its base_dir)",
                      [mjf, "describe", "--format", format_], PYTHON_FLOOR, machine_env)
              for format_ in DESCRIBED),
            *(Command(f"`mjf submit-args --batch {batch}`: {kind}",
                      [mjf, "submit-args", "--batch", batch, expression], PYTHON_FLOOR,
                      bench.env, missing=missing)
              for batch, kind, expression in SUBMIT_ARGS),
            Command("`mjf submit-args --batch htcondor --jdl JOB.jdl --hs06-per-cpu 10`: "
                    "a DIRAC JDL", [mjf, "submit-args", "--batch", "htcondor", "--jdl",
                                    submit_jdl, "--hs06-per-cpu", "10"],
                    PYTHON_FLOOR, bench.env, missing=missing),
            Command(CLASSAD_IMPORT, [bench.python, "-I", "-c", "import classad2"],
                    PYTHON_FLOOR, bench.env, missing=missing),
            Command(MATCH_START, [mjf, "match", MATCH_EXPRESSION, "--location", self.slot],
                    PYTHON_FLOOR, bench.env, missing=missing),
        ]

    def _slot_job(self) -> str:
        """The job slot described and matched: a node of 16 cores and 200 HS06, a job of 4
        of them started now for 48 h; returns the job directory."""
        from mjf_hooks.store import Store

        store = Store(os.path.join(self.bench.work, "slot"))
        store.machine.write({"total_cpu": "16", "hs06": "200", "grace_secs": "600"},
                            frozenset())
        store.create_job("1", {"job_id": "1", "allocated_cpu": "4", "hs06_job": "50",
                               "jobstart_secs": str(int(time.time())),
                               "wall_limit_secs": "172800", "cpu_limit_secs": "691200",
                               "max_rss_bytes": str(8 << 30)})
        return os.path.dirname(store.job_features_dir("1"))

    def prepare(self) -> None:
        """The JDL files, alternately gLite (a ``Requirements`` expression, as the gLite
        guide's example, thresholds varied) and DIRAC (``NumberOfProcessors`` 1-8,
        ``CPUTime`` 10^4-4x10^6 HS06 s), about half of each matching the slot."""
        if not self.classad:
            print(f"{self.bench.python} cannot import classad2: the matchmaking rows say "
                  f"{NOT_INSTALLED!r} (pip install 'mjf-hooks[match]' into the venv)",
                  file=sys.stderr)
            return
        self._prepare_tags()
        count = self.bench.sizes.jdl
        os.mkdir(self.jdl)
        for number in range(count):
            if number % 2 == 0:
                text = (f'[ Executable = "run-{number}.sh"; Requirements = '
                        f"other.GlueHostBenchmarkSI00 > {number % 6000} ? "
                        f"other.GlueCEPolicyMaxCPUTime > {(number * 7) % 23000} : "
                        f"other.GlueCEPolicyMaxCPUTime > {(number * 13) % 23000}; ]\n")
            else:
                text = (f"[ NumberOfProcessors = {1 + number // 2 % 8}; "
                        f"CPUTime = {10000 + (number * 7919) % 3990000}; ]\n")
            with open(os.path.join(self.jdl, f"{number:05d}.jdl"), "w") as handle:
                handle.write(text)
        result = subprocess.run(self._match_jdl(), capture_output=True, text=True,
                                env=self.bench.env)
        verdicts = [line.rsplit(": ", 1)[-1] for line in result.stdout.splitlines()]
        self.matched = verdicts.count("match")
        if (result.returncode not in (0, 1) or result.stderr or len(verdicts) != count
                or self.matched + verdicts.count("no match") != count):
            sys.exit(f"mjf match --jdl {self.jdl}: exit {result.returncode}, "
                     f"{len(verdicts)} verdicts, {result.stderr[:500]}")

    def _match_jdl(self) -> list[str]:
        return [self.bench.bin("mjf"), "match", "--jdl", self.jdl, "--location", self.slot]

    def _prepare_tags(self) -> None:
        """The JDLs of many tags, each reduced once and checked: LSF's select[] lists them
        all."""
        for count, path in self.tag_jdls.items():
            with open(path, "w") as handle:
                handle.write("[ Tags = {" + ", ".join(f'"tag{number}"' for number in
                                                      range(count)) + "}; ]\n")
            result = subprocess.run(self._submit_tags(count), capture_output=True,
                                    text=True, env=self.bench.env)
            if result.returncode or result.stderr or \
                    result.stdout.count("&&") != count - 1:
                sys.exit(f"mjf submit-args --jdl {path}: exit {result.returncode}, "
                         f"{result.stderr[:500]}")

    def _submit_tags(self, count: int) -> list[str]:
        return [self.bench.bin("mjf"), "submit-args", "--batch", "lsf", "--jdl",
                self.tag_jdls[count]]

    def repeat(self) -> None:
        """Seconds of one `mjf match --jdl DIR`, its verdicts to /dev/null (exit 1: some
        JDL does not match)."""
        if self.classad:
            self.runs.append(measure(self._match_jdl(), self.bench.env, accept=(0, 1)))
            for count, runs in self.tag_runs.items():
                runs.append(measure(self._submit_tags(count), self.bench.env))

    def tables(self, floors: dict[str, Command]) -> list[Table]:
        python_floor = floors[PYTHON_FLOOR].ms
        table = Table(["matchmaking, one job slot", "start-up ÷ python floor", "ms",
                       "peak RSS ÷ python floor", "MiB"])
        for command in self.commands:
            table.add(command.label, *command_cells(command, floors))
        count = self.bench.sizes.jdl
        jdl = Table(["`mjf match --jdl DIR --location JOB` over", "÷ python floor", "s",
                     "µs per JDL", "µs per requirement, one `mjf match` start subtracted"])
        label = f"{count:,} JDL files, half gLite, half DIRAC"
        tags = Table(["`mjf submit-args --batch lsf --jdl JOB.jdl` of a DIRAC JDL listing",
                      "÷ python floor", "s", "÷ the first row's"])
        if not self.classad:
            jdl.add(label, NOT_INSTALLED, "", "", "")
            for count in self.tag_runs:
                tags.add(f"{count:,} tags", NOT_INSTALLED, "", "")
            return [table, jdl, tags]
        start = self.commands[-1].ms  # per repeat: one `mjf match` start, ms
        median = statistics.median(self.runs)
        each = [(seconds * 1000 - ms) / count * 1000 for seconds, ms in zip(self.runs, start)]
        jdl.add(f"{label} ({self.matched:,} match)", per_floor(self.runs, python_floor, 1, 1000),
                f"{median:.2f}", f"{median / count * 1e6:.0f}", f"{statistics.median(each):.0f}")
        base = self.tag_runs[self.bench.sizes.tags[0]]
        for count, runs in self.tag_runs.items():
            size = os.path.getsize(self.tag_jdls[count])
            tags.add(f"{count:,} tags ({size / 1000:,.0f} KB)",
                     per_floor(runs, python_floor, 1, 1000),
                     f"{statistics.median(runs):.2f}", per_floor(runs, base))
        return [table, jdl, tags]
