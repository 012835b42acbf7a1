"""A job's :class:`~.reduce.Needs` as one batch system's submit options: `mjf submit-args`'
second half. Pure: needs and site settings in, option words out.

Each batch system gives the job what MJF then reads in it (docs/<batch>.md, "Where the
values come from"), so `mjf match` inside the job says yes: Slurm ``--cpus-per-task`` on
one node, ``--mem`` (MiB), ``--time`` (minutes, rounded up); PBS one ``select`` chunk with
``ncpus``, ``mem`` and the node facts, ``walltime``, ``cput``; Grid Engine a parallel
environment, ``h_vmem`` and ``h_cpu`` per slot (MJF multiplies them by the slots),
``h_rt``; LSF ``-n`` on one host, ``-M``, ``-W``/``-c`` (minutes); HTCondor
``request_cpus``, ``request_memory`` (MiB) and the wall-limit attribute its hooks read.
Node facts go where each batch system matches on them, under the site's names.
"""

from __future__ import annotations

import math
import time
from fractions import Fraction

from ..config import NODE_FACTS
from . import _excerpt
from .reduce import AnyOf, Needs, NodeBound, Tag, Unexpressible

BATCH_SYSTEMS = ("slurm", "pbs", "gridengine", "htcondor", "lsf")
DIRECTIVE = {"slurm": "#SBATCH", "pbs": "#PBS", "gridengine": "#$", "lsf": "#BSUB"}
# The ClassAd attributes HTCondor slots carry the node facts under (mjf-htcondor-cron).
HTCONDOR_FACTS = {"hs06": "TARGET.MJF_MACHINE_HS06",
                  "total_cpu": "TARGET.MJF_MACHINE_TOTAL_CPU",
                  "hs06_per_cpu": "TARGET.MJF_MACHINE_HS06 / TARGET.MJF_MACHINE_TOTAL_CPU"}
_UNIT_SECS = {"seconds": 1, "minutes": 60, "hours": 3600}
# LSF's resource names (IBM LSF 10.1, lsf.shared's Resource section): a letter first, then
# letters, digits and _ (its operators : . ( ) [ + - * / ! & | < > @ = , are not allowed),
# at most 39 characters, none beginning inf or nan in any case, and none of the names of
# its load indices and built-in resources, which select[] would compare instead (a tag
# `mem` asks for free memory). `int` is reserved on Solaris hosts.
_LSF_NAME_CHARS = 39
_LSF_RESERVED = frozenset((
    "cpu", "cpuf", "io", "logins", "ls", "idle", "maxmem", "maxswp", "maxtmp", "type",
    "model", "status", "it", "mem", "ncpus", "nprocs", "ncores", "nthreads",
    "define_ncpus_cores", "define_ncpus_procs", "define_ncpus_threads", "ndisks", "pg",
    "r15m", "r15s", "r1m", "swap", "swp", "tmp", "ut", "local", "dchost", "jobvm", "hname",
    "server", "rexpri", "int"))


# The most each option's field holds, in the option's own unit: the batch system keeps it
# in an integer of fixed width, and a larger value wraps round or is cut short without a
# word (HTCondor reads an integer beyond int64 as 0). docs/matchmaking.md gives the source
# of each; what fits may still be more than any node has, which the batch system says.
INT32, INT64, UINT32 = 2**31 - 1, 2**63 - 1, 2**32 - 1
# Slurm: --time's minutes become seconds in a C int, rounded up to minutes again;
# --cpus-per-task is a uint16_t whose two top values mean "not set" and "unlimited".
SLURM_MAX_MINUTES = (INT32 - 59) // 60
SLURM_MAX_CPUS_PER_TASK = 2**16 - 3
# PBS: walltime and cput at most LONG_MAX - 1 seconds (PBS_MAX_TIME); the mom turns mem
# into bytes in an unsigned long (mom_main.c's local_getsize refuses more).
PBS_MAX_SECS = INT64 - 1
MAX_MIB_AS_BYTES = (2**64 - 1) >> 20
# LSF keeps -W, -c (as seconds: minutes x 60 below INFINIT_INT), -n and -M in C ints.
LSF_MAX_MINUTES = (INT32 - 1) // 60


