"""A Debian trixie chroot that runs a batch system the host has not (in that version),
with the hooks installed inside as a package would put them.

``build-trixie-root`` makes it once (kept between runs). The checkout, /tmp and
/home are bind-mounted at the same paths, so files written by jobs are visible
outside; users with uid >= 1000 exist inside too. The hooks are installed with the
chroot's own Python, from wheels built outside (pip inside cannot verify TLS: the
chroot does not trust the host's CA bundle), and linked to /usr/bin; with the match
extra, whose binary wheel (htcondor, for ``mjf match``) is downloaded outside for the
chroot's Python and platform once, and kept in the chroot for later runs.
"""

from __future__ import annotations

import configparser
import contextlib
import functools
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import run as run_briefly
from tests.integration.boot_dirs import make_boot_dirs

CHECKOUT = Path(__file__).resolve().parents[2]
VENV = "/opt/mjf/venv"
# The extra installed with the hooks: `mjf match` needs HTCondor's ClassAd library.
EXTRA = "match"
# Roots whose hooks this test run installed already (prepared once per run).
_PREPARED: set[Path] = set()


def extra_requirements() -> list[str]:
    """The match extra's requirements, as setup.cfg lists them."""
    setup = configparser.ConfigParser()
    setup.read(CHECKOUT / "setup.cfg")
    return [line.strip() for line in setup["options.extras_require"][EXTRA].splitlines()
            if line.strip()]


# Building a root installs packages: longer than a daemon's command may take.
run = functools.partial(run_briefly, timeout=120)


