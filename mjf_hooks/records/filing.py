"""Filing what jobs' users handed in (``mjf sync``, as root), and expiring old records.

A record written by an end hook that runs as the job's user is handed in
(:func:`mjf_hooks.records.store.hand_in`) to the records directory's drop box;
:func:`ingest` files it as root's. What a user hands in is that user's word, so filing it
can never touch anyone else's:

* root names the filed record, from what it holds and the uid that owns the hand-in:
  ``<end>-<job dir name>~<uid>`` (``~`` is in no job directory name: it is
  percent-encoded), beside root's own ``<end>-<job dir name>``; a hand-in can neither
  replace nor pre-empt root's record or another user's;
* its files are linked into place (``link``: never over an existing name), so a record
  that is there stays as it is;
* a hand-in for a job that root's hooks ran here is refused: its record is root's. Root
  knows such a job by its directory in ``base_dir/jobs`` (made by a root hook: root's,
  live or in the trash of its end) and, once it has ended, by the note root leaves as it
  writes a job's record (``<dir>/ended/<YYYY-MM-DD>/<job dir name>``, which
  :func:`~mjf_hooks.records.store.write` leaves, kept as long as records are);
* a hand-in that is not a record within bounds (a number no job reaches, a wrong type,
  JSON nested too deep, anything that makes a conversion raise) is removed with one log
  line, and filing goes on with the others;
* one user's hand-ins cannot keep another's out: what is not named as a hand-in is
  removed, and each uid has its own quota of hand-ins looked at per run
  (:data:`PER_UID`), never a share of one global, sorted list.


:func:`expire` removes records older than ``keep_days`` and what killed writers left.
"""

from __future__ import annotations

import os
import stat
import time

from ..errors import StoreError
from ..safefs import TRASH_PREFIX as _TRASH_PREFIX
from ..safefs import Dir, describe, owner_is_gone
from ..store import JOB_DIR_NAME_CHARS, Store, job_dir_name
from .store import (
    DAY_SECS,
    DIGEST_SUFFIX,
    DIGESTS,
    DIR_MODE,
    ENDED,
    FORMAT_SUFFIXES,
    HANDED_IN_MARK,
    INCOMING,
    INCOMING_MODE,
    MAX_RECORD_BYTES,
    RECORD_SUFFIX,
    TEMP_PREFIX,
    contents,
    day_name,
    day_start,
    days,
    end_of,
    open_records_dir,
    write_temps,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..config import Config
    from .job import Record

# The most hand-ins of one uid one `mjf sync` looks at (a user could hand in millions: they
# hold up only that user's, the rest wait for the next run).
PER_UID = 1000
# How long one `mjf sync` spends removing what is not a hand-in from the drop box (what is
# left goes in the next run; it keeps no hand-in out meanwhile).
JUNK_BUDGET_SECS = 10.0
# A hidden name in the drop box older than this is no hand-in being written (that takes
# milliseconds), whatever pid it names.
_STALE_TEMP_SECS = 3600
# Of the lines about refused hand-ins, one `mjf sync` writes this many, then a count.
_REFUSED_LINES = 10
# A file name's limit (NAME_MAX).
_NAME_MAX = 255


def ingest(config: Config, log) -> int:
    """As root: file the records jobs' users handed in
    (:func:`~mjf_hooks.records.store.hand_in`) as root's, each Delivered source marked with
    the uid that handed it in; return how many. Makes the drop box if absent.

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
    with open_records_dir(config.records_dir, create=True) as top:
        try:
            os.mkdir(INCOMING, 0o700, dir_fd=top.fd)
            fd = os.open(INCOMING, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=top.fd)
            try:
                os.fchmod(fd, INCOMING_MODE)
            finally:
                os.close(fd)
        except FileExistsError:
            pass
        with top.open_subdir(INCOMING) as drop:
            info = os.fstat(drop.fd)
            if info.st_uid != 0 or stat.S_IMODE(info.st_mode) != INCOMING_MODE:
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


def waiting(config: Config) -> tuple[int, int] | None:
    """What :func:`ingest` would look at now, changing nothing: ``(hand-ins, entries that
    are not hand-ins)`` in the drop box; None where there is no drop box yet."""
    assert config.records_dir is not None
    top = _open_if_present(config.records_dir)
    if top is None:
        return None
    with top:
        try:
            drop = top.open_subdir(INCOMING)
        except FileNotFoundError:
            return None
        with drop:
            names = [name for name in os.listdir(drop.fd) if not name.startswith(".")]
    hand_ins = sum(1 for name in names if _well_formed(name))
    return hand_ins, len(names) - hand_ins


def _open_if_present(records_dir: str) -> Dir | None:
    """The records directory (StoreError if refused); None where it does not exist."""
    try:
        return open_records_dir(records_dir, create=False)
    except StoreError:
        if not os.path.lexists(records_dir):
            return None
        raise


def _well_formed(name: str) -> bool:
    """Whether a drop box name is what :func:`~mjf_hooks.records.store.hand_in` makes:
    ``<end>-<...>.json`` of the characters of a job directory name (and those of earlier
    versions)."""
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
    """Whether a hidden name is one :func:`~mjf_hooks.records.store.write_temps` gives a file
    being written: ``.new-<what>.<pid>.<8 hex digits>``."""
    parts = name.rsplit(".", 2)
    return len(parts) == 3 and parts[0].startswith(TEMP_PREFIX) and parts[1].isdigit() \
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
                         f"root, of at most {MAX_RECORD_BYTES} bytes")
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
            with self.top.subdir(day, DIR_MODE, None, create=True) as directory:
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

        from .job import record_from_json

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
        stem = f"{int(record.end_time)}-{dir_name}{HANDED_IN_MARK}{uid}"
        if len(stem) + max(len(suffix) for suffix in (RECORD_SUFFIX, *FORMAT_SUFFIXES.values())) \
                > _NAME_MAX:
            raise _Refused(f"job {_short(record.job_id)!r}: its id is too long for a record's "
                           "file name with the uid")
        record.sources = {field: f"{source}; handed in by uid {uid}"
                          for field, source in record.sources.items()}
        if record.requested_source is not None:
            record.requested_source += f"; handed in by uid {uid}"
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
    once; then one whose record root wrote (:func:`~mjf_hooks.records.store.write` notes it).
    In that order: a root end notes the job once its directory is out of sight (renamed to
    the trash), so no moment of a root job's end escapes both."""

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
                                 if day_start(name) is not None]
                for day in self.days:
                    try:
                        os.stat(f"{day}/{dir_name}", dir_fd=ended.fd, follow_symlinks=False)
                        return True
                    except FileNotFoundError:
                        continue
        except (FileNotFoundError, StoreError):
            return False
        return False


