"""The safe-filesystem layer under the store: directories held by file descriptor.

Nothing here knows the MJF layout (that is :mod:`mjf_hooks.store`); it knows how to
work below a directory that other users may reach into:

* ``Dir``: a directory held open by file descriptor; every operation is relative
  to it and opened with ``O_NOFOLLOW``, so a symlink planted anywhere cannot
  redirect a write or a removal, even if it appears while we work; files are
  written to a temporary name and renamed (a reader sees a whole value or none);
* ``check_trusted_path``: the walk from ``/`` that refuses a path another user
  could redirect;
* bounded removal: an entry is renamed out of sight at once and removed without
  following symlinks, below no mount point, with a bounded number of directories
  open, within a time budget (the rest waits under its hidden name);
* leftovers of a killed process (hidden names carrying its pid) are recognised;
* ``open_checked_dir`` and ``read_checked``: how a hook opens a file the batch system
  wrote for a job, at a path the job's environment names (Grid Engine's
  ``$SGE_JOB_SPOOL_DIR/config``, ``$PE_HOSTFILE``): walked from ``/`` one component
  at a time, never through a symlink, each directory (as root) belonging to whom the
  batch system's files belong; read only if a regular file of theirs, never waiting on
  a FIFO, never past a size bound; a refusal names the path and why, never a byte of
  what the file holds.
"""

from __future__ import annotations

import os
import stat
import time

from .errors import SiteInputError, StoreError

# Type names only: collections.abc costs a hook's start ~2 ms.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# Walking a path: a descriptor that opens nothing (no FIFO is opened, no automount is
# triggered by the last component), never a symlink's target.
_WALK_FLAGS = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
# The most a hook reads of a file the batch system wrote for a job (its spool config, its
# pe_hostfile, its usage): a job's few kilobytes, with room to spare. A larger file is
# refused unread: a job's user may have named a sparse file of a terabyte.
MAX_BATCH_FILE_BYTES = 1 << 20
# Owners for open_checked_dir and read_checked: root's alone.
ROOT_ONLY = frozenset([0])
# A directory being removed is first renamed to a hidden name beginning with this, which
# carries the remover's pid; what a hook had no time to remove waits there for `mjf sync`.
TRASH_PREFIX = ".old-"
# The most a job start or end spends removing: a job's user can fill its own directory
# with millions of entries, and Slurm drains a node whose Epilog overruns.
REMOVAL_BUDGET_SECS = 0.5
# The most one `mjf sync` spends on the trash (it runs every minute; a user may still be
# adding to a tree through a descriptor it kept open).
TRASH_BUDGET_SECS = 50.0


def check_trusted_path(path: str, given_dir: str | None = None) -> None:
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


class RefusedPath(SiteInputError):
    """A path a hook will not open or read: the message names it and says why, and never
    quotes what the file holds."""


def shown_path(path: str) -> str:
    """A path as a message shows it: one whose name a job's user chose may be a megabyte."""
    return path if len(path) <= 200 else f"{path[:200]}... ({len(path)} characters)"


def _path_parts(path: str) -> list[str]:
    """The components of an absolute, normal path (one trailing ``/`` allowed); a path
    with ``.``, ``..``, an empty component or a NUL byte is refused, not normalised."""
    if not path.startswith("/"):
        raise RefusedPath(f"{shown_path(path)} is not an absolute path")
    parts = path[1:].removesuffix("/").split("/") if path != "/" else []
    if "\0" in path or any(part in ("", ".", "..") for part in parts):
        raise RefusedPath(f"{shown_path(path)} is not a plain absolute path (it has '.', "
                          "'..', '//' or a NUL byte)")
    return parts


