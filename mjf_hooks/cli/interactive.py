"""The interactive ``mjf`` subcommands (click). Hooks never import this module."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import time
from typing import TYPE_CHECKING

import click

from .. import check, spec
from ..errors import MJFError
from ..reader import Features, JobView, is_url
from . import hook_commands as hooks

if TYPE_CHECKING:
    from collections.abc import Callable

_PASS_THROUGH = {"ignore_unknown_options": True, "allow_extra_args": True,
                 "help_option_names": []}


@click.group(help="Machine/Job Features (HSF-TN-2016-02) for this node and its jobs.")
@click.version_option(package_name="mjf-hooks")
def cli() -> None:
    pass


@cli.command(context_settings=_PASS_THROUGH, add_help_option=False,
             help="Run a command as a job of this machine with MJF set up (see --help).")
@click.pass_context
def run(context: click.Context) -> None:
    sys.exit(hooks.run_command(context.args))


@cli.command(context_settings=_PASS_THROUGH, add_help_option=False,
             help="Write this machine's machinefeatures/ (see --help).")
@click.pass_context
def machine(context: click.Context) -> None:
    sys.exit(hooks.machine_command(context.args))


@cli.command(context_settings=_PASS_THROUGH, add_help_option=False,
             help="Bring this node's MJF state up to date, for cron or a timer (see --help).")
@click.pass_context
def sync(context: click.Context) -> None:
    sys.exit(hooks.sync_command(context.args))


@cli.command("htcondor-wrapper", context_settings=_PASS_THROUGH, add_help_option=False,
             help="Replay mjf-htcondor-wrapper for a command (see --help).")
@click.pass_context
def htcondor_wrapper(context: click.Context) -> None:
    sys.exit(hooks.htcondor_wrapper_command(context.args))


# What reading a location may raise: the reader's errors, and OSError as a safety net
# (the reader turns those into ReadError): a message, never a traceback.
_UNREADABLE = (MJFError, OSError)


def _classify(locations: tuple[str, ...],
              ) -> tuple[Features | None, list[Features], list[check.Listing]]:
    """Machine features, named job features and listed base_dirs' jobs to look at:
    from the environment, or the locations given.

    A location ending in ``machinefeatures`` or ``jobfeatures`` (a directory or
    a URL) is that; a local base_dir means its machine features and every job
    in its ``jobs/`` (listed: they may end while being read); a job's directory
    means its ``jobfeatures``.
    """
    if not locations:
        view = JobView.from_environ()
        return view.machine, [view.job] if view.job else [], []
    machine, jobs, listings = None, [], []
    for location in locations:
        location = location.rstrip("/") or "/"
        last = location.rsplit("/", 1)[-1]
        if last == "machinefeatures":
            machine = Features(location)
        elif last == "jobfeatures":
            jobs.append(Features(location))
        elif not is_url(location) and os.path.isdir(os.path.join(location, "machinefeatures")):
            machine = Features(os.path.join(location, "machinefeatures"))
            listings.append(check.list_jobs(location))
        elif not is_url(location) and os.path.isdir(os.path.join(location, "jobfeatures")):
            jobs.append(Features(os.path.join(location, "jobfeatures")))
        else:
            raise click.UsageError(
                f"cannot tell whether {location} holds machine or job features"
                f"{_why_unreadable(location)}: give a .../machinefeatures or .../jobfeatures "
                "location, a job directory or a base_dir"
            )
    return machine, jobs, listings


def _why_unreadable(location: str) -> str:
    """The system's reason a local location cannot be looked into (a typo, permissions)."""
    if is_url(location):
        return ""
    try:
        os.listdir(location)
    except OSError as error:
        return f" ({error.strerror or error})"
    return ""


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON with typed values.")
@click.argument("locations", nargs=-1)
def show(as_json: bool, locations: tuple[str, ...]) -> None:
    """Show the current job's features, or those of directories, URLs or a base_dir.

    What cannot be read is one line on stderr and exit status 1; the rest is shown.
    """
    machine, jobs, listings = _classify(locations)
    # (label, location, listed: a job found in a base_dir's jobs/, which may end meanwhile)
    sections = [("MACHINEFEATURES", machine, False)] * bool(machine) + [
        ("JOBFEATURES", job, False) for job in jobs] + [
        ("JOBFEATURES", job, True) for listing in listings for job in listing.jobs]
    if not sections:
        raise click.UsageError("neither MACHINEFEATURES nor JOBFEATURES is set: give a location")
    failed = False
    for listing in listings:
        if listing.error is not None:
            click.echo(f"mjf show: {listing.jobs_dir}: cannot be listed "
                       f"({listing.why_unlisted()}): its jobs are not shown", err=True)
            failed = True
    shown = []
    for label, source, listed in sections:
        try:
            values = source.as_dict() if as_json else source.read_all()
        except _UNREADABLE as error:
            if not (listed and check.has_ended(source)):
                click.echo(f"mjf show: {error}", err=True)
                failed = True
            continue
        if listed and check.has_ended(source):
            continue  # the job ended while it was read: gone, not broken
        shown.append((label, source, values))
    if as_json:
        several = sum(label == "JOBFEATURES" for label, _, _ in sections) > 1
        click.echo(json.dumps({f"{label} {source.location}" if several else label: values
                               for label, source, values in shown}, indent=2, sort_keys=True))
    else:
        for label, source, values in shown:
            click.echo(f"{label}={source.location}")
            width = max((len(name) for name in values), default=0)
            for name, raw in values.items():
                click.echo(f"  {name:<{width}}  {raw}")
    sys.exit(1 if failed else 0)


