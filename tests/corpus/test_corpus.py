"""The bad-input corpus: every entry point, fed hundreds of broken inputs each.

For every case (see mutations.py, and backends/) the hook must: (a) exit as the fail-safe rule
says for what the case broke - the status, and whether a job runner runs the job
(with its argv and environment, and with MJF unless set-up failed), are decided
when the case is generated, from the broken input alone; (b) log one clear error
line where set-up fails (none where it goes on), each line naming what was broken,
never a traceback or an "internal error"; (c) change nothing outside its stores;
(d) leave no partial or invalid file and no half-built job directory.

The unbroken recorded input of each entry point is a test of its own: it must
exit 0, log nothing, and write every key it is expected to write.

Where the site offers $JOBSTATUS (``[mjf] jobstatus = yes``: a sixteenth of the cases
again, each baseline, and the key itself spelled and broken), a job that gets
JOBFEATURES gets JOBSTATUS too, naming an empty directory beside its jobfeatures/;
where it does not, no job gets one.

Where the site keeps job records (``[records] dir``: every case of an end-of-job hook again,
each baseline, the records directory, its config and what a hook reads of what the job used
broken; HTCondor's job-exit hook and Slurm's TaskEpilog), an end-of-job hook leaves exactly
one whole record (its JSON, and the SSS and APEL files the record can give) or none - never
a partial one, a temporary file or a byte of a root-only file - and the job's directory
goes either way; the TaskEpilog writes nowhere but in the job's usage/.

The cases run in-process (os.execve - which, as the real one, does not return -,
the job spawn, syslog and scontrol/bjobs/condor_status/qstat replaced by recorders,
/proc and /sys/fs/cgroup read from a fake tree); a deterministic sample runs again
through the installed commands, as real processes, for their real exit codes; the
pure-sh TaskProlog always does.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from mjf_hooks.hook_failures import COUNTERS_DIR
from mjf_hooks.store import job_dir_name
from tests.conftest import installed_command, require
from tests.corpus import harness
from tests.corpus.backends.gridengine import (
    GE_JOB,
    GE_PE_HOSTFILE,
    GE_PE_HOSTFILE_PATH,
    GE_SCRIPT,
    GE_SPOOL_CONFIG,
    GE_SPOOL_CONFIG_PATH,
    GE_TASK_SPOOL_FILES,
    GE_USAGE,
    GE_USAGE_PATH,
    GRIDENGINE_STARTERS,
    QSTAT_JOB,
    QSTAT_QUEUE_INSTANCE,
)
from tests.corpus.backends.htcondor import (
    FINAL_AD,
    FINAL_AD_PATH,
    JOB_AD,
    MACHINE_AD,
)
from tests.corpus.backends.lsf import BJOBS_L
from tests.corpus.backends.pbs import (
    PBS_CLASSIC_JOB,
    PBS_CONFIG,
    PBS_FILES,
    PBS_JOB,
    PBS_OTHER_JOB,
    pbs_words,
)
from tests.corpus.backends.slurm import (
    CLOCK,
    PRESENT,
    S24_TASK_ENV,
    SCONTROL_JOB,
    SCONTROL_PARTITION,
    SLURM_CONFIG,
    SLURM_TASK_ENV,
    USAGE_REPORT,
)
from tests.corpus.cases import (
    CASES,
    ENDED_JOB_DIRS,
    ENTRIES,
    JOB_STATE,
    RECORD_WRITERS,
    TASKEPILOG_WRITES,
    job_state_of,
    state_cases,
)
from tests.corpus.entries import COMMON_CONFIG, JOB_ARGV, RECORDS_SECTION, Entry, root
from tests.corpus.mutations import (
    DROPS,
    EXEC_FAILS,
    SECRET_MARKER,
    SECRET_NUMBER,
    WRITES_RECORDS,
    Case,
    config_cases,
    drop_in_cases,
    env_cases,
    offers_jobstatus,
    offers_records,
    sample,
    with_jobstatus,
)

# Records are root's: as another user an end hook hands its record in to a drop box only
# root makes (none in a case directory), so the record cases run as root (as CI does).
RECORDS_NEED_ROOT = "records are root's: the record cases need root (as CI runs them)"
# What the real job does in the subprocess sample: say what it got.
SHOW_JOB = ('printf "argv:%s\\n" "$*"; [ -z "$JOBFEATURES" ] || '
            '{ test -f "$JOBFEATURES/job_id" && echo "jobfeatures:complete"; }; '
            '[ -z "$JOBSTATUS" ] || { test -d "$JOBSTATUS" && echo "jobstatus:directory"; }')
# The Grid Engine job's script (GE_SCRIPT): its #! line lets it run as itself too.
GE_JOB_SCRIPT = f"#!/bin/sh\n{SHOW_JOB}\n"

EXECUTABLES = {
    "bin/scontrol": '#!/bin/sh\ncase "$2" in job) cat "${0%/*}/scontrol.out" ;; '
                    '*) cat "${0%/*}/partition.out" ;; esac\n',
    "bin/bjobs": f"#!/bin/sh\nprintf '%s' '{BJOBS_L}'\n",
    "bin/qstat": '#!/bin/sh\ncase "$1" in -j) cat "${0%/*}/qstat.out" ;; '
                 '-f) cat "${0%/*}/pbs-qstat.out" ;; *) cat "${0%/*}/qstat-F.out" ;; esac\n',
    "bin/condor_status": "#!/bin/sh\n",
    "bin/next": '#!/bin/sh\nexec "$@"\n',
}


# (which cases, why they fail): a known bug, each case kept as a strict xfail until it is
# fixed.
# Product bugs a case documents until fixed: (matches(case), reason), each a strict
# xfail. The corpus found two when job records came (a FIFO in place of Grid Engine's
# usage file hung the epilog; a job-exit ad's impossible GlobalJobId was not named):
# both fixed.
KNOWN_BUGS: list = []


def _marked(case: Case):
    reasons = [reason for matches, reason in KNOWN_BUGS if matches(case)]
    marks = [pytest.mark.xfail(reason=reasons[0], strict=True)] if reasons else []
    return pytest.param(case, id=case.id, marks=marks)



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


def laid_out_config(entry: Entry, on_error_fail: bool = False, jobstatus: bool = False,
                    records: bool = False) -> str:
    """The config of the case directory, before a case breaks it."""
    config = entry.config
    if records and "[records]" not in config:
        config += RECORDS_SECTION
    if on_error_fail:
        config = config.replace("[mjf]\n", "[mjf]\non_error = fail\n", 1)
    if jobstatus:
        config = config.replace("[mjf]\n", "[mjf]\njobstatus = yes\n", 1)
    return config


def lay_out(sandbox, entry: Entry, on_error_fail: bool = False, jobstatus: bool = False,
            records: bool = False):
    """The case directory as the unbroken entry point finds it."""
    config = laid_out_config(entry, on_error_fail, jobstatus, records)
    files = {**harness.default_tree(), "mjf.conf": config.encode(),
             "etc/slurm.conf": b"TmpFS=@D@/scratch\n",
             "etc/cgroup.conf": b"ConstrainRAMSpace=yes\n",
             "etc/outside": b"outside", "bin/scontrol.out": SCONTROL_JOB.encode(),
             "bin/partition.out": SCONTROL_PARTITION.encode(),
             "scratch/.job.ad": JOB_AD, "scratch/.machine.ad": MACHINE_AD,
             "bin/qstat.out": QSTAT_JOB.encode(), "bin/qstat-F.out": QSTAT_QUEUE_INSTANCE.encode(),
             GE_SPOOL_CONFIG_PATH: GE_SPOOL_CONFIG, GE_PE_HOSTFILE_PATH: GE_PE_HOSTFILE,
             GE_USAGE_PATH: GE_USAGE, FINAL_AD_PATH: FINAL_AD, **GE_TASK_SPOOL_FILES,
             GE_SCRIPT.replace("@D@/", ""): GE_JOB_SCRIPT.encode(), **PBS_FILES}
    files.update({path: text.encode() for path, text in EXECUTABLES.items()})
    files.update(root(entry.tree))
    sandbox.write_files(files)
    for path in [*EXECUTABLES, GE_SCRIPT.replace("@D@/", "")]:
        os.chmod(sandbox.path(path), 0o755)
    os.chmod(sandbox.path("scratch"), 0o700)
    os.mkdir(sandbox.path("scratch/1234.tmpdir"), 0o700)  # LSF's TMPDIR for job 1234
    os.mkdir(sandbox.path("xdg"), 0o700)
    # Where the default base_dir (/run/mjf) is redirected: its parent exists, as /run does.
    os.mkdir(sandbox.path(os.path.dirname(harness.DEFAULT_BASE_DIR)))


def environ_for(sandbox, entry: Entry, case: Case) -> dict[str, str]:
    environ = {**entry.environ, **case.env}
    environ = {name: value for name, value in environ.items() if value is not None}
    if case.via_env_file and "job.env" not in case.files:
        with open(sandbox.path("job.env"), "wb") as handle:
            handle.write(b"".join(sandbox.expand(f"{name}={value}\n").encode(
                "utf-8", "surrogateescape") for name, value in environ.items()))
        return {"MJF_CONFIG": environ.get("MJF_CONFIG", "@D@/mjf.conf")}
    return environ


def break_inputs(sandbox, entry: Entry, case: Case) -> None:
    """Lay out the unbroken inputs, run what comes first, then break what the case breaks."""
    lay_out(sandbox, entry, case.on_error_fail, case.jobstatus, case.records)
    if entry.prepare:
        entry.prepare(sandbox)
    sandbox.write_files(case.files)
    if case.config is not None:
        sandbox.write_files({"mjf.conf": case.config})


def run_case(sandbox, entry: Entry, case: Case):
    break_inputs(sandbox, entry, case)
    environ = environ_for(sandbox, entry, case)
    before = harness.snapshot(sandbox.d)
    sandbox.records_before = records_state(sandbox)
    with hang_guard(case):
        outcome = entry.call(sandbox, case, environ)
    sandbox.snapshots = (before, harness.snapshot(sandbox.d))
    return outcome, harness.check_stores(sandbox, *sandbox.snapshots)


class Hung(BaseException):
    """A hook still waiting (on a FIFO a case planted) after HANG_SECS: as the fake exec,
    not an Exception, so nothing of the hook's can catch it (an OSError would be taken for
    a file that cannot be read)."""


HANG_SECS = 3


class hang_guard:
    """Where a case planted a FIFO, stop a hook that waits on it (Hung) after HANG_SECS."""

    def __init__(self, case: Case):
        self.armed = any(data == ("fifo",) for data in case.files.values())

    def __enter__(self):
        if self.armed:
            def hung(signum, frame):
                raise Hung(f"still waiting after {HANG_SECS} s (on the FIFO the case planted)")
            self.previous = signal.signal(signal.SIGALRM, hung)
            signal.setitimer(signal.ITIMER_REAL, HANG_SECS)

    def __exit__(self, *exc):
        if self.armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.previous)
        return False


def records_dirs(sandbox) -> list[str]:
    """Where a case's records may go: D/records, the site's symlink's target, and the records
    directory its config names."""
    dirs = [sandbox.path(harness.RECORDS_DIR), sandbox.path(harness.RECORDS_ELSEWHERE)]
    configured = harness.configured_records_dir(sandbox)
    return dirs + ([configured] if configured and configured not in dirs else [])


def records_state(sandbox) -> tuple[dict, set]:
    """Every record below the case's records directories, and what is wrong there."""
    records, problems = {}, set()
    for directory in records_dirs(sandbox):
        if os.path.islink(directory):
            continue  # its target is one of the others
        found, wrong = harness.records_in(directory)
        records.update(found)
        problems.update(wrong)
    return records, problems


