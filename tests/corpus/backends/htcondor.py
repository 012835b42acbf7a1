"""HTCondor's entry points: the job wrapper, the job-exit hook and the startd cron; and
the model of what HTCondor's input means to them: the ads (which lines name the job),
the variables the wrapper cannot do without, the wrapper it is chained to."""

from __future__ import annotations

from mjf_hooks.hooks import htcondor as htcondor_hook
from tests.conftest import FIXTURES
from tests.corpus.entries import COMMON_CONFIG, JOB_ARGV, Entry, options, prepare
from tests.corpus.mutations import (
    DROPS,
    EXEC_FAILS,
    PATH,
    SETUP_FAILS,
    Case,
    config_model,
    encoded,
    file_mutations,
    value_mutations,
)

JOB_AD = (FIXTURES / "htcondor-23.9/job.ad").read_bytes()
MACHINE_AD = (FIXTURES / "htcondor-23.9/machine.ad").read_bytes()
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


# What the wrapper cannot do without: its scratch directory and its job ad (without the ad
# it cannot tell the job's id). The rest only leaves keys out.
_CONDOR_ESSENTIAL = ("_CONDOR_SCRATCH_DIR", "_CONDOR_JOB_AD")


def wrapper_environment_effect(entry: str, recorded: dict[str, str | None],
                               environ: dict[str, str | None], jobstatus: bool = False) -> str:
    """Set-up fails where the wrapper cannot tell where the job is (its scratch directory)
    or which it is (its job ad)."""
    if any(environ.get(name) != recorded.get(name) for name in _CONDOR_ESSENTIAL):
        return SETUP_FAILS
    return DROPS


def job_exit_environment_effect(entry: str, recorded: dict[str, str | None],
                                environ: dict[str, str | None], jobstatus: bool = False) -> str:
    """Set-up fails where the job-exit hook cannot find the job's directory, in the scratch
    directory."""
    if environ.get("_CONDOR_SCRATCH_DIR") != recorded.get("_CONDOR_SCRATCH_DIR"):
        return SETUP_FAILS
    return DROPS


# Executables a case directory holds (test_corpus.EXECUTABLES): a chained wrapper naming
# one runs it.
EXECUTABLE_PATHS = ("@D@/bin/scontrol", "@D@/bin/bjobs", "@D@/bin/condor_status",
                    "@D@/bin/qstat", "@D@/bin/next")


def wrapper_config_effect(entry: str, base: str, settings: dict) -> dict:
    """What a config does to the wrapper's chain ([htcondor] next_wrapper): none where it
    names none; another it names runs before the job, or cannot be executed."""
    chained = settings.get(("htcondor", "next_wrapper"))
    configured = config_model(encoded(base)).get(("htcondor", "next_wrapper"))
    if chained is None:
        return {"next_wrapper": None}
    if chained == configured:
        return {}
    return {"next_wrapper": chained,
            **({} if chained in EXECUTABLE_PATHS else {"effect": EXEC_FAILS})}


def ad_job_id_survives(original: bytes, mutated) -> bool:
    """Whether a job ad still names its job: its GlobalJobId line, or both its ClusterId
    and ProcId lines, are there as they were (a line may end in \\r)."""
    if not isinstance(mutated, bytes):
        return False
    lines = {line.rstrip(b"\r") for line in mutated.split(b"\n")}
    named = {line.split(b" = ")[0]: line for line in original.split(b"\n")}
    return named[b"GlobalJobId"] in lines or (
        named[b"ClusterId"] in lines and named[b"ProcId"] in lines)


# A GlobalJobId the wrapper reads as a string that is no job id (its escapes decode to
# characters outside printable ASCII): the job's id cannot be written, set-up fails.
# Every other broken GlobalJobId is no string literal, and ClusterId.ProcId names the job.
_INVALID_JOB_ID_LITERALS = ("bad-escape",)


def ad_attribute_effect(attribute: str, label: str) -> str:
    return SETUP_FAILS if attribute == "GlobalJobId" and label in _INVALID_JOB_ID_LITERALS \
        else DROPS


