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

What a user hands in is that user's word, so filing it can never touch anyone else's:

* root names the filed record, from what it holds and the uid that owns the hand-in:
  ``<end>-<job dir name>~<uid>`` (``~`` is in no job directory name: it is
  percent-encoded), beside root's own ``<end>-<job dir name>``; a hand-in can neither
  replace nor pre-empt root's record or another user's;
* its files are linked into place (``link``: never over an existing name), so a record
  that is there stays as it is;
* a hand-in for a job that root's hooks ran here is refused: its record is root's. Root
  knows such a job by its directory in ``base_dir/jobs`` (made by a root hook: root's,
  live or in the trash of its end) and, once it has ended, by the note root leaves as it
  writes a job's record (:func:`_note_ended`: ``<dir>/ended/<YYYY-MM-DD>/<job dir
  name>``, kept as long as records are);
* a hand-in that is not a record within bounds (a number no job reaches, a wrong type,
  JSON nested too deep, anything that makes a conversion raise) is removed with one log
  line, and filing goes on with the others;
* one user's hand-ins cannot keep another's out: what is not named as a hand-in is
  removed, and each uid has its own quota of hand-ins looked at per run
  (:data:`PER_UID`), never a share of one global, sorted list.

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
from .job_record import Record, apel, record_json, sss_xml
from .json_text import json_text
from .safefs import TRASH_PREFIX as _TRASH_PREFIX
from .safefs import Dir, check_trusted_path, describe, owner_is_gone
from .store import JOB_DIR_NAME_CHARS, Store, job_dir_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .config import Config

