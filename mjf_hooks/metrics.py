"""``mjf metrics``: this node's MJF state in Prometheus's text exposition format.

Gathered from what root wrote and what the node's jobs report (:mod:`node_status`, as
``mjf status`` reads it), the hooks' failure counters (:mod:`hook_failures`) and the job
records; formatted apart (:func:`exposition`); written for node_exporter's textfile
collector as its documentation asks: to a temporary file beside the target, renamed
over it (:func:`write_file`).

Label values are bounded sets of ours (batch systems, entry points, reasons, promises)
and job ids, one series set per job the node counts (a job only its user vouches for
is counted in ``mjf_jobs_unverified``, never labelled), at most ``MAX_JOBS`` of them,
batch jobs before those only a user's process vouches for. A job's id is its
directory's name, never what its user wrote, and no label set is written twice.
Every label value is checked (printable ASCII, bounded) and escaped; every number is
an integer within 64 bits or a finite float, or the sample is left out: what a job's
user wrote (its ``$JOBSTATUS``, its own store) cannot make the file invalid.
"""

from __future__ import annotations

import math
import os
import time

from . import batch, hook_failures, jobstatus, spec
from .config import Config

# The most jobs given series of their own: more than any node runs, few enough for
# Prometheus; the rest are counted in mjf_jobs_omitted.
MAX_JOBS = 1024
_MAX_LABEL_CHARS = 200
_INT_BOUND = 2**63
GAUGE, COUNTER = "gauge", "counter"
STANDALONE = "standalone"
# A $JOBSTATUS key's metric, by what it holds (jobstatus.KEYS).
_STATUS_SUFFIX = {jobstatus.CORES: "", jobstatus.TIME: "_timestamp_seconds",
                  jobstatus.CPU_SECONDS: "_cpu_seconds", jobstatus.BOOLEAN: "",
                  jobstatus.INTEGER: ""}
_STATUS_HELP = {
    "used_CPU": "cores the job's pilot says it uses ($JOBSTATUS used_CPU)",
    "last_job_start": "when the pilot's last payload started ($JOBSTATUS last_job_start)",
    "first_exp_job_end": "when the pilot expects its first payload to end "
                         "($JOBSTATUS first_exp_job_end)",
    "last_exp_job_end": "when the pilot expects its last payload to end "
                        "($JOBSTATUS last_exp_job_end)",
    "last_max_job_end": "when the pilot's last payload ends at the latest "
                        "($JOBSTATUS last_max_job_end)",
    "add_uncom_time": "CPU seconds of uncommitted work, lost if the job is killed "
                      "($JOBSTATUS add_uncom_time)",
    "add_final_exp_waste": "CPU seconds the pilot expects to waste at its end "
                           "($JOBSTATUS add_final_exp_waste)",
    "can_postpone_last_job": "1 if the pilot can postpone its last payload "
                             "($JOBSTATUS can_postpone_last_job)",
    "priority_factor": "the pilot's priority factor among its user's jobs "
                       "($JOBSTATUS priority_factor)",
}
PROMISES = ("wall", "memory", "cpu", "cores")


class Family:
    """One metric: its name, type, help and samples (label pairs, value)."""

    __slots__ = ("help", "kind", "name", "samples")

    def __init__(self, name: str, kind: str, help_text: str) -> None:
        self.name, self.kind, self.help = name, kind, help_text
        self.samples: list[tuple[tuple[tuple[str, str], ...], int | float]] = []

    def add(self, value, **labels: str) -> None:
        """A sample; one whose value is no number within bounds, or whose label value
        is not printable ASCII of at most 200 characters, is left out."""
        if _number_text(value) is not None and all(map(_fits_label, labels.values())):
            self.samples.append((tuple(labels.items()), value))


class Families:
    """The metrics in the order first named."""

    def __init__(self) -> None:
        self._by_name: dict[str, Family] = {}

    def __call__(self, name: str, kind: str, help_text: str) -> Family:
        if name not in self._by_name:
            self._by_name[name] = Family(name, kind, help_text)
        return self._by_name[name]

    def __iter__(self):
        return iter(self._by_name.values())


def _fits_label(value: str) -> bool:
    return isinstance(value, str) and len(value) <= _MAX_LABEL_CHARS and value.isascii() \
        and value.isprintable()


def _number_text(value) -> str | None:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value) if -_INT_BOUND < value < _INT_BOUND else None
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    return None


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def exposition(families) -> str:
    """The text exposition format (version 0.0.4) of ``families``: HELP and TYPE lines,
    then the samples; a family without samples is left out."""
    lines = []
    for family in families:
        if not family.samples:
            continue
        lines.append(f"# HELP {family.name} {_escape_help(family.help)}")
        lines.append(f"# TYPE {family.name} {family.kind}")
        for labels, value in family.samples:
            shown = ",".join(f'{name}="{_escape_label(text)}"' for name, text in labels)
            lines.append(f"{family.name}{{{shown}}} {_number_text(value)}" if shown
                         else f"{family.name} {_number_text(value)}")
    return "".join(line + "\n" for line in lines)


