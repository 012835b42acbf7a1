"""LSF's entry points: the job starter, the pre-exec and the post-exec."""

from __future__ import annotations

from mjf_hooks.hooks import lsf as lsf_hook
from tests.corpus.entries import COMMON_CONFIG, Entry, options, prepare
from tests.corpus.mutations import recorded_env

LSF_CONFIG = COMMON_CONFIG + "[lsf]\nbjobs = @D@/bin/bjobs\nquery_bjobs = yes\n"
# TMPDIR: the job's directory LSF makes (LSB_SET_TMPDIR=y), which a root pre-exec measures.
LSF_ENV = {**recorded_env("lsf-10.1/single-host.env"), "TMPDIR": "@D@/scratch/1234.tmpdir",
           "XDG_RUNTIME_DIR": "@D@/xdg"}
LSF_COMMAND = "echo a b"  # "%USRCMD": one shell command line


def lsf(role):
    def call(sandbox, case, environ):
        argv = options(sandbox, case) + [role] + ([LSF_COMMAND] if role == "starter" else [])
        return sandbox.run(lambda: lsf_hook.main(argv), environ, case.outputs)
    return call


ENTRIES = [
    Entry("lsf-starter", LSF_ENV, LSF_CONFIG, lsf("starter"),
          job_argv=["/bin/sh", "-c", LSF_COMMAND], command=("mjf-lsf", ["starter"])),
    Entry("lsf-pre-exec", LSF_ENV, LSF_CONFIG, lsf("pre-exec"),
          command=("mjf-lsf", ["pre-exec"])),
    Entry("lsf-post-exec", LSF_ENV, LSF_CONFIG, lsf("post-exec"),
          prepare=prepare(lsf("pre-exec"), LSF_ENV), command=("mjf-lsf", ["post-exec"])),
    Entry("lsf-starter-after-pre-exec", LSF_ENV, LSF_CONFIG, lsf("starter"),
          job_argv=["/bin/sh", "-c", LSF_COMMAND],
          prepare=prepare(lsf("pre-exec"), LSF_ENV), command=("mjf-lsf", ["starter"])),
]
