"""``mjf-htcondor-wrapper`` and ``mjf-htcondor-cron`` (not implemented yet).

Even as a stub, the wrapper must exec the job: HTCondor runs the job only
through it.
"""

from __future__ import annotations

import os
import sys

from .stub import not_implemented


def wrapper_main() -> int:
    not_implemented("mjf-htcondor-wrapper")
    if len(sys.argv) < 2:
        return 0
    os.execv(sys.argv[1], sys.argv[1:])
    return 127  # not reached: execv replaces this process or raises


def cron_main() -> int:
    return not_implemented("mjf-htcondor-cron")
