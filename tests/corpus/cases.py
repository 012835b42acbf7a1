"""The bad-input corpus's cases (test_corpus.py runs them): every entry point's recorded
input, broken every way mutations.py and backends/ know, in the order they are made (the
garbage file_mutations draws follows that order: keep it). One function per batch system,
then what every entry point gets again: records kept, a fail-stop config, $JOBSTATUS
offered."""

from __future__ import annotations

import os
import time

from mjf_hooks.cli import mjf as cli_mjf
from mjf_hooks.store import job_dir_name
from tests.corpus import backends, harness
from tests.corpus.backends.gridengine import (
    GE_CONFIG,
    GE_EPILOG_ENV,
    GE_PROLOG_ENV,
    GE_SPOOL_CONFIG,
    GE_SPOOL_CONFIG_PATH,
    GE_STARTER_ENV,
    GE_STARTER_METHOD_ENV,
    GE_USAGE,
    GE_USAGE_PATH,
    QSTAT_JOB,
    QSTAT_JOB_WITHOUT_RUN_LIMIT,
    QSTAT_QUEUE_INSTANCE,
    gridengine_hostile_path_cases,
    job_start,
    pe_hostfile_cases,
    spool_config_cases,
)
from tests.corpus.backends.htcondor import (
    CONDOR_ENV,
    CONDOR_EXIT_ENV,
    FINAL_AD,
    FINAL_AD_PATH,
    HTCONDOR_CONFIG,
    JOB_AD,
    MACHINE_AD,
    ad_cases,
)
from tests.corpus.backends.lsf import BJOBS_L, LSF_CONFIG, LSF_ENV, RUN_LIMIT_MINUTES
from tests.corpus.backends.pbs import (
    PBS_CLASSIC_JOB,
    PBS_CONFIG,
    PBS_EPILOGUE_WORDS,
    PBS_FILES,
    PBS_HOSTILE_IDS,
    PBS_JOB,
    PBS_OTHER_IDS,
    PBS_PROFILE_ENV,
    PBS_PROLOGUE_WORDS,
    PBS_QSTAT_F,
    PBS_STDIN,
    PBS_TORQUE_WORDS,
    PBS_WORDS,
    pbs_argv_cases,
    pbs_hook_input,
    pbs_job_id,
    pbs_stdin_cases,
)
from tests.corpus.backends.slurm import (
    CPU_STAT,
    S24_EPILOG_ENV,
    S24_MULTI_NODE_ENV,
    S24_PROLOG_ENV,
    S24_RUNINJOB_ENV,
    S24_TASK_ENV,
    SCONTROL_JOB,
    SCONTROL_PARTITION,
    SLURM_2302_ENV,
    SLURM_CONFIG,
    SLURM_EPILOG_ENV,
    SLURM_MULTI_NODE_ENV,
    SLURM_PROLOG_ENV,
    SLURM_TASK_ENV,
    SLURM_TASK_EPILOG_ENV,
    USAGE_REPORT,
    recorded_cgroup_cases,
    slurm_prolog_keys,
)
from tests.corpus.entries import COMMON_CONFIG, JOB_ARGV, RECORDS_SECTION, Entry, options
from tests.corpus.mutations import (
    DIRECTORY,
    DROPS,
    SETUP_FAILS,
    USAGE,
    V2_JOB,
    Case,
    cgroup_cases,
    config_cases,
    declare,
    drop_in_cases,
    env_cases,
    env_file_cases,
    file_mutations,
    jobstatus_config_cases,
    option_effect,
    output_cases,
    records_state_cases,
    sample,
    state_effect,
    usage_file_cases,
    value_mutations,
    with_jobstatus,
    with_on_error_fail,
    with_records,
)
from tests.corpus.mutations import config_model as _config_model

RUN_ENV = {"TMPDIR": "@D@/scratch", "XDG_RUNTIME_DIR": "@D@/xdg"}

def _mjf(subcommand):
    def call(sandbox, case, environ):
        argv = [subcommand, *options(sandbox, case)] + (
            ["--", *JOB_ARGV] if subcommand == "run" else [])
        return sandbox.run(lambda: cli_mjf.main(argv), environ, case.outputs)
    return call


# The standalone's entry points: commands a person types, so a wrong command line exits 2,
# and so does a config `mjf machine` cannot use; `mjf run` runs its command as a shell would
# (127 where it cannot be executed), without MJF where its config cannot be used.
STANDALONE = [
    Entry("mjf-run", RUN_ENV, COMMON_CONFIG, _mjf("run"), job_argv=JOB_ARGV,
          command=("mjf", ["run"]), store_role="creates", exec_fails_exit=127, usage_exit=2),
    Entry("mjf-machine", RUN_ENV, COMMON_CONFIG, _mjf("machine"),
          command=("mjf", ["machine"]), store_role="machine", usage_exit=2, unusable_exit=2),
]
declare(STANDALONE)
# The batch systems' entry points (tests/corpus/backends/<name>.py), and the standalone's.
ENTRIES = {entry.name: entry for entry in [*backends.ENTRIES, *STANDALONE]}
# An entry point runs a job exactly where its model says what a job that cannot run exits.
assert all((entry.job_argv is None) == (entry.exec_fails_exit is None)
           for entry in ENTRIES.values())


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


