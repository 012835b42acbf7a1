"""`mjf match` and `mjf describe` inside real batch jobs.

Runs as root (CI). One job per batch system, of an unprivileged user with 2 cores: it
runs the installed `mjf` (with HTCondor's ClassAd library, the match extra) on its own
slot ($MACHINEFEATURES and $JOBFEATURES, as the hooks made them) and records every
command's exit status and output in one JSON file, which the test then checks:

- a requirement of 500 `&&` terms the slot meets exits 0 with one warning line;
- a requirement the slot meets (2 cores, enough memory) exits 0; one it does not (more
  than 2 cores) exits 1, and --explain names the clause with the slot's value;
- a DIRAC JDL asking for 2 processors exits 0; one asking for 4 exits 1, --explain
  naming the tag the slot lacks (both ask for a CPUTime the 10-minute slot has);
- `mjf describe --format json` gives NumberOfProcessors 2 in its DIRAC part.

On Slurm 22.05 (the host's hooks venv) and HTCondor 23.9 (the chroot's, Python 3.13).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.htcondor_pool import GOOD_CONFIG, USER, condor_arguments, condor_pool
from tests.integration.site import HOOKS_BIN, seen_in
from tests.integration.slurm_cluster import assert_no_job_directories_left, mjf_cluster
from tests.integration.trixie_root import VENV

pytestmark = pytest.mark.integration

CPUS = 2
MEETS = f"TARGET.MJF_JOB_ALLOCATED_CPU >= {CPUS} && TARGET.GlueHostMainMemoryRAMSize >= 100"
FAILS = f"TARGET.MJF_JOB_ALLOCATED_CPU > {CPUS}"
# Deeper than HTCondor's ClassAd library evaluates whole: judged term by term.
DEEP = " && ".join([f"TARGET.MJF_JOB_ALLOCATED_CPU >= {CPUS}"] * 500)
# With a CPUTime (HS06 s) the slot has left: without one DIRAC assumes 86400, more than
# a 10-minute slot holds (and a slot with no wall limit has no CPUTime for DIRAC at all).
JDLS = {"two.jdl": f"[ NumberOfProcessors = {CPUS}; CPUTime = 1000; ]\n",
        "four.jdl": "[ NumberOfProcessors = 4; CPUTime = 1000; ]\n"}
WALL_SECS = 600

# Runs inside the job as its user: argv[1] the `mjf` to run, argv[2] the JSON to write.
IN_JOB = r'''
import json, os, subprocess, sys
mjf, out = sys.argv[1], sys.argv[2]
here = os.path.dirname(os.path.abspath(__file__))
cases = {
    "meets": ["match", "--explain", MEETS],
    "fails": ["match", "--explain", FAILS],
    "deep": ["match", "--explain", DEEP],
    "jdl_two": ["match", "--explain", "--jdl", os.path.join(here, "two.jdl")],
    "jdl_four": ["match", "--explain", "--jdl", os.path.join(here, "four.jdl")],
    "describe": ["describe", "--format", "json"],
}
seen = {"env": {name: os.environ.get(name) for name in ("MACHINEFEATURES", "JOBFEATURES")}}
for name, args in cases.items():
    result = subprocess.run([mjf, *args], capture_output=True, text=True, timeout=60)
    seen[name] = {"rc": result.returncode, "out": result.stdout, "err": result.stderr}
with open(out + ".part", "w") as handle:
    json.dump(seen, handle)
os.rename(out + ".part", out)
'''.replace("MEETS", repr(MEETS)).replace("FAILS", repr(FAILS)).replace("DEEP", repr(DEEP))


def install_job(root: Path) -> Path:
    """The job's script and JDL files in ``root``, readable by the job's user."""
    script = root / "match_in_job.py"
    script.write_text(IN_JOB)
    script.chmod(0o644)
    for name, text in JDLS.items():
        (root / name).write_text(text)
        (root / name).chmod(0o644)
    return script


def assert_matched_in_job(seen: dict, diagnose) -> None:
    """What the job's `mjf match` and `mjf describe` said about its own slot."""
    context = json.dumps(seen, indent=1) + diagnose()
    assert seen["env"]["MACHINEFEATURES"] and seen["env"]["JOBFEATURES"], context
    meets, fails = seen["meets"], seen["fails"]
    assert meets["rc"] == 0 and meets["out"] == "match\n", context
    assert fails["rc"] == 1, context
    lines = fails["out"].splitlines()
    assert lines[0] == "no match", context
    # The clause, with the slot's side: `TARGET.MJF_JOB_ALLOCATED_CPU > 2` is false: ... = 2 > 2
    assert any(f"`{FAILS}` is false" in line and f"= {CPUS} > {CPUS}" in line
               for line in lines[1:]), context
    deep = seen["deep"]
    assert deep["rc"] == 0 and deep["out"] == "match\n", context
    assert len(deep["err"].splitlines()) == 1 and "term by term" in deep["err"], context
    two, four = seen["jdl_two"], seen["jdl_four"]
    assert two["rc"] == 0 and two["out"].splitlines() == [
        f"{two['out'].split(':')[0]}: match"], context
    assert two["out"].split(":")[0].endswith("/two.jdl"), context
    assert four["rc"] == 1, context
    lines = four["out"].splitlines()
    assert lines[0].endswith("/four.jdl: no match"), context
    assert len(lines) == 2 and "the job's tags 4Processors are not among" in lines[1], context
    described = seen["describe"]
    assert described["rc"] == 0, context
    document = json.loads(described["out"])
    assert document["dirac"]["NumberOfProcessors"] == CPUS, context
    assert document["jobfeatures"]["wall_limit_secs"] == WALL_SECS, context
    assert document["dirac"]["CPUTime"] > 1000, context
    assert int(document["jobfeatures"]["allocated_cpu"]) == CPUS, context


