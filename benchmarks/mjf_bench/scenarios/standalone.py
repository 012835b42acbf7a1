"""The commands of no batch system: ``mjf machine``, and ``mjf run`` starting and reaping
``/bin/true`` (its job directory made and removed, the cgroup and filesystem probed)."""

from __future__ import annotations

from ..bench import Bench
from ..measure import PYTHON_FLOOR, Command
from ..scenario import Scenario


class Standalone(Scenario):
    def __init__(self, bench: Bench) -> None:
        super().__init__(bench)
        mjf = bench.bin("mjf")
        self.commands = [
            Command("`mjf machine`", [mjf, "machine"], PYTHON_FLOOR, bench.env),
            Command("`mjf run -- /bin/true`",
                    [mjf, "run", "--wall-limit", "3600", "--", "/bin/true"], PYTHON_FLOOR,
                    bench.env),
        ]