@cli.command()
@click.argument("key")
def get(key: str) -> None:
    """Print one key's value from $JOBFEATURES or $MACHINEFEATURES.

    Exit 1 if absent, 2 if the location cannot be read.
    """
    view = JobView.from_environ()
    try:
        source = view.source_for(key)
    except KeyError:
        raise click.UsageError(f"{key!r} is not an MJF key") from None
    variable = "MACHINEFEATURES" if source is view.machine else "JOBFEATURES"
    if source is None:
        scope = spec.KEYS[key].scope if key in spec.KEYS else None
        variable = "MACHINEFEATURES" if scope == spec.MACHINE else "JOBFEATURES"
        click.echo(f"mjf get: ${variable} is not set", err=True)
        sys.exit(1)
    try:
        value = source.raw(key)
    except _UNREADABLE as error:  # 2, not 1: "absent" would be a lie
        click.echo(f"mjf get: {error}", err=True)
        sys.exit(2)
    if value is None:
        click.echo(f"mjf get: {key} is not set in {source.location}", err=True)
        sys.exit(1)
    click.echo(value)


@cli.command()
def remaining() -> None:
    """Print the seconds the job may still run (0 once past); exit 1 if nothing bounds it.

    The earliest of jobstart_secs + wall_limit_secs, shutdowntime_job and
    shutdowntime, minus now; what is missing is skipped.
    """
    try:
        seconds = JobView.from_environ().remaining_seconds()
    except _UNREADABLE as error:
        click.echo(f"mjf remaining: {error}", err=True)
        sys.exit(2)
    if seconds is None:
        sys.exit(1)
    click.echo(max(0, seconds))


@cli.command("drain")
@click.option("--in", "in_", metavar="DURATION", help="Shut down after DURATION (90m, 2h, 1d).")
@click.option("--at", metavar="TIME", help="Shut down at TIME (ISO-8601 or UNIX seconds).")
@click.option("--cancel", is_flag=True, help="Withdraw the announced shutdown.")
@click.option("--plan", is_flag=True,
              help="Propose the shutdown within --within that wastes least (jobs' $JOBSTATUS).")
