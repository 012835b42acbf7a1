"""``$JOBSTATUS`` (draft 0.99, "Pilot status") on the real batch systems.

Runs as root (CI). With ``[mjf] jobstatus = yes`` in the site config, a batch job of an
unprivileged user acts as a multi-job pilot (:data:`~tests.integration.job_side.PILOT`):
it finds ``$JOBSTATUS``, an empty directory of its own, and reports step after step
through the library and ``mjf status set``, every key of a set derived from the step n:
20 payload starts, then a burst of updates 2 ms apart (where a reader that did not lock
would catch a set half written). All along, root runs ``mjf status --json <job id>`` as
an admin would, and must only ever see whole sets (all keys of one n), in order, with
the draft's figures computed from them for its "now"; once the job has ended its
directory, jobstatus/ with it, is gone.
On Slurm 22.05 and 24.11 (the Prolog makes jobstatus/ for the job's user, the sh
TaskProlog exports it) and HTCondor 23.9 (the wrapper makes it in the job's scratch,
where root's `mjf status` finds it through the execute directory).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.integration.htcondor_pool import GOOD_CONFIG, USER, condor_arguments, condor_pool
from tests.integration.job_side import PILOT
from tests.integration.site import HOOKS_BIN
from tests.integration.slurm_cluster import VERSIONS, assert_no_job_directories_left, mjf_cluster
from tests.integration.trixie_root import VENV

pytestmark = pytest.mark.integration

JOBSTATUS_ON = "[mjf]\njobstatus = yes\n"
STEPS = 20  # payload starts, a quarter second apart
BURST_SECS = 2.0
CPUS = 2


def step_values(n: int, ready: dict) -> dict[str, str]:
    """The set the pilot reports at step ``n``, as its files hold it (job_side.PILOT)."""
    base, allocated = ready["base"], ready["allocated"]
    return {"used_CPU": str(n % allocated + 1), "last_job_start": str(ready["start"]),
            "first_exp_job_end": str(base + 200000 + n),
            "last_exp_job_end": str(base + 300000 + n),
            "last_max_job_end": str(base + 400000 + n), "add_uncom_time": str(n % 2),
            "add_final_exp_waste": str(n % 50), "can_postpone_last_job": str(n % 2 == 1),
            "priority_factor": str(n)}


def expected_figures(n: int, ready: dict, now: int) -> dict:
    """Draft 0.99's conversion formulas for step ``n`` at ``now``. The pilot's times keep
    every difference at least 0, so no figure is one the suite clamps at 0."""
    base, allocated = ready["base"], ready["allocated"]
    used, last_start = n % allocated + 1, ready["start"]
    first_end, last_end = base + 200000 + n, base + 300000 + n
    assert last_start <= now < first_end
    return {"remaining_time": last_end - now,
            "draining_waste": (allocated - used) * (first_end - now) + n % 50,
            "kill_waste": n % 2 + used * (now - last_start),
            "priority_factor": n, "can_postpone_last_job": n % 2 == 1, "assumed": False}


def install_pilot(job_root: Path) -> Path:
    script = job_root / "pilot.py"
    script.write_text(PILOT)
    script.chmod(0o644)
    return script


def wait_for_file(path: Path, why: str, diagnose, done: Path | None = None,
                  timeout: float = 120) -> dict:
    """``path``'s JSON once the pilot published it; a pilot that failed first (its
    ``done`` holds an error) or a timeout fails with ``diagnose()``."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if done is not None and done.exists():
            pytest.fail(f"the pilot failed before {why}: {done.read_text()}\n{diagnose()}")
        assert time.monotonic() < deadline, f"{why}: timed out\n{diagnose()}"
        time.sleep(0.05)
    return json.loads(path.read_text())


def look(mjf_status, job_id: str) -> tuple[int, dict]:
    """Root's `mjf status --json <job id>`: (its now, the job's report)."""
    result = mjf_status("status", "--json", job_id)
    assert result.returncode == 0, result.stdout + result.stderr
    shown = json.loads(result.stdout)
    assert [report["job_id"] for report in shown["jobs"]] == [job_id], shown
    return shown["now"], shown["jobs"][0]


def watch_pilot(out: Path, name: str, mjf_status, diagnose) -> tuple[dict, dict, list]:
    """Let the pilot run while root keeps looking; (what the pilot found, what it read
    last itself, root's looks as (now, report), the first taken before any report)."""
    ready_file, done_file = out / f"{name}.ready", out / f"{name}.done"
    ready = wait_for_file(ready_file, "its start", diagnose, done_file)
    looks = [look(mjf_status, ready["job_id"])]
    (out / f"{name}.watching").touch()
    deadline = time.monotonic() + 120
    while not done_file.exists():
        assert time.monotonic() < deadline, f"the pilot did not finish\n{diagnose()}"
        looks.append(look(mjf_status, ready["job_id"]))
    done = json.loads(done_file.read_text())
    assert "error" not in done, done["error"]
    looks.append(look(mjf_status, ready["job_id"]))  # after its last report
    (out / f"{name}.seen").touch()
    return ready, done, looks


