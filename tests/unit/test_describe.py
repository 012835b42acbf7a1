"""`mjf_hooks.describe`: golden descriptions of recorded job slots of every backend."""

import json
import os

import pytest

from mjf_hooks import config, describe
from mjf_hooks.reader import Features
from tests.conftest import FIXTURES, require

DESCRIBED = FIXTURES / "describe"
CPUINFO = (FIXTURES / "host" / "cpuinfo-amd-epyc-2.txt").read_text()
OS_RELEASE = (DESCRIBED / "os-release").read_text()
OPTIONS = describe.Options(site="LCG.Example.org", gridce="ce.example.org",
                           tags=("cvmfs", "apptainer"), platform="x86_64_glibc-2.36")
# backend -> (job id, now): now 100 s after each job's start.
SLOTS = {"slurm-22.05": ("2", 1795842795), "htcondor-23.9": ("vm#1.0#1795319385", 1795319570),
         "lsf-10.1": ("1234", 1795319570), "gridengine-8.1.9": ("13", 1795319570)}


def _slot(backend):
    job_id, now = SLOTS[backend]
    base = DESCRIBED / backend
    machine = Features(str(base / "machinefeatures")).read_all()
    job = Features(str(base / "jobs" / job_id / "jobfeatures")).read_all()
    slot, problems = describe.slot(machine, job, CPUINFO, OS_RELEASE, now)
    assert problems == []
    return slot


def _rendered(backend, format_):
    slot = _slot(backend)
    if format_ == "classad":
        return describe.classad_text(describe.classad(slot))
    document = {"dirac": lambda: describe.dirac(slot, OPTIONS),
                "glue2": lambda: describe.glue2(slot, "x86_64"),
                "json": lambda: describe.everything(slot, OPTIONS, "x86_64")}[format_]()
    return json.dumps(document, indent=2) + "\n"


@pytest.mark.parametrize("format_", describe.FORMATS)
@pytest.mark.parametrize("backend", sorted(SLOTS))
def test_golden_output(backend, format_):
    golden = DESCRIBED / "expected" / f"{backend}.{format_}"
    text = _rendered(backend, format_)
    if os.environ.get("MJF_UPDATE_GOLDEN"):
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(text)
    assert text == golden.read_text()


def test_conversions_by_hand():
    # LSF job: hs06_job 42.5 on 4 CPUs -> 10.625 HS06 per core -> SI00 10.625 x 250 =
    # 2656.25 -> 2656. max_rss_bytes 2 GiB = 2048 MB (MB = 2^20 bytes); + 1 GiB swap = 3072.
    # wall 1800 s = 30 min, cpu 7200 s = 120 min. 100 s into a 1800 s limit: 1700 s left
    # x 10.625 = 18062.5 HS06.s -> CPUTime 18062.
    ad = describe.classad(_slot("lsf-10.1"))
    assert (ad["GlueHostBenchmarkSI00"], ad["GlueHostMainMemoryRAMSize"],
            ad["GlueHostMainMemoryVirtualSize"], ad["GlueCEPolicyMaxWallClockTime"],
            ad["GlueCEPolicyMaxCPUTime"], ad["GlueHostArchitectureSMPSize"]) == (
        2656, 2048, 3072, 30, 120, 4)
    assert ad["MJF_MACHINE_HS06"] == 85.0 and isinstance(ad["MJF_MACHINE_HS06"], float)
    assert ad["MJF_JOB_ID"] == "1234" and ad["GlueHostProcessorClockSpeed"] == 2445
    lsf = describe.dirac(_slot("lsf-10.1"), OPTIONS)
    assert lsf["CPUTime"] == 18062 and lsf["MaxRAM"] == 2048 and "WholeNode" not in lsf
    # HTCondor job: the drain (shutdowntime_job 1795319600) comes before the wall limit
    # (1795319470 + 300): 30 s left x 10.37 HS06 = 311.1 -> 311. 384 MiB -> 384 MB.
    condor = describe.dirac(_slot("htcondor-23.9"), OPTIONS)
    assert (condor["CPUTime"], condor["MaxRAM"], condor["NumberOfProcessors"]) == (311, 384, 1)
    # Slurm job: 2 of 2 CPUs -> WholeNode; 300 s limit 5 min, 200 MiB.
    slurm = describe.dirac(_slot("slurm-22.05"), OPTIONS)
    assert slurm["WholeNode"] is True and slurm["CPUTime"] == 200 * 20
    # Grid Engine node without HS06: no SI00, no CPUTime, no benchmark - never invented.
    sge = _slot("gridengine-8.1.9")
    assert "GlueHostBenchmarkSI00" not in describe.classad(sge)
    assert "CPUTime" not in describe.dirac(sge, OPTIONS)
    assert describe.glue2(sge)["Benchmark"] == []


