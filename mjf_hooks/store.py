"""The per-host and per-job directories: created, written and removed safely.

Layout (the contract in DESIGN.md)::

    <base_dir>/machinefeatures/<key>
    <base_dir>/jobs/<job dir name>/jobfeatures/<key>

How the invariants are kept:

* every path below ``base_dir`` is reached through directory file descriptors
  opened with ``O_NOFOLLOW``, so a symlink planted anywhere below it cannot
  redirect a write or a removal, even if it appears while we work;
* a key file is written to a temporary name in its own directory and renamed
  over the key: a reader sees the old value or the new, never a partial one;
* a job directory is built completely under a hidden temporary name and
  renamed into place, and removed by first renaming it to a hidden trash name
  (constant time whatever it holds);
* removal never follows symlinks and never descends into a mount point, holds
  a bounded number of directories open however deep a job nests, and a hook
  spends at most ``REMOVAL_BUDGET_SECS`` on it: what a job's user made bigger
  waits under its trash name for ``mjf sync`` (:meth:`Store.empty_trash`);
* a hook killed mid-operation leaves only hidden entries named after its pid:
  the next hook working in that directory removes a temporary file, and
  ``mjf sync`` a directory (a job's user may have filled it);
* ``base_dir`` itself must be ours or root's, writable by nobody else, and not
  reachable through a symlink or a directory another user owns or planted.
"""

from __future__ import annotations

import errno
import os
import stat
import time

from . import spec
from .errors import StoreError
from .probe.mounts import read_mounts

MACHINE_DIR = "machinefeatures"
# A store inside a job's own scratch directory (HTCondor): <scratch>/.mjf
SCRATCH_STORE = ".mjf"
JOBS_DIR = "jobs"
JOB_FEATURES_DIR = "jobfeatures"
# Hidden names never collide with a job's directory: job dir names never start with ".".
# Beside jobfeatures/, the suite's own bookkeeping for a job; readers never see it
# (the spec allows nothing but key files in jobfeatures/).
STATE_DIR = "state"
# Values are still to be completed from inside the job.
PENDING_MARKER = "pending"
# A dynamic key's value as the job started (a drain that lowered the key restores
# it when cancelled).
OWN_PREFIX = "own_"
# The process a standalone job runs under (`mjf sync` removes the job once it is gone).
RUNNER_MARKER = "runner"
_TEMP_PREFIX = ".new-"
# A directory being removed is first renamed to a hidden name beginning with this, which
# carries the remover's pid; what a hook had no time to remove waits there for `mjf sync`.
TRASH_PREFIX = ".old-"
# The most a job start or end spends removing: a job's user can fill its own directory
# with millions of entries, and Slurm drains a node whose Epilog overruns.
REMOVAL_BUDGET_SECS = 0.5
# The most one `mjf sync` spends on the trash (it runs every minute; a user may still be
# adding to a tree through a descriptor it kept open).
TRASH_BUDGET_SECS = 50.0
_MAX_NAME_BYTES = 240

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_SAFE_NAME_CHARS = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-+=@#,:[]"
)


def job_dir_name(job_id: str) -> str:
    """The directory name of a job: the id itself where safe, percent-encoded otherwise.

    The mapping is injective, never yields ``.``/``..``, a hidden name or a
    ``/``; ids that cannot be a job id (per the spec) are refused with the reason.
    """
    if not job_id:
        raise StoreError("the job id is empty")
    if not spec.is_valid_job_id(job_id):
        raise StoreError(
            f"job id {job_id!r} is not 1 to {spec.MAX_JOB_ID_LENGTH} printable ASCII "
            "characters without spaces"
        )
    if "/" in job_id or job_id in (".", ".."):
        raise StoreError(f"job id {job_id!r} would name a path, not a directory")
    encoded = "".join(
        char if char in _SAFE_NAME_CHARS and char != "%" else f"%{ord(char):02X}"
        for char in job_id
    )
    if encoded.startswith("."):
        encoded = "%2E" + encoded[1:]
    if len(encoded) > _MAX_NAME_BYTES:
        raise StoreError(f"job id {job_id[:40]!r}... is too long for a directory name")
    return encoded


