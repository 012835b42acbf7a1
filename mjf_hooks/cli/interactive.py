"""The interactive ``mjf`` subcommands (click): the group, the click-free commands it
lists (``mjf run``, ``machine``, ``sync``, ``publish``, ``htcondor-wrapper``), and the
commands of each subject, one module each (``mjf_show``, ``mjf_drain``, ``mjf_status``,
``mjf_config``, ``mjf_records``, ``mjf_metrics``, ``mjf_match``, ``mjf_container_args``),
all imported here. Hooks never import this module."""

from __future__ import annotations

import sys

import click

from . import hook_commands as hooks
from . import (
    mjf_config,
    mjf_container_args,
    mjf_drain,
    mjf_match,
    mjf_metrics,
    mjf_records,
    mjf_show,
    mjf_status,
)
from . import node_commands as node

_PASS_THROUGH = {"ignore_unknown_options": True, "allow_extra_args": True,
                 "help_option_names": []}


# -h as well as --help, in every subcommand (click passes the names on to them).
@click.group(help="Machine/Job Features (HSF-TN-2016-02) for this node and its jobs.",
             context_settings={"help_option_names": ["-h", "--help"]})
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
    sys.exit(node.sync_command(context.args))


@cli.command(context_settings=_PASS_THROUGH, add_help_option=False,
             help="Publish this node's facts into its batch system, for a timer (see --help).")
@click.pass_context
def publish(context: click.Context) -> None:
    sys.exit(node.publish_command(context.args))


@cli.command("htcondor-wrapper", context_settings=_PASS_THROUGH, add_help_option=False,
             help="Replay mjf-htcondor-wrapper for a command (see --help).")
@click.pass_context
def htcondor_wrapper(context: click.Context) -> None:
    sys.exit(hooks.htcondor_wrapper_command(context.args))


for command in (mjf_show.show, mjf_show.get, mjf_show.remaining, mjf_show.check_command,
                mjf_drain.drain_command, mjf_status.status_command, mjf_records.records_command,
                mjf_metrics.metrics_command,
                mjf_match.describe_command, mjf_match.match_command,
                mjf_match.submit_args_command,
                mjf_container_args.container_args_command, mjf_config.config_group):
    cli.add_command(command)