def test_node_only_and_missing_inputs():
    slot, problems = describe.slot({"total_cpu": "8", "hs06": "100"}, None)
    assert problems == []
    assert describe.classad(slot) == {"MJF_MACHINE_TOTAL_CPU": 8, "MJF_MACHINE_HS06": 100.0,
                                      "GlueHostArchitectureSMPSize": 8,
                                      "GlueHostBenchmarkSI00": 3125}
    assert describe.dirac(slot, describe.Options()) == {}
    assert describe.glue2(slot, "riscv-unknown") == {
        "ExecutionEnvironment": {"LogicalCPUs": 8, "OSFamily": "linux"},
        "Benchmark": [{"Type": "hep-spec06", "Value": 12.5}], "ComputingShare": {}}


@pytest.mark.parametrize(("benchmark", "glue2_type"), [("HEPSPEC", "hep-spec06"),
                                                        ("HEPscore23", "HEPscore23")])
def test_the_configured_benchmark_names_the_glue2_benchmark_and_is_in_json(benchmark,
                                                                            glue2_type):
    loaded = config.parse(f"[machinefeatures]\nbenchmark = {benchmark.lower()}\n")
    options = describe.Options(**loaded.describe, benchmark=loaded.benchmark)
    slot, _ = describe.slot({"total_cpu": "8", "hs06": "100"}, None)
    assert describe.glue2(slot, None, options.benchmark)["Benchmark"] == [
        {"Type": glue2_type, "Value": 12.5}]
    everything = describe.everything(slot, options)
    assert everything["benchmark"] == benchmark
    assert everything["glue2"]["Benchmark"] == [{"Type": glue2_type, "Value": 12.5}]
    # Same scale: the ClassAd and DIRAC numbers (and names) do not change with it.
    hepspec = describe.everything(slot, describe.Options())
    assert everything["classad"] == hepspec["classad"]
    assert everything["dirac"] == hepspec["dirac"] == {}
    assert list(everything) == ["machinefeatures", "jobfeatures", "benchmark", "classad",
                                "dirac", "glue2"]


def test_without_a_benchmark_value_glue2_has_no_benchmark_whatever_the_config():
    slot, _ = describe.slot({"total_cpu": "8"}, None)
    assert describe.glue2(slot, None, "HEPscore23")["Benchmark"] == []


def test_malformed_values_are_left_out_and_named():
    slot, problems = describe.slot({"total_cpu": "8 ", "hs06": "x", "log_cores": "8"},
                                   {"allocated_cpu": "2", "job_id": "a b", "whatever": "1"})
    assert slot.machine == {} and slot.job == {"allocated_cpu": 2}
    assert [problem.split(" = ")[0] for problem in problems] == ["hs06", "total_cpu", "job_id"]


def test_parsers():
    assert describe.parse_cpuinfo("processor : 0\nvendor_id : V\n\nprocessor : 1\n"
                                  "model name : later\n") == {"vendor_id": "V"}
    assert describe.parse_os_release('# c\nNAME="A \\"B\\" \\\\ C"\nID=\'x\'\nBAD LINE\n'
                                     'VERSION=\n') == {"NAME": 'A "B" \\ C', "ID": "x"}


def test_classad_literals():
    assert describe.classad_literal(2) == "2"
    assert describe.classad_literal(2.0) == "2.0"
    assert describe.classad_literal(10.37) == "10.37"
    assert describe.classad_literal(True) == "true"
    assert describe.classad_literal('a "b" \\ c\n\x01') == '"a \\"b\\" \\\\ c\\n\\001"'
    assert describe.classad_literal(["x", 1]) == '{ "x", 1 }'
    assert describe.classad_text({"A": 1, "B": "x"}) == '[\n  A = 1;\n  B = "x";\n]\n'


