"""`mjf submit-args`, the installed command: a job's requirements (a ClassAd expression or
a JDL) as a batch system's submit options; exit 0, or one line and exit 2."""

import importlib.util
import json
import os
import subprocess

import pytest

from tests.conftest import DEFAULTS_CONFIG, installed_command, require

GLITE = ("other.GlueHostBenchmarkSI00 > 500 ? other.GlueCEPolicyMaxCPUTime > 1000 "
         ": other.GlueCEPolicyMaxCPUTime > 2000")
CORES = "other.GlueHostArchitectureSMPSize >= 4 && other.GlueHostMainMemoryRAMSize >= 8000"


@pytest.fixture(autouse=True)
def classad_library():
    require(importlib.util.find_spec("classad2") is not None,
            "HTCondor's ClassAd library (pip install 'mjf-hooks[match]')")


def submit_args(*args, config=None):
    env = {key: value for key, value in os.environ.items()
           if key not in ("MACHINEFEATURES", "JOBFEATURES")}
    env["MJF_CONFIG"] = str(config) if config else DEFAULTS_CONFIG
    return subprocess.run([installed_command("mjf"), "submit-args", *args],
                          capture_output=True, text=True, env=env, timeout=60)


def one_error_line(result, *named):
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("mjf submit-args: "), result.stderr
    for text in named:
        assert text in lines[0]


def test_words_directives_and_json():
    words = submit_args("--batch", "slurm", CORES)
    assert words.returncode == 0 and words.stderr == ""
    assert words.stdout == "--nodes=1 --ntasks=1 --cpus-per-task=4 --mem=8000M\n"
    directives = submit_args("--batch", "pbs", "--format", "directives", CORES)
    assert directives.stdout == "#PBS -l select=1:ncpus=4:mem=8000mb\n"
    document = json.loads(submit_args("--batch", "gridengine", "--format", "json",
                                      CORES).stdout)
    assert document["needs"] == {"cores": 4, "memory_mib": 8000}
    assert document["options"] == ["-pe", "smp", "4", "-l", "h_vmem=2000M"]
    assert document["directives"] == ["#$ -pe smp 4", "#$ -l h_vmem=2000M"]


def test_the_glite_example_with_its_warning():
    result = submit_args("--batch", "lsf", GLITE)
    assert result.returncode == 0
    assert result.stdout == "-n 1 -R 'span[hosts=1]' -c 2001\n"
    assert result.stderr.count("\n") == 1 and "warning: " in result.stderr


def test_a_dirac_jdl_with_the_sites_hs06_per_cpu(tmp_path):
    jdl = tmp_path / "job.jdl"
    jdl.write_text('[ NumberOfProcessors = 8; MaxRAM = 16000; CPUTime = 3600000; '
                   'Tags = {"cvmfs"}; ]\n')
    conf = tmp_path / "mjf.conf"
    conf.write_text("[submit]\nhs06_per_cpu = 10\nhs06_per_cpu_name = hepspec\n")
    result = submit_args("--batch", "htcondor", "--format", "directives", "--jdl", str(jdl),
                         config=conf)
    assert result.stdout.splitlines() == ["request_cpus = 8", "request_memory = 16000",
                                          "+AllowedJobDuration = 360000",
                                          "requirements = TARGET.cvmfs =?= true"]
    faster = submit_args("--batch", "slurm", "--hs06-per-cpu", "20", "--jdl", str(jdl),
                         config=conf)
    assert "--time=3000" in faster.stdout.split()


@pytest.mark.parametrize("args, named", [
    (["--batch", "pbs", "other.GlueHostOperatingSystemName == \"x\""],
     ["GlueHostOperatingSystemName"]),
    (["--batch", "pbs", "other.MJF_MACHINE_HS06 >= 1 || other.MJF_MACHINE_TOTAL_CPU >= 2"],
     ["for pbs", "||"]),
    (["--batch", "torque", CORES], ["unknown batch system"]),
    (["--batch", "slurm", "--format", "yaml", CORES], ["unknown format"]),
    (["--batch", "slurm"], ["EXPRESSION or --jdl"]),
    (["--batch", "slurm", "--jdl", "/nonexistent/x.jdl", CORES], ["not both"]),
    (["--batch", "slurm", "--jdl", "/nonexistent/x.jdl"], ["/nonexistent/x.jdl"]),
    (["--batch", "slurm", "--hs06-per-cpu", "fast", "x > 1"], ["--hs06-per-cpu"]),
    (["--batch", "slurm", "other.X > \x1b[2J 1"], ["does not parse"]),
    (["--batch", "htcondor", "other.GlueCEPolicyMaxWallClockTime >= 1000000000000000000"],
     ["AllowedJobDuration (seconds) 60000000000000000000", "at most 9223372036854775807"]),
    (["--batch", "lsf", 'member("el9-x86", other.GlueHostApplicationSoftwareRunTimeEnvironment)'],
     ["for lsf", "el9-x86", "letters, digits and _"]),
])
def test_errors_are_one_line_and_exit_2(args, named):
    one_error_line(submit_args(*args), *named)


def test_a_dirac_tag_lsf_keeps_for_itself_is_an_error_for_lsf_only(tmp_path):
    jdl = tmp_path / "job.jdl"
    jdl.write_text('[ Tags = {"cvmfs", "mem"}; ]')
    one_error_line(submit_args("--batch", "lsf", "--jdl", str(jdl)), "`Tags mem`",
                   "mem is one of LSF's own resources")
    assert submit_args("--batch", "slurm", "--jdl", str(jdl)).stdout.split()[-1] == \
        "'--constraint=cvmfs&mem'"


def test_a_dirac_cputime_without_an_hs06_per_cpu_is_an_error(tmp_path):
    jdl = tmp_path / "job.jdl"
    jdl.write_text("[ CPUTime = 1000; ]")
    one_error_line(submit_args("--batch", "slurm", "--jdl", str(jdl)), "hs06_per_cpu")


def test_a_broken_config_is_one_line(tmp_path):
    conf = tmp_path / "mjf.conf"
    conf.write_text("[submit]\nhs06_name = a;b\n")
    one_error_line(submit_args("--batch", "slurm", CORES, config=conf), "hs06_name")


def test_listed_in_mjf_help():
    result = subprocess.run([installed_command("mjf"), "--help"], capture_output=True,
                            text=True, timeout=60)
    assert "submit-args" in result.stdout


def test_lsfs_memory_limit_follows_lsf_conf_and_the_config(tmp_path, write_config):
    requirement = "other.GlueHostMainMemoryRAMSize >= 200"
    envdir = tmp_path / "lsf"
    envdir.mkdir()
    (envdir / "lsf.conf").write_text("LSF_UNIT_FOR_LIMITS=KB\n")
    env = {**os.environ, "MJF_CONFIG": DEFAULTS_CONFIG, "LSF_ENVDIR": str(envdir)}
    run = [installed_command("mjf"), "submit-args", "--batch", "lsf", requirement]
    result = subprocess.run(run, capture_output=True, text=True, env=env, timeout=60)
    assert result.stdout.split()[-2:] == ["-M", "204800"], result.stderr
    conf, _ = write_config("[lsf]\nmemory_unit = MB\n")
    result = subprocess.run(run, capture_output=True, text=True, timeout=60,
                            env={**env, "MJF_CONFIG": str(conf)})
    assert result.stdout.split()[-2:] == ["-M", "200"], result.stderr
