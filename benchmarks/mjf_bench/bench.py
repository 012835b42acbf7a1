"""What every scenario shares: the work directory, the site configs (one keeping job
records with ``$JOBSTATUS`` on), the venv whose commands are measured, and how big the
stores are."""

from __future__ import annotations

import os
import shutil
from typing import Callable, NamedTuple

# LSF and Grid Engine take the wall limit from the config: no bjobs or qstat call, whose
# cost is the batch system's.
CONFIG = """\
[mjf]
base_dir = {base}
log = stderr
[machinefeatures]
hs06_per_cpu = 12.5
grace_secs = 3600
[jobfeatures]
wall_limit_secs = 86400
[lsf]
query_bjobs = no
[gridengine]
query_qstat = no
"""
RECORDS = """\
[records]
dir = {records}
format = sss, apel
site = BENCH
"""


class Sizes(NamedTuple):
    """How many jobs, records and JDL files the stores hold."""

    drain: tuple[int, ...]  # job directories `mjf drain` updates
    status: tuple[int, ...]  # job directories `mjf status` reads
    summary: tuple[int, ...]  # records `mjf records --summary` reads
    records_per_day: int  # records per day directory of those stores
    jdl: int  # JDL files `mjf match --jdl DIR` judges in one call
    tags: tuple[int, ...]  # tags of the JDLs `mjf submit-args --jdl` reduces, the first the base


FULL = Sizes(drain=(1000, 10000), status=(100, 1000, 10000), summary=(10000, 100000),
             records_per_day=1000, jdl=10000, tags=(10000, 60000))
# Every store still of more than one size, and the records over several days.
SMOKE = Sizes(drain=(10, 20), status=(2, 3, 5), summary=(10, 25), records_per_day=10, jdl=10,
              tags=(10, 60))


class Bench:
    """The work directory, the configs and the options every measurement shares."""

    def __init__(self, venv: str, work: str, sizes: Sizes, rounds: int, storm: int,
                 deb: str | None = None) -> None:
        self.venv = venv
        self.work = work
        self.sizes = sizes
        self.rounds = rounds  # starts of every command per repeat
        self.storm = storm  # Prolog+Epilog pairs started at once
        self.deb = deb  # the Debian package to time installed, if any
        self.python = self.bin("python")
        self.base = os.path.join(work, "base")
        self.config = self.file("mjf.conf", CONFIG.format(base=self.base))
        # The same, keeping job records (the end hooks of the "records" rows write them)
        # and offering each job a $JOBSTATUS: a site's fullest per-job work.
        self.records_dir = os.path.join(work, "records")
        self.records_config = self.file(
            "mjf-records.conf", CONFIG.format(base=self.base).replace(
                "[mjf]\n", "[mjf]\njobstatus = yes\n", 1)
            + RECORDS.format(records=self.records_dir))
        self.env = self.env_for(self.config)
        self._scratch_count = 0

    def bin(self, name: str) -> str:
        return os.path.join(self.venv, "bin", name)

    def file(self, name: str, text: str) -> str:
        """Write ``text`` to ``name`` in the work directory; its path."""
        path = os.path.join(self.work, name)
        with open(path, "w") as handle:
            handle.write(text)
        return path

    @staticmethod
    def env_for(config: str) -> dict[str, str]:
        """A command's environment with ``config`` as its site config."""
        return {"PATH": "/usr/bin:/bin", "MJF_CONFIG": config}

    def scratch_dir(self) -> str:
        """A fresh directory for one job's scratch, as a starter gets for every job."""
        self._scratch_count += 1
        scratch = os.path.join(self.work, f"scratch-{self._scratch_count}")
        os.mkdir(scratch, 0o700)
        return scratch


def job_store(base: str, count: int, features: Callable[[int], dict],
              status: Callable[[int], dict] | None = None) -> None:
    """``count`` job directories in ``base``, each made by the store (``features(number)``
    its jobfeatures) and, with ``status``, ``status(number)`` in its jobstatus/ written by
    the pilot's library.

    Each job is built in a scratch store next to it and renamed into place: the store
    sweeps its whole jobs/ for leftovers before every job, quadratic over thousands.
    """
    from mjf_hooks import jobstatus
    from mjf_hooks.store import Store

    store, scratch = Store(base), Store(base + "-scratch")
    for number in range(count):
        job_id = str(number)
        maker = store if number == 0 else scratch  # the first makes base's own directories
        maker.create_job(job_id, features(number), status=status is not None)
        if status is not None:
            jobstatus.update(status(number), directory=maker.job_status_dir(job_id),
                             allocated_cpu=8)
        if maker is scratch:
            os.rename(os.path.dirname(scratch.job_features_dir(job_id)),
                      os.path.dirname(store.job_features_dir(job_id)))
    if os.path.exists(scratch.base_dir):
        shutil.rmtree(scratch.base_dir)

