"""The records directory (``[records] dir``): one record per ended job, kept for a time.

Layout::

    <dir>/<YYYY-MM-DD>/<end>-<job dir name>.json   what `mjf records` reads (always)
    <dir>/<YYYY-MM-DD>/<end>-<job dir name>.xml    SSS Job Object (format = sss)
    <dir>/<YYYY-MM-DD>/<end>-<job dir name>.apel   APEL individual job message (format = apel)

The day is the job's end, in UTC; ``<end>`` its UNIX seconds, so a job that runs again
under the same id (a requeue) gets a record of its own.

Records are root's. Where a job's end runs as the job's user (HTCondor's job-exit hook,
an LSF post-exec without ``LSB_PRE_POST_EXEC_USER=root``, ``mjf run``), its record is
handed in: written to ``<dir>/incoming/`` (mode 1733, like a mail drop: anyone may
add a file, nobody but root may list or read them, and only its owner remove it), and
:func:`ingest` (``mjf sync``, as root) files it as root's, each of its Delivered sources
marked with the uid that handed it in.

How a record is kept whole:

* every file of a record is written under a hidden temporary name first (a full or
  read-only disk fails here, before anything is visible) and renamed into place, the
  JSON last: a record is listed only once all of its files are there, and a reader
  never sees half a file;
* the directory must belong to us or root and be writable by nobody else, and is
  reached without following a symlink someone else could plant (the walk of
  :func:`~mjf_hooks.safefs.check_trusted_path`); its day directories likewise;
* what a killed writer left (hidden names carrying its pid) goes with the next
  :func:`expire`, which also removes records older than ``keep_days``.
"""

from __future__ import annotations

import os
import stat
import time

from .errors import StoreError
from .records import Record, apel, json_text, record_json, sss_xml
from .safefs import Dir, check_trusted_path, describe, owner_is_gone
from .store import job_dir_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .config import Config

RECORD_SUFFIX = ".json"
_FORMAT_SUFFIXES = {"sss": ".xml", "apel": ".apel"}
_TEMP_PREFIX = ".new-"
INCOMING = "incoming"
_INCOMING_MODE = 0o1733
# The most handed-in records one `mjf sync` files (a user could hand in millions).
MAX_INGEST = 10000
_DAY_SECS = 86400
_DIR_MODE = 0o755
_FILE_MODE = 0o644


def day_name(when: float) -> str:
    """The day directory of a job that ended at ``when``: its UTC date, YYYY-MM-DD."""
    return time.strftime("%Y-%m-%d", time.gmtime(when))


def _day_start(name: str) -> float | None:
    """UNIX seconds at the start of a day directory's day; None if not one."""
    if len(name) != 10 or name[4] != "-" or name[7] != "-" \
            or not name.replace("-", "").isdigit() or not name.isascii():
        return None
    import calendar

    try:
        return float(calendar.timegm(time.strptime(name, "%Y-%m-%d")))
    except ValueError:
        return None


def _open_records_dir(path: str, create: bool) -> Dir:
    """The records directory, checked to be ours or root's and writable by nobody else;
    with ``create`` it is made if absent (its parent is the site's to make)."""
    try:
        check_trusted_path(path)
        if create:
            try:
                os.mkdir(path, _DIR_MODE)
            except FileExistsError:
                pass
            check_trusted_path(path)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as error:
        raise StoreError(describe(error, path)) from None
    info = os.fstat(fd)
    if info.st_uid not in (os.geteuid(), 0) or info.st_mode & 0o022:
        os.close(fd)
        raise StoreError(f"{path} is owned by uid {info.st_uid} with mode "
                         f"{stat.S_IMODE(info.st_mode):04o}: refusing a records directory "
                         "others can write")
    return Dir(fd, path)


def contents(record: Record, formats: tuple[str, ...], site: str | None,
             log=None) -> dict[str, bytes]:
    """The files of one record: suffix -> content, the JSON last (its rename commits).
    A format that cannot express the record (APEL needs the CPU time, which not every
    batch system gives) is left out, with a warning in ``log``."""
    files = {}
    if "sss" in formats:
        files[".xml"] = sss_xml(record).encode("utf-8")
    if "apel" in formats:
        try:
            files[".apel"] = apel([record], site or "").encode("utf-8")
        except ValueError as error:
            if log is not None:
                log.warning(f"no APEL file: {error}")
    files[RECORD_SUFFIX] = (json_text(record_json(record)) + "\n").encode()
    return files


def write(config: Config, record: Record, log=None) -> str:
    """Write ``record`` to the records directory whole, or not at all; its JSON path.

    Raises StoreError (naming the path and the reason) if it cannot be written; then
    nothing of it is left behind. A configured format that cannot express the record is
    left out (said in ``log``).
    """
    assert config.records_dir is not None
    end = record.end_time if record.end_time is not None else time.time()
    stem = f"{int(end)}-{job_dir_name(record.job_id)}"
    files = contents(record, config.record_formats,
                     config.records_site or config.describe.get("site"),  # type: ignore[arg-type]
                     log)
    with _open_records_dir(config.records_dir, create=True) as top, \
            top.subdir(day_name(end), _DIR_MODE, None, create=True) as day:
        _write_whole(day, stem, files)
        return f"{day.path}/{stem}{RECORD_SUFFIX}"