@click.option("--within", metavar="DURATION", help="With --plan: the window, from now.")
@click.option("--apply", "apply_", is_flag=True, help="With --plan: announce the best time.")
@click.option("--json", "as_json", is_flag=True, help="With --plan: print the plan as JSON.")
@click.option("--force", is_flag=True, help="Allow a shutdown sooner than grace_secs (loudly).")
def drain_command(in_: str | None, at: str | None, cancel: bool, plan: bool,
                  within: str | None, apply_: bool, as_json: bool, force: bool) -> None:
    """Announce this machine's shutdown to it and its jobs (shutdowntime, shutdowntime_job)."""
    from .. import config as config_module
    from .. import drain, store_locations, timeparse
    from ..log import Log

    if [bool(in_), bool(at), cancel, plan].count(True) != 1:
        raise click.UsageError("give exactly one of --in, --at, --cancel and --plan")
    if not plan and (within or apply_ or as_json):
        raise click.UsageError("--within, --apply and --json go with --plan")
    if plan and not within:
        raise click.UsageError("--plan needs --within DURATION (the window, from now)")
    try:
        config = config_module.load()
        store = store_locations.store_for(config)
        log = Log("mjf drain", config.log)
        if plan:
            _drain_plan(config, store, log, timeparse.parse_duration_secs(within), apply_, as_json,
                        force)
            return
        if cancel:
            summary = drain.cancel(config, store, log)
        else:
            shutdown = timeparse.parse_time(at) if at else \
                int(time.time()) + timeparse.parse_duration_secs(in_)
            summary = drain.drain(config, store, log, shutdown, force)
    except MJFError as error:
        raise click.ClickException(str(error)) from None
    click.echo(summary)


def _drain_plan(config, store, log, within: int, apply_: bool, as_json: bool,
                force: bool) -> None:
    from .. import drain, drainplan, status

    grace, promise = drain.earliest_notice(config, store)
    if within < grace:
        raise click.ClickException(
            f"the window ends in {within} s, before the earliest shutdown allowed "
            f"({promise} = {grace} s from now): give a longer --within")
    # May wait for pilots' locks: now is taken after.
    reports = status.collect(config, log=log)
    now = int(time.time())
    earliest, latest = now + grace, now + within
    candidates = drainplan.plan(reports, now, earliest, latest)
    chosen = drainplan.best(candidates)
    unverified = [report for report in reports if report.unverified is not None]
    if as_json:
        click.echo(json.dumps({"now": now, "earliest": earliest, "latest": latest,
                               "best": chosen.time, "applied": apply_,
                               "candidates": [candidate.as_dict() for candidate in candidates],
                               "unverified": [{"job_id": report.job_id,
                                               "jobstatus": report.location,
                                               "why": report.unverified}
                                              for report in unverified]},
                              indent=2))
    else:
        click.echo(f"{len(reports) - len(unverified)} job(s) counted"
                   f"{f', {len(unverified)} unverified' if unverified else ''}; window "
                   f"{_when(earliest)} (the earliest allowed) to {_when(latest)}")
        click.echo(f"  {'SHUTDOWN':<21} {'UNIX':>10} {'WASTE core-s':>14} {'core-h':>9}  WHY")
        for candidate in candidates:
            mark = "*" if candidate is chosen else " "
            click.echo(f"{mark} {_when(candidate.time):<21} {candidate.time:>10} "
                       f"{candidate.waste:>14} {candidate.waste / 3600:>9.1f}  "
                       f"{_shown(candidate.why)}")
        click.echo(f"Least waste: {_when(chosen.time)} ({chosen.time}); per job:")
        for report, waste, why in sorted(chosen.jobs, key=lambda job: -job[1]):
            click.echo(f"  {_shown(report.job_id):<20} {waste:>12}  {_shown(why)}")
        if unverified:
            click.echo("Unverified, not counted (nothing but their user vouches for them):")
        for report in unverified:
            click.echo(f"  {_shown(report.job_id):<20} {_shown(report.location)}: "
                       f"{_shown(report.unverified)}")
    if apply_:
        summary = drain.drain(config, store, log, chosen.time, force, now=now)
        click.echo(summary, err=as_json)
    elif not as_json:
        click.echo("Not announced: --apply does.")


