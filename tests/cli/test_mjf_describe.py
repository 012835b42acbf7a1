"""`mjf describe`: formats, locations, the [describe] config, and one-line errors."""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import DEFAULTS_CONFIG, FIXTURES, installed_command, require

DESCRIBED = FIXTURES / "describe"
LSF_JOB = DESCRIBED / "lsf-10.1" / "jobs" / "1234"


def describe(*args, config=None, **variables):
    env = {name: value for name, value in os.environ.items()
           if name not in ("MACHINEFEATURES", "JOBFEATURES", "MJF_CONFIG")}
    env.update(variables)
    env["MJF_CONFIG"] = str(config) if config else DEFAULTS_CONFIG
    return subprocess.run([installed_command("mjf"), "describe", *args], capture_output=True,
                          text=True, env=env, timeout=60)


def _classad_lines(text):
    lines = text.splitlines()
    assert (lines[0], lines[-1]) == ("[", "]")
    return dict(line.strip().rstrip(";").split(" = ", 1) for line in lines[1:-1])


def test_a_job_directory_as_classad_finds_its_machine_features():
    result = describe(str(LSF_JOB))
    assert result.returncode == 0 and result.stderr == ""
    ad = _classad_lines(result.stdout)
    assert ad["MJF_MACHINE_TOTAL_CPU"] == "8" and ad["MJF_MACHINE_HS06"] == "85.0"
    assert ad["MJF_JOB_ID"] == '"1234"' and ad["MJF_JOB_HS06_JOB"] == "42.5"
    assert (ad["GlueHostArchitectureSMPSize"], ad["GlueHostMainMemoryRAMSize"],
            ad["GlueHostBenchmarkSI00"], ad["GlueCEPolicyMaxWallClockTime"],
            ad["GlueCEPolicyMaxCPUTime"]) == ("4", "2048", "2656", "30", "120")


def test_the_classad_parses_with_htcondors_library():
    try:
        import classad2 as classad
    except ImportError:
        classad = None
    require(classad is not None, "the htcondor wheel (classad2) is not installed")
    result = describe(str(LSF_JOB))
    ad = classad.parseOne(result.stdout, classad.ParserType.New)
    assert ad.eval("GlueHostMainMemoryVirtualSize") == 3072
    assert ad.eval("MJF_JOB_ID") == "1234"


def test_dirac_with_the_describe_section(tmp_path):
    conf = tmp_path / "mjf.conf"
    conf.write_text("[describe]\nsite = LCG.Example.org\ngridce = ce.example.org\n"
                    "tags = cvmfs, apptainer\nplatform = x86_64_glibc-2.36\n")
    slurm = DESCRIBED / "slurm-22.05"
    result = describe("--format", "dirac", str(slurm / "machinefeatures"),
                      str(slurm / "jobs" / "2" / "jobfeatures"), config=conf)
    assert result.returncode == 0, result.stderr
    dirac = json.loads(result.stdout)
    # CPUTime: the seconds left from now x 20 HS06 per core (exact values: the unit tests).
    assert dirac.pop("CPUTime") % 20 == 0
    assert dirac == {"NumberOfProcessors": 2, "MaxRAM": 200, "WholeNode": True,
                     "Site": "LCG.Example.org", "GridCE": "ce.example.org",
                     "Tag": ["cvmfs", "apptainer"], "Platform": "x86_64_glibc-2.36"}


def test_glue2_and_json_from_the_variables():
    base = DESCRIBED / "lsf-10.1"
    variables = {"MACHINEFEATURES": str(base / "machinefeatures"),
                 "JOBFEATURES": str(LSF_JOB / "jobfeatures")}
    glue2 = json.loads(describe("--format", "glue2", **variables).stdout)
    assert glue2["ExecutionEnvironment"]["LogicalCPUs"] == 4
    assert glue2["ExecutionEnvironment"]["OSFamily"] == "linux"
    assert glue2["Benchmark"] == [{"Type": "hep-spec06", "Value": 10.62}]
    assert glue2["ComputingShare"] == {"MaxWallTime": 1800, "MaxCPUTime": 7200,
                                       "MaxMainMemory": 2048, "MaxVirtualMemory": 3072,
                                       "MaxSlotsPerJob": 4}
    everything = json.loads(describe("--format", "json", **variables).stdout)
    assert set(everything) == {"machinefeatures", "jobfeatures", "benchmark", "classad",
                               "dirac", "glue2"}
    assert everything["benchmark"] == "HEPSPEC"  # no config: the default
    assert everything["jobfeatures"]["hs06_job"] == 42.5
    assert everything["dirac"]["NumberOfProcessors"] == 4


