"""The bad-input corpus: every entry point, fed hundreds of broken inputs each.

For every case (see mutations.py) the hook must: (a) exit as the fail-safe rule
says - 0, 1 only with ``on_error = fail``, a job runner still running the job
with its argv and environment; (b) log one clear line per failure, naming what
was broken, never a traceback or an "internal error"; (c) change nothing outside
its stores; (d) leave no partial or invalid file and no half-built job directory.

The cases run in-process (os.execve, the job spawn, syslog and scontrol/bjobs/
condor_status replaced by recorders, /proc and /sys/fs/cgroup read from a fake
tree); a deterministic sample runs again through the installed commands, as
real processes, for their real exit codes; the pure-sh TaskProlog always does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from mjf_hooks.cli import htcondor as cli_htcondor
from mjf_hooks.cli import lsf as cli_lsf
from mjf_hooks.cli import mjf as cli_mjf
from mjf_hooks.cli import slurm as cli_slurm
from mjf_hooks.config import parse as parse_config
from tests.conftest import installed_command
from tests.corpus import harness
from tests.corpus.mutations import (
    JOB_AD,
    MACHINE_AD,
    SCONTROL_JOB,
    SCONTROL_PARTITION,
    Case,
    ad_cases,
    cgroup_cases,
    config_cases,
    env_cases,
    env_file_cases,
    file_mutations,
    output_cases,
    recorded_env,
    sample,
    value_mutations,
    with_on_error_fail,
)

COMMON_CONFIG = """\
[mjf]
base_dir = @D@/base
log = stderr
command_timeout = 0.5
legacy_keys = yes
[machinefeatures]
hs06 = 2400
grace_secs = 3600
[jobfeatures]
max_swap_bytes = 1073741824
"""
SLURM_CONFIG = COMMON_CONFIG + "[slurm]\nscontrol = @D@/bin/scontrol\nscratch_dir = @D@/scratch\n"
HTCONDOR_CONFIG = COMMON_CONFIG + (
    "[htcondor]\njob_id = global\nwall_limit_attribute = AllowedJobDuration\n"
    "wall_limit_unit = minutes\nnext_wrapper = @D@/bin/next\n")
LSF_CONFIG = COMMON_CONFIG + "[lsf]\nbjobs = @D@/bin/bjobs\nquery_bjobs = yes\n"

SLURM_PROLOG_ENV = {**recorded_env("slurm-22.05/prolog-sbatch.env"),
                    "SLURM_CONF": "@D@/etc/slurm.conf"}
SLURM_2302_ENV = {**SLURM_PROLOG_ENV, "SLURM_JOB_START_TIME": "1795319470",
                  "SLURM_JOB_END_TIME": "1795323070"}
SLURM_MULTI_NODE_ENV = {**SLURM_PROLOG_ENV, "SLURM_JOB_CPUS_PER_NODE": "4(x2),2",
                        "SLURM_NODELIST": "vm[01-02],gpu7", "SLURMD_NODENAME": "vm02"}
SLURM_EPILOG_ENV = {**recorded_env("slurm-22.05/epilog.env"), "SLURM_CONF": "@D@/etc/slurm.conf"}
SLURM_TASK_ENV = {**recorded_env("slurm-22.05/taskprolog-batchstep.env"),
                  "SLURM_CONF": "@D@/etc/slurm.conf"}
CONDOR_ENV = {
    "_CONDOR_SCRATCH_DIR": "@D@/scratch", "TMPDIR": "@D@/scratch",
    "_CONDOR_JOB_AD": "@D@/scratch/.job.ad", "_CONDOR_MACHINE_AD": "@D@/scratch/.machine.ad",
    "_CONDOR_WRAPPER_ERROR_FILE": "@D@/scratch/.job_wrapper_failure",
    "_CONDOR_SLOT": "slot1_1", "BATCH_SYSTEM": "HTCondor", "MJF_CONFIG": "@D@/mjf.conf",
}
LSF_ENV = {**recorded_env("lsf-10.1/single-host.env"), "TMPDIR": "@D@/scratch",
           "XDG_RUNTIME_DIR": "@D@/xdg"}
RUN_ENV = {"TMPDIR": "@D@/scratch", "XDG_RUNTIME_DIR": "@D@/xdg"}

JOB_ARGV = ["/bin/echo", "a b"]
LSF_COMMAND = "echo a b"
# What the real job does in the subprocess sample: say what it got.
SHOW_JOB = ('printf "argv:%s\\n" "$*"; [ -z "$JOBFEATURES" ] || '
            '{ test -f "$JOBFEATURES/job_id" && echo "jobfeatures:complete"; }')

EXECUTABLES = {
    "bin/scontrol": '#!/bin/sh\ncase "$2" in job) cat "${0%/*}/scontrol.out" ;; '
                    '*) cat "${0%/*}/partition.out" ;; esac\n',
    "bin/bjobs": "#!/bin/sh\necho 00:30:00\n",
    "bin/condor_status": "#!/bin/sh\n",
    "bin/next": '#!/bin/sh\nexec "$@"\n',
}


class Entry:
    """One entry point: its recorded environment, config, and how it is called."""

    def __init__(self, name, environ, config, call, job_argv=None, prepare=None,
                 command=None, usage_exit=0):
        self.name = name
        self.environ = environ
        self.config = config
        self.call = call  # (sandbox, argv, environ, outputs) -> Outcome
        self.job_argv = job_argv  # what a job runner execs (None: not a job runner)
        self.prepare = prepare  # runs first, unbroken (e.g. the Prolog before an Epilog)
        self.command = command  # (installed command, argv) for the subprocess sample
        self.usage_exit = usage_exit


def _options(sandbox, case):
    argv = ["--config", sandbox.path("mjf.conf")]
    if case.via_env_file:
        argv += ["--env-file", sandbox.path("job.env")]
    return argv + list(case.argv)


def _slurm(role=None):
    def call(sandbox, case, environ):
        argv = _options(sandbox, case) + ([role] if role else [])
        return sandbox.run(lambda: cli_slurm.main(argv), environ, case.outputs)
    return call


def _wrapper(sandbox, case, environ):
    argv0 = ["mjf-htcondor-wrapper", *JOB_ARGV]
    return sandbox.run(cli_htcondor.wrapper_main, environ, case.outputs, argv0=argv0)


def _cron(sandbox, case, environ):
    argv = _options(sandbox, case)
    return sandbox.run(lambda: cli_htcondor.cron_main(argv), environ, case.outputs)


def _lsf(role):
    def call(sandbox, case, environ):
        argv = _options(sandbox, case) + [role] + ([LSF_COMMAND] if role == "starter" else [])
        return sandbox.run(lambda: cli_lsf.main(argv), environ, case.outputs)
    return call


def _mjf(subcommand):
    def call(sandbox, case, environ):
        argv = _options(sandbox, case) + (["--", *JOB_ARGV] if subcommand == "run" else [])
        return sandbox.run(lambda: cli_mjf.main([subcommand, *argv]), environ, case.outputs)
    return call


def _prepare(call, environ):
    """Run another role first, unbroken (the Prolog before an Epilog, ...)."""
    def prepare(sandbox):
        outcome = call(sandbox, Case("prepare", "", ()), environ)
        assert outcome.status == 0 and not outcome.errors, outcome.stderr_lines
    return prepare


def _prepare_two_slurm_jobs(sandbox):
    _prepare(_slurm("prolog"), SLURM_PROLOG_ENV)(sandbox)
    _prepare(_slurm("prolog"), {**SLURM_PROLOG_ENV, "SLURM_JOB_ID": "33",
                                "SLURM_JOBID": "33"})(sandbox)


ENTRIES = {entry.name: entry for entry in [
    Entry("slurm-prolog", SLURM_PROLOG_ENV, SLURM_CONFIG, _slurm(),
          command=("mjf-slurm", [])),
    Entry("slurm-epilog", SLURM_EPILOG_ENV, SLURM_CONFIG, _slurm(),
          prepare=_prepare_two_slurm_jobs, command=("mjf-slurm", [])),
    Entry("slurm-taskprolog", SLURM_TASK_ENV, SLURM_CONFIG, _slurm("taskprolog"),
          prepare=_prepare(_slurm("prolog"), SLURM_PROLOG_ENV),
          command=("mjf-slurm", ["taskprolog"])),
    Entry("htcondor-wrapper", CONDOR_ENV, HTCONDOR_CONFIG, _wrapper,
          job_argv=["@D@/bin/next", *JOB_ARGV], command=("mjf-htcondor-wrapper", None)),
    Entry("htcondor-cron", CONDOR_ENV, HTCONDOR_CONFIG, _cron,
          command=("mjf-htcondor-cron", [])),
    Entry("lsf-starter", LSF_ENV, LSF_CONFIG, _lsf("starter"),
          job_argv=["/bin/sh", "-c", LSF_COMMAND], command=("mjf-lsf", ["starter"])),
    Entry("lsf-pre-exec", LSF_ENV, LSF_CONFIG, _lsf("pre-exec"),
          command=("mjf-lsf", ["pre-exec"])),
    Entry("lsf-post-exec", LSF_ENV, LSF_CONFIG, _lsf("post-exec"),
          prepare=_prepare(_lsf("pre-exec"), LSF_ENV), command=("mjf-lsf", ["post-exec"])),
    Entry("lsf-starter-after-pre-exec", LSF_ENV, LSF_CONFIG, _lsf("starter"),
          job_argv=["/bin/sh", "-c", LSF_COMMAND],
          prepare=_prepare(_lsf("pre-exec"), LSF_ENV), command=("mjf-lsf", ["starter"])),
    Entry("mjf-run", RUN_ENV, COMMON_CONFIG, _mjf("run"), job_argv=JOB_ARGV,
          command=("mjf", ["run"]), usage_exit=2),
    Entry("mjf-machine", RUN_ENV, COMMON_CONFIG, _mjf("machine"),
          command=("mjf", ["machine"]), usage_exit=2),
]}


# -- the cases -------------------------------------------------------------------------------

SLURM_VARIABLES = ("SLURM_SCRIPT_CONTEXT", "SLURM_JOB_ID", "SLURM_JOBID",
                   "SLURM_JOB_CPUS_PER_NODE", "SLURMD_NODENAME", "SLURM_NODELIST",
                   "SLURM_JOB_UID", "SLURM_JOB_GID", "SLURM_CONF", "SLURM_JOB_PARTITION")


def _in_env(entry, environ, cases):
    """Cases run against another recorded environment of the same entry point."""
    for case in cases:
        case.env = {**{k: v for k, v in environ.items() if k not in case.env}, **case.env}
        case.label = "variant:" + case.label
    return cases


def _state(entry, files):
    """Leftovers of earlier runs, planted in base_dir (lines about them name a path there)."""
    return [Case(entry, f"state:{label}", ("/base",), files={path: data})
            for label, path, data in files]


MACHINE_STATE = [
    ("shutdowntime-garbage", "base/machinefeatures/shutdowntime", b"soon\xff"),
    ("shutdowntime-negative", "base/machinefeatures/shutdowntime", b"-1"),
    ("shutdowntime-huge", "base/machinefeatures/shutdowntime", b"9" * 100000),
    ("shutdowntime-nul", "base/machinefeatures/shutdowntime", b"17\x00"),
    ("shutdowntime-directory", "base/machinefeatures/shutdowntime", harness.DIRECTORY),
    ("shutdowntime-symlink", "base/machinefeatures/shutdowntime", ("symlink", "@D@/etc/outside")),
    ("hs06-garbage", "base/machinefeatures/hs06", b"\x00\xff"),
    ("total_cpu-directory", "base/machinefeatures/total_cpu", harness.DIRECTORY),
    ("total_cpu-symlink", "base/machinefeatures/total_cpu", ("symlink", "@D@/etc/outside")),
    ("machinefeatures-file", "base/machinefeatures", b"not a directory"),
    ("machinefeatures-symlink", "base/machinefeatures", ("symlink", "@D@/etc")),
    ("jobs-file", "base/jobs", b"not a directory"),
    ("jobs-symlink", "base/jobs", ("symlink", "@D@/etc")),
    ("base-file", "base", b"not a directory"),
    ("temp-leftover", "base/machinefeatures/.hs06.1.abcd", b"24"),
]
JOB_STATE = [
    ("job-symlink", "base/jobs/3", ("symlink", "@D@/etc")),
    ("job-file", "base/jobs/3", b"not a directory"),
    ("jobfeatures-missing", "base/jobs/3/jobfeatures", None),
    ("jobfeatures-symlink", "base/jobs/3/jobfeatures", ("symlink", "@D@/etc")),
    ("key-garbage", "base/jobs/3/jobfeatures/max_rss_bytes", b"lots\xff"),
    ("key-huge", "base/jobs/3/jobfeatures/max_rss_bytes", b"9" * 100000),
    ("key-nul", "base/jobs/3/jobfeatures/wall_limit_secs", b"3\x006"),
    ("key-directory", "base/jobs/3/jobfeatures/max_swap_bytes", harness.DIRECTORY),
    ("pending-directory", "base/jobs/3/state/pending", harness.DIRECTORY),
    ("state-file", "base/jobs/3/state", b"x"),
    ("unknown-file", "base/jobs/3/jobfeatures/colour", b"blue"),
]


def _lsf_state(states):
    return [(label, path.replace("jobs/3", "jobs/1234"), data) for label, path, data in states]


def build_cases() -> list[Case]:
    cases: list[Case] = []
    # Slurm Prolog: the recorded 22.05 environment, a 23.02 one, a multi-node one.
    name = "slurm-prolog"
    cases += env_cases(name, SLURM_PROLOG_ENV, SLURM_VARIABLES)
    cases += _in_env(name, SLURM_2302_ENV, env_cases(
        name, SLURM_2302_ENV, ("SLURM_JOB_START_TIME", "SLURM_JOB_END_TIME")))
    cases += _in_env(name, SLURM_MULTI_NODE_ENV, env_cases(
        name, SLURM_MULTI_NODE_ENV, ("SLURM_JOB_CPUS_PER_NODE", "SLURM_NODELIST",
                                     "SLURMD_NODENAME")))
    cases += env_file_cases(name, SLURM_PROLOG_ENV)
    cases += output_cases(name, "scontrol", SCONTROL_JOB,
                          ("TimeLimit", "StartTime", "MinMemoryNode"))
    cases += [Case(name, f"scontrol:MinMemoryCPU:{label}", ("scontrol", "MinMemoryCPU"),
                   outputs={"scontrol": SCONTROL_JOB.replace("MinMemoryNode=200M",
                                                             f"MinMemoryCPU={text}")})
              for label, text in value_mutations("100M")]
    partition_job = SCONTROL_JOB.replace("TimeLimit=00:05:00", "TimeLimit=Partition_Limit")
    for case in output_cases(name, "scontrol-partition", SCONTROL_PARTITION,
                             ("DefaultTime", "MaxTime")):
        case.outputs["scontrol"] = partition_job
        cases.append(case)
    for conf, content in (("slurm.conf", b"TmpFS=@D@/scratch\n"),
                          ("cgroup.conf", b"ConstrainRAMSpace=yes\n")):
        cases += [Case(name, f"{conf}:{label}", (conf,), files={f"etc/{conf}": data})
                  for label, data in file_mutations(content)]
    cases += config_cases(name, SLURM_CONFIG, 40)
    cases += _state(name, MACHINE_STATE)
    cases += _state(name, JOB_STATE)

    name = "slurm-epilog"
    cases += env_cases(name, SLURM_EPILOG_ENV, ("SLURM_SCRIPT_CONTEXT", "SLURM_JOB_ID",
                                                "SLURM_JOBID"))
    cases += env_file_cases(name, SLURM_EPILOG_ENV)
    cases += config_cases(name, SLURM_CONFIG, 25)
    cases += _state(name, JOB_STATE + MACHINE_STATE[-4:])

    name = "slurm-taskprolog"
    cases += env_cases(name, SLURM_TASK_ENV, ("SLURM_JOB_ID", "SLURM_JOBID", "SLURM_MEM_PER_NODE",
                                              "SLURM_MEM_PER_CPU", "SLURM_CPUS_ON_NODE"))
    cases += _in_env(name, {**SLURM_TASK_ENV, "SLURM_MEM_PER_NODE": None,
                            "SLURM_MEM_PER_CPU": "100"},
                     env_cases(name, SLURM_TASK_ENV, ("SLURM_MEM_PER_CPU", "SLURM_CPUS_ON_NODE")))
    cases += cgroup_cases(name)
    cases += config_cases(name, SLURM_CONFIG, 40)
    cases += _state(name, JOB_STATE + MACHINE_STATE[:6])

    name = "htcondor-wrapper"
    cases += [case for case in env_cases(name, CONDOR_ENV, (
        "_CONDOR_SCRATCH_DIR", "_CONDOR_JOB_AD", "_CONDOR_MACHINE_AD",
        "_CONDOR_WRAPPER_ERROR_FILE", "MJF_CONFIG")) if not case.via_env_file]
    cases += ad_cases(name, "_CONDOR_JOB_AD", ".job.ad", JOB_AD, (
        "GlobalJobId", "ClusterId", "ProcId", "JobCurrentStartDate", "RequestCpus",
        "AllowedJobDuration"))
    cases += ad_cases(name, "_CONDOR_MACHINE_AD", ".machine.ad", MACHINE_AD,
                      ("Cpus", "Memory", "Disk"))
    cases += sample(cgroup_cases(name), 60)
    cases += config_cases(name, HTCONDOR_CONFIG, 40)
    cases += _state(name, MACHINE_STATE)

    name = "htcondor-cron"
    cases += output_cases(name, "condor_status",
                          f"{harness_host()},true,1795400000\n", ())
    cases += [Case(name, f"condor_status:value:{label}", ("condor_status",),
                   outputs={"condor_status": f"{harness_host()},true,{text}\n"})
              for label, text in value_mutations("1795400000")]
    cases += [case for case in cgroup_cases(name) if "cpuinfo" in case.label]
    cases += config_cases(name, HTCONDOR_CONFIG, 30)
    cases += _state(name, MACHINE_STATE)

    lsf_variables = ("LSB_JOBID", "LSB_JOBINDEX", "LSB_MCPU_HOSTS", "LSB_DJOB_NUMPROC",
                     "TMPDIR", "LSF_BINDIR", "XDG_RUNTIME_DIR")
    for name in ("lsf-starter", "lsf-pre-exec"):
        cases += env_cases(name, LSF_ENV, lsf_variables + (
            ("LSB_JOB_EXECUSER", "USER") if name == "lsf-pre-exec" else ()))
        cases += env_file_cases(name, LSF_ENV)
        cases += output_cases(name, "bjobs", "00:30:00\n", ())
        cases += [Case(name, f"bjobs:value:{label}", ("bjobs",), outputs={"bjobs": text + "\n"})
                  for label, text in value_mutations("00:30:00")]
        cases += config_cases(name, LSF_CONFIG, 30)
        cases += _state(name, MACHINE_STATE)
    cases += sample(cgroup_cases("lsf-starter"), 50)
    name = "lsf-post-exec"
    cases += env_cases(name, LSF_ENV, ("LSB_JOBID", "LSB_JOBINDEX", "XDG_RUNTIME_DIR"))
    cases += config_cases(name, LSF_CONFIG, 40)
    cases += _state(name, _lsf_state(JOB_STATE))
    name = "lsf-starter-after-pre-exec"
    cases += env_cases(name, LSF_ENV, ("LSB_JOBID", "LSB_JOBINDEX"))
    cases += sample(cgroup_cases(name), 50)
    cases += _state(name, _lsf_state(JOB_STATE))

    name = "mjf-run"
    for option, value in (("--cpus", "2"), ("--wall-limit", "3600"),
                          ("--memory", "1073741824"), ("--job-id", "job-7")):
        cases += [Case(name, f"option:{option}:{label}", (option, text[:40]),
                       argv=(option, text))
                  for label, text in value_mutations(value, nul=False)]
    cases += env_cases(name, RUN_ENV, ("TMPDIR", "XDG_RUNTIME_DIR"))
    cases += env_file_cases(name, RUN_ENV)
    cases += sample(cgroup_cases(name), 50)
    cases += config_cases(name, COMMON_CONFIG, 40)
    cases += _state(name, MACHINE_STATE)

    name = "mjf-machine"
    cases += [case for case in cgroup_cases(name) if "cpuinfo" in case.label]
    cases += config_cases(name, COMMON_CONFIG, 80)
    cases += _state(name, MACHINE_STATE)

    by_entry: dict[str, list[Case]] = {}
    for case in cases:
        by_entry.setdefault(case.entry, []).append(case)
    for _entry, entry_cases in by_entry.items():
        cases += with_on_error_fail(entry_cases, 12)
    return cases


def harness_host():
    return os.uname().nodename.split(".")[0]


# (case label, entry points) -> why it fails: a known bug, the case kept as a strict xfail
# until it is fixed. Empty: none is known.
KNOWN_BUGS: dict[tuple[str, tuple[str, ...]], str] = {}


def _marked(case: Case):
    reasons = [reason for (label, entries), reason in KNOWN_BUGS.items()
               if label in case.label and case.entry in entries]
    marks = [pytest.mark.xfail(reason=reasons[0], strict=True)] if reasons else []
    return pytest.param(case, id=case.id, marks=marks)


CASES = build_cases()
assert len({case.id for case in CASES}) == len(CASES), "case ids must be unique"


# -- running a case ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def corpus_root(tmp_path_factory):
    """Thousands of small directories: on tmpfs where there is one (10x faster here)."""
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK | os.X_OK):
        root = Path(tempfile.mkdtemp(prefix="mjf-corpus-", dir="/dev/shm"))
        yield root
        shutil.rmtree(root, ignore_errors=True)
    else:
        yield tmp_path_factory.mktemp("corpus")


@pytest.fixture
def sandbox(corpus_root, monkeypatch, capsys):
    made = []

    def make():
        made.append(corpus_root / f"corpus-{len(made)}")
        made[-1].mkdir()
        return harness.Sandbox(made[-1], monkeypatch, capsys)

    yield make
    for directory in made:
        shutil.rmtree(directory, ignore_errors=True)


def lay_out(sandbox, entry: Entry, on_error_fail: bool = False):
    """The case directory as the unbroken entry point finds it."""
    config = entry.config
    if on_error_fail:
        config = config.replace("[mjf]\n", "[mjf]\non_error = fail\n", 1)
    files = {**harness.default_tree(), "mjf.conf": config.encode(),
             "etc/slurm.conf": b"TmpFS=@D@/scratch\n",
             "etc/cgroup.conf": b"ConstrainRAMSpace=yes\n",
             "etc/outside": b"outside", "bin/scontrol.out": SCONTROL_JOB.encode(),
             "bin/partition.out": SCONTROL_PARTITION.encode(),
             "scratch/.job.ad": JOB_AD, "scratch/.machine.ad": MACHINE_AD}
    files.update({path: text.encode() for path, text in EXECUTABLES.items()})
    sandbox.write_files(files)
    for path in EXECUTABLES:
        os.chmod(sandbox.path(path), 0o755)
    os.chmod(sandbox.path("scratch"), 0o700)
    os.mkdir(sandbox.path("xdg"), 0o700)


def environ_for(sandbox, entry: Entry, case: Case) -> dict[str, str]:
    environ = {**entry.environ, **case.env}
    environ = {name: value for name, value in environ.items() if value is not None}
    if case.via_env_file and "job.env" not in case.files:
        with open(sandbox.path("job.env"), "wb") as handle:
            handle.write(b"".join(sandbox.expand(f"{name}={value}\n").encode(
                "utf-8", "surrogateescape") for name, value in environ.items()))
        return {"MJF_CONFIG": environ.get("MJF_CONFIG", "@D@/mjf.conf")}
    return environ


_BASELINES: dict[str, set[str]] = {}


def baseline_lines(make_sandbox, entry: Entry) -> set[str]:
    """What the unbroken entry point logs (normalised): lines a case need not explain."""
    if entry.name not in _BASELINES:
        outcome, _ = run_case(make_sandbox(), entry, Case(entry.name, "baseline", ()))
        _BASELINES[entry.name] = {harness.normalise(line) for line in outcome.stderr_lines}
    return _BASELINES[entry.name]


def break_inputs(sandbox, entry: Entry, case: Case) -> None:
    """Lay out the unbroken inputs, run what comes first, then break what the case breaks."""
    lay_out(sandbox, entry, case.on_error_fail)
    if entry.prepare:
        entry.prepare(sandbox)
    sandbox.write_files(case.files)
    if case.config is not None:
        sandbox.write_files({"mjf.conf": case.config})


def run_case(sandbox, entry: Entry, case: Case):
    break_inputs(sandbox, entry, case)
    environ = environ_for(sandbox, entry, case)
    before = harness.snapshot(sandbox.d)
    outcome = entry.call(sandbox, case, environ)
    return outcome, harness.check_stores(sandbox, before, harness.snapshot(sandbox.d))


def expected_status(sandbox, entry: Entry, case: Case, outcome) -> set[int]:
    """The fail-safe rule: 0; 1 only with on_error = fail (not when the config itself or
    the --env-file could not be read: then on_error is unknown); a wrapper whose exec
    failed says so with 1; a typed command's usage error is 2."""
    errors = outcome.errors
    if any("must be a positive whole number" in line for line in errors):
        return {entry.usage_exit}
    if any("cannot execute" in line for line in errors):
        return {1}
    refused = any(sandbox.path("mjf.conf") in line or sandbox.path("job.env") in line
                  or "cannot read the config" in line for line in errors)
    return {1} if case.on_error_fail and errors and not refused else {0}