class TrixieRoot:
    """The chroot at ``root`` with ``packages``; ``commands``: the hooks to link."""


    def __init__(self, root: Path, packages: tuple[str, ...], commands: tuple[str, ...]) -> None:
        self.root = root
        self.packages = packages
        self.commands = commands
        self.mounts: list[str] = []
        self.env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}

    def prepare(self) -> None:
        if self.root in _PREPARED:
            return
        run([str(CHECKOUT / "tests/integration/build-trixie-root"), str(self.root),
             *self.packages], timeout=900)
        make_boot_dirs(self.root, self.packages)
        wheels = self.root / "opt/mjf/wheels"
        shutil.rmtree(wheels, ignore_errors=True)
        wheels.mkdir(parents=True)
        run([sys.executable, "-m", "pip", "wheel", "--quiet", "-w", str(wheels), str(CHECKOUT)],
            timeout=600)
        extra = self.download_extra_wheels()
        self.chroot(["rm", "-rf", VENV])
        self.chroot(["python3", "-m", "venv", VENV])
        self.chroot([f"{VENV}/bin/pip", "install", "--quiet", "--no-index", "--find-links",
                     "/opt/mjf/wheels", "--find-links", extra, f"mjf-hooks[{EXTRA}]"],
                    timeout=300)
        for command in self.commands:
            self.chroot(["ln", "-sf", f"{VENV}/bin/{command}", f"/usr/bin/{command}"])
        self.copy_users()
        _PREPARED.add(self.root)

    def download_extra_wheels(self) -> str:
        """The directory (inside) of the wheels of the extra's requirements for the
        chroot's Python: downloaded outside (binary wheels for its Python version and
        glibc) unless there from an earlier run."""
        directory = "/opt/mjf/extra-wheels"
        probe = self.chroot(["python3", "-c", "import os, platform, sys; print("
                             "f'{sys.version_info[0]}.{sys.version_info[1]}', "
                             "os.confstr('CS_GNU_LIBC_VERSION').split()[1], "
                             "platform.machine())"]).stdout.split()
        version, glibc, machine = probe[0], probe[1], probe[2]
        requirements = extra_requirements()
        stamp = self.root / directory.lstrip("/") / f".{version}-{glibc}-{machine}"
        if stamp.exists() and stamp.read_text() == "\n".join(requirements):
            return directory
        shutil.rmtree(stamp.parent, ignore_errors=True)
        stamp.parent.mkdir(parents=True)
        newest = int(glibc.split(".")[1])
        platforms = [arg for minor in range(17, newest + 1)
                     for arg in ("--platform", f"manylinux_2_{minor}_{machine}")]
        run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
             "--only-binary=:all:", "--python-version", version, "--implementation", "cp",
             *platforms, "-d", str(stamp.parent), *requirements], timeout=600)
        stamp.write_text("\n".join(requirements))
        return directory

    def copy_users(self) -> None:
        """Users with uid >= 1000 exist inside too, so jobs run as them."""
        for name in ("passwd", "group"):
            inside = (self.root / "etc" / name).read_text().splitlines()
            known = {line.split(":")[0] for line in inside}
            extra = [line for line in Path(f"/etc/{name}").read_text().splitlines()
                     if line.split(":")[0] not in known
                     and 1000 <= int(line.split(":")[2]) < 65534]
            (self.root / "etc" / name).write_text("\n".join(inside + extra) + "\n")

    def chroot(self, argv: list[str], user: str | None = None, timeout: int = 120,
               check: bool = True, env: dict[str, str] | None = None,
               enter: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
        """``argv`` inside, as root or ``user``; ``enter`` (an ``nsenter ...`` command)
        runs it in other namespaces: a node's of a multi-node cluster."""
        spec = [f"--userspec={user}:{user}"] if user else []
        return run([*enter, "chroot", *spec, str(self.root), *argv], env=env or self.env,
                   timeout=timeout, check=check)

    def mount(self, extra: tuple[str, ...] = ()) -> None:
        """proc, /sys, /dev, /tmp, /home, the checkout, and ``extra`` directories; first
        detaching whatever a run killed before its teardown left mounted inside."""
        self.detach_stale_mounts()
        binds = [("proc", None), ("/sys", "rbind"), ("/dev", "bind"), ("/dev/pts", "bind"),
                 ("/tmp", "bind"), ("/home", "bind"), (str(CHECKOUT), "bind"),
                 *((directory, "bind") for directory in extra)]
        try:
            for source, kind in binds:
                target = self.root / source.lstrip("/") if kind else self.root / "proc"
                target.mkdir(parents=True, exist_ok=True)
                if kind is None:
                    run(["mount", "-t", "proc", "proc", str(target)])
                else:
                    run(["mount", f"--{kind}", source, str(target)])
                    self.mounts.append(str(target))
                    if kind == "rbind":
                        run(["mount", "--make-rslave", str(target)])
                    continue
                self.mounts.append(str(target))
        except BaseException:
            self.unmount()  # what was mounted before the failure
            raise

    def detach_stale_mounts(self) -> None:
        """Unmount, deepest first, every mount under the root this process did not make:
        a run killed before its teardown (a CI job stopped at its time limit) leaves the
        host's /dev, /tmp and /home bound inside, and a removal of the root would then
        delete theirs."""
        from mjf_hooks.probe.mounts import read_mounts

        prefix = f"{self.root}/"
        stale = sorted((mount.mount_point for mount in read_mounts()
                        if mount.mount_point.startswith(prefix)
                        and mount.mount_point not in self.mounts), reverse=True)
        if stale:
            self.kill_processes()
        for target in stale:
            if run(["umount", target], check=False).returncode != 0:
                run(["umount", "-l", target], check=False)  # busy: detach it now

    def kill_processes(self) -> None:
        """Kill what still runs inside (a job's step daemon, say), and wait for it."""
        deadline = time.monotonic() + 10
        while self.processes() and time.monotonic() < deadline:
            for pid in self.processes():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, 9)
            time.sleep(0.1)

    def unmount(self) -> None:
        """Kill what still runs inside, then unmount deepest first: bind mounts defeat
        any removal that would cross them."""
        self.kill_processes()
        for target in reversed(self.mounts):
            if run(["umount", "-R", target], check=False).returncode != 0:
                run(["umount", "-R", "-l", target], check=False)  # busy: detach it now
        self.mounts.clear()

    def processes(self) -> list[int]:
        """The processes whose root is this chroot."""
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if os.readlink(entry / "root") == str(self.root):
                        found.append(int(entry.name))
                except OSError:
                    continue
        return found
