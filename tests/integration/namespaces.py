"""Several "hosts" on this one machine, for the multi-node tests of any batch system.

Each host is a set of new network, UTS and mount namespaces, held open by a process this
module starts in them (``sleep``): its host name is its own, its network a veth pair
whose other end is on a bridge, and its mount namespace has files of its own bound over
the shared root (``/etc/hosts``; a node's ``/etc/mjf``). The bridge lives in one more
such namespace, the hub's, which has its own address on it. None of it touches the
host's network: the namespaces go when their holders are killed (:meth:`Namespaces.stop`,
by the pids started here), and with them their mounts, veths and the bridge - once the
daemons started in them have ended, which is their harness's part.

Used by :mod:`tests.integration.slurm_multinode` (inside a chroot: binds are made below
its root) and :mod:`tests.integration.lsf_multihost` (on the host's own root).
"""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path

from tests.conftest import run


class Namespaces:
    """The hub ``hub`` (``subnet.1`` on its bridge) and each host of ``hosts`` (name:
    address in ``subnet``), its binds below ``root``."""

    def __init__(self, hub: str, subnet: str, hosts: dict[str, str], root: Path = Path("/")
                 ) -> None:
        self.hub, self.subnet, self.hosts, self.root = hub, subnet, hosts, root
        # The process that holds each namespace set (the hub's and each host's).
        self.holders: dict[str, subprocess.Popen] = {}

    def hosts_file(self) -> str:
        """What /etc/hosts says in each namespace: every host's name and address."""
        return ("127.0.0.1 localhost\n" f"{self.subnet}.1 {self.hub}\n" +
                "".join(f"{address} {name}\n" for name, address in self.hosts.items()))

    def enter(self, name: str) -> tuple[str, ...]:
        """The ``nsenter`` command into ``name``'s namespaces (network, UTS, mount)."""
        return ("nsenter", "-t", str(self.holders[name].pid), "-n", "-u", "-m", "--")

    def start(self, hosts_file: Path, binds: dict[str, list[tuple[Path, Path]]]) -> None:
        """The hub and the hosts, each with ``hosts_file`` (written here) as /etc/hosts
        and its ``binds`` (source, target below ``root``); the bridge and veths joining
        them. If a namespace cannot be made, this raises, and ``stop()`` ends the rest."""
        hosts_file.write_text(self.hosts_file())
        etc_hosts = (hosts_file, Path("/etc/hosts"))
        self._hold(self.hub, [etc_hosts, *binds.get(self.hub, [])])
        self._in(self.hub, "ip", "link", "add", "br0", "type", "bridge")
        self._in(self.hub, "ip", "addr", "add", f"{self.subnet}.1/24", "dev", "br0")
        self._in(self.hub, "ip", "link", "set", "br0", "up")
        for index, (name, address) in enumerate(self.hosts.items(), 1):
            self._hold(name, [etc_hosts, *binds.get(name, [])])
            veth = f"mjfv{index}"  # in the hub's namespace: no clash with the machine's
            self._in(self.hub, "ip", "link", "add", veth, "type", "veth", "peer", "name",
                     "eth0", "netns", str(self.holders[name].pid))
            self._in(self.hub, "ip", "link", "set", veth, "master", "br0", "up")
            self._in(name, "ip", "addr", "add", f"{address}/24", "dev", "eth0")
            self._in(name, "ip", "link", "set", "eth0", "up")

    def stop(self) -> None:
        """Kill the holders (by their pids): their namespaces go with them."""
        for holder in self.holders.values():
            with contextlib.suppress(ProcessLookupError):
                holder.kill()
            holder.wait(timeout=30)
            holder.stdout.close()
            holder.stderr.close()
        self.holders.clear()

    def _hold(self, name: str, binds: list[tuple[Path, Path]]) -> None:
        """A holder of new network, UTS and mount namespaces whose host name is ``name``,
        with ``binds`` mounted there alone."""
        mounts = "".join(f"mount --bind {source} {self.root / target.relative_to('/')} && "
                         for source, target in binds)
        script = (f"hostname {name} && {mounts}ip link set lo up && echo ready && "
                  "exec sleep infinity")
        holder = subprocess.Popen(
            ["unshare", "--net", "--uts", "--mount", "--propagation", "private", "--",
             "sh", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.holders[name] = holder
        if holder.stdout.readline().strip() != "ready":
            holder.wait(timeout=10)
            raise RuntimeError(f"namespaces of {name} not made: {holder.stderr.read()}")

    def _in(self, name: str, *argv: str) -> None:
        """A host command (``ip``) in ``name``'s network namespace."""
        run(["nsenter", "-t", str(self.holders[name].pid), "-n", "--", *argv])
