"""``mjf drain --plan``: the shutdown time within a window that wastes least.

Waste is core-seconds of the jobs' allocations, from now to the shutdown, that end up
doing no work that counts: work lost because a payload is killed, and cores left idle
because a job winds down or has ended. Once a shutdown is announced, no job is
assumed to start new work (the conservative case: a pilot that does fill its free
cores only wastes less). For a shutdown at T, each job's waste:

* a pilot that reports (``used_CPU``, ``first_exp_job_end``, ``last_exp_job_end``,
  ``last_job_start`` valid, see :mod:`mjf_hooks.node_status`):
  - T at or after ``last_exp_job_end``: it winds down - the draft's
    ``draining_waste`` (at now), plus all its cores idle from ``last_exp_job_end`` to T;
  - T before: its running payloads are killed - ``kill_waste`` at T (``add_uncom_time +
    used_CPU * (T - last_job_start)``), plus its free cores idle until T;
* any other job (it reports nothing, or too little): one payload using all its cores
  since ``jobstart_secs``, running to ``jobstart_secs + wall_limit_secs``:
  - T at or after that end: its cores idle from then to T;
  - T before (or no wall limit known): killed - all its work since it started is lost.

Only counted jobs weigh (:mod:`mjf_hooks.node_status`: something other than a job's user
vouches for it); an unverified one - a directory any local user can make - weighs
nothing, whatever it claims.

Each job's waste only grows between its end times, so the best T is the earliest
allowed one or a job's expected end within the window: those, and the end of the
window, are the candidates. Ties go to the earlier time (the node is back sooner).
"""

from __future__ import annotations

from .node_status import JobReport

# What a reporting pilot must have given for its own model; otherwise it is assumed.
_REPORTED_INPUTS = ("first_exp_job_end", "last_exp_job_end", "last_job_start")


class Candidate:
    """A shutdown time, why it is one, and the waste of each job: ``(report, core-s, why)``
    (a list, not keyed by job id: a job in a store its user owns could claim another's)."""

    __slots__ = ("jobs", "time", "why")

    def __init__(self, moment: int, why: str) -> None:
        self.time = moment
        self.why = why
        self.jobs: list[tuple[JobReport, int, str]] = []

    @property
    def waste(self) -> int:
        return sum(waste for _, waste, _ in self.jobs)

    def as_dict(self) -> dict:
        return {"time": self.time, "why": self.why, "waste_core_secs": self.waste,
                "jobs": [{"job_id": report.job_id, "jobstatus": report.location,
                          "waste_core_secs": waste, "why": why}
                         for report, waste, why in self.jobs]}


def expected_end(report: JobReport, now: int) -> tuple[int | None, str]:
    """When the job is expected to be done on its own, and whose word that is."""
    if _reports_enough(report):
        return max(report.status.values["last_exp_job_end"], now), "last_exp_job_end"
    end = report.planned_end()
    return (None, "") if end is None else (max(end, now), "jobstart_secs + wall_limit_secs")


def _reports_enough(report: JobReport) -> bool:
    return (report.reports and report.allocated_cpu is not None
            and all(name in report.status.values for name in _REPORTED_INPUTS))


def job_waste(report: JobReport, shutdown: int, now: int) -> tuple[int, str]:
    """A job's waste, in core-seconds, if the node shuts down at ``shutdown``; and why."""
    cores = report.allocated_cpu or 0
    end, _ = expected_end(report, now)
    if _reports_enough(report):
        values = report.status.values
        used = values["used_CPU"]
        if shutdown >= end:
            draining = report.figures(now)["draining_waste"]
            idle = cores * (shutdown - end)
            return draining + idle, (f"its payloads end by {end}: draining_waste {draining}"
                                     f" + {idle} idle after")
        killed = values.get("add_uncom_time", 0) + used * max(shutdown - values[
            "last_job_start"], 0)
        idle = max(cores - used, 0) * (shutdown - now)
        return killed + idle, (f"payloads running at the shutdown are lost: kill_waste "
                               f"{killed} + {idle} idle until then")
    if cores == 0:  # unknown, or none left to a job only its user's process vouches for
        return 0, ("allocated_cpu unknown: not counted" if report.allocated_cpu is None
                   else "no CPUs counted for it: weighs nothing")
    if end is not None and shutdown >= end:
        idle = cores * (shutdown - end)
        return idle, f"{_assumed(report)}ends by its wall limit at {end}: {idle} idle after"
    start = report.features.get("jobstart_secs", now)
    lost = cores * max(shutdown - start, 0)
    return lost, f"{_assumed(report)}killed at the shutdown: {lost} of work lost"


def _assumed(report: JobReport) -> str:
    return f"assumed ({report.describe()}): " if not report.reports else \
        "assumed (reports too little): "


def counted(reports: list[JobReport]) -> list[JobReport]:
    """The jobs the plan weighs: all but the unverified."""
    return [report for report in reports if report.unverified is None]


def plan(reports: list[JobReport], now: int, earliest: int, latest: int) -> list[Candidate]:
    """Every candidate shutdown in [``earliest``, ``latest``], in time order, each with
    every counted job's waste. The best is :func:`best`."""
    reports = counted(reports)
    moments = {earliest: "the earliest allowed (grace_secs)", latest: "the end of the window"}
    for report in reports:
        end, whose = expected_end(report, now)
        if end is not None and earliest < end < latest:
            moments.setdefault(end, f"job {report.job_id} is expected to end ({whose})")
    candidates = []
    for moment in sorted(moments):
        candidate = Candidate(moment, moments[moment])
        candidate.jobs = [(report, *job_waste(report, moment, now)) for report in reports]
        candidates.append(candidate)
    return candidates


def best(candidates: list[Candidate]) -> Candidate:
    """The least waste; of equals, the earliest."""
    return min(candidates, key=lambda candidate: (candidate.waste, candidate.time))