class Settings:
    """The site's choices: the name each node fact is published under, Grid Engine's
    parallel environment, HTCondor's wall-limit attribute and unit, and the unit of
    LSF's plain memory limits; ``now``, the
    time the job is submitted (Grid Engine's clock of its end is 32 bits)."""

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


def options(needs: Needs, batch: str, settings: Settings) -> list[list[str]]:
    """The options, one list of words per directive line; raises Unexpressible naming
    the clause the batch system cannot express."""
    return _BUILDERS[batch](needs, settings)


def _number(value: Fraction) -> str:
    """A lower bound as text: two decimals at most, rounded up (never below the bound)."""
    hundredths = math.ceil(value * 100)
    whole, fraction = divmod(hundredths, 100)
    return str(whole) if not fraction else f"{whole}.{fraction:02d}".rstrip("0")


def _hms(secs: int) -> str:
    return f"{secs // 3600}:{secs % 3600 // 60:02d}:{secs % 60:02d}"


def _minutes(secs: int) -> int:
    return max(1, -(-secs // 60))


def _cannot(batch: str, clause: str, why: str) -> Unexpressible:
    return Unexpressible(f"`{clause}` cannot be expressed for {batch}: {why}")


def _held(value: int, most: int, batch: str, field: str, needs: Needs, *kinds: str) -> int:
    """``value`` (in ``field``'s unit), if ``field`` holds it; else Unexpressible naming
    the clause that asked (of ``kinds``), the value and the bound."""
    if value <= most:
        return value
    clause = next((needs.why[kind] for kind in kinds if kind in needs.why), kinds[0])
    raise Unexpressible(f"`{_excerpt(clause)}` becomes {field} {value} for {batch}, "
                        f"which holds at most {most}")


def _wall_with_cpu(needs: Needs, cores: int) -> int | None:
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


def _whole_node_refused(needs: Needs, batch: str) -> None:
    if needs.whole_node:
        raise _cannot(batch, "WholeNode", "it gives a job the cores it asks for, never "
                      "all of a node's")


def _slurm(needs: Needs, settings: Settings) -> list[list[str]]:
    cores = _held(needs.request("cores") or 1, SLURM_MAX_CPUS_PER_TASK, "slurm",
                  "--cpus-per-task", needs, "cores")
    out = [["--nodes=1"], ["--ntasks=1"], [f"--cpus-per-task={cores}"]]
    if needs.whole_node:
        out.append(["--exclusive"])
    memory = needs.request("memory_mib")
    if memory is not None:
        memory = _held(memory, INT64, "slurm", "--mem (MiB)", needs, "memory_mib")
        out.append([f"--mem={memory}M"])
    wall = _wall_with_cpu(needs, cores)
    if wall is not None:
        minutes = _held(_minutes(wall), SLURM_MAX_MINUTES, "slurm", "--time (minutes)", needs,
                        "wall_secs", "cpu_secs")
        out.append([f"--time={minutes}"])
    features, extra, alternatives = [], [], []
    for clause in needs.node:
        if isinstance(clause, Tag):
            features.append(clause.name)
        elif isinstance(clause, NodeBound):
            extra.append(f"{settings.names[clause.fact]}>={_number(clause.value)}")
        elif all(isinstance(choice, Tag) for choice in clause.choices):
            alternatives.append(clause)
        else:
            raise _cannot("slurm", clause.clause, "node features hold no numbers, so "
                          "alternatives can only be features")
    if alternatives and (features or len(alternatives) > 1):
        raise _cannot("slurm", alternatives[0].clause, "--constraint takes alternatives "
                      "of features only as the whole constraint")
    if alternatives:
        out.append(["--constraint=" + "|".join(c.name for c in alternatives[0].choices)])
    elif features:
        out.append(["--constraint=" + "&".join(features)])
    if len(extra) > 1:
        raise _cannot("slurm", needs.node[-1].clause, "--extra is given one comparison here")
    if extra:
        out.append([f"--extra={extra[0]}"])
    return out


def _pbs(needs: Needs, settings: Settings) -> list[list[str]]:
    _whole_node_refused(needs, "pbs")
    chunk = [f"ncpus={_held(needs.request('cores') or 1, INT64, 'pbs', 'ncpus', needs, 'cores')}"]
    memory = needs.request("memory_mib")
    if memory is not None:
        memory = _held(memory, MAX_MIB_AS_BYTES, "pbs", "mem (mb)", needs, "memory_mib")
        chunk.append(f"mem={memory}mb")
    chunk += _resource_values(needs, settings, "pbs", "a select chunk has no alternatives")
    out = [["-l", "select=1:" + ":".join(chunk)]]
    for kind, resource in (("wall_secs", "walltime"), ("cpu_secs", "cput")):
        secs = needs.request(kind)
        if secs is not None:
            secs = _held(secs, PBS_MAX_SECS, "pbs", f"{resource} (seconds)", needs, kind)
            out.append(["-l", f"{resource}={_hms(secs)}"])
    return out


def _resource_values(needs: Needs, settings: Settings, batch: str,
                     no_alternatives: str) -> list[str]:
    """The node clauses as ``name=value`` resource requests (PBS's select chunk, Grid
    Engine's ``-l``): a tag as a boolean resource, a node fact at its published name;
    alternatives cannot be said there (``no_alternatives``: why)."""
    values = []
    for clause in needs.node:
        if isinstance(clause, Tag):
            values.append(f"{clause.name}=true")
        elif isinstance(clause, NodeBound):
            values.append(f"{settings.names[clause.fact]}={_number(clause.value)}")
        else:
            raise _cannot(batch, clause.clause, no_alternatives)
    return values


def _gridengine(needs: Needs, settings: Settings) -> list[list[str]]:
    _whole_node_refused(needs, "gridengine")
    cores = _held(needs.request("cores") or 1, UINT32, "gridengine", "slots", needs, "cores")
    out = [["-pe", settings.gridengine_pe, str(cores)]] if cores > 1 else []
    resources = []
    wall, cpu, memory = (needs.request(kind) for kind in ("wall_secs", "cpu_secs",
                                                           "memory_mib"))
    if wall is not None:  # the execd adds h_rt to its clock, 32 bits (to February 2106)
        wall = _held(wall, UINT32 - settings.now, "gridengine", "h_rt (seconds from now)",
                     needs, "wall_secs")
        resources.append(f"h_rt={wall}")
    if cpu is not None:  # per slot: MJF's cpu_limit_secs is h_cpu x the host's slots
        per_slot = _held(-(-cpu // cores), UINT32, "gridengine", "h_cpu (seconds)", needs,
                         "cpu_secs")
        resources.append(f"h_cpu={per_slot}")
    if memory is not None:  # per slot, as h_cpu
        per_slot = _held(-(-memory // cores), MAX_MIB_AS_BYTES, "gridengine", "h_vmem (M)",
                         needs, "memory_mib")
        resources.append(f"h_vmem={per_slot}M")
    resources += _resource_values(needs, settings, "gridengine",
                                  "-l takes no alternatives of different complexes")
    if resources:
        out.append(["-l", ",".join(resources)])
    return out


# MiB in LSF_UNIT_FOR_LIMITS's units, as a factor: -M's plain number is in that unit.
_LSF_UNIT_MIB = {"KB": 1024, "MB": 1, "GB": Fraction(1, 1024), "TB": Fraction(1, 1024**2)}


def _lsf_resource(name: str, clause: str) -> str:
    """``name`` if LSF can have a resource of that name, else Unexpressible naming why."""
    why = None
    if not (name[:1].isascii() and name[:1].isalpha()
            and name.replace("_", "a").isascii() and name.replace("_", "a").isalnum()):
        why = "an LSF resource name has only letters, digits and _, a letter first"
    elif len(name) > _LSF_NAME_CHARS:
        why = f"an LSF resource name has at most {_LSF_NAME_CHARS} characters"
    elif name in _LSF_RESERVED:
        why = f"{name} is one of LSF's own resources (a load index or built-in)"
    elif name[:3].lower() in ("inf", "nan"):
        why = "an LSF resource name may not begin with inf or nan"
    if why:
        raise _cannot("lsf", clause, why)
    return name


def _lsf_select(clause) -> str:
    if isinstance(clause, Tag):
        return _lsf_resource(clause.name, clause.clause)
    if isinstance(clause, NodeBound):
        return f"{_lsf_resource(clause.fact, clause.clause)}>={_number(clause.value)}"
    return "(" + "||".join(_lsf_select(choice) for choice in clause.choices) + ")"


def _lsf(needs: Needs, settings: Settings) -> list[list[str]]:
    _whole_node_refused(needs, "lsf")
    out = [["-n", str(_held(needs.request("cores") or 1, INT32, "lsf", "-n", needs, "cores"))]]
    memory = needs.request("memory_mib")
    if memory is not None:
        unit = settings.lsf_memory_unit
        if unit is None:  # IBM LSF takes a unit; volclava only a plain number
            out.append(["-M", f"{_held(memory, INT32, 'lsf', '-M (MB)', needs, 'memory_mib')}MB"])
        else:
            amount = math.ceil(memory * _LSF_UNIT_MIB[unit])  # never below what is asked
            out.append(["-M", str(_held(amount, INT32, "lsf", f"-M ({unit})", needs,
                                        "memory_mib"))])
    for kind, option in (("wall_secs", "-W"), ("cpu_secs", "-c")):
        secs = needs.request(kind)
        if secs is not None:
            out.append([option, str(_held(_minutes(secs), LSF_MAX_MINUTES, "lsf",
                                          f"{option} (minutes)", needs, kind))])
    # One -R: its sections, space-separated, all on one host.
    sections = ["span[hosts=1]"]
    if needs.node:
        selected = "&&".join(_lsf_select(_named(clause, settings)) for clause in needs.node)
        sections.insert(0, f"select[{selected}]")
    out.insert(1, ["-R", " ".join(sections)])
    return out


def _named(clause, settings: Settings):
    """The clause with each node fact under the site's name for it."""
    if isinstance(clause, NodeBound):
        return NodeBound(settings.names[clause.fact], clause.value, clause.clause)
    if isinstance(clause, AnyOf):
        return AnyOf([_named(choice, settings) for choice in clause.choices], clause.clause)
    return clause


def _htcondor_clause(clause) -> str:
    if isinstance(clause, Tag):
        if not clause.name.replace("_", "a").isalnum():
            raise _cannot("htcondor", clause.clause, "a slot attribute's name has only "
                          "letters, digits and _")
        return f"TARGET.{clause.name} =?= true"
    if isinstance(clause, NodeBound):
        if clause.fact == "hs06_per_cpu":
            return (f"TARGET.MJF_MACHINE_HS06 >= {_number(clause.value)} * "
                    "TARGET.MJF_MACHINE_TOTAL_CPU")
        return f"{HTCONDOR_FACTS[clause.fact]} >= {_number(clause.value)}"
    return "(" + " || ".join(_htcondor_clause(choice) for choice in clause.choices) + ")"


def _htcondor(needs: Needs, settings: Settings) -> list[list[str]]:
    _whole_node_refused(needs, "htcondor")
    cores = needs.request("cores") or 1
    out = [[f"request_cpus = {_held(cores, INT64, 'htcondor', 'request_cpus', needs, 'cores')}"]]
    memory = needs.request("memory_mib")
    if memory is not None:
        memory = _held(memory, INT64, "htcondor", "request_memory (MiB)", needs, "memory_mib")
        out.append([f"request_memory = {memory}"])
    wall = _wall_with_cpu(needs, cores)
    if wall is not None:
        unit = settings.htcondor_wall_unit
        attribute = settings.htcondor_wall_attribute
        value = _held(-(-wall // _UNIT_SECS[unit]), INT64, "htcondor", f"{attribute} ({unit})",
                      needs, "wall_secs", "cpu_secs")
        out.append([f"+{attribute} = {value}"])
    if needs.node:
        out.append(["requirements = " + " && ".join(_htcondor_clause(clause)
                                                    for clause in needs.node)])
    return out


_BUILDERS = {"slurm": _slurm, "pbs": _pbs, "gridengine": _gridengine, "lsf": _lsf,
             "htcondor": _htcondor}


def words(batch: str, lines: list[list[str]]) -> list[str]:
    """The options as the submit command's arguments (HTCondor: ``-append`` lines)."""
    if batch == "htcondor":
        return [word for line in lines for word in ("-append", line[0])]
    return [word for line in lines for word in line]


def directives(batch: str, lines: list[list[str]]) -> list[str]:
    """The options as job-script lines (HTCondor: submit description lines); a value with
    a space (LSF's -R) in double quotes, as those lines are parsed."""
    if batch == "htcondor":
        return [line[0] for line in lines]
    return [f"{DIRECTIVE[batch]} " + " ".join(f'"{word}"' if " " in word else word
                                               for word in line) for line in lines]