def records_offered(entry: Entry, case: Case) -> bool:
    """Whether the config the hook reads keeps records (as jobstatus_offered)."""
    if case.config is None and case.host_defaults:
        return False
    config = case.config if case.config is not None else laid_out_config(
        entry, case.on_error_fail, case.jobstatus, case.records).encode()
    return offers_records(config)


def new_records(sandbox) -> tuple[dict, list[str]]:
    """The records the run added, and what is wrong below the records directories now that
    was not before (a partial record, a temporary file left, a record that is no JSON)."""
    before, before_problems = sandbox.records_before
    after, after_problems = records_state(sandbox)
    added = {stem: suffixes for stem, suffixes in after.items() if before.get(stem) != suffixes}
    return added, sorted(after_problems - before_problems)


def check_records(sandbox, entry: Entry, case: Case) -> list[str]:
    """Where the site keeps records: never a partial record or a temporary file left; a
    record only where set-up went on and the record could be written (RECORD_FAILS: none),
    at most one - exactly one where the case says the job's directory goes
    (``removes_job``), which it must; no byte of a root-only file in it; and the
    TaskEpilog writes nowhere but in the job's usage/."""
    added, problems = new_records(sandbox)
    written = records_offered(entry, case) and case.effect == DROPS
    if entry.name in RECORD_WRITERS and written and case.removes_job:
        if len(added) != 1:
            problems.append(f"{len(added)} records written, expected one: {sorted(added)}")
    elif not written and added:
        problems.append(f"records written (the case: {case.effect}, records "
                        f"{'kept' if records_offered(entry, case) else 'not kept'}): "
                        f"{sorted(added)}")
    elif len(added) > 1:
        problems.append(f"{len(added)} records written for one job: {sorted(added)}")
    for stem in (stem for stem, suffixes in added.items() if ".json" in suffixes):
        # By value, not by digits: a time's fraction may hold them by chance. The XML and
        # APEL files say what the JSON says.
        with open(stem + ".json") as handle:
            delivered = json.load(handle).get("delivered", {})
        if any(entry.get("value") == int(SECRET_NUMBER) for entry in delivered.values()):
            problems.append(f"{stem}.json holds what a root-only file said")
    if case.removes_job and os.path.lexists(sandbox.path(ENDED_JOB_DIRS[entry.name])):
        problems.append(f"{ENDED_JOB_DIRS[entry.name]} is still there")
    if entry.name == "slurm-taskepilog":
        base = harness.configured_base_dir(sandbox)
        allowed = os.path.join(base, TASKEPILOG_WRITES)
        # Run by root here, a failing TaskEpilog also counts its failure for mjf metrics
        # (as the job's user, as Slurm runs it, it cannot: state/ is root's).
        counters = os.path.join(base, "state", COUNTERS_DIR)
        problems += [f"the TaskEpilog changed {path}" for path in
                     harness.changed_paths(*sandbox.snapshots)
                     if not sandbox.path(path).startswith((allowed + "/", counters + "/"))
                     and sandbox.path(path) not in (counters, os.path.dirname(counters))]
    return problems


# What the unbroken recorded input of an entry point may log, normalised (harness.normalise),
# with the reason: none does - every recorded input is complete and every value it gives is
# valid. A line listed here would also need no culprit in a case of that entry point.
BASELINE_LINES: dict[str, tuple[str, ...]] = {name: () for name in ENTRIES}
# Where the site keeps records with format = sss, apel (RECORDS_SECTION), a record without
# a CPU time has no APEL message (docs/records.md: a format that cannot express the record is left
# out, with a warning): an LSF post-exec knows none, nor a 24.11 Epilog without its
# TaskEpilog's report.
BASELINE_LINES["slurm-24.11-epilog"] = (
    "mjf-slurm epilog job 9: warning: no APEL file: APEL record for job '9' lacks the "
    "mandatory field CpuDuration",)
