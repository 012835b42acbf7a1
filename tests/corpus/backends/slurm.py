"""Slurm's entry points: the Prolog, Epilog, TaskProlog (Python and sh) and TaskEpilog,
as recorded on Slurm 22.05 and 24.11."""

from __future__ import annotations

from mjf_hooks.hooks import slurm as slurm_hook
from tests.corpus.entries import COMMON_CONFIG, RECORDS_SECTION, Entry, options, prepare, root
from tests.corpus.mutations import S24_HOOKS, S24_TREES, V2_JOB, recorded_env

SLURM_CONFIG = COMMON_CONFIG + "[slurm]\nscontrol = @D@/bin/scontrol\nscratch_dir = @D@/scratch\n"

SLURM_PROLOG_ENV = {**recorded_env("slurm-22.05/prolog-sbatch.env"),
                    "SLURM_CONF": "@D@/etc/slurm.conf"}
SLURM_2302_ENV = {**SLURM_PROLOG_ENV, "SLURM_JOB_START_TIME": "1795319470",
                  "SLURM_JOB_END_TIME": "1795323070"}
SLURM_MULTI_NODE_ENV = {**SLURM_PROLOG_ENV, "SLURM_JOB_CPUS_PER_NODE": "4(x2),2",
                        "SLURM_NODELIST": "vm[01-02],gpu7", "SLURMD_NODENAME": "vm02"}
SLURM_EPILOG_ENV = {**recorded_env("slurm-22.05/epilog.env"), "SLURM_CONF": "@D@/etc/slurm.conf"}
SLURM_TASK_ENV = {**recorded_env("slurm-22.05/taskprolog-batchstep.env"),
                  "SLURM_CONF": "@D@/etc/slurm.conf"}
# The TaskEpilog of the same task: Slurm gives it the TaskProlog's environment, its
# SLURM_SCRIPT_CONTEXT epilog_task.
SLURM_TASK_EPILOG_ENV = {**SLURM_TASK_ENV, "SLURM_SCRIPT_CONTEXT": "epilog_task"}
# What job 3's cgroup (v2, CGROUP_TREE) counted when its TaskEpilog ran: 1.5 s of CPU,
# a peak of 100 MiB - not recorded (the recorded hosts gave no TaskEpilog), the files the
# kernel keeps (cpu.stat's usage_usec, memory.peak).
CPU_STAT = b"usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n"
USAGE_TREE = {f"{V2_JOB}/cpu.stat": CPU_STAT, f"{V2_JOB}/memory.peak": b"104857600\n"}
USAGE_REPORT = "cpu_secs 1.5\npeak_memory_bytes 104857600\n"


def slurm_2411_env(entry):
    """A recorded Slurm 24.11 environment, SLURM_CONF moved into the case directory as the
    22.05 ones' (the recorded /etc/slurm/slurm.conf is not this host's). The job's uid and
    gid (4711) stay as recorded: the hooks use them only as numbers (the Prolog, as root,
    gives the job's directory to them), no user of that id need exist."""
    return {**recorded_env(f"slurm-24.11/{S24_HOOKS[entry]}.env"),
            "SLURM_CONF": "@D@/etc/slurm.conf"}


S24_PROLOG_ENV = slurm_2411_env("slurm-24.11-prolog")
S24_RUNINJOB_ENV = slurm_2411_env("slurm-24.11-runinjob-prolog")
S24_EPILOG_ENV = slurm_2411_env("slurm-24.11-epilog")
S24_TASK_ENV = slurm_2411_env("slurm-24.11-taskprolog")
# 24.11 gives the Prolog SLURM_JOB_NODELIST beside SLURM_NODELIST (22.05 only the latter).
S24_MULTI_NODE_ENV = {**S24_PROLOG_ENV, "SLURM_JOB_CPUS_PER_NODE": "4(x2),2",
                      "SLURM_JOB_NODELIST": "vm[01-02],gpu7", "SLURM_NODELIST": "vm[01-02],gpu7",
                      "SLURMD_NODENAME": "vm02", "SLURM_JOB_NUM_NODES": "3"}


