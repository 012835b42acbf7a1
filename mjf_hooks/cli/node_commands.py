"""The ``mjf`` subcommands a node's timer runs (``mjf sync``, ``mjf publish``): no click.

Not hooks (no job is theirs) but run as often: :mod:`mjf_hooks.cli.mjf` dispatches to
them before click is loaded; the click group (:mod:`mjf_hooks.cli.interactive`) lists
them too, for ``mjf --help``.
"""

from __future__ import annotations

import sys

from ..hooks.frame import COMMON_HELP, CommandLine, run_hook

SYNC_USAGE = """\
usage: mjf sync [options]

Bring this node's MJF state up to date (run it every minute from a systemd timer
or cron, as root): machine features; a Slurm maintenance reservation, an
HTCondor graceful drain or a PBS maintenance reservation becomes shutdowntime
(and is withdrawn with it); job directories whose jobs are proven gone are
removed; job records handed in by jobs' users are filed, and old ones removed;
with [publish] sync = yes, this node's facts are published (as mjf publish);
with [metrics] output, this node's metrics are written there (as mjf metrics).
Each of these runs whatever another did; the exit status is 1 if one failed,
a batch system's query or write it needed included (each says why in one line),
2 for a wrong command line or a config that cannot be used (nothing done).
With --dry-run it changes nothing anywhere (files, batch systems, the metrics
file): it runs the batch systems' queries and prints what each would do.

""" + COMMON_HELP


SYNC_LINE = CommandLine(SYNC_USAGE, usage_exit=2)


def sync_command(argv: list[str]) -> int:
    from ..sync import sync

    def body(context):
        done = sync(context.config, context.log, dict(context.environ),
                    dry_run=context.dry_run)
        for line in done.done:
            sys.stdout.write(line + "\n")
        return 1 if done.failed else 0  # each failed phase logged its line

    return run_hook("mjf sync", argv, body, SYNC_LINE, admin=True)


PUBLISH_USAGE = """\
usage: mjf publish [options]

Publish this node's facts ([publish] facts: hs06, hs06_per_cpu, total_cpu) where its
batch system matches jobs on them, under the names [submit] gives them: Slurm node
Extra (JSON), Grid Engine host complex_values, PBS resources_available. Only what
changed is written (a pass that changes nothing only reads). Exit status 0: published
or already so; 1: a read or a write failed (one warning line each; nothing else
changed, the next run tries again); 2: a wrong command line, or a config that cannot
be used (one line). With [publish] sync = yes, mjf sync does the same.

""" + COMMON_HELP


PUBLISH_LINE = CommandLine(PUBLISH_USAGE, usage_exit=2)


def publish_command(argv: list[str]) -> int:
    from ..publish import machine_values, publish

    def body(context):
        outcome = publish(context.config, context.log, machine_values(context.config),
                          context.dry_run)
        for line in outcome.done:
            sys.stdout.write(line + "\n")
        return 1 if outcome.failed else 0

    return run_hook("mjf publish", argv, body, PUBLISH_LINE, admin=True)


NODE_COMMANDS = {"sync": sync_command, "publish": publish_command}