def open_checked_dir(path: str, owners: frozenset[int] | None = None,
                     who: str = "", any_last_owner: bool = False,
                     owners_symlinks: bool = False) -> Dir:
    """Open the directory at ``path`` the way a hook must open one its job's environment
    names: from ``/``, one component at a time, relative to the one before and never
    following a symlink (none anywhere on the way), with ``O_PATH`` (nothing is opened
    for reading: an automount is not triggered by the last component, a FIFO never
    opened). With ``owners`` (uids; ``who`` says whose they are, for the message), every
    directory on the way belongs to one of them, and none but the last is writable by
    others unless sticky (then only an entry's owner can replace it); the last belongs
    to them too unless ``any_last_owner`` (a job's own scratch directory, in such a
    parent) and is writable by no one else. ``owners_symlinks``: for a path that is not
    a job's to name (one its batch system's config gives), a symlink of the owners' on
    the way is followed - nobody else can change it (the walk starts again from ``/``
    with what it points to). Raises :class:`RefusedPath`.

    The :class:`Dir` holds an ``O_PATH`` descriptor: good for ``*at`` calls
    (:func:`read_checked`) and ``fstatvfs``, not for listing.
    """
    pending = _path_parts(path)[::-1]
    where, hops = "/", 0
    fd = os.open("/", _WALK_FLAGS | os.O_DIRECTORY)
    try:
        info = os.fstat(fd)
        while True:
            last = not pending
            if owners is not None and not (last and any_last_owner):
                if info.st_uid not in owners:
                    raise RefusedPath(f"{shown_path(where)} belongs to uid {info.st_uid}, not "
                                      f"to {who or 'uids ' + str(sorted(owners))}")
                if info.st_mode & 0o022 and (last or not info.st_mode & stat.S_ISVTX):
                    raise RefusedPath(f"{shown_path(where)} can be written by others "
                                      f"(mode {stat.S_IMODE(info.st_mode):04o})")
            if last:
                break
            part = pending.pop()
            child_where = f"{where.rstrip('/')}/{part}"
            child = os.open(part, _WALK_FLAGS, dir_fd=fd)
            try:
                child_info = os.fstat(child)
                if stat.S_ISLNK(child_info.st_mode):
                    if not (owners_symlinks and owners is not None
                            and child_info.st_uid in owners):
                        raise RefusedPath(f"{shown_path(child_where)} is a symbolic link: "
                                          "not followed")
                    hops += 1
                    if hops > 32:
                        raise RefusedPath(f"{shown_path(path)}: too many levels of symbolic "
                                          "links")
                    # Every directory in `where` is a real one: '..' in the link is its parent.
                    target = os.path.join(where, os.readlink(part, dir_fd=fd),
                                          *reversed(pending))
                    pending = [name for name in os.path.normpath(target).split("/")
                               if name][::-1]
                    os.close(fd)
                    fd, child = os.open("/", _WALK_FLAGS | os.O_DIRECTORY), -1
                    where, info = "/", os.fstat(fd)
                    continue
                if not stat.S_ISDIR(child_info.st_mode):
                    raise RefusedPath(f"{shown_path(child_where)} is not a directory")
            except BaseException:
                if child >= 0:
                    os.close(child)
                raise
            os.close(fd)
            fd, info, where = child, child_info, child_where
    except RefusedPath:
        os.close(fd)
        raise
    except (OSError, ValueError) as error:  # ValueError: a NUL byte
        os.close(fd)
        reason = getattr(error, "strerror", None) or str(error)
        raise RefusedPath(f"{shown_path(where)}: {reason}") from None
    return Dir(fd, path.rstrip("/") or "/")


def read_checked(directory: Dir, name: str, owners: frozenset[int] | None = None,
                 who: str = "", limit: int = MAX_BATCH_FILE_BYTES) -> bytes:
    """The content of the file ``name`` in ``directory`` (from :func:`open_checked_dir`):
    only a regular file (never through a symlink, never waiting on a FIFO: ``O_NOFOLLOW
    | O_NONBLOCK``), with ``owners`` only one of theirs and writable by no one else, and
    only if at most ``limit`` bytes (a larger one is refused unread). Raises
    :class:`RefusedPath`, whose message names the path and never quotes the content."""
    path = f"{directory.path.rstrip('/')}/{name}"
    if not name or "/" in name or name in (".", ".."):
        raise RefusedPath(f"{shown_path(path)}: not a file name")
    try:
        # Its type and owner before it is opened: opening a device can act on it.
        before = os.stat(name, dir_fd=directory.fd, follow_symlinks=False)
        _check_file(before, path, owners, who, limit)
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY
                     | os.O_CLOEXEC, dir_fd=directory.fd)
    except RefusedPath:
        raise
    except OSError as error:
        raise RefusedPath(describe(error, shown_path(path))) from None
    try:
        info = os.fstat(fd)
        if (info.st_ino, info.st_dev) != (before.st_ino, before.st_dev):
            raise RefusedPath(f"{shown_path(path)} was replaced while being opened: not read")
        _check_file(info, path, owners, who, limit)
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as error:
        raise RefusedPath(describe(error, shown_path(path))) from None
    finally:
        os.close(fd)
    if size > limit:
        raise RefusedPath(f"{shown_path(path)} is larger than {limit} bytes: not read")
    return b"".join(chunks)


