"""LSF's entry points: the job starter, the pre-exec and the post-exec; and which of
LSF's variables set-up cannot do without."""

from __future__ import annotations

import os

from mjf_hooks.hooks import lsf as lsf_hook
from tests.corpus.entries import COMMON_CONFIG, Entry, options, prepare
from tests.corpus.mutations import (
    DROPS,
    MAX_JOB_ID,
    PATH,
    SETUP_FAILS,
    digits,
    known_user,
    recorded_env,
)

LSF_CONFIG = COMMON_CONFIG + "[lsf]\nbjobs = @D@/bin/bjobs\nquery_bjobs = yes\n"
# TMPDIR: the job's directory LSF makes (LSB_SET_TMPDIR=y), which a root pre-exec measures.
LSF_ENV = {**recorded_env("lsf-10.1/single-host.env"), "TMPDIR": "@D@/scratch/1234.tmpdir",
           "XDG_RUNTIME_DIR": "@D@/xdg"}
LSF_COMMAND = "echo a b"  # "%USRCMD": one shell command line


def lsf_environment_effect(entry: str, recorded: dict[str, str | None],
                           environ: dict[str, str | None], jobstatus: bool = False) -> str:
    """Set-up fails where the hook cannot tell which job it is for (LSB_JOBID and
    LSB_JOBINDEX), or - a root pre-exec - whose the job's directory is (the user of
    LSB_JOB_EXECUSER, else USER)."""
    def value(name):
        return environ.get(name) or ""

    if not digits(value("LSB_JOBID"), MAX_JOB_ID) or not digits(value("LSB_JOBINDEX") or "0"):
        return SETUP_FAILS
    if entry == "lsf-pre-exec" and os.geteuid() == 0 and not known_user(
            value("LSB_JOB_EXECUSER") or value("USER")):
        return SETUP_FAILS
    return DROPS


# -- what the generic model takes from here (backends/__init__.py hands it over) -----------

CONFIG_KEYS = {("lsf", "bjobs"): PATH, ("lsf", "query_bjobs"): ("yes", "no")}
# `bjobs -l JOBID`'s part that gives the job's run limit (30 minutes), as every LSF prints it.
RUN_LIMIT_MINUTES = "30.0"
BJOBS_L = f" RUNLIMIT                \n {RUN_LIMIT_MINUTES} min                \n"
COMMANDS = {"bjobs": lambda argv: ("bjobs", BJOBS_L)}
ALSO_NAMED = {"LSF_BINDIR": ("bjobs",)}
ENV_FILE_CULPRITS = ("LSB_",)
# The starter runs the job, as a shell would: 127 where its command cannot be executed.
STARTER = {"exec_fails_exit": 127, "set_up": lsf_environment_effect}


def lsf(role):
    def call(sandbox, case, environ):
        argv = options(sandbox, case) + [role] + ([LSF_COMMAND] if role == "starter" else [])
        return sandbox.run(lambda: lsf_hook.main(argv), environ, case.outputs)
    return call


ENTRIES = [
    Entry("lsf-starter", LSF_ENV, LSF_CONFIG, lsf("starter"),
          job_argv=["/bin/sh", "-c", LSF_COMMAND], command=("mjf-lsf", ["starter"]),
          store_role="creates", **STARTER),
    # The job starter's text in the job's shell: `export` lines for it to evaluate.
    Entry("lsf-exports", LSF_ENV, LSF_CONFIG, lsf("exports"),
          command=("mjf-lsf", ["exports"]), store_role="creates",
          set_up=lsf_environment_effect),
    Entry("lsf-pre-exec", LSF_ENV, LSF_CONFIG, lsf("pre-exec"),
          command=("mjf-lsf", ["pre-exec"]), store_role="creates",
          set_up=lsf_environment_effect),
    Entry("lsf-post-exec", LSF_ENV, LSF_CONFIG, lsf("post-exec"),
          prepare=prepare(lsf("pre-exec"), LSF_ENV), command=("mjf-lsf", ["post-exec"]),
          store_role="removes", writes_records=True, set_up=lsf_environment_effect),
    Entry("lsf-starter-after-pre-exec", LSF_ENV, LSF_CONFIG, lsf("starter"),
          job_argv=["/bin/sh", "-c", LSF_COMMAND],
          prepare=prepare(lsf("pre-exec"), LSF_ENV), command=("mjf-lsf", ["starter"]),
          store_role="completes", **STARTER),
]
