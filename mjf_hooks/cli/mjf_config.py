"""`mjf config check` and `mjf config show`: the site config, validated and explained."""

from __future__ import annotations

import json
import sys

import click

from .. import config as config_module
from ..errors import SiteInputError
from .config_option import config_option


@click.group("config")
def config_group() -> None:
    """Validate the site configuration, or show what it makes of every option."""


@config_group.command("check")
@click.argument("file", required=False)
@click.option("--host", metavar="NAME",
              help="Check as the node of this host name sees it (its host= sections).")
@click.option("--cpu-model", metavar="MODEL",
              help="Check as a node of this CPU model (/proc/cpuinfo's model name) sees it.")
@config_option(gives="path")
def check_command(file: str | None, host: str | None, cpu_model: str | None,
                  config_path: str | None) -> None:
    """Validate FILE (default: the config in force) and its drop-ins (FILE.d/*.conf), and
    list every problem, one line each with its file and line. For a config-management
    tool before it installs a file (Ansible's and Puppet's validate_cmd: mjf config
    check %). Sections for some nodes only are checked as this node sees them, or the
    node --host and --cpu-model name.

    Exit 0 valid; 1 a problem (each listed); 2 FILE cannot be read, or a usage error.
    No FILE and no /etc/mjf/mjf.conf is valid: all defaults.
    """
    from ..config_report import problems

    named = file or config_path
    path = named or config_module.DEFAULT_PATH
    try:
        _, found = problems(path, missing_ok=named is None,
                            node=config_module.Node(host, cpu_model))
    except SiteInputError as error:
        click.echo(f"mjf config check: {error}", err=True)
        sys.exit(2)
    for problem in found:
        click.echo(problem)
    click.echo(f"{path}: {len(found)} problem(s)" if found else f"{path}: valid")
    sys.exit(1 if found else 0)


@config_group.command("show")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@config_option(gives="path")
def show_command(as_json: bool, config_path: str | None) -> None:
    """Print every effective value of the config in force and where it came from: the
    file, line and section that set it, the default, or - for machine keys - what mjf
    machine probes on this host or derives. Exit 2: the config cannot be read or used.
    """
    from ..config_report import as_json as json_of
    from ..config_report import effective, lines

    path = config_path or config_module.DEFAULT_PATH
    try:
        settings = effective(path, named=config_path is not None)
    except SiteInputError as error:
        click.echo(f"mjf config show: {error}", err=True)
        sys.exit(2)
    if as_json:
        click.echo(json.dumps(json_of(path, settings), indent=2))
    else:
        click.echo("\n".join(lines(path, settings)))