def check_job_run(sandbox, entry: Entry, case: Case, outcome, environ) -> list[str]:
    """A job runner ran the job (with its argv and environment) unless it may not."""
    if entry.job_argv is None:
        return [f"ran something: {outcome.execs}"] if outcome.execs else []
    if outcome.status != 0:
        return [f"ran the job although it exited {outcome.status}"] if outcome.execs else []
    if len(outcome.execs) != 1:
        return [f"the job was run {len(outcome.execs)} times"]
    argv, job_environ, problems = outcome.execs[0]
    wanted = [sandbox.expand(arg) for arg in entry.job_argv]
    if "@D@/bin/next" in entry.job_argv:  # the chained wrapper the config names, if it loaded
        try:
            with open(sandbox.expand(environ.get("MJF_CONFIG", "")), "rb") as handle:
                config = parse_config(handle.read().decode("utf-8"))
            chained = config.backend["htcondor"].get("next_wrapper")
        except Exception:
            chained = None
        wanted = ([chained] if chained else []) + JOB_ARGV
    if argv != wanted:
        problems = [*problems, f"the job ran as {argv}, not {wanted}"]
    if not case.via_env_file:
        lost = [name for name, value in environ.items()
                if job_environ.get(name) != sandbox.expand(value)]
        if lost:
            problems = [*problems, f"the job lost its variables {lost}"]
    return problems


