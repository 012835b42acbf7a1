"""What the guest programs share: running commands, waiting, the results file, and
what a cgroup v2 tree holds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")
# The files of a cgroup v2 directory a job's limits come from (and what says which
# controllers it passes down).
LIMIT_FILES = ("memory.max", "memory.swap.max", "memory.high", "cpuset.cpus",
               "cpuset.cpus.effective", "cgroup.subtree_control")


class Guest:
    """The share (``sys.argv[1]``), the host's plan in it, and the results to write."""

    def __init__(self) -> None:
        self.share = Path(sys.argv[1])
        self.plan = json.loads((self.share / "plan.json").read_text())
        self.results: dict = {"errors": {}, "seconds": {}}
        self.started = time.monotonic()

    def part(self, name: str, function) -> None:
        """Run one part of the guest's work; a failure is recorded with its traceback
        (and the part's own diagnosis, where it has one), and the next part still runs."""
        began = time.monotonic()
        try:
            function(self)
        except BaseException:  # every failure goes back to the host
            self.results["errors"][name] = traceback.format_exc()
        finally:
            self.results["seconds"][name] = round(time.monotonic() - began, 1)
            self.save()

    def write_site_config(self) -> None:
        """The plan's site config as /etc/mjf/mjf.conf (a new root has no /etc/mjf)."""
        Path("/etc/mjf").mkdir(exist_ok=True)
        Path("/etc/mjf/mjf.conf").write_text(self.plan["site_config"])

    def save(self) -> None:
        path = self.share / "results.json"
        path.with_suffix(".part").write_text(json.dumps(self.results, indent=1))
        os.replace(path.with_suffix(".part"), path)


def run(argv: list[str], user: str | None = None, check: bool = True, timeout: float = 120,
        env: dict[str, str] | None = None, cwd: str = "/tmp") -> subprocess.CompletedProcess:
    """``argv`` as root, or wholly as ``user`` (its uid, gid and groups, a clean
    environment); its output captured; with ``check``, a failure that says what ran."""
    environment = {"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", **(env or {})}
    if user:
        environment.update(HOME=f"/home/{user}", USER=user, LOGNAME=user)
        argv = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--", *argv]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                            env=environment, cwd=cwd)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {result.returncode}\n"
                           f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


def wait_for(condition, timeout: float, what: str, interval: float = 0.2):
    """``condition()``'s first true value within ``timeout`` seconds, else a failure
    naming ``what`` was awaited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise RuntimeError(f"not within {timeout} s: {what}")


def read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def cgroup_tree(top: Path = CGROUP, below: str = "") -> dict[str, dict[str, str]]:
    """Every cgroup directory under ``top`` whose path contains ``below``, with its
    limit files (those it has): what a fixture records of a real v2 tree."""
    tree = {}
    for directory, _, _ in os.walk(top):
        relative = "/" + os.path.relpath(directory, top) if directory != str(top) else "/"
        if below not in relative:
            continue
        tree[relative] = {name: text.strip() for name in LIMIT_FILES
                          if (text := read(Path(directory) / name)) is not None}
    return tree
