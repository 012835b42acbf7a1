"""The cgroup v2 VM itself (:mod:`tests.integration.cgroup2_vm`): what its tests rely on.

A guest that never powers off is killed at its deadline, and the failure shows the
console; the kernel has cgroup v2 alone.
"""

from __future__ import annotations

import os

import pytest

from tests.integration.cgroup2_vm import CgroupV2VM, VMFailed, debian_kernel, require_vm
from tests.integration.slurm_cluster import slurm24_root

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def root():
    require_vm()
    return slurm24_root().root


def test_a_guest_that_never_powers_off_is_killed_at_its_deadline(root):
    vm = CgroupV2VM(root)
    try:
        with pytest.raises(VMFailed) as failed:
            vm.boot("echo mjf-guest-started; sleep 600", timeout=25)
        message = str(failed.value)
        assert "did not power off within 25 s" in message
        assert "mjf-guest-started" in message  # the console, which shows how far it got
        assert not os.path.exists(f"/proc/{vm.qemu_pid}")  # killed, and reaped
    finally:
        vm.remove()


def test_the_kernel_has_cgroup_v2_alone(root):
    vm = CgroupV2VM(root)
    try:
        vm.boot(f"uname -r > {vm.share}/seen\n"
                f"cat /proc/self/cgroup /proc/cmdline >> {vm.share}/seen\n"
                f"grep cgroup /proc/self/mountinfo >> {vm.share}/seen", timeout=120)
        seen = (vm.share / "seen").read_text()
        assert seen.splitlines()[0] == debian_kernel().release  # the cached one
        assert "\n0::/\n" in seen and "cgroup_no_v1=all" in seen
        mounts = [line for line in seen.splitlines() if " - cgroup" in line]
        assert len(mounts) == 1 and " - cgroup2 " in mounts[0], seen
    finally:
        vm.remove()
