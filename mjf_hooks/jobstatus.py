"""``$JOBSTATUS``: what a multi-job pilot tells the site (draft 0.99, "Pilot status").

The standard library only, and nothing else of mjf-hooks: a pilot may import this
module from the installed suite or carry this one file. The pilot writes::

    from mjf_hooks import jobstatus
    jobstatus.update({"used_CPU": 6, "last_job_start": 1795000000,
                      "last_exp_job_end": 1795030000})

(or, from a shell, ``mjf status set used_CPU=6 last_job_start=1795000000``), and the
site reads every job's set with :func:`read_at` (``mjf status``).

**The lock.** The draft asks readers and writers to lock ``used_CPU`` before any of
these files is read or written. It is a POSIX record lock (``fcntl``) on the file
``used_CPU``: any user may take one on a file it can open (the pilot on its own files,
root on the pilot's), and NFS carries it through its lock manager. Writers lock it
exclusively, readers shared. Under the lock a writer replaces every other key it
changes by rename, and ``used_CPU`` itself last: that rename commits the set. A process
that locked the ``used_CPU`` a writer has just replaced finds, once it holds the lock,
that the name holds another file, and locks that one instead. So whoever holds the lock
sees every key as one writer left the set, never half of an update. POSIX locks belong
to a process, not a thread: this module also serialises its own threads.
"""

from __future__ import annotations

import errno
import os
import stat
import time

# The keys (draft 0.99, 3.1 to 3.9), in its order, and what each holds.
CORES, TIME, CPU_SECONDS, BOOLEAN, INTEGER = "cores", "time", "cpu_seconds", "boolean", "integer"
KEYS = {
    "used_CPU": CORES,
    "last_job_start": TIME,
    "first_exp_job_end": TIME,
    "last_exp_job_end": TIME,
    "last_max_job_end": TIME,
    "add_uncom_time": CPU_SECONDS,
    "add_final_exp_waste": CPU_SECONDS,
    "can_postpone_last_job": BOOLEAN,
    "priority_factor": INTEGER,
}
# The file every reader and writer locks, and whose replacement commits a set.
LOCK_KEY = "used_CPU"
_KIND_TEXT = {
    CORES: "a number of cores (0 or more)",
    TIME: "a UNIX time in seconds (2000 to 2100)",
    CPU_SECONDS: "CPU seconds (0 or more)",
    BOOLEAN: "True or False",
    INTEGER: "an integer",
}
# What a UNIX time in seconds may be (the suite's spec module says the same; this
# module imports nothing of the suite): milliseconds or a duration are refused.
EARLIEST_TIME, LATEST_TIME = 946684800, 4102444800
# The longest value file read: a 64-bit integer has 20 characters. A longer file (the
# job's user may write anything) is refused unread.
MAX_VALUE_BYTES = 40
_MAX_DIGITS = 18  # beyond a plausible value, below anything slow to convert

DEFAULT_WRITE_TIMEOUT_SECS = 10.0
DEFAULT_READ_TIMEOUT_SECS = 2.0

_OPEN_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class StatusError(Exception):
    """A value that is not one, a lock not had in time, a directory that cannot be used."""


class InvalidValue(StatusError):
    """A key or value that is not one, or a set that does not hold together."""


class LockTimeout(StatusError):
    """``used_CPU`` stayed locked (or kept being replaced) for the whole timeout."""


def parse(key: str, text: str) -> int | bool:
    """A key's file content -> its value (StatusError naming what is wrong). One trailing
    newline is allowed (``echo 6 > used_CPU``); nothing else around the value."""
    kind = KEYS.get(key)
    if kind is None:
        raise InvalidValue(f"{key!r} is not a $JOBSTATUS key ({', '.join(KEYS)})")
    value = text[:-1] if text.endswith("\n") else text
    if kind == BOOLEAN:
        if value in ("True", "False"):
            return value == "True"
    else:
        digits = value[1:] if kind == INTEGER and value.startswith("-") else value
        if digits and len(digits) <= _MAX_DIGITS and digits.isascii() and digits.isdigit():
            number = int(value)
            if kind != TIME or EARLIEST_TIME <= number <= LATEST_TIME:
                return number
    raise InvalidValue(f"{key}: {value[:MAX_VALUE_BYTES]!r} is not {_KIND_TEXT[kind]}")