BASELINE_LINES["lsf-post-exec"] = (
    "mjf-lsf post-exec job 1234: warning: no APEL file: APEL record for job '1234' lacks "
    "the mandatory field CpuDuration",)


def check_outcome(sandbox, entry: Entry, case: Case, outcome, environ) -> list[str]:
    """(a) and (b) for what the case says its broken input does."""
    problems = []
    if outcome.status != case.status:
        problems.append(f"exit status {outcome.status}, expected {case.status} "
                        f"(the case: {case.effect})")
    wanted = 1 if case.logs_error else 0
    if len(outcome.errors) != wanted:
        problems.append(f"{len(outcome.errors)} error lines, expected {wanted} "
                        f"(the case: {case.effect})")
    problems += harness.check_lines(outcome, (*case.culprits, "mjf.conf"),
                                    BASELINE_LINES.get(entry.name, ()))
    problems += check_names(case, outcome)
    problems += check_job_run(sandbox, entry, case, outcome, environ)
    if entry.name == "htcondor-wrapper":
        problems += check_wrapper_error_file(sandbox, case)
    return problems


def check_names(case: Case, outcome) -> list[str]:
    """The error line names what the case says it must (a refused config value: its key)."""
    return [f"the error line does not name {name!r}: {line[:300]!r}"
            for line in outcome.errors for name in case.names if name not in line]


def jobstatus_offered(entry: Entry, case: Case) -> bool:
    """Whether the config the hook reads offers $JOBSTATUS: the case's own, or the case
    directory's - none where the hook falls back to the built-in defaults
    (mutations.config_path_effect: $MJF_CONFIG names no file it reads)."""
    if case.config is None and case.host_defaults:
        return False
    config = case.config if case.config is not None else laid_out_config(
        entry, case.on_error_fail, case.jobstatus).encode()
    return offers_jobstatus(config)


def jobstatus_expected(entry: Entry, case: Case, offered: bool | None = None) -> bool:
    """Whether a job that gets JOBFEATURES gets JOBSTATUS too: the config the hook reads
    offers it (``offered``: whether the hook reads that, default jobstatus_offered), and
    the job's directory has a jobstatus/ - made by the hook itself, or by what ran first
    (``entry.prepare``: the Prolog before a TaskProlog, ...), with the case directory's
    config."""
    if offered is None:
        offered = jobstatus_offered(entry, case)
    return offered and (entry.prepare is None or case.jobstatus)


def check_jobstatus(variables: dict[str, str], expected: bool, listing=None) -> list[str]:
    """Where a job gets JOBFEATURES (``variables``: what it gets): with $JOBSTATUS
    offered (``expected``), JOBSTATUS names an empty directory beside its jobfeatures/ (as
    ``listing`` recorded it when the job started, else as it is now); without, none."""
    status_dir, features_dir = variables.get("JOBSTATUS"), variables.get("JOBFEATURES")
    if not features_dir or not expected:
        return [f"JOBSTATUS={status_dir!r} given (the site does not offer it here, or the "
                f"job got no JOBFEATURES)"] if status_dir is not None else []
    if status_dir is None:
        return ["no JOBSTATUS although the site offers it ([mjf] jobstatus = yes)"]
    beside = os.path.join(os.path.dirname(features_dir.rstrip("/")), "jobstatus")
    if features_dir.startswith("/") and status_dir != beside:
        return [f"JOBSTATUS={status_dir!r} is not beside JOBFEATURES={features_dir!r}"]
    names = listing.get("JOBSTATUS") if listing is not None else (
        sorted(os.listdir(status_dir)) if os.path.isdir(status_dir) else None)
    if names is None:
        return [f"JOBSTATUS={status_dir!r} is no directory"]
    return [f"JOBSTATUS={status_dir!r} is not empty: {names}"] if names else []


def exported_lines(stdout: str) -> dict[str, str]:
    """What a TaskProlog's ``export NAME=value`` lines give."""
    return dict(line[len("export "):].split("=", 1) for line in stdout.splitlines()
                if line.startswith("export ") and "=" in line)


def expected_job_argv(sandbox, entry: Entry, case: Case) -> list[str]:
    """What a job runner execs: the entry's job argv; for the HTCondor wrapper, the chained
    wrapper the case says is in force (if any), then the job's argv; for a Grid Engine
    starter, what the case says it starts the job with."""
    if case.job_command is not None:
        return [sandbox.expand(arg) for arg in case.job_command[1]]
    if entry.name != "htcondor-wrapper":
        return [sandbox.expand(arg) for arg in entry.job_argv]
    chained = entry.job_argv[0] if case.next_wrapper is True else case.next_wrapper
    return ([sandbox.expand(chained)] if chained else []) + JOB_ARGV


def check_job_run(sandbox, entry: Entry, case: Case, outcome, environ) -> list[str]:
    """A job runner ran the job exactly when the case says it must, with its argv and
    environment, and with MJF unless set-up failed."""
    if entry.job_argv is None or not case.job_runs:
        return [f"ran {[argv for argv, *_ in outcome.execs]} (the case: {case.effect})"] \
            if outcome.execs else []
    if len(outcome.execs) != 1:
        return [f"the job was run {len(outcome.execs)} times, expected once"]
    argv, job_environ, problems, _ = outcome.execs[0]
    wanted = expected_job_argv(sandbox, entry, case)
    if argv != wanted:
        problems = [*problems, f"the job ran as {argv}, not {wanted}"]
    file = case.job_command[0] if case.job_command is not None else entry.job_file
    if file is not None and outcome.exec_files != [sandbox.expand(file)]:
        problems = [*problems, f"the job ran from {outcome.exec_files}, not {file}"]
    exported = [name for name in ("MACHINEFEATURES", "JOBFEATURES") if job_environ.get(name)]
    if case.with_mjf and len(exported) != 2:
        problems = [*problems, f"the job got only {exported} although set-up went on"]
    elif not case.with_mjf and exported:
        problems = [*problems, f"the job got {exported} although set-up failed"]
    problems = [*problems, *check_jobstatus(job_environ, jobstatus_expected(entry, case),
                                            outcome.execs[0][3])]
    if not case.via_env_file:
        lost = [name for name, value in environ.items()
                if job_environ.get(name) != sandbox.expand(value)]
        if lost:
            problems = [*problems, f"the job lost its variables {lost}"]
    return problems


def check_wrapper_error_file(sandbox, case: Case) -> list[str]:
    """HTCondor learns of a job the wrapper did not run from one line in
    $_CONDOR_WRAPPER_ERROR_FILE (docs/htcondor.md); of a job it ran, from nothing there."""
    path = sandbox.path("scratch/.job_wrapper_failure")
    if os.path.lexists(path) != (case.status == 1):
        return [f"{path} {'exists' if os.path.lexists(path) else 'is missing'} "
                f"(exit status {case.status} expected)"]
    if case.status != 1:
        return []
    with open(path, "rb") as handle:
        lines = handle.read().decode("utf-8", "replace").splitlines()
    if len(lines) != 1 or not lines[0].startswith("mjf-htcondor-wrapper: "):
        return [f"{path} holds {lines[:3]!r}, not one line of the wrapper"]
    return []


