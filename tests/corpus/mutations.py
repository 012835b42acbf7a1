"""The bad-input corpus: a deterministic, seeded list of mutated hook inputs.

Every case starts from what a real job gave a hook (the recorded Slurm 22.05 and
24.11 environments and 24.11's /proc/self/cgroup, HTCondor 23.9 ads, the LSF 10.1
environments, a Son of Grid Engine 8.1.9 job's environments, spool config and
pe_hostfile and shepherd's usage file, HTCondor's final job ad, a Slurm-like cgroup
tree) and breaks one thing: an environment variable, an ad attribute or the whole ad
file, a spool config entry or the whole file, a cgroup or /proc file, a line of the
config or the whole config, what scontrol/bjobs/condor_status/qstat print, the
state a previous run left (in base_dir, or the records directory), what a job's end
reads of what it used, or an option. The list depends on nothing but ``SEED``,
so the number of cases is stable from run to run (the corpus's conftest prints it).
"""

from __future__ import annotations

import functools
import grp
import os
import pwd
import random

from mjf_hooks.safefs import MAX_BATCH_FILE_BYTES
from tests.conftest import FIXTURES, fixture_text

SEED = 20261122
MIB = 1 << 20
HOST = os.uname().nodename
RNG = random.Random(SEED)

# -- what a broken input does -----------------------------------------------------------------
#
# Each case says, when it is generated, what its broken input does to the hook - from the
# input alone, never from a run. The checks derive everything else from that.

# Set-up goes on: the affected keys are left out (a warning each) or nothing changes at all.
# No error line; a job runner runs the job with MJF.
DROPS = "drops"
# Set-up fails (the hook cannot tell which job or role it is, or its store was tampered
# with): one error line; the hook exits 0 and a job runner runs the job without MJF, or,
# with [mjf] on_error = fail, it exits 1 and runs nothing.
SETUP_FAILS = "setup-fails"
# The hook's own inputs - the config, or the --env-file that may name it - cannot be used:
# one error line; the config's on_error is unknown, so the default applies: exit 0, and a
# job runner runs the job without MJF (docs/configuration.md: "A hook that meets a broken
# config logs that line and exits 0 (a wrapper still runs the job)").
UNREADABLE = "unreadable"
# The command line is wrong: one error line, the entry point's usage status, no job.
USAGE = "usage"
# The job's own command (or the wrapper it is chained to) cannot be executed.
EXEC_FAILS = "exec-fails"
# The job's record ([records] dir) cannot be written - its directory refused or unwritable:
# one error line naming it, and the end of the job goes on (its directory removed) with
# exit 0, whatever on_error says (docs/records.md: a record must never keep a job's files).
RECORD_FAILS = "record-fails"
EFFECTS = (DROPS, SETUP_FAILS, UNREADABLE, USAGE, EXEC_FAILS, RECORD_FAILS)

# Entry points that run the job, and their status when its command cannot be executed:
# what a shell gives (127) for the LSF and Grid Engine starters and `mjf run`
# (docs/troubleshooting.md), and for the HTCondor wrapper 1 plus one line in
# $_CONDOR_WRAPPER_ERROR_FILE.
GRIDENGINE_STARTERS = ("gridengine-starter", "gridengine-starter-after-prolog")
JOB_RUNNERS = {"htcondor-wrapper": 1, "lsf-starter": 127, "lsf-starter-after-pre-exec": 127,
               "mjf-run": 127, **{name: 127 for name in GRIDENGINE_STARTERS}}
# A wrong command line: 2 for the commands a person types; hooks log it and exit 0.
USAGE_EXIT = {"mjf-run": 2, "mjf-machine": 2}
# A failure with on_error = fail: exit 1, except where the batch system reads 1 as the
# node's fault. Grid Engine puts the queue instance into error for a prolog, epilog or
# starter exit other than 0, 99 or 100; 100 puts only the job into error.
GRIDENGINE_ENTRIES = ("gridengine-prolog", "gridengine-epilog", *GRIDENGINE_STARTERS)
FAILURE_EXIT = {name: 100 for name in GRIDENGINE_ENTRIES}
# The pure-sh TaskProlog exits 0 whatever happens (a failing TaskProlog cancels the task).
ALWAYS_ZERO = ("slurm-taskprolog-sh", "slurm-24.11-taskprolog-sh")


def expected_outcome(entry: str, effect: str, on_error_fail: bool) -> tuple[int, bool]:
    """(exit status, whether a job runner runs the job) for ``effect`` at ``entry``."""
    runner = entry in JOB_RUNNERS
    if entry in ALWAYS_ZERO:
        return 0, False
    if effect == USAGE:
        return USAGE_EXIT.get(entry, 0), False
    if effect == EXEC_FAILS:
        return JOB_RUNNERS[entry], False
    if effect == RECORD_FAILS:
        return 0, False
    if effect == SETUP_FAILS and on_error_fail:
        return FAILURE_EXIT.get(entry, 1), False
    return 0, runner


class Case:
    """One mutated run of one entry point.

    ``env``: variables to set (``None`` removes one); ``files``: files of the case
    directory to replace (relative path -> bytes, ``None`` to remove, ``DIRECTORY``
    for an empty directory in its place); ``config``: the config's bytes (None: the
    entry point's default config); ``argv``: extra arguments; ``culprits``: words
    of which a log line about this case must name one.

    What the broken input does, decided here: ``effect`` (one of EFFECTS);
    ``next_wrapper``: for the HTCondor wrapper, what it execs before the job - True for
    the entry's configured ``next_wrapper``, None for none (the config in force names none),
    or another path; ``job_command``: for a Grid Engine starter, the ``(file, argv)`` it
    execs (:func:`gridengine_job_start`), None for the entry's own; ``host_defaults``: the
    hook falls back to the built-in /etc/mjf/mjf.conf or /run/mjf, which only the
    in-process harness redirects into the case directory. From these: ``status``, the exit
    status; ``job_runs``, whether a job runner runs the job (with its argv); ``logs_error``,
    whether one error line is due. ``job_keys``: where the model says which keys the job's
    directory gets (a Slurm >= 23.02 Prolog, :func:`slurm_prolog_keys`), a
    :class:`JobKeys`; None where it is not modelled.

    ``jobstatus``: the case directory's config (``config`` None), and so what runs first
    (the Prolog before a TaskProlog...), offers $JOBSTATUS (``[mjf] jobstatus = yes``):
    each job's directory gets an empty ``jobstatus/`` beside its ``jobfeatures/``.
    ``names``: what the error line must name besides a culprit (a config value refused:
    its key).

    ``records``: the case directory's config (``config`` None) keeps job records
    (RECORDS_SECTION): an end-of-job hook writes the job's record, whole, before it removes
    the job's directory. ``removes_job``: the job's directory must be gone afterwards (None:
    not modelled - the case may name another job, or move base_dir).
    """

    __slots__ = ("argv", "config", "culprits", "effect", "entry", "env", "files",
                 "host_defaults", "job_command", "job_keys", "job_runs", "jobstatus",
                 "label", "names", "next_wrapper", "on_error_fail", "outputs", "records",
                 "removes_job", "status", "via_env_file")

    def __init__(self, entry: str, label: str, culprits: tuple[str, ...], env=None, files=None,
                 config: bytes | None = None, argv: tuple[str, ...] = (), outputs=None,
                 on_error_fail: bool = False, effect: str = DROPS, next_wrapper=True,
                 host_defaults: bool = False, job_command=None, job_keys=None,
                 jobstatus: bool = False, names: tuple[str, ...] = (), records: bool = False,
                 removes_job: bool | None = None) -> None:
        assert effect in EFFECTS, effect
        self.records = records
        self.removes_job = removes_job
        self.entry = entry
        self.label = label
        self.culprits = culprits
        self.env = env or {}
        self.files = files or {}
        self.config = config
        self.argv = argv
        # What a fake scontrol / bjobs / condor_status prints (a str), or raises (an Exception).
        self.outputs = outputs or {}
        self.on_error_fail = on_error_fail
        self.effect = effect
        self.next_wrapper = next_wrapper
        self.job_command = job_command
        self.host_defaults = host_defaults
        self.job_keys = job_keys
        self.jobstatus = jobstatus
        self.names = names
        self.status, self.job_runs = expected_outcome(entry, effect, on_error_fail)
        # NUL cannot be in a real environment: such values travel in an --env-file.
        self.via_env_file = "job.env" in self.files or any(
            "\0" in (value or "") for value in self.env.values())

    @property
    def id(self) -> str:
        return f"{self.entry}:{self.label}"

    @property
    def logs_error(self) -> bool:
        """One error line is due (none where set-up goes on)."""
        return self.effect != DROPS

    @property
    def with_mjf(self) -> bool:
        """A job that runs gets MACHINEFEATURES and JOBFEATURES."""
        return self.effect in (DROPS, RECORD_FAILS)

    def again(self, label: str, culprits=None, **changes) -> Case:
        """This case again, labelled ``label``, with ``changes`` (Case keywords)."""
        keywords = {name: getattr(self, name) for name in (
            "env", "files", "config", "argv", "outputs", "on_error_fail", "effect",
            "next_wrapper", "host_defaults", "job_command", "job_keys", "jobstatus", "names",
            "records", "removes_job")}
        keywords.update(changes)
        return Case(self.entry, label, self.culprits if culprits is None else culprits,
                    **keywords)


DIRECTORY = object()


HUGE_DIGITS = "9" * MIB