def format_value(key: str, value: object) -> str:
    """A value given by a pilot (a Python value, or text as a shell gives it) -> the
    file's content; StatusError if it is not one of the key's."""
    kind = KEYS.get(key)
    if kind is None:
        raise InvalidValue(f"{key!r} is not a $JOBSTATUS key ({', '.join(KEYS)})")
    if isinstance(value, str):
        return _canonical(key, parse(key, value))
    if (kind == BOOLEAN) != isinstance(value, bool) or not isinstance(value, int):
        raise InvalidValue(f"{key}: {value!r} is not {_KIND_TEXT[kind]}")
    return _canonical(key, parse(key, str(value) if kind != BOOLEAN else repr(value)))


def _canonical(key: str, value: int | bool) -> str:
    return repr(value) if KEYS[key] == BOOLEAN else str(value)


def set_problems(values: dict[str, int | bool], allocated_cpu: int | None) -> list[str]:
    """What is inconsistent in a whole set of values: ``used_CPU`` above the job's
    ``allocated_cpu``, expected ends out of order."""
    problems = []
    used = values.get("used_CPU")
    if used is not None and allocated_cpu is not None and used > allocated_cpu:
        problems.append(f"used_CPU {used} is more than the job's allocated_cpu {allocated_cpu}")
    for earlier, later in (("first_exp_job_end", "last_exp_job_end"),
                           ("last_exp_job_end", "last_max_job_end")):
        if earlier in values and later in values and values[earlier] > values[later]:
            problems.append(f"{earlier} {values[earlier]} is after {later} {values[later]}")
    return problems


class Status:
    """One job's status as read under the lock: ``values`` (parsed), ``raw`` (the text
    of every key file found), ``problems`` (key -> why its value was not taken)."""

    __slots__ = ("problems", "raw", "values")

    def __init__(self) -> None:
        self.values: dict[str, int | bool] = {}
        self.raw: dict[str, str] = {}
        self.problems: dict[str, str] = {}

    @property
    def reported(self) -> bool:
        """Whether the pilot has reported anything."""
        return bool(self.raw or self.problems)


def directory_from_environ(environ: dict[str, str] | None = None) -> str:
    environ = os.environ if environ is None else environ
    directory = environ.get("JOBSTATUS", "")
    if not directory.startswith("/"):
        raise StatusError("JOBSTATUS is not set to a directory: the site does not offer "
                          "$JOBSTATUS to this job" if not directory else
                          f"JOBSTATUS={directory[:80]!r} is not a directory path")
    return directory


def allocated_cpu_from_environ(environ: dict[str, str] | None = None) -> int | None:
    """The job's ``$JOBFEATURES/allocated_cpu`` (a local directory or a URL); None where
    it cannot be read."""
    environ = os.environ if environ is None else environ
    location = environ.get("JOBFEATURES", "").rstrip("/")
    try:
        if location.startswith("/"):
            with open(location + "/allocated_cpu", "rb") as file:
                text = file.read(MAX_VALUE_BYTES).decode("ascii")
        elif location.startswith(("http://", "https://")):
            from urllib.request import urlopen  # only where features are served

            # The scheme is checked above: http(s) only.
            with urlopen(location + "/allocated_cpu", timeout=5) as response:  # noqa: S310
                text = response.read(MAX_VALUE_BYTES).decode("ascii")
        else:
            return None
    except (OSError, ValueError):
        return None
    text = text.strip()
    return int(text) if text.isascii() and text.isdigit() else None


# POSIX locks are the process's: its threads are kept apart by this one.
try:
    from _thread import allocate_lock
except ImportError:  # pragma: no cover - every CPython has it
    from threading import Lock as allocate_lock
_THREADS = allocate_lock()


