"""The bad-input corpus's generic model: a deterministic, seeded list of mutated hook inputs.

Every case starts from what a real job gave a hook (each batch system's recorded input,
in its file ``backends/<name>.py``; a job's cgroup tree and /proc files here) and breaks
one thing: an environment variable, a file the batch system hands the hook (as a whole
or entry by entry), a cgroup or /proc file, a line of the config or the whole config,
what a batch-system command prints, the state a previous run left (in base_dir, or the
records directory), what a job's end reads of what it used, or an option. The list
depends on nothing but ``SEED``, so the number of cases is stable from run to run (the
corpus's conftest prints it).

This module names no batch system: what decides the outcome at one entry point (its exit
statuses, what it does with the store, which of its batch system's variables set-up
cannot do without...) is that entry point's :class:`EntryModel`, which its batch
system's file declares; ``backends/__init__.py`` hands every file's declarations to
:func:`declare`.
"""

from __future__ import annotations

import functools
import os
import pwd
import random

from tests.conftest import FIXTURES, fixture_text

SEED = 20261122
MIB = 1 << 20
HOST = os.uname().nodename
RNG = random.Random(SEED)
# Who a root hook gives a job's directory to, where a recorded job's user need not exist
# here: the one running the tests (who does).
OUR_USER = pwd.getpwuid(os.getuid()).pw_name

# -- what a broken input does -----------------------------------------------------------------
#
# Each case says, when it is generated, what its broken input does to the hook - from the
# input alone, never from a run. The checks derive everything else from that.

# Set-up goes on: the affected keys are left out (a warning each) or nothing changes at all.
# No error line; a job runner runs the job with MJF.
DROPS = "drops"
# Set-up fails (the hook cannot tell which job or role it is, or its store was tampered
# with): one error line; the hook exits 0 and a job runner runs the job without MJF, or,
# with [mjf] on_error = fail, it exits 1 (EntryModel.failure_exit) and runs nothing.
SETUP_FAILS = "setup-fails"
# The hook's own inputs - the config, or the --env-file that may name it - cannot be used:
# one error line; the config's on_error is unknown, so the default applies: exit 0, and a
# job runner runs the job without MJF (docs/configuration.md: "A hook that meets a broken
# config logs that line and exits 0 (a wrapper still runs the job)"). An admin's command
# that runs no job (`mjf machine`) exits EntryModel.unusable_exit (2) instead.
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


class EntryModel:
    """What the model knows of one entry point beyond its recorded input: how it exits,
    what it does with base_dir's store, and how its batch system's input decides set-up.
    Each batch system's file declares its own (its :class:`~tests.corpus.entries.Entry`
    objects are EntryModels; ``MODELS`` holds any it runs otherwise).

    ``store_role``: what it does with base_dir's store - ``creates`` (machinefeatures/ and
    the job's directory), ``machine`` (machinefeatures/ only), ``removes`` (the job's
    directory), ``completes`` (the job directory what ran first made), ``reports`` (only
    the job's usage/), ``reads``. ``exec_fails_exit``: for an entry point that runs the
    job, its status where the job's command cannot be executed (None: it runs no job).
    ``usage_exit``: its status for a wrong command line; ``unusable_exit``: where it runs
    no job, its status when its own inputs cannot be used (UNREADABLE: 0 for a hook, 2 for
    an admin's command, docs/configuration.md). ``failure_exit``: its status
    for a failed set-up with ``on_error = fail``. ``always_zero``: it exits 0 whatever
    happens. ``writes_records``: an end of job, which writes the job's record.

    The hooks, each called with the entry point's name first (None: the default):
    ``set_up(entry, recorded, environ, jobstatus)``, the effect of its batch system's
    environment ``environ`` (``recorded``, changed), the site offering $JOBSTATUS or not
    (default: DROPS, no variable is essential); ``job_start(entry, environ, effect=...)``,
    Case keywords for what a job runner execs given its environment (default: none);
    ``job_keys(entry, recorded, environ)``, what the job's directory gets (Case.job_keys)
    for an environment it sets up with; ``cgroup_keys(entry, files)``, those for the cgroup
    files a case lays out (default for both: not modelled); ``config_effect(entry,
    base, settings)``, Case keywords for what a config it reads (its own config
    ``base``, changed to ``settings``) does beyond the generic model; and
    ``env_file_culprits``: what a line about its broken --env-file may name besides the
    generic culprits."""

    def __init__(self, name: str, store_role: str, *, exec_fails_exit: int | None = None,
                 usage_exit: int = 0, unusable_exit: int = 0, failure_exit: int = 1,
                 always_zero: bool = False,
                 writes_records: bool = False, set_up=None, job_start=None, job_keys=None,
                 cgroup_keys=None, config_effect=None,
                 env_file_culprits: tuple[str, ...] = ()) -> None:
        self.name = name
        self.store_role = store_role
        self.exec_fails_exit = exec_fails_exit
        self.usage_exit = usage_exit
        self.unusable_exit = unusable_exit
        self.failure_exit = failure_exit
        self.always_zero = always_zero
        self.writes_records = writes_records
        self.set_up = set_up
        self.job_start = job_start
        self.job_keys = job_keys
        self.cgroup_keys = cgroup_keys
        self.config_effect = config_effect
        self.env_file_culprits = env_file_culprits