class Store:
    """One ``base_dir``: machine features and per-job directories."""

    def __init__(self, base_dir: str, dir_mode: int = 0o755, file_mode: int = 0o644,
                 owner: int | None = None, given_dir: str | None = None) -> None:
        self.base_dir = base_dir
        self.dir_mode = dir_mode
        self.file_mode = file_mode
        # A store that belongs to a job's user (an HTCondor scratch), opened by root for
        # a drain: its directories may belong to that user, and base_dir itself must
        # not be a symlink (the user controls it).
        self.owner = owner
        # A directory the batch system made for this job and named in its environment (an
        # HTCondor job's scratch, below the condor user's directories): taken as it is,
        # and the path is walked from there.
        self.given_dir = given_dir
        # The path to base_dir was found trusted once: nobody else can change it since
        # (see _check_trusted_path), so a hook opening the store again does not walk it again.
        self._path_trusted = False

    # Paths, for exporting to jobs and for messages.
    @property
    def machine_dir(self) -> str:
        return f"{self.base_dir}/{MACHINE_DIR}"

    def job_features_dir(self, job_id: str) -> str:
        return f"{self.base_dir}/{JOBS_DIR}/{job_dir_name(job_id)}/{JOB_FEATURES_DIR}"

    # Machine features.
    def write_machine(self, values: dict[str, str], managed: frozenset[str]) -> list[str]:
        """Make the machine keys in ``managed`` equal ``values``; return what changed.

        Unchanged files are not rewritten; managed keys without a value are
        removed; other files (dynamic keys like shutdowntime) are left alone.
        """
        changed = []
        with _Dir(self._open_base(create=True), self.base_dir) as base, \
                base.subdir(MACHINE_DIR, self, create=True) as machine:
            machine.sweep_leftovers()
            for name, content in values.items():
                if machine.read(name) != content:
                    machine.replace(name, content, self.file_mode)
                    changed.append(name)
            for name in sorted(managed - values.keys()):
                if machine.unlink_file(name):
                    changed.append(name)
        return changed

    def read_machine_key(self, name: str) -> str | None:
        """A machine key's current content, or None if absent or unreadable."""
        try:
            with _Dir(self._open_base(create=False), self.base_dir) as base, \
                    base.subdir(MACHINE_DIR, self) as machine:
                return machine.read(name)
        except (FileNotFoundError, StoreError):
            return None

    def set_machine_key(self, name: str, content: str | None) -> None:
        """Replace (or with None remove) one dynamic machine key atomically."""
        with _Dir(self._open_base(create=True), self.base_dir) as base, \
                base.subdir(MACHINE_DIR, self, create=True) as machine:
            machine.sweep_leftovers()
            if content is None:
                machine.unlink_file(name)
            else:
                machine.replace(name, content, self.file_mode)

    def read_machine_state(self, name: str) -> str | None:
        """A file of the machine's bookkeeping (``<base_dir>/state/``), or None."""
        try:
            with _Dir(self._open_base(create=False), self.base_dir) as base, \
                    base.subdir(STATE_DIR, self) as bookkeeping:
                return bookkeeping.read(name)
        except (FileNotFoundError, StoreError):
            return None

    def set_machine_state(self, name: str, content: str | None) -> None:
        """Replace (or with None remove) a file of the machine's bookkeeping atomically."""
        if content is None and self.read_machine_state(name) is None:
            return
        with _Dir(self._open_base(create=True), self.base_dir) as base, \
                base.subdir(STATE_DIR, self, create=True) as bookkeeping:
            bookkeeping.sweep_leftovers()
            if content is None:
                bookkeeping.unlink_file(name)
            else:
                bookkeeping.replace(name, content, self.file_mode)

    # Job features.
    def create_job(self, job_id: str, values: dict[str, str], gid: int | None = None,
                   uid: int | None = None, pending: bool = False,
                   state: dict[str, str] | None = None) -> str:
        """Build a job's directory completely, then make it appear at once.

        An existing directory of the same job id (a requeued job, a leftover)
        is replaced. With ``gid`` (root writing for a job's user) the
        directories and files belong to that group, so narrowed modes still
        let the job read them. With ``uid`` the jobfeatures (and state)
        directory belongs to the job's user, so values can be completed from
        inside the job (``pending`` marks that they are to be). ``state``: the
        suite's bookkeeping files for the job. Returns the jobfeatures path.
        """
        name = job_dir_name(job_id)
        with _Dir(self._open_base(create=True), self.base_dir) as base, \
                base.subdir(JOBS_DIR, self, create=True) as jobs:
            jobs.sweep_leftovers()
            temp = jobs.make_temp_dir(_TEMP_PREFIX + name[:64], self.dir_mode, gid)
            try:
                with jobs.open_subdir(temp) as top:
                    with top.make_dir(JOB_FEATURES_DIR, self.dir_mode, gid, uid) as features:
                        for key, content in values.items():
                            features.create(key, content, self.file_mode, gid)
                    state = {**(state or {}), **({PENDING_MARKER: ""} if pending else {})}
                    if state:
                        with top.make_dir(STATE_DIR, self.dir_mode, gid, uid) as bookkeeping:
                            for entry, content in state.items():
                                bookkeeping.create(entry, content, self.file_mode, gid)
                jobs.rename_into_place(temp, name)
            except BaseException:
                try:
                    jobs.discard(temp)
                except (OSError, StoreError):
                    pass  # the original error is the one worth reporting
                raise
        return self.job_features_dir(job_id)

    def set_job_keys(self, job_id: str, values: dict[str, str | None]) -> None:
        """Replace (or with None remove) keys of an existing job, each atomically.

        Also what a job's own user does to complete its values: the
        directories above its jobfeatures belong to root then, not to us.
        """
        name = job_dir_name(job_id)
        with _Dir(self._open_base(create=False), self.base_dir) as base, \
                base.subdir(JOBS_DIR, self) as jobs, jobs.open_subdir(name) as top, \
                top.open_subdir(JOB_FEATURES_DIR) as features:
            features.sweep_leftovers()
            for key, content in values.items():
                if content is None:
                    features.unlink_file(key)
                else:
                    features.replace(key, content, self.file_mode)

    def update_every_job(self, key: str, compute, on_error=None) -> int:
        """Set ``key`` of every job to ``compute(own)`` (None removes it); return how many
        jobs changed. ``own`` is the value the job started with (its ``OWN_PREFIX`` file,
        parsed; None if absent or not a valid value - the job's user may have written it).

        Jobs that appear while this runs are picked up too: the directory is listed
        again until a pass finds nothing new. A job whose directory cannot be updated
        (its user planted a directory where the key goes, say) is passed with the
        StoreError to ``on_error(name, error)`` and the others are still updated;
        without ``on_error`` the error is raised.
        """
        changed = 0
        seen: set[str] = set()
        jobs = self._open_jobs()
        if jobs is None:
            return 0
        with jobs:
            while True:
                names = [name for name in os.listdir(jobs.fd)
                         if not name.startswith(".") and name not in seen]
                if not names:
                    return changed
                for name in sorted(names):
                    seen.add(name)
                    try:
                        changed += self._update_job(jobs, name, key, compute, on_error)
                    except (StoreError, OSError, ValueError) as error:
                        if on_error is None:
                            raise
                        on_error(name, error if isinstance(error, StoreError)
                                 else StoreError(f"{jobs.path}/{name}: {error}"))

    def _update_job(self, jobs: _Dir, name: str, key: str, compute, on_error) -> int:
        try:
            top = jobs.open_subdir(name)
        except (FileNotFoundError, StoreError):
            return 0  # ended meanwhile, or not a directory: nothing of ours
        with top:
            try:
                features = top.open_subdir(JOB_FEATURES_DIR)
            except (FileNotFoundError, StoreError):
                return 0
            with features:
                features.sweep_leftovers()
                own_text = _read_state(top, OWN_PREFIX + key)
                own = None
                if own_text is not None:
                    try:
                        own = spec.parse_value(key, own_text)
                    except ValueError as error:
                        if on_error is not None:
                            on_error(name, StoreError(
                                f"{top.path}/{STATE_DIR}/{OWN_PREFIX}{key} {own_text[:40]!r} "
                                f"ignored: {error}"))
                wanted = compute(own)
                if wanted is not None:
                    wanted = spec.format_value(key, wanted)
                if features.read(key) == wanted:
                    return 0
                if wanted is None:
                    features.unlink_file(key)
                else:
                    features.replace(key, wanted, self.file_mode)
                return 1

    def read_job_state(self, dir_name: str, entry: str) -> str | None:
        """A bookkeeping file of the job whose directory in ``jobs/`` is ``dir_name`` (as
        listed there), or None. The job's user may own that directory: a symlink or a FIFO
        planted there is neither followed nor waited on."""
        try:
            with _Dir(self._open_base(create=False), self.base_dir) as base, \
                    base.subdir(JOBS_DIR, self) as jobs, jobs.open_subdir(dir_name) as top:
                return _read_state(top, entry)
        except (FileNotFoundError, StoreError):
            return None

    def read_job(self, job_id: str) -> tuple[dict[str, str], bool]:
        """A job's key values and whether completion is pending (StoreError if no job)."""
        name = job_dir_name(job_id)
        try:
            with _Dir(self._open_base(create=False), self.base_dir) as base, \
                    base.subdir(JOBS_DIR, self) as jobs, \
                    jobs.open_subdir(name) as top, top.open_subdir(JOB_FEATURES_DIR) as features:
                names = os.listdir(features.fd)
                values = {key: features.read(key) for key in names if not key.startswith(".")}
                return ({key: value for key, value in values.items() if value is not None},
                        _read_state(top, PENDING_MARKER) is not None)
        except FileNotFoundError:
            raise StoreError(f"{self.job_features_dir(job_id)} does not exist") from None

    def clear_pending(self, job_id: str) -> None:
        """The job's values are complete: drop its pending mark."""
        name = job_dir_name(job_id)
        with _Dir(self._open_base(create=False), self.base_dir) as base, \
                base.subdir(JOBS_DIR, self) as jobs, jobs.open_subdir(name) as top:
            try:
                bookkeeping = top.open_subdir(STATE_DIR)
            except FileNotFoundError:
                return
            with bookkeeping:
                bookkeeping.unlink_file(PENDING_MARKER)

    def remove_job(self, job_id: str) -> bool:
        """Remove a job's directory (idempotent); False if there was none.

        Bounded whatever the job's user put there: the directory goes to the trash
        at once, and what is not removed within ``REMOVAL_BUDGET_SECS`` waits there
        for :meth:`empty_trash`.
        """
        return self.remove_job_dir(job_dir_name(job_id))

    def remove_job_dir(self, dir_name: str) -> bool:
        """:meth:`remove_job` for a directory as listed in ``jobs/`` (already encoded)."""
        if not dir_name or dir_name.startswith(".") or "/" in dir_name:
            raise StoreError(f"{dir_name!r} is not a job directory name")
        jobs = self._open_jobs()
        if jobs is None:
            return False
        with jobs:
            jobs.sweep_leftovers()
            return jobs.discard(dir_name) is not None

    def empty_trash(self) -> bool:
        """Remove what waits in ``jobs/`` under hidden trash names (job directories a hook
        had no time to remove, leftovers of killed hooks), for at most
        ``TRASH_BUDGET_SECS``: for ``mjf sync``, which blocks no job. True if nothing
        is left."""
        jobs = self._open_jobs()
        if jobs is None:
            return True
        with jobs:
            jobs.sweep_leftovers()
            return jobs.empty_trash(time.monotonic() + TRASH_BUDGET_SECS)

    def _open_jobs(self) -> _Dir | None:
        """``jobs/``, opened safely; None where there is no base_dir or jobs/ (yet)."""
        try:
            base = _Dir(self._open_base(create=False), self.base_dir)
        except StoreError:
            return None
        with base:
            try:
                return base.subdir(JOBS_DIR, self)
            except FileNotFoundError:
                return None

    def _open_base(self, create: bool) -> int:
        try:
            flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
            # The site's base_dir may be reached through the site's symlinks (/var/run),
            # never through one another user could have planted (in /tmp, say).
            walk = self.owner is None and not self._path_trusted
            if walk:
                _check_trusted_path(self.base_dir, self.given_dir)
            if self.owner is not None:
                flags |= os.O_NOFOLLOW
            if create:
                os.makedirs(self.base_dir, mode=self.dir_mode, exist_ok=True)
                if walk:
                    # What it found is what exists now.
                    _check_trusted_path(self.base_dir, self.given_dir)
            fd = os.open(self.base_dir, flags)
        except OSError as error:
            raise StoreError(_describe(error, self.base_dir)) from None
        info = os.fstat(fd)
        if info.st_uid not in (os.geteuid(), 0, self.owner) or info.st_mode & 0o022:
            os.close(fd)
            raise StoreError(
                f"{self.base_dir} is owned by uid {info.st_uid} with mode "
                f"{stat.S_IMODE(info.st_mode):04o}: refusing a base_dir others can write"
            )
        self._path_trusted = self.owner is None
        return fd