def _classad_module():
    """HTCondor's ClassAd library: ``classad2`` (htcondor wheel >= 24), else ``classad``."""
    try:
        import classad2 as classad
    except ImportError:
        try:
            import classad
        except ImportError:
            classad = None
    require(classad is not None, "the htcondor wheel (its ClassAd library) is not installed")
    return classad


def _parsed(classad, text):
    return classad.parseOne(text, classad.ParserType.New if hasattr(classad, "ParserType")
                            else classad.Parser.New)


@pytest.mark.parametrize("backend", sorted(SLOTS))
def test_htcondor_parses_the_classad_back(backend):
    classad = _classad_module()
    attributes = describe.classad(_slot(backend))
    ad = _parsed(classad, describe.classad_text(attributes))
    assert {name: ad.eval(name) for name in attributes} == attributes
    for name, value in attributes.items():
        assert type(ad.eval(name)) is type(value), name


def test_htcondor_reads_awkward_strings_back():
    classad = _classad_module()
    attributes = {"S": 'quote " backslash \\ tab\t newline\n bell\x07 é'}
    ad = _parsed(classad, describe.classad_text(attributes))
    assert ad.eval("S") == attributes["S"]


def test_the_glite_requirement_on_a_described_slot():
    # The gLite text's example: other.GlueHostBenchmarkSI00 > 500 ? MaxCPUTime > 1000 : > 2000.
    classad = _classad_module()
    ad = _parsed(classad, describe.classad_text(describe.classad(_slot("lsf-10.1"))))
    requirement = classad.ExprTree("other.GlueHostBenchmarkSI00 > 500 ? "
                                   "other.GlueCEPolicyMaxCPUTime > 1000 : "
                                   "other.GlueCEPolicyMaxCPUTime > 2000")
    job = classad.ClassAd({"Requirements": requirement})
    # SI00 2656 > 500, MaxCPUTime 120 min: not > 1000.
    assert ad.matches(job) is False
    # Both sides of the 500 threshold: SI00 = HS06 per core x 250.
    for hs06_job, cpu_limit_secs, verdict in [
            ("2.1", 1001 * 60, True),    # SI00 525 > 500: 1001 min > 1000
            ("2.1", 1000 * 60, False),   # 1000 min is not > 1000
            ("1.9", 1500 * 60, False),   # SI00 475: needs > 2000 min
            ("1.9", 2001 * 60, True)]:
        slot, _ = describe.slot({}, {"allocated_cpu": "1", "hs06_job": hs06_job,
                                     "cpu_limit_secs": str(cpu_limit_secs)})
        ad = _parsed(classad, describe.classad_text(describe.classad(slot)))
        assert ad.matches(job) is verdict, (hs06_job, cpu_limit_secs)


def test_describe_config_section():
    parsed = config.parse("[describe]\nsite = LCG.Example.org\ngridce = ce.example.org\n"
                          "tags = cvmfs, apptainer\nplatform = x86_64_glibc-2.36\n")
    assert parsed.describe == {"site": "LCG.Example.org", "gridce": "ce.example.org",
                               "tags": ("cvmfs", "apptainer"),
                               "platform": "x86_64_glibc-2.36"}
    options = describe.Options(**parsed.describe)
    assert describe.dirac(describe.slot({}, {})[0], options) == {
        "Site": "LCG.Example.org", "GridCE": "ce.example.org", "Tag": ["cvmfs", "apptainer"],
        "Platform": "x86_64_glibc-2.36"}
    assert config.parse("").describe == {}


@pytest.mark.parametrize(("text", "why"), [
    ("site = a b", "printable ASCII"), ("tags = a,,b", "comma-separated"),
    ('gridce = "x"', "quotes"), ("queue = q", "[describe] takes site, gridce, tags, platform"),
    ("platform = a,b", "commas"),
])
def test_describe_config_refusals(text, why):
    with pytest.raises(config.SiteInputError, match=why.replace("[", r"\[")):
        config.parse(f"[describe]\n{text}\n")