@pytest.mark.parametrize("case", [_marked(case) for case in CASES])
def test_case(sandbox, case):
    entry = ENTRIES[case.entry]
    baseline = baseline_lines(sandbox, entry)
    box = sandbox()
    outcome, store_problems = run_case(box, entry, case)
    problems = list(store_problems)
    expected = expected_status(box, entry, case, outcome)
    if outcome.status not in expected:
        problems.append(f"exit status {outcome.status}, expected {expected}")
    problems += harness.check_lines(outcome, (*case.culprits, "mjf.conf"), baseline)
    problems += check_job_run(box, entry, case, outcome,
                              {**entry.environ, **case.env} if not case.via_env_file else {})
    assert not problems, "\n".join([*problems, "stderr:", *outcome.stderr_lines[:10]])


# -- the installed commands, as real processes -------------------------------------------------


def _real_argv(sandbox, entry: Entry, case: Case) -> list[str]:
    """The command line a batch system would use, with a job that says it ran."""
    program, role = entry.command
    job = ["/bin/sh", "-c", SHOW_JOB, "job", "a b"]
    argv = [installed_command(program)]
    if role is None:  # the HTCondor wrapper: its arguments are the job
        return argv + job
    head, role = (role[:1], role[1:]) if program == "mjf" else ([], role)
    argv += [*head, "--config", sandbox.path("mjf.conf")]
    if case.via_env_file:
        argv += ["--env-file", sandbox.path("job.env")]
    if program == "mjf-lsf" and role == ["starter"]:
        return argv + role + [SHOW_JOB]
    return argv + role + (["--", *job] if head == ["run"] else [])


