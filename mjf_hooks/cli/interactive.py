"""The interactive ``mjf`` subcommands (click). Hooks never import this module."""

from __future__ import annotations

import json
import os
import sys

import click

from .. import reader, spec
from ..errors import MJFError
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


@cli.command("htcondor-wrapper", context_settings=_PASS_THROUGH, add_help_option=False,
             help="Replay mjf-htcondor-wrapper for a command (see --help).")
@click.pass_context
def htcondor_wrapper(context: click.Context) -> None:
    sys.exit(hooks.htcondor_wrapper_command(context.args))


def _locations(location: str | None) -> list[tuple[str, str]]:
    """(label, directory) pairs to show: from the environment, or what a path holds."""
    if location is None:
        found = [(name, os.environ[name]) for name in ("MACHINEFEATURES", "JOBFEATURES")
                 if os.environ.get(name)]
        if not found:
            raise click.UsageError(
                "neither MACHINEFEATURES nor JOBFEATURES is set: give a directory"
            )
        return found
    location = location.rstrip("/") or "/"
    if os.path.isdir(os.path.join(location, "machinefeatures")):
        pairs = [("MACHINEFEATURES", os.path.join(location, "machinefeatures"))]
        jobs = os.path.join(location, "jobs")
        if os.path.isdir(jobs):
            for name in sorted(os.listdir(jobs)):
                if not name.startswith("."):
                    pairs.append((f"JOBFEATURES ({name})",
                                  os.path.join(jobs, name, "jobfeatures")))
        return pairs
    if os.path.isdir(os.path.join(location, "jobfeatures")):
        location = os.path.join(location, "jobfeatures")
    return [("JOBFEATURES" if location.endswith("jobfeatures") else "FEATURES", location)]


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON with typed values.")
@click.argument("location", required=False)
def show(as_json: bool, location: str | None) -> None:
    """Show the features of the current job, or of a directory or base_dir."""
    try:
        sections = [(label, path, reader.read_all(path)) for label, path in _locations(location)]
    except MJFError as error:
        raise click.ClickException(str(error)) from None
    if as_json:
        document = {
            label: {"location": path,
                    "values": {name: reader.typed(name, raw) for name, raw in values.items()}}
            for label, path, values in sections
        }
        click.echo(json.dumps(document, indent=2, sort_keys=True))
        return
    for label, path, values in sections:
        click.echo(f"{label}={path}")
        width = max((len(name) for name in values), default=0)
        for name, raw in values.items():
            click.echo(f"  {name:<{width}}  {raw}")


@cli.command()
@click.argument("key")
def get(key: str) -> None:
    """Print one key's value from $JOBFEATURES or $MACHINEFEATURES (exit 1 if absent)."""
    registered = spec.KEYS.get(key)
    legacy = {alias.name: alias.scope for alias in spec.LEGACY_KEYS}
    if registered is None and key not in legacy:
        raise click.UsageError(f"{key!r} is not an MJF key")
    scope = registered.scope if registered else legacy[key]
    variable = "MACHINEFEATURES" if scope == spec.MACHINE else "JOBFEATURES"
    location = os.environ.get(variable)
    if not location:
        click.echo(f"mjf get: ${variable} is not set", err=True)
        sys.exit(1)
    try:
        value = reader.read_key(location, key)
    except MJFError as error:
        raise click.ClickException(str(error)) from None
    if value is None:
        click.echo(f"mjf get: {key} is not set in {location}", err=True)
        sys.exit(1)
    click.echo(value)
