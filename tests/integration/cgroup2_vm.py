"""A virtual machine whose kernel has cgroup v2 alone, for the tests this host cannot run.

This host's kernel mounts cgroup v1 (hybrid), and it has no VT-x; QEMU's software
emulation (TCG) still boots Debian's own kernel to its init in seconds. The VM has:

- **Debian's kernel** (the package ``linux-image-amd64`` depends on), downloaded once
  and kept in ``/srv/mjf-cgroup2-kernel`` with the few modules the VM loads: a warm run
  boots the same kernel and modules as the run that fetched them. ``cgroup_no_v1=all``
  on its command line: no v1 controller can be mounted, as on EL9 or Debian 12.
- **A root** that is a chroot the tests already build (trixie, with Slurm 24.11 or
  HTCondor, and the hooks installed as a site installs them), exported read-only over
  virtio-9p and made writable inside with an overlay on a tmpfs: nothing the VM does
  reaches the chroot. The checkout is exported read-only at its own path.
- **No network device** (``-nic none``): only the guest's loopback, with a second
  address (127.0.0.2) so that glibc's ``getaddrinfo(AI_ADDRCONFIG)``, which ignores
  127.0.0.1, resolves the node's name (slurmctld and slurmd cannot bind otherwise).
- **A share** (a directory under /tmp, writable, at the same path inside) that holds
  the guest's script ``run.sh`` and receives what it writes; its console goes to
  ``console.log`` there.

A small initramfs (busybox and the modules) mounts all that, then ``switch_root``\\ s
into the chroot's root and runs ``run.sh``, which ends by powering the VM off; or, with
``systemd``, starts systemd (the chroot's, with D-Bus) as sites run it, which runs
``run.sh`` as the oneshot unit ``mjf-guest.service`` (about 6 s more to boot). The host
waits for QEMU to exit, up to a deadline after which it kills the QEMU it started (by
its pid) and fails with the end of the console: a VM that does not come up is a clear
failure, never a hang.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from pathlib import Path

from tests.conftest import run

CHECKOUT = Path(__file__).resolve().parents[2]
KERNEL_CACHE = Path(os.environ.get("MJF_CGROUP2_KERNEL_CACHE", "/srv/mjf-cgroup2-kernel"))
# The kernel's modules the VM needs, in the order they load (the unpacked package has no
# modules.dep to resolve them): virtio's PCI transport, 9p over it, overlayfs.
MODULES = ("virtio_ring", "virtio", "virtio_pci_modern_dev", "virtio_pci_legacy_dev",
           "virtio_pci", "netfs", "fscache", "9pnet", "9pnet_virtio", "9p", "overlay")
QEMU = "qemu-system-x86_64"
BUSYBOX = Path("/bin/busybox")  # busybox-static: the initramfs has no libc
# What the guest's root holds on top of the chroot is a tmpfs: what Slurm's spool, the
# jobs' files and HTCondor's execute directories take, with room to spare.
MEMORY_MIB = 2048
CPUS = 2


class Kernel:
    """Debian's kernel unpacked in ``directory``: ``vmlinuz``, ``release``, ``modules/``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.vmlinuz = directory / "vmlinuz"
        self.release = (directory / "release").read_text().strip()
        self.modules = directory / "modules"


