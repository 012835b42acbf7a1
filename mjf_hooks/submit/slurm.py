"""Slurm's submit options: ``--cpus-per-task`` on one node, ``--mem`` (MiB), ``--time``
(minutes, rounded up); node features as ``--constraint``, node facts as ``--extra``."""

from __future__ import annotations

from ..match.reduce import Needs, NodeBound, Tag
from . import INT32, INT64, Settings, cannot, held, minutes, number, wall_with_cpu

DIRECTIVE = "#SBATCH"
# --time's minutes become seconds in a C int, rounded up to minutes again;
# --cpus-per-task is a uint16_t whose two top values mean "not set" and "unlimited".
SLURM_MAX_MINUTES = (INT32 - 59) // 60
SLURM_MAX_CPUS_PER_TASK = 2**16 - 3


def options(needs: Needs, settings: Settings) -> list[list[str]]:
    cores = held(needs.request("cores") or 1, SLURM_MAX_CPUS_PER_TASK, "slurm",
                 "--cpus-per-task", needs, "cores")
    out = [["--nodes=1"], ["--ntasks=1"], [f"--cpus-per-task={cores}"]]
    if needs.whole_node:
        out.append(["--exclusive"])
    memory = needs.request("memory_mib")
    if memory is not None:
        memory = held(memory, INT64, "slurm", "--mem (MiB)", needs, "memory_mib")
        out.append([f"--mem={memory}M"])
    wall = wall_with_cpu(needs, cores)
    if wall is not None:
        time_limit = held(minutes(wall), SLURM_MAX_MINUTES, "slurm", "--time (minutes)",
                          needs, "wall_secs", "cpu_secs")
        out.append([f"--time={time_limit}"])
    features, extra, alternatives = [], [], []
    for clause in needs.node:
        if isinstance(clause, Tag):
            features.append(clause.name)
        elif isinstance(clause, NodeBound):
            extra.append(f"{settings.names[clause.fact]}>={number(clause.value)}")
        elif all(isinstance(choice, Tag) for choice in clause.choices):
            alternatives.append(clause)
        else:
            raise cannot("slurm", clause.clause, "node features hold no numbers, so "
                         "alternatives can only be features")
    if alternatives and (features or len(alternatives) > 1):
        raise cannot("slurm", alternatives[0].clause, "--constraint takes alternatives "
                     "of features only as the whole constraint")
    if alternatives:
        out.append(["--constraint=" + "|".join(c.name for c in alternatives[0].choices)])
    elif features:
        out.append(["--constraint=" + "&".join(features)])
    if len(extra) > 1:
        raise cannot("slurm", needs.node[-1].clause, "--extra is given one comparison here")
    if extra:
        out.append([f"--extra={extra[0]}"])
    return out


