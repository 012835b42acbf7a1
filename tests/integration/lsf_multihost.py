"""A volclava cluster of three hosts on this one machine, for jobs across hosts.

Each host (``lsfh1``..``lsfh3``, 10.214.0.11..) is a set of namespaces of its own
(:mod:`tests.integration.namespaces`): its host name, its network on a bridge in the
hub's namespace (``lsfhub``, 10.214.0.1), and its mounts, where its own directory is
bound over /etc/mjf: each host its own mjf.conf, base_dir, records directory and hs06;
and over /tmp, as each host has its own (where a job's user keeps its directory when it
cannot write base_dir: ``/tmp/mjf-<uid>``). So everything the hosts share lives
elsewhere: the job root and the cluster's configuration in /var/tmp, LSF's job tmpdirs
in /dev/shm, the hooks where tests/run installs them (not under /tmp), the homes.
Its ``lim``, ``res`` and ``sbatchd`` run there, on volclava's usual ports (the network
is the host's own); ``lsfh1`` is the master (the first host of ``lsf.cluster``), where
LSF's commands and the users' submissions run. Everything else is
:class:`~tests.integration.lsf_cluster.LsfCluster`'s: one configuration, read by all.
``stop()`` ends the daemons as it does, then the namespaces.
"""

from __future__ import annotations

import contextlib
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import require
from tests.integration.job_side import READERS_JDL, install
from tests.integration.lsf_cluster import DUMP, PREFIX, LsfCluster
from tests.integration.namespaces import Namespaces
from tests.integration.site import HOOKS_BIN, mjf_site

SUBNET = "10.214.0"


@dataclass(frozen=True)
class Host:
    name: str
    address: str
    hs06_per_cpu: int


HOSTS = (Host("lsfh1", f"{SUBNET}.11", 10), Host("lsfh2", f"{SUBNET}.12", 15),
         Host("lsfh3", f"{SUBNET}.13", 20))

HOST_CONFIG = """\
[mjf]
base_dir = {base}
batch_systems = lsf
[machinefeatures]
hs06_per_cpu = {host.hs06_per_cpu}
grace_secs = 600
[records]
dir = {records}
[lsf]
bjobs = {prefix}/bin/bjobs
"""


class MultiHostLsfCluster(LsfCluster):
    """An :class:`LsfCluster` whose hosts are ``hosts``, each in its own namespaces."""

    def __init__(self, root: Path, hosts: tuple[Host, ...] = HOSTS) -> None:
        super().__init__(root, hosts=tuple(host.name for host in hosts))
        self.specs = {host.name: host for host in hosts}
        self.namespaces = Namespaces("lsfhub", SUBNET, {host.name: host.address
                                                        for host in hosts})

    def on_host(self, host: str) -> tuple[str, ...]:
        return self.namespaces.enter(host)

    def host_dir(self, name: str) -> Path:
        """Host ``name``'s own directory: ``etc`` (its /etc/mjf), ``mjf`` (its base_dir),
        ``records``."""
        return self.root / "hosts" / name

    def host_base(self, name: str) -> Path:
        return self.host_dir(name) / "mjf"

    def mjf_on(self, name: str, *args: str) -> subprocess.CompletedProcess:
        """An admin's `mjf` command on host ``name``, with that host's config."""
        return subprocess.run([*self.on_host(name), str(HOOKS_BIN / "mjf"), *args],
                              capture_output=True, text=True, timeout=60, env=self.env)

    def start(self) -> None:
        binds = {}
        for name, host in self.specs.items():
            etc = self.host_dir(name) / "etc"
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "mjf.conf").write_text(HOST_CONFIG.format(
                base=self.host_base(name), host=host, records=self.host_dir(name) / "records",
                prefix=PREFIX))
            tmp = self.host_dir(name) / "tmp"
            tmp.mkdir(mode=0o1777)
            tmp.chmod(0o1777)
            binds[name] = [(etc, Path("/etc/mjf")), (tmp, Path("/tmp"))]
        # The namespaces first: if they cannot be made, no daemon was started.
        self.namespaces.start(self.root / "hosts-file", binds)
        super().start()

    def stop(self) -> None:
        try:
            if self.namespaces.holders:  # else no daemon started, nor may bkill run
                super().stop()
        finally:
            self.namespaces.stop()


@contextlib.contextmanager
def multihost_cluster():
    """A started :class:`MultiHostLsfCluster` with ``job_root`` (``dump.py``, ``out/``);
    everything is stopped and removed afterwards."""
    require(not HOOKS_BIN.is_relative_to("/tmp"),
            f"needs the hooks outside /tmp, which each host has its own of (not {HOOKS_BIN})")
    with mjf_site("mjf-lsf-multi-", DUMP, "lsf", parent="/var/tmp") as site:
        install(site.root, {"two.jdl": READERS_JDL})
        cluster = MultiHostLsfCluster(site.root / "lsf")
        cluster.job_root = site.root
        try:
            cluster.start()
            yield cluster
        finally:
            cluster.stop()
