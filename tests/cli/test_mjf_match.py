"""`mjf match`: a requirement (ClassAd, gLite or HTCondor style) or JDL files (gLite or
DIRAC) against a slot described from MJF; exit 0 match, 1 no match, 2 unreadable."""

import importlib.util
import os
import subprocess
import time

import pytest

from tests.conftest import DEFAULTS_CONFIG, installed_command, require

# The gLite text's example: a fast node may offer less CPU time than a slow one.
GLITE = ("other.GlueHostBenchmarkSI00 > 500 ? other.GlueCEPolicyMaxCPUTime > 1000 "
         ": other.GlueCEPolicyMaxCPUTime > 2000")


@pytest.fixture(autouse=True)
def classad_library():
    require(importlib.util.find_spec("classad2") is not None,
            "HTCondor's ClassAd library (pip install 'mjf-hooks[match]')")


def slot(root, hs06, cpu_limit_secs):
    """A job of 4 of a node's 4 CPUs: per-core HS06 hs06 / 4, so SI00 = hs06 / 4 x 250
    (8 -> 500, 8.04 -> 502); GlueCEPolicyMaxCPUTime = cpu_limit_secs // 60 minutes."""
    machine, job = root / "machinefeatures", root / "jobs" / "7" / "jobfeatures"
    machine.mkdir(parents=True)
    job.mkdir(parents=True)
    for directory, values in ((machine, {"total_cpu": "4", "hs06": hs06}),
                              (job, {"job_id": "7", "allocated_cpu": "4",
                                     "jobstart_secs": str(int(time.time())),
                                     "wall_limit_secs": "7200", "hs06_job": hs06,
                                     "cpu_limit_secs": str(cpu_limit_secs)})):
        for name, value in values.items():
            (directory / name).write_text(value)
    return job.parent


def match(*args):
    env = {name: value for name, value in os.environ.items()
           if name not in ("MACHINEFEATURES", "JOBFEATURES")}
    env["MJF_CONFIG"] = DEFAULTS_CONFIG
    return subprocess.run([installed_command("mjf"), "match", *args], capture_output=True,
                          text=True, env=env, timeout=60)


@pytest.mark.parametrize(("hs06", "cpu_limit_secs", "verdict"), [
    ("8", 100000, 1),      # SI00 500, not > 500: needs > 2000 min, has 1666
    ("8", 130000, 0),      # SI00 500: has 2166 min > 2000
    ("8.04", 100000, 0),   # SI00 502 > 500: needs > 1000 min, has 1666
    ("8.04", 60000, 1),    # SI00 502: has 1000 min, not > 1000
])
def test_the_glite_example_on_both_sides_of_its_threshold(tmp_path, hs06, cpu_limit_secs,
                                                         verdict):
    job = slot(tmp_path, hs06, cpu_limit_secs)
    result = match("--location", str(job), GLITE)
    assert result.returncode == verdict, result.stderr
    assert result.stdout == ("match\n" if verdict == 0 else "no match\n")
    assert result.stderr == ""


def test_explain_names_the_clause_with_both_values(tmp_path):
    job = slot(tmp_path, "8", 100000)
    result = match("--explain", "--location", str(job), GLITE)
    assert result.returncode == 1
    assert "other.GlueHostBenchmarkSI00 = 500 > 500" in result.stdout
    assert "other.GlueCEPolicyMaxCPUTime = 1666 > 2000" in result.stdout
    htcondor = match("--explain", "--location", str(job), "TARGET.MJF_JOB_ALLOCATED_CPU >= 8")
    assert htcondor.returncode == 1 and "TARGET.MJF_JOB_ALLOCATED_CPU = 4" in htcondor.stdout


def test_jdl_files_of_both_kinds_in_a_directory(tmp_path):
    job = slot(tmp_path / "slot", "8.04", 100000)
    jdls = tmp_path / "jdl"
    jdls.mkdir()
    (jdls / "a-glite.jdl").write_text(f"[ Executable = \"run\"; Requirements = {GLITE}; ]\n")
    (jdls / "b-dirac.jdl").write_text("[ NumberOfProcessors = 4; CPUTime = 1000; ]\n")
    (jdls / "c-dirac-too-many.jdl").write_text("[ NumberOfProcessors = 8; ]\n")
    result = match("--explain", "--location", str(job), "--jdl", str(jdls))
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"{jdls}/a-glite.jdl: match"
    assert lines[1] == f"{jdls}/b-dirac.jdl: match"
    assert lines[2] == f"{jdls}/c-dirac-too-many.jdl: no match"
    assert "8Processors" in lines[3]


@pytest.mark.parametrize(("args", "message"), [
    (["x >"], "does not parse"),
    (["--jdl", "JDL"], "NumberOfProcessors = 'four' is not a whole number"),
    ([], "give a requirement EXPRESSION or --jdl PATH"),
    (["--jdl", "/nonexistent.jdl"], "/nonexistent.jdl: No such file or directory"),
    (["--location", "/nonexistent", "true"], "/nonexistent"),
])
def test_what_cannot_be_read_is_one_line_and_exit_2(tmp_path, args, message):
    job = slot(tmp_path / "slot", "8", 100000)
    bad = tmp_path / "bad.jdl"
    bad.write_text('[ NumberOfProcessors = "four"; ]')
    args = [str(bad) if arg == "JDL" else arg for arg in args]
    if "--location" not in args:
        args = ["--location", str(job), *args]
    result = match(*args)
    assert result.returncode == 2
    assert message in result.stderr and len(result.stderr.splitlines()) == 1
    assert "Traceback" not in result.stderr