def update(values: dict[str, object], directory: str | None = None,
           allocated_cpu: int | None = None,
           timeout: float = DEFAULT_WRITE_TIMEOUT_SECS) -> None:
    """Set several keys as one consistent set, under the lock; each file is replaced
    atomically and a value of None removes its key.

    ``directory``: default ``$JOBSTATUS``. ``allocated_cpu``: the bound of ``used_CPU``,
    default the job's ``$JOBFEATURES/allocated_cpu``. The first update must set
    ``used_CPU`` (the file every reader locks). StatusError names what is wrong, and
    then nothing was written.
    """
    wanted = {key: None if value is None else format_value(key, value)
              for key, value in values.items()}
    if wanted.get(LOCK_KEY, "") is None:
        raise InvalidValue("used_CPU cannot be removed: it is the file every reader locks")
    directory = directory or directory_from_environ()
    if allocated_cpu is None:
        allocated_cpu = allocated_cpu_from_environ()
    with _THREADS:
        dir_fd = _open_directory(directory)
        try:
            lock_fd = _lock(dir_fd, directory, exclusive=True, timeout=timeout)
            try:
                current = _read_set(dir_fd, directory, lock_fd, owner=None)
                merged = {key: value for key, value in current.values.items()
                          if key not in wanted}
                merged.update({key: parse(key, text) for key, text in wanted.items()
                               if text is not None})
                if LOCK_KEY not in merged:
                    raise InvalidValue("used_CPU must be set with the first update: it is the "
                                      "file every reader locks")
                problems = set_problems(merged, allocated_cpu)
                if problems:
                    raise InvalidValue("; ".join(problems))
                _commit(dir_fd, directory, wanted)
            except BaseException:
                # An empty used_CPU is the one _lock made to lock (a committed one never
                # is): a failed first update leaves none, as it found none. Whoever waits
                # on it finds the name gone once it has the lock.
                try:
                    held, named = os.fstat(lock_fd), os.stat(LOCK_KEY, dir_fd=dir_fd,
                                                             follow_symlinks=False)
                    if held.st_size == 0 and (held.st_dev, held.st_ino) == (named.st_dev,
                                                                            named.st_ino):
                        os.unlink(LOCK_KEY, dir_fd=dir_fd)
                except OSError:
                    pass
                raise
            finally:
                os.close(lock_fd)
        finally:
            os.close(dir_fd)


def read(directory: str | None = None, timeout: float = DEFAULT_READ_TIMEOUT_SECS,
         allocated_cpu: int | None = None) -> Status:
    """The set as it stands, read under the lock (a pilot reading its own)."""
    directory = directory or directory_from_environ()
    with _THREADS:
        dir_fd = _open_directory(directory)
        try:
            return read_at(dir_fd, directory, timeout, owner=None,
                           allocated_cpu=allocated_cpu)
        finally:
            os.close(dir_fd)


def read_at(dir_fd: int, label: str, timeout: float, owner: int | None,
            allocated_cpu: int | None = None) -> Status:
    """The set in the directory open as ``dir_fd`` (``label``: its path, for messages),
    under a shared lock waited for at most ``timeout`` seconds.

    Safe on what another user wrote (root reading a pilot's directory): no file is
    followed through a symlink or waited on (a FIFO), each must be a regular file of
    ``owner`` (if given) and is read to at most ``MAX_VALUE_BYTES``. Only the keys' names
    are opened, the directory is never listed. A file that fails is a problem of its key;
    StatusError only for the lock (held too long, or ``used_CPU`` not a file one can lock).
    """
    deadline = time.monotonic() + timeout
    try:
        lock_fd = _lock(dir_fd, label, exclusive=False, timeout=timeout, owner=owner)
    except FileNotFoundError:  # nothing committed: what is there was written unlocked
        lock_fd = None
        status = _read_set(dir_fd, label, None, owner)
        if status.reported and _exists(dir_fd, LOCK_KEY):
            # ... unless a first update began meanwhile: it made used_CPU to lock, and
            # what was read may be half of it. Read it under its lock after all (once).
            try:
                lock_fd = _lock(dir_fd, label, exclusive=False, owner=owner,
                                timeout=max(deadline - time.monotonic(), 0.0))
            except FileNotFoundError:  # that update failed: it left no used_CPU
                status = _read_set(dir_fd, label, None, owner)
    while lock_fd is not None:
        try:
            status = _read_set(dir_fd, label, lock_fd, owner)
            # No link left: used_CPU was replaced while the set was read, by a writer
            # that did not wait for the lock (a pilot's own code may not), so the set may
            # be half of two. Read the new one, as _lock does one replaced while waited
            # on, until the timeout.
            replaced = os.fstat(lock_fd).st_nlink == 0
        finally:
            os.close(lock_fd)
        if not replaced:
            break
        if time.monotonic() >= deadline:
            raise LockTimeout(f"{label}/{LOCK_KEY} kept being replaced for {timeout:g} s")
        try:
            lock_fd = _lock(dir_fd, label, exclusive=False, owner=owner,
                            timeout=max(deadline - time.monotonic(), 0.0))
        except FileNotFoundError:  # removed, not replaced: what is left, unlocked
            lock_fd = None
            status = _read_set(dir_fd, label, None, owner)
    if status.reported and LOCK_KEY not in status.raw:
        status.problems.setdefault(LOCK_KEY, "absent: the other keys were written "
                                             "without the lock")
    bound_used(status, allocated_cpu)
    return status


