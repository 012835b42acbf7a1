"""The fail-safe frame every hook runs in.

It parses the options all hooks share (``--dry-run``, ``--env-file``,
``--config``, ``--verbose``), loads the config, and makes sure that an error
- the site's or ours - is logged as one line and, unless the site set
``on_error = fail``, does not fail the hook: a node must never drain and a
job must never be held because of MJF.
"""

from __future__ import annotations

import os
import sys

from .. import config as config_module
from ..errors import MJFError, UsageError
from ..log import Log

# Type names only: importing collections.abc at run time costs every job start ~2 ms.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

COMMON_FLAGS = ("--dry-run", "--verbose")
COMMON_VALUED = ("--env-file", "--config")
COMMON_HELP = """\
  --dry-run        print the keys and values it would write and the variables it
                   would export; change nothing
  --env-file FILE  take the batch system's environment from FILE (as `env` prints
                   it) instead of this process's
  --config FILE    read FILE instead of $MJF_CONFIG or /etc/mjf/mjf.conf
  --verbose        say on stderr where each value came from
"""


class HookContext:
    """What a hook body gets: the config, the environment, its options and a log."""

    __slots__ = ("args", "config", "config_failed", "dry_run", "entry", "environ", "failure_exit",
                 "log", "options")

    def __init__(self, config, environ: Mapping[str, str], options: dict, args: list[str],
                 log: Log, config_failed: bool = False, failure_exit: int = 1) -> None:
        self.config = config
        # The config could not be read (already logged): a job runner still runs the job.
        self.config_failed = config_failed
        self.environ = environ
        self.options = options
        self.args = args
        self.log = log
        # The entry point failures are counted under: the command (and its role, once known).
        self.entry = log.context
        self.dry_run = bool(options.get("dry_run"))
        # The exit status of a failure with on_error = fail (the batch system's own).
        self.failure_exit = failure_exit

    def fail_safe(self, action: Callable, *args):
        """Run one step; on error log it and return None (or, with on_error = fail, exit
        with ``failure_exit``)."""
        if self.config_failed:
            return None
        try:
            return action(*args)
        except Exception as error:  # noqa: BLE001 - the fail-safe rule: nothing escapes
            _log_failure(self.log, error)
            _count_failure(self.config.base_dir, self.entry, error)
            if self.config.on_error == "fail":
                raise SystemExit(self.failure_exit) from None
            return None

    def query(self, section: str, switch: str | None,
              command: Callable[[dict[str, str]], tuple[list[str], dict[str, str]] | None],
              unwritten: str, parse: Callable[[str, list[str]], object]):
        """What a batch system's command says, parsed: ``command(options)`` gives the
        argv and environment (or None, having logged why), ``parse(output, argv)`` reads
        its output. None (logged, with ``unwritten``: what is then not written) where the
        site switched it off (``[section] switch = no``: nothing is run), the command
        fails, or ``parse`` raises ValueError (its message is the line logged)."""
        options = self.config.backend[section]
        if switch and options.get(switch, "yes") == "no":
            return None
        found = command(options)
        if found is None:
            return None
        from ..external_command import ask  # only here: most roles run no command

        output = ask(found[0], self.config.command_timeout_secs, found[1], self.log, unwritten)
        if output is None:
            return None
        try:
            return parse(output, found[0])
        except ValueError as error:
            self.log.warning(str(error))
            return None


class CommandLine:
    """A hook command's command line: its ``usage`` text; how many of its words may be
    arguments, not options (``arguments``; None: any, the body's to check); its own
    ``flags`` and ``valued`` options beside the common ones; whether options end at the
    first argument (``positional_stop``: the rest is a job's command); and the status of
    a wrong command line (``usage_exit``: 2 for commands a person types, 0 (logged) for
    hooks a batch system calls)."""

    __slots__ = ("arguments", "flags", "positional_stop", "usage", "usage_exit", "valued")

    def __init__(self, usage: str, arguments: int | None = 0, flags: tuple[str, ...] = (),
                 valued: tuple[str, ...] = (), positional_stop: bool = False,
                 usage_exit: int = 0) -> None:
        self.usage, self.arguments, self.flags, self.valued = usage, arguments, flags, valued
        self.positional_stop, self.usage_exit = positional_stop, usage_exit