# What the batch systems' files declare (declare): each entry point's model, by name; the
# fake batch-system commands (program -> functions of argv, each giving (the output's name
# in Case.outputs, what it prints by default), or None for a command line not its own);
# what a line about a broken variable may name instead of it; what a line about a broken
# --env-file may name (the variables it loses).
MODELS: dict[str, EntryModel] = {}
COMMANDS: dict[str, list] = {}
ALSO_NAMED: dict[str, tuple[str, ...]] = {"MJF_CONFIG": ("/etc/mjf/mjf.conf", "the config")}
ENV_FILE_CULPRITS: list[str] = []


def declare(models=(), config_keys=None, commands=None, also_named=None,
            env_file_culprits=()) -> None:
    """Take what one batch system's file declares (or the standalone's entry points)."""
    MODELS.update((declared.name, declared) for declared in models)
    CONFIG_KEYS.update(config_keys or {})
    for program, fake in (commands or {}).items():
        COMMANDS.setdefault(program, []).append(fake)
    ALSO_NAMED.update(also_named or {})
    ENV_FILE_CULPRITS.extend(env_file_culprits)


def model(entry: str) -> EntryModel:
    """The model of the entry point ``entry`` (KeyError: no file declared it)."""
    return MODELS[entry]


def expected_outcome(entry: str, effect: str, on_error_fail: bool) -> tuple[int, bool]:
    """(exit status, whether a job runner runs the job) for ``effect`` at ``entry``."""
    declared = model(entry)
    runner = declared.exec_fails_exit is not None
    if declared.always_zero:
        return 0, False
    if effect == USAGE:
        return declared.usage_exit, False
    if effect == EXEC_FAILS:
        return declared.exec_fails_exit, False
    if effect == RECORD_FAILS:
        return 0, False
    if effect == UNREADABLE and not runner:
        return declared.unusable_exit, False
    if effect == SETUP_FAILS and on_error_fail:
        return declared.failure_exit, False
    return 0, runner


