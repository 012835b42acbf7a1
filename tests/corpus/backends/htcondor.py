"""HTCondor's entry points: the job wrapper, the job-exit hook and the startd cron."""

from __future__ import annotations

from mjf_hooks.hooks import htcondor as htcondor_hook
from tests.conftest import FIXTURES
from tests.corpus.entries import COMMON_CONFIG, JOB_ARGV, Entry, options, prepare

HTCONDOR_CONFIG = COMMON_CONFIG + (
    "[htcondor]\njob_id = global\nwall_limit_attribute = AllowedJobDuration\n"
    "wall_limit_unit = minutes\nnext_wrapper = @D@/bin/next\n")
# HTCondor's job-exit hook: the final job ad on stdin (recorded), its GlobalJobId the
# wrapper's job's (JOB_AD's, whose directory the wrapper made in the scratch first).
FINAL_AD = (FIXTURES / "htcondor-23.9/job-exit-hook-stdin.ad").read_bytes().replace(
    b'GlobalJobId = "vm#1.0#1795630282"', b'GlobalJobId = "vm#1.0#1795319385"')
FINAL_AD_PATH = "final.ad"  # in the case directory: the hook's stdin
CONDOR_EXIT_ENV = {"_CONDOR_SCRATCH_DIR": "@D@/scratch", "TMPDIR": "@D@/scratch",
                   "_CONDOR_SLOT": "slot1_1", "BATCH_SYSTEM": "HTCondor"}
CONDOR_ENV = {
    "_CONDOR_SCRATCH_DIR": "@D@/scratch", "TMPDIR": "@D@/scratch",
    "_CONDOR_JOB_AD": "@D@/scratch/.job.ad", "_CONDOR_MACHINE_AD": "@D@/scratch/.machine.ad",
    "_CONDOR_WRAPPER_ERROR_FILE": "@D@/scratch/.job_wrapper_failure",
    "_CONDOR_SLOT": "slot1_1", "BATCH_SYSTEM": "HTCondor", "MJF_CONFIG": "@D@/mjf.conf",
}


def wrapper(sandbox, case, environ):
    argv0 = ["mjf-htcondor-wrapper", *JOB_ARGV]
    return sandbox.run(htcondor_hook.wrapper_main, environ, case.outputs, argv0=argv0)


def job_exit(sandbox, case, environ):
    argv = options(sandbox, case)
    return sandbox.run(lambda: htcondor_hook.job_exit_main(argv), environ, case.outputs,
                       stdin=FINAL_AD_PATH)


def cron(sandbox, case, environ):
    argv = options(sandbox, case)
    return sandbox.run(lambda: htcondor_hook.cron_main(argv), environ, case.outputs)


ENTRIES = [
    Entry("htcondor-wrapper", CONDOR_ENV, HTCONDOR_CONFIG, wrapper,
          job_argv=["@D@/bin/next", *JOB_ARGV], command=("mjf-htcondor-wrapper", None)),
    Entry("htcondor-job-exit", CONDOR_EXIT_ENV, HTCONDOR_CONFIG, job_exit,
          prepare=prepare(wrapper, CONDOR_ENV), command=("mjf-htcondor-job-exit", []),
          stdin=FINAL_AD_PATH),
    Entry("htcondor-cron", CONDOR_ENV, HTCONDOR_CONFIG, cron,
          command=("mjf-htcondor-cron", [])),
]
