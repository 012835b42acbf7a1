"""The floors every repeat measures for itself: a bare start of the venv's interpreter
(``python -I -c pass``) and ``/bin/sh -c :``; each figure is a ratio to one of them."""

from __future__ import annotations

from ..bench import Bench
from ..measure import PYTHON_FLOOR, SH_FLOOR, Command
from ..scenario import Scenario


class Floors(Scenario):
    def __init__(self, bench: Bench) -> None:
        super().__init__(bench)
        self.commands = [
            Command("`python -I -c pass`", [bench.python, "-I", "-c", "pass"], PYTHON_FLOOR,
                    bench.env, is_floor=True),
            Command("`/bin/sh -c :`", ["/bin/sh", "-c", ":"], SH_FLOOR, bench.env,
                    is_floor=True),
        ]
