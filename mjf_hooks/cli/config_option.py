"""``--config FILE``, the one way every click subcommand of ``mjf`` takes it.

A file named by ``--config`` or ``$MJF_CONFIG`` that cannot be read is one line and exit
status 2, and so is a config the subcommand cannot use. A subcommand that reads no config
(the readers a job runs: ``show``, ``get``, ``remaining``, ``check``, ``status set``) checks
only a ``--config`` typed on its own command line, so a typo there never passes unnoticed;
a ``$MJF_CONFIG`` it inherits is not its to judge (a job's environment may carry the
prolog's) and never fails a pilot's read. The hooks' frame
(:func:`mjf_hooks.hooks.frame.run_hook`) and the click-free fast paths (``mjf describe``,
``mjf status set``) follow the same rule with the same functions of
:mod:`mjf_hooks.config`.
"""

from __future__ import annotations

import functools
import sys

import click

from .. import config as config_module
from ..errors import SiteInputError

HELP = "Read FILE instead of $MJF_CONFIG or /etc/mjf/mjf.conf."
# What the decorated function is given: the config, loaded; the file named (None: the
# default); or nothing (a subcommand that reads no config).
GIVES = ("config", "path", None)


def config_option(gives: str | None = "config", fail=None):
    """Add ``--config FILE`` to a click command; ``gives`` (one of GIVES) says what its
    function gets: ``config`` (the Config), ``config_path`` (the file named, or None), or
    nothing. ``fail``, where given, is called with the SiteInputError of a config that
    cannot be read or used, and ends the command its own way (a monitoring plugin's
    UNKNOWN); else it is one line and exit status 2."""
    if gives not in GIVES:
        raise ValueError(f"gives must be one of {GIVES}")

    def decorate(function):
        @click.option("--config", "config_option", metavar="FILE", help=HELP)
        @functools.wraps(function)
        def with_config(*args, config_option: str | None, **kwargs):
            named = config_module.named_path(config_option)
            try:
                if gives == "config":
                    kwargs["config"] = config_module.load_named(named)
                else:
                    config_module.require_readable(named if gives else config_option)
            except SiteInputError as error:
                if fail is not None:
                    fail(error)
                click.echo(f"{click.get_current_context().command_path}: {error}", err=True)
                sys.exit(2)
            if gives == "path":
                kwargs["config_path"] = named
            return function(*args, **kwargs)

        return with_config

    return decorate
