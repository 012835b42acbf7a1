"""LSF: the job starter and the post-exec, the wall limit from the config (a ``bjobs``
call would add LSF's own cost)."""

from __future__ import annotations

import os

from ..bench import Bench
from ..measure import PYTHON_FLOOR, Command
from ..scenario import Scenario


class Lsf(Scenario):
    def __init__(self, bench: Bench) -> None:
        super().__init__(bench)
        lsf = bench.bin("mjf-lsf")
        env = {"MJF_CONFIG": bench.config, "PATH": "/bin:/usr/bin:/sbin:/usr/sbin",
               "LSB_JOBID": "3000", "LSB_JOBINDEX": "0", "TMPDIR": bench.work,
               "LSB_MCPU_HOSTS": f"{os.uname().nodename} 4", "USER": "root"}
        # The post-exec after the starter, so that every run starts from the same state. A
        # root post-exec takes no $MJF_CONFIG from the job's environment: --config.
        self.commands = [
            Command("`mjf-lsf starter /bin/true`", [lsf, "starter", "/bin/true", "-"],
                    PYTHON_FLOOR, env),
            Command("`mjf-lsf post-exec`", [lsf, "--config", bench.config, "post-exec"],
                    PYTHON_FLOOR, env),
        ]