class Case:
    """One mutated run of one entry point.

    ``env``: variables to set (``None`` removes one); ``files``: files of the case
    directory to replace (relative path -> bytes, ``None`` to remove, ``DIRECTORY``
    for an empty directory in its place); ``config``: the config's bytes (None: the
    entry point's default config); ``argv``: extra arguments; ``culprits``: words
    of which a log line about this case must name one.

    What the broken input does, decided here: ``effect`` (one of EFFECTS);
    ``next_wrapper``: for a wrapper chained to another (the config's), what it execs before
    the job - True for the entry's configured one, None for none (the config in force names
    none), or another path; ``job_command``: for a job runner that starts the job as its
    batch system would (the entry point's ``job_start``), the ``(file, argv)`` it execs,
    None for the entry's own; ``host_defaults``: the
    hook falls back to the built-in /etc/mjf/mjf.conf or /run/mjf, which only the
    in-process harness redirects into the case directory. From these and the entry
    point's model: ``status``, the exit status; ``job_runs``, whether a job runner runs
    the job (with its argv); ``logs_error``, whether one error line is due. ``job_keys``:
    where the model says which keys the job's directory gets (the entry point's
    ``job_keys`` or ``cgroup_keys``); None where it is not modelled.

    ``jobstatus``: the case directory's config (``config`` None), and so what runs first
    (Entry.prepare), offers $JOBSTATUS (``[mjf] jobstatus = yes``): each job's directory
    gets an empty ``jobstatus/`` beside its ``jobfeatures/``. ``names``: what the error
    line must name besides a culprit (a config value refused: its key).

    ``records``: the case directory's config (``config`` None) keeps job records
    (RECORDS_SECTION): an end-of-job hook writes the job's record, whole, before it removes
    the job's directory. ``removes_job``: the job's directory must be gone afterwards (None:
    not modelled - the case may name another job, or move base_dir).
    """

    __slots__ = ("argv", "config", "culprits", "effect", "entry", "env", "files",
                 "host_defaults", "job_command", "job_keys", "jobstatus", "label", "names",
                 "next_wrapper", "on_error_fail", "outputs", "records", "removes_job",
                 "via_env_file")

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
        # What a fake batch-system command prints (a str), or raises (an Exception).
        self.outputs = outputs or {}
        self.on_error_fail = on_error_fail
        self.effect = effect
        self.next_wrapper = next_wrapper
        self.job_command = job_command
        self.host_defaults = host_defaults
        self.job_keys = job_keys
        self.jobstatus = jobstatus
        self.names = names
        # NUL cannot be in a real environment: such values travel in an --env-file.
        self.via_env_file = "job.env" in self.files or any(
            "\0" in (value or "") for value in self.env.values())

    @property
    def id(self) -> str:
        return f"{self.entry}:{self.label}"

    @property
    def status(self) -> int:
        """The exit status due (asked when the case runs, of the model its file declared)."""
        return expected_outcome(self.entry, self.effect, self.on_error_fail)[0]

    @property
    def job_runs(self) -> bool:
        """Whether a job runner runs the job (with its argv)."""
        return expected_outcome(self.entry, self.effect, self.on_error_fail)[1]

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