def _runs_for_real(case: Case) -> bool:
    """Inputs a real process gets the same way: no faked command output or /proc."""
    entry = ENTRIES[case.entry]
    return (not case.outputs and not any(path.startswith("root/") for path in case.files)
            and not (entry.command[1] is None and case.via_env_file) and _fits_execve(case))


def _fits_execve(case: Case) -> bool:
    """A real environment holds no string over 128 KiB (MAX_ARG_STRLEN)."""
    return all(len(value or "") < 100000 for value in case.env.values())


REAL_SAMPLE = [case for name in ENTRIES
               for case in sample([case for case in CASES if case.entry == name
                                   and _runs_for_real(case)], 5)]


@pytest.mark.parametrize("case", [_marked(case) for case in REAL_SAMPLE])
def test_installed_command(sandbox, case):
    """A sample of the corpus through the installed commands: real exit codes, a real exec."""
    entry = ENTRIES[case.entry]
    baseline = baseline_lines(sandbox, entry)
    box = sandbox()
    break_inputs(box, entry, case)
    environ = {name: box.expand(value) for name, value in environ_for(box, entry, case).items()}
    before = harness.snapshot(box.d)
    result = subprocess.run(_real_argv(box, entry, case), capture_output=True, cwd=box.d,
                            env={"PATH": "/usr/bin:/bin", **environ}, timeout=60)
    outcome = harness.Outcome(result.returncode, result.stdout.decode(errors="replace"),
                              result.stderr.decode(errors="replace"), [], [])
    problems = harness.check_stores(box, before, harness.snapshot(box.d))
    expected = expected_status(box, entry, case, outcome)
    if outcome.status not in expected:
        problems.append(f"exit status {outcome.status}, expected {expected}")
    problems += harness.check_lines(outcome, (*case.culprits, "mjf.conf"), baseline)
    ran = "argv:" in outcome.stdout
    if entry.job_argv is not None and ran != (outcome.status == 0):
        problems.append(f"exit status {outcome.status} but the job ran: {ran}")
    assert not problems, "\n".join([*problems, "stderr:", *outcome.stderr_lines[:10]])


