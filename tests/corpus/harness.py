"""Runs one corpus case in-process and checks what the fail-safe rule promises.

Each case gets its own directory ``D`` holding everything the hook may read:
the config, the ad files, a fake ``/proc`` and ``/sys/fs/cgroup`` (the probes
read below ``D/root``), fake batch-system commands, and ``base_dir``. The hook's
``os.execve``, its job spawn, syslog and external commands are replaced by
recorders, so hundreds of cases run in seconds. The built-in defaults a hook falls
back to (``/etc/mjf/mjf.conf``, ``/run/mjf``) are redirected into ``D`` too: a case
never reads or writes the host's.
"""

from __future__ import annotations

import errno
import os
import signal
import stat
import sys

from mjf_hooks import config as config_module
from mjf_hooks import external_command, probe, spec, sync
from mjf_hooks.batch import htcondor as htcondor_batch
from mjf_hooks.external_command import CommandError
from mjf_hooks.probe import cgroup, cpu
from mjf_hooks.store import JOB_DIR_NAME_CHARS, job_dir_name
from tests.corpus.mutations import CGROUP_TREE, COMMANDS, DIRECTORY, config_model

READ_TEXT = probe.read_text
MAX_LINE = 1200  # a clear line, not a megabyte of echoed input
# Lines that follow from a failure already named, and say what happens next.
CONSEQUENCES = ("running the command without MJF",
                # a record without a CPU time (what gave it was broken) has no APEL message
                "no APEL file: APEL record for job ")
# Where the hooks look for the batch system's environment: what a case may replace (and
# MJF's own variables, which a job must get from the hook, not from the test's process).
ENV_PREFIXES = ("SLURM", "_CONDOR", "LSB_", "LSF_", "MJF_", "TMPDIR", "XDG_RUNTIME_DIR", "USER",
                "MACHINEFEATURES", "JOBFEATURES", "JOBSTATUS",
                # Grid Engine's (TMP: a prolog's TMPDIR; QUEUE, HOSTNAME: its queue instance, host)
                "JOB_ID", "SGE_", "PE_HOSTFILE", "NSLOTS", "NHOSTS", "TMP", "LOGNAME", "QUEUE",
                "HOSTNAME",
                # PBS's (PBS_JOBID: the profile.d lines' job)
                "PBS_")
# Where the built-in defaults point in a case directory (absent: all defaults).
DEFAULT_CONFIG = "etc/mjf/mjf.conf"
DEFAULT_BASE_DIR = "run/mjf"


class Outcome:
    """What one run did: exit status, log lines, the jobs it started."""

    def __init__(self, status, stdout, stderr, syslog_lines, execs, exec_files=(), commands=()):
        self.status = status
        self.stdout = stdout
        self.stderr_lines = stderr.splitlines()
        self.syslog_lines = syslog_lines
        # (argv, environ, problems with the JOBFEATURES it was given, {variable: the names
        # in the directory MACHINEFEATURES / JOBFEATURES / JOBSTATUS named when the job
        # started, for each that named a directory})
        self.execs = execs
        # The file each exec ran (what argv[0] names need not be it: a login shell's "-sh").
        self.exec_files = list(exec_files)
        # The argv of each batch-system command it ran (scontrol, bjobs, ...), in-process only.
        self.commands = list(commands)

    @property
    def errors(self):
        return [line for line in self.stderr_lines if ": error: " in line]


class JobStarted(BaseException):
    """The fake ``os.execve`` succeeded: as the real one, it does not return (the hook's
    process is now the job's). Not an Exception: nothing of the hook's may catch it."""


