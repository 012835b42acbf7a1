"""Logging for hooks: syslog (tag ``mjf``) and stderr, one line per event.

Not the ``logging`` package: it would add more to every job start than all of
a hook's own work. Errors and warnings go to every configured destination;
information goes to syslog only (a hook's stdout and stderr may be read by
the batch system); ``--verbose`` adds debug lines on stderr.
"""

from __future__ import annotations

import os
import sys

# syslog's priorities (LOG_ERR, ...): the module itself is imported with the first line
# that goes there, as most hook runs log nothing.
_PRIORITIES = {"error": 3, "warning": 4, "info": 6, "debug": 7}


class Log:
    """Where a hook's messages go; ``context`` (e.g. ``slurm prolog job 42``) prefixes each."""

    def __init__(self, context: str, destinations: tuple[str, ...] = ("syslog", "stderr"),
                 verbose: bool = False) -> None:
        self.context = context
        self.destinations = destinations
        self.verbose = verbose
        self._syslog_open = False

    def error(self, message: str) -> None:
        self._emit("error", message)

    def warning(self, message: str) -> None:
        self._emit("warning", message)

    def info(self, message: str) -> None:
        self._emit("info", message)

    def debug(self, message: str) -> None:
        if self.verbose:
            self._emit("debug", message)

    def _emit(self, level: str, message: str) -> None:
        # The context quotes a job id, which may be garbage too: it must not hide the level.
        line = _one_line(f"{_one_line(self.context)[:200]}: {level}: {message}")
        if "syslog" in self.destinations and level != "debug":
            import syslog

            if not self._syslog_open:
                syslog.openlog("mjf", syslog.LOG_PID, syslog.LOG_DAEMON)
                self._syslog_open = True
            syslog.syslog(_PRIORITIES[level], line)
        if ("stderr" in self.destinations and level in ("error", "warning")) or (
            self.verbose and level in ("info", "debug")
        ):
            try:
                sys.stderr.write(f"mjf[{os.getpid()}]: {line}\n")
                sys.stderr.flush()
            except (OSError, ValueError):
                pass  # a closed stderr must not turn a log line into a failure


# A line quotes what was wrong, which may be a megabyte of garbage: enough to recognise it.
MAX_LINE_CHARS = 1000


def _one_line(message: str) -> str:
    """One short printable line: multi-line messages break batch-system log parsers,
    control characters a terminal, and bytes that are not UTF-8 syslog (they come from
    the environment or files a message quotes)."""
    line = " | ".join(part for part in message.splitlines() if part.strip()) or message
    if len(line) > MAX_LINE_CHARS:
        line = f"{line[:MAX_LINE_CHARS]}... ({len(line) - MAX_LINE_CHARS} more characters)"
    if not line.isascii() or not line.isprintable():
        line = "".join(char if " " <= char <= "~" else ascii(char)[1:-1] for char in line)
    return line
