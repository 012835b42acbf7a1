"""Grid Engine's entry points: the prolog, the epilog and the starter (as the queue's
starter_method and by role), on the recorded job 13 (Grid Engine 8.1.9)."""

from __future__ import annotations

from mjf_hooks.hooks import gridengine as gridengine_hook
from tests.conftest import FIXTURES
from tests.corpus.entries import COMMON_CONFIG, Entry, options, prepare
from tests.corpus.mutations import (
    GE_JOB,
    GE_PE_HOSTFILE,
    GE_SPOOL_CONFIG,
    GE_SPOOL_DIR,
    gridengine_env,
    gridengine_job_start,
    spool_settings,
)

GE_CONFIG = COMMON_CONFIG + "[gridengine]\nqstat = @D@/bin/qstat\nquery_qstat = yes\n"
# Grid Engine's shepherd's usage file of a job (recorded, tests/fixtures/gridengine-8.1.9).
GE_USAGE_PATH = "active_jobs/13.1/usage"
# Task 2 of job 14, run first where a hook ends jobs: its own spool directory.
GE_TASK_SPOOL_DIR = GE_SPOOL_DIR.replace("/13.1", "/14.2")
GE_TASK_SPOOL_FILES = {
    f"{GE_TASK_SPOOL_DIR[4:]}/config": GE_SPOOL_CONFIG.replace(b"/13.1/", b"/14.2/"),
    f"{GE_TASK_SPOOL_DIR[4:]}/pe_hostfile": GE_PE_HOSTFILE}
GE_USAGE = (FIXTURES / "gridengine-8.1.9/usage").read_bytes()
GE_PROLOG_ENV = gridengine_env("prolog")
GE_STARTER_ENV = gridengine_env("starter")
GE_EPILOG_ENV = gridengine_env("epilog")
# mjf-gridengine-starter (the queue's starter_method) takes no options: MJF_CONFIG names
# the config.
GE_STARTER_METHOD_ENV = {**GE_STARTER_ENV, "MJF_CONFIG": "@D@/mjf.conf"}
# The recorded job: posix_compliant, with a login shell - /bin/sh, as "-sh", runs its script.
GE_JOB_FILE, GE_JOB_ARGV = "/bin/sh", ["-sh", *GE_JOB]
assert gridengine_job_start(GE_STARTER_ENV, spool_settings(GE_SPOOL_CONFIG)) == (
    GE_JOB_FILE, GE_JOB_ARGV)


def gridengine(role):
    def call(sandbox, case, environ):
        job = [sandbox.expand(arg) for arg in GE_JOB] if role == "starter" else []
        argv = [*options(sandbox, case), role, *job]
        return sandbox.run(lambda: gridengine_hook.main(argv), environ, case.outputs)
    return call


def gridengine_starter_method(sandbox, case, environ):
    """mjf-gridengine-starter: every argument is the job's (the config comes from MJF_CONFIG)."""
    job = [sandbox.expand(arg) for arg in GE_JOB]
    return sandbox.run(lambda: gridengine_hook.starter_main(job), environ, case.outputs)


def prepare_two_gridengine_jobs(sandbox):
    """Job 13 and task 2 of job 14, each after its prolog."""
    prepare(gridengine("prolog"), GE_PROLOG_ENV)(sandbox)
    prepare(gridengine("prolog"), {**GE_PROLOG_ENV, "JOB_ID": "14", "SGE_TASK_ID": "2",
                                   "SGE_JOB_SPOOL_DIR": GE_TASK_SPOOL_DIR,
                                   "PE_HOSTFILE": f"{GE_TASK_SPOOL_DIR}/pe_hostfile"})(sandbox)


ENTRIES = [
    Entry("gridengine-prolog", GE_PROLOG_ENV, GE_CONFIG, gridengine("prolog"),
          command=("mjf-gridengine", ["prolog"])),
    Entry("gridengine-epilog", GE_EPILOG_ENV, GE_CONFIG, gridengine("epilog"),
          prepare=prepare_two_gridengine_jobs, command=("mjf-gridengine", ["epilog"])),
    Entry("gridengine-starter", GE_STARTER_ENV, GE_CONFIG, gridengine("starter"),
          job_argv=GE_JOB_ARGV, job_file=GE_JOB_FILE, command=("mjf-gridengine", ["starter"])),
    Entry("gridengine-starter-after-prolog", GE_STARTER_METHOD_ENV, GE_CONFIG,
          gridengine_starter_method, job_argv=GE_JOB_ARGV, job_file=GE_JOB_FILE,
          prepare=prepare(gridengine("prolog"), GE_PROLOG_ENV),
          command=("mjf-gridengine-starter", None)),
]
