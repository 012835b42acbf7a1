"""`mjf status`'s and `mjf drain --plan`'s output: what the pilots report, and the drain
plan computed from it, as lines or as JSON."""

from __future__ import annotations

import time

from .drainplan import Candidate
from .node_status import JobReport
from .terminal import figure, printable


def status_json(ordered: list[JobReport], now: int) -> dict:
    return {"now": now, "jobs": [report.as_dict(now) for report in ordered]}


def status_lines(ordered: list[JobReport], now: int) -> list[str]:
    """Per job: its cores, what its pilot says, and the draft's figures."""
    lines = []
    for report in ordered:
        figures = report.figures(now)
        cores = report.allocated_cpu if report.allocated_cpu is not None else "?"
        lines.append(f"job {printable(report.job_id)}  allocated_cpu {cores}  "
                     f"{printable(report.describe())}")
        if report.unverified is not None:
            lines.append(f"  unverified (a drain plan does not count it): "
                         f"{printable(report.unverified)}")
        values = report.status.raw if report.status else {}
        if values:
            lines.append("  " + "  ".join(f"{key}={printable(value.rstrip())}"
                                          for key, value in values.items()))
        lines += [f"  {key}: {printable(why)}"
                  for key, why in (report.status.problems.items() if report.status else ())]
        shown = [f"{name} {figure(figures[name])}" for name in (
            "remaining_time", "draining_waste", "kill_waste", "priority_factor",
            "can_postpone_last_job")]
        lines.append("  " + ("assumed: " if figures["assumed"] else "") + "  ".join(shown))
    return lines


class DrainPlan:
    """The candidates for a shutdown between ``earliest`` and ``latest``, the chosen one,
    and the jobs nobody but their user vouches for (not counted)."""

    def __init__(self, reports: list[JobReport], now: int, earliest: int, latest: int,
                 candidates: list[Candidate], chosen: Candidate) -> None:
        self.reports, self.now, self.earliest, self.latest = reports, now, earliest, latest
        self.candidates, self.chosen = candidates, chosen
        self.unverified = [report for report in reports if report.unverified is not None]

    def as_dict(self, applied: bool) -> dict:
        return {"now": self.now, "earliest": self.earliest, "latest": self.latest,
                "best": self.chosen.time, "applied": applied,
                "candidates": [candidate.as_dict() for candidate in self.candidates],
                "unverified": [{"job_id": report.job_id, "jobstatus": report.location,
                                "why": report.unverified} for report in self.unverified]}

    def lines(self) -> list[str]:
        unverified, chosen = self.unverified, self.chosen
        lines = [f"{len(self.reports) - len(unverified)} job(s) counted"
                 f"{f', {len(unverified)} unverified' if unverified else ''}; window "
                 f"{_when(self.earliest)} (the earliest allowed) to {_when(self.latest)}",
                 f"  {'SHUTDOWN':<21} {'UNIX':>10} {'WASTE core-s':>14} {'core-h':>9}  WHY"]
        for candidate in self.candidates:
            mark = "*" if candidate is chosen else " "
            lines.append(f"{mark} {_when(candidate.time):<21} {candidate.time:>10} "
                         f"{candidate.waste:>14} {candidate.waste / 3600:>9.1f}  "
                         f"{printable(candidate.why)}")
        lines.append(f"Least waste: {_when(chosen.time)} ({chosen.time}); per job:")
        lines += [f"  {printable(report.job_id):<20} {waste:>12}  {printable(why)}"
                  for report, waste, why in sorted(chosen.jobs, key=lambda job: -job[1])]
        if unverified:
            lines.append("Unverified, not counted (nothing but their user vouches for them):")
        lines += [f"  {printable(report.job_id):<20} {printable(report.location)}: "
                  f"{printable(report.unverified)}" for report in unverified]
        return lines


def _when(moment: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(moment))
