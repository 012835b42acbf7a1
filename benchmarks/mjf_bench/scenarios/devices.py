"""What each of a packaged command's three start-up devices (mjf_hooks/__init__.py) saves:
the Slurm Prolog as packaged, then with one device undone at a time and with all three
undone. Each variant is the installed ``mjf-slurm`` with one line added after the
package's own set-up, and prepares its own job, so that no two rows meet.

The devices: mjf_hooks' own module finder (undone: Python's general search for every
module), the cyclic collector off and frozen at exit (undone: on, as Python starts) and
the end at once (undone: the interpreter's own teardown).

Wall time on a shared machine moves by about a tenth of a bare start from run to run,
more than one device saves; so a table of its own also counts each variant's
instructions (valgrind's callgrind, once after the repeats), as a ratio to a bare
start's: a deterministic figure, which shows each device apart (without valgrind,
"not measured")."""

from __future__ import annotations

import os
import shutil
import sys
import time

from ..bench import Bench
from ..measure import NOT_MEASURED, PYTHON_FLOOR, Command, instructions, measure
from ..report import Table
from ..scenario import Scenario
from .slurm import job_env

_SEARCH = ("sys.meta_path[:] = [finder for finder in sys.meta_path"
           " if type(finder).__name__ != '_OwnModules']")
_COLLECTOR = "import atexit, gc; gc.enable(); atexit.unregister(gc.freeze)"
_TEARDOWN = "mjf_hooks._ENDS_AT_ONCE[0] = False"

# (label, the lines undoing devices), the packaged start first.
VARIANTS = (
    ("`mjf-slurm` Prolog as packaged (the devices' reference)", ()),
    ("… finding its modules by Python's own search", (_SEARCH,)),
    ("… with the cyclic collector on, as Python starts", (_COLLECTOR,)),
    ("… ending through the interpreter's teardown", (_TEARDOWN,)),
    ("… with the collector on and ending through the teardown", (_COLLECTOR, _TEARDOWN)),
    ("… none of the three", (_SEARCH, _COLLECTOR, _TEARDOWN)),
)
# The installed command's line after which a variant's lines go: the package is imported
# (its devices in place), the hook not yet.
_RUN = "from mjf_hooks import run_command\n"


class StartupDevices(Scenario):
    def __init__(self, bench: Bench) -> None:
        super().__init__(bench)
        start = int(time.time())
        self.commands = [
            Command(label, [self._variant(number, undone)], PYTHON_FLOOR,
                    job_env(bench.config, str(3000 + number), "prolog_slurmd", start))
            for number, (label, undone) in enumerate(VARIANTS)]
        self.instructions: list[int] = []  # per variant, then a bare start's last

    def finish(self) -> list[str]:
        """Each variant's instructions counted (its job already there, as in the repeats),
        then its job ended by the packaged Epilog."""
        if shutil.which("valgrind") is not None:
            self.instructions = [
                *(instructions(command.argv, command.env()) for command in self.commands),
                instructions([self.bench.python, "-I", "-c", "pass"], self.bench.env)]
        for command in self.commands:
            measure([self.bench.bin("mjf-slurm")],
                    {**command.env(), "SLURM_SCRIPT_CONTEXT": "epilog_slurmd"})
        return []

    def tables(self, floors: dict[str, Command]) -> list[Table]:
        table = Table(("the Slurm Prolog's start-up devices", "instructions ÷ a bare start's",
                       "million instructions"))
        if not self.instructions:
            for command in self.commands:
                table.add(command.label, NOT_MEASURED, "")
            return [table]
        *counts, floor = self.instructions
        for command, count in zip(self.commands, counts):
            table.add(command.label, f"{count / floor:.3f}", f"{count / 1e6:.1f}")
        table.note = f"A bare start (`python -I -c pass`): {floor / 1e6:.1f} million."
        return [table]

    def _variant(self, number: int, undone: tuple[str, ...]) -> str:
        with open(self.bench.bin("mjf-slurm")) as handle:
            text = handle.read()
        if _RUN not in text:
            sys.exit(f"{self.bench.bin('mjf-slurm')}: no {_RUN.strip()!r} line to undo "
                     "the start-up devices after")
        lines = "".join(f"{line}\n" for line in ("import mjf_hooks", *undone)) if undone else ""
        path = self.bench.file(f"mjf-slurm-devices-{number}", text.replace(_RUN, lines + _RUN))
        os.chmod(path, 0o700)  # run by this user alone
        return path

