"""Mounted filesystems, from ``/proc/<pid>/mountinfo``."""

from __future__ import annotations

from . import read_text


class Mount:
    """One line of mountinfo: what is mounted where."""

    __slots__ = ("fstype", "mount_point", "root", "super_options")

    def __init__(self, root: str, mount_point: str, fstype: str,
                 super_options: list[str]) -> None:
        self.root = root  # the directory of the filesystem that is mounted
        self.mount_point = mount_point
        self.fstype = fstype
        self.super_options = super_options


def parse_mountinfo(text: str) -> list[Mount]:
    """Every well-formed line of a mountinfo file (see proc(5))."""
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if "-" not in fields:
            continue
        separator = fields.index("-")
        if separator < 6 or len(fields) < separator + 4:
            continue
        mounts.append(Mount(
            _unescape(fields[3]), _unescape(fields[4]),
            fields[separator + 1], fields[separator + 3].split(","),
        ))
    return mounts


def read_mounts(pid: int | str = "self") -> list[Mount]:
    """The mounts seen by ``pid``; empty if /proc cannot be read."""
    text = read_text(f"/proc/{pid}/mountinfo")
    return parse_mountinfo(text) if text else []


def _unescape(field: str) -> str:
    """Undo mountinfo's octal escapes (``\\040`` for a space)."""
    if "\\" not in field:
        return field
    parts = field.split("\\")
    out = [parts[0]]
    for part in parts[1:]:
        if len(part) >= 3 and all(char in "01234567" for char in part[:3]):
            out.append(chr(int(part[:3], 8)) + part[3:])
        else:
            out.append("\\" + part)
    return "".join(out)