RECORD_SUFFIX = ".json"
_FORMAT_SUFFIXES = {"sss": ".xml", "apel": ".apel"}
_TEMP_PREFIX = ".new-"
INCOMING = "incoming"
_INCOMING_MODE = 0o1733
# Where root notes each job whose record it wrote (_note_ended): root's alone.
ENDED = "ended"
_ENDED_MODE = 0o700
# The most hand-ins of one uid one `mjf sync` looks at (a user could hand in millions: they
# hold up only that user's, the rest wait for the next run).
PER_UID = 1000
# How long one `mjf sync` spends removing what is not a hand-in from the drop box (what is
# left goes in the next run; it keeps no hand-in out meanwhile).
JUNK_BUDGET_SECS = 10.0
# A hidden name in the drop box older than this is no hand-in being written (that takes
# milliseconds), whatever pid it names.
_STALE_TEMP_SECS = 3600
# The separator of the uid in a handed-in record's name: never in a job directory name.
_UID_MARK = "~"
# Of the lines about refused hand-ins, one `mjf sync` writes this many, then a count.
_REFUSED_LINES = 10
# A file name's limit (NAME_MAX).
_NAME_MAX = 255
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
    left out (said in ``log``). The job is noted as one whose record is root's
    (:func:`_note_ended`): no hand-in for it is filed.
    """
    assert config.records_dir is not None
    end = record.end_time if record.end_time is not None else time.time()
    stem = f"{int(end)}-{job_dir_name(record.job_id)}"
    files = contents(record, config.record_formats,
                     config.records_site or config.describe.get("site"),  # type: ignore[arg-type]
                     log)
    with _open_records_dir(config.records_dir, create=True) as top:
        # First: from now on no job user's hand-in for this job is filed (ingest).
        _note_ended(top, job_dir_name(record.job_id), time.time())
        with top.subdir(day_name(end), _DIR_MODE, None, create=True) as day:
            _write_whole(day, stem, files)
            return f"{day.path}/{stem}{RECORD_SUFFIX}"


def _write_temps(directory: Dir, stem: str, files: dict[str, bytes],
                 temps: list[tuple[str, str]]) -> None:
    """Each file written under a hidden name carrying our pid (so expire() knows what a
    killed writer left), each ``(hidden name, stem + suffix)`` added to ``temps`` as it is
    made, so that the caller removes what a failure left."""
    for suffix, data in files.items():
        temp = f"{_TEMP_PREFIX}{suffix[1:]}.{os.getpid()}.{os.urandom(4).hex()}"
        temps.append((temp, stem + suffix))
        _write_new(directory, temp, data)


def _write_whole(directory: Dir, stem: str, files: dict[str, bytes]) -> None:
    """``stem + suffix`` for each file, all or none, the last one renamed last."""
    temps: list[tuple[str, str]] = []
    renamed: list[str] = []
    try:
        _write_temps(directory, stem, files, temps)
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
            # Only for whoever looks: root names the record it files from what it holds.
            stem = (f"{int(end)}-{job_dir_name(record.job_id)[:64]}.{os.getpid()}."
                    f"{os.urandom(4).hex()}")
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
                for name in _record_names(day):
                    end = _end_of(name)
                    if since is not None and end is not None and end < since:
                        continue
                    data = _record_data(day, name)
                    if data is None:
                        listing.unreadable.append(f"{day.path}/{name}")
                        continue
                    listing.records.append(data)
    listing.records.sort(key=lambda data: (_number(data, "delivered", "end_time") or 0))
    return listing


# --- what `mjf records --summary` takes of each day, and its digest ---------------------
#
# A summary over 100,000 records would otherwise read and parse every one of them (about
# 40 µs a record). A record never changes once in place, and a day's directory changes
# (its inode's mtime and ctime) whenever a record comes or goes: so each day's rows are
# kept in DIGESTS/<day>.json with the directory's (inode, mtime, ctime) they were read
# under, and used while those are the same. Only the records directory's owner writes
# them (a hidden directory beside the days, checked as the days are); a digest that is
# stale, malformed or unreadable is read past, and the day's records are read instead.

DIGESTS = ".digests"
_DIGEST_FORMAT = 1
_MAX_DIGEST_BYTES = 64 << 20


def summary_rows(path: str, since: float | None = None) -> tuple[list[list], list[str]]:
    """Every record's :func:`job_record.summary_row` (that ended at or after ``since``),
    in :func:`read_all`'s order, and what is not a record, as :func:`read_all` and
    :func:`job_record.record_from_json` would name it."""
    rows: list[tuple[float, list]] = []
    files: list[str] = []
    invalid: list[tuple[float, str]] = []
    try:
        top = _open_records_dir(path, create=False)
    except StoreError as error:
        if not os.path.lexists(path):
            return [], []
        raise error from None
    with top:
        digests = _digests(top)
        try:
            for name, start, day in _days(top):
                with day:
                    if since is not None and start + _DAY_SECS <= since:
                        continue
                    for end, sort_key, kind, payload in _day_entries(day, name, digests):
                        if since is not None and end is not None and end < since:
                            continue
                        if kind == "row":
                            rows.append((sort_key, payload))
                        elif kind == "file":
                            files.append(f"{day.path}/{payload}")
                        else:
                            invalid.append((sort_key, payload))
        finally:
            if digests is not None:
                digests[0].close()
    rows.sort(key=lambda item: item[0])  # stable: read_all's order
    invalid.sort(key=lambda item: item[0])
    return [row for _, row in rows], files + [f"the record of job {label}"
                                              for _, label in invalid]


def _digests(top: Dir) -> tuple[Dir, bool] | None:
    """The digests' directory and whether this process may write there (it owns the
    records directory); None where there is none to read and none may be made."""
    writes = os.fstat(top.fd).st_uid == os.geteuid()
    try:
        return top.subdir(DIGESTS, _DIR_MODE, None, create=writes), writes
    except (FileNotFoundError, StoreError):
        return None


def _day_entries(day: Dir, name: str, digests: tuple[Dir, bool] | None) -> list:
    """(end time its name says, end time it sorts by, kind, what) of each record file of
    ``day`` in name order; kind "row" (what: its summary row), "file" (not a record: its
    name) or "invalid" (a record that fails its checks: its job, printable)."""
    info = os.fstat(day.fd)  # before reading: a change while reading makes the digest stale
    stamp = [info.st_ino, info.st_mtime_ns, info.st_ctime_ns]
    digest_name = f"{name}.json"
    if digests is not None:
        entries = _read_digest(digests[0], digest_name, stamp)
        if entries is not None:
            return entries
    entries = _read_day(day)
    if digests is not None and digests[1]:
        try:
            digests[0].replace(digest_name, json_text(
                {"format": _DIGEST_FORMAT, "day": stamp, "entries": entries}), _FILE_MODE)
        except (StoreError, OSError, ValueError, TypeError):
            pass  # a digest saves time only: the summary is right without it
    return entries


def _read_day(day: Dir) -> list:
    """A day's entries (see :func:`_day_entries`), from its records."""
    from .job_record import record_from_json, summary_row
    from .terminal import printable

    entries = []
    for name in _record_names(day):
        end = _end_of(name)
        data = _record_data(day, name)
        if data is None:
            entries.append([end, 0, "file", name])
            continue
        sort_key = _number(data, "delivered", "end_time") or 0
        try:
            entries.append([end, sort_key, "row", summary_row(record_from_json(data))])
        except (ValueError, TypeError, RecursionError):
            job = data.get("job_id")
            entries.append([end, sort_key, "invalid",
                            printable(job) if isinstance(job, str) else "?"])
    return entries


