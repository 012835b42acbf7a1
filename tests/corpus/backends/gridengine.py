"""Grid Engine's entry points: the prolog, the epilog and the starter (as the queue's
starter_method and by role), on the recorded job 13 (Grid Engine 8.1.9); and the model of
what Grid Engine's input means to them: the variables that name the job, the spool
config and pe_hostfile (and what a job's user can name instead), what a starter execs,
what qstat prints."""

from __future__ import annotations

import os

from mjf_hooks.batch.gridengine import parse_spool_config
from mjf_hooks.hooks import gridengine as gridengine_hook
from mjf_hooks.safefs import MAX_BATCH_FILE_BYTES
from tests.conftest import FIXTURES, fixture_text
from tests.corpus.entries import COMMON_CONFIG, Entry, options, prepare
from tests.corpus.mutations import (
    DROPS,
    EXEC_FAILS,
    HOST,
    OUR_USER,
    PATH,
    SECRET_MARKER,
    SECRET_NUMBER,
    SETUP_FAILS,
    Case,
    digits,
    encoded,
    file_mutations,
    known_user,
    value_mutations,
)

# Grid Engine: job 13 of the recorded cell (`qsub -pe smp 2 -l h_rt=1:00:00,h_vmem=1G,
# h_cpu=1800 show.sh a b`), its host `vm` this one, its paths moved into the case directory.
GE = "gridengine-8.1.9"
# $SGE_JOB_SPOOL_DIR, named as execd names it (<execd_spool_dir>/<host>/active_jobs/13.1):
# a root prolog or epilog reads no other.
GE_SPOOL_DIR = "@D@/active_jobs/13.1"
GE_SPOOL_CONFIG_PATH = "active_jobs/13.1/config"  # in the case directory
GE_PE_HOSTFILE_PATH = "active_jobs/13.1/pe_hostfile"
GE_SCRIPT = "@D@/job_scripts/13"  # the job's script as execd spooled it
GE_JOB = [GE_SCRIPT, "a", "b"]  # what the shepherd gives the starter (starter-argv)
GE_USER = OUR_USER  # a root prolog gives the directory to the job's user
GE_SPOOL_CONFIG = (FIXTURES / GE / "pe-job/spool-config").read_bytes().replace(
    b"\nhost=vm\n", f"\nhost={HOST}\n".encode()).replace(
    b"/var/spool/gridengine/execd/localhost/active_jobs/13.1", GE_SPOOL_DIR.encode()).replace(
    b"/var/spool/gridengine/execd/localhost/job_scripts/13", GE_SCRIPT.encode()).replace(
    b"\ntmpdir=/tmp/13.1.all.q\n", b"\ntmpdir=@D@/scratch\n")  # the job's TMPDIR
GE_PE_HOSTFILE = f"{HOST} 2 all.q@{HOST} UNDEFINED\n".encode()  # as recorded: "vm 2 all.q@vm"
QSTAT_JOB = fixture_text(f"{GE}/pe-job/qstat-j.txt")  # qstat -j 13: h_rt=3600 requested
# A job that requested no run time (the recorded binary job, as job 13): qstat -F is asked.
QSTAT_JOB_WITHOUT_RUN_LIMIT = fixture_text(f"{GE}/binary-job/qstat-j.txt").replace(
    "job_number:                 12", "job_number:                 13")
QSTAT_QUEUE_INSTANCE = fixture_text(f"{GE}/qstat-F-queue-instance.txt").replace(
    "all.q@vm ", f"all.q@{HOST} ")


def gridengine_env(hook: str) -> dict[str, str]:
    """The recorded environment Grid Engine gave a hook of job 13 (``hook``: prolog,
    starter or epilog), the paths a hook reads moved into the case directory, its host
    this one, its user the one running the tests (who exists here)."""
    text = fixture_text(f"{GE}/pe-job/{hook}.env")
    environ = dict(line.split("=", 1) for line in text.splitlines())
    moved = {"SGE_JOB_SPOOL_DIR": GE_SPOOL_DIR, "PE_HOSTFILE": f"@D@/{GE_PE_HOSTFILE_PATH}",
             "TMP": "@D@/scratch", "TMPDIR": "@D@/scratch", "JOB_SCRIPT": GE_SCRIPT,
             "HOSTNAME": HOST, "USER": GE_USER, "LOGNAME": GE_USER, "HOME": "@D@"}
    environ.update({name: value for name, value in moved.items() if name in environ})
    environ["PATH"] = environ["PATH"].replace("/tmp/13.1.all.q", "@D@/scratch")
    environ["XDG_RUNTIME_DIR"] = "@D@/xdg"
    return environ


