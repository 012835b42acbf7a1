"""The per-host and per-job directories: created, written and removed safely.

Layout (docs/design.md, "The contract")::

    <base_dir>/machinefeatures/<key>
    <base_dir>/jobs/<job dir name>/jobfeatures/<key>
    <base_dir>/jobs/<job dir name>/jobstatus/<key>     (where the site offers $JOBSTATUS)

plus ``jobs/<job dir>/state/`` and ``<base_dir>/state/`` for the suite's own
bookkeeping. This module knows the layout; the safe-filesystem layer it stands on
(directories held by file descriptor, the trusted-path walk, bounded removal) is
:mod:`mjf_hooks.safefs`. How the invariants are kept:

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

import os
import stat

from . import spec
from .errors import StoreError
from .safefs import Dir, check_trusted_path, describe, owner_is_gone

MACHINE_DIR = "machinefeatures"
JOBS_DIR = "jobs"
JOB_FEATURES_DIR = "jobfeatures"
# The job's $JOBSTATUS, where a site offers it: its user's, for its pilot to fill.
JOB_STATUS_DIR = "jobstatus"
# Where records are kept and a hook of the job's user measures what the job used (the
# Slurm TaskEpilog, in the job's cgroup): that user's, read by root at the job's end.
JOB_USAGE_DIR = "usage"
USAGE_REPORT = "report"
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
# Which batch system made the job (a ``batch.NAMES`` entry, or ``standalone``):
# `mjf sync` asks that one, and only that one, whether the job is gone.
BACKEND_MARKER = "backend"
# The backend marker of a job `mjf run` made.
STANDALONE = "standalone"
_TEMP_PREFIX = ".new-"
_MAX_NAME_BYTES = 240

_SAFE_NAME_CHARS = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-+=@#,:[]"
)
# Every character a job directory name may hold (its percent-encoding's ``%`` too).
JOB_DIR_NAME_CHARS = _SAFE_NAME_CHARS | frozenset("%")


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


def job_id_of_dir_name(name: str) -> str:
    """The job id whose directory name is ``name`` (:func:`job_dir_name` undone); a name
    that function never makes (one a user gave a directory of its own) stands for itself."""
    if "%" not in name:
        return name
    head, *encoded = name.split("%")
    parts = [head]
    for part in encoded:
        if len(part) < 2 or not all(char in "0123456789ABCDEF" for char in part[:2]):
            return name
        parts += [chr(int(part[:2], 16)), part[2:]]
    decoded = "".join(parts)
    try:
        return decoded if job_dir_name(decoded) == name else name
    except StoreError:
        return name


class Store:
    """One ``base_dir``: its per-job directories, and (as ``machine``, a
    :class:`MachineArea`) the host's machine features and bookkeeping."""

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
        # (see check_trusted_path), so a hook opening the store again does not walk it again.
        self._path_trusted = False
        self.machine = MachineArea(self)

    # Paths, for exporting to jobs and for messages.
    @property
    def machine_dir(self) -> str:
        return f"{self.base_dir}/{MACHINE_DIR}"

    def job_features_dir(self, job_id: str) -> str:
        return f"{self.base_dir}/{JOBS_DIR}/{job_dir_name(job_id)}/{JOB_FEATURES_DIR}"

    def job_status_dir(self, job_id: str) -> str:
        return f"{self.base_dir}/{JOBS_DIR}/{job_dir_name(job_id)}/{JOB_STATUS_DIR}"

    # Job features.
    def create_job(self, job_id: str, values: dict[str, str], gid: int | None = None,
                   features_owner: int | None = None, pending: bool = False,
                   state: dict[str, str] | None = None, status: bool = False,
                   status_uid: int | None = None, usage: bool = False) -> str:
        """Build a job's directory completely, then make it appear at once.

        An existing directory of the same job id (a requeued job, a leftover)
        is replaced. With ``gid`` (root writing for a job's user) the
        directories and files belong to that group, so narrowed modes still
        let the job read them. With ``features_owner`` the jobfeatures (and state)
        directory belongs to the job's user, so values can be completed from
        inside the job (``pending`` marks that they are to be). ``state``: the
        suite's bookkeeping files for the job. With ``status`` an empty ``jobstatus/``
        for its pilot, belonging to ``status_uid`` (the job's user, when root writes); with
        ``usage`` an empty ``usage/`` of that user too, for its usage report.
        Returns the jobfeatures path.
        """
        name = job_dir_name(job_id)
        with self._open_top(JOBS_DIR, create=True) as jobs:
            jobs.sweep_leftovers()
            temp = jobs.make_temp_dir(_TEMP_PREFIX + name[:64], self.dir_mode, gid)
            try:
                owner = features_owner
                with jobs.open_subdir(temp) as top:
                    with top.make_dir(JOB_FEATURES_DIR, self.dir_mode, gid, owner) as features:
                        for key, content in values.items():
                            features.create(key, content, self.file_mode, gid)
                    state = {**(state or {}), **({PENDING_MARKER: ""} if pending else {})}
                    if state:
                        with top.make_dir(STATE_DIR, self.dir_mode, gid, owner) as bookkeeping:
                            for entry, content in state.items():
                                bookkeeping.create(entry, content, self.file_mode, gid)
                    if status:
                        top.make_dir(JOB_STATUS_DIR, self.dir_mode, gid, status_uid).close()
                    if usage:
                        top.make_dir(JOB_USAGE_DIR, self.dir_mode, gid, status_uid).close()
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
        with self._open_top(JOBS_DIR) as jobs, jobs.open_subdir(name) as top, \
                top.open_subdir(JOB_FEATURES_DIR) as features:
            features.sweep_leftovers()
            for key, content in values.items():
                if content is None:
                    features.unlink_file(key)
                else:
                    features.replace(key, content, self.file_mode)

    def update_every_job(self, key: str, compute, on_error=None, dry_run: bool = False) -> int:
        """Set ``key`` of every job to ``compute(own)`` (None removes it); return how many
        jobs changed (``dry_run``: would change; nothing is written). ``own`` is the value
        the job started with (its ``OWN_PREFIX`` file, parsed; None if absent or not a
        valid value - the job's user may have written it).

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
                        changed += self._update_job(jobs, name, key, compute, on_error,
                                                    dry_run)
                    except (StoreError, OSError, ValueError) as error:
                        if on_error is None:
                            raise
                        on_error(name, error if isinstance(error, StoreError)
                                 else StoreError(f"{jobs.path}/{name}: {error}"))

    def _update_job(self, jobs: Dir, name: str, key: str, compute, on_error,
                    dry_run: bool) -> int:
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
                if not dry_run:
                    features.sweep_leftovers()
                own_text = read_state(top, OWN_PREFIX + key)
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
                if dry_run:
                    return 1
                if wanted is None:
                    features.unlink_file(key)
                else:
                    features.replace(key, wanted, self.file_mode)
                return 1

    def job_dir_names(self) -> list[str]:
        """The directory names in ``jobs/``, one per job, sorted (none without jobs/)."""
        found = self.job_dirs()
        if found is None:
            return []
        with found[0]:
            return found[1]

    def job_dirs(self) -> tuple[Dir, list[str]] | None:
        """``jobs/``, opened safely, and the directory names in it, one per job, sorted
        (None without jobs/): who reads every job opens each through this one descriptor
        (``open_subdir``), not base_dir and jobs/ again for each."""
        jobs = self._open_jobs()
        if jobs is None:
            return None
        try:
            return jobs, sorted(name for name in os.listdir(jobs.fd) if not name.startswith("."))
        except BaseException:
            jobs.close()
            raise

    def root_entries(self) -> list[str]:
        """The names in ``jobs/`` of what root made there - a root hook's job directories,
        and (hidden) those being removed - unsorted; none without jobs/."""
        jobs = self._open_jobs()
        if jobs is None:
            return []
        names = []
        with jobs, os.scandir(jobs.fd) as entries:
            for entry in entries:
                try:
                    if entry.stat(follow_symlinks=False).st_uid == 0:
                        names.append(entry.name)
                except OSError:
                    continue  # gone meanwhile
        return names

    def read_job_proof(self, dir_name: str, *entries: str) -> list[str | None] | None:
        """The bookkeeping files of the job whose directory in ``jobs/`` is ``dir_name``
        as proof of its state: only what nobody but us (root) could have written. None
        where its user could have written ``state/`` (the job directory or ``state/`` is
        another user's, or group or world writable: values completed from inside the
        job); else each file's content, None for one that is absent or not ours alone."""
        try:
            with self._open_top(JOBS_DIR) as jobs, jobs.open_subdir(dir_name) as top:
                if not _ours_alone(os.fstat(top.fd)):
                    return None
                try:
                    bookkeeping = top.open_subdir(STATE_DIR)
                except FileNotFoundError:
                    return [None] * len(entries)
                with bookkeeping:
                    if not _ours_alone(os.fstat(bookkeeping.fd)):
                        return None
                    found = [bookkeeping.read_whole(entry, 4096, _ours_alone)
                             for entry in entries]
        except (FileNotFoundError, StoreError):
            return [None] * len(entries)
        return [None if read is None else read[0].decode("ascii", "replace") for read in found]

    def read_job_states(self, dir_name: str, *entries: str) -> list[str | None]:
        """A job's bookkeeping files as they are, whoever wrote them (no proof: in a
        user's private store, that user's word); each None where absent or unreadable."""
        try:
            with self._open_top(JOBS_DIR) as jobs, jobs.open_subdir(dir_name) as top:
                return read_states(top, *entries)
        except (FileNotFoundError, StoreError):
            return [None] * len(entries)

    def read_job(self, job_id: str, taken: str | None = None) -> tuple[dict[str, str], bool]:
        """A job's key values and whether completion is pending (StoreError if no job);
        ``taken``: read them where :meth:`take_job` moved the job's directory."""
        name = taken or job_dir_name(job_id)
        try:
            with self._open_top(JOBS_DIR) as jobs, \
                    jobs.open_subdir(name) as top, top.open_subdir(JOB_FEATURES_DIR) as features:
                names = os.listdir(features.fd)
                values = {key: features.read(key) for key in names if not key.startswith(".")}
                return ({key: value for key, value in values.items() if value is not None},
                        read_state(top, PENDING_MARKER) is not None)
        except FileNotFoundError:
            raise StoreError(f"{self.job_features_dir(job_id)} does not exist") from None

    def users_word(self, job_id: str, taken: str | None = None) -> str | None:
        """Why a job's values may be its user's word, not root's: its directory or its
        ``jobfeatures/`` is another uid's (a pending job's, completed from inside it; a
        user's own store) or writable by others; None where both are root's alone (or
        the job has no directory). ``taken``: as for :meth:`read_job`."""
        try:
            with self._open_top(JOBS_DIR) as jobs, \
                    jobs.open_subdir(taken or job_dir_name(job_id)) as top, \
                    top.open_subdir(JOB_FEATURES_DIR) as features:
                for what, info in (("directory", os.fstat(top.fd)),
                                   (JOB_FEATURES_DIR + "/", os.fstat(features.fd))):
                    if info.st_uid != 0:
                        return f"its {what} is uid {info.st_uid}'s"
                    if not _ours_alone(info):
                        return f"its {what} is writable by others"
        except (FileNotFoundError, StoreError):
            return None
        return None

    def write_usage_report(self, job_id: str, content: str) -> bool:
        """Replace the job's usage report (as the job's user, from inside the job); False
        where the job has no ``usage/`` (no records are kept)."""
        name = job_dir_name(job_id)
        with self._open_top(JOBS_DIR) as jobs, jobs.open_subdir(name) as top:
            try:
                reports = top.open_subdir(JOB_USAGE_DIR)
            except FileNotFoundError:
                return False
            with reports:
                reports.sweep_leftovers()
                reports.replace(USAGE_REPORT, content, self.file_mode)
        return True

    def read_usage_report(self, job_id: str, taken: str | None = None) -> str | None:
        """The job's usage report, or None (``taken``: as for :meth:`read_job`). Its user
        wrote it: a symlink or a FIFO planted there is neither followed nor waited on, and
        only the first 4 KiB are read."""
        try:
            with self._open_top(JOBS_DIR) as jobs, \
                    jobs.open_subdir(taken or job_dir_name(job_id)) as top, \
                    top.open_subdir(JOB_USAGE_DIR) as reports:
                return reports.read(USAGE_REPORT)
        except (FileNotFoundError, StoreError):
            return None

    def clear_pending(self, job_id: str) -> None:
        """The job's values are complete: drop its pending mark."""
        name = job_dir_name(job_id)
        with self._open_top(JOBS_DIR) as jobs, jobs.open_subdir(name) as top:
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

    def take_job(self, job_id: str) -> str | None:
        """The first act of ending a job: its directory renamed at once to a hidden trash
        name (readers no longer see the job; should we be killed from here on, `mjf sync`
        removes what is left). That name - for :meth:`read_job` and
        :meth:`read_usage_report`, then :meth:`remove_taken` - or None if the job has no
        directory here (nor base_dir or jobs/)."""
        jobs = self._open_jobs()
        if jobs is None:
            return None
        with jobs:
            jobs.sweep_leftovers()
            return jobs.move_out_of_sight(job_dir_name(job_id))

    def remove_taken(self, taken: str) -> bool:
        """Remove a job's directory that :meth:`take_job` moved out of sight, within
        ``REMOVAL_BUDGET_SECS``: True if it is gone, False if the rest waits for
        :meth:`empty_trash`."""
        jobs = self._open_jobs()
        if jobs is None:
            return False  # base_dir itself went away meanwhile: nothing of ours to remove
        with jobs:
            return jobs.remove(taken)

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

    def trash_names(self) -> list[str]:
        """The hidden directories in ``jobs/`` that :meth:`empty_trash` would remove now
        (their remover is gone), changing nothing."""
        jobs = self._open_jobs()
        if jobs is None:
            return []
        found = []
        with jobs:
            for name in os.listdir(jobs.fd):
                try:
                    if name.startswith(".") and owner_is_gone(name) and stat.S_ISDIR(
                            os.stat(name, dir_fd=jobs.fd, follow_symlinks=False).st_mode):
                        found.append(name)
                except FileNotFoundError:
                    continue  # removed meanwhile
        return sorted(found)

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
            return jobs.empty_trash()

    def _open_jobs(self) -> Dir | None:
        """``jobs/``, opened safely; None where there is no base_dir or jobs/ (yet). A
        jobs/ that is refused (a symlink planted there) is a StoreError."""
        try:
            base = Dir(self._open_base(create=False), self.base_dir)
        except StoreError:
            return None
        with base:
            try:
                return base.subdir(JOBS_DIR, self.dir_mode, self.owner)
            except FileNotFoundError:
                return None

    def _open_top(self, name: str, create: bool = False) -> Dir:
        """One of base_dir's own directories (machinefeatures/, jobs/, state/), checked
        to be ours or root's and writable by nobody else; with ``create`` base_dir and
        it are made if absent. FileNotFoundError if absent, StoreError if refused."""
        with Dir(self._open_base(create), self.base_dir) as base:
            return base.subdir(name, self.dir_mode, self.owner, create)

    def _open_base(self, create: bool) -> int:
        try:
            flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
            # The site's base_dir may be reached through the site's symlinks (/var/run),
            # never through one another user could have planted (in /tmp, say).
            walk = self.owner is None and not self._path_trusted
            if walk:
                check_trusted_path(self.base_dir, self.given_dir)
            if self.owner is not None:
                flags |= os.O_NOFOLLOW
            if create:
                # base_dir only: nothing outside it is ever created (its parent is the
                # site's to make).
                try:
                    os.mkdir(self.base_dir, self.dir_mode)
                except FileExistsError:
                    pass
                if walk:
                    # What it found is what exists now.
                    check_trusted_path(self.base_dir, self.given_dir)
            fd = os.open(self.base_dir, flags)
        except OSError as error:
            raise StoreError(describe(error, self.base_dir)) from None
        info = os.fstat(fd)
        if info.st_uid not in (os.geteuid(), 0, self.owner) or info.st_mode & 0o022:
            os.close(fd)
            raise StoreError(
                f"{self.base_dir} is owned by uid {info.st_uid} with mode "
                f"{stat.S_IMODE(info.st_mode):04o}: refusing a base_dir others can write"
            )
        self._path_trusted = self.owner is None
        return fd


