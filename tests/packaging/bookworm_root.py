"""A clean Debian bookworm chroot to install the .deb into, and the .deb itself.

``build-bookworm-root`` debootstraps the pristine root once into
``/srv/mjf-bookworm-root`` (minbase, apt's lists, the dependencies' .debs in apt's
cache; nothing of ours, not even python3) and marks it ready. It is never used
directly: every test run (and ``benchmarks/run --deb``) copies it to a scratch root,
works there and removes it, so each starts from the same clean state.

``build_deb`` runs ``dpkg-buildpackage -us -uc -b`` in a copy of the checkout's
source files (never in the checkout: it writes next to the tree and into it) with the
system's Python first on PATH, as a Debian build host has it.
"""

from __future__ import annotations

import functools
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

from tests.conftest import require
from tests.conftest import run as run_briefly

CHECKOUT = Path(__file__).resolve().parents[2]
PRISTINE = Path(os.environ.get("MJF_BOOKWORM_ROOT", "/srv/mjf-bookworm-root"))
BUILDER = CHECKOUT / "tests/packaging/build-bookworm-root"
# What the checkout holds besides its source files (.gitignore, .git): not copied.
_ANYWHERE = shutil.ignore_patterns("__pycache__", "*.egg-info")
_TOP = {".git", "build", "dist", ".venv", ".pytest_cache", ".hypothesis", ".ruff_cache"}


def not_source(directory: str, names: list[str]) -> set[str]:
    ignored = set(_ANYWHERE(directory, names))
    if Path(directory) == CHECKOUT:
        ignored |= _TOP & set(names)
    return ignored
SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
CHROOT = shutil.which("chroot", path=SYSTEM_PATH) or "/usr/sbin/chroot"


# Building a root installs packages: longer than a daemon's command may take.
run = functools.partial(run_briefly, timeout=120)


def build_prerequisites() -> list[str]:
    """What building the package needs here and is missing (empty: all there)."""
    missing = [tool for tool in ("dpkg-buildpackage", "debootstrap", "chroot", "help2man")
               if shutil.which(tool, path=SYSTEM_PATH) is None]
    if Path("/usr/share/perl5/Debian/Debhelper/Buildsystem/pybuild.pm").exists() is False:
        missing.append("dh-python")
    for module in ("pytest", "hypothesis", "pyfakefs"):  # the unit tests the build runs
        if subprocess.run(["/usr/bin/python3", "-c", f"import {module}"],
                          capture_output=True).returncode != 0:
            missing.append(f"python3-{module}")
    return missing


def require_build_tools() -> None:
    """Skip (in CI: fail) unless this host can build the .deb and install it in a chroot."""
    require(os.geteuid() == 0, "building and installing the .deb in a chroot needs root")
    missing = build_prerequisites()
    require(not missing, f"needs {', '.join(missing)} (apt-get install debhelper dh-python "
                         "pybuild-plugin-pyproject python3-all python3-setuptools "
                         "python3-wheel python3-click python3-pytest python3-hypothesis "
                         "python3-pyfakefs help2man dpkg-dev fakeroot debootstrap)")


def build_deb(out_dir: Path, unit_tests: bool = True, source: Path | None = None,
              rules: str = "debian/rules") -> Path:
    """Build the .deb from a copy of the checkout's source files in ``out_dir``; its path.
    Without ``unit_tests`` the build skips them (``DEB_BUILD_OPTIONS=nocheck``, as Debian
    spells it): for a test that only needs the package, not the build's own proof.
    ``source``: a tree of ``out_dir`` to build instead (another commit's, say);
    ``rules``: how dpkg-buildpackage runs debian/rules (with make variables, say)."""
    if source is None:
        source = out_dir / "mjf-hooks"
        shutil.copytree(CHECKOUT, source, ignore=not_source, symlinks=True)
    environment = {"PATH": SYSTEM_PATH, "HOME": str(out_dir), "LC_ALL": "C.UTF-8"}
    if not unit_tests:
        environment["DEB_BUILD_OPTIONS"] = "nocheck"
    result = run(["dpkg-buildpackage", "-us", "-uc", "-b", f"--rules-file={rules}"],
                 cwd=source, timeout=600, check=False, env=environment)
    (out_dir / "build.log").write_text(result.stdout + result.stderr)
    if result.returncode != 0:
        raise AssertionError(f"dpkg-buildpackage failed (exit {result.returncode}):\n"
                             f"{(result.stdout + result.stderr)[-4000:]}")
    debs = sorted(out_dir.glob("mjf-hooks_*_all.deb"))
    assert len(debs) == 1, debs
    return debs[0]


