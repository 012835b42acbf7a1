"""Grid Engine's submit options: a parallel environment, ``h_vmem`` and ``h_cpu`` per slot
(MJF multiplies them by the slots), ``h_rt``; node facts as ``-l`` complexes."""

from __future__ import annotations

from ..match.reduce import Needs
from . import MAX_MIB_AS_BYTES, UINT32, Settings, held, resource_values, whole_node_refused

DIRECTIVE = "#$"


def options(needs: Needs, settings: Settings) -> list[list[str]]:
    whole_node_refused(needs, "gridengine")
    cores = held(needs.request("cores") or 1, UINT32, "gridengine", "slots", needs, "cores")
    out = [["-pe", settings.gridengine_pe, str(cores)]] if cores > 1 else []
    resources = []
    wall, cpu, memory = (needs.request(kind) for kind in ("wall_secs", "cpu_secs",
                                                           "memory_mib"))
    if wall is not None:  # the execd adds h_rt to its clock, 32 bits (to February 2106)
        wall = held(wall, UINT32 - settings.now, "gridengine", "h_rt (seconds from now)",
                    needs, "wall_secs")
        resources.append(f"h_rt={wall}")
    if cpu is not None:  # per slot: MJF's cpu_limit_secs is h_cpu x the host's slots
        per_slot = held(-(-cpu // cores), UINT32, "gridengine", "h_cpu (seconds)", needs,
                        "cpu_secs")
        resources.append(f"h_cpu={per_slot}")
    if memory is not None:  # per slot, as h_cpu
        per_slot = held(-(-memory // cores), MAX_MIB_AS_BYTES, "gridengine", "h_vmem (M)",
                        needs, "memory_mib")
        resources.append(f"h_vmem={per_slot}M")
    resources += resource_values(needs, settings, "gridengine",
                                 "-l takes no alternatives of different complexes")
    if resources:
        out.append(["-l", ",".join(resources)])
    return out