def test_the_configured_benchmark_in_glue2_and_json(tmp_path):
    conf = tmp_path / "mjf.conf"
    conf.write_text("[machinefeatures]\nbenchmark = hepscore23\n")
    variables = {"MACHINEFEATURES": str(DESCRIBED / "lsf-10.1" / "machinefeatures"),
                 "JOBFEATURES": str(LSF_JOB / "jobfeatures")}
    glue2 = json.loads(describe("--format", "glue2", config=conf, **variables).stdout)
    assert glue2["Benchmark"] == [{"Type": "HEPscore23", "Value": 10.62}]
    everything = json.loads(describe("--format", "json", config=conf, **variables).stdout)
    assert everything["benchmark"] == "HEPscore23"
    assert everything["glue2"]["Benchmark"] == glue2["Benchmark"]
    conf.write_text("[machinefeatures]\nbenchmark = HS23\n")
    result = describe("--format", "glue2", config=conf, **variables)
    assert (result.returncode, result.stdout) == (2, "")
    assert "line 2: [machinefeatures] benchmark = 'HS23': must be HEPSPEC or HEPscore23" \
        in result.stderr


def test_a_base_dir_is_the_node_alone():
    ad = _classad_lines(describe(str(DESCRIBED / "htcondor-23.9")).stdout)
    assert not any(name.startswith("MJF_JOB_") for name in ad)
    assert ad["GlueHostArchitectureSMPSize"] == "4" and ad["GlueHostBenchmarkSI00"] == "2593"


def test_without_variables_the_configured_node(write_config):
    conf, base = write_config()
    (base / "machinefeatures").mkdir(parents=True)
    (base / "machinefeatures" / "total_cpu").write_text("96")
    ad = _classad_lines(describe(config=conf).stdout)
    assert ad["MJF_MACHINE_TOTAL_CPU"] == "96"


def test_without_variables_or_machine_features_the_probed_node(write_config):
    conf, _ = write_config("[machinefeatures]\nhs06_per_cpu = 10\n")
    result = describe("--format", "json", config=conf)
    assert result.returncode == 0, result.stderr
    machine = json.loads(result.stdout)["machinefeatures"]
    assert machine == {"total_cpu": os.cpu_count(), "hs06": 10.0 * os.cpu_count()}


def test_a_malformed_value_is_a_warning_and_left_out(tmp_path):
    job = tmp_path / "jobfeatures"
    job.mkdir()
    (job / "allocated_cpu").write_text("2\n")
    (job / "job_id").write_text("7")
    result = describe(str(job))
    assert result.returncode == 0
    assert result.stderr.startswith("mjf describe: warning: allocated_cpu = '2\\n'")
    assert "MJF_JOB_ALLOCATED_CPU" not in result.stdout and 'MJF_JOB_ID = "7"' in result.stdout


@pytest.mark.parametrize(("args", "message"), [
    (["--format", "yaml"], "mjf describe: unknown format 'yaml': give one of classad, dirac, "
                           "glue2, json"),
    (["/nonexistent/where"], "mjf describe: cannot tell whether /nonexistent/where holds"),
    (["/nonexistent/jobfeatures"], "mjf describe: /nonexistent/jobfeatures: No such file"),
    ([str(LSF_JOB), str(DESCRIBED / "gridengine-8.1.9" / "jobs" / "13")],
     "mjf describe: give one job"),
])
def test_errors_are_one_line_and_exit_2(args, message):
    result = describe(*args)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith(message) and result.stderr.count("\n") == 1, result.stderr


