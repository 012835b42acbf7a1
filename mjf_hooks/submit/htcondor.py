"""HTCondor's submit options: ``request_cpus``, ``request_memory`` (MiB), the wall-limit
attribute its hooks read, node facts and tags in ``requirements``; submit description
lines, not directives."""

from __future__ import annotations

from ..match.reduce import Needs, NodeBound, Tag
from . import INT64, Settings, cannot, held, number, wall_with_cpu, whole_node_refused

DIRECTIVE = None  # submit description lines, given to condor_submit with -append
# The ClassAd attributes HTCondor slots carry the node facts under (mjf-htcondor-cron).
HTCONDOR_FACTS = {"hs06": "TARGET.MJF_MACHINE_HS06",
                  "total_cpu": "TARGET.MJF_MACHINE_TOTAL_CPU",
                  "hs06_per_cpu": "TARGET.MJF_MACHINE_HS06 / TARGET.MJF_MACHINE_TOTAL_CPU"}
_UNIT_SECS = {"seconds": 1, "minutes": 60, "hours": 3600}


def _htcondor_clause(clause) -> str:
    if isinstance(clause, Tag):
        if not clause.name.replace("_", "a").isalnum():
            raise cannot("htcondor", clause.clause, "a slot attribute's name has only "
                         "letters, digits and _")
        return f"TARGET.{clause.name} =?= true"
    if isinstance(clause, NodeBound):
        if clause.fact == "hs06_per_cpu":
            return (f"TARGET.MJF_MACHINE_HS06 >= {number(clause.value)} * "
                    "TARGET.MJF_MACHINE_TOTAL_CPU")
        return f"{HTCONDOR_FACTS[clause.fact]} >= {number(clause.value)}"
    return "(" + " || ".join(_htcondor_clause(choice) for choice in clause.choices) + ")"


def options(needs: Needs, settings: Settings) -> list[list[str]]:
    whole_node_refused(needs, "htcondor")
    cores = needs.request("cores") or 1
    out = [[f"request_cpus = {held(cores, INT64, 'htcondor', 'request_cpus', needs, 'cores')}"]]
    memory = needs.request("memory_mib")
    if memory is not None:
        memory = held(memory, INT64, "htcondor", "request_memory (MiB)", needs, "memory_mib")
        out.append([f"request_memory = {memory}"])
    wall = wall_with_cpu(needs, cores)
    if wall is not None:
        unit = settings.htcondor_wall_unit
        attribute = settings.htcondor_wall_attribute
        value = held(-(-wall // _UNIT_SECS[unit]), INT64, "htcondor", f"{attribute} ({unit})",
                     needs, "wall_secs", "cpu_secs")
        out.append([f"+{attribute} = {value}"])
    if needs.node:
        out.append(["requirements = " + " && ".join(_htcondor_clause(clause)
                                                    for clause in needs.node)])
    return out