def ensure_pristine() -> None:
    """Build the pristine root unless it is there (a few minutes the first time)."""
    run([str(BUILDER), str(PRISTINE)], timeout=1200)


class ScratchRoot:
    """A copy of the pristine root under ``parent``, its /proc mounted while in use."""

    def __init__(self, parent: Path) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="mjf-bookworm-", dir=parent)) / "root"
        self.mounted: list[Path] = []
        self.env = {"PATH": SYSTEM_PATH, "LC_ALL": "C.UTF-8", "HOME": "/root"}

    def create(self) -> None:
        run(["cp", "-a", "--reflink=auto", str(PRISTINE), str(self.path)], timeout=600)
        (self.path / ".mjf-ready").unlink()  # the pristine root's marker, not the system's
        proc = self.path / "proc"
        run(["mount", "-t", "proc", "proc", str(proc)])
        self.mounted.append(proc)

    def chroot(self, argv: list[str], user: str | None = None, check: bool = True,
               timeout: int = 120, env: dict[str, str] | None = None
               ) -> subprocess.CompletedProcess:
        spec = [f"--userspec={user}"] if user else []
        return run([CHROOT, *spec, str(self.path), *argv], env=env or self.env,
                   timeout=timeout, check=check)

    def apt_get_install(self, *packages: str) -> subprocess.CompletedProcess:
        """``apt-get install -y`` in the root (paths are relative to its /root)."""
        return self.chroot(["sh", "-c", "cd /root && apt-get install -y -q "
                            f"--no-install-recommends {' '.join(packages)}"],
                           env={**self.env, "DEBIAN_FRONTEND": "noninteractive"},
                           timeout=300)

    def install_deb(self, deb: Path) -> subprocess.CompletedProcess:
        """``apt-get install -y ./mjf-hooks_*.deb``, the .deb copied in and removed after."""
        inside = self.path / "root" / deb.name
        shutil.copy(deb, inside)
        try:
            return self.apt_get_install(f"./{deb.name}")
        finally:
            inside.unlink()

    def unmount(self) -> None:
        for target in reversed(self.mounted):
            if run(["umount", str(target)], check=False).returncode != 0:
                run(["umount", "-l", str(target)], check=False)
        self.mounted.clear()

    def destroy(self) -> None:
        self.unmount()
        # Only remove what no mount is left in (a lazily detached one is gone already).
        if not os.path.ismount(self.path / "proc"):
            shutil.rmtree(self.path.parent, ignore_errors=True)


def manifest(root: Path) -> dict[str, tuple]:
    """Every path under ``root`` (but /proc) with its type, mode, owner, size, mtime and
    link target: what a comparison of two states of a root needs."""
    entries: dict[str, tuple] = {}
    for directory, dirs, files in os.walk(root):
        relative = "/" + os.path.relpath(directory, root) if directory != str(root) else "/"
        if relative == "/":
            dirs[:] = [name for name in dirs if name != "proc"]
        for name in dirs + files:
            path = os.path.join(directory, name)
            info = os.lstat(path)
            key = os.path.join(relative, name)
            link = os.readlink(path) if stat.S_ISLNK(info.st_mode) else None
            mtime = None if stat.S_ISDIR(info.st_mode) else info.st_mtime_ns
            entries[key] = (stat.S_IFMT(info.st_mode), stat.S_IMODE(info.st_mode), info.st_uid,
                            info.st_gid, None if stat.S_ISDIR(info.st_mode) else info.st_size,
                            mtime, link)
    return entries


def changes(before: dict[str, tuple], after: dict[str, tuple]) -> dict[str, list[str]]:
    """Paths added, removed and changed from ``before`` to ``after``."""
    return {"added": sorted(set(after) - set(before)),
            "removed": sorted(set(before) - set(after)),
            "changed": sorted(key for key in set(before) & set(after)
                              if before[key] != after[key])}