def _when(moment: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(moment))


@cli.command("status", context_settings={"ignore_unknown_options": False})
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--timeout", type=click.FloatRange(0, 60), default=2.0, show_default=True,
              help="Seconds to wait, in all, for locks the pilots hold.")
@click.argument("jobs", nargs=-1)
def status_command(as_json: bool, timeout: float, jobs: tuple[str, ...]) -> None:
    """What the pilots of this node's jobs report in $JOBSTATUS (draft 0.99).

    Per job: the values and the draft's figures (remaining_time, draining_waste,
    kill_waste, in seconds and core-seconds), the job whose loss costs least
    first. A pilot updates its own with `mjf status set KEY=VALUE...`.
    Exit 1 if a named job is not found.
    """
    from .. import config as config_module
    from .. import status
    from ..log import Log

    try:
        config = config_module.load()
        reports = status.collect(config, jobs, timeout, Log("mjf status", config.log))
    except MJFError as error:
        raise click.ClickException(str(error)) from None
    now = int(time.time())
    ordered = status.least_critical_first(reports, now)
    if as_json:
        click.echo(json.dumps({"now": now, "jobs": [report.as_dict(now) for report in ordered]},
                              indent=2))
    else:
        for report in ordered:
            figures = report.figures(now)
            cores = report.allocated_cpu if report.allocated_cpu is not None else "?"
            click.echo(f"job {_shown(report.job_id)}  allocated_cpu {cores}  "
                       f"{_shown(report.describe())}")
            if report.unverified is not None:
                click.echo(f"  unverified (a drain plan does not count it): "
                           f"{_shown(report.unverified)}")
            values = report.status.raw if report.status else {}
            if values:
                click.echo("  " + "  ".join(f"{key}={_shown(value.rstrip())}"
                                            for key, value in values.items()))
            for key, why in (report.status.problems.items() if report.status else ()):
                click.echo(f"  {key}: {_shown(why)}")
            shown = [f"{name} {_figure(figures[name])}" for name in (
                "remaining_time", "draining_waste", "kill_waste", "priority_factor",
                "can_postpone_last_job")]
            click.echo("  " + ("assumed: " if figures["assumed"] else "") + "  ".join(shown))
    found = {report.job_id for report in reports}
    missing = [job for job in jobs if job not in found]
    for job in missing:
        click.echo(f"mjf status: job {job} is not on this node", err=True)
    sys.exit(1 if missing else 0)


@cli.command("records")
@click.option("--since", metavar="TIME",
              help="Only jobs that ended since TIME (ISO-8601, UNIX seconds, or a duration "
                   "ago such as 7d).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--summary", is_flag=True, help="Print the totals only.")
