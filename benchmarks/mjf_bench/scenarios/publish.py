"""``mjf publish`` that changes nothing, the pass a timer runs every minute once the
node's facts are published: Slurm (one ``scontrol show node -o``), Grid Engine (one
``qconf -se``) and PBS (one ``pbsnodes -v -F json``). The batch system's commands are
stand-ins (sh scripts that print what the node holds, and keep what a write sets), so
the row is our cost, not the server's. Each is published once before the first repeat;
every command any repeat ran is recorded, and a write among them is a failure: a
publish that changes nothing writes nothing."""

from __future__ import annotations

import os
import subprocess

from ..bench import Bench
from ..measure import PYTHON_FLOOR, Command
from ..scenario import Scenario

# `qconf -se HOST` prints the complex_values kept in STATE; a write keeps its argument.
QCONF = """#!/bin/sh
printf '%s\\n' "$*" >> {log}
case "$1" in
-se) printf 'hostname %s\\ncomplex_values %s\\n' "$2" "$(cat {state})" ;;
*) printf '%s\\n' "$4" > {state} ;;
esac
"""
# `pbsnodes -v NODE -F json` prints resources_available.hs06 as kept in STATE; `qmgr -c
# "set node NODE resources_available.hs06=N"` keeps N.
PBSNODES = """#!/bin/sh
printf '%s\\n' "$*" >> {log}
printf '{{"nodes": {{"%s": {{"resources_available": {{%s}}}}}}}}\\n' "$2" "$(cat {state})"
"""
QMGR = """#!/bin/sh
printf '%s\\n' "$*" >> {log}
printf '"hs06": %s\\n' "${{2##*=}}" > {state}
"""

# `scontrol show node -o NODE` prints the node's Extra as kept in STATE; `scontrol update
# NodeName=NODE Extra=JSON` keeps the JSON.
SCONTROL = """#!/bin/sh
printf '%s\\n' "$*" >> {log}
case "$1" in
show) printf 'NodeName=%s CPUTot=2 Extra=%s State=IDLE\\n' "$4" "$(cat {state})" ;;
*) printf '%s\\n' "${{3#Extra=}}" > {state} ;;
esac
"""


class Publish(Scenario):
    def __init__(self, bench: Bench) -> None:
        super().__init__(bench)
        self.logs = []
        self.commands = [
            Command("`mjf publish`, nothing changed (Slurm: one `scontrol show node`, a "
                    "stand-in)", [bench.bin("mjf"), "publish"], PYTHON_FLOOR,
                    bench.env_for(self._config("slurm", {"scontrol": SCONTROL}, "(null)"))),
            Command("`mjf publish`, nothing changed (Grid Engine: one `qconf -se`, a stand-in)",
                    [bench.bin("mjf"), "publish"], PYTHON_FLOOR,
                    bench.env_for(self._config("gridengine", {"qconf": QCONF}, "NONE"))),
            Command("`mjf publish`, nothing changed (PBS: one `pbsnodes -v`, a stand-in)",
                    [bench.bin("mjf"), "publish"], PYTHON_FLOOR,
                    bench.env_for(self._config("pbs", {"pbsnodes": PBSNODES, "qmgr": QMGR},
                                               ""))),
        ]

    def _config(self, batch: str, scripts: dict[str, str], empty: str) -> str:
        """The site config publishing hs06 to ``batch`` through stand-ins of its commands."""
        top = os.path.join(self.bench.work, f"publish-{batch}")
        os.makedirs(os.path.join(top, "bin"))
        log, state = os.path.join(top, "calls"), os.path.join(top, "state")
        self.bench.file(os.path.join(top, "state"), empty + "\n")
        for name, text in scripts.items():
            path = self.bench.file(os.path.join(top, "bin", name),
                                   text.format(log=log, state=state))
            os.chmod(path, 0o700)
        self.logs.append(log)
        where = {"gridengine": f"qconf = {top}/bin/qconf", "pbs": f"pbs_exec = {top}",
                 "slurm": f"scontrol = {top}/bin/scontrol\nnodename = bench"}[batch]
        with open(self.bench.config) as handle:
            text = handle.read()
        return self.bench.file(f"mjf-publish-{batch}.conf", text + f"[mjf]\nbatch_systems = "
                               f"{batch}\n[{batch}]\n{where}\n[publish]\nfacts = hs06\n")

    def prepare(self) -> None:
        for command, log in zip(self.commands, self.logs):
            subprocess.run(command.argv, env=command.env(), capture_output=True, check=True,
                           timeout=60)
            os.remove(log)  # published: what the repeats run is recorded from here on

    def finish(self) -> list[str]:
        problems = []
        for log in self.logs:
            with open(log) as handle:
                calls = handle.read().splitlines()
            writes = [call for call in calls
                      if not call.startswith(("-se ", "-v ", "show node "))]
            if writes or not calls:
                problems.append(f"{log}: a publish that changed nothing ran "
                                f"{writes[:1] or 'no read'}")
        return problems