class Sandbox:
    """One case's directory and the recorders standing in for the outside world."""

    def __init__(self, directory, monkeypatch, capsys):
        self.d = str(directory)
        self.monkeypatch = monkeypatch
        self.capsys = capsys
        self.outputs = {}
        self.execs = []
        self.exec_files = []
        self.syslog_lines = []
        self.commands = []
        self._patch()

    def path(self, relative: str) -> str:
        return os.path.join(self.d, relative)

    def expand(self, text):
        return None if text is None else text.replace("@D@", self.d)

    # -- the world the hook sees ---------------------------------------------------------------

    def read_text(self, path):
        """probe.read_text, with /proc and /sys read from the fake tree below ``D/root``."""
        if path.startswith(("/proc/", "/sys/")):
            path = self.path("root") + path
        return READ_TEXT(path)

    def is_directory(self, path):
        """probe.is_directory, in the same fake tree as :meth:`read_text`."""
        if path.startswith(("/proc/", "/sys/")):
            path = self.path("root") + path
        return os.path.isdir(path)

    def _patch(self):
        patch = self.monkeypatch.setattr
        for module in (cgroup, cpu):
            patch(module, "read_text", self.read_text)
        patch(cgroup, "is_directory", self.is_directory)
        for module in [external_command, sync, *self._hook_modules()]:
            if hasattr(module, "run_command"):
                patch(module, "run_command", self._run_command)
        patch(htcondor_batch, "CONDOR_STATUS", self.path("bin/condor_status"))
        patch(config_module, "DEFAULT_PATH", self.path(DEFAULT_CONFIG))
        patch(config_module, "DEFAULT_BASE_DIR", self.path(DEFAULT_BASE_DIR))
        patch(os, "execve", self._execve)
        import syslog

        patch(syslog, "openlog", lambda *args, **kwargs: None)
        patch(syslog, "syslog", self._syslog)
        from mjf_hooks.hooks import standalone

        patch(standalone, "_spawn_and_wait", self._spawn)
        self.monkeypatch.chdir(self.d)

    @staticmethod
    def _hook_modules():
        from mjf_hooks.hooks import gridengine, htcondor, lsf, slurm

        return [slurm, lsf, htcondor, gridengine]

    def _run_command(self, argv, timeout_secs, env=None):
        self.commands.append(list(argv))
        if not os.access(argv[0], os.X_OK):
            raise CommandError(f"cannot run {argv[0]}: No such file or directory")
        # The batch systems' files declare their commands (mutations.COMMANDS): each says
        # which output a command line asks for, and what it prints by default.
        answers = [fake(argv) for fake in COMMANDS.get(os.path.basename(argv[0]), ())]
        answers = [answer for answer in answers if answer is not None]
        if not answers:  # a config naming another file of the case directory: as exec would
            raise CommandError(f"cannot run {argv[0]}: Permission denied")
        name, default = answers[0]
        output = self.outputs.get(name, default)
        if isinstance(output, Exception):
            raise output
        return output

    def _syslog(self, priority, message=None):
        message = priority if message is None else message
        message.encode("utf-8")  # as the real one: a lone surrogate raises UnicodeEncodeError
        self.syslog_lines.append(message)

    def _check_exec(self, argv, environ):
        for text in [*argv, *environ, *environ.values()]:
            if "\0" in text:
                raise ValueError("embedded null byte")  # as os.execve / posix_spawn
        problems = []
        if environ.get("JOBFEATURES"):
            problems = job_dir_problems(environ["JOBFEATURES"])
        listing = {name: sorted(os.listdir(environ[name])) for name in
                   ("MACHINEFEATURES", "JOBFEATURES", "JOBSTATUS")
                   if os.path.isdir(environ.get(name) or "")}
        self.execs.append((list(argv), dict(environ), problems, listing))

    def _execve(self, path, argv, environ):
        self._check_exec(argv, environ)
        if not os.access(path, os.X_OK):
            self.execs.pop()
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", path)
        self.exec_files.append(path)
        raise JobStarted  # as the real one, it does not return

    def _spawn(self, argv, environ, child):
        """`mjf run`'s command: checked and taken as run; ``child`` (what it measured)
        stays unmeasured, as for a command that could not be run."""
        self._check_exec(argv, environ)
        return 0

    # -- running -------------------------------------------------------------------------------

    def write_files(self, files):
        for relative, content in files.items():
            target = self.path(relative)
            if os.path.isdir(target) and not os.path.islink(target):
                _remove_tree(target)
            elif os.path.lexists(target):
                os.unlink(target)
            if content is None:
                continue
            os.makedirs(os.path.dirname(target), exist_ok=True)
            if content is DIRECTORY:
                os.mkdir(target)
            elif isinstance(content, tuple):
                self._write_special(target, content)
            else:
                with open(target, "wb") as handle:
                    handle.write(content.replace(b"@D@", os.fsencode(self.d)))

    def _write_special(self, target, content):
        """("symlink", target[, uid]): a symlink (planted by ``uid``, where we may chown);
        ("fifo",): a FIFO no one writes; ("sparse", size): a file of ``size`` bytes that
        takes no space; ("private", bytes): a root-only file (mode 0600); ("directory",
        mode[, uid]): a directory of that mode (and owner)."""
        kind = content[0]
        if kind == "symlink":
            os.symlink(self.expand(content[1]), target)
            if len(content) > 2 and os.geteuid() == 0:
                os.lchown(target, content[2], content[2])
        elif kind == "fifo":
            os.mkfifo(target, 0o644)
        elif kind == "sparse":
            with open(target, "wb") as handle:
                handle.truncate(content[1])
        elif kind == "private":
            with open(target, "wb") as handle:
                handle.write(content[1])
            os.chmod(target, 0o600)
        elif kind == "directory":
            os.mkdir(target)
            os.chmod(target, content[1])
            if len(content) > 2 and os.geteuid() == 0:
                os.chown(target, content[2], content[2])
        else:
            raise ValueError(f"unknown special file {content!r}")

    def set_environ(self, environ):
        for name in list(os.environ):
            if name.startswith(ENV_PREFIXES):
                self.monkeypatch.delenv(name)
        for name, value in environ.items():
            self.monkeypatch.setenv(name, value)

    def run(self, call, environ, outputs=None, argv0=None, stdin=None) -> Outcome:
        """Call an entry point's main with ``environ`` as the process environment (and
        the file ``stdin`` - a path in the case directory - as its standard input, where
        given: an empty one where it is no regular file)."""
        self.outputs = outputs or {}
        if stdin is not None:
            import io

            path = self.path(stdin)
            data = b""
            if os.path.isfile(path) and not os.path.islink(path):
                with open(path, "rb") as handle:
                    data = handle.read()
            self.monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
        self.execs, self.exec_files, self.syslog_lines, self.commands = [], [], [], []
        self.set_environ({name: self.expand(value) for name, value in environ.items()})
        if argv0 is not None:
            self.monkeypatch.setattr(sys, "argv", argv0)
        self.capsys.readouterr()
        # A Slurm Epilog ignores SIGTERM for the rest of its process: not this one's.
        sigterm = signal.getsignal(signal.SIGTERM)
        try:
            status = call()
        except SystemExit as exit_:
            status = exit_.code
        except JobStarted:
            status = 0  # the job's own, which the recorder does not run: it succeeds
        finally:
            signal.signal(signal.SIGTERM, sigterm)
        captured = self.capsys.readouterr()
        return Outcome(status, captured.out, captured.err, self.syslog_lines, self.execs,
                       self.exec_files, self.commands)


