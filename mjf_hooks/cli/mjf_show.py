"""`mjf show`, `mjf get`, `mjf remaining` and `mjf check`: reading machine and job features."""

from __future__ import annotations

import json
import sys

import click

from .. import check, spec
from ..options import UsageError
from ..reader import JobView
from . import locations as locations_module
from .config_option import config_option
from .locations import UNREADABLE


def classify(locations: tuple[str, ...]):
    """:func:`locations.classify`, a location that is none of its kinds click's usage
    error."""
    try:
        return locations_module.classify(locations)
    except UsageError as error:
        raise click.UsageError(str(error)) from None


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON with typed values.")
@click.argument("locations", nargs=-1)
@config_option(gives=None)
def show(as_json: bool, locations: tuple[str, ...]) -> None:
    """Show the current job's features, or those of directories, URLs or a base_dir.

    What cannot be read is one line on stderr and exit status 1; the rest is shown.
    """
    machine, jobs, listings = classify(locations)
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
        except UNREADABLE as error:
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


@click.command()
@click.argument("key")
@config_option(gives=None)
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
    except UNREADABLE as error:  # 2, not 1: "absent" would be a lie
        click.echo(f"mjf get: {error}", err=True)
        sys.exit(2)
    if value is None:
        click.echo(f"mjf get: {key} is not set in {source.location}", err=True)
        sys.exit(1)
    click.echo(value)


@click.command()
@config_option(gives=None)
def remaining() -> None:
    """Print the seconds the job may still run (0 once past); exit 1 if nothing bounds it.

    The earliest of jobstart_secs + wall_limit_secs, shutdowntime_job and
    shutdowntime, minus now; what is missing is skipped.
    """
    try:
        seconds = JobView.from_environ().remaining_seconds()
    except UNREADABLE as error:
        click.echo(f"mjf remaining: {error}", err=True)
        sys.exit(2)
    if seconds is None:
        sys.exit(1)
    click.echo(max(0, seconds))



def _unknown_line(message: str) -> None:
    """The plugin's UNKNOWN on the first line of stdout, the only line NRPE passes on."""
    click.echo(check.plugin_safe(f"MJF UNKNOWN - {message}"))


class _PluginUsageError(click.UsageError):
    """A usage error of a Nagios plugin: UNKNOWN (3), named on the first line of stdout;
    click's usage and message still go to stderr."""

    exit_code = check.EXIT_CODES[check.UNKNOWN]

    def show(self, file=None) -> None:
        _unknown_line(self.format_message())
        super().show(file)


class _PluginCommand(click.Command):
    """A click command whose usage errors (click's own, or a shared option's) exit as a
    plugin's UNKNOWN, not click's 2, which a monitoring system reads as CRITICAL."""

    def make_context(self, *args, **kwargs) -> click.Context:
        try:
            return super().make_context(*args, **kwargs)
        except click.UsageError as error:
            raise _PluginUsageError(error.format_message(), error.ctx) from None


def _config_unknown(error: Exception) -> None:
    """A --config that cannot be read is the plugin's call that was wrong: UNKNOWN (3),
    not the 2 a monitoring system reads as CRITICAL."""
    _unknown_line(str(error))
    sys.exit(check.EXIT_CODES[check.UNKNOWN])


@click.command("check", cls=_PluginCommand)
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
@click.argument("locations", nargs=-1)
@config_option(gives=None, fail=_config_unknown)
def check_command(as_json: bool, locations: tuple[str, ...]) -> None:
    """Check machine and job features against the spec, as a Nagios plugin: the summary on
    the first line, exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.

    LOCATIONS: .../machinefeatures and .../jobfeatures directories or URLs, job
    directories, or a base_dir; by default $MACHINEFEATURES and $JOBFEATURES.
    """
    try:
        findings, machine_checked, jobs_checked = _findings(locations)
    except Exception as error:  # noqa: BLE001  our bug must not read as WARNING (exit 1)
        import traceback

        traceback.print_exc()
        findings = [check.Finding(check.UNKNOWN, "mjf check", "", "internal-error",
                                  f"internal error: {type(error).__name__}: {error}")]
        machine_checked, jobs_checked = False, 0
    status = check.worst(findings)
    summary = check.summary(findings, machine_checked, jobs_checked)
    if as_json:
        click.echo(json.dumps({"status": status or "ok",
                               "exit_code": check.EXIT_CODES[status],
                               "summary": summary,
                               "findings": [finding.as_dict() for finding in findings]},
                              indent=2))
    else:
        click.echo(summary)
        for finding in findings:
            click.echo(check.plugin_safe(str(finding)))
    sys.exit(check.EXIT_CODES[status])


def _findings(locations: tuple[str, ...]) -> tuple[list[check.Finding], bool, int]:
    """What ``mjf check`` finds, whether it read machine features, and how many job
    directories it looked at. A location that is none of the kinds is UNKNOWN."""
    try:
        machine, jobs, listings = locations_module.classify(locations)
    except UsageError as error:
        return [check.Finding(check.UNKNOWN, "mjf check", "", "usage", str(error))], False, 0
    findings = check.check(machine, jobs, listings=listings, from_environment=not locations)
    return (findings, machine is not None,
            len(jobs) + sum(len(listing.jobs) for listing in listings))
