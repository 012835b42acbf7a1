"""The floors every repeat measures for itself: a bare start of the venv's interpreter
(``python -I -c pass``), the same start execing the job (``/bin/true``: the floor of the
hooks that exec their job) and ``/bin/sh -c :``; each figure is a ratio to one of them."""

from __future__ import annotations

from ..bench import Bench
from ..measure import EXEC_JOB, PYTHON_EXEC_FLOOR, PYTHON_FLOOR, SH_FLOOR, Command
from ..scenario import Scenario


class Floors(Scenario):
    def __init__(self, bench: Bench) -> None:
        super().__init__(bench)
        self.commands = [
            Command("`python -I -c pass`", [bench.python, "-I", "-c", "pass"], PYTHON_FLOOR,
                    bench.env, is_floor=True),
            Command(f'`python -I -c "{EXEC_JOB}"`', [bench.python, "-I", "-c", EXEC_JOB],
                    PYTHON_EXEC_FLOOR, bench.env, is_floor=True),
            Command("`/bin/sh -c :`", ["/bin/sh", "-c", ":"], SH_FLOOR, bench.env,
                    is_floor=True),
        ]