def run_hook(
    context_name: str,
    argv: list[str] | None,
    body: Callable[[HookContext], int | None],
    command_line: CommandLine,
    *,
    runs_job: bool = False,
    failure_exit: int = 1,
    job_environment: bool = False,
    admin: bool = False,
) -> int:
    """Run ``body`` under the fail-safe rule and return the hook's exit status.

    ``argv``: the command line after the command's name (None: ``sys.argv[1:]``), read
    as ``command_line`` says; more arguments than it allows is a wrong command line. A
    hook that ``runs_job`` (a wrapper) gets its body called even when the config is
    broken, so it can run the job without MJF. ``failure_exit`` is the status of a
    failure with ``on_error = fail``: 1, or what the batch system reads as "this job
    failed" without blaming the node (Grid Engine: 100). ``job_environment``: the hook
    runs with its job's environment, which the job's user can set (``qsub -v``, ``bsub``):
    run as root it then takes its config from ``--config`` or the default path alone,
    never from ``$MJF_CONFIG`` - which would have root read a file the user names, and
    write where that file says. ``admin``: a command an admin runs (``mjf machine``,
    ``sync``, ``publish``, ``run``), not a batch system: a config file named by
    ``--config`` or ``$MJF_CONFIG`` must be there (a typo is not a config of defaults),
    and a config that cannot be used exits 2 - unless the command ``runs_job``, whose job
    still runs (the log says why without MJF) and whose status is the job's.
    """
    usage, usage_exit = command_line.usage, command_line.usage_exit  # said in several places
    log = Log(context_name)
    argv = sys.argv[1:] if argv is None else argv
    try:
        options, args = {}, []  # as a batch system starts most hooks: nothing to parse
        if argv:
            from ..options import parse

            options, args = parse(argv, COMMON_FLAGS + command_line.flags,
                                  COMMON_VALUED + command_line.valued,
                                  command_line.positional_stop)
        allowed = command_line.arguments
        if allowed is not None and len(args) > allowed:
            raise UsageError(f"unexpected argument {args[allowed][:200]!r}")
    except UsageError as error:
        log.error(f"{error} (usage: {usage.splitlines()[0]})")
        return usage_exit
    if options.get("help"):
        sys.stdout.write(usage if usage.endswith("\n") else usage + "\n")
        return 0
    log.verbose = bool(options.get("verbose"))
    environ: Mapping[str, str] = os.environ
    config = config_module.Config()
    try:
        if options.get("env_file"):
            environ = read_env_file(str(options["env_file"]))
        # The config belongs to this host, not to the (possibly recorded) job environment.
        named = os.environ.get("MJF_CONFIG") or environ.get("MJF_CONFIG")
        ignored = job_environment and os.geteuid() == 0 and not options.get("config") \
            and named
        chosen = options.get("config") or (None if ignored else named)
        path = str(chosen or config_module.DEFAULT_PATH)
        config = config_module.load(path, missing_ok=not (admin and chosen))
        log.destinations = config.log
        if ignored:
            log.warning(f"$MJF_CONFIG {named[:200]!r} is not used: this hook runs as root "
                        "with the job's environment, which the job's user can set (give "
                        f"--config to use another file than {config_module.DEFAULT_PATH})")
        context = HookContext(config, environ, options, args, log, failure_exit=failure_exit)
    except Exception as error:  # noqa: BLE001 - a broken config must not drain a node
        # Its on_error cannot be trusted either: the default (continue) applies.
        _log_failure(log, error)
        _count_failure(config.base_dir, context_name, "config")
        if not runs_job:
            return 2 if admin else 0
        context = HookContext(config, environ, options, args, log, config_failed=True,
                              failure_exit=failure_exit)
    try:
        status = body(context)
    except SystemExit:
        raise
    except UsageError as error:
        log.error(str(error))
        _count_failure(config.base_dir, context.entry, "usage")
        return usage_exit
    except Exception as error:  # noqa: BLE001
        _log_failure(log, error)
        _count_failure(config.base_dir, context.entry, error)
        return failure_exit if config.on_error == "fail" else 0
    return status or 0


