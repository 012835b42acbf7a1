"""The directories a booted system makes for a package before its daemon starts.

The tests start daemons by hand, in trixie chroots and on hosts where systemd never
ran: nothing applied the packages' tmpfiles.d entries, and no unit started, so no
``RuntimeDirectory=`` (or ``StateDirectory=``, ``LogsDirectory=``,
``CacheDirectory=``) was made. A daemon then dies at start (trixie's condor_master
exits 4: "cannot chdir to dir </var/log/condor>"), and only on a fresh machine,
since a warm one keeps what an earlier run happened to make.

Every harness calls :func:`make_boot_dirs` with the root its daemons run in and the
packages it starts them from; it makes what those packages declare, owned as
declared (users and groups looked up in that root), and raises naming the package
and the directory if one is still not a directory afterwards.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path, PurePosixPath

# tmpfiles.d types that make a directory (d, D: plain; v, q, Q: subvolumes, which
# are directories on a file system without them).
_DIRECTORY_TYPES = frozenset("dDvqQ")
# A unit's directory settings and where systemd puts each.
_UNIT_DIRECTORIES = {"RuntimeDirectory": "/run", "StateDirectory": "/var/lib",
                     "CacheDirectory": "/var/cache", "LogsDirectory": "/var/log"}


class BootDir:
    """One directory a package declares: absolute path (inside the root), mode, owner."""

    __slots__ = ("group", "mode", "path", "source", "user")

    def __init__(self, path: str, mode: int, user: str, group: str, source: str) -> None:
        self.path, self.mode, self.user, self.group, self.source = path, mode, user, group, source

    def __repr__(self) -> str:
        return f"BootDir({self.path!r}, {self.mode:o}, {self.user}:{self.group}, {self.source})"


def tmpfiles_dirs(text: str, source: str) -> list[BootDir]:
    """The directories a tmpfiles.d file makes (tmpfiles.d(5): type, path, mode, user,
    group, age, argument; ``-`` is the default)."""
    found = []
    for line in text.splitlines():
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        kind = fields[0].rstrip("!+-=~^")
        if kind not in _DIRECTORY_TYPES or len(fields) < 2:
            continue
        path = fields[1]
        if "%" in path:
            raise ValueError(f"{source}: specifiers are not supported: {line}")
        mode, user, group = [*fields[2:5], "-", "-", "-"][:3]
        found.append(BootDir(path, 0o755 if mode == "-" else int(mode.lstrip("~"), 8),
                             "root" if user == "-" else user,
                             "root" if group == "-" else group, source))
    return found


def unit_dirs(text: str, source: str) -> list[BootDir]:
    """The directories a systemd unit has systemd make when it starts (systemd.exec(5)):
    owned by its ``User=``/``Group=``, mode from ``<Setting>Mode=`` or 0755."""
    settings: dict[str, str] = {}
    for line in text.splitlines():
        name, equals, value = line.partition("=")
        if equals:
            settings[name.strip()] = value.strip()
    user = settings.get("User") or "root"
    group = settings.get("Group") or user
    found = []
    for setting, parent in _UNIT_DIRECTORIES.items():
        mode = int(settings.get(setting + "Mode") or "0755", 8)
        for name in settings.get(setting, "").split():
            found.append(BootDir(f"{parent}/{name.split(':')[0]}", mode, user, group, source))
    return found


def package_files(root: Path, package: str) -> list[str]:
    """The paths a package installed in ``root`` owns (dpkg's own database there)."""
    listed = subprocess.run(["dpkg-query", f"--root={root}", "-L", package], check=True,
                            capture_output=True, text=True, timeout=60).stdout
    return listed.splitlines()


def declared_dirs(root: Path, package: str) -> list[BootDir]:
    """Everything ``package`` declares in its tmpfiles.d entries and service units."""
    found = []
    for path in package_files(root, package):
        inside = root / path.lstrip("/")
        if not inside.is_file():
            continue
        if PurePosixPath(path).parent.name == "tmpfiles.d" and path.endswith(".conf"):
            found += tmpfiles_dirs(inside.read_text(), f"{package}: {path}")
        elif "/systemd/system/" in path and path.endswith(".service"):
            found += unit_dirs(inside.read_text(), f"{package}: {path}")
    return found


def _id_in(root: Path, table: str, name: str) -> int:
    for line in (root / "etc" / table).read_text().splitlines():
        fields = line.split(":")
        if fields[0] == name:
            return int(fields[2])
    raise LookupError(f"{name} is not in {root / 'etc' / table}")


def make(root: Path, wanted: BootDir) -> None:
    """Make one directory (and missing parents) inside ``root``, as declared; one that
    is there keeps what it is (a booted system does not reset it either)."""
    target = root / wanted.path.lstrip("/")
    if target.is_dir():
        return
    target.mkdir(parents=True, exist_ok=True)
    os.chown(target, _id_in(root, "passwd", wanted.user), _id_in(root, "group", wanted.group))
    os.chmod(target, wanted.mode)


def make_boot_dirs(root: Path, packages: tuple[str, ...] | list[str]) -> list[BootDir]:
    """Make what ``packages`` (installed in ``root``) declare; raise naming any that is
    still missing. Returns what was declared, for the harness's own checks."""
    declared = [wanted for package in packages for wanted in declared_dirs(root, package)]
    for wanted in declared:
        make(root, wanted)
    missing = [wanted for wanted in declared if not (root / wanted.path.lstrip("/")).is_dir()]
    if missing:
        raise RuntimeError(f"directories a booted system would have made are missing: {missing}")
    return declared
