"""The batch systems this node runs, asked: which they are, which jobs each lists here,
and the drain each knows of.

The service `mjf sync`, `mjf status`, `mjf metrics`, `mjf publish` and HTCondor's cron
share: each batch module says what to run and how to read its answer (its ``*_query``
and parser, :mod:`mjf_hooks.batch.contract`); this runs it, time-bounded, once.
"""

from __future__ import annotations

from . import NAMES, backend, node_name

# Type names only: importing typing (and with it re, enum, collections) would cost every
# `mjf publish` and HTCondor cron run ~10 ms.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..config import Config
    from ..log import Log


def batch_systems(config: Config) -> list:
    """The batch modules of the batch systems this node runs: as configured (``[mjf]
    batch_systems``), else those that look installed."""
    modules = [backend(name) for name in (config.batch_systems or NAMES)]
    if config.batch_systems is not None:
        return modules
    return [module for module in modules if module.installed(config.backend[module.NAME])]


def short_name(module, config: Config) -> str:
    """This host's short name for the batch system ``module``."""
    return node_name(module, config.backend[module.NAME]).split(".")[0]


def ask(module, query, config: Config, log: Log, environ: dict[str, str], unknown: str):
    """What a batch system printed for ``query`` (one of its module's ``*_query``); None
    if it has no such command, False (logged, with ``unknown``: what is then not known)
    if the command failed."""
    from ..external_command import ask as run_bounded

    options = config.backend[module.NAME]
    command = query(options, environ, node_name(module, options))
    if command is None:
        return None
    output = run_bounded(command[0], config.command_timeout_secs, command[1], log, unknown)
    return False if output is None else output


def drain_time(module, config: Config, log: Log) -> int | None:
    """When the drain of this machine that the batch system ``module`` knows of must be
    complete, if one is under way (for a hook that cannot wait for a pass: HTCondor's
    cron publishes it at once)."""
    if not module.installed(config.backend[module.NAME]):
        return None
    answer = ask(module, module.drain_query, config, log, {},
                 f"{module.TITLE} drain state not known this time")
    found = module.drains(answer, short_name(module, config), 0) \
        if isinstance(answer, str) else []
    return min(found)[0] if found else None


def _running(module, answer, log: Log) -> set[str] | None:
    """The job directory names a batch system's answer lists; None when not known."""
    if not isinstance(answer, str):
        return None
    try:
        return module.running_jobs(answer)
    except ValueError as error:  # its output was not what it prints: nothing is proven
        log.warning(f"{module.TITLE}: {error}: no job directory removed")
        return None


class BatchListings:
    """Which job directory names each batch system this node runs lists as its jobs
    here: each asked once (its batch module's ``jobs_query``), only when first needed."""

    def __init__(self, config: Config, log: Log, environ: dict[str, str]) -> None:
        self._config, self._log, self._environ = config, log, environ
        self._here: dict | None = None
        self._asked: dict[str, set[str] | None] = {}
        # The batch systems asked whose query failed or printed what it does not print.
        self.unanswered: list[str] = []

    def here(self) -> dict:
        """The batch modules of this node, by name."""
        if self._here is None:
            self._here = {module.NAME: module for module in batch_systems(self._config)}
        return self._here

    def running(self, backend: str) -> set[str] | None:
        """The names ``backend`` lists; None when it is not here or cannot say."""
        module = self.here().get(backend)
        if module is None:
            return None
        if backend not in self._asked:
            answer = ask(module, module.jobs_query, self._config, self._log, self._environ,
                         "no job directory removed")
            self._asked[backend] = _running(module, answer, self._log)
            if answer is False or (answer is not None and self._asked[backend] is None):
                self.unanswered.append(module.TITLE)
        return self._asked[backend]