def slurm(role=None):
    def call(sandbox, case, environ):
        argv = options(sandbox, case) + ([role] if role else [])
        return sandbox.run(lambda: slurm_hook.main(argv), environ, case.outputs)
    return call


def slurm_2411(role=None):
    """As slurm, the hook's own /proc/self/cgroup read from the fake tree too (the 24.11
    recordings have it: the Prolog asks it whether it runs inside the job's cgroups)."""
    call = slurm(role)

    def with_tree(sandbox, case, environ):
        sandbox.monkeypatch.setattr(slurm_hook, "read_text", sandbox.read_text)
        return call(sandbox, case, environ)
    return with_tree


def prepare_two_slurm_jobs(sandbox):
    """Jobs 3 and 33, each after its Prolog; job 3's task ended (its TaskEpilog, which
    reports what the job used where records are kept, and does nothing otherwise)."""
    prepare(slurm("prolog"), SLURM_PROLOG_ENV)(sandbox)
    prepare(slurm("prolog"), {**SLURM_PROLOG_ENV, "SLURM_JOB_ID": "33",
                              "SLURM_JOBID": "33"})(sandbox)
    prepare(slurm(), SLURM_TASK_EPILOG_ENV)(sandbox)


def prepare_slurm_2411(entry, jobs):
    """The 24.11 Prolog first, unbroken, for job 9 (and ``jobs``), in its own recorded
    /proc/self/cgroup (not in the job's cgroups); then the entry's tree again."""
    def prepare_jobs(sandbox):
        sandbox.write_files(root(S24_TREES["slurm-24.11-prolog"]))
        for job in ("9", *jobs):
            prepare(slurm_2411(), {**S24_PROLOG_ENV, "SLURM_JOB_ID": job,
                                   "SLURM_JOBID": job})(sandbox)
        sandbox.write_files(root(S24_TREES[entry]))
    return prepare_jobs


ENTRIES = [
    Entry("slurm-prolog", SLURM_PROLOG_ENV, SLURM_CONFIG, slurm(),
          command=("mjf-slurm", [])),
    Entry("slurm-epilog", SLURM_EPILOG_ENV, SLURM_CONFIG, slurm(),
          prepare=prepare_two_slurm_jobs, command=("mjf-slurm", []), tree=USAGE_TREE),
    # Where records are kept (always, here): the job's usage/ made by its Prolog.
    Entry("slurm-taskepilog", SLURM_TASK_EPILOG_ENV, SLURM_CONFIG + RECORDS_SECTION, slurm(),
          prepare=prepare(slurm("prolog"), SLURM_PROLOG_ENV), command=("mjf-slurm", []),
          tree=USAGE_TREE, real_proc=False),
    Entry("slurm-taskprolog", SLURM_TASK_ENV, SLURM_CONFIG, slurm("taskprolog"),
          prepare=prepare(slurm("prolog"), SLURM_PROLOG_ENV),
          command=("mjf-slurm", ["taskprolog"])),
    Entry("slurm-24.11-prolog", S24_PROLOG_ENV, SLURM_CONFIG, slurm_2411(),
          tree=S24_TREES["slurm-24.11-prolog"], command=("mjf-slurm", [])),
    Entry("slurm-24.11-runinjob-prolog", S24_RUNINJOB_ENV, SLURM_CONFIG, slurm_2411(),
          tree=S24_TREES["slurm-24.11-runinjob-prolog"], command=("mjf-slurm", []),
          real_proc=False),
    Entry("slurm-24.11-epilog", S24_EPILOG_ENV, SLURM_CONFIG, slurm_2411(),
          tree=S24_TREES["slurm-24.11-epilog"],
          prepare=prepare_slurm_2411("slurm-24.11-epilog", ("33",)), command=("mjf-slurm", [])),
    Entry("slurm-24.11-taskprolog", S24_TASK_ENV, SLURM_CONFIG, slurm_2411("taskprolog"),
          tree=S24_TREES["slurm-24.11-taskprolog"],
          prepare=prepare_slurm_2411("slurm-24.11-taskprolog", ()),
          command=("mjf-slurm", ["taskprolog"])),
]
