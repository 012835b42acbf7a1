"""The packaged install (``--deb PATH``, as root): the Debian package installed with apt
into a scratch copy of the packaging tests' clean bookworm root
(tests/packaging/bookworm_root.py; its /run, the base_dir, and /tmp, the scratch, on
tmpfs), the hooks started there with the root's system python (``chroot ROOT
/usr/bin/mjf-slurm`` ..., no venv), against their own floor measured the same way,
``chroot ROOT /usr/bin/python3 -I -c pass`` (so chroot's exec is in both), and for
reference that start execing ``/bin/true`` in the root; the root is removed afterwards.
Without ``--deb`` the rows say "not measured"."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from .. import FIXTURES
from ..bench import Bench
from ..measure import EXEC_JOB, NOT_MEASURED, Command
from ..scenario import Scenario
from .htcondor import starter_env
from .slurm import recorded_env

PACKAGED_FLOOR = "packaged python floor"  # the system python of the packaged install
CONFIG = "/root/mjf-bench.conf"  # in the root


class Packaged(Scenario):
    def __init__(self, bench: Bench) -> None:
        super().__init__(bench)
        self.scratch = None
        self.root = "ROOT"
        self._scratch_count = 0
        if bench.deb:
            self._install(bench.deb)
        from tests.packaging.bookworm_root import CHROOT

        chroot = [CHROOT, self.root]
        env = bench.env_for(CONFIG)
        missing = None if bench.deb else NOT_MEASURED
        self.commands = [
            Command("packaged (.deb, bookworm): `chroot ROOT /usr/bin/python3 -I -c pass`",
                    [*chroot, "/usr/bin/python3", "-I", "-c", "pass"], PACKAGED_FLOOR, env,
                    is_floor=True, missing=missing),
            Command(f'packaged: `chroot ROOT /usr/bin/python3 -I -c "{EXEC_JOB}"`: a bare '
                    "start that execs the job (reference)",
                    [*chroot, "/usr/bin/python3", "-I", "-c", EXEC_JOB], PACKAGED_FLOOR,
                    env, missing=missing),
            Command("packaged: `mjf-slurm` Prolog, a recorded Slurm 24.11 job",
                    [*chroot, "/usr/bin/mjf-slurm"], PACKAGED_FLOOR,
                    recorded_env("cgv1-prolog", CONFIG), missing=missing),
            Command("packaged: `mjf-slurm` Epilog, a recorded Slurm 24.11 job",
                    [*chroot, "/usr/bin/mjf-slurm"], PACKAGED_FLOOR,
                    recorded_env("cgv1-epilog", CONFIG), missing=missing),
            Command("packaged: `mjf run -- /bin/true`",
                    [*chroot, "/usr/bin/mjf", "run", "--wall-limit", "3600", "--", "/bin/true"],
                    PACKAGED_FLOOR, env, missing=missing),
            Command("packaged: `mjf-htcondor-wrapper /bin/true`",
                    [*chroot, "/usr/bin/mjf-htcondor-wrapper", "/bin/true"], PACKAGED_FLOOR,
                    self.wrapper_env, missing=missing),
        ]

    def _install(self, deb: str) -> None:
        from tests.packaging import bookworm_root

        if os.geteuid() != 0:
            sys.exit("--deb needs root (a chroot)")
        bookworm_root.ensure_pristine()
        self.scratch = bookworm_root.ScratchRoot(Path("/var/tmp"))
        self.root = str(self.scratch.path)
        try:
            self.scratch.create()
            for directory in ("run", "tmp"):
                target = self.scratch.path / directory
                subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=1777", "tmpfs",
                                str(target)], check=True)
                self.scratch.mounted.append(target)
            self.scratch.install_deb(Path(deb))
            ads = self.scratch.path / "root/ads"
            ads.mkdir()
            for name in ("job.ad", "machine.ad"):
                shutil.copy(os.path.join(FIXTURES, "htcondor-23.9", name), ads / name)
            # The benchmark's config, its base_dir in the root's /run.
            with open(self.bench.config) as handle:
                config = handle.read().replace(f"base_dir = {self.bench.base}",
                                               "base_dir = /run/mjf-bench")
            (self.scratch.path / CONFIG.lstrip("/")).write_text(config)
        except BaseException:
            self.close()
            raise

    def wrapper_env(self) -> dict[str, str]:
        """A starter's environment with a fresh scratch directory in the root."""
        self._scratch_count += 1
        scratch = f"/tmp/scratch-{self._scratch_count}"
        os.mkdir(self.root + scratch, 0o700)
        return starter_env(CONFIG, scratch, "/root/ads/job.ad", "/root/ads/machine.ad")

    def finish(self) -> list[str]:
        jobs = os.path.join(self.root, "run/mjf-bench/jobs")
        left = os.listdir(jobs) if self.scratch and os.path.isdir(jobs) else []
        return [f"packaged job directories {left}"] if left else []

    def close(self) -> None:
        if self.scratch:
            self.scratch.destroy()
            self.scratch = None