def _check_file(info: os.stat_result, path: str, owners: frozenset[int] | None, who: str,
                limit: int) -> None:
    if stat.S_ISLNK(info.st_mode):
        raise RefusedPath(f"{shown_path(path)} is a symbolic link: not followed")
    if not stat.S_ISREG(info.st_mode):
        raise RefusedPath(f"{shown_path(path)} is not a regular file: not read")
    if owners is not None and info.st_uid not in owners:
        raise RefusedPath(f"{shown_path(path)} belongs to uid {info.st_uid}, not to "
                          f"{who or 'uids ' + str(sorted(owners))}: not read")
    if owners is not None and info.st_mode & 0o022:
        raise RefusedPath(f"{shown_path(path)} can be written by others "
                          f"(mode {stat.S_IMODE(info.st_mode):04o}): not read")
    if info.st_size > limit:
        raise RefusedPath(f"{shown_path(path)} is larger than {limit} bytes: not read")


def text_of(data: bytes) -> str:
    """File bytes as text mode would read them (ASCII, anything else replaced; CRLF and CR
    as LF), without the codec lookup that imports encodings.ascii."""
    return data.decode("ascii", "replace").replace("\r\n", "\n").replace("\r", "\n")


def read_bounded(path: str, limit: int = MAX_BATCH_FILE_BYTES) -> bytes:
    """The content of a regular file that is not a job's to name (a batch system's own
    config, as its daemon names it) or that its reader may read anyway (a hook running
    as the job's user, reading its own job's files): symlinks followed, but never waiting
    on a FIFO (``O_NONBLOCK``), never a device, never past ``limit`` bytes. Raises
    :class:`RefusedPath`, which never quotes the content."""
    try:
        _check_file(os.stat(path), path, None, "", limit)  # opening a device can act on it
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except (OSError, ValueError) as error:  # ValueError: a NUL byte
        reason = getattr(error, "strerror", None) or str(error)
        raise RefusedPath(f"{shown_path(path)}: {reason}") from None
    try:
        _check_file(os.fstat(fd), path, None, "", limit)
        data = os.read(fd, limit + 1)
        while data and len(data) <= limit:
            more = os.read(fd, limit + 1 - len(data))
            if not more:
                break
            data += more
    except OSError as error:
        raise RefusedPath(describe(error, shown_path(path))) from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise RefusedPath(f"{shown_path(path)} is larger than {limit} bytes: not read")
    return data


def read_checked_text(path: str, owners: frozenset[int] | None = None, who: str = "",
                      limit: int = MAX_BATCH_FILE_BYTES) -> str:
    """:func:`read_checked` of a file by its path, its directory opened with
    :func:`open_checked_dir` (the same ``owners``)."""
    parts = _path_parts(path)
    if not parts:
        raise RefusedPath("/ is not a file")
    with open_checked_dir("/" + "/".join(parts[:-1]), owners, who) as directory:
        return text_of(read_checked(directory, parts[-1], owners, who, limit))


def describe(error: OSError, path: str) -> str:
    reason = error.strerror or str(error)
    return f"{path}: {reason}"