def records_command(since: str | None, as_json: bool, summary: bool) -> None:
    """This node's job records ([records] dir): what MJF promised each job against what
    it used - CPU efficiency, peak memory against max_rss_bytes, wall time against
    wall_limit_secs - and the jobs that went past a promise; --summary totals them.
    """
    from .. import config as config_module
    from .. import record_files, records, timeparse

    try:
        config = config_module.load()
        if not config.records_dir:
            raise MJFError(f"{config.path}: no records are kept here: set [records] dir")
        start = None if since is None else timeparse.parse_since(since, int(time.time()))
        listing = record_files.read_all(config.records_dir, start)
    except MJFError as error:
        raise click.ClickException(str(error)) from None
    found = []
    for data in listing.records:
        try:
            found.append(records.record_from_json(data))
        except (ValueError, TypeError, RecursionError):
            job = data.get("job_id")
            listing.unreadable.append(
                f"the record of job {_shown(job) if isinstance(job, str) else '?'}")
    for what in listing.unreadable:
        click.echo(f"mjf records: {what} is not a record: skipped", err=True)
    if summary:
        totals = records.summary(found)
        if as_json:
            click.echo(json.dumps(totals, indent=2))
            return
        _print_summary(totals)
        return
    if as_json:
        click.echo(json.dumps([{**records.record_json(record), "figures": records.figures(record)}
                               for record in found], indent=2))
        return
    click.echo(f"{'END (UTC)':<19} {'JOB':<24} {'USER':<10} {'CPUS':>4} {'CPU EFF':>7} "
               f"{'PEAK MEM':>9} {'OF MAX':>6} {'WALL':>9} {'OF LIMIT':>8}  OVER")
    for record in found:
        figures = records.figures(record)
        end = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(record.end_time or 0))
        click.echo(f"{end:<19} {_shown(record.job_id)[:24]:<24} "
                   f"{_shown(record.user or '?')[:10]:<10} {_figure(record.allocated_cpu):>4} "
                   f"{_percent(figures['cpu_efficiency']):>7} "
                   f"{_mebibytes(record.peak_memory_bytes):>9} "
                   f"{_percent(figures['memory_used_fraction']):>6} "
                   f"{_duration(record.wall_secs):>9} "
                   f"{_percent(figures['wall_used_fraction']):>8}  "
                   f"{','.join(figures['over']) or '-'}")


def _print_summary(totals: dict) -> None:
    over = totals["over"]
    click.echo(f"jobs: {totals['jobs']} ({totals['jobs_with_cpu_figures']} with CPU figures)")
    click.echo(f"core-hours: {totals['allocated_core_hours']:.1f} allocated, "
               f"{totals['used_core_hours']:.1f} used, {totals['idle_core_hours']:.1f} idle; "
               f"CPU efficiency {_percent(totals['cpu_efficiency'])}")
    click.echo(f"median peak memory of max_rss_bytes: "
               f"{_percent(totals['median_memory_used_fraction'])}; median wall time of "
               f"wall_limit_secs: {_percent(totals['median_wall_used_fraction'])}")
    click.echo(f"jobs over a promise: {totals['jobs_over_a_promise']} (wall {over['wall']}, "
               f"memory {over['memory']}, cpu {over['cpu']}, cores {over['cores']})")


def _percent(fraction: float | None) -> str:
    return "?" if fraction is None else f"{fraction * 100:.0f}%"


def _mebibytes(value: float | None) -> str:
    return "?" if value is None else f"{value / 2**20:.0f}M"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    whole = int(seconds)
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


def _shown(text: str) -> str:
    """What a job's user wrote, safe for root's terminal: no control characters (a
    forged line, an escape sequence), at most 200 characters."""
    return "".join(char if " " <= char <= "~" else "?" for char in text[:200])


def _figure(value) -> str:
    return "?" if value is None else str(value)


@cli.command("describe")
@click.option("--format", "format_", default="classad", metavar="FORMAT",
              help="classad (default), dirac, glue2 or json.")
@click.argument("locations", nargs=-1)
def describe_command(format_: str, locations: tuple[str, ...]) -> None:
    """Describe this job slot for matchmaking: ClassAd (glideinWMS MJF_* and GLUE 1.3),
    DIRAC's resource description, GLUE 2, or all of them as JSON.

    LOCATIONS: a .../machinefeatures and a .../jobfeatures (directories or URLs), a job
    directory, or a base_dir (the node alone); by default $MACHINEFEATURES and
    $JOBFEATURES, else this node. Errors are one line and exit status 2.
    """
    from .. import describe

    def fail(message: str) -> None:
        click.echo(f"mjf describe: {message}", err=True)
        sys.exit(2)

    if format_ not in describe.FORMATS:
        fail(f"unknown format {format_!r}: give one of {', '.join(describe.FORMATS)}")
    options, slot = _slot_of("mjf describe", locations, fail)
    arch = os.uname().machine
    if format_ == "classad":
        click.echo(describe.classad_text(describe.classad(slot)), nl=False)
        return
    document = {"dirac": lambda: describe.dirac(slot, options),
                "glue2": lambda: describe.glue2(slot, arch, options.benchmark),
                "json": lambda: describe.everything(slot, options, arch)}[format_]()
    click.echo(json.dumps(document, indent=2))