def check_job_keys(sandbox, case: Case, outcome, started: int, ended: int,
                   jobstatus: bool = False) -> list[str]:
    """What a Slurm >= 23.02 Prolog wrote is what the model says (Case.job_keys): each
    modelled key with its value (or absent), the pending mark, whether scontrol was asked,
    and a warning naming each key it lost; and a jobstatus/ where the site offers
    $JOBSTATUS (``jobstatus``), none where it does not."""
    model = case.job_keys
    if model is None:
        return []
    job_dir = os.path.join(harness.configured_base_dir(sandbox), "jobs", job_dir_name(model.job))
    problems = []
    status_dir = os.path.join(job_dir, "jobstatus")
    if os.path.isdir(job_dir) and os.path.isdir(status_dir) != jobstatus:
        problems.append(f"{status_dir} {'exists' if not jobstatus else 'is missing'} "
                        f"([mjf] jobstatus {'yes' if jobstatus else 'no'})")
    for key, expected in model.keys.items():
        try:
            with open(os.path.join(job_dir, "jobfeatures", key), "rb") as handle:
                written = handle.read().decode("ascii", "replace").strip()
        except OSError:
            written = None
        if expected is None:
            if written is not None:
                problems.append(f"{key} is {written!r}, expected none")
        elif written is None:
            problems.append(f"{key} not written, expected {expected}")
        elif expected == CLOCK:
            if not (written.isdigit() and started <= int(written) <= ended):
                problems.append(f"{key} is {written!r}, expected {CLOCK} ({started}-{ended})")
        elif expected != PRESENT and written != expected:
            problems.append(f"{key} is {written!r}, expected {expected!r}")
    pending = os.path.exists(os.path.join(job_dir, "state", "pending"))
    if model.pending is not None and pending != model.pending:
        problems.append(f"pending is {pending}, expected {model.pending}")
    asked = [argv for argv in outcome.commands if os.path.basename(argv[0]) == "scontrol"]
    if model.scontrol is not None and bool(asked) != model.scontrol:
        problems.append(f"scontrol asked {asked}, expected {'it' if model.scontrol else 'none'}")
    warnings = [line for line in outcome.stderr_lines if ": warning: " in line]
    problems += [f"{key} left out without a warning naming it" for key in model.lost
                 if not any(key in line for line in warnings)]
    return problems


@pytest.mark.parametrize("case", [_marked(case) for case in CASES])
def test_case(sandbox, case):
    if case.records:
        require(WRITES_RECORDS, RECORDS_NEED_ROOT)
    entry = ENTRIES[case.entry]
    box = sandbox()
    started = int(time.time())
    outcome, store_problems = run_case(box, entry, case)
    ended = math.ceil(time.time())
    problems = list(store_problems)
    problems += check_outcome(box, entry, case, outcome,
                              {**entry.environ, **case.env} if not case.via_env_file else {})
    problems += check_job_keys(box, case, outcome, started, ended,
                               jobstatus_offered(entry, case))
    if entry.name in TASKPROLOG_EXPORTS:
        problems += check_jobstatus(exported_lines(outcome.stdout),
                                    jobstatus_expected(entry, case))
    if case.records or entry.name in (*RECORD_WRITERS, "slurm-taskepilog"):
        problems += check_records(box, entry, case)
    if entry.name.startswith("pbs-"):
        problems += check_pbs_printed(entry, case, outcome)
    problems += check_secret(box, outcome)
    assert not problems, "\n".join([*problems, "stderr:", *outcome.stderr_lines[:10]])


def check_secret(sandbox, outcome) -> list[str]:
    """Nothing of a root-only file a case names to a hook (etc/secret: SECRET_MARKER,
    SECRET_NUMBER as this host's slots) in its output, its log lines or any file it
    wrote."""
    problems = []
    for where, text in (("stdout", outcome.stdout), ("stderr", "\n".join(outcome.stderr_lines)),
                        ("syslog", "\n".join(outcome.syslog_lines))):
        if SECRET_MARKER in text:
            problems.append(f"the root-only file's content reached its {where}")
    for directory, _, names in os.walk(sandbox.path("")):
        for name in names:
            path = os.path.join(directory, name)
            if path == sandbox.path("etc/secret") or os.path.islink(path) \
                    or not os.path.isfile(path) or os.path.getsize(path) > 1 << 20:
                continue
            with open(path, "rb") as handle:
                data = handle.read()
            if SECRET_MARKER.encode() in data and "/etc/secret" not in path and \
                    not path.startswith(sandbox.path("active_jobs")):
                problems.append(f"the root-only file's content reached {path}")
            if name in ("allocated_cpu", "allocated_CPU", "jobslots") \
                    and data.strip() == SECRET_NUMBER.encode():
                problems.append(f"{path} holds the slots the root-only file gave")
    return problems


# -- the unbroken recorded inputs ---------------------------------------------------------------

# What the recorded inputs give, with COMMON_CONFIG's legacy_keys = yes: every key of the
# spec a backend can tell, and the draft-0.99 names of those that have one.
MACHINE_KEYS = frozenset({"total_cpu", "hs06", "grace_secs",  # hs06, grace_secs: configured
                          "jobslots", "log_cores", "phys_cores"})  # legacy
LIMITS = frozenset({"max_rss_bytes", "mem_limit_MB"})  # what only the job's own process shows
JOB_KEYS = frozenset({
    "job_id", "jobstart_secs", "allocated_cpu", "wall_limit_secs", "cpu_limit_secs",
    "max_rss_bytes", "max_swap_bytes", "scratch_limit_bytes", "hs06_job", "grace_secs_job",
    "allocated_CPU", "wall_limit_secs_lrms", "cpu_limit_secs_lrms", "mem_limit_MB",
    "disk_limit_GB", "cpufactor_lrms"})  # legacy
# `mjf run` without --wall-limit: no wall limit, so no CPU limit derived from it (docs/keys.md).
RUN_JOB_KEYS = JOB_KEYS - {"wall_limit_secs", "cpu_limit_secs", "wall_limit_secs_lrms",
                           "cpu_limit_secs_lrms"}
CONDOR_JOB_ID = "vm#1.0#1795319385"  # the job ad's GlobalJobId
CONDOR_JOB_ID_OF_EXIT = CONDOR_JOB_ID  # the final ad's, made the same (FINAL_AD)
# What each entry point leaves in base_dir/jobs: {job directory: (keys, pending mark)}.
BASELINE_JOBS = {
    "slurm-prolog": {"3": (JOB_KEYS, True)},  # cgroup.conf constrains RAM: the task completes
    "slurm-epilog": {"33": (JOB_KEYS, True)},  # job 3 removed, the other job left alone
    "slurm-taskprolog": {"3": (JOB_KEYS, False)},  # completed from inside the job
    # 24.11: the Prolog's environment has no memory request (the first task completes it),
    # a RunInJob Prolog reads it from the job's cgroup (final at once, nothing pending).
    "slurm-24.11-prolog": {"9": (JOB_KEYS - LIMITS, True)},
    "slurm-24.11-runinjob-prolog": {"14": (JOB_KEYS, False)},
    "slurm-24.11-epilog": {"33": (JOB_KEYS - LIMITS, True)},  # job 9 removed
    "slurm-24.11-taskprolog": {"9": (JOB_KEYS, False)},
    "htcondor-wrapper": {},  # in the job's scratch
    "htcondor-job-exit": {},  # the wrapper's, in the job's scratch: removed
    "slurm-taskepilog": {"3": (JOB_KEYS, True)},  # as its Prolog left it, and a report
    "htcondor-cron": {},
    "lsf-starter": {"1234": (JOB_KEYS, False)},
    "lsf-pre-exec": {"1234": (JOB_KEYS - LIMITS, True)},  # the starter adds the limits
    "lsf-exports": {"1234": (JOB_KEYS, False)},
    "lsf-post-exec": {},
    "lsf-starter-after-pre-exec": {"1234": (JOB_KEYS, False)},
    # The spool config gives the prolog the limits; the starter completes them (the cgroup).
    "gridengine-prolog": {"13": (JOB_KEYS, True)},
    "gridengine-epilog": {"14.2": (JOB_KEYS, True)},  # job 13 removed, task 14.2 left alone
    "gridengine-starter": {"13": (JOB_KEYS, False)},
    "gridengine-starter-after-prolog": {"13": (JOB_KEYS, False)},
    "mjf-run": {},  # removed when the job ended
    "mjf-machine": {},
    # PBS: exec_vnode gives this host's CPUs and memory; nothing pending (no job process
    # completes anything).
    **{name: {job_dir_name(PBS_JOB): (JOB_KEYS, False)}
       for name in ("pbs-begin", "pbs-launch", "pbs-profile")},
    "pbs-end": {job_dir_name(PBS_OTHER_JOB): (JOB_KEYS, False)},  # job a removed
    "pbs-prologue": {job_dir_name(PBS_CLASSIC_JOB): (JOB_KEYS, False)},
    "pbs-prologue-torque": {job_dir_name(PBS_CLASSIC_JOB): (JOB_KEYS, False)},
    "pbs-epilogue": {job_dir_name(PBS_JOB): (JOB_KEYS, False)},  # job 8 removed
}
# What a job runner's job finds in $MACHINEFEATURES and $JOBFEATURES, and its job_id.
BASELINE_EXPORTS = {
    "htcondor-wrapper": ("@D@/scratch/.mjf/machinefeatures",
                         f"@D@/scratch/.mjf/jobs/{CONDOR_JOB_ID}/jobfeatures",
                         JOB_KEYS, CONDOR_JOB_ID),
    "lsf-starter": ("@D@/base/machinefeatures", "@D@/base/jobs/1234/jobfeatures", JOB_KEYS,
                    "1234"),
    "lsf-starter-after-pre-exec": ("@D@/base/machinefeatures",
                                   "@D@/base/jobs/1234/jobfeatures", JOB_KEYS, "1234"),
    **{name: ("@D@/base/machinefeatures", "@D@/base/jobs/13/jobfeatures", JOB_KEYS, "13")
       for name in GRIDENGINE_STARTERS},
    "mjf-run": ("@D@/base/machinefeatures", None, RUN_JOB_KEYS, None),  # a generated id
}
TASKPROLOG_EXPORTS = {
    name: ["export MACHINEFEATURES=@D@/base/machinefeatures",
           f"export JOBFEATURES=@D@/base/jobs/{job}/jobfeatures"]
    for name, job in (("slurm-taskprolog", "3"), ("slurm-24.11-taskprolog", "9"))}


