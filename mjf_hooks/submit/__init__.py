"""`mjf submit-args`' second half: a job's :class:`~mjf_hooks.match.reduce.Needs` as one
batch system's submit options. Pure: needs and site settings in, option words out.

Each batch system gives the job what MJF then reads in it (docs/<batch>.md, "Where the
values come from"), so `mjf match` inside the job says yes; node facts go where each
batch system matches on them, under the site's names. One module per batch system
(``submit/<name>.py``, declared in :class:`mjf_hooks.batch.contract.SubmitOptions`):
its ``DIRECTIVE`` and ``options(needs, settings)``; what they share is here.
"""

from __future__ import annotations

import math
import time
from fractions import Fraction

from ..batch import NAMES
from ..config import NODE_FACTS
from ..match import _excerpt
from ..match.reduce import AnyOf, Needs, NodeBound, Tag, Unexpressible

# Every batch system has submit options: its module here is named as it is in batch/.
BATCH_SYSTEMS = NAMES

# The most each option's field holds, in the option's own unit: the batch system keeps it
# in an integer of fixed width, and a larger value wraps round or is cut short without a
# word (HTCondor reads an integer beyond int64 as 0). docs/matchmaking.md gives the source
# of each; what fits may still be more than any node has, which the batch system says.
INT32, INT64, UINT32 = 2**31 - 1, 2**63 - 1, 2**32 - 1
# MiB that are bytes in an unsigned long (PBS's mom turns mem into one, mom_main.c's
# local_getsize refuses more; Grid Engine's h_vmem as well).
MAX_MIB_AS_BYTES = (2**64 - 1) >> 20


class Settings:
    """The site's choices: the name each node fact is published under, Grid Engine's
    parallel environment, HTCondor's wall-limit attribute and unit, and the unit of
    LSF's plain memory limits; ``now``, the time the job is submitted (Grid Engine's
    clock of its end is 32 bits)."""

    def __init__(self, names: dict[str, str] | None = None, gridengine_pe: str = "smp",
                 htcondor_wall_attribute: str = "AllowedJobDuration",
                 htcondor_wall_unit: str = "seconds", now: int | None = None,
                 lsf_memory_unit: str | None = None):
        self.names = {fact: fact for fact in NODE_FACTS}
        self.names.update(names or {})
        self.gridengine_pe = gridengine_pe
        self.htcondor_wall_attribute = htcondor_wall_attribute
        self.htcondor_wall_unit = htcondor_wall_unit
        # The unit of a plain -M number (LSF_UNIT_FOR_LIMITS); None: "200MB", with its unit.
        self.lsf_memory_unit = lsf_memory_unit
        self.now = int(time.time()) if now is None else now


def submitter(batch: str):
    """The module of ``batch`` (one of :data:`BATCH_SYSTEMS`), imported when needed."""
    if batch not in BATCH_SYSTEMS:
        raise KeyError(batch)
    return __import__(f"mjf_hooks.submit.{batch}", fromlist=["options"])


def options(needs: Needs, batch: str, settings: Settings) -> list[list[str]]:
    """The options, one list of words per directive line; raises Unexpressible naming
    the clause the batch system cannot express."""
    return submitter(batch).options(needs, settings)


def words(batch: str, lines: list[list[str]]) -> list[str]:
    """The options as the submit command's arguments (a batch system with no directive,
    HTCondor: ``-append`` lines)."""
    if submitter(batch).DIRECTIVE is None:
        return [word for line in lines for word in ("-append", line[0])]
    return [word for line in lines for word in line]


def directives(batch: str, lines: list[list[str]]) -> list[str]:
    """The options as job-script lines (HTCondor: submit description lines); a value with
    a space (LSF's -R) in double quotes, as those lines are parsed."""
    directive = submitter(batch).DIRECTIVE
    if directive is None:
        return [line[0] for line in lines]
    return [f"{directive} " + " ".join(f'"{word}"' if " " in word else word
                                       for word in line) for line in lines]


def number(value: Fraction) -> str:
    """A lower bound as text: two decimals at most, rounded up (never below the bound)."""
    hundredths = math.ceil(value * 100)
    whole, fraction = divmod(hundredths, 100)
    return str(whole) if not fraction else f"{whole}.{fraction:02d}".rstrip("0")


def hms(secs: int) -> str:
    return f"{secs // 3600}:{secs % 3600 // 60:02d}:{secs % 60:02d}"


def minutes(secs: int) -> int:
    return max(1, -(-secs // 60))


def cannot(batch: str, clause: str, why: str) -> Unexpressible:
    return Unexpressible(f"`{clause}` cannot be expressed for {batch}: {why}")


def held(value: int, most: int, batch: str, field: str, needs: Needs, *kinds: str) -> int:
    """``value`` (in ``field``'s unit), if ``field`` holds it; else Unexpressible naming
    the clause that asked (of ``kinds``), the value and the bound."""
    if value <= most:
        return value
    clause = next((needs.why[kind] for kind in kinds if kind in needs.why), kinds[0])
    raise Unexpressible(f"`{_excerpt(clause)}` becomes {field} {value} for {batch}, "
                        f"which holds at most {most}")


def wall_with_cpu(needs: Needs, cores: int) -> int | None:
    """Wall time where the batch system has no CPU-time limit: MJF's cpu_limit_secs is
    then wall_limit_secs x allocated_cpu, so a CPU time needs wall >= it / cores."""
    wall, cpu = needs.request("wall_secs"), needs.request("cpu_secs")
    if cpu is None:
        return wall
    from_cpu = -(-cpu // cores)
    if "wall_secs" in needs.high and from_cpu > needs.high["wall_secs"]:
        raise Unexpressible(f"`{needs.why.get('cpu_secs', 'the CPU time')}` needs more wall "
                            "time than another clause allows")
    return max(wall or 0, from_cpu)


def whole_node_refused(needs: Needs, batch: str) -> None:
    if needs.whole_node:
        raise cannot(batch, "WholeNode", "it gives a job the cores it asks for, never "
                     "all of a node's")


def resource_values(needs: Needs, settings: Settings, batch: str,
                    no_alternatives: str) -> list[str]:
    """The node clauses as ``name=value`` resource requests (PBS's select chunk, Grid
    Engine's ``-l``): a tag as a boolean resource, a node fact at its published name;
    alternatives cannot be said there (``no_alternatives``: why)."""
    values = []
    for clause in needs.node:
        if isinstance(clause, Tag):
            values.append(f"{clause.name}=true")
        elif isinstance(clause, NodeBound):
            values.append(f"{settings.names[clause.fact]}={number(clause.value)}")
        else:
            raise cannot(batch, clause.clause, no_alternatives)
    return values


def named(clause, settings: Settings):
    """The clause with each node fact under the site's name for it."""
    if isinstance(clause, NodeBound):
        return NodeBound(settings.names[clause.fact], clause.value, clause.clause)
    if isinstance(clause, AnyOf):
        return AnyOf([named(choice, settings) for choice in clause.choices], clause.clause)
    return clause