MEMORY_TERM = "other.MJF_JOB_ALLOCATED_CPU >= 4"


def test_a_requirement_of_500_terms_is_a_match_with_one_warning(tmp_path):
    job = slot(tmp_path, "8", 100000)
    result = match("--location", str(job), " && ".join([MEMORY_TERM] * 500))
    assert (result.returncode, result.stdout) == (0, "match\n"), result.stderr
    assert len(result.stderr.splitlines()) == 1 and "warning" in result.stderr
    assert "term by term" in result.stderr and "Traceback" not in result.stderr
    result = match("--location", str(job), " + ".join(["1"] * 600) + " > 0")
    assert (result.returncode, result.stdout) == (2, "")
    assert len(result.stderr.splitlines()) == 1 and "nested too deeply" in result.stderr


def test_every_file_of_a_directory_is_judged_whatever_the_others_are(tmp_path):
    """One verdict per file, the unreadable ones one line each on stderr naming the file,
    and the exit status the worst; a FIFO neither hangs the run nor is waited on."""
    job = slot(tmp_path / "slot", "8.04", 100000)
    jdls = tmp_path / "jdl"
    jdls.mkdir()
    (jdls / "a-binary.jdl").write_bytes(b"\x7fELF\x00\x01\xff\xfe" * 1000)
    (jdls / "b-deep.jdl").write_text(
        f"[ Requirements = {' && '.join([MEMORY_TERM] * 500)}; ]\n")
    (jdls / "c-huge.jdl").write_text("[ Executable = \"x\"; ]" + " " * (2 << 20))
    (jdls / "d-nested.jdl").write_text("[ " + "a = [ " * 3000 + "b = 1" + " ]" * 3000 + " ]")
    (jdls / "e-good.jdl").write_text("[ NumberOfProcessors = 4; CPUTime = 1000; ]\n")
    (jdls / "f-deep-value.jdl").write_text(f"[ CPUTime = {' + '.join(['1'] * 600)}; ]\n")
    (jdls / "g-no-match.jdl").write_text("[ NumberOfProcessors = 8; ]\n")
    os.mkfifo(jdls / "h-fifo.jdl")
    # 300,000 operators: the library's parser dies of it (SIGSEGV), taking the run along.
    (jdls / "j-crasher.jdl").write_text(f"[ Requirements = {'1&&' * 300_000}1; ]")
    (jdls / "k-printer.jdl").write_text(f"[ Requirements = {'1&&' * 60_000}1; ]")
    if os.geteuid() != 0:  # root reads it all the same
        (jdls / "i-unreadable.jdl").write_text("[ ]")
        (jdls / "i-unreadable.jdl").chmod(0)
    result = match("--location", str(job), "--jdl", str(jdls),
                   "--jdl", str(jdls / "h-fifo.jdl"), "--jdl", str(tmp_path / "gone.jdl"))
    assert result.returncode == 2
    assert result.stdout.splitlines() == [f"{jdls}/b-deep.jdl: match",
                                          f"{jdls}/e-good.jdl: match",
                                          f"{jdls}/g-no-match.jdl: no match"]
    errors = [line for line in result.stderr.splitlines() if "warning" not in line]
    assert "Traceback" not in result.stderr
    for name, why in [("a-binary.jdl", "not UTF-8 text"), ("c-huge.jdl", "larger than"),
                      ("d-nested.jdl", "does not parse"),
                      ("f-deep-value.jdl", "CPUTime cannot be evaluated"),
                      ("h-fifo.jdl", "not a regular file"), ("gone.jdl", "No such file"),
                      ("j-crasher.jdl", "has 300000 operators"),
                      ("k-printer.jdl", "has 60000 operators")] + (
                          [] if os.geteuid() == 0 else [("i-unreadable.jdl", "denied")]):
        hits = [line for line in errors if f"/{name}: " in line]
        assert len(hits) == 1 and why in hits[0], (name, errors)
    assert [line for line in result.stderr.splitlines() if "warning" in line] == [
        f"mjf match: {jdls}/b-deep.jdl: warning: the requirement is nested too deeply for "
        "HTCondor's ClassAd library to evaluate whole, so it was judged term by term; a pool "
        "whose matchmaking uses that library may never match it"]


def test_a_directory_that_cannot_be_listed_is_one_line_and_the_rest_is_judged(tmp_path):
    job = slot(tmp_path / "slot", "8.04", 100000)
    good = tmp_path / "good.jdl"
    good.write_text("[ CPUTime = 1000; ]")
    result = match("--location", str(job), "--jdl", str(tmp_path / "no-such-dir") + "/",
                   "--jdl", str(good))
    assert result.returncode == 2
    assert result.stdout == f"{good}: match\n"
    assert len(result.stderr.splitlines()) == 1 and "no-such-dir" in result.stderr
