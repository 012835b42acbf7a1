"""In the VM: `mjf run` in v2 cgroups set up as systemd sets up a `systemd-run --scope`
unit, limits that are ``max``, a parent tighter than the job's own, and cgroups removed
while the probe reads them.

The plan names the site config, the users and the cases; each case is a cgroup path
(below /sys/fs/cgroup) with the limits to write at each level. No systemd runs in the
VM: the guest makes the directories and writes the files systemd would for
``MemoryMax=``, ``MemorySwapMax=`` and ``AllowedCPUs=``.
"""

from __future__ import annotations

from pathlib import Path

from tests.integration.guest.common import CGROUP, Guest, cgroup_tree, run

HOOKS_PYTHON = "/opt/mjf/venv/bin/python"


def enable_controllers(leaf: Path) -> None:
    """``leaf`` and its parents, each passing cpuset, cpu, memory and pids down (as
    systemd does for a unit with such limits)."""
    directory = CGROUP
    for part in leaf.relative_to(CGROUP).parts:
        (directory / "cgroup.subtree_control").write_text("+cpuset +cpu +memory +pids")
        directory = directory / part
        directory.mkdir(exist_ok=True)


def make_cgroups(levels: dict[str, dict[str, str]]) -> Path:
    """The cgroups of ``levels`` ({path: {file: value}}, top down), the last the job's."""
    leaf = None
    for path, files in levels.items():
        leaf = CGROUP / path.strip("/")
        enable_controllers(leaf)
        for name, value in files.items():
            (leaf / name).write_text(value)
    return leaf


def mjf_run_in(leaf: Path, user: str | None, name: str, share: Path) -> dict:
    """`mjf run -- python3 dump.py NAME` in the cgroup ``leaf``, as root or ``user``:
    the shell moves itself in first, as systemd-run's scope is made before its command
    starts."""
    command = f"echo $$ > {leaf}/cgroup.procs && exec " + (
        f"setpriv --reuid={user} --regid={user} --init-groups -- " if user else "") + \
        f"mjf run -- python3 {share}/dump.py {name}"
    env = {"HOME": f"/home/{user}", "USER": user} if user else {}
    result = run(["sh", "-c", command], check=False, env=env)
    return {"rc": result.returncode, "stdout": result.stdout, "stderr": result.stderr,
            "cgroups": cgroup_tree(CGROUP, below=str(leaf.relative_to(CGROUP).parts[0]))}


def standalone(guest: Guest) -> None:
    guest.write_site_config()
    cases = guest.results.setdefault("cases", {})
    for name, case in guest.plan["cases"].items():
        leaf = make_cgroups(case["levels"])
        cases[name] = mjf_run_in(leaf, case.get("user"), name, guest.share)
        guest.save()


def removed_while_read(guest: Guest) -> None:
    """The probe reads a process's limits and usage while that process ends and its
    cgroup is removed, many times over: every answer is a whole one or none, and
    nothing raises. Run with the hooks' own Python (it imports the probe)."""
    result = run([HOOKS_PYTHON, "-c", RACE, str(guest.plan["race_rounds"])], timeout=600)
    guest.results["race"] = result.stdout


# The race, in the hooks' Python: a reader thread asks for the limits and usage of the
# process in cgroup race/N while the main thread kills it and removes race/N.
RACE = r'''
import json, os, signal, subprocess, sys, threading, time
from mjf_hooks.probe import cgroup

rounds = int(sys.argv[1])
top = "/sys/fs/cgroup/race"
os.makedirs(top, exist_ok=True)
with open("/sys/fs/cgroup/cgroup.subtree_control", "w") as f:
    f.write("+cpuset +cpu +memory +pids")
with open(top + "/cgroup.subtree_control", "w") as f:
    f.write("+cpuset +cpu +memory +pids")
seen = {"whole": 0, "none": 0, "other": [], "errors": [], "usage": 0, "gone_dir": None}
for n in range(rounds):
    directory = "%s/%d" % (top, n)
    os.mkdir(directory)
    with open(directory + "/memory.max", "w") as f:
        f.write("104857600")
    child = subprocess.Popen(["sleep", "30"], preexec_fn=lambda: open(
        directory + "/cgroup.procs", "w").write(str(os.getpid())))
    stop = threading.Event()
    answers = []

    def read():
        while not stop.is_set():
            try:
                answers.append((cgroup.limits(child.pid),
                                cgroup.usage(child.pid, lambda path: path)))
            except Exception as error:
                seen["errors"].append(repr(error))
                return

    reader = threading.Thread(target=read)
    reader.start()
    time.sleep(0.002 * (n % 5))
    child.send_signal(signal.SIGKILL)
    child.wait()
    os.rmdir(directory)
    time.sleep(0.001)
    stop.set()
    reader.join()
    for limits, usage in answers:
        if limits is None:
            seen["none"] += 1
        elif limits.path == directory and limits.memory_bytes == 104857600:
            seen["whole"] += 1
        else:
            seen["other"].append(repr(limits))
        if usage is not None:
            seen["usage"] += 1
# A cgroup gone between reading /proc/PID/cgroup and its files: what the probe makes of
# the path it was given.
os.mkdir(top + "/gone")
proc = {"": "/race/gone"}
mounts = cgroup.cgroup_mounts_of(open("/proc/self/mountinfo").read())
os.rmdir(top + "/gone")
seen["gone_dir"] = repr(cgroup.limits_from(proc, mounts))
seen["gone_usage"] = repr(cgroup.usage_from(proc, mounts, lambda path: path))
os.rmdir(top)
print(json.dumps(seen))
'''


def main() -> None:
    guest = Guest()
    guest.part("standalone", standalone)
    guest.part("race", removed_while_read)


if __name__ == "__main__":
    main()