def _positive(text: str | None) -> bool:
    """A Grid Engine job or array task number: decimal, from 1 (qsub(1): JOB_ID, -t)."""
    return digits(text) and int(text) > 0


def gridengine_environment_effect(entry: str, recorded: dict[str, str | None],
                                  environ: dict[str, str | None], jobstatus: bool = False) -> str:
    """Set-up fails where the hook cannot tell which job it is for - Grid Engine names one
    by JOB_ID and SGE_TASK_ID (``undefined`` outside an array; unset or empty the same) -
    or, a root prolog, whose the job's directory is (USER's, else LOGNAME's)."""
    def value(name):
        return environ.get(name) or ""

    task = value("SGE_TASK_ID")
    if not _positive(value("JOB_ID")) or (task not in ("", "undefined") and not _positive(task)):
        return SETUP_FAILS
    if entry == "gridengine-prolog" and os.geteuid() == 0 and not known_user(
            value("USER") or value("LOGNAME")):
        return SETUP_FAILS
    return DROPS


# The starters, which run the job (as the queue's starter_method: what a shell gives, 127,
# where its command cannot be executed).
GRIDENGINE_STARTERS = ("gridengine-starter", "gridengine-starter-after-prolog")


def spool_settings(data) -> dict[str, str] | None:
    """The job's spool config as a hook reads it: ``name=value`` lines (a byte that is not
    ASCII reads as U+FFFD, CR and CRLF end a line); None where it cannot be read (missing,
    a directory, or larger than the bound on what a hook reads of a batch system's file:
    a job's user may name a file of any size)."""
    if not isinstance(data, bytes) or len(data) > MAX_BATCH_FILE_BYTES:
        return None
    # The lines themselves are split as the batch module splits them: a format, not a
    # decision of the hook's.
    return parse_spool_config(
        data.decode("ascii", "replace").replace("\r\n", "\n").replace("\r", "\n"))


def gridengine_job_start(environ: dict[str, str | None],
                         spool: dict[str, str] | None) -> tuple[str, list[str]]:
    """What a Grid Engine starter_method execs for GE_JOB, as Grid Engine itself would have
    started it (queue_conf(5), shell_start_mode and starter_method): ``(file, argv)``.

    The shell is $SGE_STARTER_SHELL_PATH (else the spool config's shell_path), as
    ``-name`` where $SGE_STARTER_USE_LOGIN_SHELL is ``true``; a script runs under it, or
    in ``unix_behavior`` ($SGE_STARTER_SHELL_START_MODE) as itself; a binary job
    (handle_as_binary=1) under ``shell -c``, or as itself with no_shell=1. Where the spool
    config cannot be read, or the shell is no absolute path, the job's argv runs as it is.
    """
    shell = environ.get("SGE_STARTER_SHELL_PATH") or (spool or {}).get("shell_path", "")
    if spool is None or not shell.startswith("/"):
        return GE_JOB[0], list(GE_JOB)
    name = ("-" if environ.get("SGE_STARTER_USE_LOGIN_SHELL") == "true" else "") \
        + shell.rsplit("/", 1)[1]
    if spool.get("handle_as_binary") == "1":
        if spool.get("no_shell") == "1":
            return GE_JOB[0], list(GE_JOB)
        return shell, [name, "-c", " ".join(GE_JOB)]
    if environ.get("SGE_STARTER_SHELL_START_MODE") == "unix_behavior":
        return GE_JOB[0], list(GE_JOB)
    return shell, [name, *GE_JOB]


# What a case directory's job can be run with: the host's /bin/sh, and the job's script
# (executable, with its #! line, as unix_behavior needs). Nothing else a case names exists.
_RUNNABLE = ("/bin/sh", GE_SCRIPT)


def job_start(entry: str, environ: dict[str, str | None] | None,
              spool_data=GE_SPOOL_CONFIG, effect: str = DROPS) -> dict:
    """Case keywords for what a Grid Engine starter runs, given the environment it gets
    (None: none of the job's, as where an --env-file cannot be read) and its spool config's
    bytes: ``job_command``, and EXEC_FAILS where that file cannot be executed. ``effect``
    is what the case does to set-up otherwise. Nothing for any other entry point."""
    if entry not in GRIDENGINE_STARTERS:
        return {}
    environ = environ or {}
    spool_dir = environ.get("SGE_JOB_SPOOL_DIR") or ""
    # Read only as it is named, a plain path (no '.', '..' or '//': not normalised).
    readable = spool_dir in (GE_SPOOL_DIR, GE_SPOOL_DIR + "/")
    command = gridengine_job_start(environ, spool_settings(spool_data) if readable else None)
    if command[0] in _RUNNABLE:
        return {"job_command": command}
    # A set-up that fails too would log two lines: no single mutation here does both.
    assert effect == DROPS, (entry, effect, command)
    return {"job_command": command, "effect": EXEC_FAILS}