def encoded(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


# -- the recorded inputs ---------------------------------------------------------------------


def recorded_env(relative: str, end: str | None = None) -> dict[str, str]:
    """A recorded environment: its ``NAME=value`` lines (before ``end``, where the
    recording goes on with what a command printed)."""
    text = fixture_text(relative)
    text = (text.split(end)[0] if end else text).replace("@HOST@", HOST)
    return dict(line.split("=", 1) for line in text.splitlines()
                if "=" in line and not line.startswith("#"))


CPUINFO = (FIXTURES / "host/cpuinfo-amd-epyc-2.txt").read_bytes()

# A job's cgroup v2 tree, as the probes see it (paths below the fake root): the one every
# entry point finds, where its file lays out no other (Entry.tree). Laid out as one batch
# system's (slurmstepd's) is: the probes know no batch system's layout.
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

V1_UNLIMITED = 9223372036854771712  # LONG_MAX rounded down to the page size


# -- what each input means to a hook (the model the expectations come from) -------------------
#
# Written from the docs and the formats, not from what a hook printed: which variables
# tell a hook which job (and which role) it is, what the config may hold, what an ad needs
# to name its job, and what a hook does with each part of its store.

MAX_DIGITS = 19  # plain digits a count, a size or an id may have (2**63 - 1 has 19)
MAX_JOB_ID = 200  # HSF-TN-2016-02 job ids, and what the store names a directory after
MAX_ID = 2**32 - 2  # uid_t / gid_t; (uid_t) -1 means "unchanged" to chown


def digits(text: str | None, most: int = MAX_DIGITS) -> bool:
    return bool(text) and text.isascii() and text.isdigit() and len(text) <= most


def _valid_job_id(text: str) -> bool:
    """A job id the store can name a directory after: 1 to 200 printable non-space
    ASCII characters (the spec), no ``/`` and not ``.``/``..`` (a path)."""
    return (0 < len(text) <= MAX_JOB_ID and all("!" <= char <= "~" for char in text)
            and "/" not in text and text not in (".", ".."))


def known_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except (KeyError, ValueError):  # ValueError: NUL, or not encodable
        return False
    return True


def environment_effect(entry: str, recorded: dict[str, str | None],
                       environ: dict[str, str | None], jobstatus: bool = False) -> str:
    """What a batch system's environment ``environ`` (``recorded``, changed) does to set-up,
    the site offering $JOBSTATUS or not (``jobstatus``): set-up fails where the hook cannot
    tell which job it is for, which role it plays, whose the job's directory is, or where
    the job is (the entry point's ``set_up``); anything else only leaves keys out."""
    set_up = model(entry).set_up
    return DROPS if set_up is None else set_up(entry, recorded, environ, jobstatus)


def job_keys(entry: str, recorded: dict[str, str | None], environ: dict[str, str | None]):
    """What the model says ``entry`` writes for an environment it sets up with (the
    entry point's ``job_keys``: Case.job_keys; None: not modelled)."""
    keys = model(entry).job_keys
    return None if keys is None else keys(entry, recorded, environ)


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


def job_start(entry: str, environ: dict[str, str | None] | None, effect: str = DROPS) -> dict:
    """Case keywords for what a job runner execs, given the environment it gets (None:
    none of the job's, as where an --env-file cannot be read); ``effect`` is what the case
    does to set-up otherwise. Nothing where the entry point's model says nothing."""
    start = model(entry).job_start
    return {} if start is None else start(entry, environ, effect=effect)


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


# The config (docs/configuration.md): each known key and what its value must be - one
# of these kinds, a tuple of the values it takes, or a function of the value giving it as
# the hook uses it (None: refused). Each batch system's file declares its own section's.
PATH, _NUMBER, _INTEGER, _DECIMAL, _BOOLEAN, _LOG, _BENCHMARK = (
    "path", "number", "integer", "decimal", "boolean", "log", "benchmark")
# [records] (docs/configuration.md): format, sss and/or apel (comma-separated, any case);
# keep_days, 1 to 6 digits; site, a GOCDB name (printable ASCII, no space, comma, quote
# or backslash).
_FORMATS, _DAYS, _SITE = "formats", "days", "site"
CONFIG_KEYS = {
    ("mjf", "base_dir"): PATH, ("mjf", "on_error"): ("continue", "fail"),
    ("mjf", "log"): _LOG, ("mjf", "legacy_keys"): _BOOLEAN, ("mjf", "command_timeout"): _NUMBER,
    ("mjf", "jobstatus"): _BOOLEAN,
    ("mjf", "export"): ("path", "url"), ("mjf", "url_base"): "url",
    ("machinefeatures", "total_cpu"): _INTEGER, ("machinefeatures", "hs06"): _DECIMAL,
    ("machinefeatures", "grace_secs"): _INTEGER, ("machinefeatures", "benchmark"): _BENCHMARK,
    **{("jobfeatures", key): _INTEGER for key in (
        "wall_limit_secs", "cpu_limit_secs", "max_rss_bytes", "max_swap_bytes",
        "scratch_limit_bytes", "grace_secs_job")},
    ("jobfeatures", "hs06_job"): _DECIMAL,
    ("records", "dir"): PATH, ("records", "format"): _FORMATS, ("records", "keep_days"): _DAYS,
    ("records", "site"): _SITE,
}
_SPACE = " \t\r\v\f"  # what sh's [[:space:]] strips (the sh reader); "\n" ends a line


def _plain_number(text: str) -> bool:
    whole, dot, fraction = text.partition(".")
    return digits(whole, 10**6) and (not dot or digits(fraction, 10**6))


def _config_value(kind, value: str):
    """The value as the hook uses it (paths normalised), or None where it is refused."""
    if isinstance(kind, tuple):
        return value if value in kind else None
    if callable(kind):
        return kind(value)
    if kind == PATH:
        full = _expanded(value)
        if not full.startswith("/") or len(full) > _PATH_MAX or ".." in full.split("/"):
            return None
        return os.path.normpath(value) if value.startswith("@D@") else os.path.normpath(full)
    if kind == _INTEGER:
        return value if digits(value) and int(value) < 2**63 else None
    if kind == _DECIMAL:  # at most two decimals, below 10**13 with a fraction
        whole, _, fraction = value.partition(".")
        fraction = fraction.rstrip("0")
        if not _plain_number(value):
            return None
        if not fraction:
            return value if len(whole.lstrip("0")) <= MAX_DIGITS and int(whole) < 2**63 \
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
    if kind == _FORMATS:
        formats = [part.strip().lower() for part in value.split(",")]
        return value if value and set(formats) <= {"sss", "apel"} else None
    if kind == _DAYS:
        return value if digits(value, 6) and int(value) >= 1 else None
    if kind == _SITE:
        return value if value and value.isascii() and value.isprintable() and not any(
            char in value for char in " \t\"'\\,") else None
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
    sections = {section for section, _ in CONFIG_KEYS}
    section = None
    for raw in text.split("\n"):
        line = raw.strip(_SPACE)
        if not line or line[0] in "#;":
            continue
        content = _without_comment(line)
        if "\0" in line or not content.replace("\t", " ").isprintable():
            return None
        if line.startswith("["):
            if not line.endswith("]") or line[1:-1].strip().lower() not in sections:
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


def config_effect(entry: str, base: str, data: bytes) -> dict:
    """What the config ``data`` (the entry's config ``base``, changed) does: Case keywords."""
    return settings_effect(entry, base, config_model(data))


def settings_effect(entry: str, base: str, settings: dict | None) -> dict:
    """What a config that sets ``settings`` (config_model's; None: refused) does: Case
    keywords."""
    if settings is None:
        return {"effect": UNREADABLE, "next_wrapper": None}
    keywords = {"effect": DROPS, "host_defaults": ("mjf", "base_dir") not in settings}
    more = model(entry).config_effect
    if more is not None:
        keywords.update(more(entry, base, settings))
    return keywords


def config_path_effect(path: str | None) -> dict:
    """$MJF_CONFIG naming ``path`` instead of the case's config: Case keywords. A path no
    open() takes is a config that cannot be read; any other names a missing file (or,
    unset or empty, the default /etc/mjf/mjf.conf): the defaults, without next_wrapper."""
    if path and _cannot_open(path):
        return {"effect": UNREADABLE, "next_wrapper": None}
    return {"effect": DROPS, "next_wrapper": None, "host_defaults": True}


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
    # file (a job's directory that is missing is a hook before it that did not run: nothing
    # to export, or for a starter a set-up of its own). A creator builds the job's
    # directory anew and a remover removes it, whatever a previous run left there.
    "jobfeatures-symlink": ("completes",),
    "key-directory": ("completes",),
}


