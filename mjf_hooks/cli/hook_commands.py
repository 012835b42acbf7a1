"""The ``mjf`` subcommands that are hooks (``mjf run``, a job's own; ``mjf machine``, at
boot; ``mjf htcondor-wrapper``, a replay): no click.

:mod:`mjf_hooks.cli.mjf` dispatches to them before click is loaded; the click group
(:mod:`mjf_hooks.cli.interactive`) lists them too, for ``mjf --help``.
"""

from __future__ import annotations

from ..hooks.frame import COMMON_HELP, CommandLine, run_hook

RUN_USAGE = """\
usage: mjf run [options] [--] CMD [ARGS...]

Run CMD as a job of this machine with MACHINEFEATURES and JOBFEATURES set,
then remove its job features. Exits with CMD's status. A config that cannot
be used is one error line, and CMD runs without MJF.

  --cpus N          allocated_cpu (default: the CPUs this process may run on)
  --wall-limit S    wall_limit_secs
  --memory BYTES    max_rss_bytes (the cgroup's limit wins if lower)
  --job-id ID       job_id (default: <host>.<pid>.<time>)
""" + COMMON_HELP

MACHINE_USAGE = """\
usage: mjf machine [options]

Write <base_dir>/machinefeatures/ from the config and this host's probes.
Idempotent: unchanged values are not rewritten. Exit status 2: a wrong command
line, or a config that cannot be used (nothing written).

""" + COMMON_HELP


RUN_LINE = CommandLine(RUN_USAGE, arguments=None,
                       valued=("--cpus", "--wall-limit", "--memory", "--job-id"),
                       positional_stop=True, usage_exit=2)
MACHINE_LINE = CommandLine(MACHINE_USAGE, usage_exit=2)


def run_command(argv: list[str]) -> int:
    from ..hooks.standalone import run

    return run_hook("mjf run", argv, run, RUN_LINE, runs_job=True, admin=True)


def machine_command(argv: list[str]) -> int:
    from .. import lifecycle
    from ..store_locations import store_for

    def body(context):
        store = store_for(context.config)
        lifecycle.machine_features(context.config, store, context.log, context.dry_run)
        return 0

    return run_hook("mjf machine", argv, body, MACHINE_LINE, admin=True)


def htcondor_wrapper_command(argv: list[str]) -> int:
    from ..hooks.htcondor import wrapper_command

    return wrapper_command(argv)


HOOK_COMMANDS = {"run": run_command, "machine": machine_command,
                 "htcondor-wrapper": htcondor_wrapper_command}