# --- gathering -----------------------------------------------------------------------

def gather(config: Config, now: float | None = None, sync_failed: int | None = None,
           log=None) -> Families:
    """This node's metrics: machine, jobs, hook failures, records (where kept); with
    ``sync_failed`` (written by ``mjf sync``) the phases of its pass that failed."""
    now = int(time.time() if now is None else now)
    families = Families()
    _machine(families, config)
    _jobs(families, config, now, log)
    _failures(families, config)
    if config.records_dir:
        _records(families, config, now, log)
    if sync_failed is not None:
        families("mjf_sync_failed_phases", GAUGE,
                 "phases of the last mjf sync pass that failed (each logged)").add(sync_failed)
    return families


def _machine(families: Families, config: Config) -> None:
    from .store_locations import store_for

    store = store_for(config)
    values = {}
    for key in ("shutdowntime", "grace_secs", "total_cpu"):
        text = store.machine.read_key(key)
        number = spec.digits_value(text) if text else None
        if number is not None:
            values[key] = number
    families("mjf_machine_draining", GAUGE,
             "1 while a shutdowntime is announced for this machine (a drain), else 0"
             ).add(int("shutdowntime" in values))
    if "shutdowntime" in values:
        families("mjf_machine_shutdowntime_timestamp_seconds", GAUGE,
                 "when this machine shuts down (MJF shutdowntime), while one is announced"
                 ).add(values["shutdowntime"])
    if "grace_secs" in values:
        families("mjf_machine_grace_seconds", GAUGE,
                 "the notice a job gets of a shutdown (MJF grace_secs)").add(values["grace_secs"])
    if "total_cpu" in values:
        families("mjf_machine_total_cpu", GAUGE,
                 "the CPUs of this machine (MJF total_cpu)").add(values["total_cpu"])


def _jobs(families: Families, config: Config, now: int, log) -> None:
    from . import node_status

    reports = node_status.collect(config, log=log)
    counted = [report for report in reports if report.counted is not None]
    names = (*batch.NAMES, STANDALONE)
    by_system = dict.fromkeys(names, 0)
    for report in counted:
        by_system[_system(report)] += 1
    jobs = families("mjf_jobs", GAUGE, "MJF jobs on this node, by the batch system that runs "
                    "them (standalone: mjf run)")
    for name in names:
        jobs.add(by_system[name], batch_system=name)
    families("mjf_jobs_unverified", GAUGE,
             "job directories nothing but their user vouches for (see mjf status): "
             "not counted, given no series").add(len(reports) - len(counted))
    labelled = _labelled(counted)
    families("mjf_jobs_omitted", GAUGE,
             f"counted jobs given no series of their own (beyond {MAX_JOBS}, batch jobs "
             "first)").add(len(counted) - len(labelled))
    for report, labels in labelled:
        _job(families, report, labels, now)


def _labelled(counted: list) -> list[tuple[object, dict[str, str]]]:
    """The jobs given series, each with its labels: batch jobs first, then those only a
    user's process vouches for, each by job id; at most MAX_JOBS, no label set twice."""
    labelled, seen = [], set()
    for report in sorted(counted, key=lambda report: (report.vouched_by_user, report.job_id)):
        labels = {"job_id": report.job_id, "batch_system": _system(report)}
        key = tuple(labels.values())
        if key in seen or not spec.is_valid_job_id(report.job_id):
            continue
        seen.add(key)
        labelled.append((report, labels))
        if len(labelled) == MAX_JOBS:
            break
    return labelled


def _system(report) -> str:
    return report.backend if report.backend in batch.NAMES else STANDALONE