def _remove_tree(path):
    for top, dirs, files in os.walk(path, topdown=False):
        for name in files:
            os.unlink(os.path.join(top, name))
        for name in dirs:
            full = os.path.join(top, name)
            os.unlink(full) if os.path.islink(full) else os.rmdir(full)
    os.rmdir(path)


# -- the checks ------------------------------------------------------------------------------


def snapshot(directory: str) -> dict[str, tuple]:
    """Every entry below ``directory``: kind, mode, owner, and for files their identity
    (inode, size, modification time in ns: a write or a replacement changes one)."""
    entries = {}
    prefix = len(directory) + 1
    for top, dirs, files in os.walk(directory):
        for name in dirs + files:
            full = f"{top}/{name}"
            info = os.lstat(full)
            if stat.S_ISLNK(info.st_mode):
                entry = ("link", os.readlink(full))
            elif stat.S_ISDIR(info.st_mode):
                entry = ("dir", info.st_mode, info.st_uid, info.st_gid)
            else:
                entry = ("file", info.st_mode, info.st_uid, info.st_gid, info.st_ino,
                         info.st_size, info.st_mtime_ns)
            entries[full[prefix:]] = entry
    return entries


def changed_paths(before: dict, after: dict) -> list[str]:
    return sorted(path for path in before.keys() | after.keys()
                  if before.get(path) != after.get(path))