def taskprolog_exports(name: str, jobstatus: bool) -> list[str]:
    """A TaskProlog's lines; JOBSTATUS (always a path) beside JOBFEATURES where offered."""
    lines = TASKPROLOG_EXPORTS[name]
    beside = lines[1].replace("export JOBFEATURES=", "export JOBSTATUS=").replace(
        "/jobfeatures", "/jobstatus")
    return [*lines, beside] if jobstatus else lines
CRON_ATTRIBUTES = ["MJF_MACHINE_TOTAL_CPU", "MJF_MACHINE_HS06", "MJF_MACHINE_SHUTDOWNTIME",
                   "MJF_MACHINE_GRACE_SECS"]


# What the PBS begin, launch and profile roles print for job a (what the adapter puts into
# the job's Variable_List or environment; the export lines of /etc/profile.d/mjf.sh,
# shell-quoted).
PBS_PRINTS = {"pbs-begin": "{name}={value}", "pbs-launch": "{name}={value}",
              "pbs-profile": "export {name}='{value}'",
              "lsf-exports": "export {name}='{value}'"}


def pbs_printed(box, name: str, jobstatus: bool, job_dir: str | None = None) -> list[str]:
    """What a PBS role (or ``lsf-exports``, the same ``export`` lines, for ``job_dir``)
    prints where its job is set up."""
    job = box.path(f"base/jobs/{job_dir or job_dir_name(PBS_JOB)}")
    values = {"MACHINEFEATURES": box.path("base/machinefeatures"),
              "JOBFEATURES": f"{job}/jobfeatures",
              **({"JOBSTATUS": f"{job}/jobstatus"} if jobstatus else {})}
    return [PBS_PRINTS[name].format(name=variable, value=value)
            for variable, value in values.items()]


def check_pbs_printed(entry: Entry, case: Case, outcome) -> list[str]:
    """A PBS begin or launch prints the job's variables where set-up goes on, nothing where
    it fails (the adapter then sets none); the profile the export lines, or nothing (the
    job has no directory here); the other roles print nothing."""
    lines = outcome.stdout.splitlines()
    if entry.name not in PBS_PRINTS or case.effect != DROPS or (
            entry.name == "pbs-profile" and not lines):
        return [f"printed {lines[:3]!r} (the case: {case.effect})"] if lines else []
    prefix = "export " if entry.name == "pbs-profile" else ""
    names = [line[len(prefix):].split("=", 1)[0] if line.startswith(prefix) else line
             for line in lines]
    wanted = ["MACHINEFEATURES", "JOBFEATURES", *["JOBSTATUS"] * jobstatus_expected(entry, case)]
    return [] if names == wanted else [f"printed {lines[:4]!r}, not {wanted}"]


def check_baseline_store(sandbox, entry: Entry, jobstatus: bool = False) -> list[str]:
    """Every key written where the entry point writes it, each a valid value; each job an
    empty jobstatus/ where the site offers $JOBSTATUS (``jobstatus``), none where not."""
    problems = []
    base = sandbox.path("base")
    machine = os.path.join(base, "machinefeatures")
    if entry.name not in ("htcondor-wrapper", "htcondor-cron", "htcondor-job-exit"):
        # (these write no base_dir)
        names = sorted(os.listdir(machine)) if os.path.isdir(machine) else None
        if names is None or set(names) != MACHINE_KEYS:
            problems.append(f"{machine} holds {names}, not {sorted(MACHINE_KEYS)}")
        elif harness.key_file_problems(machine, names):
            problems += harness.key_file_problems(machine, names)
    jobs = os.path.join(base, "jobs")
    found = sorted(os.listdir(jobs)) if os.path.isdir(jobs) else []
    if found != sorted(BASELINE_JOBS[entry.name]):
        problems.append(f"{jobs} holds {found}, not {sorted(BASELINE_JOBS[entry.name])}")
    for job, (keys, pending) in BASELINE_JOBS[entry.name].items():
        directory = os.path.join(jobs, job, "jobfeatures")
        names = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
        if set(names) != keys:
            problems.append(f"{directory}: missing {sorted(keys - set(names))}, "
                            f"unexpected {sorted(set(names) - keys)}")
        problems += harness.job_dir_problems(directory)
        marked = os.path.exists(os.path.join(jobs, job, "state", "pending"))
        if marked != pending:
            problems.append(f"job {job}: pending is {marked}, expected {pending}")
        status_dir = os.path.join(jobs, job, "jobstatus")
        made = sorted(os.listdir(status_dir)) if os.path.isdir(status_dir) else None
        if made != ([] if jobstatus else None):
            problems.append(f"{status_dir}: {made}, expected "
                            f"{'an empty directory' if jobstatus else 'none'}")
    return problems


def check_baseline_job(sandbox, entry: Entry, outcome, jobstatus: bool = False) -> list[str]:
    """A job runner's job ran once, with its argv and every key (and JOBSTATUS where the
    site offers it)."""
    if entry.job_argv is None:
        return [f"ran {outcome.execs}"] if outcome.execs else []
    if len(outcome.execs) != 1:
        return [f"the job was run {len(outcome.execs)} times"]
    argv, job_environ, problems, listing = outcome.execs[0]
    problems = list(problems)
    if argv != [sandbox.expand(arg) for arg in entry.job_argv]:
        problems.append(f"the job ran as {argv}")
    machine_dir, job_dir, keys, job_id = BASELINE_EXPORTS[entry.name]
    if job_environ.get("MACHINEFEATURES") != sandbox.expand(machine_dir):
        problems.append(f"MACHINEFEATURES={job_environ.get('MACHINEFEATURES')!r}")
    if job_dir and job_environ.get("JOBFEATURES") != sandbox.expand(job_dir):
        problems.append(f"JOBFEATURES={job_environ.get('JOBFEATURES')!r}")
    if set(listing.get("MACHINEFEATURES", ())) != MACHINE_KEYS:
        problems.append(f"$MACHINEFEATURES held {listing.get('MACHINEFEATURES')}")
    if set(listing.get("JOBFEATURES", ())) != keys:
        got = set(listing.get("JOBFEATURES", ()))
        problems.append(f"$JOBFEATURES: missing {sorted(keys - got)}, "
                        f"unexpected {sorted(got - keys)}")
    if job_id and job_environ.get("JOBFEATURES"):
        with open(os.path.join(job_environ["JOBFEATURES"], "job_id")) as handle:
            if handle.read() != job_id:
                problems.append(f"job_id is not {job_id!r}")
    problems += check_jobstatus(job_environ, jobstatus, listing)
    return problems


