"""The interactive ``mjf`` subcommands (click). Hooks never import this module."""

from __future__ import annotations

import json
import os
import sys
import time

import click

from .. import check, spec
from ..errors import MJFError
from ..reader import Features, JobView, is_url
from . import mjf as hooks

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


def _classify(locations: tuple[str, ...]) -> tuple[Features | None, list[Features]]:
    """Machine and job features to look at: from the environment, or the locations given.

    A location ending in ``machinefeatures`` or ``jobfeatures`` (a directory or
    a URL) is that; a local base_dir means its machine features and every job;
    a job's directory means its ``jobfeatures``.
    """
    if not locations:
        view = JobView.from_environ()
        return view.machine, [view.job] if view.job else []
    machine, jobs = None, []
    for location in locations:
        location = location.rstrip("/") or "/"
        last = location.rsplit("/", 1)[-1]
        if last == "machinefeatures":
            machine = Features(location)
        elif last == "jobfeatures":
            jobs.append(Features(location))
        elif not is_url(location) and os.path.isdir(os.path.join(location, "machinefeatures")):
            machine = Features(os.path.join(location, "machinefeatures"))
            jobs_dir = os.path.join(location, "jobs")
            names = sorted(os.listdir(jobs_dir)) if os.path.isdir(jobs_dir) else []
            jobs += [Features(os.path.join(jobs_dir, name, "jobfeatures"))
                     for name in names if not name.startswith(".")]
        elif not is_url(location) and os.path.isdir(os.path.join(location, "jobfeatures")):
            jobs.append(Features(os.path.join(location, "jobfeatures")))
        else:
            raise click.UsageError(
                f"cannot tell whether {location} holds machine or job features: give a "
                ".../machinefeatures or .../jobfeatures location, a job directory or a base_dir"
            )
    return machine, jobs


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON with typed values.")
@click.argument("locations", nargs=-1)
def show(as_json: bool, locations: tuple[str, ...]) -> None:
    """Show the current job's features, or those of directories, URLs or a base_dir."""
    machine, jobs = _classify(locations)
    sections = [("MACHINEFEATURES", machine)] * bool(machine) + [("JOBFEATURES", job)
                                                                  for job in jobs]
    if not sections:
        raise click.UsageError("neither MACHINEFEATURES nor JOBFEATURES is set: give a location")
    try:
        if as_json:
            document = {f"{label} {source.location}" if len(jobs) > 1 else label:
                        source.as_dict() for label, source in sections}
            click.echo(json.dumps(document, indent=2, sort_keys=True))
            return
        for label, source in sections:
            values = source.read_all()
            click.echo(f"{label}={source.location}")
            width = max((len(name) for name in values), default=0)
            for name, raw in values.items():
                click.echo(f"  {name:<{width}}  {raw}")
    except MJFError as error:
        raise click.ClickException(str(error)) from None


@cli.command()
@click.argument("key")
def get(key: str) -> None:
    """Print one key's value from $JOBFEATURES or $MACHINEFEATURES (exit 1 if absent)."""
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
    except MJFError as error:
        raise click.ClickException(str(error)) from None
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
    except MJFError as error:
        click.echo(f"mjf remaining: {error}", err=True)
        sys.exit(2)
    if seconds is None:
        sys.exit(1)
    click.echo(max(0, seconds))


@cli.command("drain")
@click.option("--in", "in_", metavar="DURATION", help="Shut down after DURATION (90m, 2h, 1d).")
@click.option("--at", metavar="TIME", help="Shut down at TIME (ISO-8601 or UNIX seconds).")
@click.option("--cancel", is_flag=True, help="Withdraw the announced shutdown.")
@click.option("--force", is_flag=True, help="Allow a shutdown sooner than grace_secs (loudly).")
def drain_command(in_: str | None, at: str | None, cancel: bool, force: bool) -> None:
    """Announce this machine's shutdown to it and its jobs (shutdowntime, shutdowntime_job)."""
    from .. import config as config_module
    from .. import drain, lifecycle
    from ..log import Log

    if [bool(in_), bool(at), cancel].count(True) != 1:
        raise click.UsageError("give exactly one of --in, --at and --cancel")
    try:
        config = config_module.load()
        store = lifecycle.store_for(config)
        log = Log("mjf drain", config.log)
        if cancel:
            summary = drain.cancel(config, store, log)
        else:
            shutdown = drain.parse_time(at) if at else \
                int(time.time()) + drain.parse_duration_secs(in_)
            summary = drain.drain(config, store, log, shutdown, force)
    except MJFError as error:
        raise click.ClickException(str(error)) from None
    click.echo(summary)


@cli.command("check")
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
@click.argument("locations", nargs=-1)
def check_command(as_json: bool, locations: tuple[str, ...]) -> None:
    """Check machine and job features against the spec (exit 0 ok, 1 warning, 2 error).

    LOCATIONS: .../machinefeatures and .../jobfeatures directories or URLs, job
    directories, or a base_dir; by default $MACHINEFEATURES and $JOBFEATURES.
    """
    machine, jobs = _classify(locations)
    findings = check.check(machine, jobs)
    status = check.worst(findings)
    if as_json:
        click.echo(json.dumps({"status": status or "ok",
                               "exit_code": check.EXIT_CODES[status],
                               "findings": [finding.as_dict() for finding in findings]},
                              indent=2))
    else:
        for finding in findings:
            click.echo(str(finding))
        click.echo(f"{(status or 'ok').upper()}: {len(findings)} finding(s)")
    sys.exit(check.EXIT_CODES[status])
