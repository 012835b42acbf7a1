"""``mjf-slurm``: Slurm Prolog, Epilog and TaskProlog (not implemented yet)."""

from __future__ import annotations

from .stub import not_implemented


def main() -> int:
    return not_implemented("mjf-slurm")