def job_dir_problems(jobfeatures: str, every_file: bool = True) -> list[str]:
    """What is wrong with a job's features directory as a reader sees it (with
    ``every_file`` false, only whether it is complete: files a case planted stay)."""
    if not os.path.isdir(jobfeatures):
        return [f"{jobfeatures} is not a directory"]
    names = os.listdir(jobfeatures)
    problems = key_file_problems(jobfeatures, names) if every_file else []
    for required in ("job_id", "jobstart_secs"):
        if required not in names:
            problems.append(f"{jobfeatures} has no {required}")
    if "job_id" in names:
        with open(os.path.join(jobfeatures, "job_id"), "rb") as handle:
            job_id = handle.read().decode("ascii", "replace")
        top = os.path.basename(os.path.dirname(jobfeatures))
        if spec.is_valid_job_id(job_id) and job_dir_name(job_id) != top:
            problems.append(f"{jobfeatures}: job_id {job_id!r} is not the directory's job")
    return problems


def key_file_problems(directory: str, names) -> list[str]:
    """Key files (of ``names`` in ``directory``) that are not complete valid values."""
    problems = []
    for name in names:
        full = os.path.join(directory, name)
        if name.startswith("."):
            problems.append(f"{full}: a hidden (temporary) file was left behind")
            continue
        if not (spec.is_valid_key_name(name) or name in spec.LEGACY_NAMES):
            problems.append(f"{full}: not a key name")
            continue
        if not stat.S_ISREG(os.lstat(full).st_mode):
            problems.append(f"{full}: not a regular file")
            continue
        if name not in spec.KEYS and name not in spec.LEGACY_NAMES:
            continue  # not ours to judge (`mjf check` warns about unknown files)
        with open(full, "rb") as handle:
            raw = handle.read()
        try:
            spec.parse_value(spec.typed_like(name), raw.decode("ascii"))
        except (UnicodeDecodeError, ValueError) as error:
            problems.append(f"{full}: {raw[:40]!r} is not a valid value: {error}")
    return problems


def configured_base_dir(sandbox: Sandbox) -> str:
    """The base_dir the case's config sets (the default's place in D where it sets none),
    or D/base where the config is refused (then nothing may be written)."""
    try:
        with open(sandbox.path("mjf.conf"), "rb") as handle:
            settings = config_model(handle.read())
    except OSError:
        settings = {}
    if settings is None:
        return sandbox.path("base")
    return settings.get(("mjf", "base_dir"), sandbox.path(DEFAULT_BASE_DIR))


def configured_records_dir(sandbox: Sandbox) -> str | None:
    """The records directory the case's config sets (None: it keeps no records, or it is
    refused)."""
    try:
        with open(sandbox.path("mjf.conf"), "rb") as handle:
            settings = config_model(handle.read())
    except OSError:
        settings = {}
    return (settings or {}).get(("records", "dir"))


# Where the case directory's records go, and where a records directory a case replaced
# with the site's own symlink leads.
RECORDS_DIR = "records"
RECORDS_ELSEWHERE = "records-elsewhere"


def allowed_roots(sandbox: Sandbox) -> list[str]:
    """Where a hook may write: its stores (base_dir, the job's scratch store, the user's
    private directory), HTCondor's wrapper error file, and the records directory."""
    roots = [configured_base_dir(sandbox), sandbox.path("base"), sandbox.path("scratch/.mjf"),
             sandbox.path("xdg/mjf"), sandbox.path("scratch/.job_wrapper_failure"),
             sandbox.path(RECORDS_DIR), sandbox.path(RECORDS_ELSEWHERE)]
    records = configured_records_dir(sandbox)
    return roots + ([records] if records else [])


RECORD_SUFFIXES = (".json", ".xml", ".apel")