def spool_config_cases(entry: str, environ: dict[str, str], keys: tuple[str, ...]) -> list[Case]:
    """The job's spool config ($SGE_JOB_SPOOL_DIR/config) broken as a whole, and each entry
    of ``keys`` a hook reads broken or removed. It names no job: it only gives values (the
    limits, this host's slots and name), so set-up goes on; a starter runs the job as what
    it can still read says (:func:`job_start`)."""
    culprits = ("SGE_JOB_SPOOL_DIR", "spool config")
    cases = [Case(entry, f"spool-config:{label}", culprits,
                  files={GE_SPOOL_CONFIG_PATH: mutated}, **job_start(entry, environ, mutated))
             for label, mutated in file_mutations(GE_SPOOL_CONFIG)]
    lines = GE_SPOOL_CONFIG.decode().splitlines()
    for key in keys:
        index = next(i for i, line in enumerate(lines) if line.split("=")[0] == key)
        original = lines[index].split("=", 1)[1]
        for label, text in [*value_mutations(original), ("removed", None)]:
            changed = list(lines)
            if text is None:
                del changed[index]
            else:
                changed[index] = f"{key}={text}"
            data = encoded("\n".join(changed) + "\n")
            cases.append(Case(entry, f"spool-config:{key}:{label}", (*culprits, key),
                              files={GE_SPOOL_CONFIG_PATH: data},
                              **job_start(entry, environ, data)))
    return cases


def pe_hostfile_cases(entry: str, slots: bool = True) -> list[Case]:
    """$PE_HOSTFILE's file broken as a whole, and (``slots``) this host's slots in it: only
    allocated_cpu is lost (NSLOTS stands in for a file that cannot be read)."""
    culprits = ("PE_HOSTFILE",)
    cases = [Case(entry, f"pe_hostfile:{label}", culprits, files={GE_PE_HOSTFILE_PATH: data})
             for label, data in file_mutations(GE_PE_HOSTFILE)]
    if slots:
        line = GE_PE_HOSTFILE.decode()
        cases += [Case(entry, f"pe_hostfile:slots:{label}", culprits, files={
                  GE_PE_HOSTFILE_PATH: encoded(line.replace(f"{HOST} 2 ", f"{HOST} {text} "))})
                  for label, text in value_mutations("2")]
    return cases


# A root-only file a job's user names to a root prolog as PE_HOSTFILE: if it were read,
# this host's slots would be SECRET_NUMBER, and a message quoting it would show
# SECRET_MARKER (neither may reach any output, log line or file: test_corpus.check_secret).
def secret_hostfile() -> bytes:
    return f"{HOST} {SECRET_NUMBER} all.q@{HOST} UNDEFINED\n{SECRET_MARKER}\n".encode()