AD_WRONG_TYPES = [
    ("string", '"4"'), ("true", "true"), ("real", "2.5"), ("real-huge", "1e300"),
    ("expression", "10 * 60"), ("list", "{ 1, 2 }"), ("nested-ad", "[ a = 1 ]"),
    ("undefined", "undefined"), ("error", "error"), ("unterminated-string", '"vm#1'),
    ("bad-escape", '"\\q\\777"'),
]


def ad_cases(entry: str, variable: str, name: str, content: bytes,
             attributes: tuple[str, ...]) -> list[Case]:
    """An ad file broken as a whole, and each attribute the wrapper reads broken. Without
    its job ad's id the wrapper cannot set up; a machine ad only gives values."""
    culprits = (variable, name, "ad")
    names_job = variable == "_CONDOR_JOB_AD"
    cases = [Case(entry, f"{name}:{label}", culprits, files={f"scratch/{name}": mutated},
                  effect=SETUP_FAILS if names_job and not ad_job_id_survives(content, mutated)
                  else DROPS)
             for label, mutated in file_mutations(content)]
    lines = content.decode().splitlines()
    for attribute in attributes:
        index = next(i for i, line in enumerate(lines) if line.split(" = ")[0] == attribute)
        original = lines[index].split(" = ", 1)[1]
        variants = value_mutations(original) + AD_WRONG_TYPES + [
            ("duplicate", f"{original}\n{attribute} = 7"),
            ("duplicate-garbage", f"{original}\n{attribute} = \udcff"),
            ("lowercase-name", None), ("removed", "")]
        for label, text in variants:
            changed = list(lines)
            if label == "lowercase-name":
                changed[index] = f"{attribute.lower()} = {original}"
            elif label == "removed":
                del changed[index]
            else:
                changed[index] = f"{attribute} = {text}"
            data = encoded("\n".join(changed) + "\n")
            cases.append(Case(entry, f"{name}:{attribute}:{label}", (*culprits, attribute),
                              files={f"scratch/{name}": data},
                              effect=ad_attribute_effect(attribute, label) if names_job
                              else DROPS))
    return cases


def _attribute_name(value: str) -> str | None:
    """[htcondor] wall_limit_attribute: an ad attribute's name."""
    return value if value and value.isascii() and not value[0].isdigit() \
        and value.replace("_", "a").isalnum() else None


# -- what the generic model takes from here (backends/__init__.py hands it over) -----------

CONFIG_KEYS = {
    ("htcondor", "job_id"): ("global", "cluster_proc"),
    ("htcondor", "wall_limit_attribute"): _attribute_name,
    ("htcondor", "wall_limit_unit"): ("seconds", "minutes", "hours"),
    ("htcondor", "next_wrapper"): PATH, ("htcondor", "execute_dir"): PATH}
COMMANDS = {"condor_status": lambda argv: ("condor_status", "")}
ALSO_NAMED = {"_CONDOR_JOB_AD": ("job ad",), "_CONDOR_MACHINE_AD": ("machine ad",)}
# A broken --env-file: a line may name the scratch directory it lost.
CONDOR = {"env_file_culprits": ("_CONDOR_SCRATCH_DIR",)}


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


# The wrapper writes in the job's scratch and the cron prints: both only read base_dir. The
# job-exit hook removes the job's directory in its scratch. The wrapper's job that cannot
# be executed: exit 1, one line in $_CONDOR_WRAPPER_ERROR_FILE.
ENTRIES = [
    Entry("htcondor-wrapper", CONDOR_ENV, HTCONDOR_CONFIG, wrapper,
          job_argv=["@D@/bin/next", *JOB_ARGV], command=("mjf-htcondor-wrapper", None),
          store_role="reads", exec_fails_exit=1, set_up=wrapper_environment_effect,
          config_effect=wrapper_config_effect, **CONDOR),
    Entry("htcondor-job-exit", CONDOR_EXIT_ENV, HTCONDOR_CONFIG, job_exit,
          prepare=prepare(wrapper, CONDOR_ENV), command=("mjf-htcondor-job-exit", []),
          stdin=FINAL_AD_PATH, store_role="removes", writes_records=True,
          set_up=job_exit_environment_effect, **CONDOR),
    Entry("htcondor-cron", CONDOR_ENV, HTCONDOR_CONFIG, cron,
          command=("mjf-htcondor-cron", []), store_role="reads", **CONDOR),
]