def bound_used(status: Status, allocated_cpu: int | None) -> None:
    """Refuse ``used_CPU`` above ``allocated_cpu`` (None: no bound): a problem, not a
    value. Apart from :func:`read_at` for a reader that learns the bound after reading."""
    used = status.values.get(LOCK_KEY)
    if used is not None and allocated_cpu is not None and used > allocated_cpu:
        del status.values[LOCK_KEY]
        status.problems[LOCK_KEY] = set_problems({LOCK_KEY: used}, allocated_cpu)[0]


def bound_by_job(status: Status, allocated_cpu: int | None, jobstart_secs: int | None,
                 planned_end: int | None, now: int) -> None:
    """Refuse, as :func:`bound_used` does, what no pilot of this job can have done: a
    payload started before the job (``last_job_start`` before ``jobstart_secs``), more
    uncommitted CPU time than its cores had since it started (``add_uncom_time``), more
    waste at its end than its cores have until its wall limit (``add_final_exp_waste``,
    ``planned_end`` = jobstart_secs + wall_limit_secs). What is None bounds nothing."""
    bound_used(status, allocated_cpu)
    values = status.values
    started = values.get("last_job_start")
    if started is not None and jobstart_secs is not None and started < jobstart_secs:
        del values["last_job_start"]
        status.problems["last_job_start"] = (f"last_job_start {started} is before the "
                                             f"job's jobstart_secs {jobstart_secs}")
    if allocated_cpu is None:
        return
    for key, since, until, span in (
            ("add_uncom_time", jobstart_secs, now, "since jobstart_secs"),
            ("add_final_exp_waste", now, planned_end, "to its wall limit")):
        value = values.get(key)
        if value is None or since is None or until is None:
            continue
        # Times are whole seconds: a second more, so that a report made in the job's
        # first second (a pilot's first payload) is not refused for rounding.
        seconds = max(until - since, 0) + 1
        if value > allocated_cpu * seconds:
            del values[key]
            status.problems[key] = (f"{key} {value} is more than the job's {allocated_cpu} "
                                    f"allocated_cpu give in its {seconds} s {span} "
                                    f"({allocated_cpu * seconds})")