# What each end-of-job hook's record holds (record_store.contents with format = sss, apel):
# the JSON and the SSS XML always, the APEL message where the record has a CPU time - the
# TaskEpilog's report (Slurm 22.05, after its task), the shepherd's usage file, the final
# job ad; not an LSF post-exec's, nor a 24.11 Epilog's without a report.
RECORD_FILES = {"slurm-epilog": {".json", ".xml", ".apel"},
                "slurm-24.11-epilog": {".json", ".xml"}, "lsf-post-exec": {".json", ".xml"},
                "gridengine-epilog": {".json", ".xml", ".apel"},
                "htcondor-job-exit": {".json", ".xml", ".apel"},
                "pbs-end": {".json", ".xml", ".apel"}, "pbs-epilogue": {".json", ".xml", ".apel"}}
RECORDED_JOBS = {"slurm-epilog": "3", "slurm-24.11-epilog": "9", "lsf-post-exec": "1234",
                 "gridengine-epilog": "13", "htcondor-job-exit": CONDOR_JOB_ID_OF_EXIT,
                 "pbs-end": PBS_JOB, "pbs-epilogue": PBS_CLASSIC_JOB}
# `mjf run` records the command it ran itself (docs/records.md: "`mjf run` | itself").
OTHER_RECORDS = {"mjf-run": 1}
# In-process, `mjf run`'s command is taken as run, unmeasured (harness.Sandbox._spawn): its
# record has no CPU time, so no APEL message (the warning names its generated job id).
NO_CPU_TIME = "warning: no APEL file: APEL record for job "


def check_baseline_records(box, entry: Entry) -> list[str]:
    """Where the site keeps records: an end-of-job hook leaves exactly one whole record of
    its job (RECORD_FILES) in the records directory, and removes the job's directory;
    nothing else leaves one (but `mjf run`); the TaskEpilog leaves its report."""
    added, problems = new_records(box)
    wanted = 1 if entry.name in RECORD_WRITERS else OTHER_RECORDS.get(entry.name, 0)
    if len(added) != wanted:
        problems.append(f"{len(added)} records written, expected {wanted}: {sorted(added)}")
    if entry.name in RECORD_WRITERS and len(added) == 1:
        import json

        (stem, suffixes), = added.items()
        if suffixes != RECORD_FILES[entry.name]:
            problems.append(f"{stem}: {sorted(suffixes)}, not {sorted(RECORD_FILES[entry.name])}")
        if os.path.dirname(os.path.dirname(stem)) != box.path(harness.RECORDS_DIR):
            problems.append(f"{stem}: not in a day directory of {box.path('records')}")
        with open(stem + ".json") as handle:
            job_id = json.load(handle).get("job_id")
        if job_id != RECORDED_JOBS[entry.name]:
            problems.append(f"{stem}.json: job_id {job_id!r}, not {RECORDED_JOBS[entry.name]!r}")
        if os.path.lexists(box.path(ENDED_JOB_DIRS[entry.name])):
            problems.append(f"{ENDED_JOB_DIRS[entry.name]} is still there")
    if entry.name == "slurm-taskepilog":
        report = box.path(f"base/{TASKEPILOG_WRITES}/report")
        content = None
        if os.path.isfile(report):
            with open(report) as handle:
                content = handle.read()
        if content != USAGE_REPORT:
            problems.append(f"{report}: {content!r}, not {USAGE_REPORT!r}")
    return problems


@pytest.mark.parametrize("on_error_fail, jobstatus, records", [
    (False, False, False), (True, False, False), (False, True, False), (False, False, True)],
    ids=["continue", "fail", "jobstatus", "records"])
@pytest.mark.parametrize("name", list(ENTRIES))
def test_baseline(sandbox, name, on_error_fail, jobstatus, records):
    """The unbroken recorded input: exit 0, no line at all (BASELINE_LINES), every key; and
    where the site offers $JOBSTATUS, each job's empty jobstatus/, exported to the job;
    where it keeps records, each ended job's record (check_baseline_records)."""
    if records:
        require(WRITES_RECORDS, RECORDS_NEED_ROOT)
    entry = ENTRIES[name]
    box = sandbox()
    outcome, store_problems = run_case(box, entry, Case(
        name, "baseline", (), on_error_fail=on_error_fail, jobstatus=jobstatus,
        records=records))
    problems = list(store_problems)
    if records or name == "slurm-taskepilog":
        problems += check_baseline_records(box, entry)
    if outcome.status != 0:
        problems.append(f"exit status {outcome.status}")
    allowed = BASELINE_LINES[name]
    problems += [f"logged {line!r}" for line in outcome.stderr_lines
                 if harness.normalise(line) not in allowed and not (
                     records and name == "mjf-run" and NO_CPU_TIME in line)]
    problems += check_baseline_store(box, entry, jobstatus)
    problems += check_baseline_job(box, entry, outcome, jobstatus)
    if name in TASKPROLOG_EXPORTS and outcome.stdout.splitlines() != [
            box.expand(line) for line in taskprolog_exports(name, jobstatus)]:
        problems.append(f"printed {outcome.stdout!r}")
    if name == "htcondor-cron":
        printed = [line.split(" = ")[0] for line in outcome.stdout.splitlines()]
        if printed != CRON_ATTRIBUTES or "MJF_MACHINE_HS06 = 2400" not in outcome.stdout:
            problems.append(f"printed {outcome.stdout!r}")
    if name == "htcondor-wrapper" and os.path.lexists(box.path("scratch/.job_wrapper_failure")):
        problems.append("wrote $_CONDOR_WRAPPER_ERROR_FILE")
    if name in PBS_PRINTS and outcome.stdout.splitlines() != pbs_printed(
            box, name, jobstatus, "1234" if name == "lsf-exports" else None):
        problems.append(f"printed {outcome.stdout!r}")
    assert not problems, "\n".join([*problems, "stderr:", *outcome.stderr_lines[:10]])


# A base_dir a shell would read as code, were the profile's lines not quoted.
PBS_HOSTILE_BASE_DIR = "@D@/b'a$(touch pwned)`touch pwned2`\"x y;*"


@pytest.mark.parametrize("name", ["pbs-launch", "pbs-profile"])
def test_pbs_printed_with_a_hostile_base_dir(sandbox, name):
    """What launch and profile print names base_dir as it is: each line one variable, and
    the profile's export lines, evaluated by sh (as /etc/profile.d/mjf.sh does), give the
    paths back and run nothing."""
    entry = ENTRIES[name]
    box = sandbox()
    config = PBS_CONFIG.replace("base_dir = @D@/base", f"base_dir = {PBS_HOSTILE_BASE_DIR}")
    case = Case(name, "hostile-base-dir", (), config=config.encode())
    lay_out(box, entry)
    box.write_files({"mjf.conf": case.config})
    entry.prepare(box)
    outcome = entry.call(box, case, environ_for(box, entry, case))
    base = box.expand(PBS_HOSTILE_BASE_DIR)
    job = f"{base}/jobs/{job_dir_name(PBS_JOB)}/jobfeatures"
    problems = [f"logged {line!r}" for line in outcome.stderr_lines]
    if name == "pbs-launch":
        wanted = [f"MACHINEFEATURES={base}/machinefeatures", f"JOBFEATURES={job}"]
        if outcome.stdout.splitlines() != wanted:
            problems.append(f"printed {outcome.stdout!r}")
    else:
        result = subprocess.run(["/bin/sh", "-c", 'eval "$1"; printf "%s\\n" '
                                 '"$MACHINEFEATURES" "$JOBFEATURES"', "sh", outcome.stdout],
                                capture_output=True, cwd=box.d, timeout=10, text=True)
        if result.stdout.splitlines() != [f"{base}/machinefeatures", job] or result.stderr:
            problems.append(f"sh read {result.stdout!r} {result.stderr!r} from "
                            f"{outcome.stdout!r}")
    problems += [f"{path} made" for path in ("pwned", "pwned2")
                 if os.path.lexists(box.path(path))]
    assert not problems, "\n".join(problems)