def test_match_inside_a_slurm_job():
    with mjf_cluster(cgroups=False) as slurm:
        script = install_job(slurm.job_root)
        out, name = slurm.job_root / "out", "match"
        log = out / f"{name}.log"
        submitted = slurm.as_user("mjfuser1", [
            "sbatch", "--parsable", "-J", name, "-c", str(CPUS), "--mem=200M",
            f"--time={WALL_SECS // 60}",
            "-o", str(log), "--wrap",
            f"{HOOKS_BIN / 'python'} {script} {HOOKS_BIN / 'mjf'} {out / name}.json"],
            check=False)
        assert submitted.returncode == 0, submitted.stderr + slurm.log("slurmd")

        def diagnose() -> str:
            return (log.read_text() if log.exists() else "(no job log)") + slurm.log("slurmd")

        try:
            seen = seen_in(out / f"{name}.json")
        except FileNotFoundError:
            pytest.fail(f"the job wrote nothing\n{diagnose()}")
        assert_matched_in_job(seen, diagnose)
        slurm.wait_until_no_jobs()
        assert_no_job_directories_left(slurm)


def test_match_inside_an_htcondor_job():
    with condor_pool(GOOD_CONFIG) as pool:
        script = install_job(pool.work)
        out, name = pool.work / "out", "match"
        log = pool.work / f"{name}.log"
        submit = pool.work / f"{name}.sub"
        submit.write_text("\n".join([
            "universe = vanilla", f"executable = {VENV}/bin/python",
            "transfer_executable = false", "should_transfer_files = YES", f"log = {log}",
            f"output = {out}/{name}.out", f"error = {out}/{name}.err",
            f"request_cpus = {CPUS}", "request_memory = 300", "request_disk = 102400",
            # The wall limit the hooks read (mjf.conf's default attribute).
            f"+AllowedJobDuration = {WALL_SECS}",
            "arguments = " + condor_arguments([str(script), f"{VENV}/bin/mjf",
                                               f"{out / name}.json"]),
            "queue"]) + "\n")
        pool.submit(USER, submit)
        ended = pool.wait(USER, log)

        def diagnose() -> str:
            return "".join((out / f"{name}.{kind}").read_text()
                           if (out / f"{name}.{kind}").exists() else f"(no {kind})"
                           for kind in ("out", "err")) + ended

        assert "return value 0" in ended, diagnose()
        assert (out / f"{name}.json").exists(), f"the job wrote nothing\n{diagnose()}"
        assert_matched_in_job(seen_in(out / f"{name}.json"), diagnose)
