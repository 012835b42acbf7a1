"""A storm of Slurm job starts and ends on one node while `mjf drain` and `mjf sync`
run in loops, and readers watch every job directory.

The installed hooks run as real processes, four jobs at a time, replaying a
recorded Slurm 22.05 Prolog/Epilog environment; a fake scontrol answers for the
job and lists no reservation, a fake squeue lists the jobs the "cluster" runs.
The drain loop moves the node's shutdown between two times, so every job's
``shutdowntime_job`` is rewritten again and again. What must hold:

* a job's directory is complete and valid from the moment it is visible;
* ``shutdowntime_job`` is never torn, and never missing while its job exists;
* once the loops stop, every surviving job's ``shutdowntime_job`` is the
  machine's ``shutdowntime`` (no drain was missed by a job starting during it);
* jobs whose Epilog never ran are removed by `mjf sync` (Slurm no longer runs
  them), and in the end nothing is left: no job, no hidden leftover.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from mjf_hooks import spec
from tests.conftest import ConfigPath, fixture_text, installed_command, printing, write_script

JOBS = 240
WORKERS = 4
SCONTROL_OUTPUT = fixture_text("slurm-22.05/scontrol-show-job-o.txt")


def long_running(job: int) -> bool:
    return job % 40 == 0  # still running when the loops stop


def lost_epilog(job: int) -> bool:
    return job % 40 == 7  # the Epilog never ran: only `mjf sync` can clean up


class Cluster:
    """The node's config, the jobs Slurm "runs", and the hooks as processes."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.base = root / "base"
        self.running_file = root / "running"
        self.running: set[int] = set()
        self.lock = threading.Lock()
        self.set_running()
        bin_dir = root / "bin"
        write_script(bin_dir / "scontrol", "case \"$*\" in *reservation*) exit 0;; esac\n"
                     + printing(SCONTROL_OUTPUT))
        write_script(bin_dir / "squeue", f"cat {self.running_file}")
        self.config = ConfigPath(root / "mjf.conf")  # replaced atomically
        self.config.write_text(
            f"[mjf]\nbase_dir = {self.base}\nlog = stderr\ncommand_timeout = 10\n"
            f"[machinefeatures]\ngrace_secs = 600\n[slurm]\nscontrol = {bin_dir}/scontrol\n")
        lines = fixture_text("slurm-22.05/prolog-sbatch.env").split("# scontrol")[0]
        self.environ = dict(line.split("=", 1) for line in lines.splitlines()
                            if "=" in line and line[0] != "#")

    def set_running(self) -> None:
        temp = self.running_file.with_suffix(".new")
        temp.write_text("".join(f"{job}\n" for job in sorted(self.running)))
        temp.rename(self.running_file)

    def register(self, job: int, running: bool) -> None:
        with self.lock:
            (self.running.add if running else self.running.discard)(job)
            self.set_running()

    def run(self, argv: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run(argv, capture_output=True, text=True, timeout=120,
                              env={"PATH": "/usr/bin:/bin", "MJF_CONFIG": str(self.config)})

    def hook(self, role: str, job: int) -> subprocess.CompletedProcess:
        env_file = self.root / f"job{job}.{role}.env"
        environ = {**self.environ, "SLURM_JOB_ID": str(job),
                   "SLURM_SCRIPT_CONTEXT": f"{role}_slurmd"}
        env_file.write_text("".join(f"{name}={value}\n" for name, value in environ.items()))
        result = self.run([installed_command("mjf-slurm"), "--env-file", str(env_file)])
        env_file.unlink()
        return result

    def job_dir(self, job: int) -> Path:
        return self.base / "jobs" / str(job) / "jobfeatures"

    def machine_shutdown(self) -> int:
        return int((self.base / "machinefeatures/shutdowntime").read_text())


def test_a_storm_of_jobs_with_drain_and_sync_loops_stays_consistent_and_leaks_nothing(
        tmp_path):
    cluster = Cluster(tmp_path)
    now = int(time.time())
    shutdowns = (now + 3 * 3600, now + 4 * 3600)
    mjf = installed_command("mjf")
    first = cluster.run([mjf, "drain", "--at", str(shutdowns[0])])
    assert first.returncode == 0, first.stderr
    problems: list[str] = []
    finished = threading.Event()
    counts = {"drains": 0, "syncs": 0, "reads": 0}
    keys: dict[int, set[str]] = {}

    def drain_loop() -> None:
        while not finished.is_set():
            at = shutdowns[counts["drains"] % 2]
            result = cluster.run([mjf, "drain", "--at", str(at)])
            if result.returncode != 0:
                problems.append(f"mjf drain --at {at}: {result.stderr}")
            counts["drains"] += 1

    def sync_loop() -> None:
        while not finished.is_set():
            result = cluster.run([mjf, "sync"])
            if result.returncode != 0 or "error" in result.stderr:
                problems.append(f"mjf sync: {result.stderr}")
            counts["syncs"] += 1

    def reader() -> None:
        try:
            read_until_finished()
        except Exception as error:  # a reader that dies is a failure too
            problems.append(f"reader: {error!r}")

    def read_until_finished() -> None:
        jobs_dir = cluster.base / "jobs"
        while not finished.is_set():
            for name in os.listdir(jobs_dir) if jobs_dir.exists() else ():
                if name.startswith("."):
                    continue
                features = jobs_dir / name / "jobfeatures"
                try:
                    seen = {path.name: path.read_text() for path in features.iterdir()
                            if not path.name.startswith(".")}  # readers skip temporaries
                except FileNotFoundError:
                    continue  # the job ended meanwhile
                if not seen and not features.parent.exists():
                    continue
                if "shutdowntime_job" not in seen and features.exists():
                    problems.append(f"job {name}: shutdowntime_job missing: {sorted(seen)}")
                for key, value in seen.items():
                    try:
                        spec.parse_value(key, value)
                    except ValueError as error:
                        problems.append(f"job {name}: {key} = {value!r}: {error}")
                if seen.get("shutdowntime_job", str(shutdowns[0])) not in map(str, shutdowns):
                    problems.append(f"job {name}: torn shutdowntime_job {seen!r}")
                counts["reads"] += 1

    def job(number: int) -> None:
        cluster.register(number, True)
        result = cluster.hook("prolog", number)
        if result.returncode != 0 or result.stderr:
            problems.append(f"prolog {number}: {result.returncode} {result.stderr}")
            return
        keys[number] = {path.name for path in cluster.job_dir(number).iterdir()
                        if not path.name.startswith(".")}
        if long_running(number):
            return
        if not lost_epilog(number):
            result = cluster.hook("epilog", number)
            if result.returncode != 0 or result.stderr:
                problems.append(f"epilog {number}: {result.returncode} {result.stderr}")
        cluster.register(number, False)

    loops = [threading.Thread(target=target) for target in (drain_loop, sync_loop, reader)]
    for thread in loops:
        thread.start()
    started = time.monotonic()
    try:
        with ThreadPoolExecutor(WORKERS) as pool:
            list(pool.map(job, range(1, JOBS + 1)))
    finally:
        finished.set()
        for thread in loops:
            thread.join()
    elapsed = time.monotonic() - started
    print(f"{JOBS} jobs in {elapsed:.1f} s ({JOBS / elapsed:.1f} jobs/s) beside "
          f"{counts['drains']} drains, {counts['syncs']} syncs, {counts['reads']} reads")
    assert problems == []
    assert counts["drains"] >= 3 and counts["syncs"] >= 3 and counts["reads"] >= JOBS
    # Every job had the same complete set of keys.
    assert len(keys) == JOBS and len({frozenset(found) for found in keys.values()}) == 1

    # No job missed a drain: the survivors carry the machine's last shutdowntime.
    shutdown = cluster.machine_shutdown()
    survivors = sorted(int(name) for name in os.listdir(cluster.base / "jobs"))
    assert survivors == [job for job in range(1, JOBS + 1) if long_running(job)]
    for job in survivors:
        assert int((cluster.job_dir(job) / "shutdowntime_job").read_text()) == shutdown

    # Lost Epilogs were cleaned up by sync (Slurm no longer ran those jobs).
    for job in survivors:
        assert cluster.hook("epilog", job).returncode == 0
        cluster.register(job, False)
    assert cluster.run([mjf, "sync"]).returncode == 0
    assert os.listdir(cluster.base / "jobs") == []
    assert sorted(path.name for path in cluster.base.rglob(".*")) == []