def _write_whole(directory: Dir, stem: str, files: dict[str, bytes]) -> None:
    """``stem + suffix`` for each file, all or none, the last one renamed last."""
    temps: list[tuple[str, str]] = []
    renamed: list[str] = []
    try:
        for suffix, data in files.items():
            # Hidden, carrying our pid: expire() knows what a killed writer left.
            temp = f"{_TEMP_PREFIX}{suffix[1:]}.{os.getpid()}.{os.urandom(4).hex()}"
            temps.append((temp, stem + suffix))
            _write_new(directory, temp, data)
        for temp, name in temps:
            os.rename(temp, name, src_dir_fd=directory.fd, dst_dir_fd=directory.fd)
            renamed.append(name)
    except OSError as error:
        for temp, _ in temps:
            directory._unlink_quietly(temp)
        # A rename that failed half-way: the files already in place go too (the JSON,
        # renamed last, never is: a record that was whole before stays listed).
        for name in renamed:
            directory._unlink_quietly(name)
        raise StoreError(describe(error, f"{directory.path}/{stem}{RECORD_SUFFIX}")) from None


def hand_in(config: Config, record: Record) -> str:
    """As a job's user: put ``record`` (its JSON) in the drop box for :func:`ingest`;
    the path. StoreError if there is no drop box (``mjf sync`` makes it) or it is not
    root's, or the record cannot be written (then nothing of it is left)."""
    assert config.records_dir is not None
    with _open_records_dir(config.records_dir, create=False) as top:
        # O_PATH: the drop box lets others in and add files, not read it (1733).
        try:
            fd = os.open(INCOMING, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                         dir_fd=top.fd)
        except FileNotFoundError:
            raise StoreError(f"{config.records_dir}/{INCOMING} does not exist (`mjf sync` "
                             "makes it, as root): cannot hand in the record") from None
        except OSError as error:
            raise StoreError(describe(error, f"{config.records_dir}/{INCOMING}")) from None
        with Dir(fd, f"{config.records_dir}/{INCOMING}") as drop:
            info = os.fstat(drop.fd)
            if info.st_uid != 0 or stat.S_IMODE(info.st_mode) != _INCOMING_MODE:
                raise StoreError(f"{drop.path} is not root's drop box (mode 1733): refusing "
                                 "to hand in the record there")
            end = record.end_time if record.end_time is not None else time.time()
            stem = f"{int(end)}-{job_dir_name(record.job_id)}.{os.getpid()}"
            data = (json_text(record_json(record)) + "\n").encode()
            _write_whole(drop, stem, {RECORD_SUFFIX: data})
            return f"{drop.path}/{stem}{RECORD_SUFFIX}"


def _write_new(directory: Dir, name: str, data: bytes) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(name, flags, _FILE_MODE, dir_fd=directory.fd)
    try:
        while data:
            data = data[os.write(fd, data):]
        os.fchmod(fd, _FILE_MODE)  # whatever the umask
        os.fsync(fd)  # a record survives a crash of the node right after the job
    finally:
        os.close(fd)


class Listing:
    """What :func:`read_all` found: the records, and the files it could not read."""

    __slots__ = ("records", "unreadable")

    def __init__(self) -> None:
        self.records: list[dict] = []
        self.unreadable: list[str] = []


def read_all(path: str, since: float | None = None) -> Listing:
    """Every record in the records directory at ``path`` (that ended at or after
    ``since``), as JSON dicts, oldest first. A file that is not a record is listed in
    ``unreadable``; a missing directory has no records (StoreError if it is refused)."""
    import json

    listing = Listing()
    try:
        top = _open_records_dir(path, create=False)
    except StoreError as error:
        if not os.path.lexists(path):
            return listing
        raise error from None
    with top:
        for _, start, day in _days(top):
            if since is not None and start + _DAY_SECS <= since:
                day.close()
                continue
            with day:
                names = sorted(name for name in os.listdir(day.fd)
                               if name.endswith(RECORD_SUFFIX) and not name.startswith("."))
                for name in names:
                    end = _end_of(name)
                    if since is not None and end is not None and end < since:
                        continue
                    text = _read(day, name)
                    try:
                        data = json.loads(text) if text is not None else None
                    except ValueError:
                        data = None
                    if not isinstance(data, dict) or "job_id" not in data:
                        listing.unreadable.append(f"{day.path}/{name}")
                        continue
                    listing.records.append(data)
    listing.records.sort(key=lambda data: (_number(data, "delivered", "end_time") or 0))
    return listing


# A record is well under 4 KiB; anything much larger is not one of ours.
_MAX_RECORD_BYTES = 65536