def state_effect(entry: str, label: str) -> str:
    """What a leftover in base_dir (``label``) does. Dynamic values (shutdowntime) that are
    no value are ignored, a static key file that is garbage or a symlink is replaced, a
    hidden temporary file is left alone: only planted directories matter."""
    return SETUP_FAILS if model(entry).store_role in _PLANTED_IN_STORE.get(label, ()) else DROPS


def option_effect(option: str, text: str) -> str:
    """``mjf run OPTION TEXT``: --cpus, --wall-limit and --memory take a positive whole
    number (else a usage error); --job-id a job id (else set-up fails; empty is no id, as
    an empty variable is an unset one everywhere in the suite, and one is generated)."""
    if option == "--job-id":
        return DROPS if not text or _valid_job_id(text) else SETUP_FAILS
    return DROPS if digits(text) and int(text) > 0 else USAGE


# -- per source of input ---------------------------------------------------------------------


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
                    outcome["job_keys"] = job_keys(entry, environ, changed)
            cases.append(Case(entry, f"env:{name}:{label}", culprits, env={name: text},
                              **outcome))
    return cases


def env_file_cases(entry: str, environ: dict[str, str]) -> list[Case]:
    """The --env-file itself broken (the replay path every hook has)."""
    content = encoded("".join(f"{name}={value}\n" for name, value in environ.items()))
    # A broken file loses variables: the line about it names what is missing.
    culprits = ("env-file", "job.env", *ENV_FILE_CULPRITS, "TMPDIR", "XDG_RUNTIME_DIR",
                *model(entry).env_file_culprits)
    cases = []
    for label, mutated in file_mutations(content):
        replayed = parse_env_file(mutated)
        effect = UNREADABLE if replayed is None else environment_effect(entry, environ, replayed)
        keys = job_keys(entry, environ, replayed) if effect == DROPS else None
        # A file that cannot be read leaves a hook the environment it was started with:
        # here the recorded one too.
        cases.append(Case(entry, f"env-file:{label}", culprits, files={"job.env": mutated},
                          effect=effect, job_keys=keys, **job_start(
                              entry, environ if replayed is None else replayed, effect=effect)))
    return cases