# -- the pure-sh TaskProlog -------------------------------------------------------------------

SH_CASES = [case for case in env_cases("slurm-taskprolog-sh", SLURM_TASK_ENV,
                                       ("SLURM_JOB_ID",))
            if not case.via_env_file and _fits_execve(case)]
SH_CASES += config_cases("slurm-taskprolog-sh", SLURM_CONFIG, 20)
SH_CASES += _state("slurm-taskprolog-sh", JOB_STATE)


@pytest.mark.parametrize("case", SH_CASES, ids=[case.id for case in SH_CASES])
def test_sh_taskprolog(sandbox, case):
    """bin/mjf-slurm-taskprolog: exit 0 always, nothing or exactly the two export lines."""
    entry = ENTRIES["slurm-taskprolog"]
    box = sandbox()
    break_inputs(box, entry, case)
    environ = {name: box.expand(value) for name, value in {**SLURM_TASK_ENV, **case.env}.items()
               if value is not None}
    before = harness.snapshot(box.d)
    result = subprocess.run([installed_command("mjf-slurm-taskprolog")], capture_output=True,
                            cwd=box.d, timeout=60, env={"PATH": "/usr/bin:/bin", **environ,
                                                        "MJF_CONFIG": box.path("mjf.conf")})
    outcome = harness.Outcome(result.returncode, result.stdout.decode(errors="replace"),
                              result.stderr.decode(errors="replace"), [], [])
    problems = harness.check_stores(box, before, harness.snapshot(box.d))
    if outcome.status != 0:
        problems.append(f"exit status {outcome.status}: a failing TaskProlog cancels the task")
    lines = outcome.stdout.splitlines()
    if lines and [line.split("=", 1)[0] for line in lines] != [
            "export MACHINEFEATURES", "export JOBFEATURES"]:
        problems.append(f"printed {lines[:3]!r}, not the two export lines")
    problems += harness.check_lines(outcome, (*case.culprits, "mjf.conf", "/base"),
                                    baseline_lines(sandbox, entry))
    assert not problems, "\n".join([*problems, "stderr:", *outcome.stderr_lines[:10]])
