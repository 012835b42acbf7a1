"""HTCondor 23.9 on the VM's cgroup v2 kernel: a one-machine pool, one job of an
unprivileged user, and what it saw (``python3 -m tests.integration.guest.htcondor SHARE``).

The cgroups are laid out as systemd lays them out for ``condor.service`` (whose unit
says ``Delegate=true`` and ``DelegateSubgroup=leaf``): the controllers enabled from
the root down, condor_master in ``system.slice/condor.service/leaf``. This program, the
test's driver, moves itself into a cgroup of its own (``mjf-driver``) before anything
starts, as a login shell is in a ``user.slice`` of its own on a site's node.

The plan (plan.json) holds the config and the submit file; the job runs ``dump.py``
from the share (its view goes to ``out/``) and waits until this program has recorded
the cgroup tree HTCondor made for it (``out/<name>.seen``). The pool's logs are written
into the share (``condor-log/``), so they outlive whatever happens in the VM.

Last, ``hook_trap``: a second job with a starter job hook configured (the job-exit hook
of contrib/htcondor/mjf-records.config). HTCondor 23.9's starter, on cgroup v2, takes
the hook's process for a job's with no cgroup once the hook exits, and SIGKILLs every
process in every cgroup (this program too): the part never returns, and the starter's
log in the share says whom it killed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from tests.integration.boot_dirs import make_boot_dirs
from tests.integration.guest.common import CGROUP, Guest, cgroup_tree, read, run, wait_for

# What systemd enables from the root down to a delegated service on a v2 host.
CONTROLLERS = "+cpu +cpuset +io +memory +pids"
SERVICE = CGROUP / "system.slice" / "condor.service"
MASTER_CGROUP = SERVICE / "leaf"  # DelegateSubgroup=leaf
DRIVER_CGROUP = CGROUP / "mjf-driver"
CONFIG_D = Path("/etc/condor/config.d")


def enter(cgroup: Path) -> None:
    """Move the calling process into ``cgroup`` (made if missing)."""
    cgroup.mkdir(parents=True, exist_ok=True)
    (cgroup / "cgroup.procs").write_text(str(os.getpid()))


def lay_out_cgroups(guest: Guest) -> None:
    enter(DRIVER_CGROUP)
    (CGROUP / "cgroup.subtree_control").write_text(CONTROLLERS)
    for interior in (CGROUP / "system.slice", SERVICE):
        interior.mkdir(exist_ok=True)
        (interior / "cgroup.subtree_control").write_text(CONTROLLERS)
    MASTER_CGROUP.mkdir(exist_ok=True)
    guest.results["driver_cgroup"] = read(Path("/proc/self/cgroup"))
    guest.results["controllers"] = read(CGROUP / "cgroup.controllers")


def start_pool(guest: Guest) -> None:
    # A fresh pool: no queue, sandboxes or logs from the runs that built the chroot.
    for state in ("/var/spool/condor", "/var/lib/condor/execute", "/var/log/condor"):
        for entry in Path(state).iterdir() if Path(state).is_dir() else ():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    log = guest.share / "condor-log"
    log.mkdir(exist_ok=True)
    shutil.chown(log, "condor", "condor")
    (CONFIG_D / "95-mjf-cgroup2.config").write_text(guest.plan["condor_config"]
                                                    + f"LOG = {log}\n")
    guest.write_site_config()
    # What a booted system has in /run (a fresh tmpfs here): systemd's /run/lock (the
    # chroot's /var/lock points there) and what condor's tmpfiles.d and unit declare.
    Path("/run/lock").mkdir(mode=0o1777, exist_ok=True)
    make_boot_dirs(Path("/"), ("condor",))
    for name in ("LOCK", "RUN", "SPOOL", "EXECUTE"):
        path = Path(run(["condor_config_val", name]).stdout.strip())
        path.mkdir(parents=True, exist_ok=True)
        shutil.chown(path, "condor", "condor")
    # As the unit starts it (ExecStart=/usr/sbin/condor_master -f), in its leaf cgroup.
    master = subprocess.Popen(["/usr/sbin/condor_master", "-f"], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                              preexec_fn=lambda: enter(MASTER_CGROUP), cwd="/")

    def slot_up():
        if master.poll() is not None:
            raise RuntimeError(f"condor_master exited {master.returncode}")
        status = run(["condor_status", "-af", "Name", "Cpus", "Memory"], check=False)
        return status.returncode == 0 and status.stdout.strip()

    guest.results["slots"] = wait_for(slot_up, 90, "a slot in condor_status")


def submit(guest: Guest, name: str) -> Path:
    """Submit the plan's submit file ``name`` as the plan's user; its user log."""
    plan = guest.plan
    work = Path(plan["work"])
    work.mkdir(mode=0o755, exist_ok=True)
    shutil.chown(work, plan["user"], plan["user"])
    path = work / f"{name}.sub"
    path.write_text(plan["submits"][name].replace("@SHARE@", str(guest.share)))
    run(["condor_submit", str(path)], user=plan["user"], cwd=str(work))
    return work / f"{name}.log"


def wait_for_end(guest: Guest, log: Path) -> None:
    seconds = guest.plan["job_end_secs"]
    waited = run(["condor_wait", "-wait", str(seconds), str(log)], user=guest.plan["user"],
                 check=False, timeout=seconds + 30)
    guest.results.setdefault("user_logs", {})[log.stem] = read(log)
    if waited.returncode != 0:
        raise RuntimeError(f"the job did not end: {waited.stdout}{waited.stderr}")


def run_job(guest: Guest) -> None:
    name = guest.plan["job_name"]
    log = submit(guest, name)
    out = guest.share / "out"
    wait_for(lambda: (out / f"{name}.json").exists(), guest.plan["job_start_secs"],
             "the job's view (out/*.json): it did not start or did not finish its dump")
    # The job waits for this: its cgroups as HTCondor made them, while it runs.
    guest.results["tree"] = cgroup_tree()
    (out / f"{name}.seen").write_text("")
    wait_for_end(guest, log)


def after_job(guest: Guest) -> None:
    """What is left once the job is gone: the execute and base directories, the job's
    cgroups. The starter removes the scratch directory (with the job's directory in it)
    a moment after the job's terminate event."""
    execute = Path(guest.plan["execute"])
    try:
        wait_for(lambda: not any(execute.iterdir()), 20, "the execute directory to empty")
    except RuntimeError:
        pass  # what is left is the result
    guest.results["execute_left"] = sorted(str(path) for path in execute.iterdir())
    base = Path(guest.plan["base_dir"])
    guest.results["base_left"] = sorted(str(path) for path in base.rglob("*")) \
        if base.exists() else []
    guest.results["tree_after"] = cgroup_tree()


def diagnose(guest: Guest) -> None:
    """What the kernel said (an OOM kill, a segfault), and where every process is."""
    guest.results["dmesg"] = run(["dmesg"], check=False).stdout[-6000:]
    processes = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            command = (read(proc / "cmdline") or "").replace("\0", " ").strip()
            processes.append(f"{proc.name} {(read(proc / 'cgroup') or '').strip()} {command}")
    guest.results["processes"] = "\n".join(sorted(processes, key=lambda line: int(
        line.split()[0])))


def hook_trap(guest: Guest) -> None:
    """A job with the plan's starter hook configured (the starter reads config.d when
    it starts: no reconfig needed). Returns only if HTCondor spares this program."""
    (CONFIG_D / "96-mjf-hook.config").write_text(guest.plan["hook_config"])
    guest.results["trap_driver_pid"] = os.getpid()
    guest.save()  # before the kill
    wait_for_end(guest, submit(guest, "hook"))
    # Still here once the job and its hook have ended: not killed.
    time.sleep(5)
    guest.results["trap_survived"] = True


def main() -> None:
    guest = Guest()
    guest.part("cgroups", lay_out_cgroups)
    for name, step in (("pool", start_pool), ("job", run_job), ("after", after_job)):
        if guest.results["errors"]:
            break
        guest.part(name, step)
    guest.part("diagnose", diagnose)
    guest.results["total_seconds"] = round(time.monotonic() - guest.started, 1)
    guest.save()
    if not guest.results["errors"]:
        guest.part("hook_trap", hook_trap)


if __name__ == "__main__":
    main()