def _read_digest(digests: Dir, name: str, stamp: list) -> list | None:
    """A day's entries from its digest, if it was made under ``stamp`` and is well formed."""
    import json

    found = digests.read_whole(name, _MAX_DIGEST_BYTES)
    if found is None:
        return None
    try:
        digest = json.loads(found[0])
    except (ValueError, RecursionError):
        return None
    if not isinstance(digest, dict) or digest.get("format") != _DIGEST_FORMAT \
            or digest.get("day") != stamp or not isinstance(digest.get("entries"), list):
        return None
    entries = digest["entries"]
    return entries if all(_well_formed_entry(entry) for entry in entries) else None


_NUMBER = (int, float)
_NUMBER_OR_NONE = (int, float, type(None))
_OVERRUNS = frozenset(["wall", "memory", "cpu", "cores"])


def _well_formed_entry(entry) -> bool:
    """Whether a digest's entry is one :func:`_read_day` makes (checked for every entry of
    100,000 records: written out rather than with a loop per value)."""
    try:
        end, sort_key, kind, payload = entry
    except (TypeError, ValueError):
        return False
    if type(end) not in (int, type(None)) or type(sort_key) not in _NUMBER:
        return False
    if kind != "row":
        return kind in ("file", "invalid") and type(payload) is str
    try:
        allocated, used, memory, wall, over = payload
    except (TypeError, ValueError):
        return False
    return (type(allocated) in _NUMBER_OR_NONE and type(used) in _NUMBER_OR_NONE
            and (allocated is None) == (used is None) and type(memory) in _NUMBER_OR_NONE
            and type(wall) in _NUMBER_OR_NONE and type(over) is list
            and (not over or _OVERRUNS.issuperset(over)))


def _record_names(day: Dir) -> list[str]:
    return sorted(name for name in os.listdir(day.fd)
                  if name.endswith(RECORD_SUFFIX) and not name.startswith("."))


def _record_data(day: Dir, name: str) -> dict | None:
    """A record file's JSON object; None where it is no record (unreadable, not JSON, no
    job_id)."""
    import json  # here, not at the top: hooks write records, never read them

    text = _read(day, name)
    try:
        data = json.loads(text) if text is not None else None
    except (ValueError, RecursionError):  # RecursionError: nested too deep
        return None
    return data if isinstance(data, dict) and "job_id" in data else None


# A record is well under 4 KiB; anything much larger is not one of ours.
_MAX_RECORD_BYTES = 65536