def debian_kernel() -> Kernel:
    """The cached kernel; downloaded and unpacked (keeping only what the VM loads) the
    first time. The first one cached stays: every later run boots the same."""
    cached = sorted(KERNEL_CACHE.glob("*/.ready"))
    if cached:
        return Kernel(cached[0].parent)
    package = _kernel_package()
    work = Path(tempfile.mkdtemp(prefix="mjf-kernel-"))
    try:
        # apt's download runs as _apt where it can: a directory it may write to.
        work.chmod(0o777)
        run(["apt-get", "download", package], cwd=work, timeout=300)
        deb = next(work.glob("*.deb"))
        run(["dpkg-deb", "-x", str(deb), str(work / "unpacked")], timeout=300)
        boot = work / "unpacked" / "boot"
        vmlinuz = next(boot.glob("vmlinuz-*"))
        release = vmlinuz.name[len("vmlinuz-"):]
        target = KERNEL_CACHE / package
        shutil.rmtree(target, ignore_errors=True)
        (target / "modules").mkdir(parents=True)
        shutil.copy(vmlinuz, target / "vmlinuz")
        tree = work / "unpacked" / "lib" / "modules" / release / "kernel"
        found = {path.name[:-len(".ko")]: path for path in tree.rglob("*.ko")}
        for module in MODULES:
            if module not in found:
                raise AssertionError(f"{package} has no module {module}.ko")
            shutil.copy(found[module], target / "modules" / f"{module}.ko")
        (target / "release").write_text(release + "\n")
        (target / ".ready").touch()
        return Kernel(target)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _kernel_package() -> str:
    """The kernel package ``linux-image-amd64`` depends on (after ``apt-get update`` if
    apt knows none yet)."""
    for attempt in range(2):
        result = run(["apt-cache", "depends", "linux-image-amd64"], check=False)
        for line in result.stdout.splitlines():
            name = line.strip().removeprefix("Depends:").strip()
            if line.strip().startswith("Depends:") and name.startswith("linux-image-"):
                return name
        if attempt == 0:
            run(["apt-get", "update", "-qq"], timeout=300)
    raise AssertionError("apt knows no kernel package for linux-image-amd64")


# The initramfs's init: mounts the root and the shares, then hands over to run.sh.
INIT = r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
fail() { echo "mjf-vm: $*"; echo o > /proc/sysrq-trigger; sleep 60; }
for module in @MODULES@; do
    insmod /modules/$module.ko || fail "cannot load $module"
done
ip link set lo up
ip addr add 127.0.0.2/8 dev lo
hostname @HOSTNAME@
ninep="trans=virtio,version=9p2000.L,msize=262144"
mkdir -p /lower /rw /newroot
# The root never changes while the VM runs: cached without revalidation, which makes
# starting a Python from it several times faster.
mount -t 9p -o $ninep,cache=loose,ro root /lower || fail "cannot mount the root"
mount -t tmpfs -o mode=0755 rw /rw
mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work overlay /newroot \
    || fail "cannot mount the overlay"
echo "127.0.0.2 @HOSTNAME@" >> /newroot/etc/hosts
mount -t tmpfs -o mode=0755 run /newroot/run
mount -t tmpfs -o mode=1777 tmp /newroot/tmp
mkdir -p /newroot@CHECKOUT@ /newroot@SHARE@
mount -t 9p -o $ninep,cache=loose,ro checkout /newroot@CHECKOUT@ || fail "no checkout"
mount -t 9p -o $ninep share /newroot@SHARE@ || fail "cannot mount the share"
mount --move /dev /newroot/dev
mkdir -p /newroot/dev/pts /newroot/dev/shm
mount -t devpts devpts /newroot/dev/pts
mount -t tmpfs -o mode=1777 shm /newroot/dev/shm
mount --move /sys /newroot/sys
mount --move /proc /newroot/proc
@START@
"""
# Without systemd: run.sh is the first process, on cgroup2 mounted as systemd mounts it.
START_SCRIPT = """# As systemd mounts it on a v2 host.
mount -t cgroup2 -o nsdelegate,memory_recursiveprot cgroup2 /newroot/sys/fs/cgroup \\
    || fail "cannot mount cgroup2"
exec switch_root /newroot /bin/sh @SHARE@/run.sh"""
# With systemd as the first process (it mounts cgroup2 itself): run.sh is the unit the
# kernel's command line names, after D-Bus's socket (what slurmd asks systemd through).
START_SYSTEMD = """cp /mjf-guest.service /newroot/etc/systemd/system/mjf-guest.service
echo @HOSTNAME@ > /newroot/etc/hostname
exec switch_root /newroot /lib/systemd/systemd"""
GUEST_UNIT = """[Unit]
Description=The mjf VM's guest script
Requires=dbus.socket
After=dbus.socket