def records_in(directory: str) -> tuple[dict[str, set[str]], list[str]]:
    """The records below a records directory (its day directories and incoming/; root's
    notes in ended/ are checked for their form, and are no records): {path
    without suffix: its suffixes}, and what is wrong there - a file of a record without
    its .json (the JSON, renamed last, commits a record), a hidden (temporary) file, a
    .json that is no JSON object, a file that is no record's."""
    import json

    records: dict[str, set[str]] = {}
    problems = []
    if not os.path.isdir(directory):
        return records, problems
    notes = os.path.join(directory, "ended")
    for top, _, files in os.walk(directory):
        for name in files:
            full = os.path.join(top, name)
            if os.path.dirname(top) == notes:
                # Root's note that it wrote this job's record (no hand-in for the job is
                # filed): an empty file of root's alone, named as the job's directory.
                info = os.lstat(full)
                if not stat.S_ISREG(info.st_mode) or info.st_size or info.st_mode & 0o077 \
                        or not set(name) <= JOB_DIR_NAME_CHARS or name.startswith("."):
                    problems.append(f"{full}: not a note of root's")
                continue
            if name.startswith("."):
                problems.append(f"{full}: a hidden (temporary) file was left behind")
                continue
            stem, suffix = os.path.splitext(name)
            if suffix not in RECORD_SUFFIXES:
                problems.append(f"{full}: not a file of a record")
                continue
            records.setdefault(os.path.join(top, stem), set()).add(suffix)
    for stem, suffixes in records.items():
        if ".json" not in suffixes:
            problems.append(f"{stem}: a partial record, {sorted(suffixes)} without its .json")
            continue
        try:
            with open(stem + ".json", "rb") as handle:
                data = json.loads(handle.read())
        except (OSError, ValueError) as error:
            problems.append(f"{stem}.json: not JSON ({error})")
            continue
        if not isinstance(data, dict) or "job_id" not in data:
            problems.append(f"{stem}.json: no record")
    return records, problems


def check_stores(sandbox: Sandbox, before: dict, after: dict) -> list[str]:
    """(c) nothing changed outside the stores; (d) no partial or invalid files in them."""
    problems = []
    roots = allowed_roots(sandbox)
    changed = changed_paths(before, after)
    for relative in changed:
        full = sandbox.path(relative)
        inside = [root for root in roots if full == root or full.startswith(root + "/")]
        if not inside:
            problems.append(f"changed outside its directory: {relative} "
                            f"{before.get(relative)} -> {after.get(relative)}")
            continue
        if relative not in after:
            continue
        parts = os.path.relpath(full, inside[0]).split("/")
        if any(part.startswith(".") for part in parts if part not in (".", "..")):
            problems.append(f"hidden entry left behind: {relative}")
        elif after[relative][0] == "file" and (
                (len(parts) == 2 and parts[0] == "machinefeatures")
                or (len(parts) == 4 and parts[0] == "jobs" and parts[2] == "jobfeatures")):
            problems += key_file_problems(os.path.dirname(full), [parts[-1]])
        elif len(parts) == 2 and parts[0] == "jobs" and after[relative][0] == "dir":
            problems += job_dir_problems(os.path.join(full, "jobfeatures"), every_file=False)
    return problems


def check_lines(outcome: Outcome, culprits, allowed=()) -> list[str]:
    """(b) clear lines: no tracebacks, no internal errors, and each line names what was
    broken (except the ``allowed`` lines, normalised: what the unbroken run of the entry
    point is documented to log)."""
    problems = []
    for line in outcome.stderr_lines:
        lowered = line.lower()
        if not line.startswith("mjf[") or (": error: " not in line and ": warning: " not in line):
            problems.append(f"not a log line: {line[:200]!r}")
        elif "internal error" in lowered or "traceback" in lowered:
            problems.append(f"a bug of ours: {line[:300]!r}")
        elif len(line) > MAX_LINE:
            problems.append(f"a line of {len(line)} characters: {line[:120]!r}...")
        elif normalise(line) not in allowed and not any(
                culprit.lower() in lowered for culprit in culprits + CONSEQUENCES):
            problems.append(f"does not name {' or '.join(culprits)}: {line[:300]!r}")
    for line in outcome.syslog_lines:
        if "\n" in line:
            problems.append(f"a multi-line syslog message: {line[:200]!r}")
    return problems


def normalise(line: str) -> str:
    """A log line without what differs between runs (pid, the case directory)."""
    text = line.split("]: ", 1)[-1]
    marker = "/corpus-"
    while marker in text:
        start = text.index(marker)
        end = text.find("/", start + len(marker))
        text = text[:start] + "/D" + (text[end:] if end > 0 else "")
    return text


def default_tree() -> dict[str, bytes]:
    """The fake /proc and cgroup tree of a Slurm-like job (below D/root)."""
    return {f"root/{path}": data for path, data in CGROUP_TREE.items()}