def _read(directory: Dir, name: str) -> str | None:
    found = directory.read_whole(name, _MAX_RECORD_BYTES)
    return None if found is None else found[0].decode("utf-8", "replace")


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
    drop box if absent.

    Each hand-in is filed under a name root chooses (its end, its job, the uid), never
    over an existing record, and only for a job root's own hooks did not run here. One
    that cannot be filed - not a regular file of one link of a user other than root,
    bigger than a record can be, not a record within bounds, for a job whose record is
    root's, filed already - is removed with one log line (at most ``_REFUSED_LINES`` a
    run, then their count), and filing goes on. What is not named as a hand-in is removed
    (for at most ``JUNK_BUDGET_SECS``), with one line for all. At most :data:`PER_UID`
    hand-ins of each uid are looked at; the rest wait for the next run. One that cannot be
    written (a full disk) stays for the next run: StoreError, once the others are done.
    """
    assert config.records_dir is not None
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
            survey = _Survey(drop)
            filing = _Filing(config, top, drop, log)
            for uid in sorted(survey.queues):
                for name in survey.queues[uid]:
                    filing.file(name)
            if survey.trash:
                drop.empty_trash(JUNK_BUDGET_SECS)
    if survey.junk:
        shown = ", ".join(repr(name[:80]) for name in survey.junk[:3])
        log.warning(f"{config.records_dir}/{INCOMING}: removed {survey.junk_count} file(s) "
                    f"that are not records handed in by a user: {shown}"
                    + (" ..." if survey.junk_count > 3 else ""))
    if filing.refused > _REFUSED_LINES:
        log.warning(f"{config.records_dir}/{INCOMING}: and {filing.refused - _REFUSED_LINES} "
                    "more hand-in(s) removed")
    if filing.unwritten:
        raise StoreError(f"{filing.unwritten} handed-in record(s) not filed, left for the next "
                         f"run: {filing.write_error}")
    return filing.filed


def _well_formed(name: str) -> bool:
    """Whether a drop box name is what :func:`hand_in` makes: ``<end>-<...>.json`` of the
    characters of a job directory name (and those of earlier versions)."""
    if len(name) > _NAME_MAX or not name.endswith(RECORD_SUFFIX):
        return False
    head, dash, rest = name.partition("-")
    return bool(dash) and 0 < len(head) <= 12 and head.isdigit() and head.isascii() \
        and len(rest) > len(RECORD_SUFFIX) and all(char in JOB_DIR_NAME_CHARS for char in rest)


class _Survey:
    """One pass over the drop box, in the order the directory gives (no global sort, no
    global cut): each uid's hand-in names (at most PER_UID), what is not a hand-in
    removed (for at most JUNK_BUDGET_SECS), whether a removal left trash."""

    def __init__(self, drop: Dir) -> None:
        self.queues: dict[int, list[str]] = {}
        self.junk: list[str] = []
        self.junk_count = 0
        self.trash = False
        deadline = time.monotonic() + JUNK_BUDGET_SECS
        now = time.time()
        with os.scandir(drop.fd) as entries:
            for entry in entries:
                name = entry.name
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue  # gone meanwhile
                if name.startswith(_TRASH_PREFIX) and info.st_uid == 0:
                    self.trash = True  # what a removal here left: empty_trash's
                    continue
                if name.startswith("."):
                    # A hand-in still being written (or a killed writer's): left to its
                    # writer, unless that process is gone or it is older than any write.
                    # (Its change time: a user can set a file's mtime, not that.)
                    if _is_temp(name) and not owner_is_gone(name) \
                            and now - info.st_ctime < _STALE_TEMP_SECS:
                        continue
                elif _well_formed(name):
                    queue = self.queues.setdefault(info.st_uid, [])
                    if len(queue) < PER_UID:
                        queue.append(name)
                    continue
                if time.monotonic() < deadline:
                    self._remove(drop, name)

    def _remove(self, drop: Dir, name: str) -> None:
        try:
            if drop.discard(name) is False:  # a directory a user made there too
                self.trash = True
        except (OSError, StoreError):
            return  # gone meanwhile, or the next run tries again
        self.junk_count += 1
        if len(self.junk) < 3:
            self.junk.append(name)


def _is_temp(name: str) -> bool:
    """Whether a hidden name is one :func:`_write_whole` gives a file being written:
    ``.new-<what>.<pid>.<8 hex digits>``."""
    parts = name.rsplit(".", 2)
    return len(parts) == 3 and parts[0].startswith(_TEMP_PREFIX) and parts[1].isdigit() \
        and len(parts[2]) == 8 and all(char in "0123456789abcdef" for char in parts[2])


class _Filing:
    """Files hand-ins one at a time: each refused or filed on its own."""

    def __init__(self, config: Config, top: Dir, drop: Dir, log) -> None:
        self.config, self.top, self.drop, self.log = config, top, drop, log
        self.filed = self.refused = self.unwritten = 0
        self.write_error = ""
        self._root_jobs: _RootJobs | None = None

    def file(self, name: str) -> None:
        handed = _handed_in(self.drop, name)
        if handed is None:
            self._refuse(name, None, "not a regular file of one link of a user other than "
                         f"root, of at most {_MAX_RECORD_BYTES} bytes")
            return
        text, uid = handed
        try:
            record, stem, files = self._judge(text, uid)
        except _Refused as refusal:
            self._refuse(name, uid, str(refusal))
            return
        except Exception as error:  # noqa: BLE001 - whatever a user's hand-in makes raise
            self._refuse(name, uid, f"not a record: {type(error).__name__}: {_short(error)}")
            return
        try:
            day = day_name(record.end_time)  # type: ignore[arg-type]
            with self.top.subdir(day, _DIR_MODE, None, create=True) as directory:
                _link_whole(directory, stem, files)
        except FileExistsError:
            self._refuse(name, uid, f"job {_short(record.job_id)!r} handed in by uid {uid} "
                         f"with that end is filed already ({stem}{RECORD_SUFFIX})")
            return
        except (OSError, StoreError) as error:
            # Not the hand-in's fault (a full disk): it stays for the next run.
            self.unwritten += 1
            self.write_error = str(error) if isinstance(error, StoreError) \
                else describe(error, f"{self.top.path}/{stem}")
            return
        self.drop._unlink_quietly(name)
        self.filed += 1

    def _judge(self, text: str, uid: int) -> tuple[Record, str, dict[str, bytes]]:
        """The record a hand-in holds, the name root files it under and its files; any
        exception if it is not one."""
        import json

        from .job_record import record_from_json

        record = record_from_json(json.loads(text))
        if record.end_time is None:
            raise _Refused("a record handed in needs its end_time")
        dir_name = job_dir_name(record.job_id)  # an id no job can have is refused here
        if self._root_jobs is None:
            self._root_jobs = _RootJobs(self.config, self.top)
        why = self._root_jobs.ran(dir_name)
        if why:
            raise _Refused(f"job {_short(record.job_id)!r} {why}: its record is root's, not "
                           f"uid {uid}'s")
        stem = f"{int(record.end_time)}-{dir_name}{_UID_MARK}{uid}"
        if len(stem) + max(len(suffix) for suffix in (RECORD_SUFFIX, *_FORMAT_SUFFIXES.values())) \
                > _NAME_MAX:
            raise _Refused(f"job {_short(record.job_id)!r}: its id is too long for a record's "
                           "file name with the uid")
        record.sources = {field: f"{source}; handed in by uid {uid}"
                          for field, source in record.sources.items()}
        files = contents(record, self.config.record_formats,
                         self.config.records_site or self.config.describe.get("site"),  # type: ignore[arg-type]
                         self.log)
        return record, stem, files

    def _refuse(self, name: str, uid: int | None, why: str) -> None:
        try:
            self.drop.discard(name)  # a directory a user made there too
        except (OSError, StoreError):
            pass  # gone meanwhile, or the next run tries again
        self.refused += 1
        if self.refused <= _REFUSED_LINES:
            owner = "" if uid is None else f" of uid {uid}"
            self.log.warning(f"{self.config.records_dir}/{INCOMING}: removed the hand-in "
                             f"{name[:80]!r}{owner}: {why}")


class _Refused(Exception):
    """A hand-in root does not file, and why."""


def _short(value) -> str:
    """What a user's hand-in made of a message, fit for one log line of root's."""
    text = value if isinstance(value, str) else str(value)
    return "".join(char if " " <= char <= "~" else "?" for char in text[:120])


class _RootJobs:
    """The jobs root's hooks ran here, asked about one job directory name at a time: one
    whose directory a root hook made in base_dir (live, or in the trash of its end), read
    once; then one whose record root wrote (:func:`_note_ended`). In that order: a root
    end notes the job once its directory is out of sight (renamed to the trash), so no
    moment of a root job's end escapes both."""

    def __init__(self, config: Config, top: Dir) -> None:
        self.top = top
        names: list[str] = []
        try:
            names = Store(config.base_dir, config.dir_mode, config.file_mode).root_entries()
        except (OSError, StoreError):
            pass  # no jobs/ to read: the notes below still speak
        self.live = {name for name in names if not name.startswith(".")}
        # A trash name carries at most 64 characters of the job directory's name.
        self.trash = {name[len(_TRASH_PREFIX):].rsplit(".", 2)[0] for name in names
                      if name.startswith(_TRASH_PREFIX)}
        self.days: list[str] | None = None

    def ran(self, dir_name: str) -> str | None:
        """How root's hooks ran the job of ``dir_name`` here, or None."""
        if dir_name in self.live:
            return "runs here under root's hooks"
        if dir_name[:64] in self.trash:
            return "is ending here under root's hooks"
        return "ended here under root's hooks" if self._noted(dir_name) else None

    def _noted(self, dir_name: str) -> bool:
        try:
            with self.top.open_subdir(ENDED) as ended:
                if self.days is None:
                    self.days = [name for name in os.listdir(ended.fd)
                                 if _day_start(name) is not None]
                for day in self.days:
                    try:
                        os.stat(f"{day}/{dir_name}", dir_fd=ended.fd, follow_symlinks=False)
                        return True
                    except FileNotFoundError:
                        continue
        except (FileNotFoundError, StoreError):
            return False
        return False


