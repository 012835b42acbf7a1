"""What the `mjf publish` tests share on every batch system: the requirements, a job
that runs `mjf match` on its own slot, and commands that record how they were run.

The node's hs06 is the site config's (tests/integration/site.py): 10 per CPU.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.integration.site import HOOKS_BIN, seen_in

HS06 = 10 * (os.cpu_count() or 1)
CORES, MEMORY_MIB, WALL_MINUTES = 2, 200, 10


def requirement(hs06: int) -> str:
    """Cores, memory, wall time and the node's hs06 of at least ``hs06``."""
    return (f"other.GlueHostArchitectureSMPSize >= {CORES} && "
            f"other.GlueHostMainMemoryRAMSize >= {MEMORY_MIB} && "
            f"other.GlueCEPolicyMaxWallClockTime >= {WALL_MINUTES} && "
            f"other.MJF_MACHINE_HS06 >= {hs06}")


MEETS = requirement(HS06 - 5)  # below the node's hs06: runs there
ABOVE = requirement(HS06 + 5)  # above it: must never run there

# Runs inside the job as its user: `python3 match_job.py OUT`; the requirement is read
# from requirement.txt beside it (no quoting through the batch system's command line).
MATCH_JOB = r'''
import json, os, subprocess, sys
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "requirement.txt")) as handle:
    requirement = handle.read()
result = subprocess.run([MJF, "match", "--explain", requirement], capture_output=True,
                        text=True, timeout=60)
seen = {"rc": result.returncode, "out": result.stdout, "err": result.stderr,
        "env": {name: os.environ.get(name) for name in ("MACHINEFEATURES", "JOBFEATURES",
                                                        "SLURMD_NODENAME")}}
with open(sys.argv[1] + ".part", "w") as handle:
    json.dump(seen, handle)
os.rename(sys.argv[1] + ".part", sys.argv[1])
'''


def install_match_job(root: Path, requirement_text: str,
                      mjf: str = str(HOOKS_BIN / "mjf")) -> Path:
    """The job's script and its requirement in ``root``, readable by the job's user;
    ``mjf``: the command as the job finds it."""
    script = root / "match_job.py"
    script.write_text(MATCH_JOB.replace("MJF", repr(mjf)))
    (root / "requirement.txt").write_text(requirement_text)
    for path in (script, root / "requirement.txt"):
        path.chmod(0o644)
    return script


def assert_matched(out: Path, context) -> None:
    """What the job's `mjf match` said of its own slot: yes."""
    try:
        seen = seen_in(out)
    except FileNotFoundError:
        raise AssertionError(f"the job wrote nothing\n{context()}") from None
    assert seen["env"]["JOBFEATURES"], json.dumps(seen) + context()
    assert (seen["rc"], seen["out"]) == (0, "match\n"), json.dumps(seen) + context()


def recording(path: Path, real: str, log: Path) -> Path:
    """A command at ``path`` that appends its arguments to ``log``, then runs ``real``."""
    path.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {log}\nexec {real} "$@"\n')
    path.chmod(0o755)
    return path


def recorded(log: Path) -> list[str]:
    """The argument lines a recording command logged, oldest first."""
    return log.read_text().splitlines() if log.exists() else []
