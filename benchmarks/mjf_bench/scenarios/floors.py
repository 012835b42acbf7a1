"""The floors every repeat measures for itself: a bare start of the venv's interpreter
(``python -I -c pass``) and ``/bin/sh -c :``, each figure a ratio to one of them; and, for
reference, the same start execing the job (``/bin/true``), the least that a hook that
execs its job costs."""

from __future__ import annotations

from ..bench import Bench
from ..measure import EXEC_JOB, PYTHON_FLOOR, SH_FLOOR, Command
from ..scenario import Scenario


class Floors(Scenario):
    def __init__(self, bench: Bench) -> None:
        super().__init__(bench)
        self.commands = [
            Command("`python -I -c pass`", [bench.python, "-I", "-c", "pass"], PYTHON_FLOOR,
                    bench.env, is_floor=True),
            # Not a floor: what a hook that execs its job costs at least, for reference.
            Command(f'`python -I -c "{EXEC_JOB}"`: a bare start that execs the job '
                    "(reference)", [bench.python, "-I", "-c", EXEC_JOB], PYTHON_FLOOR,
                    bench.env),
            Command("`/bin/sh -c :`", ["/bin/sh", "-c", ":"], SH_FLOOR, bench.env,
                    is_floor=True),
        ]
