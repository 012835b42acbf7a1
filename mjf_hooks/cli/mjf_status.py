"""`mjf status`: what the pilots of this node's jobs report in their $JOBSTATUS (a pilot's
own update, `mjf status set`, is :mod:`mjf_hooks.cli.mjf_status_set`, click-free)."""

from __future__ import annotations

import json
import sys
import time

import click

from ..errors import MJFError
from .config_option import config_option


@click.command("status", context_settings={"ignore_unknown_options": False})
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--timeout", type=click.FloatRange(0, 60), default=2.0, show_default=True,
              help="Seconds to wait, in all, for locks the pilots hold.")
@click.argument("jobs", nargs=-1)
@config_option()
def status_command(as_json: bool, timeout: float, jobs: tuple[str, ...], config) -> None:
    """What the pilots of this node's jobs report in $JOBSTATUS (draft 0.99).

    Per job: the values and the draft's figures (remaining_time, draining_waste,
    kill_waste, in seconds and core-seconds), the job whose loss costs least
    first. A pilot updates its own with `mjf status set KEY=VALUE...`.
    Exit 1 if a named job is not found.
    """
    from .. import node_status, status_format
    from ..log import Log

    try:
        reports = node_status.collect(config, jobs, timeout, Log("mjf status", config.log))
    except MJFError as error:
        raise click.ClickException(str(error)) from None
    now = int(time.time())
    ordered = node_status.least_critical_first(reports, now)
    if as_json:
        click.echo(json.dumps(status_format.status_json(ordered, now), indent=2))
    else:
        lines = status_format.status_lines(ordered, now)
        if lines:  # at once: a write (and a flush) per line cost more than reading a job
            click.echo("\n".join(lines))
    found = {report.job_id for report in reports}
    missing = [job for job in jobs if job not in found]
    for job in missing:
        click.echo(f"mjf status: job {job} is not on this node", err=True)
    sys.exit(1 if missing else 0)