def _link_whole(directory: Dir, stem: str, files: dict[str, bytes]) -> None:
    """``stem + suffix`` for each file, all or none, each linked into place - never over
    an existing name (FileExistsError if the record is there) - the last one last."""
    temps: list[tuple[str, str]] = []
    linked: list[str] = []
    try:
        write_temps(directory, stem, files, temps)
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
    found = drop.read_whole(name, MAX_RECORD_BYTES,
                            lambda info: info.st_nlink == 1 and info.st_uid != 0)
    return None if found is None else (found[0].decode("utf-8", "replace"), found[1].st_uid)


def expire(config: Config, now: float | None = None, dry_run: bool = False) -> int:
    """Remove the records that ended more than ``keep_days`` ago, the day directories
    they leave empty, and what killed writers left; return how many records went
    (``dry_run``: would go; nothing is removed)."""
    if config.records_dir is None:
        return 0
    now = time.time() if now is None else now
    cutoff = now - config.records_keep_days * DAY_SECS
    removed = 0
    top = _open_if_present(config.records_dir)
    if top is None:
        return 0
    with top:
        for day_dir, start, day in days(top):
            with day:
                for name in os.listdir(day.fd):
                    if name.startswith("."):
                        if owner_is_gone(name) and not dry_run:
                            day._unlink_quietly(name)
                        continue
                    end = end_of(name)
                    if start < cutoff and end is not None and end < cutoff:
                        removed += name.endswith(RECORD_SUFFIX)
                        if not dry_run:
                            day._unlink_quietly(name)
                empty = not os.listdir(day.fd)
            if dry_run:
                continue
            if empty and start + DAY_SECS <= now:
                try:
                    os.rmdir(day_dir, dir_fd=top.fd)
                except OSError:
                    pass  # a record arrived meanwhile
        if not dry_run:
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
            # (A digest of another suffix is an earlier version's: it is never read.)
            stale = owner_is_gone(name) if name.startswith(".") else \
                not name.endswith(DIGEST_SUFFIX) or name[:-len(DIGEST_SUFFIX)] not in days
            if stale:
                digests._unlink_quietly(name)


def _expire_notes(top: Dir, cutoff: float) -> None:
    """Remove the days of the notes :func:`~mjf_hooks.records.store.write` leaves wholly
    before ``cutoff``: what a job's user may hand in for a job that long gone would be
    removed by the next expire anyway."""
    try:
        ended = top.open_subdir(ENDED)
    except (FileNotFoundError, StoreError):
        return
    with ended:
        for day_dir, start, day in days(ended):
            with day:
                if start + DAY_SECS > cutoff:
                    continue
                for name in os.listdir(day.fd):
                    day._unlink_quietly(name)
            try:
                os.rmdir(day_dir, dir_fd=ended.fd)
            except OSError:
                pass  # a note arrived meanwhile: the next run