def _check_trusted_path(path: str, given_dir: str | None = None) -> None:
    """Refuse a path that a user other than us or root could redirect.

    Walks it from ``/``: every component - a directory or a symlink - must belong
    to us or root (another user owning a directory on the way could replace what
    lies below it, even with mode 0755); in a directory others may write
    (``/tmp``), only with the sticky bit, so nobody else can replace our entry.
    Symlinks that pass are followed. A component that does not exist yet ends
    the walk (whoever creates it is us). Below ``given_dir`` (the batch system's
    directory for this job), only what lies below it is walked.
    """
    trusted = (0, os.geteuid())
    current = "/"
    if given_dir and path.startswith(given_dir.rstrip("/") + "/"):
        current, path = given_dir, path[len(given_dir.rstrip("/")):]
    pending = [part for part in reversed(path.split("/")) if part]
    hops = 0
    while pending:
        part = pending.pop()
        if part == ".":
            continue
        if part == "..":
            current = os.path.dirname(current)
            continue
        entry = os.path.join(current, part)
        try:
            info = os.lstat(entry)
        except FileNotFoundError:
            return
        if info.st_uid not in trusted:
            raise StoreError(
                f"{entry} belongs to uid {info.st_uid}, who could replace what lies below "
                "it: refusing a base_dir that another user could redirect"
            )
        parent = os.stat(current)
        if parent.st_mode & 0o022 and not parent.st_mode & stat.S_ISVTX:
            # Without the sticky bit anyone may replace even our own entry there.
            raise StoreError(
                f"{entry} lies in {current}, which others can write: refusing a base_dir "
                "that another user could redirect"
            )
        if stat.S_ISLNK(info.st_mode):
            hops += 1
            if hops > 32:
                raise StoreError(f"{path}: too many levels of symbolic links")
            target = os.readlink(entry)
            if target.startswith("/"):
                current = "/"
            pending.extend(part for part in reversed(target.split("/")) if part)
        else:
            current = entry