@functools.cache
def _huge_text(value: str) -> str:
    return (value or "x") * (MIB // max(1, len(value)))


def value_mutations(value: str, nul: bool = True) -> list[tuple[str, str]]:
    """Bad versions of one text value, labelled; duplicates of each other removed."""
    candidates = [
        ("empty", ""),
        ("truncated", value[: len(value) // 2]),
        ("binary", value + "\udcff\udcfe"),  # bytes that are not UTF-8 (surrogateescape)
        ("huge-digits", HUGE_DIGITS),  # shared: the corpus holds thousands of cases
        ("huge-text", _huge_text(value)),
        ("units-G", "10G"),
        ("units-d-hms", "1:00:00:00:00"),
        ("negative", "-1"),
        ("unicode-digits", "\u0661\u0662"),
        ("fullwidth-digits", "\uff11\uff12"),
        ("newline", value + "\n1"),
        ("spaces", f" {value} "),
        ("fraction", "2.5"),
        ("exponent", "1e3"),
        ("overflow", "9" * 25),
        ("int64-max", str(2**63 - 1)),
        ("zero", "0"),
        ("shell", "$(touch pwned)"),
        ("path", "../../etc"),
        ("control", "\x1b[31m" + value),
    ]
    if nul:
        candidates.append(("nul", value + "\0" + "1"))
    seen, out = set(), []
    for label, text in candidates:
        if text != value and text not in seen:
            seen.add(text)
            out.append((label, text))
    return out


def file_mutations(content: bytes) -> list[tuple[str, object]]:
    """Bad versions of a whole file, labelled (bytes, None for missing, DIRECTORY)."""
    garbage = bytes(RNG.randrange(256) for _ in range(512))
    return [
        ("missing", None),
        ("directory", DIRECTORY),
        ("empty", b""),
        ("truncated-half", content[: len(content) // 2]),
        ("truncated-1-byte", content[:1]),
        ("binary", garbage),
        ("nul-bytes", content.replace(b"\n", b"\0\n", 3)),
        ("all-nul", b"\0" * 256),
        ("not-utf8", content.replace(b"=", b"=\xff\xfe", 3)),
        ("utf16", content.decode("utf-8", "replace").encode("utf-16")),
        ("crlf", content.replace(b"\n", b"\r\n")),
        ("huge", content + b"#" * (2 * MIB) + b"\n"),
        ("huge-line", b"x" * (2 * MIB)),
    ]


def _encoded(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


# -- the recorded inputs ---------------------------------------------------------------------


def recorded_env(relative: str) -> dict[str, str]:
    """A recorded environment (``NAME=value`` lines before any scontrol dump)."""
    text = fixture_text(relative).split("# scontrol show job")[0].replace("@HOST@", HOST)
    return dict(line.split("=", 1) for line in text.splitlines()
                if "=" in line and not line.startswith("#"))


SCONTROL_JOB = fixture_text("slurm-22.05/scontrol-show-job-o.txt").replace("JobId=2 ", "JobId=3 ")
SCONTROL_PARTITION = fixture_text("slurm-22.05/scontrol-show-partition-o.txt")
JOB_AD = (FIXTURES / "htcondor-23.9/job.ad").read_bytes()
MACHINE_AD = (FIXTURES / "htcondor-23.9/machine.ad").read_bytes()
CPUINFO = (FIXTURES / "host/cpuinfo-amd-epyc-2.txt").read_bytes()

# A Slurm job's cgroup v2 tree, as the probes see it (paths below the fake root).
V2_MOUNTINFO = (b"24 1 0:22 / /sys rw - sysfs sysfs rw\n"
                b"35 24 0:30 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n")
V2_JOB = "sys/fs/cgroup/system.slice/slurmstepd.scope/job_3"
CGROUP_TREE = {
    "proc/self/cgroup": b"0::/system.slice/slurmstepd.scope/job_3/step_0\n",
    "proc/self/mountinfo": V2_MOUNTINFO,
    "proc/cpuinfo": CPUINFO,
    f"{V2_JOB}/memory.max": b"536870912\n",
    f"{V2_JOB}/memory.swap.max": b"max\n",
    f"{V2_JOB}/step_0/memory.max": b"max\n",
    f"{V2_JOB}/step_0/memory.swap.max": b"0\n",
    f"{V2_JOB}/step_0/cpuset.cpus.effective": b"0-1\n",
}
V1_MOUNTINFO = (FIXTURES / "host/mountinfo-v1-hybrid.txt").read_bytes()
V1_JOB = "sys/fs/cgroup/memory/slurm_vm/uid_1001/job_3"
V1_TREE = {
    "proc/self/cgroup": b"4:memory:/slurm_vm/uid_1001/job_3/step_0\n3:cpuset:/\n0::/\n",
    "proc/self/mountinfo": V1_MOUNTINFO,
    f"{V1_JOB}/memory.limit_in_bytes": b"209715200\n",
    f"{V1_JOB}/memory.memsw.limit_in_bytes": b"314572800\n",
    f"{V1_JOB}/step_0/memory.limit_in_bytes": b"9223372036854771712\n",
}

# Slurm 24.11 (slurm-24.11/README.md): job 9 (PrologFlags=Alloc,Contain) and job 14
# (RunInJob), each hook's /proc/self/cgroup as recorded, on cgroup v1 mounted as on the
# recorded host (host/mountinfo-v1-hybrid.txt: the same v1 layout). Where a hook runs inside
# the job (the TaskProlog; the Prolog with RunInJob) the job's limit files are there too.
# They were not recorded: they follow the 22.05 job's (slurm-22.05/job-cgroup-v1.txt: the
# job and step levels limited to the request, memsw = memory, the task level unlimited), for
# the recorded request (--mem=300M -c 2).
S24 = "slurm-24.11"
S24_MEMORY = 300 * MIB
V1_UNLIMITED = 9223372036854771712  # LONG_MAX rounded down to the page size


def slurm_2411_tree(hook: str) -> dict[str, bytes]:
    """The fake /proc and cgroup tree (paths below D/root) of the recorded 24.11 ``hook``."""
    text = (FIXTURES / f"{S24}/{hook}.cgroup").read_bytes()
    tree = {"proc/self/cgroup": text, "proc/self/mountinfo": V1_MOUNTINFO}
    paths = dict(line.split(":", 2)[1:] for line in text.decode().splitlines())
    memory = paths["memory"].strip("/").split("/")
    levels = [index for index, part in enumerate(memory) if part.startswith("job_")]
    if levels:
        for depth in range(levels[0], len(memory)):
            limit = V1_UNLIMITED if memory[depth].startswith("task_") else S24_MEMORY
            directory = "sys/fs/cgroup/memory/" + "/".join(memory[:depth + 1])
            for name in ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes"):
                tree[f"{directory}/{name}"] = b"%d\n" % limit
        if paths.get("cpuset", "/") != "/":
            tree[f"sys/fs/cgroup/cpuset{paths['cpuset']}/cpuset.effective_cpus"] = b"0-1\n"
    return tree


# The recorded hook of each 24.11 entry point (its environment, slurm-24.11/HOOK.env, and
# its /proc/self/cgroup).
S24_HOOKS = {"slurm-24.11-prolog": "cgv1-prolog", "slurm-24.11-runinjob-prolog": "runinjob-prolog",
             "slurm-24.11-epilog": "cgv1-epilog", "slurm-24.11-taskprolog": "cgv1-taskprolog",
             "slurm-24.11-taskprolog-sh": "cgv1-taskprolog"}
S24_TREES = {entry: slurm_2411_tree(hook) for entry, hook in S24_HOOKS.items()}

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
GE_USER = pwd.getpwuid(os.getuid()).pw_name  # a root prolog gives the directory to the job's user
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


# -- what each input means to a hook (the model the expectations come from) -------------------
#
# Written from the docs and the formats, not from what a hook printed: which variables
# tell a hook which job (and which role) it is, what the config may hold, what an ad needs
# to name its job, and what a hook does with each part of its store.

_MAX_DIGITS = 19  # plain digits a count, a size or an id may have (2**63 - 1 has 19)
_MAX_JOB_ID = 200  # HSF-TN-2016-02 job ids, and what the store names a directory after
_MAX_ID = 2**32 - 2  # uid_t / gid_t; (uid_t) -1 means "unchanged" to chown


def _digits(text: str | None, most: int = _MAX_DIGITS) -> bool:
    return bool(text) and text.isascii() and text.isdigit() and len(text) <= most


def _valid_job_id(text: str) -> bool:
    """A job id the store can name a directory after: 1 to 200 printable non-space
    ASCII characters (the spec), no ``/`` and not ``.``/``..`` (a path)."""
    return (0 < len(text) <= _MAX_JOB_ID and all("!" <= char <= "~" for char in text)
            and "/" not in text and text not in (".", ".."))


def _positive(text: str | None) -> bool:
    """A Grid Engine job or array task number: decimal, from 1 (qsub(1): JOB_ID, -t)."""
    return _digits(text) and int(text) > 0


def _known_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except (KeyError, ValueError):  # ValueError: NUL, or not encodable
        return False
    return True


# Each Slurm entry point's role, and the SLURM_SCRIPT_CONTEXT the Prolog and the Epilog take
# theirs from (the TaskProlog is named on its command line).
SLURM_ROLES = {"slurm-prolog": "prolog", "slurm-epilog": "epilog",
               "slurm-taskprolog": "taskprolog", "slurm-taskprolog-sh": "taskprolog",
               "slurm-24.11-prolog": "prolog", "slurm-24.11-runinjob-prolog": "prolog",
               "slurm-24.11-epilog": "epilog", "slurm-24.11-taskprolog": "taskprolog",
               "slurm-24.11-taskprolog-sh": "taskprolog", "slurm-taskepilog": "taskepilog"}
# The TaskEpilog is not named on its command line: it follows SLURM_SCRIPT_CONTEXT too.
_SLURM_ROLE_CONTEXTS = {"prolog": "prolog_slurmd", "epilog": "epilog_slurmd",
                        "taskepilog": "epilog_task"}
# The Prologs of Slurm >= 23.02 (SLURM_JOB_START_TIME, SLURM_JOB_END_TIME in their
# environment): what they write is modelled (slurm_prolog_keys).
TIMED_PROLOGS = ("slurm-24.11-prolog", "slurm-24.11-runinjob-prolog")
# What the HTCondor wrapper cannot do without: its scratch directory and its job ad
# (without the ad it cannot tell the job's id). The rest only leaves keys out.
_CONDOR_ESSENTIAL = ("_CONDOR_SCRATCH_DIR", "_CONDOR_JOB_AD")


def environment_effect(entry: str, recorded: dict[str, str | None],
                       environ: dict[str, str | None], jobstatus: bool = False) -> str:
    """What a batch system's environment ``environ`` (``recorded``, changed) does to set-up,
    the site offering $JOBSTATUS or not (``jobstatus``).

    Set-up fails where the hook cannot tell which job it is for (docs/slurm.md: "a missing or
    non-numeric SLURM_JOB_ID writes nothing"; LSF: LSB_JOBID and LSB_JOBINDEX), which role
    it plays (Slurm's Prolog and Epilog follow SLURM_SCRIPT_CONTEXT), whose the job's
    directory is (the Prolog makes it the job's user's and group's, and its jobstatus/ the
    job's user's; a root pre-exec, the user's of LSB_JOB_EXECUSER, else USER; a root Grid
    Engine prolog, of USER, else LOGNAME), or where the HTCondor job is (its scratch
    directory and job ad). Grid Engine names a job by JOB_ID and SGE_TASK_ID
    (``undefined`` outside an array; unset or empty the same). Anything else only leaves
    keys out.
    """
    def value(name):
        return environ.get(name) or ""

    if entry.startswith("slurm"):
        role = SLURM_ROLES[entry]
        context = _SLURM_ROLE_CONTEXTS.get(role)
        if context and value("SLURM_SCRIPT_CONTEXT") != context:
            return SETUP_FAILS
        job = value("SLURM_JOB_ID") or value("SLURM_JOBID")
        if not _digits(job, _MAX_JOB_ID):
            return SETUP_FAILS
        # cgroup.conf constrains RAM, so the Prolog marks the job pending and gives its
        # directory to the job's user (and always to its group). One that runs inside the
        # job's cgroups (RunInJob) marks nothing pending: jobfeatures/ stays root's, and
        # only a jobstatus/ (where the site offers $JOBSTATUS) is the job's user's.
        owners = ("SLURM_JOB_GID",) if slurm_in_job(entry, job) and not jobstatus else (
            "SLURM_JOB_UID", "SLURM_JOB_GID")
        if role == "prolog" and not all(
                not value(name) or (_digits(value(name)) and int(value(name)) <= _MAX_ID)
                for name in owners):
            return SETUP_FAILS
        return DROPS
    if entry.startswith("lsf"):
        if not _digits(value("LSB_JOBID"), _MAX_JOB_ID) or not _digits(
                value("LSB_JOBINDEX") or "0"):
            return SETUP_FAILS
        if entry == "lsf-pre-exec" and os.geteuid() == 0 and not _known_user(
                value("LSB_JOB_EXECUSER") or value("USER")):
            return SETUP_FAILS
        return DROPS
    if entry == "htcondor-wrapper":
        if any(environ.get(name) != recorded.get(name) for name in _CONDOR_ESSENTIAL):
            return SETUP_FAILS
        return DROPS
    if entry == "htcondor-job-exit":  # its job's directory is in the scratch directory
        if environ.get("_CONDOR_SCRATCH_DIR") != recorded.get("_CONDOR_SCRATCH_DIR"):
            return SETUP_FAILS
        return DROPS
    if entry in GRIDENGINE_ENTRIES:
        task = value("SGE_TASK_ID")
        if not _positive(value("JOB_ID")) or (task not in ("", "undefined")
                                               and not _positive(task)):
            return SETUP_FAILS
        if entry == "gridengine-prolog" and os.geteuid() == 0 and not _known_user(
                value("USER") or value("LOGNAME")):
            return SETUP_FAILS
        return DROPS
    if entry == "pbs-profile":  # the job it prints the variables of (none: not a PBS job)
        return DROPS if pbs_job_id(value("PBS_JOBID")) else SETUP_FAILS
    return DROPS  # mjf run, mjf machine, the HTCondor cron: no variable is essential


_RECORDED = object()  # the entry point's recorded /proc/self/cgroup


def slurm_in_job(entry: str, job_id: str, proc_cgroup=_RECORDED) -> bool:
    """Whether a Slurm Prolog runs inside job ``job_id``'s cgroups (docs/slurm.md, RunInJob: "a
    ``job_<id>`` level in its own memory or unified cgroup"), its /proc/self/cgroup the
    recorded one or ``proc_cgroup`` (a file as a case lays it out: bytes, None, DIRECTORY).
    False where no /proc/self/cgroup of the entry point's is faked (22.05's Prolog reads the
    host's own, which is no Slurm job's)."""
    if SLURM_ROLES.get(entry) != "prolog" or entry not in S24_TREES:
        return False
    data = S24_TREES[entry]["proc/self/cgroup"] if proc_cgroup is _RECORDED else proc_cgroup
    if not isinstance(data, bytes):
        return False
    text = data.decode("ascii", "replace").replace("\r\n", "\n").replace("\r", "\n")
    for line in text.split("\n"):
        number, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if ((number == "0" and not controllers) or "memory" in controllers.split(",")) \
                and f"job_{job_id}" in path.split("/"):
            return True
    return False


_MAX_VALUE = 2**63 - 1  # what a key file may hold (a 64-bit reader)
CLOCK = "the Prolog's clock"  # jobstart_secs: the time the Prolog ran
PRESENT = "present"  # a key written, with whatever valid value
# What the fake scontrol (SCONTROL_JOB) says: TimeLimit=00:05:00.
SCONTROL_WALL = 300
_START, _END = "SLURM_JOB_START_TIME", "SLURM_JOB_END_TIME"


class JobKeys:
    """What a Slurm >= 23.02 Prolog leaves in job ``job``'s directory (slurm_prolog_keys):
    ``keys``, {key: its content, PRESENT, CLOCK, or None where it must be absent} (a key not
    named is not modelled); ``pending``, whether the job is marked pending (None: not
    modelled); ``scontrol``, whether the Prolog asks scontrol (None: not modelled); ``lost``,
    the keys it leaves out of what its input should have given, each of which a warning must
    name (DROPS: "the affected keys are left out (a warning each)")."""

    __slots__ = ("job", "keys", "lost", "pending", "scontrol")

    def __init__(self, job, keys, lost, pending, scontrol):
        self.job, self.keys, self.lost = job, keys, lost
        self.pending, self.scontrol = pending, scontrol


# The plausible UNIX times (2000..2100, as spec.py's EARLIEST_TIME/LATEST_TIME): outside
# them a time is a unit mistake, not a time.
_EARLIEST, _LATEST = 946684800, 4102444800


def _epoch(text: str) -> int | None:
    """A UNIX time as Slurm gives one: plain digits of a plausible time (2000..2100)."""
    return int(text) if _digits(text) and _EARLIEST <= int(text) <= _LATEST else None


def slurm_prolog_keys(entry: str, recorded: dict[str, str | None],
                      environ: dict[str, str | None], proc_cgroup=_RECORDED) -> JobKeys | None:
    """The keys a Slurm >= 23.02 Prolog writes, for an environment ``environ`` (``recorded``,
    changed) it sets up with (docs/slurm.md: the key table, the versions table, RunInJob):

    * it asks scontrol only where SLURM_JOB_START_TIME or SLURM_JOB_END_TIME is missing
      (unset or empty, as before 23.02); scontrol then gives the start, the time limit and the
      memory request (the fake's job: SCONTROL_JOB);
    * jobstart_secs: SLURM_JOB_START_TIME where it is a UNIX time (plain digits, 2000..2100), else
      scontrol's StartTime, else the Prolog's clock;
    * wall_limit_secs: END - START where both are UNIX times and the end is after the start,
      else scontrol's TimeLimit; else it is lost (a warning names it) - and with it only
      cpu_limit_secs (wall_limit_secs x allocated_cpu, itself left out above 2**63 - 1): the
      rest is written;
    * max_rss_bytes: no 24.11 Prolog's environment has the memory request: scontrol's, or the
      job's cgroup limit where the Prolog runs inside it (RunInJob);
    * the job is pending unless the Prolog runs inside its cgroup: its memory request is
      unknown, or (scontrol's known) cgroup.conf beside $SLURM_CONF constrains RAM.

    None for an entry point whose keys are not modelled."""
    if entry not in TIMED_PROLOGS:
        return None

    def value(name):
        return environ.get(name) or ""

    job = value("SLURM_JOB_ID") or value("SLURM_JOBID")
    in_job = slurm_in_job(entry, job, proc_cgroup)
    scontrol = not (value(_START) and value(_END))
    start, end = _epoch(value(_START)), _epoch(value(_END))
    keys = {"job_id": job, "jobstart_secs": str(start) if start else PRESENT if scontrol
            else CLOCK}
    wall = end - start if start and end and end > start else SCONTROL_WALL if scontrol \
        else None
    if wall is not None and wall > _MAX_VALUE:
        wall = None
    keys["wall_limit_secs"] = keys["wall_limit_secs_lrms"] = None if wall is None else str(wall)
    cpus = recorded.get("SLURM_JOB_CPUS_PER_NODE") or ""
    if _digits(cpus) and environ.get("SLURM_JOB_CPUS_PER_NODE") == cpus:  # one node
        cpu_limit = None if wall is None or wall * int(cpus) > _MAX_VALUE else wall * int(cpus)
        keys["cpu_limit_secs"] = keys["cpu_limit_secs_lrms"] = \
            None if cpu_limit is None else str(cpu_limit)
    if proc_cgroup is _RECORDED or not in_job:  # a cgroup it is in, broken: not modelled
        keys["max_rss_bytes"] = keys["mem_limit_MB"] = PRESENT if scontrol or in_job else None
    if in_job or not scontrol:
        pending = not in_job
    else:  # cgroup.conf decides: the case directory's, or one elsewhere (the host's)
        pending = True if environ.get("SLURM_CONF") == recorded.get("SLURM_CONF") else None
    return JobKeys(job, keys, () if wall is not None else ("wall_limit_secs",), pending,
                   scontrol)


def parse_env_file(data) -> dict[str, str] | None:
    """The environment an --env-file gives (``NAME=value`` lines, others skipped, as
    ``env`` prints it); None where it cannot be read or holds a NUL in a value (no
    environment can hold one)."""
    if not isinstance(data, bytes):
        return None  # missing, or a directory
    environ = {}
    for line in data.decode("utf-8", "surrogateescape").splitlines():
        name, equals, value = line.partition("=")
        if equals and name and name.isascii() and not name[0].isdigit() \
                and name.replace("_", "a").isalnum():
            if "\0" in value:
                return None
            environ[name] = value
    return environ


def spool_settings(data) -> dict[str, str] | None:
    """The job's spool config as a hook reads it: ``name=value`` lines (a byte that is not
    ASCII reads as U+FFFD, CR and CRLF end a line); None where it cannot be read (missing,
    a directory, or larger than the bound on what a hook reads of a batch system's file:
    a job's user may name a file of any size)."""
    if not isinstance(data, bytes) or len(data) > MAX_BATCH_FILE_BYTES:
        return None
    text = data.decode("ascii", "replace").replace("\r\n", "\n").replace("\r", "\n")
    settings = {}
    for line in text.splitlines():
        name, equals, value = line.partition("=")
        if equals and name:
            settings[name] = value
    return settings


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


def job_start(entry: str, environ: dict[str, str | None] | None, spool_data=GE_SPOOL_CONFIG,
              effect: str = DROPS) -> dict:
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


# A case directory as the config sees it (the real one is no longer: only its kind counts).
_CASE_DIR = "/" + "d" * 60
_PATH_MAX = 4095  # Linux, without the terminating NUL
_NAME_MAX = 255


def _expanded(path: str) -> str:
    return path.replace("@D@", _CASE_DIR)


def _cannot_open(path: str) -> bool:
    """A path that no open() can take: too long for Linux, or through our config file."""
    full = _expanded(path).encode("utf-8", "surrogateescape")
    return (len(full) > _PATH_MAX or any(len(part) > _NAME_MAX for part in full.split(b"/"))
            or path.startswith("@D@/mjf.conf/"))


# The config (docs/configuration.md): each known key and what its value must be.
_PATH, _NUMBER, _INTEGER, _DECIMAL, _BOOLEAN, _LOG, _ATTRIBUTE, _CELL, _BENCHMARK = (
    "path", "number", "integer", "decimal", "boolean", "log", "attribute", "cell", "benchmark")
# [records] (docs/configuration.md): format, sss and/or apel (comma-separated, any case);
# keep_days, 1 to 6 digits; site, a GOCDB name (printable ASCII, no space, comma, quote
# or backslash).
_FORMATS, _DAYS, _SITE = "formats", "days", "site"
CONFIG_KEYS = {
    ("mjf", "base_dir"): _PATH, ("mjf", "on_error"): ("continue", "fail"),
    ("mjf", "log"): _LOG, ("mjf", "legacy_keys"): _BOOLEAN, ("mjf", "command_timeout"): _NUMBER,
    ("mjf", "jobstatus"): _BOOLEAN,
    ("mjf", "export"): ("path", "url"), ("mjf", "url_base"): "url",
    ("machinefeatures", "total_cpu"): _INTEGER, ("machinefeatures", "hs06"): _DECIMAL,
    ("machinefeatures", "grace_secs"): _INTEGER, ("machinefeatures", "benchmark"): _BENCHMARK,
    **{("jobfeatures", key): _INTEGER for key in (
        "wall_limit_secs", "cpu_limit_secs", "max_rss_bytes", "max_swap_bytes",
        "scratch_limit_bytes", "grace_secs_job")},
    ("jobfeatures", "hs06_job"): _DECIMAL,
    ("slurm", "scontrol"): _PATH, ("slurm", "scratch_dir"): _PATH,
    ("htcondor", "job_id"): ("global", "cluster_proc"),
    ("htcondor", "wall_limit_attribute"): _ATTRIBUTE,
    ("htcondor", "wall_limit_unit"): ("seconds", "minutes", "hours"),
    ("htcondor", "next_wrapper"): _PATH, ("htcondor", "execute_dir"): _PATH,
    ("lsf", "bjobs"): _PATH, ("lsf", "query_bjobs"): ("yes", "no"),
    ("gridengine", "qstat"): _PATH, ("gridengine", "query_qstat"): ("yes", "no"),
    ("gridengine", "sge_root"): _PATH, ("gridengine", "sge_cell"): _CELL,
    ("records", "dir"): _PATH, ("records", "format"): _FORMATS, ("records", "keep_days"): _DAYS,
    ("records", "site"): _SITE,
    ("pbs", "pbs_exec"): _PATH, ("pbs", "qstat"): _PATH, ("pbs", "query_qstat"): ("yes", "no"),
    ("pbs", "tmpdir"): _PATH, ("pbs", "cgroup_prefix"): _PATH,
}
_SECTIONS = {section for section, _ in CONFIG_KEYS}
_SPACE = " \t\r\v\f"  # what the sh TaskProlog's [[:space:]] strips; "\n" ends a line


def _plain_number(text: str) -> bool:
    whole, dot, fraction = text.partition(".")
    return _digits(whole, 10**6) and (not dot or _digits(fraction, 10**6))


def _config_value(kind, value: str):
    """The value as the hook uses it (paths normalised), or None where it is refused."""
    if isinstance(kind, tuple):
        return value if value in kind else None
    if kind == _PATH:
        full = _expanded(value)
        if not full.startswith("/") or len(full) > _PATH_MAX or ".." in full.split("/"):
            return None
        return os.path.normpath(value) if value.startswith("@D@") else os.path.normpath(full)
    if kind == _INTEGER:
        return value if _digits(value) and int(value) < 2**63 else None
    if kind == _DECIMAL:  # at most two decimals, below 10**13 with a fraction
        whole, _, fraction = value.partition(".")
        fraction = fraction.rstrip("0")
        if not _plain_number(value):
            return None
        if not fraction:
            return value if len(whole.lstrip("0")) <= _MAX_DIGITS and int(whole) < 2**63 \
                else None
        return value if len(whole.lstrip("0")) <= 13 and len(fraction) <= 2 else None
    if kind == _NUMBER:  # command_timeout: seconds, 0 < t <= 300
        return value if _plain_number(value) and 0 < float(value) <= 300 else None
    if kind == _BENCHMARK:  # HEPSPEC or HEPscore23, in any case; kept canonical
        return {"hepspec": "HEPSPEC", "hepscore23": "HEPscore23"}.get(value.lower())
    if kind == _BOOLEAN:
        return value if value.lower() in ("1", "yes", "true", "on", "0", "no", "false",
                                           "off") else None
    if kind == _LOG:
        parts = [part.strip() for part in value.split(",") if part.strip()]
        return value if parts == ["none"] or (parts and set(parts) <= {"syslog", "stderr"}) \
            else None
    if kind == _ATTRIBUTE:
        return value if value and value.isascii() and not value[0].isdigit() \
            and value.replace("_", "a").isalnum() else None
    if kind == _FORMATS:
        formats = [part.strip().lower() for part in value.split(",")]
        return value if value and set(formats) <= {"sss", "apel"} else None
    if kind == _DAYS:
        return value if _digits(value, 6) and int(value) >= 1 else None
    if kind == _SITE:
        return value if value and value.isascii() and value.isprintable() and not any(
            char in value for char in " \t\"'\\,") else None
    if kind == _CELL:  # a directory under $SGE_ROOT: letters, digits, _ - ., no leading .
        return value if value and value.isascii() and not value.startswith(".") \
            and value.replace("_", "a").replace("-", "a").replace(".", "a").isalnum() \
            else None
    return value if value.startswith(("http://", "https://")) else None  # url


def _without_comment(text: str) -> str:
    for marker in (" #", "\t#", " ;", "\t;"):
        if marker in text:
            text = text[:text.index(marker)]
    return text


def config_model(data: bytes) -> dict[tuple[str, str], str] | None:
    """What a config file sets ({(section, key): value}), or None where the docs say it
    is refused: not UTF-8, a NUL or a control character outside a comment, a line that is
    no ``[section]`` or ``key = value``, a key before any section, an unknown section or
    key, a key set twice, a value its key cannot take, ``export = url`` without url_base."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    settings: dict[tuple[str, str], str] = {}
    section = None
    for raw in text.split("\n"):
        line = raw.strip(_SPACE)
        if not line or line[0] in "#;":
            continue
        content = _without_comment(line)
        if "\0" in line or not content.replace("\t", " ").isprintable():
            return None
        if line.startswith("["):
            if not line.endswith("]") or line[1:-1].strip().lower() not in _SECTIONS:
                return None
            section = line[1:-1].strip().lower()
            continue
        key, equals, value = line.partition("=")
        key, value = key.strip().lower(), _without_comment(value).strip()
        if not equals or not key or section is None or (section, key) in settings:
            return None
        kind = CONFIG_KEYS.get((section, key))
        parsed = None if kind is None else _config_value(kind, value)
        if parsed is None:
            return None
        settings[(section, key)] = parsed
    if settings.get(("mjf", "export")) == "url" and ("mjf", "url_base") not in settings:
        return None
    formats = [part.strip().lower()
               for part in settings.get(("records", "format"), "sss").split(",")]
    if "apel" in formats and ("records", "dir") in settings and ("records", "site") not in \
            settings:
        return None  # APEL needs the site's name ([describe] site is not modelled here)
    return settings


# Executables a case directory holds (a chained wrapper naming one runs it).
EXECUTABLE_PATHS = ("@D@/bin/scontrol", "@D@/bin/bjobs", "@D@/bin/condor_status",
                    "@D@/bin/qstat", "@D@/bin/next")


def config_effect(entry: str, base: str, data: bytes) -> dict:
    """What the config ``data`` (the entry's config ``base``, changed) does: Case keywords."""
    settings = config_model(data)
    if settings is None:
        return {"effect": UNREADABLE, "next_wrapper": None}
    keywords = {"effect": DROPS, "host_defaults": ("mjf", "base_dir") not in settings}
    if entry == "htcondor-wrapper":
        chained = settings.get(("htcondor", "next_wrapper"))
        configured = config_model(_encoded(base)).get(("htcondor", "next_wrapper"))
        if chained is None:
            keywords["next_wrapper"] = None
        elif chained != configured:
            keywords["next_wrapper"] = chained
            if chained not in EXECUTABLE_PATHS:
                keywords["effect"] = EXEC_FAILS
    return keywords


def config_path_effect(path: str | None) -> dict:
    """$MJF_CONFIG naming ``path`` instead of the case's config: Case keywords. A path no
    open() takes is a config that cannot be read; any other names a missing file (or,
    unset or empty, the default /etc/mjf/mjf.conf): the defaults, without next_wrapper."""
    if path and _cannot_open(path):
        return {"effect": UNREADABLE, "next_wrapper": None}
    return {"effect": DROPS, "next_wrapper": None, "host_defaults": True}


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


# What each entry point does with base_dir's store.
STORE_ROLES = {
    # write machinefeatures/ and create the job's directory in jobs/
    "slurm-prolog": "creates", "lsf-starter": "creates", "lsf-pre-exec": "creates",
    "slurm-24.11-prolog": "creates", "slurm-24.11-runinjob-prolog": "creates",
    "mjf-run": "creates",
    "mjf-machine": "machine",  # writes machinefeatures/ only
    "gridengine-prolog": "creates", "gridengine-starter": "creates",
    "slurm-epilog": "removes", "lsf-post-exec": "removes",  # remove the job's directory
    "slurm-24.11-epilog": "removes",
    "gridengine-epilog": "removes",
    # HTCondor's job-exit hook removes the job's directory in its scratch (base_dir unused)
    "htcondor-job-exit": "removes",
    # Slurm's TaskEpilog (where records are kept) writes only the job's usage/ report
    "slurm-taskepilog": "reports",
    # complete (or export) the job directory a Prolog or pre-exec created
    "slurm-taskprolog": "completes", "slurm-taskprolog-sh": "completes",
    "slurm-24.11-taskprolog": "completes", "slurm-24.11-taskprolog-sh": "completes",
    "lsf-starter-after-pre-exec": "completes", "gridengine-starter-after-prolog": "completes",
    # only read base_dir: the wrapper writes in the job's scratch, the cron prints
    "htcondor-wrapper": "reads", "htcondor-cron": "reads",
    # PBS: execjob_begin and a classic prologue create, execjob_end and an epilogue remove;
    # execjob_launch and the profile.d lines only print what a begin made
    "pbs-begin": "creates", "pbs-prologue": "creates", "pbs-prologue-torque": "creates",
    "pbs-end": "removes", "pbs-epilogue": "removes", "pbs-launch": "reads",
    "pbs-profile": "reads",
}
# The store's own directories: a file or a symlink planted in their place is refused (never
# followed, never replaced), as is a directory where the suite writes a static key file.
_PLANTED_IN_STORE = {
    "base-file": ("creates", "machine"),
    "machinefeatures-file": ("creates", "machine"),
    "machinefeatures-symlink": ("creates", "machine"),
    "total_cpu-directory": ("creates", "machine"),
    # A remover needs jobs/ too; a base_dir that is no directory holds no job to remove.
    "jobs-file": ("creates", "removes"),
    "jobs-symlink": ("creates", "removes"),
    # Completing a job's keys: its jobfeatures/ must be a directory, and a key's place a
    # file (a job's directory that is missing is a Prolog that did not run: nothing to
    # export, or for the LSF starter a set-up of its own). A creator builds the job's
    # directory anew and a remover removes it, whatever a previous run left there.
    "jobfeatures-symlink": ("completes",),
    "key-directory": ("completes",),
}


def state_effect(entry: str, label: str) -> str:
    """What a leftover in base_dir (``label``) does. Dynamic values (shutdowntime) that are
    no value are ignored, a static key file that is garbage or a symlink is replaced, a
    hidden temporary file is left alone: only planted directories matter."""
    return SETUP_FAILS if STORE_ROLES[entry] in _PLANTED_IN_STORE.get(label, ()) else DROPS


def option_effect(option: str, text: str) -> str:
    """``mjf run OPTION TEXT``: --cpus, --wall-limit and --memory take a positive whole
    number (else a usage error); --job-id a job id (else set-up fails; empty is no id, as
    an empty variable is an unset one everywhere in the suite, and one is generated)."""
    if option == "--job-id":
        return DROPS if not text or _valid_job_id(text) else SETUP_FAILS
    return DROPS if _digits(text) and int(text) > 0 else USAGE


# -- per source of input ---------------------------------------------------------------------


# What a line about a broken variable may name instead of the variable.
ALSO_NAMED = {"_CONDOR_JOB_AD": ("job ad",), "_CONDOR_MACHINE_AD": ("machine ad",),
              "SLURM_NODELIST": ("SLURM_JOB_CPUS_PER_NODE",),
              "SLURM_JOB_NODELIST": ("SLURM_JOB_CPUS_PER_NODE",), "SLURM_JOBID": ("SLURM_JOB_ID",),
              "SLURM_JOB_ID": ("SLURM_JOBID",), "LSF_BINDIR": ("bjobs",),
              "MJF_CONFIG": ("/etc/mjf/mjf.conf", "the config"),
              "SGE_JOB_SPOOL_DIR": ("spool config",)}


def env_cases(entry: str, environ: dict[str, str], names: tuple[str, ...]) -> list[Case]:
    """Each variable in ``names`` broken in every way, and removed."""
    cases = []
    for name in names:
        original = environ.get(name, "")
        for label, text in [("unset", None), *value_mutations(original)]:
            # A line may name the variable, or quote its (short) value, e.g. as a job id.
            culprits = (name, *ALSO_NAMED.get(name, ()), *([text] if text and len(text) < 40
                                                          and "\n" not in text else []))
            changed = {**environ, name: text}
            if text is not None and "\0" in text:  # travels in an --env-file, which it breaks
                outcome = {"effect": UNREADABLE, "next_wrapper": None,
                           **job_start(entry, None, effect=UNREADABLE)}
            elif name == "MJF_CONFIG":
                outcome = {**config_path_effect(text), **job_start(entry, changed)}
            else:
                effect = environment_effect(entry, environ, changed)
                outcome = {"effect": effect, **job_start(entry, changed, effect=effect)}
                if effect == DROPS:
                    outcome["job_keys"] = slurm_prolog_keys(entry, environ, changed)
            cases.append(Case(entry, f"env:{name}:{label}", culprits, env={name: text},
                              **outcome))
    return cases


def env_file_cases(entry: str, environ: dict[str, str]) -> list[Case]:
    """The --env-file itself broken (the replay path every hook has)."""
    content = _encoded("".join(f"{name}={value}\n" for name, value in environ.items()))
    # A broken file loses variables: the line about it names what is missing.
    culprits = ("env-file", "job.env", "SLURM_", "LSB_", "TMPDIR", "XDG_RUNTIME_DIR")
    if entry.startswith("htcondor"):
        culprits += ("_CONDOR_SCRATCH_DIR",)
    if entry in GRIDENGINE_ENTRIES:
        culprits += ("JOB_ID", "SGE_TASK_ID", "PE_HOSTFILE", "NSLOTS", "NHOSTS", "spool config",
                     "USER", "LOGNAME")
    cases = []
    for label, mutated in file_mutations(content):
        replayed = parse_env_file(mutated)
        effect = UNREADABLE if replayed is None else environment_effect(entry, environ, replayed)
        keys = slurm_prolog_keys(entry, environ, replayed) if effect == DROPS else None
        # A file that cannot be read leaves a hook the environment it was started with:
        # here the recorded one too.
        cases.append(Case(entry, f"env-file:{label}", culprits, files={"job.env": mutated},
                          effect=effect, job_keys=keys, **job_start(
                              entry, environ if replayed is None else replayed, effect=effect)))
    return cases


def output_cases(entry: str, command: str, output: str, fields: tuple[str, ...]) -> list[Case]:
    """What a batch-system command prints, field by field and as a whole; and failing.

    ``command`` names the output (``scontrol-partition``: scontrol's second record)."""
    from mjf_hooks.external_command import CommandError

    program = command.split("-")[0]
    cases = [
        Case(entry, f"{command}:fails", (program,),
             outputs={command: CommandError(f"/usr/bin/{program} exited with status 1")}),
        Case(entry, f"{command}:hangs", (program,),
             outputs={command: CommandError(f"/usr/bin/{program} did not finish within 5 s")}),
    ]
    for label, mutated in file_mutations(_encoded(output)):
        if isinstance(mutated, bytes):
            text = mutated.decode("utf-8", "replace")
            cases.append(Case(entry, f"{command}:{label}", (program,), outputs={command: text}))
    for field in fields:
        original = output.split(f"{field}=", 1)[1].split(" ", 1)[0] if f"{field}=" in output \
            else output.strip()
        for label, text in value_mutations(original):
            if f"{field}=" in output:
                mutated = output.replace(f"{field}={original}", f"{field}={text}", 1)
            else:
                mutated = text
            cases.append(Case(entry, f"{command}:{field}:{label}", (program, field),
                              outputs={command: mutated}))
    return cases


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
            data = _encoded("\n".join(changed) + "\n")
            cases.append(Case(entry, f"{name}:{attribute}:{label}", (*culprits, attribute),
                              files={f"scratch/{name}": data},
                              effect=ad_attribute_effect(attribute, label) if names_job
                              else DROPS))
    return cases


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
            data = _encoded("\n".join(changed) + "\n")
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
                  GE_PE_HOSTFILE_PATH: _encoded(line.replace(f"{HOST} 2 ", f"{HOST} {text} "))})
                  for label, text in value_mutations("2")]
    return cases


# What the cgroup model (cgroup_job_keys) knows of the Slurm 22.05 TaskProlog's job 3: the
# Prolog wrote scontrol's MinMemoryNode=200M (the task's SLURM_MEM_PER_NODE=300 is more), and
# the corpus's config caps max_swap_bytes at 1 GiB.
SLURM_TASK_MEMORY = 200 * MIB
CONFIG_SWAP = 1 << 30
_V2_MOUNT = ("/", "/sys/fs/cgroup", "cgroup2")  # (root, mount point, type) of V2_MOUNTINFO


def _kernel_text(data) -> str | None:
    """A /proc or cgroup file as a case lays it out, as text (None: it cannot be read)."""
    if not isinstance(data, bytes):
        return None
    return data.decode("ascii", "replace").replace("\r\n", "\n").replace("\r", "\n")


def _limit(data) -> int | None:
    """A memory limit file's limit in bytes: one plain number below v1's "unlimited" (any
    other content - ``max``, junk, a directory, nothing - limits nothing)."""
    text = (_kernel_text(data) or "").strip()
    if not (text.isascii() and text.isdigit()) or len(text) > 19:
        return None
    return int(text) if int(text) < V1_UNLIMITED else None


def _names_job(proc_cgroup, mountinfo, line: str) -> bool:
    """Whether /proc/self/cgroup still has the job's ``line`` and mountinfo the cgroup2
    mount (its root, mount point and type: the rest of its line is not used)."""
    cgroup_text, mount_text = _kernel_text(proc_cgroup), _kernel_text(mountinfo)
    if not cgroup_text or not mount_text or line not in cgroup_text.split("\n"):
        return False
    for fields in (text.split() for text in mount_text.split("\n")):
        if "-" in fields[6:] and len(fields) >= fields.index("-", 6) + 4 and (
                fields[3], fields[4], fields[fields.index("-", 6) + 1]) == _V2_MOUNT:
            return True
    return False


def cgroup_model(files: dict) -> tuple[int | None, int | None]:
    """(memory, swap) the job's cgroup limits, for the files a cgroup case lays out below
    D/root over CGROUP_TREE (or V1_TREE, where it lays that out): the minimum over the job's
    and step's levels; on v1 swap is memsw - memory (both known). (None, None) where
    /proc/self/cgroup or mountinfo no longer lead to the job's cgroup."""
    tree = {**{f"root/{path}": data for path, data in CGROUP_TREE.items()}, **files}
    v1 = tree["root/proc/self/cgroup"] == V1_TREE["proc/self/cgroup"]
    if v1:
        memory = _limit(tree[f"root/{V1_JOB}/memory.limit_in_bytes"])
        memsw = _limit(tree[f"root/{V1_JOB}/memory.memsw.limit_in_bytes"])
        return memory, None if memory is None or memsw is None else max(0, memsw - memory)
    if not _names_job(tree.get("root/proc/self/cgroup"), tree.get("root/proc/self/mountinfo"),
                      CGROUP_TREE["proc/self/cgroup"].decode().strip()):
        return None, None
    limits = []
    for name in ("memory.max", "memory.swap.max"):
        known = [limit for limit in (_limit(tree.get(f"root/{V2_JOB}/{name}")),
                                     _limit(tree.get(f"root/{V2_JOB}/step_0/{name}")))
                 if limit is not None]
        limits.append(min(known) if known else None)
    return limits[0], limits[1]


def cgroup_job_keys(entry: str, files: dict) -> JobKeys | None:
    """The limits the Slurm 22.05 TaskProlog completes job 3 with (docs/slurm.md's key table):
    max_rss_bytes the least of the Prolog's (SLURM_TASK_MEMORY) and the cgroup's memory limit,
    max_swap_bytes the least of the config's (CONFIG_SWAP) and the cgroup's swap limit. A lost
    cgroup limit only lets the others decide: no key is left out. Nothing pending after it.
    None for the other entry points (their keys are not modelled here)."""
    if entry != "slurm-taskprolog":
        return None
    memory, swap = cgroup_model(files)
    keys = {"max_rss_bytes": str(min(SLURM_TASK_MEMORY, memory if memory is not None
                                     else SLURM_TASK_MEMORY)),
            "max_swap_bytes": str(min(CONFIG_SWAP, swap if swap is not None else CONFIG_SWAP)),
            "mem_limit_MB": PRESENT}
    return JobKeys("3", keys, (), False, None)


def _cgroup_case(entry: str, label: str, culprits: tuple[str, ...], files: dict) -> Case:
    return Case(entry, label, culprits, files=files, job_keys=cgroup_job_keys(entry, files))


def cgroup_cases(entry: str) -> list[Case]:
    """The job's cgroup tree and the /proc files that lead to it, broken (below D/root, where
    the probes read the fake tree). A broken limit or path only loses cgroup limits: set-up
    goes on (DROPS), and for the TaskProlog the model says what it writes (cgroup_job_keys)."""
    cases = []
    limit_files = [f"{V2_JOB}/memory.max", f"{V2_JOB}/memory.swap.max",
                   f"{V2_JOB}/step_0/cpuset.cpus.effective"]
    for path in limit_files:
        name = path.rsplit("/", 1)[1]
        original = CGROUP_TREE[path].decode().strip()
        variants = [(label, _encoded(text + "\n")) for label, text in value_mutations(original)]
        variants += [("max", b"max\n"), ("abc", b"abc\n"), ("missing", None),
                     ("directory", DIRECTORY), ("huge-file", b"1" * (2 * MIB))]
        for label, data in variants:
            cases.append(_cgroup_case(entry, f"cgroup:{name}:{label}", (name,),
                                      {f"root/{path}": data}))
    for path in ("proc/self/cgroup", "proc/self/mountinfo", "proc/cpuinfo"):
        name = path.replace("/", "-")
        for label, data in file_mutations(CGROUP_TREE[path]):
            cases.append(_cgroup_case(entry, f"probe:{name}:{label}", (path,),
                                      {f"root/{path}": data}))
    for label, data in [
        ("no-colons", b"garbage\n"), ("escape-root", b"0::/../../../../etc\n"),
        ("relative", b"0::system.slice\n"), ("v1-unknown-controller", b"4:nomemory:/x\n"),
        ("empty-path", b"0::\n"), ("many-lines", b"0::/a\n" * 100000),
    ]:
        cases.append(_cgroup_case(entry, f"probe:proc-self-cgroup:{label}", ("cgroup",),
                                  {"root/proc/self/cgroup": data}))
    for label, data in [
        ("no-separator", b"35 24 0:30 / /sys/fs/cgroup rw cgroup2 cgroup2 rw\n"),
        ("short", b"35 24 0:30 / - cgroup2\n"),
        ("bad-escapes", b"35 24 0:30 / /sys/fs/\\777cgroup\\0 rw - cgroup2 cgroup2 rw\n"),
        ("relative-mount", b"35 24 0:30 / sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"),
        ("root-mount", b"35 24 0:30 / / rw - cgroup2 cgroup2 rw\n"),
    ]:
        cases.append(_cgroup_case(entry, f"probe:mountinfo:{label}", ("mountinfo",),
                                  {"root/proc/self/mountinfo": data}))
    v1 = {f"root/{path}": data for path, data in V1_TREE.items()}
    for path in (f"{V1_JOB}/memory.limit_in_bytes", f"{V1_JOB}/memory.memsw.limit_in_bytes"):
        name = path.rsplit("/", 1)[1]
        for label, text in value_mutations(V1_TREE[path].decode().strip()):
            cases.append(_cgroup_case(entry, f"cgroup-v1:{name}:{label}", (name,),
                                      {**v1, f"root/{path}": _encoded(text + "\n")}))
    return cases


def recorded_cgroup_cases(entry: str, environ: dict[str, str]) -> list[Case]:
    """The recorded /proc/self/cgroup of a 24.11 entry point (S24_TREES) broken, and (where
    the hook runs inside the job) the job level's limit files. For a TaskProlog these only
    give limits; for a RunInJob Prolog /proc/self/cgroup says whether it runs inside the job,
    and what it writes follows (slurm_prolog_keys). Written below D/root, where the probes
    read the fake tree."""
    tree = S24_TREES[entry]
    original = tree["proc/self/cgroup"]
    variants = [*file_mutations(original),
                ("another-job", original.replace(b"/job_", b"/job_7")),
                ("no-memory-line", b"".join(line for line in original.splitlines(True)
                                            if b":memory:" not in line))]
    cases = [Case(entry, f"recorded-cgroup:{label}", ("cgroup",),
                  files={"root/proc/self/cgroup": data},
                  job_keys=slurm_prolog_keys(entry, environ, environ, data))
             for label, data in variants]
    for path in sorted(tree):
        directory, name = path.rsplit("/", 1)
        if not directory.rsplit("/", 1)[-1].startswith("job_"):
            continue
        for label, text in value_mutations(tree[path].decode().strip()):
            cases.append(Case(entry, f"recorded-cgroup:job-{name}:{label}", (name,),
                              files={f"root/{path}": _encoded(text + "\n")},
                              job_keys=slurm_prolog_keys(entry, environ, environ)))
    return cases


def config_cases(entry: str, config: str, sample: int) -> list[Case]:
    """The config broken as a whole (all of these), and ``sample`` of its values broken."""
    data = _encoded(config)
    # A config that parses but points elsewhere: lines name the paths it points at.
    culprits = ("mjf.conf", "/run/mjf", "(set [")
    cases = [Case(entry, f"config:{label}", culprits, config=mutated,
                  **config_effect(entry, config, mutated))
             for label, mutated in file_mutations(data)
             if mutated is not None and mutated is not DIRECTORY]
    structural = [
        ("duplicate-section", config + "[mjf]\n"),
        ("duplicate-key", config.replace("log = stderr\n", "log = stderr\nlog = stderr\n")),
        ("unknown-key", config + "[mjf]\ncolour = blue\n"),
        ("unknown-section", config + "[torque]\nqstat = /usr/bin/qstat\n"),
        ("key-before-section", "base_dir = /x\n" + config),
        ("unclosed-section", config.replace("[mjf]", "[mjf")),
        ("no-equals", config + "just words\n"),
        ("utf8-bom", "\ufeff" + config),
        ("nul-in-value", config.replace("log = stderr", "log = stderr\0")),
        ("nul-in-comment", config + "# \0\n"),
        ("refused-key", config + "[jobfeatures]\njob_id = 7\n"),
        ("wrong-section", config + "[jobfeatures]\ntotal_cpu = 4\n"),
        ("export-url-without-base", config.replace("[mjf]\n", "[mjf]\nexport = url\n")),
        ("jobstatus-maybe", config.replace("[mjf]\n", "[mjf]\njobstatus = maybe\n")),
    ]
    cases += [Case(entry, f"config:{label}", culprits, config=_encoded(text),
                   names=("jobstatus",) if "jobstatus" in label else (),
                   **config_effect(entry, config, _encoded(text)))
              for label, text in structural]
    lines = config.splitlines()
    valued = [(i, line) for i, line in enumerate(lines) if " = " in line]
    variants = []
    for index, line in valued:
        key, original = line.split(" = ", 1)
        for label, text in value_mutations(original):
            changed = list(lines)
            changed[index] = f"{key} = {text}"
            variants.append((f"config:{key}:{label}", text[:200].strip(),
                             "\n".join(changed) + "\n"))
    for label, value, text in random.Random(f"{SEED}:{entry}").sample(variants, sample):
        value = value.replace("@D@", "")
        cases.append(Case(entry, label, (*culprits, *([value] if value else [])),
                          config=_encoded(text), **config_effect(entry, config, _encoded(text))))
    return cases


_YES = ("1", "yes", "true", "on")  # what a config boolean takes for yes (docs/configuration.md)


def offers_jobstatus(config: bytes) -> bool:
    """Whether a config (as the hook reads it) offers $JOBSTATUS: ``[mjf] jobstatus`` is a
    yes (1, yes, true, on, in any case); a config that is refused offers nothing."""
    settings = config_model(config) or {}
    return settings.get(("mjf", "jobstatus"), "no").lower() in _YES


def jobstatus_config_cases(entry: str, config: str) -> list[Case]:
    """``[mjf] jobstatus`` spelled every way a boolean may be, and broken in every way
    (config_cases breaks it to ``maybe`` for every entry point). Where its value is refused
    on a line of its own, the error line names the key."""
    culprits = ("mjf.conf", "/run/mjf", "(set [")
    values = [(f"spelled-{text}", text) for text in ("Yes", "on", "TRUE", "1", "no", "Off")]
    cases = []
    for label, text in values + value_mutations("yes"):
        data = _encoded(config.replace("[mjf]\n", f"[mjf]\njobstatus = {text}\n", 1))
        effect = config_effect(entry, config, data)
        one_line = "\n" not in text and "\0" not in text and text.isprintable()
        cases.append(Case(entry, f"config:jobstatus:{label}", culprits, config=data,
                          names=("jobstatus",) if effect["effect"] == UNREADABLE and one_line
                          else (), **effect))
    return cases


def sample(cases: list[Case], count: int) -> list[Case]:
    """A seeded sample of ``count`` cases, in their original order."""
    chosen = set(random.Random(f"{SEED}:{cases[0].entry}").sample(range(len(cases)), count))
    return [case for index, case in enumerate(cases) if index in chosen]


def with_on_error_fail(cases: list[Case], every: int) -> list[Case]:
    """Every ``every``-th case again with ``[mjf] on_error = fail`` (its expected status and
    whether the job runs follow from the same effect)."""
    return [Case(case.entry, case.label + ":on-error-fail", case.culprits, case.env, case.files,
                 case.config, case.argv, case.outputs, on_error_fail=True, effect=case.effect,
                 next_wrapper=case.next_wrapper, host_defaults=case.host_defaults,
                 job_command=case.job_command, job_keys=case.job_keys,
                 jobstatus=case.jobstatus, names=case.names, records=case.records,
                 removes_job=case.removes_job)
            for case in cases[::every] if case.config is None]


def _environment_of(case: Case, recorded: dict[str, str]) -> dict[str, str | None] | None:
    """The batch system's environment a case's hook sets up with (None: unreadable)."""
    if "job.env" in case.files:
        return parse_env_file(case.files["job.env"])
    return {**recorded, **case.env}


def with_jobstatus(cases: list[Case], every: int, recorded: dict[str, str]) -> list[Case]:
    """Every ``every``-th case (from the middle of each run of ``every``: not those
    with_on_error_fail takes) again with the case directory's config offering $JOBSTATUS
    (``jobstatus = yes``), and every case whose effect it changes: a Prolog running inside
    the job's cgroups (RunInJob) then needs the job's uid too, for its jobstatus/. Only
    cases that keep the case directory's config (``config`` None). ``recorded``: the
    entry point's recorded environment. What the job loses is the same either way: a
    jobstatus/ is no key."""
    variants = []
    for index, case in enumerate(cases):
        if case.config is not None:
            continue
        effect = case.effect
        environ = _environment_of(case, recorded)
        if effect == DROPS and environ is not None:
            effect = environment_effect(case.entry, recorded, environ, jobstatus=True)
        if index % every != every // 2 and effect == case.effect:
            continue
        variants.append(Case(
            case.entry, case.label + ":jobstatus", case.culprits, case.env, case.files,
            case.config, case.argv, case.outputs, on_error_fail=case.on_error_fail,
            effect=effect, next_wrapper=case.next_wrapper, host_defaults=case.host_defaults,
            job_command=case.job_command,
            job_keys=case.job_keys if effect == case.effect else None, jobstatus=True,
            names=case.names, records=case.records,
            removes_job=case.removes_job if effect == case.effect else None))
    return variants


# -- job records ([records] dir) ----------------------------------------------------------------

# The end-of-job hooks: each writes the job's record before it removes the job's directory.
RECORD_WRITERS = ("slurm-epilog", "slurm-24.11-epilog", "lsf-post-exec", "gridengine-epilog",
                  "htcondor-job-exit", "pbs-end", "pbs-epilogue")
# The job's record is written where the hook runs as root (docs/records.md: "Records are root's");
# as another user it is handed in to <dir>/incoming/, which only root's `mjf sync` makes (a
# case directory has none, and no other user can make it): the record cases need root.
WRITES_RECORDS = os.geteuid() == 0
FOREIGN_UID = 4711  # a user other than us and root (no user of that id need exist)


def offers_records(config: bytes) -> bool:
    """Whether a config (as the hook reads it) keeps records: ``[records] dir`` is set."""
    return ("records", "dir") in (config_model(config) or {})


def with_records(cases: list[Case]) -> list[Case]:
    """Every case (that keeps the case directory's config) again where the site keeps
    records: what it does to the end of the job is the same, and its record is whole or
    absent - never a partial one, never a traceback."""
    return [case.again(case.label + ":records", culprits=(*case.culprits, "records"),
                       records=True)
            for case in cases if case.config is None and not case.records]


def records_state_cases(entry: str, days: tuple[str, ...]) -> list[Case]:
    """The records directory (D/records) and its day directories (each of ``days``, where
    the job's record may go) broken: refused or unwritable, the record is not written and
    one line names the directory; the job's directory goes either way. The site's own
    symlink to a directory elsewhere is followed; one another user planted, never."""
    def day_files(content):
        return {f"records/{day}": content for day in days}

    planted = [
        ("records-file", {"records": b"not a directory"}, RECORD_FAILS),
        ("records-fifo", {"records": ("fifo",)}, RECORD_FAILS),
        ("records-world-writable", {"records": ("directory", 0o777)}, RECORD_FAILS),
        ("records-foreign", {"records": ("directory", 0o755, FOREIGN_UID)}, RECORD_FAILS),
        ("records-symlink-site", {"records-elsewhere": DIRECTORY,
                                  "records": ("symlink", "@D@/records-elsewhere")}, DROPS),
        ("records-symlink-foreign", {"records-elsewhere": DIRECTORY, "records": (
            "symlink", "@D@/records-elsewhere", FOREIGN_UID)}, RECORD_FAILS),
        ("records-symlink-dangling", {"records": ("symlink", "@D@/no-such-dir")}, RECORD_FAILS),
        ("day-file", day_files(b"not a directory"), RECORD_FAILS),
        ("day-fifo", day_files(("fifo",)), RECORD_FAILS),
        ("day-symlink", {"records-elsewhere": DIRECTORY,
                         **day_files(("symlink", "@D@/records-elsewhere"))}, RECORD_FAILS),
        ("day-world-writable", day_files(("directory", 0o777)), RECORD_FAILS),
        ("temp-leftover", {f"records/{day}/.new-json.1.abcd": b"{" for day in days}, DROPS),
        ("incoming-file", {"records/incoming": b"x"}, DROPS),
    ]
    return [Case(entry, f"records:{label}", ("records",), files=files, records=True,
                 effect=effect, removes_job=True)
            for label, files, effect in planted]


# A root-only file a job's user names to a root hook, as Grid Engine's PE_HOSTFILE: if it
# were read, this host's slots would be SECRET_NUMBER, and a message quoting it would show
# SECRET_MARKER. Neither may reach any output, log line or file (test_corpus.check_secret).
SECRET_MARKER = "mjf-secret-marker"


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


def usage_file_cases(entry: str, path: str, content: bytes, reported: bool) -> list[Case]:
    """What an end-of-job hook reads of what the job used (``path`` in the case directory:
    Grid Engine's shepherd's usage file, the report Slurm's TaskEpilog left) broken: the
    values it gives are left out of the record, which is still written whole; a FIFO is
    not waited on. ``reported``: a job's user can put a file there (Slurm's report, which
    they write; Grid Engine's usage, in a directory a job names): a 1 GiB file is not read
    whole, and a symlink to a root-only file is not followed (its numbers must not reach
    the record: SECRET_NUMBER)."""
    variants = [(label, data) for label, data in file_mutations(content)]
    variants.append(("fifo", ("fifo",)))
    if reported:
        variants += [("sparse-1g", ("sparse", 1 << 30)),
                     ("symlink-root-only", ("symlink", "@D@/etc/secret"))]
    name = path.rsplit("/", 1)[1]
    cases = []
    for label, data in variants:
        files = {path: data}
        if label == "symlink-root-only":
            files = {"etc/secret": ("private", SECRET_REPORT), path: data}
        cases.append(Case(entry, f"usage:{label}", (name, "usage"), files=files, records=True,
                          removes_job=True))
    return cases


SECRET_NUMBER = "31337"
SECRET_REPORT = (f"cpu_secs {SECRET_NUMBER}\npeak_memory_bytes {SECRET_NUMBER}\n"
                 f"ru_utime={SECRET_NUMBER}\nru_stime=0\n").encode()


# -- PBS (OpenPBS 23.06: tests/fixtures/pbs-23.06) ---------------------------------------------
#
# The execjob hooks get the job's attributes as ``name=value`` lines on stdin, what the hook
# adapter (contrib/pbs/mjf_hook.py) hands them (hook-input/*.txt, as recorded); a classic
# prologue gets the job in argv (OpenPBS: id, user, group; Torque 7 words), an epilogue 10
# words; the profile.d lines read PBS_JOBID. The recorded job's user (pbsuser1) need not exist
# here: the one running the tests stands in, as Grid Engine's (a root begin or prologue gives
# the job's directory to that user, and refuses one unknown here).
PBS = "pbs-23.06"
PBS_USER = GE_USER
PBS_GROUP = grp.getgrgid(pwd.getpwnam(PBS_USER).pw_gid).gr_name
# What a role reads of its stdin at most: a job's few dozen lines, with room to spare
# (mjf-pbs); beyond it the attributes are refused whole.
PBS_MAX_STDIN = 1 << 20
# A Case.argv starting with this gives the words after the role (a prologue's or epilogue's
# job), instead of the entry point's own.
PBS_WORDS = "@WORDS@"


def pbs_hook_input(name: str) -> bytes:
    """A recorded stdin of the hook adapter (hook-input/NAME.txt), the job's user ours."""
    text = fixture_text(f"{PBS}/hook-input/{name}.txt")
    return text.replace("\neuser=pbsuser1\n", f"\neuser={PBS_USER}\n").replace(
        "\negroup=pbsuser1\n", f"\negroup={PBS_GROUP}\n").encode()


def _pbs_qstat_f(job: str, name: str) -> str:
    """``qstat -f JOB`` as OpenPBS prints it (the text form of the recorded ``qstat -f -F json``
    of job a, qstat-f-job-a-running.json, renamed): ``    name = value`` lines, a long one
    continued on lines that start with a tab (80 columns)."""
    import json

    jobs = json.loads(fixture_text(f"{PBS}/qstat-f-job-a-running.json"))["Jobs"]
    (attributes,) = jobs.values()
    lines = [f"Job Id: {job}"]
    for key, value in attributes.items():
        if key == "Job_Name":
            value = name
        if isinstance(value, dict) and key == "Variable_List":
            value = ",".join(f"{k}={v}" for k, v in value.items())
        if isinstance(value, dict):
            lines += [f"    {key}.{k} = {v}" for k, v in value.items()]
            continue
        line = f"    {key} = {value}"
        lines.append(line[:80])
        lines += [f"\t{line[i:i + 79]}" for i in range(80, len(line), 79)]
    return "\n".join(lines).replace("pbsuser1", PBS_USER) + "\n\n"


PBS_QSTAT_F = _pbs_qstat_f("8.vm", "jobp")


def pbs_job_id(text: str) -> bool:
    """A PBS job id (pbs.py's docstring, qsub(1B)): a sequence number, an array index in
    brackets, a server name of letters, digits, ``.``, ``-``, ``_`` after a dot
    (``4.vm``, ``12[3].vm``, ``123``); each number plain ASCII digits, at most 19 (what a
    count may have); 200 characters at most (the spec's job id)."""
    import re

    return len(text) <= _MAX_JOB_ID and re.fullmatch(
        r"[0-9]{1,19}(\[[0-9]{1,19}\])?(\.[A-Za-z0-9._-]+)?", text, re.ASCII) is not None


def pbs_attributes(data) -> dict[str, str] | None:
    """The job's attributes as a role reads them from a stdin laid out as ``data`` (bytes;
    None, a directory: an empty one; ("sparse", size)): ``name=value`` lines, bytes that are
    not UTF-8 U+FFFD; None where stdin is larger than PBS_MAX_STDIN."""
    if isinstance(data, tuple) and data[0] == "sparse":
        data = b"\0" * data[1] if data[1] <= PBS_MAX_STDIN else None
        if data is None:
            return None
    if not isinstance(data, bytes):
        data = b""
    if len(data) > PBS_MAX_STDIN:
        return None
    attributes = {}
    # Lines end at \n only (the adapter writes each attribute on one, a \r or \n inside a
    # value made a space: a job's name cannot forge an id= line).
    for line in data.decode("utf-8", "replace").split("\n"):
        name, equals, value = line.partition("=")
        if equals and name:
            attributes[name] = value
    return attributes


def pbs_effect(entry: str, attributes: dict[str, str] | None, job: str) -> dict:
    """Case keywords for what a PBS role does with a job's ``attributes`` (None: refused),
    its recorded job ``job``: set-up fails without a job id, for a begin or prologue (root:
    the directory is the job's user's) without a user known here, for a launch without the
    job's directory (a begin made only ``job``'s). An end or epilogue ends the job named:
    ``job``'s directory goes where it names that one."""
    if attributes is None or not pbs_job_id(attributes.get("id", "")):
        return {"effect": SETUP_FAILS}
    if entry in ("pbs-begin", "pbs-prologue", "pbs-prologue-torque") and not _known_user(
            attributes.get("euser", "")):
        return {"effect": SETUP_FAILS}
    if entry == "pbs-launch" and attributes["id"] != job:
        return {"effect": SETUP_FAILS}
    if entry in ("pbs-end", "pbs-epilogue"):
        return {"effect": DROPS, "removes_job": True if attributes["id"] == job else None}
    return {"effect": DROPS}


# Ids that are no PBS job's, some of which would name a path.
PBS_HOSTILE_IDS = [("dotdot-x", "../x"), ("dot", "."), ("dotdot", ".."), ("slash", "a/b"),
                   ("id-slash", "20.vm/../x"), ("digits-300", "2" * 300),
                   ("server-300", "20." + "v" * 297), ("star", "*"), ("space-inside", "20 .vm"),
                   ("array-unclosed", "21[1.vm"), ("array-letters", "21[a].vm")]
# Other ids a job may have: another job's (set-up goes on, for that one).
PBS_OTHER_IDS = [("other-job", "7.vm"), ("array-job", "21[1].vm"), ("no-server", "20"),
                 ("long-server", "20.vm.example.org")]


def pbs_stdin_cases(entry: str, path: str, content: bytes, job: str,
                    names: tuple[str, ...]) -> list[Case]:
    """The job's attributes on a PBS role's stdin (``path`` in the case directory; recorded:
    ``content``) broken as a whole, and each attribute of ``names`` removed, broken,
    duplicated, its line broken (and the id replaced by hostile ids and other jobs')."""
    culprits = ("stdin", "attributes", "id attribute", "job id", "exec_vnode", "Resource_List",
                "resources_used", "euser", "vnodes", "execjob_begin")

    def case(label, data, own=()):
        keywords = pbs_effect(entry, pbs_attributes(data), job)
        more = ("execjob_begin",) if entry == "pbs-launch" else ()
        return Case(entry, f"stdin:{label}", (*own, "stdin", *more) if own else culprits,
                    files={path: data}, **keywords)

    variants = [*file_mutations(content),
                ("bom", b"\xef\xbb\xbf" + content), ("no-final-newline", content.rstrip(b"\n")),
                ("twice", content + content), ("cr-only", content.replace(b"\n", b"\r")),
                ("spaces-around-equals", content.replace(b"=", b" = ")),
                ("at-the-limit", content + b"#" * (PBS_MAX_STDIN - len(content) - 1) + b"\n"),
                ("over-the-limit", content + b"#" * (PBS_MAX_STDIN - len(content)) + b"\n"),
                ("sparse-over-the-limit", ("sparse", PBS_MAX_STDIN + 4096))]
    cases = [case(label, data) for label, data in variants]
    lines = content.decode().splitlines()
    for name in names:
        index = next(i for i, line in enumerate(lines) if line.split("=", 1)[0] == name)
        original = lines[index].split("=", 1)[1]
        own = ("id attribute", "job id") if name == "id" else (name,)
        if name in ("vnodes", "node"):
            own = ("vnodes", "exec_vnode")
        texts = [*value_mutations(original), ("duplicate", f"{original}\n{name}={original}")]
        if name == "id":
            texts += PBS_HOSTILE_IDS + PBS_OTHER_IDS
        if name == "Job_Name":  # a name that would end a line elsewhere: no forged id line
            texts += [(f"forged-id-{label}", f"{original}{separator}id=7.vm")
                      for label, separator in (("cr", "\r"), ("vt", "\v"), ("fs", "\x1c"),
                                               ("ls", "\u2028"), ("nel", "\x85"))]
        else:
            texts.append(("duplicate-garbage", f"{original}\n{name}=\udcff"))
        changed_lines = [(label, f"{name}={text}") for label, text in texts] + [
            ("missing", None), ("no-equals", f"{name} {original}"),
            ("lowercase-name", f"{name.lower()}={original}"),
            ("spaced-name", f" {name}={original}")]
        for label, line in changed_lines:
            if label == "lowercase-name" and name.lower() == name:
                continue
            changed = list(lines)
            if line is None:
                del changed[index]
            else:
                changed[index] = line
            cases.append(case(f"{name}:{label}", _encoded("\n".join(changed) + "\n"), own))
    return cases


def pbs_argv_attributes(entry: str, words: list[str]) -> dict[str, str] | None:
    """What a classic prologue's or epilogue's argv names (as the PBS and Torque manuals
    give it: job id, user, group first); None where it has fewer than those three."""
    if len(words) < 3:
        return None
    return {"id": words[0], "euser": words[1], "egroup": words[2]}


def pbs_argv_cases(entry: str, words: list[str], culprits: list[tuple[str, ...]],
                   every_way: tuple[int, ...], job: str, sampled: int = 5) -> list[Case]:
    """A classic prologue's or epilogue's argv (``words``) broken: each word in every way
    (those of ``every_way``; the others a seeded sample of ``sampled`` ways), too few and
    too many words. ``culprits``: what a line about each word may name."""
    def case(label, changed, own):
        return Case(entry, f"argv:{label}", own, argv=(PBS_WORDS, *changed),
                    **pbs_effect(entry, pbs_argv_attributes(entry, changed), job))

    count = ("at least", "job id", "user", "group")
    cases = [case(label, changed, count) for label, changed in [
        ("no-words", []), ("one-word", words[:1]), ("two-words", words[:2]),
        ("three-words", words[:3]), ("extra-word", [*words, "extra"]),
        ("all-empty", [""] * len(words))]]
    rng = random.Random(f"{SEED}:{entry}:argv")
    for position, word in enumerate(words):
        variants = value_mutations(word, nul=False)
        if position not in every_way:
            variants = sorted(rng.sample(variants, min(sampled, len(variants))))
        if position == 0:
            variants += PBS_HOSTILE_IDS + PBS_OTHER_IDS
        for label, text in variants:
            changed = list(words)
            changed[position] = text
            cases.append(case(f"{position + 1}:{label}", changed, culprits[position]))
    return cases