def _note_ended(top: Dir, dir_name: str, now: float) -> None:
    """Note that root's hooks ended the job of ``dir_name`` here and wrote its record
    (``<dir>/ended/<day>/<job dir name>``, the day of ``now``), so that no job user's
    hand-in for it is ever filed (:func:`ingest`). Kept as long as records are
    (:func:`expire`). StoreError if it cannot be noted."""
    day = day_name(now)
    try:
        with top.subdir(ENDED, _ENDED_MODE, None, create=True) as ended, \
                ended.subdir(day, _ENDED_MODE, None, create=True) as directory:
            fd = os.open(dir_name, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                         0o600, dir_fd=directory.fd)
            os.close(fd)
    except OSError as error:
        raise StoreError(describe(error, f"{top.path}/{ENDED}/{day}/{dir_name}")) from None


def _link_whole(directory: Dir, stem: str, files: dict[str, bytes]) -> None:
    """``stem + suffix`` for each file, all or none, each linked into place - never over
    an existing name (FileExistsError if the record is there) - the last one last."""
    temps: list[tuple[str, str]] = []
    linked: list[str] = []
    try:
        _write_temps(directory, stem, files, temps)
        for temp, name in temps:
            try:
                os.link(temp, name, src_dir_fd=directory.fd, dst_dir_fd=directory.fd,
                        follow_symlinks=False)
            except FileExistsError:
                # What a filing killed before its JSON left (the JSON, linked last, is the
                # record) is no record: it goes. Where the JSON is there, the record is.
                if name == stem + RECORD_SUFFIX or _exists(directory, stem + RECORD_SUFFIX):
                    raise
                os.unlink(name, dir_fd=directory.fd)
                os.link(temp, name, src_dir_fd=directory.fd, dst_dir_fd=directory.fd,
                        follow_symlinks=False)
            linked.append(name)
    except OSError:
        for name in linked:
            if name != stem + RECORD_SUFFIX:
                directory._unlink_quietly(name)
        raise
    finally:
        for temp, _ in temps:
            directory._unlink_quietly(temp)