def output_cases(entry: str, command: str, output: str, fields: tuple[str, ...]) -> list[Case]:
    """What a batch-system command prints, field by field and as a whole; and failing.

    ``command`` names the output (``PROGRAM-WHAT`` for another of its outputs: the fake
    commands' names in Case.outputs, mutations.COMMANDS)."""
    from mjf_hooks.external_command import CommandError

    program = command.split("-")[0]
    cases = [
        Case(entry, f"{command}:fails", (program,),
             outputs={command: CommandError(f"/usr/bin/{program} exited with status 1")}),
        Case(entry, f"{command}:hangs", (program,),
             outputs={command: CommandError(f"/usr/bin/{program} did not finish within 5 s")}),
    ]
    for label, mutated in file_mutations(encoded(output)):
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


def _cgroup_case(entry: str, label: str, culprits: tuple[str, ...], files: dict) -> Case:
    keys = model(entry).cgroup_keys
    return Case(entry, label, culprits, files=files,
                job_keys=None if keys is None else keys(entry, files))


def cgroup_cases(entry: str) -> list[Case]:
    """The job's cgroup tree and the /proc files that lead to it, broken (below D/root, where
    the probes read the fake tree). A broken limit or path only loses cgroup limits: set-up
    goes on (DROPS), and where the entry point's model has ``cgroup_keys`` it says what the
    hook writes."""
    cases = []
    limit_files = [f"{V2_JOB}/memory.max", f"{V2_JOB}/memory.swap.max",
                   f"{V2_JOB}/step_0/cpuset.cpus.effective"]
    for path in limit_files:
        name = path.rsplit("/", 1)[1]
        original = CGROUP_TREE[path].decode().strip()
        variants = [(label, encoded(text + "\n")) for label, text in value_mutations(original)]
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
                                      {**v1, f"root/{path}": encoded(text + "\n")}))
    return cases


def config_cases(entry: str, config: str, sample: int) -> list[Case]:
    """The config broken as a whole (all of these), and ``sample`` of its values broken."""
    data = encoded(config)
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
    cases += [Case(entry, f"config:{label}", culprits, config=encoded(text),
                   names=("jobstatus",) if "jobstatus" in label else (),
                   **config_effect(entry, config, encoded(text)))
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
                          config=encoded(text), **config_effect(entry, config, encoded(text))))
    return cases


# A site's drop-in (read after the config, docs/configuration.md): it overrides two of every
# entry point's values, and a broken one is refused as the config itself would be.
DROP_IN = "mjf.conf.d/50-site.conf"
DROP_IN_TEXT = "[machinefeatures]\ngrace_secs = 600\n[jobfeatures]\nmax_swap_bytes = 0\n"


