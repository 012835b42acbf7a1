"""Reading the records directory (:mod:`mjf_hooks.records.store` has its layout): every
record (``mjf records``), or what a summary takes of each (``mjf records --summary``,
``mjf metrics``), from each day's digest where that day is unchanged."""

from __future__ import annotations

import marshal
import os

from ..errors import StoreError
from ..safefs import Dir
from .store import (
    DAY_SECS,
    DIGEST_SUFFIX,
    DIGESTS,
    DIR_MODE,
    FILE_MODE,
    HANDED_IN_MARK,
    MAX_RECORD_BYTES,
    RECORD_SUFFIX,
    days,
    end_of,
    open_records_dir,
)


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
        top = open_records_dir(path, create=False)
    except StoreError as error:
        if not os.path.lexists(path):
            return listing
        raise error from None
    with top:
        for _, start, day in days(top):
            if since is not None and start + DAY_SECS <= since:
                day.close()
                continue
            with day:
                for name in _record_names(day):
                    end = end_of(name)
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
# kept in DIGESTS/<day>.marshal with the directory's (inode, mtime, ctime) they were read
# under, and used while those are the same. Only the records directory's owner writes
# them, and they are read only from a hidden directory beside the days that is checked as
# the days are (the owner's or root's, writable by nobody else); a digest that is stale,
# malformed or unreadable is read past, and the day's records are read instead. marshal,
# not JSON: a day's thousand rows load in a fifth of the time, and its format 4 (lists,
# numbers, text) reads the same in every Python 3 this package runs on. marshal is not
# for data from elsewhere, and a digest never is.

_DIGEST_FORMAT = 3
# The kinds of a day's entries: a record root wrote, one a job's user handed in, a file
# that is no record, a record that fails its checks.
_ROOT_ROW, _HANDED_IN_ROW, _FILE, _INVALID = "row", "handed-in row", "file", "invalid"
_MAX_DIGEST_BYTES = 64 << 20


def summary_rows(path: str, since: float | None = None
                 ) -> tuple[list[list], list[list], list[str]]:
    """Every record's :func:`job_record.summary_row` (that ended at or after ``since``),
    in :func:`read_all`'s order: those root wrote, and apart those jobs' users handed in
    (their word: a summary of the node takes root's alone); and what is not a record, as
    :func:`read_all` and :func:`job_record.record_from_json` would name it."""
    rows: list[tuple[float, list]] = []
    handed_in: list[tuple[float, list]] = []
    files: list[str] = []
    invalid: list[tuple[float, str]] = []
    try:
        top = open_records_dir(path, create=False)
    except StoreError as error:
        if not os.path.lexists(path):
            return [], [], []
        raise error from None
    with top:
        digests = _digests(top)
        try:
            for name, start, day in days(top):
                with day:
                    if since is not None and start + DAY_SECS <= since:
                        continue
                    for end, sort_key, kind, payload in _day_entries(day, name, digests):
                        if since is not None and end is not None and end < since:
                            continue
                        if kind == _ROOT_ROW:
                            rows.append((sort_key, payload))
                        elif kind == _HANDED_IN_ROW:
                            handed_in.append((sort_key, payload))
                        elif kind == _FILE:
                            files.append(f"{day.path}/{payload}")
                        else:
                            invalid.append((sort_key, payload))
        finally:
            if digests is not None:
                digests[0].close()
    for found in (rows, handed_in, invalid):
        found.sort(key=lambda item: item[0])  # stable: read_all's order
    return ([row for _, row in rows], [row for _, row in handed_in],
            files + [f"the record of job {label}" for _, label in invalid])


def _digests(top: Dir) -> tuple[Dir, bool] | None:
    """The digests' directory and whether this process may write there (it owns the
    records directory); None where there is none to read and none may be made."""
    writes = os.fstat(top.fd).st_uid == os.geteuid()
    try:
        return top.subdir(DIGESTS, DIR_MODE, None, create=writes), writes
    except (FileNotFoundError, StoreError):
        return None


def _day_entries(day: Dir, name: str, digests: tuple[Dir, bool] | None) -> list:
    """(end time its name says, end time it sorts by, kind, what) of each record file of
    ``day`` in name order; kind "row" (root's record; what: its summary row), "handed-in
    row" (a job's user's record: the same), "file" (not a record: its name) or "invalid"
    (a record that fails its checks: its job, printable)."""
    info = os.fstat(day.fd)  # before reading: a change while reading makes the digest stale
    stamp = [info.st_ino, info.st_mtime_ns, info.st_ctime_ns]
    digest_name = f"{name}{DIGEST_SUFFIX}"
    if digests is not None:
        entries = _read_digest(digests[0], digest_name, stamp)
        if entries is not None:
            return entries
    entries = _read_day(day)
    if digests is not None and digests[1]:
        try:
            digests[0].replace(digest_name, marshal.dumps(
                {"format": _DIGEST_FORMAT, "day": stamp, "entries": entries}, 4), FILE_MODE)
        except (StoreError, OSError, ValueError, TypeError):
            pass  # a digest saves time only: the summary is right without it
    return entries


def _read_day(day: Dir) -> list:
    """A day's entries (see :func:`_day_entries`), from its records."""
    from ..terminal import printable
    from .job import record_from_json, summary_row

    entries = []
    for name in _record_names(day):
        end = end_of(name)
        data = _record_data(day, name)
        if data is None:
            entries.append([end, 0, _FILE, name])
            continue
        sort_key = _number(data, "delivered", "end_time") or 0
        kind = _HANDED_IN_ROW if HANDED_IN_MARK in name else _ROOT_ROW
        try:
            entries.append([end, sort_key, kind, summary_row(record_from_json(data))])
        except (ValueError, TypeError, RecursionError):
            job = data.get("job_id")
            entries.append([end, sort_key, _INVALID,
                            printable(job) if isinstance(job, str) else "?"])
    return entries


def _read_digest(digests: Dir, name: str, stamp: list) -> list | None:
    """A day's entries from its digest, if it was made under ``stamp`` and is well formed."""
    found = digests.read_whole(name, _MAX_DIGEST_BYTES)
    if found is None:
        return None
    try:
        digest = marshal.loads(found[0])  # noqa: S302 - the owner's own, see above
    except (ValueError, EOFError, TypeError):  # what marshal says of bytes that are no digest
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
    if kind not in (_ROOT_ROW, _HANDED_IN_ROW):
        return kind in (_FILE, _INVALID) and type(payload) is str
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


def _read(directory: Dir, name: str) -> str | None:
    found = directory.read_whole(name, MAX_RECORD_BYTES)
    return None if found is None else found[0].decode("utf-8", "replace")


def _number(data: dict, section: str, name: str) -> float | None:
    part = data.get(section)
    value = part.get(name) if isinstance(part, dict) else None
    if isinstance(value, dict):
        value = value.get("value")
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