def _describe(error: OSError, path: str) -> str:
    reason = error.strerror or str(error)
    return f"{path}: {reason}"


class _Dir:
    """A directory held open by file descriptor; all operations are relative to it."""

    __slots__ = ("fd", "path")

    def __init__(self, fd: int, path: str) -> None:
        self.fd = fd
        self.path = path

    def __enter__(self) -> _Dir:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        os.close(self.fd)

    def _fail(self, error: OSError, name: str = "") -> StoreError:
        return StoreError(_describe(error, f"{self.path}/{name}" if name else self.path))

    def subdir(self, name: str, store: Store, create: bool = False) -> _Dir:
        """Open one of our own top-level directories, checking nobody else controls it.

        It must belong to us or to root (a job's user completing its own values
        works below root's directories) and be writable by nobody else.
        """
        if create:
            try:
                os.mkdir(name, store.dir_mode, dir_fd=self.fd)
            except FileExistsError:
                pass
            except OSError as error:
                raise self._fail(error, name) from None
        child = self.open_subdir(name)
        info = os.fstat(child.fd)
        if info.st_uid not in (os.geteuid(), 0, store.owner) or info.st_mode & 0o022:
            child.close()
            raise StoreError(
                f"{child.path} is owned by uid {info.st_uid} with mode "
                f"{stat.S_IMODE(info.st_mode):04o}: refusing to use a directory others can write"
            )
        return child

    def open_subdir(self, name: str) -> _Dir:
        try:
            return _Dir(os.open(name, _DIR_FLAGS, dir_fd=self.fd), f"{self.path}/{name}")
        except FileNotFoundError:
            raise
        except OSError as error:
            if error.errno in (errno.ELOOP, errno.ENOTDIR):
                raise StoreError(f"{self.path}/{name} is not a directory (a symlink or a file "
                                 "was planted there): refusing to follow it") from None
            raise self._fail(error, name) from None

    def make_dir(self, name: str, mode: int, gid: int | None, uid: int | None = None) -> _Dir:
        try:
            os.mkdir(name, 0o700, dir_fd=self.fd)
        except OSError as error:
            raise self._fail(error, name) from None
        child = self.open_subdir(name)
        _set_owner_and_mode(child.fd, mode, gid, uid)
        return child

    def make_temp_dir(self, prefix: str, mode: int, gid: int | None) -> str:
        name = f"{prefix}.{os.getpid()}.{os.urandom(4).hex()}"
        self.make_dir(name, mode, gid).close()
        return name

    def read(self, name: str) -> str | None:
        """A key file's content, or None if absent, unreadable or not a regular file.

        O_NONBLOCK: a FIFO a job's user planted in place of a key must not hang a drain.
        """
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                         dir_fd=self.fd)
        except OSError:
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            return os.read(fd, 4096).decode("ascii", "replace")
        finally:
            os.close(fd)

    def create(self, name: str, content: str, mode: int, gid: int | None = None) -> None:
        """Write a new file that must not exist yet (inside a directory only we can see)."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            data = content.encode("ascii")
        except UnicodeEncodeError:
            raise StoreError(f"{self.path}/{name}: {content[:40]!r} is not ASCII: not written"
                             ) from None
        try:
            fd = os.open(name, flags, 0o600, dir_fd=self.fd)
        except OSError as error:
            raise self._fail(error, name) from None
        try:
            while data:
                data = data[os.write(fd, data):]
            _set_owner_and_mode(fd, mode, gid)
        except OSError as error:
            os.close(fd)
            self._unlink_quietly(name)
            raise self._fail(error, name) from None
        os.close(fd)

    def replace(self, name: str, content: str, mode: int) -> None:
        """Atomically replace (or create) a file: temp file in the same dir + rename."""
        temp = f".{name}.{os.getpid()}.{os.urandom(4).hex()}"
        self.create(temp, content, mode)
        try:
            os.rename(temp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except OSError as error:
            self._unlink_quietly(temp)
            raise self._fail(error, name) from None

    def unlink_file(self, name: str) -> bool:
        try:
            info = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        if stat.S_ISDIR(info.st_mode):
            raise StoreError(f"{self.path}/{name} is a directory, not a key file")
        try:
            os.unlink(name, dir_fd=self.fd)
        except FileNotFoundError:
            return False
        except OSError as error:
            raise self._fail(error, name) from None
        return True

    def _unlink_quietly(self, name: str) -> None:
        try:
            os.unlink(name, dir_fd=self.fd)
        except OSError:
            pass

    def rename_into_place(self, temp: str, name: str) -> None:
        """Rename a finished directory to ``name``, discarding any existing entry."""
        for _ in range(3):
            try:
                os.rename(temp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
                return
            except OSError as error:
                if error.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR,
                                       errno.EISDIR):
                    raise self._fail(error, name) from None
            self.discard(name)
        raise StoreError(f"{self.path}/{name} keeps reappearing: another process is racing us")

    def discard(self, name: str) -> bool | None:
        """Rename an entry out of sight at once (a hidden trash name beside it), then
        remove it for at most ``REMOVAL_BUDGET_SECS``: True if it is gone, False if the
        rest waits under its trash name (for :meth:`Store.empty_trash`), None if there
        was no such entry."""
        entry = self.move_out_of_sight(name)
        if entry is None:
            return None
        return _Remover(self, time.monotonic() + REMOVAL_BUDGET_SECS).remove(entry)

    def move_out_of_sight(self, name: str) -> str | None:
        """Rename an entry (never following it) to a hidden trash name carrying our pid,
        in constant time whatever it holds; that name, or None if it is absent."""
        trash = f"{TRASH_PREFIX}{name.lstrip('.')[:64]}.{os.getpid()}.{os.urandom(4).hex()}"
        try:
            os.rename(name, trash, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except FileNotFoundError:
            return None
        except OSError as error:
            raise self._fail(error, name) from None
        return trash

    def empty_trash(self, deadline: float) -> bool:
        """Remove every hidden directory here whose process is gone (what a removal had
        no time for, what a killed hook left) until ``deadline``; True if none is left."""
        done = True
        for name in os.listdir(self.fd):
            if not name.startswith("."):
                continue
            try:
                if not stat.S_ISDIR(os.stat(name, dir_fd=self.fd, follow_symlinks=False).st_mode):
                    continue
            except FileNotFoundError:
                continue
            claimed = self.claim(name)  # None: its remover is still at work
            done = claimed is not None and _Remover(self, deadline).remove(claimed) and done
        return done

    def claim(self, name: str) -> str | None:
        """Take over a hidden entry whose owner (the pid in its name) is gone: renamed to
        carry our pid, so two removers never work on one tree. Its new name, or None."""
        stem, pid, _ = [*name.rsplit(".", 2), "", ""][:3]
        if pid == str(os.getpid()):
            return name  # ours already
        if not _owner_is_gone(name):
            return None
        claimed = f"{stem}.{os.getpid()}.{os.urandom(4).hex()}"
        try:
            os.rename(name, claimed, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except OSError:
            return None  # another remover got there first
        return claimed

    def sweep_leftovers(self) -> None:
        """Remove the temporary files a hook killed mid-operation left here: hidden names
        carrying a pid whose process is gone, and that belong to us (in a job's own
        directory, its user may have made any number of look-alikes). Directories - a
        job's user may have filled them - are left to :meth:`Store.empty_trash`."""
        try:
            names = [name for name in os.listdir(self.fd)
                     if name.startswith(".") and _owner_is_gone(name)]
        except OSError:
            return
        for name in names:
            try:
                info = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
                if info.st_uid == os.geteuid() and not stat.S_ISDIR(info.st_mode):
                    os.unlink(name, dir_fd=self.fd)
            except OSError:
                pass  # another process finished it