def test_a_broken_config_is_one_line_and_exit_2(tmp_path):
    conf = tmp_path / "mjf.conf"
    conf.write_text("[describe]\ntags = a b\n")
    result = describe(str(LSF_JOB), config=conf)
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "[describe] tags = 'a b'" in result.stderr


# --- the fast path: served without click, exactly as click serves it ----------------------

# `mjf describe ARGS` as click serves it (the fast path never runs there).
_CLICK_PATH = ("import sys; from mjf_hooks.cli.interactive import cli; "
               "cli.main(args=['describe', *sys.argv[1:]], prog_name='mjf')")
_SLURM = DESCRIBED / "slurm-22.05"
_LOCATIONS = {  # every kind of location; every job's end is past: no output hangs on the clock
    "a job directory": [str(LSF_JOB)],
    "machine and job features": [str(_SLURM / "machinefeatures"),
                                 str(_SLURM / "jobs" / "2" / "jobfeatures/")],
    "a base_dir": [str(DESCRIBED / "htcondor-23.9")],
    "machine features": [str(DESCRIBED / "gridengine-8.1.9" / "machinefeatures")],
    "the variables": [],
}
_FORMATS = {"the default": [], **{name: ["--format", name]
                                  for name in ("classad", "dirac", "glue2", "json")}}


def _both(args, config, **variables):
    """(status, stdout, stderr) of `mjf describe ARGS`, and of the same served by click."""
    served = describe(*args, config=config, **variables)
    env = {name: value for name, value in os.environ.items()
           if name not in ("MACHINEFEATURES", "JOBFEATURES", "MJF_CONFIG")}
    env.update(variables, MJF_CONFIG=str(config) if config else DEFAULTS_CONFIG)
    clicked = subprocess.run([sys.executable, "-c", _CLICK_PATH, *args], capture_output=True,
                             env=env, timeout=60)
    return ((served.returncode, served.stdout.encode(), served.stderr.encode()),
            (clicked.returncode, clicked.stdout, clicked.stderr))


@pytest.mark.parametrize("where", _LOCATIONS)
@pytest.mark.parametrize("format_", _FORMATS)
def test_every_format_of_every_location_is_what_click_writes(where, format_, tmp_path):
    conf = tmp_path / "mjf.conf"
    conf.write_text("[describe]\nsite = LCG.Example.org\ntags = cvmfs\n")
    variables = {"MACHINEFEATURES": str(DESCRIBED / "lsf-10.1" / "machinefeatures"),
                 "JOBFEATURES": str(LSF_JOB / "jobfeatures")} if not _LOCATIONS[where] else {}
    served, clicked = _both([*_FORMATS[format_], *_LOCATIONS[where]], conf, **variables)
    assert served == clicked and served[0] == 0 and served[1]


@pytest.mark.parametrize("args", [
    ["--format=glue2", str(LSF_JOB)],
    [str(LSF_JOB), "--format", "dirac"],  # an option after the location
    ["--format", "dirac", "--format", "json", str(LSF_JOB)],  # the last one counts
    ["--format", "classad", "--", str(LSF_JOB)],
])
def test_every_spelling_of_the_options_is_what_click_writes(args):
    served, clicked = _both(args, None)
    assert served == clicked and served[0] == 0


@pytest.mark.parametrize("configured", [True, False])
@pytest.mark.parametrize("format_", _FORMATS)
def test_the_machine_without_a_location_is_what_click_writes(format_, configured,
                                                             write_config):
    # Its base_dir's machine features; without them, the node as probed.
    conf, base = write_config("[machinefeatures]\nhs06_per_cpu = 10\n")
    if configured:
        (base / "machinefeatures").mkdir(parents=True)
        (base / "machinefeatures" / "total_cpu").write_text("96")
    served, clicked = _both(_FORMATS[format_], conf)
    assert served == clicked and served[0] == 0