def assert_root_saw_whole_sets(ready: dict, done: dict, looks: list, uid: int,
                               location: str) -> None:
    """What the pilot found and what root saw, step by step."""
    assert ready["JOBSTATUS"] == location
    assert ready["is_dir"] and ready["listing"] == []  # empty, as the job starts
    assert ready["owner"] == ready["uid"] == uid
    allocated = ready["allocated"]
    assert allocated == CPUS
    first_now, first = looks[0]
    assert first["jobstatus"] == location
    assert first["state"] == "reports nothing" and first["values"] == {}
    assert first["features"]["allocated_cpu"] == allocated
    # A job that reports nothing is assumed to use every core since it started.
    start = first["features"]["jobstart_secs"]
    assert ready["start"] == start  # what the pilot read as its job's start
    assert first["figures"]["assumed"] is True and first["figures"]["draining_waste"] == 0
    assert first["figures"]["kill_waste"] == allocated * (first_now - start)
    steps = []
    for now, report in looks[1:]:
        values = report["values"]
        assert report["problems"] == {}, report
        if not values:  # before the pilot's first report
            assert not steps, f"a report vanished after step {steps[-1]}: {report}"
            continue
        assert report["state"] == "reports", report
        n = int(values["priority_factor"])
        # One writer's whole set: every key of the same step, never half an update.
        assert values == step_values(n, ready), f"a torn set at step {n}: {values}"
        assert report["figures"] == expected_figures(n, ready, now), (n, now, report)
        steps.append(n)
    assert steps == sorted(steps), f"the steps went back: {steps}"
    assert len(set(steps)) >= 5, f"root saw too few steps: {steps}"
    # Root looked while the burst went on, more than once.
    assert len({n for n in steps[:-1] if n > STEPS}) >= 3, f"too few looks in the burst: {steps}"
    last = done["last"]
    assert steps[-1] == last  # the last look came after the last report
    assert last in done["shell_steps"] and STEPS in done["shell_steps"]  # `mjf status set`'s
    assert done["raw"] == step_values(last, ready) and done["problems"] == {}


@pytest.fixture(scope="module", params=VERSIONS, ids=lambda version: f"slurm-{version}")
def slurm(request):
    with mjf_cluster(cgroups=False, version=request.param, extra_config=JOBSTATUS_ON) as cluster:
        yield cluster


def test_a_slurm_pilot_reports_and_root_sees_whole_sets(slurm):
    script = install_pilot(slurm.job_root)
    python = f"{VENV}/bin/python" if slurm.chroot else str(HOOKS_BIN / "python")
    out, name = slurm.job_root / "out", "pilot"
    log = out / f"{name}.log"
    pilot = f"{python} {script} {out} {name} {STEPS} {BURST_SECS}"
    submitted = slurm.as_user("mjfuser1", [
        "sbatch", "--parsable", "-J", name, "-c", str(CPUS), "--mem=200M", "--time=5",
        "-o", str(log), "--wrap", pilot], check=False)
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip().split(";")[0]

    def diagnose() -> str:
        return (log.read_text() if log.exists() else "(no job log)") + slurm.log("slurmd")

    ready, done, looks = watch_pilot(out, name, slurm.mjf, diagnose)
    assert ready["job_id"] == job_id
    assert ready["JOBFEATURES"] == f"{slurm.mjf_base}/jobs/{job_id}/jobfeatures"
    uid = int(slurm.command(["id", "-u", "mjfuser1"]).stdout)
    location = f"{slurm.mjf_base}/jobs/{job_id}/jobstatus"
    assert_root_saw_whole_sets(ready, done, looks, uid, location)
    assert os.stat(location).st_uid == uid  # as root sees it too
    slurm.wait_until_no_jobs()
    assert_no_job_directories_left(slurm)
    gone = slurm.mjf("status", "--json", job_id)
    assert gone.returncode == 1 and "not on this node" in gone.stderr, gone.stdout + gone.stderr


@pytest.fixture
def pool():
    """Only for the one test below: down again before any other module's pool."""
    with condor_pool(GOOD_CONFIG + JOBSTATUS_ON) as condor:
        yield condor


def test_an_htcondor_pilot_reports_and_root_sees_whole_sets(pool):
    script = install_pilot(pool.work)
    out, name = pool.work / "out", "pilot"
    log = pool.work / f"{name}.log"
    submit = pool.work / f"{name}.sub"
    submit.write_text("\n".join([
        "universe = vanilla", f"executable = {VENV}/bin/python", "transfer_executable = false",
        "should_transfer_files = YES", f"log = {log}", f"output = {out}/{name}.out",
        f"error = {out}/{name}.err", f"request_cpus = {CPUS}", "request_memory = 300",
        "request_disk = 102400",
        "arguments = " + condor_arguments([str(script), str(out), name, str(STEPS),
                                           str(BURST_SECS)]),
        "queue"]) + "\n")
    pool.submit(USER, submit)

    def diagnose() -> str:
        return "".join((out / f"{name}.{kind}").read_text() if (out / f"{name}.{kind}").exists()
                       else f"(no {kind})" for kind in ("out", "err")) \
            + pool.log("StarterLog.slot1_1")

    def mjf_status(*args: str):
        return pool.chroot([f"{VENV}/bin/mjf", *args], check=False)

    ready, done, looks = watch_pilot(out, name, mjf_status, diagnose)
    job_dir = os.path.dirname(ready["JOBFEATURES"])  # in the job's scratch
    assert job_dir.startswith("/var/lib/condor/execute/dir_"), job_dir
    assert job_dir.endswith(f"/.mjf/jobs/{ready['job_id']}")
    uid = int(pool.chroot(["id", "-u", USER]).stdout)
    assert_root_saw_whole_sets(ready, done, looks, uid, f"{job_dir}/jobstatus")
    assert (pool.root / job_dir.lstrip("/") / "jobstatus").stat().st_uid == uid
    assert "return value 0" in pool.wait(USER, log)
    deadline = time.monotonic() + 30
    while (pool.root / job_dir.lstrip("/")).exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not (pool.root / job_dir.lstrip("/")).exists()  # gone with the scratch
    gone = mjf_status("status", "--json", ready["job_id"])
    assert gone.returncode == 1 and "not on this node" in gone.stderr, gone.stdout + gone.stderr
