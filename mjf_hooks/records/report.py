"""`mjf records`'s output: a table of records, their totals, and both as JSON."""

from __future__ import annotations

import time

from ..terminal import figure, printable
from . import job as job_record
from .job import Record

TABLE_HEADER = (f"{'END (UTC)':<19} {'JOB':<24} {'USER':<10} {'CPUS':>4} {'CPU EFF':>7} "
                f"{'PEAK MEM':>9} {'OF MAX':>6} {'WALL':>9} {'OF LIMIT':>8}  OVER")


def table_row(record: Record) -> str:
    """One record under :data:`TABLE_HEADER`."""
    figures = job_record.figures(record)
    end = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(record.end_time or 0))
    return (f"{end:<19} {printable(record.job_id)[:24]:<24} "
            f"{printable(record.user or '?')[:10]:<10} {figure(record.allocated_cpu):>4} "
            f"{_percent(figures['cpu_efficiency']):>7} "
            f"{_mebibytes(record.peak_memory_bytes):>9} "
            f"{_percent(figures['memory_used_fraction']):>6} "
            f"{_duration(record.wall_secs):>9} "
            f"{_percent(figures['wall_used_fraction']):>8}  "
            f"{','.join(figures['over']) or '-'}")


def records_json(found: list[Record]) -> list[dict]:
    """Each record as JSON, with its figures."""
    return [{**job_record.record_json(record), "figures": job_record.figures(record)}
            for record in found]


def handed_in_totals(rows: list[list]) -> dict:
    """What records jobs' users handed in add up to, apart from root's (their word)."""
    from .job import summary_of

    totals = summary_of(rows)
    return {name: totals[name] for name in ("jobs", "allocated_core_hours", "used_core_hours")}


def summary_lines(totals: dict) -> list[str]:
    """:func:`job_record.summary`'s totals, as lines (and the hand-ins', where any)."""
    over = totals["over"]
    handed_in = totals.get("handed_in") or {"jobs": 0}
    return [
        f"jobs: {totals['jobs']} ({totals['jobs_with_cpu_figures']} with CPU figures)",
        f"core-hours: {totals['allocated_core_hours']:.1f} allocated, "
        f"{totals['used_core_hours']:.1f} used, {totals['idle_core_hours']:.1f} idle; "
        f"CPU efficiency {_percent(totals['cpu_efficiency'])}",
        f"median peak memory of max_rss_bytes: "
        f"{_percent(totals['median_memory_used_fraction'])}; median wall time of "
        f"wall_limit_secs: {_percent(totals['median_wall_used_fraction'])}",
        f"jobs over a promise: {totals['jobs_over_a_promise']} (wall {over['wall']}, "
        f"memory {over['memory']}, cpu {over['cpu']}, cores {over['cores']})",
    ] + ([f"handed in by jobs' users (their word, not in the figures above): "
          f"{handed_in['jobs']} job(s), {handed_in['allocated_core_hours']:.1f} core-hours "
          f"allocated, {handed_in['used_core_hours']:.1f} used"] if handed_in["jobs"] else [])


def _percent(fraction: float | None) -> str:
    return "?" if fraction is None else f"{fraction * 100:.0f}%"


def _mebibytes(value: float | None) -> str:
    return "?" if value is None else f"{value / 2**20:.0f}M"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    whole = int(seconds)
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"
