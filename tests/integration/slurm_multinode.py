"""A Slurm 24.11 cluster of three nodes on this one machine, for multi-node jobs.

Every daemon runs in the Slurm 24.11 chroot (:func:`~tests.integration.slurm_cluster.
slurm24_root`), each in namespaces this harness makes, never touching the host's
network (:mod:`tests.integration.namespaces` makes them):

* the controller (``mjfctl``, 10.213.0.1): its own network, UTS and mount namespaces,
  holding the bridge ``br0`` that joins the nodes. slurmctld runs there, and so do
  Slurm's commands and the users' submissions (srun's replies come back to it);
* each node (``mjfn1``..``mjfn3``, 10.213.0.11..): its own network namespace (a veth
  pair, its other end on the bridge), UTS namespace (its host name is its NodeName)
  and mount namespace, where its own directory is bind-mounted over the chroot's
  /etc/mjf: each node its own mjf.conf, base_dir, records directory and ``hs06``.

The nodes differ in CPUs and RealMemory (``SlurmdParameters=config_overrides`` lets a
slurmd claim CPUs the machine lacks) and in hs06_per_cpu; munge (one munged, its
socket under /tmp) is shared. A namespace lives as long as the holder process this
harness started in it (``sleep``): ``stop()`` ends the daemons as
:class:`SlurmCluster` does, then kills the holders by their pids, and with them go
the namespaces, their mounts, the veths and the bridge. Its ports (7827, 7828) and
state are its own, so it can run beside the one-node clusters.

For later tests: :meth:`MultiNodeCluster.on_node` runs a command in a node's
namespaces (inside the chroot), :meth:`~MultiNodeCluster.restart_slurmd` restarts
its slurmd there, ``nodes`` names them, ``specs`` gives their sizes and hs06, and
``conf`` is slurm.conf.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tests.integration.job_side import dump_script
from tests.integration.namespaces import Namespaces
from tests.integration.site import mjf_site
from tests.integration.slurm_cluster import SlurmCluster, require_slurm, slurm24_root
from tests.integration.trixie_root import TrixieRoot

SUBNET = "10.213.0"
CONTROLLER = "mjfctl"


@dataclass(frozen=True)
class Node:
    """One node as slurm.conf and its mjf.conf describe it."""

    name: str
    address: str
    cpus: int
    memory_mib: int
    hs06_per_cpu: int


NODES = (Node("mjfn1", f"{SUBNET}.11", 2, 1500, 10),
         Node("mjfn2", f"{SUBNET}.12", 3, 2000, 15),
         Node("mjfn3", f"{SUBNET}.13", 4, 2500, 20))

NODE_CONFIG = """\
[mjf]
base_dir = {base}
[machinefeatures]
total_cpu = {node.cpus}
hs06_per_cpu = {node.hs06_per_cpu}
grace_secs = 600
[records]
dir = {records}
"""


class MultiNodeCluster(SlurmCluster):
    """slurmctld and one slurmd per node of ``nodes``, each in its own namespaces."""

    ports = (7827, 7828)
    slurmd_name, slurmd_spool = "slurmd-%n", "spool/%n"

    def __init__(self, root: Path, chroot: TrixieRoot, nodes: tuple[Node, ...] = NODES) -> None:
        super().__init__(root, Path("/usr/bin"), cgroups=False, chroot=chroot)
        self.specs = {node.name: node for node in nodes}
        self.nodes = tuple(self.specs)
        self.node = self.nodes[0]
        self.controller = f"{CONTROLLER}({SUBNET}.1)"
        self.namespaces = Namespaces(CONTROLLER, SUBNET, {
            node.name: node.address for node in nodes}, root=chroot.root)

    # --- reaching the nodes -------------------------------------------------------

    def node_enter(self, name: str) -> tuple[str, ...]:
        """The ``nsenter`` command into node ``name``'s (or the controller's) namespaces."""
        return self.namespaces.enter(name)

    def on_node(self, name: str, argv: list[str], user: str | None = None, check: bool = True,
                timeout: int = 60, env: dict[str, str] | None = None
                ) -> subprocess.CompletedProcess:
        """``argv`` on node ``name``: in its namespaces, inside the chroot (where its
        /etc/mjf/mjf.conf is its own), as root or ``user``."""
        return self.chroot.chroot(argv, user=user, check=check, timeout=timeout,
                                  env={**self.env, **(env or {})}, enter=self.node_enter(name))

    def mjf_on(self, name: str, *args: str) -> subprocess.CompletedProcess:
        """An admin's `mjf` command on node ``name``, with that node's config."""
        return self.on_node(name, ["/usr/bin/mjf", *args], check=False)

    def node_dir(self, name: str) -> Path:
        """Node ``name``'s own directory: ``etc/mjf.conf`` (its /etc/mjf), ``mjf`` (its
        base_dir), ``records``."""
        return self.root / "nodes" / name

    def node_base(self, name: str) -> Path:
        return self.node_dir(name) / "mjf"

    def node_config(self, name: str) -> str:
        node = self.specs[name]
        return NODE_CONFIG.format(base=self.node_base(name), node=node,
                                  records=self.node_dir(name) / "records")

    # --- slurm.conf ---------------------------------------------------------------

    def _node_lines(self) -> str:
        lines = "SlurmdParameters=config_overrides\n"
        for node in self.specs.values():
            lines += (f"NodeName={node.name} NodeHostname={node.name} NodeAddr={node.address} "
                      f"CPUs={node.cpus} RealMemory={node.memory_mib} State=UNKNOWN\n")
        return lines

    def _scheduler_extra(self) -> str:
        return ",extra_constraints"  # jobs may match on node facts: --extra

    def pidfiles(self) -> list[Path]:
        return [*(self.root / f"slurmd-{name}.pid" for name in self.nodes),
                self.root / "slurmctld.pid"]

    # --- namespaces and daemons -----------------------------------------------------

    def _start_namespaces(self) -> None:
        (self.chroot.root / "etc/mjf").mkdir(exist_ok=True)
        binds = {}
        for name in self.nodes:
            etc = self.node_dir(name) / "etc"
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "mjf.conf").write_text(self.node_config(name))
            binds[name] = [(etc, Path("/etc/mjf"))]
        self.namespaces.start(self.root / "hosts", binds)
        # From here on Slurm's commands run in the controller's namespaces: the host's
        # network never sees them.
        self.enter = self.node_enter(CONTROLLER)

    def _start_munge(self) -> None:
        # The namespaces first: if they cannot be made, nothing else was started.
        self._start_namespaces()
        super()._start_munge()

    def _start_daemons(self) -> None:
        (self.root / "spool").mkdir(exist_ok=True)
        self.command(["/usr/sbin/slurmctld", "-c", "-f", str(self.conf)])
        for name in self.nodes:
            (self.root / "spool" / name).mkdir(exist_ok=True)
            self.on_node(name, ["/usr/sbin/slurmd", "-f", str(self.conf), "-N", name])

    def restart_slurmd(self, name: str) -> None:
        """Stop node ``name``'s slurmd (by its pid file) and start it again, in its
        namespaces; back once slurmctld sees the node up."""
        pidfile = self.root / f"slurmd-{name}.pid"
        pid = int(pidfile.read_text())
        deadline = time.monotonic() + 30
        signalled = 0.0
        while Path(f"/proc/{pid}").exists():
            assert time.monotonic() < deadline, f"slurmd of {name} (pid {pid}) did not stop"
            if time.monotonic() - signalled > 5:  # again: one sent as it re-executed is lost
                os.kill(pid, signal.SIGTERM)
                signalled = time.monotonic()
            time.sleep(0.1)
        self.on_node(name, ["/usr/sbin/slurmd", "-f", str(self.conf), "-N", name])
        while self.node_state(name) not in ("idle", "mixed", "allocated"):
            assert time.monotonic() < deadline + 60, f"{name}: {self.node_state(name)}"
            time.sleep(0.3)

    def stop(self) -> None:
        if CONTROLLER in self.namespaces.holders:  # else no daemon started, nor may scontrol
            super().stop()
        self.namespaces.stop()


# Runs inside the job as its user, once per task: what the task's node gave it.
DUMP = dump_script(("SLURM_JOB_ID", "SLURMD_NODENAME", "SLURM_NODEID", "SLURM_PROCID",
                    "SLURM_STEP_ID", "SLURM_JOB_NODELIST", "SLURM_JOB_CPUS_PER_NODE",
                    "SLURM_CPUS_ON_NODE"),
                   'sys.argv[1] + "." + os.environ.get("SLURM_PROCID", "0")', argv=None)


@contextlib.contextmanager
def multinode_cluster():
    """A started :class:`MultiNodeCluster` with ``job_root`` (holds ``dump.py`` and
    ``out/``); everything is removed afterwards."""
    require_slurm("24.11")
    with mjf_site("mjf-slurm-multi-", DUMP, "slurm") as site:
        chroot = slurm24_root()
        chroot.mount()
        slurm = MultiNodeCluster(site.root / "slurm", chroot)
        slurm.job_root = site.root
        try:
            slurm.start()
            yield slurm
        finally:
            slurm.stop()
            chroot.unmount()
