"""The error types the suite raises on purpose.

Anything else escaping a hook is a bug of ours; the hook runner logs it and
still lets the job run (the fail-safe rule, docs/design.md "The contract").
"""


class MJFError(Exception):
    """An expected failure with a message meant for a site admin."""


class SiteInputError(MJFError):
    """The site's input is wrong: config, batch-system environment or files.

    The message says what was wrong, where, and how to fix it.
    """


class UsageError(Exception):
    """The command line is wrong; the message says how (:mod:`mjf_hooks.options`)."""


class StoreError(MJFError):
    """The per-job or machine directory cannot be written or removed safely."""
