"""``mjf``: the admin and user command.

``mjf run``, ``mjf machine`` and ``mjf htcondor-wrapper`` are hooks
(:mod:`mjf_hooks.cli.hook_commands`), ``mjf sync`` and ``mjf publish`` what a node's timer
runs (:mod:`mjf_hooks.cli.node_commands`), dispatched here without importing click, as is
``mjf status set`` (a pilot's update, :mod:`mjf_hooks.cli.mjf_status_set`), and so is
``mjf describe`` where its fast path serves it (:mod:`mjf_hooks.cli.mjf_describe`); every
other subcommand is interactive and served by click (:mod:`mjf_hooks.cli.interactive`).
"""

from __future__ import annotations

import sys

from .hook_commands import HOOK_COMMANDS
from .node_commands import NODE_COMMANDS

CLICK_FREE = {**HOOK_COMMANDS, **NODE_COMMANDS}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in CLICK_FREE:
        return CLICK_FREE[argv[0]](argv[1:])
    if argv[:2] == ["status", "set"]:  # a pilot's update, at every payload start and end
        from .mjf_status_set import main as status_set

        return status_set(argv[2:])
    if argv[:1] == ["describe"]:  # a slot's description, for an information system
        from .mjf_describe import fast

        served = fast(argv[1:])
        if served is not None:
            return served
    if sys.flags.no_site:
        # Started -S (bin/mjf): click, and HTCondor's ClassAd library for `mjf match`, may
        # be installed where only site's whole start-up finds them; a person waits here.
        import site

        from .. import interactive_defaults

        site.main()
        interactive_defaults()
    from .interactive import cli

    return cli.main(args=argv, prog_name="mjf", standalone_mode=True)