class MachineArea:
    """The host's own part of a store: ``machinefeatures/`` (the keys every job on this
    node reads) and ``state/`` (the suite's bookkeeping for the node: drains, hook
    failures). Reached as ``store.machine``; opened through the store, as safely."""

    __slots__ = ("_store",)

    def __init__(self, store: Store) -> None:
        # Its directories are opened by the store's own safe opening (_open_top), the one
        # way into base_dir: this class is the store's part, in the store's module.
        self._store = store

    def write(self, values: dict[str, str], managed: frozenset[str]) -> list[str]:
        """Make the machine keys in ``managed`` equal ``values``; return what changed.

        Unchanged files are not rewritten; managed keys without a value are
        removed; other files (dynamic keys like shutdowntime) are left alone.
        """
        changed = []
        with self._store._open_top(MACHINE_DIR, create=True) as machine:
            machine.sweep_leftovers()
            for name, content in values.items():
                if machine.read(name) != content:
                    machine.replace(name, content, self._store.file_mode)
                    changed.append(name)
            for name in sorted(managed - values.keys()):
                if machine.unlink_file(name):
                    changed.append(name)
        return changed

    def changes(self, values: dict[str, str],
                managed: frozenset[str]) -> dict[str, str | None]:
        """What :meth:`write` would change, changing nothing: ``{name: new
        content}``, None for a key it would remove."""
        try:
            machine = self._store._open_top(MACHINE_DIR)
        except FileNotFoundError:
            return dict(values)
        with machine:
            changes: dict[str, str | None] = {
                name: content for name, content in values.items()
                if machine.read(name) != content}
            present = set(os.listdir(machine.fd))
        changes.update((name, None) for name in sorted(managed - values.keys())
                       if name in present)
        return changes

    def exists(self, log=None) -> bool:
        """Whether ``machinefeatures/`` exists here and may be trusted (not a symlink,
        nobody else's); one that is refused is logged, given a log."""
        if not os.path.lexists(self._store.base_dir):
            return False
        try:
            self._store._open_top(MACHINE_DIR).close()
        except FileNotFoundError:
            return False
        except StoreError as error:
            if log is not None:
                log.warning(f"{error}: not exported")
            return False
        return True

    def read_key(self, name: str) -> str | None:
        """A machine key's current content, or None if absent or unreadable."""
        return self._read_file(MACHINE_DIR, name)

    def set_key(self, name: str, content: str | None) -> None:
        """Replace (or with None remove) one dynamic machine key atomically."""
        self._set_file(MACHINE_DIR, name, content)

    def read_state(self, name: str) -> str | None:
        """A file of the machine's bookkeeping (``<base_dir>/state/``), or None."""
        return self._read_file(STATE_DIR, name)

    def set_state(self, name: str, content: str | None) -> None:
        """Replace (or with None remove) a file of the machine's bookkeeping atomically."""
        self._set_file(STATE_DIR, name, content)

    def open_state(self, create: bool = False) -> Dir:
        """``<base_dir>/state/``, opened safely (``create``: made if absent, base_dir
        too); FileNotFoundError if absent, StoreError if refused."""
        return self._store._open_top(STATE_DIR, create)

    def _read_file(self, top: str, name: str) -> str | None:
        try:
            with self._store._open_top(top) as directory:
                return directory.read(name)
        except (FileNotFoundError, StoreError):
            return None

    def _set_file(self, top: str, name: str, content: str | None) -> None:
        if content is None and self._read_file(top, name) is None:
            return  # nothing to remove: nothing to create either
        with self._store._open_top(top, create=True) as directory:
            directory.sweep_leftovers()
            if content is None:
                directory.unlink_file(name)
            else:
                directory.replace(name, content, self._store.file_mode)


def _ours_alone(info: os.stat_result) -> bool:
    """Whether nobody but us (or root) can have written what ``info`` describes."""
    return info.st_uid in (0, os.geteuid()) and not info.st_mode & 0o022


def read_state(top: Dir, name: str) -> str | None:
    """A bookkeeping file of a job (``state/<name>``) whose directory is open as ``top``,
    or None; neither a symlink nor a FIFO planted there is followed or waited on."""
    return read_states(top, name)[0]


def read_states(top: Dir, *names: str) -> list[str | None]:
    """Several of a job's bookkeeping files, as :func:`read_state` reads one, its
    ``state/`` opened once."""
    try:
        bookkeeping = top.open_subdir(STATE_DIR)
    except (FileNotFoundError, StoreError):
        return [None] * len(names)
    with bookkeeping:
        return [bookkeeping.read(name) for name in names]
