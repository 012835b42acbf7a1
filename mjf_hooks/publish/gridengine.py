"""Grid Engine: the node facts as this exec host's ``complex_values`` (``qconf -se``,
``qconf -mattr``/``-aattr exechost``). Pure: text in, argv out.

Each name must be a requestable complex the site made once (``qconf -mc``), with relop
``<=``: Grid Engine compares the *request* with the host's value (``request <= host``),
so a job's ``-l hs06=10`` runs only where the host has at least 10 (docs/matchmaking.md).
"""

from __future__ import annotations

from ..batch.gridengine import command_env

DEFAULT_QCONF = "/usr/bin/qconf"


def _qconf(options: dict[str, str]) -> str:
    return options.get("qconf") or DEFAULT_QCONF


def read_query(options: dict[str, str], node: str) -> tuple[list[str], dict[str, str]]:
    """``qconf -se HOST``: the exec host's configuration, its complex_values among it."""
    return [_qconf(options), "-se", node], command_env(options, {})


def _fields(output: str) -> dict[str, str]:
    """``qconf -se``'s ``name value`` lines, a line ending in ``\\`` continued."""
    fields: dict[str, str] = {}
    name = None
    for line in output.splitlines():
        if name is not None:  # the continuation of the field before
            fields[name] += line.strip().rstrip("\\").strip()
        else:
            name, _, value = line.strip().partition(" ")
            fields[name] = value.strip().rstrip("\\").strip()
        if not line.rstrip().endswith("\\"):
            name = None
    return fields


def published(output: str, names: list[str]) -> dict[str, str]:
    """``qconf -se``'s ``complex_values`` -> {name: value} of ``names``; ValueError for
    output that is no exec host's configuration."""
    fields = _fields(output)
    if "hostname" not in fields or "complex_values" not in fields:
        raise ValueError("qconf -se printed no exec host configuration (hostname, "
                         "complex_values)")
    values = {}
    for entry in fields["complex_values"].split(","):
        name, equals, value = entry.strip().partition("=")
        if equals and name in names:
            values[name] = value
    return values


def write_commands(options: dict[str, str], node: str, changes: dict[str, str],
                   published: dict[str, str]) -> list[tuple[list[str], dict[str, str]]]:
    """``qconf -mattr`` for the values the host has, ``-aattr`` for those it has not:
    one argv each, the values as one ``name=value,...`` argument."""
    env = command_env(options, {})
    commands = []
    for verb, names in (("-mattr", [name for name in changes if name in published]),
                        ("-aattr", [name for name in changes if name not in published])):
        if names:
            commands.append(([_qconf(options), verb, "exechost", "complex_values",
                              ",".join(f"{name}={changes[name]}" for name in names), node],
                             env))
    return commands
