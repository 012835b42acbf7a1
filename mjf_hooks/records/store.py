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
:func:`~mjf_hooks.records.filing.ingest` (``mjf sync``, as root) files it as root's,
each of its Delivered sources marked with the uid that handed it in.

This module writes records, as the end hooks do; :mod:`mjf_hooks.records.reading` reads
them (`mjf records`, `mjf metrics`) and :mod:`mjf_hooks.records.filing` files hand-ins and
expires old records (`mjf sync`): an end hook loads none of their code.

How a record is kept whole:

* every file of a record is written under a hidden temporary name first (a full or
  read-only disk fails here, before anything is visible) and renamed into place, the
  JSON last: a record is listed only once all of its files are there, and a reader
  never sees half a file;
* the directory must belong to us or root and be writable by nobody else, and is
  reached without following a symlink someone else could plant (the walk of
  :func:`~mjf_hooks.safefs.check_trusted_path`); its day directories likewise;
* what a killed writer left (hidden names carrying its pid) goes with the next
  :func:`~mjf_hooks.records.filing.expire`, which also removes records older than
  ``keep_days``.
"""

from __future__ import annotations

import os
import stat
import time

from ..errors import StoreError
from ..json_text import json_text
from ..safefs import Dir, check_trusted_path, describe
from ..store import job_dir_name
from .job import Record, apel, record_json, sss_xml

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..config import Config

RECORD_SUFFIX = ".json"
FORMAT_SUFFIXES = {"sss": ".xml", "apel": ".apel"}
TEMP_PREFIX = ".new-"
INCOMING = "incoming"
INCOMING_MODE = 0o1733
# Where root notes each job whose record it wrote (_note_ended): root's alone.
ENDED = "ended"
_ENDED_MODE = 0o700
DAY_SECS = 86400
DIR_MODE = 0o755
FILE_MODE = 0o644
# The digests of days `mjf records --summary` keeps (records/reading.py): DIGESTS/<day> +
# DIGEST_SUFFIX.
DIGESTS = ".digests"
DIGEST_SUFFIX = ".marshal"
# A record is well under 4 KiB; anything much larger is not one of ours.
MAX_RECORD_BYTES = 65536
# The separator of the uid in a handed-in record's name (records/filing.py names it):
# never in a job directory name, so it tells a user's hand-in from root's own record.
HANDED_IN_MARK = "~"


def day_name(when: float) -> str:
    """The day directory of a job that ended at ``when``: its UTC date, YYYY-MM-DD."""
    return time.strftime("%Y-%m-%d", time.gmtime(when))


def day_start(name: str) -> float | None:
    """UNIX seconds at the start of a day directory's day; None if not one."""
    if len(name) != 10 or name[4] != "-" or name[7] != "-" \
            or not name.replace("-", "").isdigit() or not name.isascii():
        return None
    import calendar

    try:
        return float(calendar.timegm(time.strptime(name, "%Y-%m-%d")))
    except ValueError:
        return None