def drop_in_cases(entry: str, config: str) -> list[Case]:
    """The config's drop-ins broken as a whole and line by line, sections for some nodes
    among them, and files beside them that are not read (hidden, left by a package manager
    or an editor); where a drop-in is refused, its path is what the error names."""
    culprits = ("50-site.conf", "mjf.conf.d")
    unchanged = config_effect(entry, config, encoded(config))
    refused = {"effect": UNREADABLE, "next_wrapper": None}

    def effect(drop_in) -> dict:
        if drop_in is DIRECTORY or isinstance(drop_in, tuple):
            return refused  # no file to read: the hook cannot know what the site meant
        if drop_in is None:
            return unchanged
        settings = config_model(drop_in)
        if settings is None:
            return refused
        # A drop-in's line overrides the config's (a later file wins at one level).
        return settings_effect(entry, config, {**config_model(encoded(config)), **settings})

    cases = [Case(entry, f"drop-in:{label}", culprits, files={DROP_IN: mutated},
                  **effect(mutated))
             for label, mutated in file_mutations(encoded(DROP_IN_TEXT))]
    whole = [
        ("unknown-key", DROP_IN_TEXT + "[mjf]\ncolour = blue\n"),
        ("key-before-section", "grace_secs = 60\n" + DROP_IN_TEXT),
        ("duplicate-key", DROP_IN_TEXT + "[machinefeatures]\ngrace_secs = 60\n"),
        ("bad-value", DROP_IN_TEXT.replace("= 600", "= soon")),
        ("refused-key", "[jobfeatures]\njob_id = 7\n"),
    ]
    cases += [Case(entry, f"drop-in:{label}", culprits, files={DROP_IN: encoded(text)},
                   **effect(encoded(text))) for label, text in whole]
    # Sections for some nodes (not in config_model: their effects are given here): valid
    # ones change none of the entry point's effects, and every line is validated on every
    # node, whether it applies here or not.
    for label, text, valid in [
            ("host-section-here", "[machinefeatures host=*]\ngrace_secs = 60\n", True),
            ("cpu-section-elsewhere", '[machinefeatures cpu="No Such CPU *"]\n'
             "grace_secs = 60\n", True),
            ("host-section-elsewhere-bad-value", "[machinefeatures host=no-such-node-*]\n"
             "grace_secs = soon\n", False),
            ("mjf-for-some-hosts", "[mjf host=*]\nlog = stderr\n", False),
            ("unknown-qualifier", "[machinefeatures rack=7]\ngrace_secs = 60\n", False),
            ("pattern-unclosed-quote", '[machinefeatures cpu="AMD]\ngrace_secs = 60\n', False),
            ("clash-in-one-file", "[machinefeatures host=*]\ngrace_secs = 60\n"
             "[machinefeatures host=?*]\ngrace_secs = 120\n", False)]:
        cases.append(Case(entry, f"drop-in:{label}", culprits, files={DROP_IN: encoded(text)},
                          **(unchanged if valid else refused)))
    # Two files: the later one's same section wins; two different sections of one level
    # that both apply here and disagree are refused, whichever file holds them.
    later = "mjf.conf.d/60-site.conf"
    for label, second, valid in [
            ("same-section-later-file", "[machinefeatures host=*]\ngrace_secs = 120\n", True),
            ("clash-across-files", "[machinefeatures host=?*]\ngrace_secs = 120\n", False)]:
        files = {DROP_IN: b"[machinefeatures host=*]\ngrace_secs = 60\n", later: encoded(second)}
        cases.append(Case(entry, f"drop-in:{label}", ("60-site.conf", "50-site.conf"),
                          files=files, **(unchanged if valid else refused)))
    # What is not read: a broken file there must change nothing.
    for label, files in [
            ("hidden", {"mjf.conf.d/.50-site.conf": b"\xff["}),
            ("rpmnew", {"mjf.conf.d/50-site.conf.rpmnew": b"\xff["}),
            ("dpkg-dist", {"mjf.conf.d/50-site.conf.dpkg-dist": b"\xff["}),
            ("editor-backup", {"mjf.conf.d/50-site.conf~": b"\xff["}),
            ("other-name", {"mjf.conf.d/README": b"\xff["}),
            ("directory-is-a-file", {"mjf.conf.d": b"\xff["})]:
        cases.append(Case(entry, f"drop-in:{label}", culprits, files=files, **unchanged))
    cases.append(Case(entry, "drop-in:dangling-symlink", culprits,
                      files={DROP_IN: ("symlink", "@D@/no-such-drop-in")}, **refused))
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
        data = encoded(config.replace("[mjf]\n", f"[mjf]\njobstatus = {text}\n", 1))
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
    (``jobstatus = yes``), and every case whose effect it changes (the entry point's
    ``set_up``: a root hook that leaves jobfeatures/ root's needs the job's user for a
    jobstatus/). Only
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


# A root-only file a job's user names to a root hook (a batch system's hostile-path cases),
# or plants where a hook reads what the job used: if it were read, a number in it
# (SECRET_NUMBER) would be the hook's, and a message quoting it would show SECRET_MARKER.
# Neither may reach any output, log line or file (test_corpus.check_secret).
SECRET_MARKER = "mjf-secret-marker"


def usage_file_cases(entry: str, path: str, content: bytes, reported: bool) -> list[Case]:
    """What an end-of-job hook reads of what the job used (``path`` in the case directory:
    the batch system's usage file, or the report a hook inside the job left) broken: the
    values it gives are left out of the record, which is still written whole; a FIFO is
    not waited on. ``reported``: a job's user can put a file there (a report they write,
    a usage file in a directory a job names): a 1 GiB file is not read
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

