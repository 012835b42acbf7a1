"""`mjf metrics`: this node's MJF state for Prometheus (node_exporter's textfile collector)."""

from __future__ import annotations

import click

from ..errors import MJFError
from .config_option import config_option


@click.command("metrics")
@click.option("--output", metavar="FILE",
              help="Write FILE atomically (a temporary file renamed over it), for "
                   "node_exporter's textfile collector; default: print to stdout.")
@config_option()
def metrics_command(output: str | None, config) -> None:
    """This node's MJF state in Prometheus's text exposition format: shutdowntime and
    grace, jobs by batch system, each job's figures and $JOBSTATUS, hook failures, and
    the job records of the last [metrics] records_hours. [metrics] output makes mjf
    sync write it every pass.
    """
    from .. import metrics
    from ..log import Log

    try:
        text = metrics.exposition(metrics.gather(config, log=Log("mjf metrics", config.log)))
        if output:
            metrics.write_file(output, text)
    except MJFError as error:
        raise click.ClickException(str(error)) from None
    except OSError as error:
        raise click.ClickException(f"{error.filename or output}: {error.strerror}") from None
    if not output:
        click.echo(text, nl=False)
