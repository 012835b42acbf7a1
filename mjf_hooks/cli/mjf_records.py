"""`mjf records`: this node's job records, what MJF promised against what each used."""

from __future__ import annotations

import json
import time

import click

from ..errors import MJFError
from ..terminal import printable
from .config_option import config_option


@click.command("records")
@click.option("--since", metavar="TIME",
              help="Only jobs that ended since TIME (ISO-8601, UNIX seconds, or a duration "
                   "ago such as 7d).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--summary", is_flag=True, help="Print the totals only.")
@config_option()
def records_command(since: str | None, as_json: bool, summary: bool, config) -> None:
    """This node's job records ([records] dir): what MJF promised each job against what
    it used - CPU efficiency, peak memory against max_rss_bytes, wall time against
    wall_limit_secs - and the jobs that went past a promise; --summary totals them.
    """
    from .. import timeparse
    from ..records import job as job_record
    from ..records import reading as record_reading
    from ..records import report as records_format

    try:
        if not config.records_dir:
            raise MJFError(f"{config.path}: no records are kept here: set [records] dir")
        start = None if since is None else timeparse.parse_since(since, int(time.time()))
        if summary:  # each day's rows, from its digest while the day is unchanged
            rows, handed_in, skipped = record_reading.summary_rows(config.records_dir, start)
        else:
            listing = record_reading.read_all(config.records_dir, start)
    except MJFError as error:
        raise click.ClickException(str(error)) from None
    if summary:
        for what in skipped:
            click.echo(f"mjf records: {what} is not a record: skipped", err=True)
        totals = job_record.summary_of(rows)
        totals["handed_in"] = records_format.handed_in_totals(handed_in)
        click.echo(json.dumps(totals, indent=2) if as_json
                   else "\n".join(records_format.summary_lines(totals)))
        return
    found = []
    for data in listing.records:
        try:
            found.append(job_record.record_from_json(data))
        except (ValueError, TypeError, RecursionError):
            job = data.get("job_id")
            listing.unreadable.append(
                f"the record of job {printable(job) if isinstance(job, str) else '?'}")
    for what in listing.unreadable:
        click.echo(f"mjf records: {what} is not a record: skipped", err=True)
    if as_json:
        click.echo(json.dumps(records_format.records_json(found), indent=2))
        return
    click.echo(records_format.TABLE_HEADER)
    for record in found:
        click.echo(records_format.table_row(record))