# -- the installed commands, as real processes -------------------------------------------------


def _real_argv(sandbox, entry: Entry, case: Case, job=None) -> list[str]:
    """The command line a batch system would use, with a job that says it ran."""
    program, role = entry.command
    if job is None and entry.name in GRIDENGINE_STARTERS:
        job = [sandbox.expand(arg) for arg in GE_JOB]  # its script runs SHOW_JOB
    job = job or ["/bin/sh", "-c", SHOW_JOB, "job", "a b"]
    argv = [installed_command(program)]
    if role is None:  # the HTCondor wrapper, mjf-gridengine-starter: its arguments are the job
        return argv + job
    head, role = (role[:1], role[1:]) if program == "mjf" else ([], role)
    argv += [*head, "--config", sandbox.path("mjf.conf")]
    if case.via_env_file:
        argv += ["--env-file", sandbox.path("job.env")]
    if program == "mjf-pbs":  # the role, then the case's words (PBS_WORDS) or the entry's
        return argv + role[:1] + pbs_words(case, role[1:])
    argv += list(case.argv)  # the case's own options (mjf run's), as in-process (options)
    if program == "mjf-lsf" and role == ["starter"]:
        return argv + role + (job[2:3] if job[:2] == ["/bin/sh", "-c"] else job)
    if program == "mjf-gridengine" and role == ["starter"]:
        return argv + role + job
    return argv + role + (["--", *job] if head == ["run"] else [])


def _runs_for_real(case: Case) -> bool:
    """Inputs a real process gets the same way: no faked command output or /proc, and no
    fallback to the host's own /etc/mjf/mjf.conf or /run/mjf."""
    entry = ENTRIES[case.entry]
    return (not case.outputs and not any(path.startswith("root/") for path in case.files)
            and not (entry.command[1] is None and case.via_env_file) and _fits_execve(case)
            and not case.host_defaults and entry.real_proc)


def _fits_execve(case: Case) -> bool:
    """A real environment or argv holds no string over 128 KiB (MAX_ARG_STRLEN), no NUL."""
    return all(len(value or "") < 100000 for value in case.env.values()) and all(
        len(word) < 100000 and "\0" not in word for word in case.argv)


REAL_SAMPLE = [case for name in ENTRIES if ENTRIES[name].real_proc
               for case in sample([case for case in CASES if case.entry == name
                                   and _runs_for_real(case)], 5)]


def run_real(box, entry: Entry, case: Case, job=None):
    environ = {name: box.expand(value) for name, value in environ_for(box, entry, case).items()}
    before = harness.snapshot(box.d)
    box.records_before = records_state(box)
    stdin = None
    if entry.stdin is not None:  # an empty one where the case left no regular file
        path = box.path(entry.stdin)
        stdin = path if os.path.isfile(path) and not os.path.islink(path) else os.devnull
    with open(stdin or os.devnull, "rb") as handle:
        result = subprocess.run(_real_argv(box, entry, case, job), capture_output=True,
                                cwd=box.d, env={"PATH": "/usr/bin:/bin", **environ},
                                timeout=60, stdin=handle if stdin else None)
    outcome = harness.Outcome(result.returncode, result.stdout.decode(errors="replace"),
                              result.stderr.decode(errors="replace"), [], [])
    return outcome, harness.check_stores(box, before, harness.snapshot(box.d))


def check_real_job(entry: Entry, case: Case, outcome) -> list[str]:
    """What the job said: that it ran (with its argv), and whether it had MJF (and a
    JOBSTATUS directory, where the site offers it)."""
    if entry.job_argv is None:
        return []
    # The LSF starter runs SHOW_JOB itself as "%USRCMD" (no arguments); the others pass "a b".
    ran = ("argv:" if entry.command[0] == "mjf-lsf" else "argv:a b") in outcome.stdout.splitlines()
    if ran != case.job_runs:
        return [f"the job ran: {ran}, expected {case.job_runs} (the case: {case.effect})"]
    with_mjf = "jobfeatures:complete" in outcome.stdout.splitlines()
    if ran and with_mjf != case.with_mjf:
        return [f"the job had MJF: {with_mjf}, expected {case.with_mjf}"]
    with_status = "jobstatus:directory" in outcome.stdout.splitlines()
    wanted = ran and with_mjf and jobstatus_expected(entry, case)
    if with_status != wanted:
        return [f"the job had a JOBSTATUS directory: {with_status}, expected {wanted}"]
    return []


@pytest.mark.parametrize("case", [_marked(case) for case in REAL_SAMPLE])
def test_installed_command(sandbox, case):
    """A sample of the corpus through the installed commands: real exit codes, a real exec."""
    if case.records:
        require(WRITES_RECORDS, RECORDS_NEED_ROOT)
    entry = ENTRIES[case.entry]
    box = sandbox()
    break_inputs(box, entry, case)
    outcome, problems = run_real(box, entry, case)
    if outcome.status != case.status:
        problems.append(f"exit status {outcome.status}, expected {case.status} "
                        f"(the case: {case.effect})")
    wanted = 1 if case.logs_error else 0
    if len(outcome.errors) != wanted:
        problems.append(f"{len(outcome.errors)} error lines, expected {wanted}")
    problems += harness.check_lines(outcome, (*case.culprits, "mjf.conf"),
                                    BASELINE_LINES[entry.name])
    problems += check_names(case, outcome)
    problems += check_real_job(entry, case, outcome)
    assert not problems, "\n".join([*problems, "stderr:", *outcome.stderr_lines[:10]])


@pytest.mark.parametrize("name, jobstatus", [
    *[(name, False) for name in ENTRIES],
    *[(name, True) for name, entry in ENTRIES.items() if entry.job_argv]],
    ids=[*ENTRIES, *[f"{name}-jobstatus" for name, entry in ENTRIES.items() if entry.job_argv]])
def test_installed_baseline(sandbox, name, jobstatus):
    """The unbroken recorded input through the installed command: exit 0, nothing logged,
    a job runner's job run with its argv and MJF (and JOBSTATUS, where offered)."""
    case = Case(name, "baseline", (), jobstatus=jobstatus)
    _, outcome, problems = _installed_baseline(sandbox, case)
    problems += check_real_job(ENTRIES[name], case, outcome)
    assert not problems, "\n".join([*problems, "stderr:", *outcome.stderr_lines[:10]])


def _installed_baseline(sandbox, case):
    """The unbroken input of ``case``'s entry through its installed command: (the box, the
    outcome, what was wrong: an exit status not 0, a line logged beyond the baseline's)."""
    entry = ENTRIES[case.entry]
    box = sandbox()
    break_inputs(box, entry, case)
    outcome, problems = run_real(box, entry, case)
    if outcome.status != 0:
        problems.append(f"exit status {outcome.status}")
    problems += [f"logged {line!r}" for line in outcome.stderr_lines
                 if harness.normalise(line) not in BASELINE_LINES[case.entry]]
    return box, outcome, problems