[Service]
Type=oneshot
ExecStart=/bin/sh @SHARE@/run.sh
StandardOutput=journal+console
StandardError=journal+console
"""
SYSTEMD_ARGS = "systemd.unit=mjf-guest.service systemd.show_status=0"


def _cpio(entries: list[tuple[str, int, bytes, int]]) -> bytes:
    """A ``newc`` cpio archive (the initramfs format) of (name, mode, data, rdev)."""
    out = io.BytesIO()
    for inode, (name, mode, data, rdev) in enumerate([*entries, ("TRAILER!!!", 0, b"", 0)],
                                                    start=1):
        encoded = name.encode() + b"\0"
        fields = (inode, mode, 0, 0, 1, 0, len(data), 0, 0, os.major(rdev), os.minor(rdev),
                  len(encoded), 0)
        out.write(b"070701" + b"".join(b"%08X" % field for field in fields) + encoded)
        out.write(b"\0" * (-out.tell() % 4) + data)
        out.write(b"\0" * (-out.tell() % 4))
    return out.getvalue()


def build_initramfs(kernel: Kernel, share: Path, hostname: str, systemd: bool = False) -> Path:
    """The initramfs for a VM with this ``share`` and host name, in the share; with
    ``systemd``, systemd is the first process and runs run.sh as a unit."""
    init = (INIT.replace("@START@", START_SYSTEMD if systemd else START_SCRIPT)
            .replace("@MODULES@", " ".join(MODULES)).replace("@CHECKOUT@", str(CHECKOUT))
            .replace("@SHARE@", str(share)).replace("@HOSTNAME@", hostname))
    directory = stat.S_IFDIR | 0o755
    entries = [(name, directory, b"", 0) for name in ("bin", "dev", "proc", "sys", "modules")]
    entries += [("dev/console", stat.S_IFCHR | 0o600, b"", os.makedev(5, 1)),
                ("bin/busybox", stat.S_IFREG | 0o755, BUSYBOX.read_bytes(), 0),
                ("init", stat.S_IFREG | 0o755, init.encode(), 0)]
    entries += [(f"modules/{module}.ko", stat.S_IFREG | 0o644,
                 (kernel.modules / f"{module}.ko").read_bytes(), 0) for module in MODULES]
    if systemd:
        entries.append(("mjf-guest.service", stat.S_IFREG | 0o644,
                        GUEST_UNIT.replace("@SHARE@", str(share)).encode(), 0))
    path = share / "initramfs.gz"
    path.write_bytes(gzip.compress(_cpio(entries), compresslevel=1))
    return path


# Ends every guest script: whatever it did, the VM powers off (sysrq: no init to ask).
POWER_OFF = "sync\necho o > /proc/sysrq-trigger\nsleep 60\n"


class VMFailed(AssertionError):
    """The VM did not finish its script: why, with the end of its console."""


class CgroupV2VM:
    """One boot of the VM with ``root`` as its root filesystem, running ``script`` (a
    shell script's body) as its first process, or with ``systemd`` as a unit of systemd;
    what it writes to ``self.share`` is there after :meth:`boot` returns."""

    def __init__(self, root: Path, hostname: str = "vm2", systemd: bool = False) -> None:
        self.root = root
        self.systemd = systemd
        self.hostname = hostname
        self.share = Path(tempfile.mkdtemp(prefix="mjf-vm-"))
        self.share.chmod(0o755)
        self.console = self.share / "console.log"
        self.seconds: float | None = None  # how long the boot took, to power-off
        self.qemu_pid: int | None = None

    def boot(self, script: str, timeout: float) -> None:
        """Boot, run ``script`` as root inside, and wait for the power-off; a VM still
        running at ``timeout`` seconds is killed and the boot fails with its console."""
        kernel = debian_kernel()
        initramfs = build_initramfs(kernel, self.share, self.hostname, self.systemd)
        (self.share / "run.sh").write_text(
            "#!/bin/sh\nexport PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
            f"\nexport HOME=/root\ncd /\n{script}\n{POWER_OFF}")
        argv = [QEMU, "-accel", "tcg", "-m", str(MEMORY_MIB), "-smp", str(CPUS),
                "-display", "none", "-monitor", "none", "-serial", f"file:{self.console}",
                "-no-reboot", "-nic", "none", "-kernel", str(kernel.vmlinuz),
                "-initrd", str(initramfs),
                "-append", "console=ttyS0 quiet panic=-1 cgroup_no_v1=all"
                + (f" {SYSTEMD_ARGS}" if self.systemd else ""),
                *self._export(self.root, "root", readonly=True),
                *self._export(CHECKOUT, "checkout", readonly=True),
                *self._export(self.share, "share", readonly=False)]
        started = time.monotonic()
        # Its own process group: a kill reaches QEMU's threads and nothing of ours.
        qemu = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
        self.qemu_pid = qemu.pid
        try:
            output, _ = qemu.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(qemu.pid, signal.SIGKILL)
            qemu.wait()
            raise VMFailed(f"the VM did not power off within {timeout:.0f} s\n"
                           f"{self.console_tail()}") from None
        self.seconds = time.monotonic() - started
        if qemu.returncode != 0:
            raise VMFailed(f"{QEMU} exited {qemu.returncode}: {output.decode()[-2000:]}\n"
                           f"{self.console_tail()}")
        if "mjf-vm:" in self.console_text():
            raise VMFailed(f"the VM could not start its script\n{self.console_tail()}")

    @staticmethod
    def _export(path: Path, tag: str, readonly: bool) -> list[str]:
        return ["-virtfs", f"local,path={path},mount_tag={tag},security_model=none"
                + (",readonly=on" if readonly else "")]

    def console_text(self) -> str:
        return self.console.read_text(errors="replace") if self.console.exists() else ""

    def console_tail(self, characters: int = 6000) -> str:
        return f"== console (the last {characters} characters)\n" \
            f"{self.console_text()[-characters:]}"

    def remove(self) -> None:
        """Remove the share, unless $MJF_KEEP_VM_SHARE is 1 (to look at what the guest
        wrote, or to record fixtures from it: its path is printed)."""
        if os.environ.get("MJF_KEEP_VM_SHARE") == "1":
            print(f"kept the VM's share: {self.share}")
            return
        shutil.rmtree(self.share, ignore_errors=True)


def require_vm() -> None:
    """Skip (fail in CI) unless a VM can be booted here."""
    from tests.conftest import require

    require(os.geteuid() == 0, "needs root for the chroots the VM boots from")
    require(shutil.which(QEMU) is not None,
            f"needs {QEMU} (qemu-system-x86, tests/setup-system)")
    require(BUSYBOX.exists(), "needs busybox-static for the VM's initramfs (tests/setup-system)")


class GuestRun:
    """What a guest program (:mod:`tests.integration.guest`) wrote, and its VM."""

    def __init__(self, vm: CgroupV2VM, results: dict) -> None:
        self.vm = vm
        self.results = results
        self.errors: dict[str, str] = results.get("errors", {})

    def log(self, characters: int = 8000) -> str:
        """The guest program's own output and the VM's console: for a failure's message."""
        path = self.vm.share / "guest.log"
        text = path.read_text(errors="replace") if path.exists() else "(no guest.log)"
        return f"== guest.log\n{text[-characters:]}\n{self.vm.console_tail()}"

    def check(self, part: str) -> dict:
        """The results, once the guest's ``part`` is known to have run without error."""
        assert part in self.results.get("seconds", {}), f"part {part} never ran\n{self.log()}"
        assert part not in self.errors, f"{part} failed in the VM:\n{self.errors[part]}\n" \
            f"{self.log()}"
        return self.results


def run_guest(root: Path, program: str, plan: dict, files: dict[str, str],
              timeout: float, systemd: bool = False) -> GuestRun:
    """Boot a VM on ``root`` and run ``tests.integration.guest.<program>`` in it, with
    ``plan`` (plan.json) and ``files`` (name: text, readable by every user) in its share,
    and ``out/`` there writable by every user (where jobs write what they saw); with
    ``systemd``, systemd is the VM's first process."""
    vm = CgroupV2VM(root, systemd=systemd)
    (vm.share / "plan.json").write_text(json.dumps(plan))
    for name, text in files.items():
        (vm.share / name).write_text(text)
        (vm.share / name).chmod(0o644)
    (vm.share / "out").mkdir()
    (vm.share / "out").chmod(0o1777)
    vm.boot(f"cd {CHECKOUT}\npython3 -m tests.integration.guest.{program} {vm.share} "
            f"> {vm.share}/guest.log 2>&1", timeout=timeout)
    path = vm.share / "results.json"
    if not path.exists():
        raise VMFailed(f"the guest program {program} wrote no results\n"
                       + GuestRun(vm, {}).log())
    return GuestRun(vm, json.loads(path.read_text()))
