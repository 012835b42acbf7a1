"""A Debian trixie node that the real ansible-core configures with contrib/ansible's role,
and the Slurm 24.11 cluster that runs there with the hook lines the role wrote.

The node is an overlay over the Slurm 24.11 chroot (:func:`slurm24_root`, which has
ansible-core, python3-apt and python3-click installed with apt), its upper directory in
a scratch directory: what the role changes (the package, /etc/mjf, the enabled timer)
goes with that directory, and the cached root stays as built. The hooks that root has
from wheels are removed in the overlay, so only the .deb built from the checkout
(:func:`build_deb`) can run a job's Prolog. ``ansible-playbook`` runs inside, against
localhost with the local connection (a chroot connection is not in ansible-core), on
contrib/ansible/site.yml with an inventory of one worker node; the checkout, bound at
its own path, provides the play and the role.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from tests.integration.site import mjf_site, run
from tests.integration.slurm_cluster import DUMP, HOOKS, SlurmCluster, slurm24_root
from tests.integration.trixie_root import CHECKOUT, TrixieRoot
from tests.packaging.bookworm_root import build_deb

PLAY = CHECKOUT / "contrib/ansible/site.yml"
ROLES = CHECKOUT / "contrib/ansible/roles"
# The slurm.conf settings the role owns (its mjf_slurm_settings): the cluster's own
# slurm.conf leaves them out, so every one a job depends on is the role's.
ROLE_KEYS = ("Prolog", "Epilog", "TaskProlog", "PrologFlags", "PrologEpilogTimeout")
# The worker_nodes group of site.yml: this node, as root already (no sudo inside).
INVENTORY = ("[worker_nodes]\nlocalhost ansible_connection=local "
             "ansible_python_interpreter=/usr/bin/python3 ansible_become=false\n")


class RoleWiredCluster(SlurmCluster):
    """A Slurm 24.11 cluster whose slurm.conf has no hook lines of the harness: the role
    adds them. Its config is written once, before the role runs, and kept at the start."""

    def _hook_lines(self) -> str:
        return ""

    def slurm_conf(self) -> str:
        return "".join(line for line in super().slurm_conf().splitlines(keepends=True)
                       if line.split("=")[0] not in ROLE_KEYS)

    def write_config(self) -> None:
        if not self.conf.exists():
            super().write_config()


class PlayRun:
    """One ansible-playbook run: its exit status, output and PLAY RECAP line (its
    counts: changed, failed, ...)."""

    def __init__(self, returncode: int, output: str) -> None:
        self.returncode = returncode
        self.output = output
        # Empty where the play never ran (a syntax error): the assertions show the output.
        lines = output.splitlines()
        start = next((i for i, line in enumerate(lines) if line.startswith("PLAY RECAP")),
                     len(lines))
        self.recap = next((line.strip() for line in lines[start:]
                           if line.startswith("localhost")), "")
        self.counts = {key: int(value) for key, value in re.findall(r"(\w+)=(\d+)", self.recap)}


class AnsibleNode:
    """The overlay node in ``scratch`` (its upper, work and merged directories)."""

    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        self.merged = scratch / "merged"
        # The TrixieRoot's chroot, mounts and process clean-up, on the merged tree.
        self.root = TrixieRoot(self.merged, (), ())
        self.runs = 0

    def mount(self, lower: Path) -> None:
        for name in ("upper", "work", "merged"):
            (self.scratch / name).mkdir()
        run(["mount", "-t", "overlay", "mjf-ansible", "-o",
             f"lowerdir={lower},upperdir={self.scratch}/upper,workdir={self.scratch}/work",
             str(self.merged)])
        try:
            shutil.copy("/etc/hosts", self.merged / "etc/hosts")
            self.root.copy_users()
            # A node that never had the hooks: nothing but the .deb may provide them.
            shutil.rmtree(self.merged / "opt/mjf")
            for command in HOOKS:
                (self.merged / "usr/bin" / command).unlink()
            self.root.mount()
        except BaseException:
            self.unmount()
            raise

    def unmount(self) -> None:
        self.root.unmount()
        if run(["umount", str(self.merged)], check=False).returncode != 0:
            run(["umount", "-l", str(self.merged)], check=False)

    def play(self, variables: dict) -> PlayRun:
        """site.yml on this node with ``variables`` (extra vars: over the play's own)."""
        self.runs += 1
        inventory = self.scratch / "inventory"
        inventory.write_text(INVENTORY)
        extra = self.scratch / f"vars-{self.runs}.json"
        extra.write_text(json.dumps(variables))
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root",
               # ansible-core refuses to start without a UTF-8 locale.
               "LC_ALL": "C.UTF-8", "ANSIBLE_ROLES_PATH": str(ROLES), "ANSIBLE_NOCOLOR": "1"}
        result = self.root.chroot(["ansible-playbook", "-i", str(inventory), "-e",
                                   f"@{extra}", str(PLAY)], env=env, timeout=300, check=False)
        return PlayRun(result.returncode, result.stdout + result.stderr)


def cpu_model() -> str | None:
    """This machine's CPU model as a `cpu=` section matches it (None: the kernel names
    none, as on ARM). Read here, not by mjf_hooks.probe.cpu.model_name: the test's own
    account of what the role's section must match."""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return None


@contextlib.contextmanager
def ansible_node():
    """A mounted overlay node, the .deb built from the checkout (``deb``, inside the
    node at the same path), an unstarted :class:`RoleWiredCluster` (``cluster``) whose
    slurm.conf is written, and the job root of :func:`mjf_site` (``site``); everything
    removed afterwards."""
    lower = slurm24_root().root
    with mjf_site("mjf-ansible-", DUMP, "slurm") as site:
        scratch = Path(tempfile.mkdtemp(prefix="mjf-ansible-"))
        node = AnsibleNode(scratch)
        try:
            (scratch / "deb").mkdir()
            node.deb = build_deb(scratch / "deb", unit_tests=False)
            node.site = site
            node.mount(lower)
            cluster = RoleWiredCluster(site.root / "slurm", Path("/usr/bin"), cgroups=False,
                                       chroot=node.root)
            cluster.mjf_base, cluster.job_root = site.base, site.root
            cluster.write_config()
            node.cluster = cluster
            yield node
        finally:
            if node.merged.is_dir() and os.path.ismount(node.merged):
                node.unmount()
            # Never across a mount point: what a failed unmount left stays where it is.
            if not os.path.ismount(node.merged):
                run(["rm", "-rf", "--one-file-system", str(scratch)], check=False)