def _slot_of(command: str, locations: tuple[str, ...], fail):
    """(describe options, the slot) of the locations, for `mjf describe` and `mjf match`;
    a value that cannot be read is a warning, a location that cannot be read ``fail``s."""
    from .. import describe

    try:
        options, machine_raw, job_raw = _describe_inputs(locations)
    except click.UsageError as error:
        fail(error.format_message())
    except _UNREADABLE as error:
        fail(str(error))
    slot, problems = describe.slot(machine_raw, job_raw, _text("/proc/cpuinfo"),
                                   _text("/etc/os-release") or _text("/usr/lib/os-release"),
                                   time.time())
    for problem in problems:
        click.echo(f"{command}: warning: {problem}", err=True)
    return options, slot


def _describe_inputs(locations: tuple[str, ...]):
    """(options, machine features, job features or None) for `mjf describe`, as raw texts."""
    from .. import config as config_module
    from .. import describe

    config = config_module.load()
    options = describe.Options(**config.describe, benchmark=config.benchmark)
    machine, jobs, _ = _classify(locations)  # a base_dir: its node, not its jobs
    if len(jobs) > 1:
        raise click.UsageError("give one job: a description is of one slot")
    job = jobs[0] if jobs else None
    if machine is None and job is not None and not is_url(job.location):
        # A job directory of a base_dir: <base_dir>/jobs/<id>/jobfeatures.
        candidate = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
            job.location))), "machinefeatures")
        if os.path.isdir(candidate):
            machine = Features(candidate)
    if machine is None and job is None:
        machine_dir = os.path.join(config.base_dir, "machinefeatures")
        if os.path.isdir(machine_dir):
            machine = Features(machine_dir)
        else:  # this node as `mjf machine` would describe it
            from .. import features
            from ..probe import cpu

            total = None if "total_cpu" in config.machine else cpu.total_cpu()
            return options, features.render(features.machine_features(config, total)), None
    return (options, machine.read_all() if machine else {},
            job.read_all() if job else None)


