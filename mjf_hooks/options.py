"""A small command-line option parser for the hook entry points.

Hooks run on every job start, where argparse alone would cost a large part
of the start-up budget; hooks need only ``--name value``, ``--name=value``,
flags, and ``--`` before a command.
"""

from __future__ import annotations

from .errors import UsageError
from .spec import digits_value

__all__ = ["UsageError", "parse", "positive_int"]


def parse(argv: list[str], flags: tuple[str, ...], valued: tuple[str, ...],
          positional_stop: bool = False) -> tuple[dict[str, str | bool], list[str]]:
    """Split ``argv`` into options and the remaining arguments.

    ``flags`` take no value, ``valued`` take one. Parsing stops at ``--`` and,
    with ``positional_stop``, at the first non-option (the command to run).
    """
    options: dict[str, str | bool] = {}
    rest: list[str] = []
    index = 0
    while index < len(argv):
        arg = argv[index]
        index += 1
        if arg == "--":
            rest.extend(argv[index:])
            break
        if not arg.startswith("-") or arg == "-":
            rest.append(arg)
            if positional_stop:
                rest.extend(argv[index:])
                break
            continue
        name, equals, value = arg.partition("=")
        if name in ("-h", "--help"):
            options["help"] = True
        elif name in flags and not equals:
            options[name[2:].replace("-", "_")] = True
        elif name in valued:
            if not equals:
                if index >= len(argv):
                    raise UsageError(f"{name} needs a value")
                value = argv[index]
                index += 1
            options[name[2:].replace("-", "_")] = value
        else:
            raise UsageError(f"unknown option {arg!r}")
    return options, rest


def positive_int(name: str, text: str) -> int:
    """An option value that must be a positive whole number."""
    number = digits_value(text)
    if not number:
        raise UsageError(f"--{name} must be a positive whole number, not {text!r}")
    return number
