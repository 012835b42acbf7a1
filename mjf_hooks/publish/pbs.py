"""PBS: the node facts as this node's ``resources_available.<name>`` (``pbsnodes -v``,
``qmgr -c "set node ..."``). Pure: text in, argv out.

Each name must be a host-level custom resource the site made once (``qmgr -c "create
resource hs06 type=float, flag=h"``). A numeric one (``long``, ``float``) is compared as
PBS's scheduler compares amounts: a chunk asking for ``hs06=10`` fits a node whose
``resources_available.hs06`` is at least 10; a ``string`` resource would have to be equal.
"""

from __future__ import annotations

from ..batch.pbs import command_env, command_path, nodes_json

_PREFIX = "resources_available."


def read_query(options: dict[str, str], node: str) -> tuple[list[str], dict[str, str]]:
    """``pbsnodes -v NODE -F json``: the node's attributes, its resources among them."""
    return [command_path(options, "pbsnodes"), "-v", node, "-F", "json"], command_env()


def published(output: str, names: list[str]) -> dict[str, str]:
    """``pbsnodes -F json`` of one node -> {name: value} of ``names`` in its
    ``resources_available``; ValueError for output that is not that."""
    nodes = nodes_json(output)
    if len(nodes) != 1 or not isinstance(nodes[0][1], dict):
        raise ValueError("pbsnodes -F json printed no one node's attributes")
    available = nodes[0][1].get("resources_available", {})
    if not isinstance(available, dict):
        raise ValueError("pbsnodes -F json printed resources_available that is no object")
    return {name: str(available[name]) for name in names if name in available}


def write_commands(options: dict[str, str], node: str, changes: dict[str, str],
                   published: dict[str, str]) -> list[tuple[list[str], dict[str, str]]]:
    """One ``qmgr -c`` statement setting every changed resource. Its words are checked
    (the node a host name, each name letters, digits and _, each value a plain number)
    before they get here: nothing qmgr would read as more than a value."""
    settings = ", ".join(f"{_PREFIX}{name}={value}" for name, value in changes.items())
    return [([command_path(options, "qmgr"), "-c", f"set node {node} {settings}"],
             command_env())]
