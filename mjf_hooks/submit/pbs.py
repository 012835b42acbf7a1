"""PBS's submit options: one ``select`` chunk with ``ncpus``, ``mem`` and the node facts,
``walltime``, ``cput``."""

from __future__ import annotations

from ..match.reduce import Needs
from . import INT64, MAX_MIB_AS_BYTES, Settings, held, hms, resource_values, whole_node_refused

DIRECTIVE = "#PBS"
# walltime and cput at most LONG_MAX - 1 seconds (PBS_MAX_TIME).
PBS_MAX_SECS = INT64 - 1


def options(needs: Needs, settings: Settings) -> list[list[str]]:
    whole_node_refused(needs, "pbs")
    chunk = [f"ncpus={held(needs.request('cores') or 1, INT64, 'pbs', 'ncpus', needs, 'cores')}"]
    memory = needs.request("memory_mib")
    if memory is not None:
        memory = held(memory, MAX_MIB_AS_BYTES, "pbs", "mem (mb)", needs, "memory_mib")
        chunk.append(f"mem={memory}mb")
    chunk += resource_values(needs, settings, "pbs", "a select chunk has no alternatives")
    out = [["-l", "select=1:" + ":".join(chunk)]]
    for kind, resource in (("wall_secs", "walltime"), ("cpu_secs", "cput")):
        secs = needs.request(kind)
        if secs is not None:
            secs = held(secs, PBS_MAX_SECS, "pbs", f"{resource} (seconds)", needs, kind)
            out.append(["-l", f"{resource}={hms(secs)}"])
    return out


