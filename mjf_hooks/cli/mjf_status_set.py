"""``mjf status set KEY=VALUE...``: a shell pilot updates its ``$JOBSTATUS``.

Dispatched by :mod:`mjf_hooks.cli.mjf` before click is loaded: a pilot may call it at
every payload start and end. It is :func:`mjf_hooks.jobstatus.update` from a shell.
"""

from __future__ import annotations

import sys

from .. import config as config_module
from .. import jobstatus
from ..errors import SiteInputError
from ..options import UsageError, parse

USAGE = """\
usage: mjf status set [--dir DIR] [--timeout SECS] [--config FILE] KEY=VALUE...

Set keys of this job's $JOBSTATUS as one consistent set, under the lock on
used_CPU (draft 0.99); an empty VALUE removes a key. The first update must set
used_CPU. Keys: used_CPU, last_job_start, first_exp_job_end, last_exp_job_end,
last_max_job_end (UNIX times), add_uncom_time, add_final_exp_waste (CPU
seconds), can_postpone_last_job (True or False), priority_factor (an integer).

  --dir DIR        the directory (default: $JOBSTATUS)
  --timeout SECS   how long to wait for the lock (default: 10)
  --config FILE    taken as every mjf subcommand takes it (this one reads no
                   config; a FILE given here that cannot be read is an error all
                   the same; $MJF_CONFIG is not looked at)

Exit status: 0 set; 1 not set (no $JOBSTATUS, the lock not had in time, a
write that failed); 2 a usage error, a value that is not one, or a config
named that cannot be read (nothing set).
"""


# Its options, each taking a value (bash completion offers them too).
VALUED = ("--dir", "--timeout", "--config")


def main(argv: list[str]) -> int:
    try:
        options, args = parse(argv, (), VALUED)
        if options.get("help"):
            sys.stdout.write(USAGE)
            return 0
        # Only what is typed here: a job's inherited $MJF_CONFIG never fails a pilot's update.
        config_module.require_readable(options.get("config"))
        if not args:
            raise UsageError("give at least one KEY=VALUE")
        values: dict[str, object] = {}
        for arg in args:
            key, equals, value = arg.partition("=")
            if not equals:
                raise UsageError(f"{arg!r} is not KEY=VALUE")
            values[key] = value or None
            if value:
                jobstatus.format_value(key, value)
            elif key not in jobstatus.KEYS:
                raise jobstatus.InvalidValue(f"{key!r} is not a $JOBSTATUS key "
                                             f"({', '.join(jobstatus.KEYS)})")
        timeout = _seconds(str(options.get("timeout", jobstatus.DEFAULT_WRITE_TIMEOUT_SECS)))
    except (UsageError, jobstatus.StatusError, SiteInputError) as error:
        sys.stderr.write(f"mjf status set: {error}\n")
        if isinstance(error, UsageError):
            sys.stderr.write(USAGE)
        return 2
    try:
        jobstatus.update(values, directory=options.get("dir") or None, timeout=timeout)
    except jobstatus.StatusError as error:
        sys.stderr.write(f"mjf status set: {error}\n")
        # A value inconsistent with the others (or with allocated_cpu) is the caller's.
        return 2 if isinstance(error, jobstatus.InvalidValue) else 1
    return 0


def _seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= 3600:
        raise UsageError(f"--timeout must be 0 to 3600 seconds, not {text!r}")
    return seconds