def _text(path: str) -> str:
    """A small system file's text; empty when it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read(1 << 20)
    except OSError:
        return ""


@cli.command("check")
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
@click.argument("locations", nargs=-1)
def check_command(as_json: bool, locations: tuple[str, ...]) -> None:
    """Check machine and job features against the spec (exit 0 ok, 1 warning, 2 error).

    LOCATIONS: .../machinefeatures and .../jobfeatures directories or URLs, job
    directories, or a base_dir; by default $MACHINEFEATURES and $JOBFEATURES.
    """
    machine, jobs, listings = _classify(locations)
    findings = check.check(machine, jobs, listings=listings)
    status = check.worst(findings)
    if as_json:
        click.echo(json.dumps({"status": status or "ok",
                               "exit_code": check.EXIT_CODES[status],
                               "findings": [finding.as_dict() for finding in findings]},
                              indent=2))
    else:
        for finding in findings:
            click.echo(str(finding))
        # The status line a monitoring system shows: OK whenever the exit status is 0.
        label = "ok" if check.EXIT_CODES[status] == 0 else status
        click.echo(f"{label.upper()}: {len(findings)} finding(s)")
    sys.exit(check.EXIT_CODES[status])


@cli.command("match")
@click.option("--explain", is_flag=True, help="Say which clause failed, with both sides' values.")
@click.option("--jdl", "jdls", multiple=True, metavar="PATH",
              help="A JDL file (gLite or DIRAC), or a directory of them; repeatable.")
@click.option("--location", "locations", multiple=True, metavar="LOCATION",
              help="The slot to match (as for mjf describe); default: this job, else the node.")
@click.argument("expression", required=False)
def match_command(explain: bool, jdls: tuple[str, ...], locations: tuple[str, ...],
                  expression: str | None) -> None:
    """Does this job slot satisfy a job's requirements? Exit 0 yes, 1 no, 2 unreadable.

    EXPRESSION: ClassAd Requirements, gLite style (other.X) or HTCondor style (TARGET.X),
    against `mjf describe --format classad`. --jdl: JDL files; one whose Requirements is
    an expression is judged so, a DIRAC JDL (its keys, or RFC #7's Requirements = [...])
    by DIRAC's rules against `mjf describe --format dirac`. Needs HTCondor's ClassAd
    library: pip install 'mjf-hooks[match]'.
    """
    from .. import describe
    from ..match import Verdict
    from ..match.classad import ClassAdSlot
    from ..match.dirac import DiracResource, jdl_requirements

    def fail(message: str) -> None:
        click.echo(f"mjf match: {message}", err=True)
        sys.exit(2)

    if (expression is None) == (not jdls):
        fail("give a requirement EXPRESSION or --jdl PATH, not both and not neither")
    options, slot = _slot_of("mjf match", locations, fail)
    try:
        classad_slot = ClassAdSlot(describe.classad(slot))
        if expression is not None:
            verdicts = [("", classad_slot.requirements(expression, explain))]
        else:
            resource = DiracResource(describe.dirac(slot, options))
            verdicts = [(path, Verdict(False, unreadable=why) if text is None else
                         jdl_requirements(text, classad_slot, resource, explain))
                        for path, text, why in _jdl_texts(jdls)]
    except MJFError as error:  # the library is missing
        fail(str(error))
    for path, verdict in verdicts:
        where = f"{_shown(path)}: " if path else ""
        for warning in verdict.warnings:
            click.echo(f"mjf match: {where}warning: {_shown(warning)}", err=True)
        if verdict.unreadable:
            click.echo(f"mjf match: {where}{_shown(verdict.unreadable)}", err=True)
            continue
        click.echo(f"{where}{'match' if verdict.matched else 'no match'}")
        for reason in verdict.reasons:
            click.echo(f"  {_shown(reason)}")
    sys.exit(max(verdict.exit_code for _, verdict in verdicts))


# A JDL is a few kilobytes; a file larger than this is no JDL, and is not read whole.
_JDL_MAX_BYTES = 1 << 20


def _jdl_texts(paths: tuple[str, ...]) -> list[tuple[str, str | None, str | None]]:
    """``(path, text, None)`` of each JDL given (a file, or every regular file of a
    directory, in name order), or ``(path, None, why)`` for one that cannot be read: one
    file never keeps the others from being judged."""
    found: list[tuple[str, str | None, str | None]] = []
    for path in paths:
        if not os.path.isdir(path):
            found.append(_jdl_text(path))
            continue
        try:
            names = sorted(os.listdir(path))
        except OSError as error:
            found.append((path, None, error.strerror or str(error)))
            continue
        found += [_jdl_text(os.path.join(path, name)) for name in names
                  if os.path.isfile(os.path.join(path, name))]
    if not found:
        found.append((", ".join(paths), None, "no JDL file there"))
    return found


def _jdl_text(path: str) -> tuple[str, str | None, str | None]:
    """One JDL file's text, or why it cannot be read. Opened without waiting (a FIFO
    returns at once) and read to at most _JDL_MAX_BYTES."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with open(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return path, None, "not a regular file"
            data = handle.read(_JDL_MAX_BYTES + 1)
    except OSError as error:
        return path, None, error.strerror or str(error)
    if len(data) > _JDL_MAX_BYTES:
        return path, None, f"larger than {_JDL_MAX_BYTES >> 20} MiB: not read as a JDL"
    try:
        return path, data.decode("utf-8"), None
    except UnicodeDecodeError as error:
        return path, None, f"not UTF-8 text (byte {error.start + 1}): not read as a JDL"