def _exists(dir_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return False
    return True


def _read_set(dir_fd: int, label: str, lock_fd: int | None, owner: int | None) -> Status:
    status = Status()
    for key in KEYS:
        try:
            # used_CPU is read through the descriptor that holds the lock: closing
            # another descriptor of that file would release the lock.
            text = _read_value(lock_fd if key == LOCK_KEY and lock_fd is not None
                               else None, dir_fd, key, owner)
        except FileNotFoundError:
            continue
        except (OSError, StatusError) as error:
            status.problems[key] = _why(error)
            continue
        if key == LOCK_KEY and not text:
            continue  # the file a first update made to lock: no set committed yet
        status.raw[key] = text
        try:
            status.values[key] = parse(key, text)
        except StatusError as error:
            status.problems[key] = str(error)
    return status


def _read_value(fd: int | None, dir_fd: int, name: str, owner: int | None) -> str:
    opened = fd is None
    if opened:
        fd = os.open(name, os.O_RDONLY | _OPEN_FLAGS, dir_fd=dir_fd)
    try:
        _check_file(os.fstat(fd), name, owner)
        data = os.pread(fd, MAX_VALUE_BYTES + 1, 0)
    finally:
        if opened:
            os.close(fd)
    if len(data) > MAX_VALUE_BYTES:
        raise StatusError(f"longer than {MAX_VALUE_BYTES} bytes: not read")
    try:
        return data.decode("ascii")
    except UnicodeDecodeError:
        raise StatusError("not ASCII text") from None


def _check_file(info: os.stat_result, name: str, owner: int | None) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise StatusError(f"{name} is not a regular file (mode {stat.filemode(info.st_mode)})")
    if owner is not None and info.st_uid != owner:
        raise StatusError(f"{name} belongs to uid {info.st_uid}, not the job's user {owner}")
    if info.st_nlink != 1:
        raise StatusError(f"{name} has {info.st_nlink} links: a file from elsewhere")


def _why(error: BaseException) -> str:
    if isinstance(error, OSError):
        if error.errno == errno.ELOOP:
            return "a symlink: not followed"
        return error.strerror or str(error)
    return str(error)


def _open_directory(directory: str) -> int:
    try:
        return os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as error:
        raise StatusError(f"{directory}: {error.strerror or error}") from None


def _lock(dir_fd: int, label: str, exclusive: bool, timeout: float,
          owner: int | None = None) -> int:
    """Open ``used_CPU`` (a writer creates it if absent) and lock it; the descriptor.

    FileNotFoundError for a reader where there is none; StatusError when it is not a
    file one may lock, or the lock is not had within ``timeout`` seconds.
    """
    import fcntl  # not at import time: what only parses values needs none of this

    deadline = time.monotonic() + timeout
    flags = (os.O_RDWR | os.O_CREAT) if exclusive else os.O_RDONLY
    operation = (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB
    delay = 0.001
    while True:
        try:
            fd = os.open(LOCK_KEY, flags | _OPEN_FLAGS, 0o644, dir_fd=dir_fd)
        except FileNotFoundError:
            raise
        except OSError as error:
            raise StatusError(f"{label}/{LOCK_KEY}: {_why(error)}") from None
        try:
            info = os.fstat(fd)
            # No link left: a writer's commit replaced it since it was opened (a file
            # from elsewhere has more than one). Open the new one.
            if info.st_nlink:
                try:
                    _check_file(info, LOCK_KEY, owner)
                except StatusError as error:
                    raise StatusError(f"{label}/{error}") from None
                while True:
                    try:
                        fcntl.lockf(fd, operation)
                        break
                    except OSError as error:
                        if error.errno not in (errno.EACCES, errno.EAGAIN):
                            raise StatusError(f"{label}/{LOCK_KEY}: cannot be locked: "
                                              f"{_why(error)}") from None
                    if time.monotonic() >= deadline:
                        raise LockTimeout(f"{label}/{LOCK_KEY} stayed locked by another "
                                          f"process for {timeout:g} s")
                    time.sleep(delay)
                    delay = min(delay * 2, 0.05)
                try:
                    named = os.stat(LOCK_KEY, dir_fd=dir_fd, follow_symlinks=False)
                except FileNotFoundError:
                    named = None
                if named is not None and (named.st_dev, named.st_ino) == (info.st_dev,
                                                                          info.st_ino):
                    return fd
        except BaseException:
            os.close(fd)
            raise
        # A writer committed a new used_CPU while we waited: lock that one.
        os.close(fd)
        if time.monotonic() >= deadline:
            raise LockTimeout(f"{label}/{LOCK_KEY} kept being replaced for {timeout:g} s")


def _commit(dir_fd: int, label: str, wanted: dict[str, str | None]) -> None:
    """Write every new value to a temporary file first (a full disk fails here, before
    anything changed), then rename each into place, ``used_CPU`` last: its rename
    commits the set (see the module's text); removals come before it."""
    temps: dict[str, str] = {}
    try:
        try:
            for key, content in wanted.items():
                if content is not None:
                    temps[key] = _write_temp(dir_fd, key, content)
        except OSError as error:
            raise StatusError(f"{label}: {_why(error)}; nothing was changed") from None
        try:
            for key in sorted(wanted, key=lambda name: name == LOCK_KEY):
                if key in temps:
                    os.rename(temps.pop(key), key, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                else:
                    try:
                        os.unlink(key, dir_fd=dir_fd)
                    except FileNotFoundError:
                        pass
        except OSError as error:
            raise StatusError(f"{label}: {_why(error)}") from None
    finally:
        for temp in temps.values():
            try:
                os.unlink(temp, dir_fd=dir_fd)
            except OSError:
                pass


def _write_temp(dir_fd: int, key: str, content: str) -> str:
    temp = f".{key}.{os.getpid()}.new"
    try:
        os.unlink(temp, dir_fd=dir_fd)  # left by a writer of this pid that died
    except FileNotFoundError:
        pass
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _OPEN_FLAGS, 0o644,
                 dir_fd=dir_fd)
    try:
        os.fchmod(fd, 0o644)  # whatever the umask: the site reads it
        data = content.encode("ascii")
        if os.write(fd, data) != len(data):
            raise OSError(errno.ENOSPC, "a short write")
    except BaseException:
        os.close(fd)
        os.unlink(temp, dir_fd=dir_fd)
        raise
    os.close(fd)
    return temp
