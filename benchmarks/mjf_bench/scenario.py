"""What a scenario is: the rows it adds, what it builds once, what it measures in every
repeat, and the tables it prints. ``scenarios.ALL`` runs them in order."""

from __future__ import annotations

import os

from .bench import Bench
from .measure import NOT_MEASURED, Command
from .report import Table, command_cells

# Every record of the records rows: JSON, SSS and APEL.
RECORD_SUFFIXES = {".json", ".xml", ".apel"}


class Scenario:
    """One part of the benchmark. Its ``commands`` (made with it, in the order they run)
    are started round-robin with every other scenario's in each repeat: rows of the
    start-up table, or, with ``startup_table`` false, of its own ``tables()``."""

    startup_table = True

    def __init__(self, bench: Bench) -> None:
        self.bench = bench
        self.commands: list[Command] = []

    def prepare(self) -> None:
        """Build what it measures and check it once, before the first repeat."""

    def repeat(self) -> None:
        """One repeat's measurements beyond the start-up rows."""

    def finish(self) -> list[str]:
        """After the repeats: what failed or was left behind (empty: nothing)."""
        return []

    def startup_rows(self, floors: dict[str, Command]) -> list[list[str]]:
        if not self.startup_table:
            return []
        return [[command.label, command.floor.rsplit(" ", 1)[0],
                 *command_cells(command, floors)] for command in self.commands]

    def tables(self, floors: dict[str, Command]) -> list[Table]:
        return []

    def close(self) -> None:
        """Stop and remove what outlives the work directory (a server, a mounted root)."""


class RecordsKept(Scenario):
    """A batch system's hooks with ``[records] dir`` set: its end hook writes the record
    of ``job`` (its directory's name), checked to be there, in every format, at the end.
    Records are root's: an end hook not run by root hands its record in instead, another
    path, so without root the rows say "not measured"."""

    job = ""

    def prepare(self) -> None:
        if os.geteuid() != 0:
            for command in self.commands:
                command.missing = NOT_MEASURED

    def finish(self) -> list[str]:
        if os.geteuid() != 0:
            return []
        found: set[str] = set()
        top = self.bench.records_dir
        for day in os.listdir(top) if os.path.isdir(top) else ():
            if os.path.isdir(os.path.join(top, day)) and not day.startswith("."):
                found.update(os.path.splitext(name)[1] for name in
                             os.listdir(os.path.join(top, day)) if not name.startswith(".")
                             and os.path.splitext(name)[0].partition("-")[2] == self.job)
        if found >= RECORD_SUFFIXES:
            return []
        return [f"job {self.job} without its record ({', '.join(sorted(found)) or 'nothing'})"]