@cli.command("container-args")
@click.option("--runtime", type=click.Choice(["apptainer", "bubblewrap", "charliecloud"]),
              default="apptainer", show_default=True, help="The container runtime.")
@click.option("--url", "urls", is_flag=True,
              help="Pass MACHINEFEATURES/JOBFEATURES as the URLs of [mjf] url_base; bind nothing.")
@click.option("--inside", metavar="DIR",
              help="Bind at DIR/machinefeatures, DIR/jobfeatures, DIR/jobstatus instead of "
                   "the same paths.")
@click.option("--format", "format_", type=click.Choice(["shell", "lines", "json", "names"]),
              default="shell", show_default=True, help="How to print them (see above).")
def container_args_command(runtime: str, urls: bool, inside: str | None,
                           format_: str) -> None:
    """Print what a pilot adds to its container command line so that the payload sees
    this job's MJF: binds of $MACHINEFEATURES and $JOBFEATURES (read-only) and
    $JOBSTATUS (read-write, the pilot writes there) at the same paths, and the
    variables, set explicitly so that a runtime that cleans the environment passes them.

    \b
    shell (default): one line of shell-quoted words:
        eval "set -- $(mjf container-args --runtime bubblewrap)"; bwrap ... "$@" -- CMD
    lines: one word a line (bash: mapfile -t args < <(mjf container-args --format lines))
    json: {"args", "binds", "environment", "names"}
    names: the variable names, one a line, for a runtime's environment whitelist

    With --url nothing is bound: the variables are the URLs under url_base, and
    $JOBSTATUS, which cannot be a URL, is left out. A value that is already a URL is
    passed as it is. charliecloud's ch-run binds read-write only and needs the mount
    points in the image (or --inside DIR to where they are).

    Exit 0 printed (a runtime not installed here is a warning on stderr: the
    arguments are the same); 1 nothing printed: no $JOBFEATURES (not a job with MJF), a
    path the runtime cannot express, no URL for a directory, a broken config; 2 usage.
    """
    from .. import containers

    def fail(message: str) -> None:
        click.echo(f"mjf container-args: {message}", err=True)
        sys.exit(1)

    try:
        served = _served_urls(os.environ) if urls else None
        plan = containers.plan(os.environ, urls=urls, served=served, inside=inside)
        words, warnings = containers.runtime_args(runtime, plan)
        text = containers.render(format_, runtime, plan, words)
    except MJFError as error:
        fail(str(error))
    for bind in plan.binds:
        if not os.path.isdir(bind.source):
            fail(f"{bind.source} is not a directory here (has the job ended?)")
    for warning in warnings:
        click.echo(f"mjf container-args: warning: {warning}", err=True)
    command = containers.RUNTIMES[runtime]
    if format_ != "names" and shutil.which(command) is None:
        click.echo(f"mjf container-args: warning: {runtime} ({command}) is not installed "
                   "here (not on PATH); the arguments are printed anyway", err=True)
    click.echo(text, nl=False)


def _served_urls(environ) -> Callable[[str], str | None]:
    """The URL at which [mjf] url_base serves a path of base_dir (None: not served)."""
    from .. import config as config_module
    from ..errors import SiteInputError
    from ..exports import served_url

    config = config_module.load()
    if not config.url_base:
        raise SiteInputError(f"{config.path}: --url needs [mjf] url_base, the URL that "
                             "serves base_dir (see contrib/nginx)")
    return lambda path: served_url(config, path)
