"""Slurm: the node facts in this node's ``Extra`` field, a JSON object (``scontrol show
node -o``, ``scontrol update NodeName=... Extra=...``). Pure: text in, argv out.

Jobs match on it with ``--extra=hs06>=250`` where slurm.conf has
``SchedulerParameters=extra_constraints`` (Slurm 23.11 on; 22.05 has no such matching).
Measured on Slurm 24.11: a value set so outlives ``scontrol reconfigure`` and restarts
of slurmd and slurmctld; a job asking for more stays pending (reason ``Constraints``).
Keys of the object that are not ours are kept as they are; a field that holds anything
but a JSON object (a site's own text) is never overwritten.
"""

from __future__ import annotations

import json
import os

from ..batch.slurm import command_env, command_path

_FIELD = " Extra="


def _scontrol(options: dict[str, str]) -> str:
    return command_path("scontrol", options.get("scontrol")) or "/usr/bin/scontrol"


def _env() -> dict[str, str]:
    # The caller's SLURM_CONF, where a site keeps slurm.conf elsewhere (as for sync).
    return command_env(dict(os.environ))


def read_query(options: dict[str, str], node: str) -> tuple[list[str], dict[str, str]]:
    """``scontrol show node -o NODE``: the node's one-line record, ``Extra`` in it."""
    return [_scontrol(options), "show", "node", "-o", node], _env()


def _extra(output: str) -> dict:
    """The node's ``Extra`` object ({} where it is unset); ValueError for anything else."""
    lines = [line for line in output.splitlines() if line.startswith("NodeName=")]
    if len(lines) != 1:
        raise ValueError("scontrol show node -o printed no one node's record")
    line = lines[0]
    if _FIELD not in line:
        return {}  # a Slurm that prints no empty Extra (or one without the field)
    text = line.split(_FIELD, 1)[1]
    if text.startswith("(null)") or not text or text[0] == " ":
        return {}
    try:
        value, _ = json.JSONDecoder().raw_decode(text)
    except (ValueError, RecursionError):
        value = None
    if not isinstance(value, dict):
        raise ValueError(f"the node's Extra {text[:60]!r} is not a JSON object: it is not "
                         "overwritten (clear it, or keep the facts out of Slurm)")
    return value


def published(output: str, names: list[str]) -> dict[str, str]:
    """``scontrol show node -o`` -> every key of the node's ``Extra``, its value as JSON
    text (ours among them; the write keeps the others as they were); ValueError for
    output that is not one node's record, or an ``Extra`` that is not a JSON object."""
    return {str(key): json.dumps(value) for key, value in _extra(output).items()}


def write_commands(options: dict[str, str], node: str, changes: dict[str, str],
                   published: dict[str, str]) -> list[tuple[list[str], dict[str, str]]]:
    """One ``scontrol update``: the whole object again (Slurm sets the field, it does not
    merge), the other keys as read and each change a JSON number. The values are plain
    numbers and the names letters, digits and ``_`` (checked before they get here)."""
    extra = {key: json.loads(text) for key, text in published.items()}
    for name, value in changes.items():
        extra[name] = json.loads(value)
    field = json.dumps(extra, separators=(",", ":"), sort_keys=True)
    return [([_scontrol(options), "update", f"NodeName={node}", f"Extra={field}"],
             _env())]