def gridengine_hostile_path_cases(entry: str) -> list[Case]:
    """What a job's user can name to a root prolog (``qsub -v``) or plant on its way: a
    root-only file as PE_HOSTFILE; the job's pe_hostfile or spool config replaced by a
    symlink to it, a FIFO no one writes, a sparse file of 1 GiB; its spool directory
    reached through a symlink. Nothing of the file is read (nor waited on); a warning
    names the path, never what it holds; the job's directory is written from the rest."""
    secret = {"etc/secret": ("private", secret_hostfile())}
    symlink = ("symlink", "@D@/etc/secret")
    cases = [
        Case(entry, "hostile-path:PE_HOSTFILE-root-only", ("PE_HOSTFILE",),
             env={"PE_HOSTFILE": "@D@/etc/secret"}, files=secret),
        Case(entry, "hostile-path:PE_HOSTFILE-other-job", ("PE_HOSTFILE",),
             env={"PE_HOSTFILE": "@D@/active_jobs/14.2/pe_hostfile"},
             files={"active_jobs/14.2/pe_hostfile": secret_hostfile()}),
        Case(entry, "hostile-path:PE_HOSTFILE-relative-walk", ("PE_HOSTFILE",),
             env={"PE_HOSTFILE": "@D@/active_jobs/13.1/../../etc/secret"}, files=secret),
        Case(entry, "hostile-path:SGE_JOB_SPOOL_DIR-through-symlink",
             ("SGE_JOB_SPOOL_DIR", "spool config"),
             env={"SGE_JOB_SPOOL_DIR": "@D@/alias/active_jobs/13.1",
                  "PE_HOSTFILE": "@D@/alias/active_jobs/13.1/pe_hostfile"},
             files={"alias": ("symlink", "@D@")}),
        Case(entry, "hostile-path:SGE_JOB_SPOOL_DIR-not-execds",
             ("SGE_JOB_SPOOL_DIR", "spool config"),
             env={"SGE_JOB_SPOOL_DIR": "@D@/etc", "PE_HOSTFILE": "@D@/etc/secret"},
             files={**secret, "etc/config": GE_SPOOL_CONFIG}),
    ]
    for label, data in (("symlink-root-only", symlink), ("fifo", ("fifo",)),
                        ("sparse-1g", ("sparse", 1 << 30))):
        cases.append(Case(entry, f"hostile-path:pe_hostfile-{label}", ("pe_hostfile",),
                          files={**secret, GE_PE_HOSTFILE_PATH: data}))
        cases.append(Case(entry, f"hostile-path:spool-config-{label}",
                          ("SGE_JOB_SPOOL_DIR", "spool config"),
                          files={**secret, GE_SPOOL_CONFIG_PATH: data},
                          **job_start(entry, None)))
    return cases


def _cell(value: str) -> str | None:
    """[gridengine] sge_cell: a directory under $SGE_ROOT (letters, digits, _ - ., no
    leading .)."""
    return value if value and value.isascii() and not value.startswith(".") \
        and value.replace("_", "a").replace("-", "a").replace(".", "a").isalnum() else None


# -- what the generic model takes from here (backends/__init__.py hands it over) -----------

CONFIG_KEYS = {("gridengine", "qstat"): PATH, ("gridengine", "query_qstat"): ("yes", "no"),
               ("gridengine", "sge_root"): PATH, ("gridengine", "sge_cell"): _cell}
# qstat -j JOB (the job's requests), qstat -F ... -q QUEUE@HOST (its queue instance's).
COMMANDS = {"qstat": lambda argv: {"-j": ("qstat", QSTAT_JOB),
                                   "-F": ("qstat-F", QSTAT_QUEUE_INSTANCE)}.get(argv[1])}
ALSO_NAMED = {"SGE_JOB_SPOOL_DIR": ("spool config",)}
# What every Grid Engine entry point's model shares: a failure with on_error = fail exits
# 100 (Grid Engine puts the queue instance into error for a prolog, epilog or starter exit
# other than 0, 99 or 100; 100 puts only the job into error); JOB_ID and SGE_TASK_ID name
# the job; a starter execs the job as Grid Engine would; a broken --env-file loses these.
GRIDENGINE = {"failure_exit": 100, "set_up": gridengine_environment_effect,
              "job_start": job_start, "env_file_culprits": (
                  "JOB_ID", "SGE_TASK_ID", "PE_HOSTFILE", "NSLOTS", "NHOSTS", "spool config",
                  "USER", "LOGNAME")}

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
          command=("mjf-gridengine", ["prolog"]), store_role="creates", **GRIDENGINE),
    Entry("gridengine-epilog", GE_EPILOG_ENV, GE_CONFIG, gridengine("epilog"),
          prepare=prepare_two_gridengine_jobs, command=("mjf-gridengine", ["epilog"]),
          store_role="removes", writes_records=True, **GRIDENGINE),
    Entry("gridengine-starter", GE_STARTER_ENV, GE_CONFIG, gridengine("starter"),
          job_argv=GE_JOB_ARGV, job_file=GE_JOB_FILE, command=("mjf-gridengine", ["starter"]),
          store_role="creates", exec_fails_exit=127, **GRIDENGINE),
    Entry("gridengine-starter-after-prolog", GE_STARTER_METHOD_ENV, GE_CONFIG,
          gridengine_starter_method, job_argv=GE_JOB_ARGV, job_file=GE_JOB_FILE,
          prepare=prepare(gridengine("prolog"), GE_PROLOG_ENV),
          command=("mjf-gridengine-starter", None), store_role="completes",
          exec_fails_exit=127, **GRIDENGINE),
]
