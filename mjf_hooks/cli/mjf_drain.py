"""`mjf drain`: this node's shutdown, announced, withdrawn or planned (``--plan``)."""

from __future__ import annotations

import json
import time

import click

from ..errors import MJFError
from .config_option import config_option


@click.command("drain")
@click.option("--in", "in_", metavar="DURATION", help="Shut down after DURATION (90m, 2h, 1d).")
@click.option("--at", metavar="TIME", help="Shut down at TIME (ISO-8601 or UNIX seconds).")
@click.option("--cancel", is_flag=True, help="Withdraw the announced shutdown.")
@click.option("--plan", is_flag=True,
              help="Propose the shutdown within --within that wastes least (jobs' $JOBSTATUS).")
@click.option("--within", metavar="DURATION", help="With --plan: the window, from now.")
@click.option("--apply", "apply_", is_flag=True, help="With --plan: announce the best time.")
@click.option("--json", "as_json", is_flag=True, help="With --plan: print the plan as JSON.")
@click.option("--force", is_flag=True, help="Allow a shutdown sooner than grace_secs (loudly).")
@config_option()
def drain_command(in_: str | None, at: str | None, cancel: bool, plan: bool,
                  within: str | None, apply_: bool, as_json: bool, force: bool,
                  config) -> None:
    """Announce this machine's shutdown to it and its jobs (shutdowntime, shutdowntime_job)."""
    from .. import drain, store_locations, timeparse
    from ..log import Log

    if [bool(in_), bool(at), cancel, plan].count(True) != 1:
        raise click.UsageError("give exactly one of --in, --at, --cancel and --plan")
    if not plan and (within or apply_ or as_json):
        raise click.UsageError("--within, --apply and --json go with --plan")
    if plan and not within:
        raise click.UsageError("--plan needs --within DURATION (the window, from now)")
    try:
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
    from .. import drain, drainplan, node_status
    from ..status_format import DrainPlan

    grace, promise = drain.earliest_notice(config, store)
    if within < grace:
        raise click.ClickException(
            f"the window ends in {within} s, before the earliest shutdown allowed "
            f"({promise} = {grace} s from now): give a longer --within")
    # May wait for pilots' locks: now is taken after.
    reports = node_status.collect(config, log=log)
    now = int(time.time())
    earliest, latest = now + grace, now + within
    candidates = drainplan.plan(reports, now, earliest, latest)
    plan = DrainPlan(reports, now, earliest, latest, candidates, drainplan.best(candidates))
    if as_json:
        click.echo(json.dumps(plan.as_dict(apply_), indent=2))
    else:
        click.echo("\n".join(plan.lines()))
    if apply_:
        summary = drain.drain(config, store, log, plan.chosen.time, force, now=now)
        click.echo(summary, err=as_json)
    elif not as_json:
        click.echo("Not announced: --apply does.")
