"""``mjf-lsf``: LSF pre-exec, post-exec and job starter (not implemented yet)."""

from __future__ import annotations

from .stub import not_implemented


def main() -> int:
    return not_implemented("mjf-lsf")