def _exists(directory: Dir, name: str) -> bool:
    try:
        os.stat(name, dir_fd=directory.fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _handed_in(drop: Dir, name: str) -> tuple[str, int] | None:
    """(text, owner uid) of a handed-in record: a regular file of one link, of a user
    other than root, at most a record's size; None otherwise."""
    if not name.endswith(RECORD_SUFFIX):
        return None
    found = drop.read_whole(name, _MAX_RECORD_BYTES,
                            lambda info: info.st_nlink == 1 and info.st_uid != 0)
    return None if found is None else (found[0].decode("utf-8", "replace"), found[1].st_uid)


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
        _expire_notes(top, cutoff)
        _expire_digests(top)
    return removed


def _expire_digests(top: Dir) -> None:
    """Remove the digests of days that are gone, and what killed writers left."""
    try:
        digests = top.open_subdir(DIGESTS)
    except (FileNotFoundError, StoreError):
        return
    with digests:
        days = set(os.listdir(top.fd))
        for name in os.listdir(digests.fd):
            stale = owner_is_gone(name) if name.startswith(".") else \
                name[:-len(".json")] not in days
            if stale:
                digests._unlink_quietly(name)


def _expire_notes(top: Dir, cutoff: float) -> None:
    """Remove the days of :func:`_note_ended` wholly before ``cutoff``: what a job's user
    may hand in for a job that long gone would be removed by the next expire anyway."""
    try:
        ended = top.open_subdir(ENDED)
    except (FileNotFoundError, StoreError):
        return
    with ended:
        for day_dir, start, day in _days(ended):
            with day:
                if start + _DAY_SECS > cutoff:
                    continue
                for name in os.listdir(day.fd):
                    day._unlink_quietly(name)
            try:
                os.rmdir(day_dir, dir_fd=ended.fd)
            except OSError:
                pass  # a note arrived meanwhile: the next run