# Directories held open at once while removing a tree (a job may nest thousands).
_MAX_OPEN_DEPTH = 16


class _OutOfTime(Exception):
    """The removal's deadline passed: what is left stays under its trash name."""


class _Remover:
    """Removes a tree: never following a symlink, never below a mount point, with at
    most ``_MAX_OPEN_DEPTH`` directories open (deeper ones are moved up to the top of
    the tree and removed from there) and never past its deadline."""

    __slots__ = ("deadline", "device", "mount_points", "parent")

    def __init__(self, parent: _Dir, deadline: float | None) -> None:
        self.parent = parent
        self.deadline = deadline
        self.device = os.fstat(parent.fd).st_dev
        self.mount_points = _mount_points_under(os.path.realpath(f"/proc/self/fd/{parent.fd}"))

    def remove(self, name: str) -> bool:
        """Remove the entry ``name`` of the parent; False if the deadline came first."""
        try:
            self._remove(self.parent.fd, name, f"{self.parent.path}/{name}", 0, None, None)
        except _OutOfTime:
            return False
        return True

    def _remove(self, parent_fd: int, name: str, path: str, depth: int,
                is_dir: bool | None, top_fd: int | None) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise _OutOfTime
        if is_dir is False:  # the directory listing says so: one call, no stat
            try:
                os.unlink(name, dir_fd=parent_fd)
                return
            except FileNotFoundError:
                return
            except IsADirectoryError:
                pass  # replaced by a directory since it was listed
        try:
            info = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
        except FileNotFoundError:
            return
        if not stat.S_ISDIR(info.st_mode):
            os.unlink(name, dir_fd=parent_fd)
            return
        # A mount point on the same device (a bind mount) shows only in the mount table;
        # resolving the path costs a readlink, paid only where such mounts exist.
        if info.st_dev != self.device or (self.mount_points and (
                os.path.realpath(f"/proc/self/fd/{parent_fd}") + "/" + name
                in self.mount_points)):
            raise StoreError(f"{path} is a mount point: not removing anything below it")
        if depth >= _MAX_OPEN_DEPTH:
            # Too deep to hold open: move it up to the top of the tree, whose next pass
            # over its entries removes it.
            moved = f"deep.{os.getpid()}.{os.urandom(4).hex()}"
            try:
                os.rename(name, moved, src_dir_fd=parent_fd, dst_dir_fd=top_fd)
            except PermissionError:
                # Moving a directory rewrites its "..": one of ours locked by the job must
                # be opened up first (root needs no permission).
                if info.st_uid != os.geteuid():
                    raise
                _unlock(parent_fd, name)
                os.rename(name, moved, src_dir_fd=parent_fd, dst_dir_fd=top_fd)
            return
        fd = _open_for_removal(parent_fd, name, info)
        try:
            if (os.fstat(fd).st_ino, os.fstat(fd).st_dev) != (info.st_ino, info.st_dev):
                raise StoreError(f"{path} was swapped while being removed: stopping")
            while True:
                with os.scandir(fd) as children:
                    for child in children:
                        self._remove(fd, child.name, f"{path}/{child.name}", depth + 1,
                                     child.is_dir(follow_symlinks=False),
                                     fd if top_fd is None else top_fd)
                try:
                    os.rmdir(name, dir_fd=parent_fd)
                    return
                except OSError as error:
                    if error.errno != errno.ENOTEMPTY:
                        raise
                # Entries arrived meanwhile: deep directories moved up to the top, or a
                # file a drain that opened this directory earlier was still writing.
                if self.deadline is not None and time.monotonic() > self.deadline:
                    raise _OutOfTime from None
        finally:
            os.close(fd)


