"""The Markdown tables: figures as min / median / max of their ratios to a floor."""

from __future__ import annotations

import statistics
from collections.abc import Iterator, Sequence

from .measure import Command


def spread(ratios: list[float], digits: int = 2) -> str:
    """min / median / max of one figure over the repeats."""
    return " / ".join(f"{value:.{digits}f}" for value in
                      (min(ratios), statistics.median(ratios), max(ratios)))


def per_floor(values: list[float], floor: list[float], digits: int = 2,
              scale: float = 1) -> str:
    """The spread of ``values`` (times ``scale``) each over its repeat's floor."""
    return spread([value * scale / base for value, base in zip(values, floor)], digits)


def ratios(command: Command, floors: dict[str, Command]) -> tuple[str, str]:
    """A row's start-up and peak-RSS spreads against its floor."""
    if command.is_floor:
        return "(floor)", "(floor)"
    floor = floors[command.floor]
    return per_floor(command.ms, floor.ms), per_floor(command.mib, floor.mib)


def command_cells(command: Command, floors: dict[str, Command],
                  ms_unit: str = "") -> list[str]:
    """start-up ÷ floor, ms, peak RSS ÷ floor, MiB; or why it was not measured."""
    if command.missing:
        return [command.missing, "", "", ""]
    time_ratio, memory_ratio = ratios(command, floors)
    return [time_ratio, f"{statistics.median(command.ms):.1f}{ms_unit}", memory_ratio,
            f"{statistics.median(command.mib):.1f}"]


def over_counts(counts: tuple[int, ...], runs: list[list[float]],
                python_floor: list[float]) -> Iterator[tuple[int, str, float]]:
    """Per store size: its count, its seconds' spread over the python floor (ms) and the
    median seconds; ``runs`` holds one list of seconds per repeat, one per count."""
    for index, count in enumerate(counts):
        seconds = [run[index] for run in runs]
        yield count, per_floor(seconds, python_floor, 1, 1000), statistics.median(seconds)


def row(cells: list[str]) -> str:
    return "|" + "|".join(f" {cell} " if cell else " " for cell in cells) + "|"


class Table:
    """A Markdown table: its header cells (the first ``left`` columns left-aligned, the
    figures right-aligned), rows added in order, and a note printed below it."""

    def __init__(self, columns: Sequence[str], left: int = 1) -> None:
        self.columns = list(columns)
        self.left = left
        self.rows: list[list[str]] = []
        self.note = ""

    def add(self, *cells: str) -> None:
        self.rows.append(list(cells))

    def text(self) -> str:
        align = ["---"] * self.left + ["---:"] * (len(self.columns) - self.left)
        lines = [row(self.columns), "|" + "|".join(align) + "|", *map(row, self.rows)]
        return "\n".join(lines) + (f"\n\n{self.note}" if self.note else "")


def document(title: str, tables: list[Table]) -> str:
    return "\n\n".join([title, *(table.text() for table in tables)])
