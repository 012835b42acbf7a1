"""Grid Engine: the prolog, the starter between it and the epilog, and with records kept
the prolog and the epilog writing the job's record; the wall limit from the config
(``query_qstat = no``: ``qstat -j`` would add Grid Engine's own cost)."""

from __future__ import annotations

import os
import shutil

from .. import FIXTURES
from ..bench import Bench
from ..measure import PYTHON_FLOOR, Command
from ..scenario import RecordsKept, Scenario

RECORDED = os.path.join(FIXTURES, "gridengine-8.1.9")


def job_env(bench: Bench, config: str, job_id: str, usage: bool = False) -> dict[str, str]:
    """A Grid Engine job's environment, its spool config the one recorded in a real cell,
    its PE_HOSTFILE this host's 4 slots; the starter execs the job itself. With ``usage``,
    its spool has the usage file a real job's shepherd left (the epilog's Delivered
    values). The spool directory is where execd puts it (``.../active_jobs/<job>.<task>``):
    the root hooks read it nowhere else. A root hook also takes no ``$MJF_CONFIG`` from a
    job's environment, so the prolog and the epilog are given ``--config``."""
    spool = os.path.join(bench.work, "gridengine-spool", "active_jobs", f"{job_id}.1")
    os.makedirs(spool)
    shutil.copy(os.path.join(RECORDED, "pe-job", "spool-config"), os.path.join(spool, "config"))
    if usage:
        shutil.copy(os.path.join(RECORDED, "usage"), os.path.join(spool, "usage"))
    node = os.uname().nodename
    with open(os.path.join(spool, "pe_hostfile"), "w") as handle:
        handle.write(f"{node} 4 all.q@{node} UNDEFINED\n")
    return {"MJF_CONFIG": config, "PATH": "/bin:/usr/bin:/sbin:/usr/sbin",
            "JOB_ID": job_id, "SGE_TASK_ID": "undefined", "NSLOTS": "4", "NHOSTS": "1",
            "SGE_JOB_SPOOL_DIR": spool, "PE_HOSTFILE": os.path.join(spool, "pe_hostfile"),
            "TMP": bench.work, "USER": "root", "SGE_STARTER_SHELL_PATH": "/bin/sh",
            "SGE_STARTER_SHELL_START_MODE": "unix_behavior"}


class GridEngine(Scenario):
    def __init__(self, bench: Bench) -> None:
        super().__init__(bench)
        gridengine = bench.bin("mjf-gridengine")
        env = job_env(bench, bench.config, "4000")
        self.commands = [
            Command("`mjf-gridengine prolog`", [gridengine, "--config", bench.config, "prolog"],
                    PYTHON_FLOOR, env),
            Command("`mjf-gridengine-starter /bin/true`",
                    [bench.bin("mjf-gridengine-starter"), "/bin/true"], PYTHON_FLOOR,
                    env),
            Command("`mjf-gridengine epilog`", [gridengine, "--config", bench.config, "epilog"],
                    PYTHON_FLOOR, env),
        ]


class GridEngineRecords(RecordsKept):
    job = "4100"

    def __init__(self, bench: Bench) -> None:
        super().__init__(bench)
        gridengine = bench.bin("mjf-gridengine")
        env = job_env(bench, bench.records_config, self.job, usage=True)
        self.commands = [
            Command("`mjf-gridengine prolog`, records kept",
                    [gridengine, "--config", bench.records_config, "prolog"], PYTHON_FLOOR, env),
            Command("`mjf-gridengine epilog`, writing the job's record",
                    [gridengine, "--config", bench.records_config, "epilog"], PYTHON_FLOOR, env),
        ]
