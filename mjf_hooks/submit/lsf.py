"""LSF's submit options: ``-n`` on one host, ``-M``, ``-W``/``-c`` (minutes), node facts and
tags in one ``-R "select[...] span[hosts=1]"``."""

from __future__ import annotations

import math
from fractions import Fraction

from ..match.reduce import Needs, NodeBound, Tag
from . import INT32, Settings, cannot, held, minutes, named, number, whole_node_refused

DIRECTIVE = "#BSUB"
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
# LSF keeps -W, -c (as seconds: minutes x 60 below INFINIT_INT), -n and -M in C ints.
LSF_MAX_MINUTES = (INT32 - 1) // 60


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
        raise cannot("lsf", clause, why)
    return name


def _lsf_select(clause) -> str:
    if isinstance(clause, Tag):
        return _lsf_resource(clause.name, clause.clause)
    if isinstance(clause, NodeBound):
        return f"{_lsf_resource(clause.fact, clause.clause)}>={number(clause.value)}"
    return "(" + "||".join(_lsf_select(choice) for choice in clause.choices) + ")"


def options(needs: Needs, settings: Settings) -> list[list[str]]:
    whole_node_refused(needs, "lsf")
    out = [["-n", str(held(needs.request("cores") or 1, INT32, "lsf", "-n", needs, "cores"))]]
    memory = needs.request("memory_mib")
    if memory is not None:
        unit = settings.lsf_memory_unit
        if unit is None:  # IBM LSF takes a unit; volclava only a plain number
            out.append(["-M", f"{held(memory, INT32, 'lsf', '-M (MB)', needs, 'memory_mib')}MB"])
        else:
            amount = math.ceil(memory * _LSF_UNIT_MIB[unit])  # never below what is asked
            out.append(["-M", str(held(amount, INT32, "lsf", f"-M ({unit})", needs,
                                       "memory_mib"))])
    for kind, option in (("wall_secs", "-W"), ("cpu_secs", "-c")):
        secs = needs.request(kind)
        if secs is not None:
            out.append([option, str(held(minutes(secs), LSF_MAX_MINUTES, "lsf",
                                         f"{option} (minutes)", needs, kind))])
    # One -R: its sections, space-separated, all on one host.
    sections = ["span[hosts=1]"]
    if needs.node:
        selected = "&&".join(_lsf_select(named(clause, settings)) for clause in needs.node)
        sections.insert(0, f"select[{selected}]")
    out.insert(1, ["-R", " ".join(sections)])
    return out

