"""The packaged install (``--deb PATH``, as root): the Debian package installed with apt
into a scratch copy of the packaging tests' clean bookworm root
(tests/packaging/bookworm_root.py; its /run, the base_dir, and /tmp, the scratch, on
tmpfs), the hooks started there with the root's system python (``chroot ROOT
/usr/bin/mjf-slurm`` ..., no venv), against their own floor measured the same way,
``chroot ROOT /usr/bin/python3 -I -c pass`` (so chroot's exec is in both), and for
reference that start execing ``/bin/true`` in the root; the root is removed afterwards.
The sh TaskProlog is timed as a site runs it, with the default config (the benchmark's,
as the root's /etc/mjf/mjf.conf) and what the Prolog kept of it in /run/mjf-hooks,
against ``chroot ROOT /bin/sh -c :``. Without ``--deb`` the rows say "not measured"."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from .. import FIXTURES
from ..bench import Bench
from ..measure import EXEC_JOB, NOT_MEASURED, Command, measure
from ..scenario import Scenario
from .htcondor import starter_env
from .slurm import job_env, recorded_env, task_job

PACKAGED_FLOOR = "packaged python floor"  # the system python of the packaged install
PACKAGED_SH_FLOOR = "packaged sh floor"
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
        # The TaskProlog's job, with the default config: no $MJF_CONFIG.
        self.task_env = {name: value for name, value in job_env(
            "", "2000", "prolog_task", int(time.time())).items() if name != "MJF_CONFIG"}
        self.task_env["PATH"] = "/usr/bin:/bin"
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
            Command("packaged: `chroot ROOT /bin/sh -c :`", [*chroot, "/bin/sh", "-c", ":"],
                    PACKAGED_SH_FLOOR, env, is_floor=True, missing=missing),
            Command("packaged: `mjf-slurm-taskprolog` (per task), the default config and "
                    "what the Prolog kept of it", [*chroot, "/usr/bin/mjf-slurm-taskprolog"],
                    PACKAGED_SH_FLOOR, self.task_env, missing=missing),
        ]
        self.chroot = chroot

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
            (self.scratch.path / "etc/mjf/mjf.conf").write_text(config)  # the TaskProlog's
        except BaseException:
            self.close()
            raise

    def wrapper_env(self) -> dict[str, str]:
        """A starter's environment with a fresh scratch directory in the root."""
        self._scratch_count += 1
        scratch = f"/tmp/scratch-{self._scratch_count}"
        os.mkdir(self.root + scratch, 0o700)
        return starter_env(CONFIG, scratch, "/root/ads/job.ad", "/root/ads/machine.ad")

    def prepare(self) -> None:
        """The TaskProlog's job exists (its Prolog kept the settings), its values
        completed by its first task."""
        if self.scratch:
            self._task_job("prolog_slurmd")
            measure([*self.chroot, "/usr/bin/mjf-slurm-taskprolog"], self.task_env)
            if not os.path.isfile(os.path.join(self.root, "run/mjf-hooks/slurm-taskprolog.wn1.sh")):
                sys.exit("packaged: the Prolog kept nothing for the TaskProlog")

    def _task_job(self, context: str) -> None:
        task_job([*self.chroot, "/usr/bin/mjf-slurm"], self.task_env, context)

    def finish(self) -> list[str]:
        if self.scratch:
            self._task_job("epilog_slurmd")
        jobs = os.path.join(self.root, "run/mjf-bench/jobs")
        left = os.listdir(jobs) if self.scratch and os.path.isdir(jobs) else []
        return [f"packaged job directories {left}"] if left else []

    def close(self) -> None:
        if self.scratch:
            self.scratch.destroy()
            self.scratch = None