def run_roles(
    command: str,
    argv: list[str] | None,
    roles: dict[str, Callable[[HookContext, list[str]], int | None]],
    usage: str,
    *,
    with_arguments: tuple[str, ...] = (),
    job: Callable[[Mapping[str, str]], str] | None = None,
    role_of: Callable[[HookContext], tuple[str, list[str]]] | None = None,
    positional_stop: bool = False,
    **options,
) -> int:
    """A hook command with roles (``mjf-lsf pre-exec``...) in the fail-safe frame.

    The role is the first argument (or what ``role_of`` tells from the context), one of
    ``roles`` (in the order the usage message lists them); only roles in
    ``with_arguments`` take more. ``job`` names the job in every log line, from the
    environment. ``argv`` is ``sys.argv[1:]`` when None; ``positional_stop`` is the
    command line's (:class:`CommandLine`); ``options`` go to :func:`run_hook`.
    """

    def dispatch(context: HookContext) -> int | None:
        role, args = (role_of or _first_argument)(context)
        if role not in roles:
            *others, last = roles
            raise UsageError(f"unknown role {role!r}: give {', '.join(others)} or {last}")
        context.entry = f"{command} {role}"
        if args and role not in with_arguments:
            raise UsageError(f"{role} takes no arguments, got {args!r}")
        context.log.context = f"{command} {role}" + \
            (f" job {job(context.environ)}" if job else "")
        return roles[role](context, args)

    return run_hook(command, argv, dispatch,
                    CommandLine(usage, arguments=None, positional_stop=positional_stop),
                    **options)


def _first_argument(context: HookContext) -> tuple[str, list[str]]:
    return (context.args[0], context.args[1:]) if context.args else ("", [])


def exec_job(context: HookContext, argv: list[str], exports: dict[str, str],
             file: str | None = None, file_source: str = "",
             unset: tuple[str, ...] = ()) -> str | None:
    """Replace this process with the job, its environment plus ``exports``, less ``unset``.

    ``file`` is what to run (default ``argv[0]``); without a ``/`` it is searched in the
    job's PATH, as a shell would. ``file_source``: where ``file`` came from, for the
    message if it cannot be run.

    Returns only in a dry run (None: it printed what it would run) or when the
    exec failed (the logged reason, for the batch system's error channel).
    """
    file = file or argv[0]
    if context.dry_run:
        sys.stdout.write(f"would exec: {argv!r}" + (f" ({file})" if file != argv[0] else "")
                         + "\n")
        return None
    environment = {name: value for name, value in {**context.environ, **exports}.items()
                   if name not in unset}
    try:
        if "/" in file:
            os.execve(file, argv, environment)
        os.execvpe(file, argv, environment)
    except OSError as error:
        shown = file if file.isprintable() else repr(file)  # a newline would split the line
        message = f"cannot execute {file_source + ' ' if file_source else ''}{shown}: " \
                  f"{error.strerror}"
        context.log.error(message)
        return message
    return None  # not reached: execve does not return


def _log_failure(log: Log, error: Exception) -> None:
    if isinstance(error, MJFError):
        log.error(str(error))
    elif isinstance(error, OSError) and error.filename:
        log.error(f"{error.filename}: {error.strerror}")
    else:
        # A bug of ours: say where, in one line, so a site can report it.
        import traceback  # only on this path: keeps hook start-up lean

        frame = traceback.extract_tb(error.__traceback__)[-1]
        where = f"{os.path.basename(frame.filename)}:{frame.lineno}"
        log.error(f"internal error {type(error).__name__} at {where}: {error}")


def _count_failure(base_dir: str, entry: str, reason: str | Exception) -> None:
    """Count a failure for ``mjf metrics``."""
    from ..hook_failures import record  # only on this path: keeps hook start-up lean

    record(base_dir, entry, reason)


def read_env_file(path: str) -> dict[str, str]:
    """An environment recorded with ``env``: ``NAME=value`` lines.

    Lines that are not ``NAME=value`` with a valid variable name (comments,
    other recorded output) are skipped.
    """
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as handle:
            lines = handle.read().splitlines()
    except OSError as error:
        raise MJFError(f"--env-file {path}: {error.strerror}") from None
    environ = {}
    for number, line in enumerate(lines, 1):
        name, equals, value = line.partition("=")
        if equals and _is_variable_name(name):
            if "\0" in value:  # no environment can hold one: exec would fail on it
                raise MJFError(f"--env-file {path}, line {number}: {name} contains a NUL byte")
            environ[name] = value
    return environ


def export_lines(variables: dict[str, str]) -> str:
    """``export NAME='value'`` lines, for a shell of the job to evaluate."""
    return "".join(f"export {name}={shell_quoted(value)}\n" for name, value in variables.items())


def shell_quoted(value: str) -> str:
    """``value`` as one word of a POSIX shell, in single quotes.

    Not shlex.quote: it imports `re`. A value may hold [ ], which a shell would glob."""
    return "'" + value.replace("'", "'\\''") + "'"


def _is_variable_name(name: str) -> bool:
    return (bool(name) and name.isascii() and not name[0].isdigit()
            and name.replace("_", "a").isalnum())