def state_cases(entry, files):
    """Leftovers of earlier runs, planted in base_dir (lines about them name a path there,
    or - a job's record leaving a key out - the key)."""
    return [Case(entry, f"state:{label}", ("/base", os.path.basename(path)), files={path: data},
                 effect=state_effect(entry, label))
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


def job_state_of(states, job):
    """JOB_STATE for job ``job`` of a Slurm recording other than 22.05's job 3."""
    return [(label, path.replace("jobs/3", f"jobs/{job}"), data) for label, path, data in states]


def _lsf_state(states):
    return [(label, path.replace("jobs/3", "jobs/1234"), data) for label, path, data in states]


def _gridengine_state(states):
    return [(label, path.replace("jobs/3", "jobs/13"), data) for label, path, data in states]


def _gridengine_variants(entry, environ):
    """The recorded job started in the other ways Grid Engine starts one (not broken: what
    the starter execs follows from them, backends.gridengine.gridengine_job_start)."""
    binary = GE_SPOOL_CONFIG.replace(b"handle_as_binary=0", b"handle_as_binary=1")
    variants = [
        ("binary-job", {}, binary),
        ("binary-job-shell-no", {}, binary.replace(b"no_shell=0", b"no_shell=1")),
        ("unix-behavior", {"SGE_STARTER_SHELL_START_MODE": "unix_behavior"}, GE_SPOOL_CONFIG),
        ("no-login-shell", {"SGE_STARTER_USE_LOGIN_SHELL": "false"}, GE_SPOOL_CONFIG),
        ("queue-shell-from-spool-config", {"SGE_STARTER_SHELL_PATH": None}, GE_SPOOL_CONFIG),
    ]
    return [Case(entry, f"variant:{label}", ("SGE_STARTER_", "spool config"), env=env,
                 files={GE_SPOOL_CONFIG_PATH: spool},
                 **job_start(entry, {**environ, **env}, spool))
            for label, env, spool in variants]


def _slurm_cases() -> list[Case]:
    """Slurm 22.05 and 24.11: the Prolog, Epilog and TaskProlog (24.11's RunInJob Prolog too)."""
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
    cases += state_cases(name, MACHINE_STATE)
    cases += state_cases(name, JOB_STATE)

    name = "slurm-epilog"
    cases += env_cases(name, SLURM_EPILOG_ENV, ("SLURM_SCRIPT_CONTEXT", "SLURM_JOB_ID",
                                                "SLURM_JOBID"))
    cases += env_file_cases(name, SLURM_EPILOG_ENV)
    cases += config_cases(name, SLURM_CONFIG, 25)
    cases += state_cases(name, JOB_STATE + MACHINE_STATE[-4:])

    name = "slurm-taskprolog"
    cases += env_cases(name, SLURM_TASK_ENV, ("SLURM_JOB_ID", "SLURM_JOBID", "SLURM_MEM_PER_NODE",
                                              "SLURM_MEM_PER_CPU", "SLURM_CPUS_ON_NODE"))
    cases += _in_env(name, {**SLURM_TASK_ENV, "SLURM_MEM_PER_NODE": None,
                            "SLURM_MEM_PER_CPU": "100"},
                     env_cases(name, SLURM_TASK_ENV, ("SLURM_MEM_PER_CPU", "SLURM_CPUS_ON_NODE")))
    cases += cgroup_cases(name)
    cases += config_cases(name, SLURM_CONFIG, 40)
    cases += state_cases(name, JOB_STATE + MACHINE_STATE[:6])

    # Slurm 24.11: the Prolog (PrologFlags=Alloc,Contain; and RunInJob), the Epilog and the
    # TaskProlog of the recorded job 9 (14 with RunInJob). Its Prolog's environment gives the
    # start and the time limit, never the memory request: what a Prolog writes is modelled
    # (Case.job_keys, backends.slurm.slurm_prolog_keys).
    name = "slurm-24.11-prolog"
    cases += env_cases(name, S24_PROLOG_ENV, (
        *SLURM_VARIABLES, "SLURM_JOB_NODELIST", "SLURM_JOB_START_TIME", "SLURM_JOB_END_TIME"))
    cases += _in_env(name, S24_MULTI_NODE_ENV, env_cases(
        name, S24_MULTI_NODE_ENV, ("SLURM_JOB_CPUS_PER_NODE", "SLURM_JOB_NODELIST",
                                   "SLURM_NODELIST", "SLURMD_NODENAME")))
    cases += env_file_cases(name, S24_PROLOG_ENV)
    # Not asked (the environment says what it would): a broken scontrol changes nothing.
    for case in output_cases(name, "scontrol", SCONTROL_JOB, ()):
        case.job_keys = slurm_prolog_keys(name, S24_PROLOG_ENV, S24_PROLOG_ENV)
        cases.append(case)
    cases += config_cases(name, SLURM_CONFIG, 20)
    cases += state_cases(name, MACHINE_STATE)
    cases += state_cases(name, job_state_of(JOB_STATE, "9"))

    name = "slurm-24.11-runinjob-prolog"
    cases += env_cases(name, S24_RUNINJOB_ENV, (
        "SLURM_SCRIPT_CONTEXT", "SLURM_JOB_ID", "SLURM_JOBID", "SLURM_JOB_UID", "SLURM_JOB_GID",
        "SLURM_JOB_START_TIME", "SLURM_JOB_END_TIME"))
    cases += env_file_cases(name, S24_RUNINJOB_ENV)
    cases += recorded_cgroup_cases(name, S24_RUNINJOB_ENV)
    cases += state_cases(name, job_state_of(JOB_STATE, "14"))

    name = "slurm-24.11-epilog"
    cases += env_cases(name, S24_EPILOG_ENV, ("SLURM_SCRIPT_CONTEXT", "SLURM_JOB_ID",
                                              "SLURM_JOBID", "SLURM_JOB_START_TIME",
                                              "SLURM_JOB_END_TIME"))
    cases += env_file_cases(name, S24_EPILOG_ENV)
    cases += config_cases(name, SLURM_CONFIG, 15)
    cases += state_cases(name, job_state_of(JOB_STATE, "9") + MACHINE_STATE[-4:])

    name = "slurm-24.11-taskprolog"
    cases += env_cases(name, S24_TASK_ENV, ("SLURM_JOB_ID", "SLURM_JOBID", "SLURM_MEM_PER_NODE",
                                            "SLURM_CPUS_ON_NODE", "SLURM_JOB_START_TIME",
                                            "SLURM_JOB_END_TIME"))
    cases += recorded_cgroup_cases(name, S24_TASK_ENV)
    cases += config_cases(name, SLURM_CONFIG, 20)
    cases += state_cases(name, job_state_of(JOB_STATE, "9") + MACHINE_STATE[:6])
    return cases


def _htcondor_cases() -> list[Case]:
    """HTCondor: the job wrapper and the cron."""
    cases: list[Case] = []
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
    cases += state_cases(name, MACHINE_STATE)

    name = "htcondor-cron"
    cases += output_cases(name, "condor_status",
                          f"{harness_host()},true,1795400000\n", ())
    cases += [Case(name, f"condor_status:value:{label}", ("condor_status",),
                   outputs={"condor_status": f"{harness_host()},true,{text}\n"})
              for label, text in value_mutations("1795400000")]
    cases += [case for case in cgroup_cases(name) if "cpuinfo" in case.label]
    cases += config_cases(name, HTCONDOR_CONFIG, 30)
    cases += state_cases(name, MACHINE_STATE)
    return cases


def _lsf_cases() -> list[Case]:
    """LSF: the job starter, pre-exec, exports and post-exec, and the starter after a pre-exec."""
    cases: list[Case] = []
    lsf_variables = ("LSB_JOBID", "LSB_JOBINDEX", "LSB_MCPU_HOSTS", "LSB_DJOB_NUMPROC",
                     "TMPDIR", "LSF_BINDIR", "XDG_RUNTIME_DIR")
    for name in ("lsf-starter", "lsf-pre-exec", "lsf-exports"):
        cases += env_cases(name, LSF_ENV, lsf_variables + (
            ("LSB_JOB_EXECUSER", "USER") if name == "lsf-pre-exec" else ()))
        cases += env_file_cases(name, LSF_ENV)
        cases += output_cases(name, "bjobs", BJOBS_L, ())
        cases += [Case(name, f"bjobs:value:{label}", ("bjobs",),
                       outputs={"bjobs": BJOBS_L.replace(RUN_LIMIT_MINUTES, text)})
                  for label, text in value_mutations(RUN_LIMIT_MINUTES)]
        cases += config_cases(name, LSF_CONFIG, 30)
        cases += state_cases(name, MACHINE_STATE)
    cases += sample(cgroup_cases("lsf-starter"), 50)
    name = "lsf-post-exec"
    cases += env_cases(name, LSF_ENV, ("LSB_JOBID", "LSB_JOBINDEX", "XDG_RUNTIME_DIR"))
    cases += config_cases(name, LSF_CONFIG, 40)
    cases += state_cases(name, _lsf_state(JOB_STATE))
    name = "lsf-starter-after-pre-exec"
    cases += env_cases(name, LSF_ENV, ("LSB_JOBID", "LSB_JOBINDEX"))
    cases += sample(cgroup_cases(name), 50)
    cases += state_cases(name, _lsf_state(JOB_STATE))
    return cases


def _gridengine_cases() -> list[Case]:
    """Grid Engine: the prolog, the starter (with and without a prolog before it) and the epilog."""
    cases: list[Case] = []
    # Grid Engine: the prolog (root, outside the job) and the starter (the job's process,
    # without a prolog before it) gather the same facts; the starter after a prolog only
    # completes what the prolog left pending; the epilog removes the job.
    ge_variables = ("JOB_ID", "SGE_TASK_ID", "PE_HOSTFILE", "SGE_JOB_SPOOL_DIR",
                    "XDG_RUNTIME_DIR")
    starter_variables = ("TMPDIR", "SGE_STARTER_SHELL_PATH", "SGE_STARTER_SHELL_START_MODE",
                         "SGE_STARTER_USE_LOGIN_SHELL")
    for name, environ in (("gridengine-prolog", GE_PROLOG_ENV),
                          ("gridengine-starter", GE_STARTER_ENV)):
        prolog = name == "gridengine-prolog"
        cases += env_cases(name, environ, ge_variables + (
            ("TMP", "USER", "LOGNAME") if prolog else starter_variables))
        # An array task; a job without a parallel environment (NSLOTS on NHOSTS=1 hosts).
        cases += _in_env(name, {**environ, "SGE_TASK_ID": "2"},
                         env_cases(name, {**environ, "SGE_TASK_ID": "2"}, ("SGE_TASK_ID",)))
        if prolog:
            without_pe = {**environ, "PE_HOSTFILE": None}
            cases += _in_env(name, without_pe, env_cases(name, without_pe, ("NSLOTS", "NHOSTS")))
        cases += env_file_cases(name, environ)
        cases += output_cases(name, "qstat", QSTAT_JOB, ())
        cases += [Case(name, f"qstat:h_rt:{label}", ("qstat", "h_rt"),
                       outputs={"qstat": QSTAT_JOB.replace("h_rt=3600", f"h_rt={text}")})
                  for label, text in value_mutations("3600")]
        queue_cases = output_cases(name, "qstat-F", QSTAT_QUEUE_INSTANCE, ())
        queue_cases += [Case(name, f"qstat-F:h_rt:{label}", ("qstat", "h_rt"), outputs={
                        "qstat-F": QSTAT_QUEUE_INSTANCE.replace("qf:h_rt=infinity",
                                                                f"qf:h_rt={text}")})
                        for label, text in value_mutations("infinity")]
        for case in queue_cases:  # a job that requested no run time: both are the queue's
            case.outputs["qstat"] = QSTAT_JOB_WITHOUT_RUN_LIMIT
            # What qstat -F prints are the job's queue instance's limits: a line may say so.
            case.culprits = (*case.culprits, "queue instance")
        cases += queue_cases
        cases += spool_config_cases(name, environ, ("h_vmem", "h_cpu", "host_slots")
                                    if prolog else ("h_vmem", "handle_as_binary"))
        cases += pe_hostfile_cases(name, slots=prolog)
        if prolog:
            cases += gridengine_hostile_path_cases(name)
        cases += config_cases(name, GE_CONFIG, 30)
        cases += state_cases(name, MACHINE_STATE)
    cases += sample(cgroup_cases("gridengine-starter"), 50)
    cases += _gridengine_variants("gridengine-starter", GE_STARTER_ENV)
    name = "gridengine-epilog"
    cases += env_cases(name, GE_EPILOG_ENV, ("JOB_ID", "SGE_TASK_ID", "XDG_RUNTIME_DIR"))
    cases += config_cases(name, GE_CONFIG, 40)
    cases += state_cases(name, _gridengine_state(JOB_STATE))
    name = "gridengine-starter-after-prolog"
    # No --env-file: each argument of mjf-gridengine-starter is the job's.
    cases += [case for case in env_cases(name, GE_STARTER_METHOD_ENV, (
        "JOB_ID", "SGE_TASK_ID", "SGE_JOB_SPOOL_DIR", "SGE_STARTER_SHELL_PATH"))
        if not case.via_env_file]
    cases += spool_config_cases(name, GE_STARTER_METHOD_ENV, ("h_vmem",))
    cases += sample(cgroup_cases(name), 50)
    cases += state_cases(name, _gridengine_state(JOB_STATE))
    cases += _gridengine_variants(name, GE_STARTER_METHOD_ENV)
    return cases


def _standalone_cases() -> list[Case]:
    """`mjf run` and `mjf machine`."""
    cases: list[Case] = []
    name = "mjf-run"
    for option, value in (("--cpus", "2"), ("--wall-limit", "3600"),
                          ("--memory", "1073741824"), ("--job-id", "job-7")):
        cases += [Case(name, f"option:{option}:{label}", (option, text[:40]),
                       argv=(option, text), effect=option_effect(option, text))
                  for label, text in value_mutations(value, nul=False)]
    cases += env_cases(name, RUN_ENV, ("TMPDIR", "XDG_RUNTIME_DIR"))
    cases += env_file_cases(name, RUN_ENV)
    cases += sample(cgroup_cases(name), 50)
    cases += config_cases(name, COMMON_CONFIG, 40)
    cases += state_cases(name, MACHINE_STATE)

    name = "mjf-machine"
    cases += [case for case in cgroup_cases(name) if "cpuinfo" in case.label]
    cases += config_cases(name, COMMON_CONFIG, 80)
    cases += state_cases(name, MACHINE_STATE)
    return cases


def build_cases() -> list[Case]:
    """Every case, in the order they are made."""
    cases = [*_slurm_cases(), *_htcondor_cases(), *_lsf_cases(), *_gridengine_cases(),
             *_standalone_cases(), *_pbs_cases()]
    cases += _record_cases(cases)

    # [mjf] jobstatus spelled and broken every way, where a job runner makes the job's
    # directory and exports it, and where a TaskProlog exports it after a Prolog.
    for name in ("slurm-taskprolog", "htcondor-wrapper", "lsf-starter", "gridengine-starter",
                 "mjf-run"):
        cases += jobstatus_config_cases(name, ENTRIES[name].config)

    by_entry: dict[str, list[Case]] = {}
    for case in cases:
        by_entry.setdefault(case.entry, []).append(case)
    for entry, entry_cases in by_entry.items():
        cases += with_on_error_fail(entry_cases, 12)
        # A sixteenth of the cases again where the site offers $JOBSTATUS.
        cases += with_jobstatus(entry_cases, 16, ENTRIES[entry].environ)
    # The config's drop-ins, for every entry point (made last: the cases before keep the
    # garbage they drew).
    for name in ENTRIES:
        cases += drop_in_cases(name, ENTRIES[name].config)
    return cases


# The days a record of a case may be filed under (record_store.day_name, UTC): the clock's
# (today's, or tomorrow's where the corpus runs over midnight), the recorded 24.11 Epilog's
# SLURM_JOB_END_TIME, the Grid Engine usage file's end_time.
RECORD_DAYS = tuple(sorted({time.strftime("%Y-%m-%d", time.gmtime(when)) for when in (
    time.time(), time.time() + 86400, int(S24_EPILOG_ENV["SLURM_JOB_END_TIME"]),
    int(GE_USAGE.split(b"end_time=")[1].split(b"\n")[0]))}))
# The end-of-job hooks (Entry.writes_records), in the order their record cases are made (the
# garbage file_mutations draws follows the order cases are made in: keep it).
RECORD_WRITERS = ("slurm-epilog", "slurm-24.11-epilog", "lsf-post-exec", "gridengine-epilog",
                  "htcondor-job-exit", "pbs-end", "pbs-epilogue")
assert set(RECORD_WRITERS) == {name for name, entry in ENTRIES.items() if entry.writes_records}
# Where each end-of-job hook's job lives (relative to the case directory): gone after it.
ENDED_JOB_DIRS = {"slurm-epilog": "base/jobs/3", "slurm-24.11-epilog": "base/jobs/9",
                  "lsf-post-exec": "base/jobs/1234", "gridengine-epilog": "base/jobs/13",
                  "htcondor-job-exit": f"scratch/.mjf/jobs/{job_dir_name('vm#1.0#1795319385')}",
                  "pbs-end": f"base/jobs/{job_dir_name(PBS_JOB)}",
                  "pbs-epilogue": f"base/jobs/{job_dir_name(PBS_CLASSIC_JOB)}"}
assert set(ENDED_JOB_DIRS) == set(RECORD_WRITERS)
# What the Slurm TaskEpilog of job 3 may write: its report in the job's usage/.
TASKEPILOG_WRITES = "jobs/3/usage"


def _stdin_cases(name: str) -> list[Case]:
    """The final job ad on the job-exit hook's stdin broken as a whole and attribute by
    attribute (backends.htcondor.ad_cases: without a job id set-up fails), and larger than an ad
    can be (classad.MAX_AD_BYTES, as a sparse file). Only a broken id can name another
    job: elsewhere the job's directory goes."""
    from mjf_hooks.classad_files import MAX_AD_BYTES

    cases = ad_cases(name, "_CONDOR_JOB_AD", FINAL_AD_PATH, FINAL_AD, (
        "GlobalJobId", "ClusterId", "ProcId", "RemoteUserCpu", "RemoteSysCpu",
        "ResidentSetSize", "JobDuration", "Owner"))
    for case in cases:
        (data,) = case.files.values()
        case.files = {FINAL_AD_PATH: data}
        case.culprits = ("stdin", "job ad", *case.culprits[2:])
        attribute = case.label.split(":")[1] if case.label.count(":") == 2 else None
        if attribute not in (None, "GlobalJobId", "ClusterId", "ProcId"):
            case.removes_job = True
    cases.append(Case(name, f"{FINAL_AD_PATH}:larger-than-an-ad", ("stdin", "job ad"),
                      files={FINAL_AD_PATH: ("sparse", MAX_AD_BYTES + 4096)},
                      effect=SETUP_FAILS))
    return cases


def _taskepilog_cases(name: str) -> list[Case]:
    """What the TaskEpilog reads - the job cgroup's counters - and the job's usage/ where
    it writes its report, broken. The counters only give values: a report without them."""
    cases = []
    for label, text in value_mutations("1500000"):
        cases.append(Case(name, f"cgroup:cpu.stat:usage_usec:{label}", ("cpu.stat",), files={
            f"root/{V2_JOB}/cpu.stat": CPU_STAT.replace(b"1500000", text.encode(
                "utf-8", "surrogateescape"), 1)}))
    for label, data in file_mutations(CPU_STAT):
        cases.append(Case(name, f"cgroup:cpu.stat:{label}", ("cpu.stat",),
                          files={f"root/{V2_JOB}/cpu.stat": data}))
    for label, text in value_mutations("104857600"):
        cases.append(Case(name, f"cgroup:memory.peak:{label}", ("memory.peak",), files={
            f"root/{V2_JOB}/memory.peak": text.encode("utf-8", "surrogateescape") + b"\n"}))
    usage = "base/jobs/3/usage"
    planted = [
        ("usage-missing", {usage: None}, DROPS),  # a Prolog of a site that kept no records
        ("usage-file", {usage: b"x"}, SETUP_FAILS),
        ("usage-symlink", {usage: ("symlink", "@D@/etc")}, SETUP_FAILS),
        ("report-symlink", {f"{usage}/report": ("symlink", "@D@/etc/outside")}, DROPS),
        ("report-fifo", {f"{usage}/report": ("fifo",)}, DROPS),
        ("report-garbage", {f"{usage}/report": b"\xff\x00" * 100}, DROPS),
        ("report-directory", {f"{usage}/report": DIRECTORY}, SETUP_FAILS),
        ("report-temp-leftover", {f"{usage}/.report.1.abcd": b"cpu_secs 1"}, DROPS),
    ]
    cases += [Case(name, f"state:{label}", ("/base", "usage"), files=files, effect=effect)
              for label, files, effect in planted]
    return cases


def _pbs_job_state(job: str):
    """JOB_STATE for a PBS job (its directory named after its id)."""
    return [(label, path.replace("jobs/3", f"jobs/{job_dir_name(job)}"), data)
            for label, path, data in JOB_STATE]


# What leaves a launch without the job's jobfeatures/: nothing to print, set-up fails.
PBS_LAUNCH_WITHOUT_DIRECTORY = ("state:job-symlink", "state:job-file",
                                "state:jobfeatures-missing")


def _pbs_usage(name: str) -> list[Case]:
    return [Case(name, "argv:extra-argument", ("arguments",), argv=(PBS_WORDS, "extra"),
                 effect=USAGE)]


def _pbs_qstat_cases(name: str) -> list[Case]:
    """What ``qstat -f JOB`` prints an OpenPBS prologue (whose argv names only the job, its
    user and group) broken as a whole, attribute by attribute, naming another job; failing.
    It only gives values: set-up goes on with what the argv says."""
    from mjf_hooks.external_command import CommandError

    # Where qstat gives nothing of the job, its CPUs are unknown (the argv has none).
    lost = ("qstat", "allocated_cpu")
    cases = [Case(name, "pbs-qstat:fails", lost, outputs={
                 "pbs-qstat": CommandError("/opt/pbs/bin/qstat exited with status 153")}),
             Case(name, "pbs-qstat:hangs", lost, outputs={
                 "pbs-qstat": CommandError("/opt/pbs/bin/qstat did not finish within 5 s")})]
    for label, mutated in file_mutations(PBS_QSTAT_F.encode()):
        if isinstance(mutated, bytes):
            cases.append(Case(name, f"pbs-qstat:{label}", lost,
                              outputs={"pbs-qstat": mutated.decode("utf-8", "replace")}))
    for field in ("Job Id", "exec_vnode", "Resource_List.walltime", "Resource_List.mem",
                  "Resource_List.ncpus", "Resource_List.nodect", "euser"):
        separator = ": " if field == "Job Id" else " = "
        original = PBS_QSTAT_F.split(f"{field}{separator}", 1)[1].split("\n", 1)[0]
        for label, text in value_mutations(original):
            mutated = PBS_QSTAT_F.replace(f"{field}{separator}{original}\n",
                                          f"{field}{separator}{text}\n", 1)
            cases.append(Case(name, f"pbs-qstat:{field}:{label}", (*lost, field),
                              outputs={"pbs-qstat": mutated}))
    return cases


def _pbs_cases() -> list[Case]:
    """PBS: the execjob roles (the job's attributes on stdin, as the hook adapter hands
    them), the classic prologue (OpenPBS's argv and qstat -f; Torque's argv) and epilogue,
    the profile.d lines (PBS_JOBID)."""
    cases: list[Case] = []
    name = "pbs-begin"
    cases += pbs_stdin_cases(name, PBS_STDIN["begin"], PBS_FILES[PBS_STDIN["begin"]], PBS_JOB, (
        "id", "euser", "egroup", "Job_Name", "exec_vnode", "queue", "Resource_List.mem",
        "Resource_List.walltime", "Resource_List.ncpus", "Resource_List.place", "vnodes",
        "node"))
    # The other recorded jobs (a CPU-time limit, no limits, two chunks, an array task).
    cases += [Case(name, f"recorded:{other}", ("stdin",),
                   files={PBS_STDIN["begin"]: pbs_hook_input(other)})
              for other in ("begin-cput", "begin-plain", "begin-multi", "begin-arr-2")]
    cases += config_cases(name, PBS_CONFIG, 30)
    cases += state_cases(name, MACHINE_STATE)
    cases += state_cases(name, _pbs_job_state(PBS_JOB))
    cases += _pbs_usage(name)

    name = "pbs-launch"
    cases += pbs_stdin_cases(name, PBS_STDIN["launch"], PBS_FILES[PBS_STDIN["launch"]],
                             PBS_JOB, ("id", "euser", "exec_vnode"))
    for case in config_cases(name, PBS_CONFIG, 15):
        # A base_dir other than the one the begin wrote to holds no directory of the job.
        settings = _config_model(case.config) or {}
        if case.effect == DROPS and settings.get(("mjf", "base_dir")) != "@D@/base":
            case.effect, case.culprits = SETUP_FAILS, (*case.culprits, "execjob_begin")
        cases.append(case)
    for case in state_cases(name, _pbs_job_state(PBS_JOB)):
        if case.label in PBS_LAUNCH_WITHOUT_DIRECTORY:
            case.effect = SETUP_FAILS
        cases.append(case)
    cases += _pbs_usage(name)

    name = "pbs-end"
    cases += pbs_stdin_cases(name, PBS_STDIN["end"], PBS_FILES[PBS_STDIN["end"]], PBS_JOB, (
        "id", "euser", "queue", "exec_vnode", "resources_used.cput", "resources_used.mem",
        "resources_used.walltime"))
    cases += config_cases(name, PBS_CONFIG, 20)
    cases += state_cases(name, _pbs_job_state(PBS_JOB) + MACHINE_STATE[-4:])
    cases += _pbs_usage(name)

    name = "pbs-prologue"
    cases += pbs_argv_cases(name, PBS_PROLOGUE_WORDS,
                            [("job id", "qstat", "allocated_cpu"), ("user",), ("group",)],
                            (0, 1, 2), PBS_CLASSIC_JOB)
    cases += _pbs_qstat_cases(name)
    cases += config_cases(name, PBS_CONFIG, 15)
    cases += state_cases(name, _pbs_job_state(PBS_CLASSIC_JOB))

    name = "pbs-prologue-torque"
    cases += pbs_argv_cases(name, PBS_TORQUE_WORDS, [
        ("job id",), ("user",), ("group",), ("Job_Name",),
        ("Resource_List", "walltime", "mem", "nodes", "qstat"), ("queue",), ("Account_Name",)],
        (0, 1, 4), PBS_CLASSIC_JOB)
    cases += config_cases(name, PBS_CONFIG, 10)

    name = "pbs-epilogue"
    cases += pbs_argv_cases(name, PBS_EPILOGUE_WORDS, [
        ("job id",), ("user",), ("group",), ("Job_Name",), ("session",), ("Resource_List",),
        ("resources_used", "cput", "mem", "walltime"), ("queue",), ("account",), ("exit",)],
        (0, 6, 7), PBS_CLASSIC_JOB)
    cases += config_cases(name, PBS_CONFIG, 15)
    cases += state_cases(name, _pbs_job_state(PBS_CLASSIC_JOB))

    name = "pbs-profile"
    cases += env_cases(name, PBS_PROFILE_ENV, ("PBS_JOBID",))
    cases += [Case(name, f"env:PBS_JOBID:{label}", ("PBS_JOBID",), env={"PBS_JOBID": text},
                   effect=DROPS if pbs_job_id(text) else SETUP_FAILS)
              for label, text in PBS_HOSTILE_IDS + PBS_OTHER_IDS]
    for case in env_file_cases(name, PBS_PROFILE_ENV):
        case.culprits = (*case.culprits, "PBS_JOBID")
        cases.append(case)
    cases += config_cases(name, PBS_CONFIG, 10)
    cases += state_cases(name, _pbs_job_state(PBS_JOB))
    cases += _pbs_usage(name)
    return cases


# What names the job an end-of-job hook ends (or where its directory is).
JOB_NAMING = ("SLURM_JOB_ID", "SLURM_JOBID", "LSB_JOBID", "LSB_JOBINDEX", "JOB_ID",
              "SGE_TASK_ID", "_CONDOR_SCRATCH_DIR", "MJF_CONFIG")


def _names_the_job(case: Case) -> bool:
    """Whether a case whose set-up goes on still ends the recorded job, in the recorded
    base_dir: it changes no variable that names the job (nor the --env-file that holds
    them), and leaves the job's directory and the final job ad's id as they were - so its
    directory must go, as the baseline's does."""
    if case.effect != DROPS or case.via_env_file or any(name in JOB_NAMING for name in case.env):
        return False
    if FINAL_AD_PATH in case.files or case.argv[:1] == (PBS_WORDS,) or any(
            path in PBS_STDIN.values() for path in case.files):
        return False  # decided with the case (_stdin_cases, backends.pbs.pbs_effect)
    jobs = ENDED_JOB_DIRS[case.entry]
    return not any(path == jobs or path.startswith(jobs + "/") or path in ("base", "base/jobs")
                   for path in case.files)


def _record_cases(cases: list[Case]) -> list[Case]:
    """Job records ([records] dir): each end-of-job hook's cases again where the site keeps
    them, its config's [records] broken, the records directory broken, and what the hook
    reads of what the job used broken; the new entry points' cases (HTCondor's job-exit
    hook, Slurm's TaskEpilog)."""
    new: list[Case] = []
    name = "htcondor-job-exit"
    exit_cases = env_cases(name, CONDOR_EXIT_ENV, ("_CONDOR_SCRATCH_DIR",))
    exit_cases += env_file_cases(name, CONDOR_EXIT_ENV)
    exit_cases += _stdin_cases(name)
    exit_cases += config_cases(name, HTCONDOR_CONFIG, 20)
    # Leftovers in the job's directory the wrapper made in the scratch (the job's user's).
    job = ENDED_JOB_DIRS[name]
    exit_cases += [Case(name, f"state:{label}", ("scratch/.mjf", os.path.basename(path)),
                        files={path.replace("base/jobs/3", job): data},
                        effect=state_effect(name, label))
                   for label, path, data in JOB_STATE]
    new += exit_cases
    for writer in RECORD_WRITERS:
        variants = with_records([case for case in [*cases, *exit_cases] if case.entry == writer])
        for case in variants:
            if case.removes_job is None and _names_the_job(case):
                case.removes_job = True
        new += variants
        config = ENTRIES[writer].config + RECORDS_SECTION
        for case in config_cases(writer, config, 25):
            case.label = "records-" + case.label
            case.records = True
            new.append(case)
        new += records_state_cases(writer, RECORD_DAYS)
    new += usage_file_cases("gridengine-epilog", GE_USAGE_PATH, GE_USAGE, True)
    new += usage_file_cases("slurm-epilog", "base/jobs/3/usage/report", USAGE_REPORT.encode(),
                            True)
    new += usage_file_cases("slurm-24.11-epilog", "base/jobs/9/usage/report",
                            USAGE_REPORT.encode(), True)

    name = "slurm-taskepilog"
    new += env_cases(name, SLURM_TASK_EPILOG_ENV, ("SLURM_SCRIPT_CONTEXT", "SLURM_JOB_ID",
                                                   "SLURM_JOBID"))
    new += env_file_cases(name, SLURM_TASK_EPILOG_ENV)
    new += _taskepilog_cases(name)
    new += sample(cgroup_cases(name), 30)
    new += config_cases(name, ENTRIES[name].config, 25)
    return new


def harness_host():
    return os.uname().nodename.split(".")[0]


CASES = build_cases()
assert len({case.id for case in CASES}) == len(CASES), "case ids must be unique"