def open_records_dir(path: str, create: bool) -> Dir:
    """The records directory, checked to be ours or root's and writable by nobody else;
    with ``create`` it is made if absent (its parent is the site's to make)."""
    try:
        check_trusted_path(path)
        if create:
            try:
                os.mkdir(path, DIR_MODE)
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
    left out (said in ``log``). The job is noted as one whose record is root's
    (:func:`_note_ended`): no hand-in for it is filed.
    """
    assert config.records_dir is not None
    end = record.end_time if record.end_time is not None else time.time()
    stem = f"{int(end)}-{job_dir_name(record.job_id)}"
    files = contents(record, config.record_formats,
                     config.records_site or config.describe.get("site"),  # type: ignore[arg-type]
                     log)
    with open_records_dir(config.records_dir, create=True) as top:
        # First: from now on no job user's hand-in for this job is filed (ingest).
        _note_ended(top, job_dir_name(record.job_id), time.time())
        with top.subdir(day_name(end), DIR_MODE, None, create=True) as day:
            _write_whole(day, stem, files)
            return f"{day.path}/{stem}{RECORD_SUFFIX}"


def write_temps(directory: Dir, stem: str, files: dict[str, bytes],
                 temps: list[tuple[str, str]]) -> None:
    """Each file written under a hidden name carrying our pid (so expire() knows what a
    killed writer left), each ``(hidden name, stem + suffix)`` added to ``temps`` as it is
    made, so that the caller removes what a failure left."""
    for suffix, data in files.items():
        temp = f"{TEMP_PREFIX}{suffix[1:]}.{os.getpid()}.{os.urandom(4).hex()}"
        temps.append((temp, stem + suffix))
        _write_new(directory, temp, data)


def _write_whole(directory: Dir, stem: str, files: dict[str, bytes]) -> None:
    """``stem + suffix`` for each file, all or none, the last one renamed last."""
    temps: list[tuple[str, str]] = []
    renamed: list[str] = []
    try:
        write_temps(directory, stem, files, temps)
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
    """As a job's user: put ``record`` (its JSON) in the drop box for
    :func:`~mjf_hooks.records.filing.ingest`; the path. StoreError if there is no drop box
    (``mjf sync`` makes it) or it is not root's, or the record cannot be written (then
    nothing of it is left)."""
    assert config.records_dir is not None
    with open_records_dir(config.records_dir, create=False) as top:
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
            if info.st_uid != 0 or stat.S_IMODE(info.st_mode) != INCOMING_MODE:
                raise StoreError(f"{drop.path} is not root's drop box (mode 1733): refusing "
                                 "to hand in the record there")
            end = record.end_time if record.end_time is not None else time.time()
            # Only for whoever looks: root names the record it files from what it holds.
            stem = (f"{int(end)}-{job_dir_name(record.job_id)[:64]}.{os.getpid()}."
                    f"{os.urandom(4).hex()}")
            data = (json_text(record_json(record)) + "\n").encode()
            _write_whole(drop, stem, {RECORD_SUFFIX: data})
            return f"{drop.path}/{stem}{RECORD_SUFFIX}"


def _write_new(directory: Dir, name: str, data: bytes) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(name, flags, FILE_MODE, dir_fd=directory.fd)
    try:
        while data:
            data = data[os.write(fd, data):]
        os.fchmod(fd, FILE_MODE)  # whatever the umask
        os.fsync(fd)  # a record survives a crash of the node right after the job
    finally:
        os.close(fd)


def _note_ended(top: Dir, dir_name: str, now: float) -> None:
    """Note that root's hooks ended the job of ``dir_name`` here and wrote its record
    (``<dir>/ended/<day>/<job dir name>``, the day of ``now``), so that no job user's
    hand-in for it is ever filed (:func:`~mjf_hooks.records.filing.ingest`). Kept as long as
    records are (:func:`~mjf_hooks.records.filing.expire`). StoreError if it cannot be
    noted."""
    day = day_name(now)
    try:
        with top.subdir(ENDED, _ENDED_MODE, None, create=True) as ended, \
                ended.subdir(day, _ENDED_MODE, None, create=True) as directory:
            fd = os.open(dir_name, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                         0o600, dir_fd=directory.fd)
            os.close(fd)
    except OSError as error:
        raise StoreError(describe(error, f"{top.path}/{ENDED}/{day}/{dir_name}")) from None


def days(top: Dir):
    """(name, UNIX seconds at its start, the open directory) of each day directory,
    oldest first; what is not a day directory is passed over. The caller closes each."""
    for name in sorted(os.listdir(top.fd)):
        start = day_start(name)
        if start is None:
            continue
        try:
            yield name, start, top.open_subdir(name)
        except (FileNotFoundError, StoreError):
            continue


def end_of(name: str) -> int | None:
    """The end time a record's file name carries."""
    head = name.split("-", 1)[0]
    return int(head) if head.isdigit() and head.isascii() else None