def _read(directory: Dir, name: str) -> str | None:
    data = directory.read_bytes(name, _MAX_RECORD_BYTES + 1)
    return data.decode("utf-8", "replace") if data is not None \
        and len(data) <= _MAX_RECORD_BYTES else None


def _days(top: Dir):
    """(name, UNIX seconds at its start, the open directory) of each day directory,
    oldest first; what is not a day directory is passed over. The caller closes each."""
    for name in sorted(os.listdir(top.fd)):
        start = _day_start(name)
        if start is None:
            continue
        try:
            yield name, start, top.open_subdir(name)
        except (FileNotFoundError, StoreError):
            continue


def _number(data: dict, section: str, name: str) -> float | None:
    part = data.get(section)
    value = part.get(name) if isinstance(part, dict) else None
    if isinstance(value, dict):
        value = value.get("value")
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _end_of(name: str) -> int | None:
    """The end time a record's file name carries."""
    head = name.split("-", 1)[0]
    return int(head) if head.isdigit() and head.isascii() else None


def ingest(config: Config, log) -> int:
    """As root: file the records jobs' users handed in (:func:`hand_in`) as root's, each
    Delivered source marked with the uid that handed it in; return how many. Makes the
    drop box if absent. What is not a record (or not a regular file of one link of a
    user other than root, or bigger than a record can be) is removed, with one line for
    all of them."""
    import json

    from .records import record_from_json

    assert config.records_dir is not None
    filed = 0
    refused: list[str] = []
    with _open_records_dir(config.records_dir, create=True) as top:
        try:
            os.mkdir(INCOMING, 0o700, dir_fd=top.fd)
            fd = os.open(INCOMING, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=top.fd)
            try:
                os.fchmod(fd, _INCOMING_MODE)
            finally:
                os.close(fd)
        except FileExistsError:
            pass
        with top.open_subdir(INCOMING) as drop:
            info = os.fstat(drop.fd)
            if info.st_uid != 0 or stat.S_IMODE(info.st_mode) != _INCOMING_MODE:
                raise StoreError(f"{drop.path} is not root's drop box (mode 1733): not "
                                 "taking records from it")
            for name in sorted(os.listdir(drop.fd))[:MAX_INGEST]:
                if name.startswith("."):  # still being written, or a killed writer's
                    if owner_is_gone(name):
                        drop._unlink_quietly(name)
                    continue
                handed = _handed_in(drop, name)
                try:
                    if handed is None:
                        raise ValueError(name)
                    record = record_from_json(json.loads(handed[0]))
                    job_dir_name(record.job_id)  # an id no job can have is refused here
                except (ValueError, TypeError, StoreError):
                    refused.append(name)
                    try:
                        drop.discard(name)  # a directory a user made there too
                    except (OSError, StoreError):
                        pass  # gone meanwhile, or the next run tries again
                    continue
                record.sources = {field: f"{source}; handed in by uid {handed[1]}"
                                  for field, source in record.sources.items()}
                # A full disk stops here: the record stays in the drop box for the next run.
                write(config, record, log)
                drop._unlink_quietly(name)
                filed += 1
    if refused:
        shown = ", ".join(repr(name[:80]) for name in refused[:3])
        log.warning(f"{config.records_dir}/{INCOMING}: removed {len(refused)} file(s) that "
                    f"are not records handed in by a user: {shown}"
                    + (" ..." if len(refused) > 3 else ""))
    return filed


def _handed_in(drop: Dir, name: str) -> tuple[str, int] | None:
    """(text, owner uid) of a handed-in record: a regular file of one link, of a user
    other than root, at most a record's size; None otherwise."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=drop.fd)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1 or info.st_uid == 0 \
                or info.st_size > _MAX_RECORD_BYTES or not name.endswith(RECORD_SUFFIX):
            return None
        return os.read(fd, _MAX_RECORD_BYTES + 1).decode("utf-8", "replace"), info.st_uid
    finally:
        os.close(fd)


def expire(config: Config, now: float | None = None) -> int:
    """Remove the records that ended more than ``keep_days`` ago, the day directories
    they leave empty, and what killed writers left; return how many records went."""
    if config.records_dir is None:
        return 0
    now = time.time() if now is None else now
    cutoff = now - config.records_keep_days * _DAY_SECS
    removed = 0
    try:
        top = _open_records_dir(config.records_dir, create=False)
    except StoreError:
        if not os.path.lexists(config.records_dir):
            return 0
        raise
    with top:
        for day_dir, start, day in _days(top):
            with day:
                for name in os.listdir(day.fd):
                    if name.startswith("."):
                        if owner_is_gone(name):
                            day._unlink_quietly(name)
                        continue
                    end = _end_of(name)
                    if start < cutoff and end is not None and end < cutoff:
                        removed += name.endswith(RECORD_SUFFIX)
                        day._unlink_quietly(name)
                empty = not os.listdir(day.fd)
            if empty and start + _DAY_SECS <= now:
                try:
                    os.rmdir(day_dir, dir_fd=top.fd)
                except OSError:
                    pass  # a record arrived meanwhile
    return removed
