"""In the VM: a one-node Slurm 24.11 with ``CgroupPlugin=cgroup/v2`` and our hooks, each
variant of the plan in turn (its slurm.conf and cgroup.conf written by the host's test,
from the same cluster class as the other Slurm tests), jobs of an unprivileged user,
and what was left after them.

Per variant, the results hold each job's id, the v2 cgroup tree under slurmd's scope
while the variant's first job ran, what was left in the base dir and under the scope
once every job had ended, and the end of slurmctld's and slurmd's logs.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.integration.guest.common import CGROUP, Guest, cgroup_tree, read, run, wait_for

USER = "mjfuser1"


def start_munge() -> None:
    """munged, as the munge user, on its default socket (/run is the VM's fresh tmpfs)."""
    socket_dir = Path("/run/munge")
    socket_dir.mkdir(exist_ok=True)
    run(["chown", "munge:munge", str(socket_dir)])
    run(["/usr/sbin/munged"], user="munge")


def write_files(files: dict[str, str], links: dict[str, str], share: Path) -> None:
    """The variant's files (``@SHARE@`` in them: the share's path) and links."""
    for path, text in files.items():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text.replace("@SHARE@", str(share)))
        Path(path).chmod(0o755)
    for path, target in links.items():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).symlink_to(target)


class Cluster:
    def __init__(self, variant: dict, share: Path, systemd: bool = False) -> None:
        self.root = Path(variant["root"])
        self.share = share
        self.systemd = systemd
        self.env = {"SLURM_CONF": str(self.root / "slurm.conf")}

    def start(self) -> None:
        for sub in ("state", "spool", "log"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        run(["/usr/sbin/slurmctld", "-c", "-f", self.env["SLURM_CONF"]], env=self.env)
        if self.systemd:
            # Debian's slurmd.service (Type=notify, Delegate=yes, KillMode=process), with
            # the variant's config: slurmd then asks systemd for slurmstepd.scope.
            Path("/etc/default/slurmd").write_text(
                f"SLURM_CONF={self.env['SLURM_CONF']}\n"
                f"SLURMD_OPTIONS=-f {self.env['SLURM_CONF']}\n")
            run(["systemctl", "start", "slurmd.service"])
        else:
            run(["/usr/sbin/slurmd", "-f", self.env["SLURM_CONF"]], env=self.env)
        wait_for(lambda: self.node_state().startswith("idle"), 90,
                 "the node idle in scontrol show node")

    def units(self) -> dict[str, dict[str, str]]:
        """What systemd says of slurmd's service and of the scopes it made for Slurm."""
        listed = run(["systemctl", "list-units", "--all", "--plain", "--no-legend",
                      "*slurm*"]).stdout.split("\n")
        units = {}
        for name in (line.split()[0] for line in listed if line.strip()):
            shown = run(["systemctl", "show", name, "-p", "Id,LoadState,ActiveState,"
                         "Delegate,ControlGroup,Transient,KillMode,MainPID"]).stdout
            units[name] = dict(line.split("=", 1) for line in shown.splitlines() if "=" in line)
        return units

    def node_state(self) -> str:
        shown = run(["scontrol", "show", "node", "-o"], check=False, env=self.env).stdout
        return next((field[len("State="):].lower() for field in shown.split()
                     if field.startswith("State=")), "")

    def queued(self) -> str:
        return run(["squeue", "-h"], env=self.env).stdout.strip()

    def submit(self, job: dict) -> str:
        script = job["script"].replace("@SHARE@", str(self.share))
        result = run(["sbatch", "--parsable", "-J", job["name"], "-o",
                      f"/tmp/{job['name']}.log", *job["args"], "--wrap", script],
                     user=USER, env=self.env)
        return result.stdout.strip().split(";")[0]

    def stop(self) -> None:
        run(["scontrol", "shutdown"], check=False, env=self.env)
        for name in ("slurmd", "slurmctld"):
            pid = (read(self.root / f"{name}.pid") or "").strip()
            if pid:
                wait_for(lambda pid=pid: not Path(f"/proc/{pid}").exists(), 30,
                         f"{name} gone after scontrol shutdown")

    def logs(self) -> dict[str, str]:
        return {name: (read(self.root / "log" / f"{name}.log") or "")[-6000:]
                for name in ("slurmctld", "slurmd")}


def run_variant(guest: Guest, variant: dict) -> None:
    seen = guest.results.setdefault("variants", {}).setdefault(variant["name"], {})
    write_files(variant["files"], variant["links"], guest.share)
    cluster = Cluster(variant, guest.share, guest.plan.get("systemd", False))
    try:
        cluster.start()
        jobs = seen.setdefault("jobs", {})
        for job in variant["jobs"]:
            jobs[job["name"]] = cluster.submit(job)
            outputs = [guest.share / "out" / f"{name}.json" for name in job["outputs"]]
            wait_for(lambda outputs=outputs: all(path.exists() for path in outputs), 120,
                     f"job {job['name']}'s {job['outputs']}")
            if "tree" not in seen:  # the job sleeps a little after writing what it saw
                seen["tree"] = cgroup_tree(CGROUP, below="slurmstepd.scope")
                if cluster.systemd:
                    seen["units"] = cluster.units()
            guest.save()
        wait_for(lambda: not cluster.queued(), 120, "every job gone from squeue")
        jobs_dir = Path(guest.plan["base_dir"]) / "jobs"

        def left() -> list[str]:
            return sorted(name for name in os.listdir(jobs_dir) if not name.startswith(".")) \
                if jobs_dir.exists() else []

        try:
            wait_for(lambda: not left(), 30, "every job's directory removed")
        finally:
            seen["left"] = left()
            seen["cgroups_left"] = sorted(path for path in cgroup_tree(
                CGROUP, below="slurmstepd.scope") if "/job_" in path)
    finally:
        seen["logs"] = cluster.logs()
        cluster.stop()


def main() -> None:
    guest = Guest()
    guest.write_site_config()
    guest.results["init"] = (read(Path("/proc/1/comm")) or "").strip()
    guest.part("munge", lambda guest: start_munge())
    for variant in guest.plan["variants"]:
        guest.part(variant["name"], lambda guest, variant=variant: run_variant(guest, variant))


if __name__ == "__main__":
    main()
