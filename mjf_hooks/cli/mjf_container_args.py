"""`mjf container-args`: what a pilot adds to its container command line so that the
payload sees this job's MJF."""

from __future__ import annotations

import os
import shutil
import sys
from typing import TYPE_CHECKING

import click

from ..errors import MJFError
from .config_option import config_option

if TYPE_CHECKING:
    from collections.abc import Callable


@click.command("container-args")
@click.option("--runtime", type=click.Choice(["apptainer", "bubblewrap", "charliecloud"]),
              default="apptainer", show_default=True, help="The container runtime.")
@click.option("--url", "urls", is_flag=True,
              help="Pass MACHINEFEATURES/JOBFEATURES as the URLs of [mjf] url_base; bind nothing.")
@click.option("--inside", metavar="DIR",
              help="Bind at DIR/machinefeatures, DIR/jobfeatures, DIR/jobstatus instead of "
                   "the same paths.")
@click.option("--format", "format_", type=click.Choice(["shell", "lines", "json", "names"]),
              default="shell", show_default=True, help="How to print them (see above).")
@config_option(gives="path")
def container_args_command(runtime: str, urls: bool, inside: str | None,
                           format_: str, config_path: str | None) -> None:
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
        served = _served_urls(config_path) if urls else None
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


def _served_urls(named: str | None) -> Callable[[str], str | None]:
    """The URL at which [mjf] url_base serves a path of base_dir (None: not served), by
    the config file named (None: the default)."""
    from .. import config as config_module
    from ..errors import SiteInputError
    from ..exports import served_url

    config = config_module.load_named(named)
    if not config.url_base:
        raise SiteInputError(f"{config.path}: --url needs [mjf] url_base, the URL that "
                             "serves base_dir (see contrib/nginx)")
    return lambda path: served_url(config, path)