class Dir:
    """A directory held open by file descriptor; all operations are relative to it."""

    __slots__ = ("fd", "path")

    def __init__(self, fd: int, path: str) -> None:
        self.fd = fd
        self.path = path

    def __enter__(self) -> Dir:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        os.close(self.fd)

    def _fail(self, error: OSError, name: str = "") -> StoreError:
        return StoreError(describe(error, f"{self.path}/{name}" if name else self.path))

    def subdir(self, name: str, dir_mode: int, owner: int | None,
               create: bool = False) -> Dir:
        """Open one of our own top-level directories, checking nobody else controls it.

        It must belong to us or to root (a job's user completing its own values
        works below root's directories) and be writable by nobody else.
        """
        if create:
            try:
                os.mkdir(name, dir_mode, dir_fd=self.fd)
            except FileExistsError:
                pass
            except OSError as error:
                raise self._fail(error, name) from None
        child = self.open_subdir(name)
        info = os.fstat(child.fd)
        if info.st_uid not in (os.geteuid(), 0, owner) or info.st_mode & 0o022:
            child.close()
            raise StoreError(
                f"{child.path} is owned by uid {info.st_uid} with mode "
                f"{stat.S_IMODE(info.st_mode):04o}: refusing to use a directory others can write"
            )
        return child

    def open_subdir(self, name: str) -> Dir:
        try:
            return Dir(os.open(name, _DIR_FLAGS, dir_fd=self.fd), f"{self.path}/{name}")
        except FileNotFoundError:
            raise
        except OSError as error:
            import errno  # only on a failure: every hook imports this module

            if error.errno in (errno.ELOOP, errno.ENOTDIR):
                raise StoreError(f"{self.path}/{name} is not a directory (a symlink or a file "
                                 "was planted there): refusing to follow it") from None
            raise self._fail(error, name) from None

    def make_dir(self, name: str, mode: int, gid: int | None, uid: int | None = None) -> Dir:
        try:
            os.mkdir(name, 0o700, dir_fd=self.fd)
        except OSError as error:
            raise self._fail(error, name) from None
        child = self.open_subdir(name)
        set_owner_and_mode(child.fd, mode, gid, uid)
        return child

    def make_temp_dir(self, prefix: str, mode: int, gid: int | None) -> str:
        name = f"{prefix}.{os.getpid()}.{os.urandom(4).hex()}"
        self.make_dir(name, mode, gid).close()
        return name

    def read(self, name: str) -> str | None:
        """A key file's content, or None if absent, unreadable or not a regular file.

        O_NONBLOCK: a FIFO a job's user planted in place of a key must not hang a drain.
        """
        data = self.read_bytes(name, 4096)
        return None if data is None else data.decode("ascii", "replace")

    def read_bytes(self, name: str, count: int) -> bytes | None:
        """Up to ``count`` bytes of a regular file, or None if absent, unreadable or not
        a regular file (never following a symlink, never waiting on a FIFO)."""
        found = self._read_regular(name, count, None)
        return None if found is None else found[0]

    def read_whole(self, name: str, limit: int, accept: Callable[[os.stat_result], bool]
                   | None = None) -> tuple[bytes, os.stat_result] | None:
        """A regular file's whole content and its status, as :meth:`read_bytes` opens it;
        None also where it is larger than ``limit`` bytes or ``accept`` (given its status,
        before anything is read) refuses it."""
        def fits(info: os.stat_result) -> bool:
            return info.st_size <= limit and (accept is None or accept(info))

        found = self._read_regular(name, limit + 1, fits)
        return None if found is None or len(found[0]) > limit else found

    def _read_regular(self, name: str, count: int,
                      accept: Callable[[os.stat_result], bool] | None
                      ) -> tuple[bytes, os.stat_result] | None:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                         dir_fd=self.fd)
        except OSError:
            return None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or (accept is not None and not accept(info)):
                return None
            return os.read(fd, count), info
        finally:
            os.close(fd)

    def create(self, name: str, content: str | bytes, mode: int,
               gid: int | None = None) -> None:
        """Write a new file that must not exist yet (inside a directory only we can see):
        ``content`` ASCII text, or bytes as they are."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            data = content if isinstance(content, bytes) else content.encode("ascii")
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
            set_owner_and_mode(fd, mode, gid)
        except OSError as error:
            os.close(fd)
            self._unlink_quietly(name)
            raise self._fail(error, name) from None
        os.close(fd)

    def replace(self, name: str, content: str | bytes, mode: int) -> None:
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
                import errno  # only on a failure: every hook imports this module

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
        return self.remove(entry)

    def remove(self, name: str) -> bool:
        """Remove an entry already out of sight (:meth:`move_out_of_sight`), for at most
        ``REMOVAL_BUDGET_SECS``: True if it is gone, False if the rest waits."""
        return _Remover(self, time.monotonic() + REMOVAL_BUDGET_SECS).remove(name)

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

    def empty_trash(self, budget_secs: float = TRASH_BUDGET_SECS) -> bool:
        """Remove every hidden directory here whose process is gone (what a removal had
        no time for, what a killed hook left), for at most ``budget_secs``; True if none
        is left."""
        deadline = time.monotonic() + budget_secs
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
        if not owner_is_gone(name):
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
                     if name.startswith(".") and owner_is_gone(name)]
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

    def __init__(self, parent: Dir, deadline: float | None) -> None:
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
                    import errno  # only on a failure: every hook imports this module

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


def owner_is_gone(name: str) -> bool:
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


def _mount_points_under(path: str) -> frozenset[str]:
    """Mount points strictly below ``path``."""
    from .probe.mounts import read_mounts  # only where a removal meets a directory

    prefix = path.rstrip("/") + "/"
    return frozenset(
        mount.mount_point for mount in read_mounts() if mount.mount_point.startswith(prefix)
    )


def set_owner_and_mode(fd: int, mode: int, gid: int | None, uid: int | None = None) -> None:
    if (gid is not None or uid is not None) and os.geteuid() == 0:
        os.fchown(fd, 0 if uid is None else uid, -1 if gid is None else gid)
    os.fchmod(fd, mode)