def _job(families: Families, report, labels: dict[str, str], now: int) -> None:
    features = report.features
    for key, name, help_text in (
            ("allocated_cpu", "mjf_job_allocated_cpu", "the CPUs MJF gave the job "
             "(allocated_cpu)"),
            ("jobstart_secs", "mjf_job_start_timestamp_seconds", "when the job started "
             "(jobstart_secs)"),
            ("wall_limit_secs", "mjf_job_wall_limit_seconds", "the job's wall-clock limit "
             "(wall_limit_secs)")):
        if key in features:
            families(name, GAUGE, help_text).add(features[key], **labels)
    figures = report.figures(now)
    families("mjf_job_status_reported", GAUGE,
             "1 if the job's pilot reports its $JOBSTATUS (used_CPU at least), 0 if its "
             "figures are assumed").add(int(report.reports), **labels)
    for key, name, help_text in (
            ("remaining_time", "mjf_job_remaining_time_seconds",
             "seconds until the job's last payload ends: the pilot's last_exp_job_end, "
             "else its start plus its wall limit (draft 0.99 remaining_time)"),
            ("draining_waste", "mjf_job_draining_waste_cpu_seconds",
             "CPU seconds idle if the job is drained now (draft 0.99 draining_waste)"),
            ("kill_waste", "mjf_job_kill_waste_cpu_seconds",
             "CPU seconds lost if the job is killed now (draft 0.99 kill_waste)")):
        if figures.get(key) is not None:
            families(name, GAUGE, help_text).add(figures[key], **labels)
    if not report.reports:
        return
    for key, value in report.status.values.items():
        kind = jobstatus.KEYS.get(key)
        if kind is None:
            continue
        families(f"mjf_job_{key.lower()}{_STATUS_SUFFIX[kind]}", GAUGE,
                 _STATUS_HELP[key]).add(value, **labels)


def _failures(families: Families, config: Config) -> None:
    found = hook_failures.counts(config.base_dir)
    failures = families("mjf_hook_failures_total", COUNTER,
                        "failures the hooks logged (and went on from, unless on_error = "
                        "fail), by entry point and reason")
    for (entry, reason), count in sorted(found.items()):
        failures.add(count, entry_point=entry, reason=reason)


def _records(families: Families, config: Config, now: int, log) -> None:
    from .errors import MJFError
    from .records import job as job_record
    from .records import reading as record_reading

    window = config.metrics_records_hours * 3600
    try:
        # What `mjf records --summary` takes of each record, its digests kept warm.
        rows, handed_in, skipped = record_reading.summary_rows(config.records_dir,
                                                               now - window)
    except (MJFError, OSError) as error:  # the rest of the metrics are still worth writing
        if log is not None:
            log.warning(f"metrics: no record figures: {error}")
        return
    totals = job_record.summary_of(rows)
    families("mjf_records_window_seconds", GAUGE,
             "the window of ended jobs the mjf_records_ figures sum ([metrics] "
             "records_hours)").add(window)
    families("mjf_records_jobs", GAUGE, "jobs that ended in the window (their records)"
             ).add(totals["jobs"])
    families("mjf_records_unreadable", GAUGE, "record files of the window that are no "
             "record (skipped)").add(len(skipped))
    families("mjf_records_allocated_cpu_seconds", GAUGE,
             "CPU seconds allocated (wall time x allocated_cpu) to jobs that ended in the "
             "window, of those with CPU figures (/ 3600: core-hours)"
             ).add(round(totals["allocated_core_hours"] * 3600, 3))
    families("mjf_records_used_cpu_seconds", GAUGE,
             "CPU seconds used by the same jobs (/ 3600: core-hours)"
             ).add(round(totals["used_core_hours"] * 3600, 3))
    over = families("mjf_records_jobs_over_promise", GAUGE,
                    "jobs that ended in the window and went past a promise: wall "
                    "(wall_limit_secs), memory (max_rss_bytes), cpu (cpu_limit_secs), "
                    "cores (more CPU time than allocated_cpu gives)")
    for promise in PROMISES:
        over.add(totals["over"][promise], promise=promise)
    # Any local user may hand records in: their figures are shown apart, never summed
    # with root's (which the efficiency alert watches).
    handed = job_record.summary_of(handed_in)
    families("mjf_records_handed_in_jobs", GAUGE, "records of the window jobs' users handed "
             "in (their word): not in the figures above").add(handed["jobs"])
    families("mjf_records_handed_in_allocated_cpu_seconds", GAUGE,
             "CPU seconds allocated, by what jobs' users handed in").add(
        round(handed["allocated_core_hours"] * 3600, 3))
    families("mjf_records_handed_in_used_cpu_seconds", GAUGE,
             "CPU seconds used, by what jobs' users handed in").add(
        round(handed["used_core_hours"] * 3600, 3))


# --- writing -------------------------------------------------------------------------

def write_file(path: str, text: str) -> None:
    """Write ``text`` to ``path`` for the textfile collector: a hidden temporary file
    beside it (a name the collector does not read), renamed over it, so a scrape sees
    the old file or the new, whole. Neither is reached through a symlink planted there."""
    from .errors import StoreError
    from .safefs import Dir, describe

    directory, name = os.path.split(path)
    try:
        fd = os.open(directory or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as error:
        raise StoreError(describe(error, directory)) from None
    with Dir(fd, directory) as target:
        target.sweep_leftovers()  # what a killed run left
        target.replace(name, text, 0o644)