def _open_for_removal(parent_fd: int, name: str, info: os.stat_result) -> int:
    """Open a directory to empty it; one of our own that a job made unreadable (mode
    000) is opened up first. (Root needs no permission; this is for user stores.)"""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except PermissionError:
        if info.st_uid != os.geteuid():
            raise
    _unlock(parent_fd, name)
    return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)


def _unlock(parent_fd: int, name: str) -> None:
    """Give a directory of ours its owner's permissions back, without following a link."""
    fd = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                 dir_fd=parent_fd)
    try:
        os.chmod(f"/proc/self/fd/{fd}", 0o700)
    finally:
        os.close(fd)


def _owner_is_gone(name: str) -> bool:
    """Whether a hidden temporary or trash name (``.<what>.<pid>.<hex>``) belongs to a
    process that no longer exists; False for names that are not ours."""
    parts = name.rsplit(".", 2)
    if len(parts) != 3 or not parts[1].isdigit() or len(parts[2]) != 8:
        return False
    try:
        os.kill(int(parts[1]), 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):
        return False
    return False


def _read_state(top: _Dir, name: str) -> str | None:
    """A bookkeeping file of a job (``state/<name>``), or None."""
    try:
        bookkeeping = top.open_subdir(STATE_DIR)
    except (FileNotFoundError, StoreError):
        return None
    with bookkeeping:
        return bookkeeping.read(name)


def _mount_points_under(path: str) -> frozenset[str]:
    """Mount points strictly below ``path``."""
    prefix = path.rstrip("/") + "/"
    return frozenset(
        mount.mount_point for mount in read_mounts() if mount.mount_point.startswith(prefix)
    )


def _set_owner_and_mode(fd: int, mode: int, gid: int | None, uid: int | None = None) -> None:
    if (gid is not None or uid is not None) and os.geteuid() == 0:
        os.fchown(fd, 0 if uid is None else uid, -1 if gid is None else gid)
    os.fchmod(fd, mode)