@pytest.mark.parametrize(("name", "text"), [
    ("allocated_cpu", "2\n"),  # malformed: a warning, served
    ("job_id", "j\u00f6b"),  # not ASCII: click writes it, by its own encoding rules
    ("job_id", "\x1b[31mred"),  # an escape sequence: click strips what it writes raw
])
@pytest.mark.parametrize("format_", ["classad", "json"])
def test_values_of_any_text_are_what_click_writes(name, text, format_, tmp_path):
    job = tmp_path / "jobfeatures"
    job.mkdir()
    (job / "wall_limit_secs").write_text("600")
    (job / name).write_text(text, encoding="utf-8")
    served, clicked = _both(["--format", format_, str(job)], None)
    assert served == clicked and served[0] == 0


@pytest.mark.parametrize("args", [
    ["--help"], ["-h"], ["--format"], ["--format", "yaml"], ["--format", "--help"],
    ["--bogus", str(LSF_JOB)], ["/nonexistent/where"], ["/nonexistent/jobfeatures"],
    [str(LSF_JOB), str(DESCRIBED / "gridengine-8.1.9" / "jobs" / "13")],
])
def test_what_the_fast_path_does_not_serve_click_does(args):
    served, clicked = _both(args, None)
    assert served == clicked and served[0] == (0 if args in (["--help"], ["-h"]) else 2)


def test_a_broken_config_is_what_click_writes(tmp_path):
    conf = tmp_path / "mjf.conf"
    conf.write_text("[describe]\ntags = a b\n")
    served, clicked = _both([str(LSF_JOB)], conf)
    assert served == clicked and served[0] == 2


@pytest.mark.parametrize("format_", ["classad", "dirac", "glue2", "json"])
def test_the_documents_are_what_json_dumps_wrote(format_):
    # What `mjf describe` printed before it wrote JSON without the json module.
    from mjf_hooks import describe as describing
    from mjf_hooks.cli import mjf_describe

    options = describing.Options(site="S\u00e9", gridce="ce", tags=("a", "b\n"),
                                 platform="x")
    slot, _ = describing.slot(
        {"total_cpu": "8", "hs06": "85", "shutdowntime": "1795319600"},
        {"allocated_cpu": "4", "hs06_job": "42.5", "job_id": "1234", "wall_limit_secs": "1800",
         "jobstart_secs": "1795319470", "max_rss_bytes": "2147483648",
         "max_swap_bytes": "1073741824"},
        (FIXTURES / "host" / "cpuinfo-amd-epyc-2.txt").read_text(),
        (DESCRIBED / "os-release").read_text(), 1795319500.0)
    arch = os.uname().machine
    before = {"classad": lambda: describing.classad_text(describing.classad(slot)),
              "dirac": lambda: json.dumps(describing.dirac(slot, options), indent=2) + "\n",
              "glue2": lambda: json.dumps(describing.glue2(slot, arch), indent=2) + "\n",
              "json": lambda: json.dumps(describing.everything(slot, options, arch),
                                         indent=2) + "\n"}[format_]()
    assert mjf_describe.text(format_, options, slot) == before


@pytest.mark.parametrize("joined", [False, True], ids=["--config FILE", "--config=FILE"])
def test_the_fast_path_serves_a_config_given_by_option(joined, tmp_path, capsys, monkeypatch):
    from mjf_hooks.cli.mjf_describe import fast

    conf = tmp_path / "mjf.conf"
    conf.write_text("[describe]\nsite = LCG.Example.org\n")
    given = [f"--config={conf}"] if joined else ["--config", str(conf)]
    args = [*given, "--format", "json", str(LSF_JOB)]
    monkeypatch.setenv("MJF_CONFIG", DEFAULTS_CONFIG)
    assert fast(args) == 0 and "LCG.Example.org" in capsys.readouterr().out
    served, clicked = _both(args, None)
    assert served == clicked and b"LCG.Example.org" in served[1]


def test_the_fast_path_reads_the_options_the_click_command_declares():
    """One definition of the command line: every option of the click command but --help
    is one the fast path reads (mjf_describe.VALUED), with the same default."""
    from mjf_hooks.cli import mjf_describe
    from mjf_hooks.cli.mjf_match import describe_command

    declared = {name for param in describe_command.params for name in param.opts
                if name.startswith("--")}
    assert declared == set(mjf_describe.VALUED)
    (fmt,) = (param for param in describe_command.params if "--format" in param.opts)
    assert fmt.default == mjf_describe.FORMAT["default"]