@pytest.mark.parametrize("name", RECORD_WRITERS)
def test_installed_records_baseline(sandbox, name):
    """Each end-of-job hook through its installed command where the site keeps records:
    exit 0, nothing logged, the job's record whole in the records directory (as root), its
    directory gone."""
    require(WRITES_RECORDS, RECORDS_NEED_ROOT)
    box, outcome, problems = _installed_baseline(sandbox, Case(name, "baseline", (),
                                                               records=True))
    problems += check_baseline_records(box, ENTRIES[name])
    assert not problems, "\n".join([*problems, "stderr:", *outcome.stderr_lines[:10]])


# The job's own command cannot be executed (docs/htcondor.md): the wrapper exits 1 with one line in
# $_CONDOR_WRAPPER_ERROR_FILE; the LSF starter and `mjf run` exit as a shell would, 127 for
# a command that does not exist (the starter's "%USRCMD" through /bin/sh -c too), 126 for
# one that is not executable. Not corpus cases: their input is the job, not the batch system's.
MISSING = "@D@/no-such-command"
UNEXECUTABLE = "@D@/etc/outside"  # a file without x bits
JOB_COMMANDS = [
    ("htcondor-wrapper", "missing", [MISSING, "a b"], 1),
    ("lsf-starter", "missing", [MISSING, "a b"], 127),
    ("lsf-starter", "missing-shell", ["/bin/sh", "-c", "no-such-command-of-mjf a"], 127),
    ("mjf-run", "missing", [MISSING, "a b"], 127),
    ("mjf-run", "not-executable", [UNEXECUTABLE, "a b"], 126),
]
assert all(status == ENTRIES[name].exec_fails_exit for name, label, _, status in JOB_COMMANDS
           if label.startswith("missing"))


@pytest.mark.parametrize("name, label, job, status", JOB_COMMANDS,
                         ids=[f"{name}:{label}" for name, label, _, _ in JOB_COMMANDS])
def test_job_command_cannot_run(sandbox, name, label, job, status):
    entry = ENTRIES[name]
    box = sandbox()
    case = Case(name, label, ())
    break_inputs(box, entry, case)
    if name == "htcondor-wrapper":  # the job itself, not a chained wrapper
        box.write_files({"mjf.conf": COMMON_CONFIG.encode()})
    outcome, problems = run_real(box, entry, case, [box.expand(arg) for arg in job])
    if outcome.status != status:
        problems.append(f"exit status {outcome.status}, expected {status}")
    if name == "htcondor-wrapper":
        problems += check_wrapper_error_file(box, Case(name, label, (), effect=EXEC_FAILS))
    jobs = box.path("base/jobs")
    if name == "mjf-run" and os.path.isdir(jobs) and os.listdir(jobs):
        problems.append(f"left {os.listdir(jobs)} in {jobs}")
    assert not problems, "\n".join([*problems, "stderr:", *outcome.stderr_lines[:10]])


# -- the pure-sh TaskProlog -------------------------------------------------------------------

# Each pure-sh TaskProlog's recorded task (the in-process entry point whose input it is).
SH_ENTRIES = {"slurm-taskprolog-sh": "slurm-taskprolog",
              "slurm-24.11-taskprolog-sh": "slurm-24.11-taskprolog"}
SH_CASES = [case for case in env_cases("slurm-taskprolog-sh", SLURM_TASK_ENV,
                                       ("SLURM_JOB_ID",))
            if not case.via_env_file and _fits_execve(case)]
SH_CASES += config_cases("slurm-taskprolog-sh", SLURM_CONFIG, 20)
SH_CASES += state_cases("slurm-taskprolog-sh", JOB_STATE)
SH_CASES += [case for case in env_cases("slurm-24.11-taskprolog-sh", S24_TASK_ENV,
                                        ("SLURM_JOB_ID", "SLURM_JOB_START_TIME"))
             if not case.via_env_file and _fits_execve(case)]
SH_CASES += config_cases("slurm-24.11-taskprolog-sh", SLURM_CONFIG, 20)
SH_CASES += state_cases("slurm-24.11-taskprolog-sh", job_state_of(JOB_STATE, "9"))
# It reads [mjf] from the drop-ins too: one that is broken leaves it as silent as the config.
SH_CASES += drop_in_cases("slurm-taskprolog-sh", SLURM_CONFIG)
# Where the Prolog made a jobstatus/ (the site offers $JOBSTATUS), the sh one exports it too.
SH_CASES += [variant for name in SH_ENTRIES for variant in with_jobstatus(
    [case for case in SH_CASES if case.entry == name], 8, ENTRIES[SH_ENTRIES[name]].environ)]
assert len({case.id for case in SH_CASES}) == len(SH_CASES), "case ids must be unique"


def run_sh_taskprolog(box, environ):
    result = subprocess.run([installed_command("mjf-slurm-taskprolog")], capture_output=True,
                            cwd=box.d, timeout=60, env={"PATH": "/usr/bin:/bin", **environ,
                                                        "MJF_CONFIG": box.path("mjf.conf")})
    return harness.Outcome(result.returncode, result.stdout.decode(errors="replace"),
                           result.stderr.decode(errors="replace"), [], [])


@pytest.mark.parametrize("case", SH_CASES, ids=[case.id for case in SH_CASES])
def test_sh_taskprolog(sandbox, case):
    """bin/mjf-slurm-taskprolog: exit 0 always, nothing or exactly the two export lines."""
    entry = ENTRIES[SH_ENTRIES[case.entry]]
    box = sandbox()
    break_inputs(box, entry, case)
    environ = {name: box.expand(value) for name, value in {**entry.environ, **case.env}.items()
               if value is not None}
    before = harness.snapshot(box.d)
    outcome = run_sh_taskprolog(box, environ)
    problems = harness.check_stores(box, before, harness.snapshot(box.d))
    if outcome.status != case.status:
        problems.append(f"exit status {outcome.status}: a failing TaskProlog cancels the task")
    lines = outcome.stdout.splitlines()
    # It reads no [mjf] jobstatus: it exports the jobstatus/ the Prolog made.
    made = jobstatus_expected(entry, case, offered=True)
    wanted = ["export MACHINEFEATURES", "export JOBFEATURES", *["export JOBSTATUS"] * made]
    if lines and [line.split("=", 1)[0] for line in lines] != wanted:
        problems.append(f"printed {lines[:3]!r}, not the {len(wanted)} export lines")
    problems += check_jobstatus(exported_lines(outcome.stdout), made)
    problems += harness.check_lines(outcome, (*case.culprits, "mjf.conf", "/base"),
                                    BASELINE_LINES[entry.name])
    assert not problems, "\n".join([*problems, "stderr:", *outcome.stderr_lines[:10]])


@pytest.mark.parametrize("name, jobstatus", [(name, on) for on in (False, True)
                                             for name in SH_ENTRIES],
                         ids=[*SH_ENTRIES, *[f"{name}-jobstatus" for name in SH_ENTRIES]])
def test_sh_taskprolog_baseline(sandbox, name, jobstatus):
    """The unbroken recorded task: exit 0, nothing logged, the two export lines (three where
    the site offers $JOBSTATUS), and the pending job completed (by `mjf-slurm taskprolog`,
    which the sh one calls)."""
    entry = ENTRIES[SH_ENTRIES[name]]
    box = sandbox()
    break_inputs(box, entry, Case(name, "baseline", (), jobstatus=jobstatus))
    environ = {name: box.expand(value) for name, value in entry.environ.items()}
    outcome = run_sh_taskprolog(box, environ)
    problems = []
    if outcome.status != 0:
        problems.append(f"exit status {outcome.status}")
    problems += [f"logged {line!r}" for line in outcome.stderr_lines]
    if outcome.stdout.splitlines() != [box.expand(line)
                                       for line in taskprolog_exports(entry.name, jobstatus)]:
        problems.append(f"printed {outcome.stdout!r}")
    problems += check_baseline_store(box, entry, jobstatus)
    assert not problems, "\n".join([*problems, "stderr:", *outcome.stderr_lines[:10]])
