"""`mjf submit-args`' library: a job's requirements reduced (mjf_hooks.match.reduce) and
printed as each batch system's options (mjf_hooks.submit)."""

import importlib.util
import re
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mjf_hooks import submit as submit_options
from mjf_hooks.match.reduce import Unexpressible, expression_needs, jdl_needs
from mjf_hooks.submit import Settings, directives, options, words
from tests.conftest import require

GLITE = ("other.GlueHostBenchmarkSI00 > 500 ? other.GlueCEPolicyMaxCPUTime > 1000 "
         ": other.GlueCEPolicyMaxCPUTime > 2000")
EVERY_KIND = ("other.GlueHostArchitectureSMPSize >= 4 && other.GlueHostMainMemoryRAMSize >= "
              "2 * 1024 && other.GlueCEPolicyMaxWallClockTime >= 60 * 24 && "
              "other.GlueCEPolicyMaxCPUTime > 2000 && member(\"avx2\", "
              "other.GlueHostApplicationSoftwareRunTimeEnvironment) && "
              "other.GlueHostBenchmarkSI00 >= 2500")


@pytest.fixture(autouse=True)
def classad_library():
    require(importlib.util.find_spec("classad2") is not None,
            "HTCondor's ClassAd library (pip install 'mjf-hooks[match]')")


def printed(expression, batch, **site):
    return options(expression_needs(expression), batch, Settings(**site))


# --- reducing -------------------------------------------------------------------------

@pytest.mark.parametrize("expression, kind, value", [
    ("other.GlueHostArchitectureSMPSize >= 8", "cores", 8),
    ("TARGET.MJF_JOB_ALLOCATED_CPU > 3", "cores", 4),
    ("8 <= other.GlueHostArchitectureSMPSize", "cores", 8),
    ("other.GlueHostMainMemoryRAMSize >= 4000", "memory_mib", 4000),
    ("other.MJF_JOB_MAX_RSS_BYTES >= 2 * 1024 * 1024 * 1024 + 1", "memory_mib", 2049),
    ("other.GlueCEPolicyMaxWallClockTime > 59", "wall_secs", 3600),
    ("other.MJF_JOB_WALL_LIMIT_SECS >= 3600 * 2", "wall_secs", 7200),
    ("other.GlueCEPolicyMaxCPUTime >= 10", "cpu_secs", 600),
    ("other.MJF_JOB_CPU_LIMIT_SECS >= 100", "cpu_secs", 100),
    # Only an upper bound: that bound is the request (a limit no larger).
    ("other.GlueCEPolicyMaxWallClockTime <= 30", "wall_secs", 1800),
    ("other.GlueHostArchitectureSMPSize <= 8", "cores", 1),
    ("other.GlueHostArchitectureSMPSize == 6", "cores", 6),
])
def test_a_request_is_the_least_the_requirement_allows(expression, kind, value):
    assert expression_needs(expression).request(kind) == value


def test_constants_and_decided_branches_are_reduced_by_the_library():
    needs = expression_needs("true ? other.GlueHostArchitectureSMPSize >= 2 * 2 : false")
    assert needs.request("cores") == 4 and not needs.warnings


def test_the_glite_conditional_on_the_node_gets_both_branches_with_a_warning():
    needs = expression_needs(GLITE)
    assert needs.request("cpu_secs") == 2001 * 60  # > 2000 minutes: both branches hold
    assert needs.node == []
    assert len(needs.warnings) == 1 and "both branches" in needs.warnings[0]


@pytest.mark.parametrize("expression, fact, at_least", [
    ("other.GlueHostBenchmarkSI00 >= 2500", "hs06_per_cpu", 10),
    ("other.GlueHostBenchmarkSI00 > 2500", "hs06_per_cpu", 10.004),
    ("other.MJF_MACHINE_HS06 >= 120.5", "hs06", 120.5),
    ("other.MJF_MACHINE_HS06 > 120", "hs06", 120.01),
    ("other.MJF_MACHINE_TOTAL_CPU > 31", "total_cpu", 32),
])
def test_node_facts_are_lower_bounds(expression, fact, at_least):
    assert expression_needs(expression).to_json()["node"] == [{"fact": fact,
                                                               "at_least": at_least}]


@pytest.mark.parametrize("expression, named", [
    ("other.GlueHostOperatingSystemName == \"AlmaLinux\"", "GlueHostOperatingSystemName"),
    ("other.GlueHostArchitectureSMPSize != 4", "!="),
    ("other.MJF_MACHINE_HS06 < 100", "at least"),
    ("other.GlueCEUniqueID == 3", "GlueCEUniqueID"),
    ("other.GlueHostArchitectureSMPSize >= 8 || other.GlueHostMainMemoryRAMSize > 9",
     "alternatives"),
    ("other.GlueHostArchitectureSMPSize >= 8 && other.GlueHostArchitectureSMPSize < 4",
     "contradicts"),
    ("false", "false"), ("other.X > 1 ||", "does not parse"), ("", "empty"),
    ("member(\"a b\", other.GlueHostApplicationSoftwareRunTimeEnvironment)", "member"),
])
def test_what_cannot_be_expressed_is_an_error_naming_the_clause(expression, named):
    with pytest.raises(Unexpressible, match=named) as error:
        expression_needs(expression)
    assert "\n" not in str(error.value)


def test_a_dirac_jdl_becomes_requests_and_tags():
    needs = jdl_needs('[ NumberOfProcessors = 8; MaxRAM = 16000; CPUTime = 864000; '
                      'Tags = {"GPU", "WholeNode"}; Site = "LCG.CERN.cern"; ]', 10.0)
    assert needs.to_json() == {"cores": 8, "memory_mib": 16000, "wall_secs": 86400,
                               "whole_node": True, "node": [{"tag": "GPU"}],
                               "matched_before_the_batch_system": {"Site": ["LCG.CERN.cern"]}}


@pytest.mark.parametrize("jdl, named", [
    ("[ CPUTime = 1000; ]", "hs06_per_cpu"),
    ("[ MinRAM = 9000; MaxRAM = 8000; ]", "MinRAM"),
    ('[ Tags = {"a b"}; ]', "Tags"),
    ("[ Requirements = [ MaxRAM = 1 ]; ]", "RFC #7"),
    ('[ NumberOfProcessors = "four"; ]', "NumberOfProcessors"),
])
def test_a_dirac_jdl_that_cannot_be_expressed(jdl, named):
    with pytest.raises(Unexpressible, match=named):
        jdl_needs(jdl, None)


def test_dirac_processor_tags_and_min_max():
    needs = jdl_needs('[ MinNumberOfProcessors = 2; MaxNumberOfProcessors = 8; '
                      'Tags = {"4Processors"}; ]', None)
    assert needs.request("cores") == 4 and needs.high["cores"] == 8


def test_a_glite_jdl_is_its_requirements_expression():
    needs = jdl_needs(f'[ Executable = "x"; Requirements = {GLITE}; ]', None)
    assert needs.request("cpu_secs") == 2001 * 60


def test_a_glite_jdls_own_keys_add_to_its_requirements():
    needs = jdl_needs('[ CpuNumber = 8; SMPGranularity = 8; WholeNodes = true; '
                      'Requirements = other.GlueHostMainMemoryRAMSize >= 4000; ]', None)
    assert needs.request("cores") == 8 and needs.whole_node
    assert needs.request("memory_mib") == 4000


@pytest.mark.parametrize("jdl, named", [
    ("[ HostNumber = 2; Requirements = true; ]", "HostNumber"),
    ("[ CpuNumber = 8; SMPGranularity = 4; Requirements = true; ]", "spans hosts"),
    ('[ SMPGranularity = "all"; Requirements = true; ]', "SMPGranularity"),
    ("[ WholeNodes = {1, 2}; Requirements = true; ]", "WholeNodes"),
])
def test_a_glite_jdl_that_spans_hosts_or_says_nonsense_is_refused(jdl, named):
    with pytest.raises(Unexpressible, match=named):
        jdl_needs(jdl, None)


# --- each batch system ----------------------------------------------------------------

@pytest.mark.parametrize("batch, expected", [
    ("slurm", [["--nodes=1"], ["--ntasks=1"], ["--cpus-per-task=4"], ["--mem=2048M"],
               ["--time=1440"], ["--constraint=avx2"], ["--extra=hs06_per_cpu>=10"]]),
    ("pbs", [["-l", "select=1:ncpus=4:mem=2048mb:avx2=true:hs06_per_cpu=10"],
             ["-l", "walltime=24:00:00"], ["-l", "cput=33:21:00"]]),
    ("gridengine", [["-pe", "smp", "4"],
                    ["-l", "h_rt=86400,h_cpu=30015,h_vmem=512M,avx2=true,hs06_per_cpu=10"]]),
    ("lsf", [["-n", "4"], ["-R", "select[avx2&&hs06_per_cpu>=10] span[hosts=1]"],
             ["-M", "2048MB"], ["-W", "1440"], ["-c", "2001"]]),
    ("htcondor", [["request_cpus = 4"], ["request_memory = 2048"],
                  ["+AllowedJobDuration = 86400"],
                  ["requirements = TARGET.avx2 =?= true && TARGET.MJF_MACHINE_HS06 >= 10 "
                   "* TARGET.MJF_MACHINE_TOTAL_CPU"]]),
])
def test_every_kind_of_requirement_per_batch_system(batch, expected):
    assert printed(EVERY_KIND, batch) == expected


def test_the_site_names_the_published_facts_and_the_parallel_environment():
    site = {"names": {"hs06_per_cpu": "hepspec"}, "gridengine_pe": "mpi"}
    assert printed("other.GlueHostBenchmarkSI00 >= 2500 && other.GlueHostArchitectureSMPSize "
                   ">= 2", "gridengine", **site) == [["-pe", "mpi", "2"], ["-l", "hepspec=10"]]
    assert printed("other.MJF_MACHINE_HS06 >= 100", "pbs", names={"hs06": "HS06"}) == \
        [["-l", "select=1:ncpus=1:HS06=100"]]


def test_htcondor_wall_time_in_the_attribute_and_unit_its_hooks_read():
    assert printed("other.MJF_JOB_WALL_LIMIT_SECS >= 3601", "htcondor",
                   htcondor_wall_attribute="MaxWallTime", htcondor_wall_unit="minutes") == \
        [["request_cpus = 1"], ["+MaxWallTime = 61"]]


def test_cpu_time_becomes_wall_time_per_core_where_no_cpu_limit_exists():
    expression = "other.GlueHostArchitectureSMPSize >= 4 && other.MJF_JOB_CPU_LIMIT_SECS >= 14400"
    assert ["--time=60"] in printed(expression, "slurm")


@pytest.mark.parametrize("batch, expression, named", [
    ("pbs", "other.MJF_MACHINE_HS06 >= 1 || other.MJF_MACHINE_TOTAL_CPU >= 8", "pbs"),
    ("gridengine", "member(\"a\", other.GlueHostApplicationSoftwareRunTimeEnvironment) || "
     "member(\"b\", other.GlueHostApplicationSoftwareRunTimeEnvironment)", "gridengine"),
    ("slurm", "other.MJF_MACHINE_HS06 >= 1 || other.MJF_MACHINE_TOTAL_CPU >= 8", "slurm"),
    ("slurm", "other.MJF_MACHINE_HS06 >= 1 && other.MJF_MACHINE_TOTAL_CPU >= 8", "--extra"),
    ("htcondor", "member(\"a-b\", other.GlueHostApplicationSoftwareRunTimeEnvironment)",
     "htcondor"),
])
def test_what_one_batch_system_cannot_express_names_the_clause(batch, expression, named):
    with pytest.raises(Unexpressible, match=named) as error:
        printed(expression, batch)
    assert "`" in str(error.value)


def member(tag: str) -> str:
    return f'member("{tag}", other.GlueHostApplicationSoftwareRunTimeEnvironment)'


@pytest.mark.parametrize("tag, why", [
    ("el9-x86", "only letters, digits and _"), ("cvmfs.cern", "only letters, digits and _"),
    ("mem", "LSF's own resources"), ("r15s", "LSF's own resources"),
    ("server", "LSF's own resources"), ("maxmem", "LSF's own resources"),
    ("infiniband", "inf or nan"), ("NaNo", "inf or nan"), ("a" * 40, "at most 39"),
])
def test_lsf_refuses_a_tag_that_is_no_lsf_resource_name(tag, why):
    with pytest.raises(Unexpressible, match=f"for lsf: .*{why}") as error:
        printed(member(tag), "lsf")
    assert tag in str(error.value)
    with pytest.raises(Unexpressible, match=why):  # as one of alternatives too
        printed(f"{member('ok')} || {member(tag)}", "lsf")


def test_lsf_takes_what_lsf_names_a_resource():
    for tag in ("MEM", "cvmfs_cern", "a" * 39, "x86_64", "gpu_a100"):
        assert printed(member(tag), "lsf")[1] == ["-R", f"select[{tag}] span[hosts=1]"]


def test_lsf_refuses_a_site_name_for_a_node_fact_that_lsf_keeps():
    with pytest.raises(Unexpressible, match="mem is one of LSF's own resources"):
        printed("other.MJF_MACHINE_HS06 >= 100", "lsf", names={"hs06": "mem"})


NOW = 1_800_000_000  # Grid Engine's h_rt is bounded by the time left on its 32-bit clock
CORES, MEMORY_MIB = ("other.GlueHostArchitectureSMPSize >= {}",
                     "other.GlueHostMainMemoryRAMSize >= {}")
WALL_SECS, CPU_SECS = "other.MJF_JOB_WALL_LIMIT_SECS >= {}", "other.MJF_JOB_CPU_LIMIT_SECS >= {}"
WALL_MINUTES, CPU_MINUTES = ("other.GlueCEPolicyMaxWallClockTime >= {}",
                             "other.GlueCEPolicyMaxCPUTime >= {}")


@pytest.mark.parametrize("batch, requirement, most, field, bound", [
    ("slurm", CORES, 2**16 - 3, "--cpus-per-task", 2**16 - 3),
    ("slurm", WALL_SECS, 35791393 * 60, "--time (minutes)", 35791393),
    ("slurm", CPU_SECS, 35791393 * 60, "--time (minutes)", 35791393),
    ("pbs", MEMORY_MIB, 2**44 - 1, "mem (mb)", 2**44 - 1),
    ("pbs", WALL_MINUTES, (2**63 - 2) // 60, "walltime (seconds)", 2**63 - 2),
    ("pbs", CPU_MINUTES, (2**63 - 2) // 60, "cput (seconds)", 2**63 - 2),
    ("gridengine", CORES, 2**32 - 1, "slots", 2**32 - 1),
    ("gridengine", WALL_SECS, 2**32 - 1 - NOW, "h_rt (seconds from now)", 2**32 - 1 - NOW),
    ("gridengine", CPU_SECS, 2**32 - 1, "h_cpu (seconds)", 2**32 - 1),
    ("gridengine", MEMORY_MIB, 2**44 - 1, "h_vmem (M)", 2**44 - 1),
    ("lsf", CORES, 2**31 - 1, "-n", 2**31 - 1),
    ("lsf", MEMORY_MIB, 2**31 - 1, "-M (MB)", 2**31 - 1),
    ("lsf", WALL_SECS, 35791394 * 60, "-W (minutes)", 35791394),
    ("lsf", CPU_SECS, 35791394 * 60, "-c (minutes)", 35791394),
    ("htcondor", WALL_MINUTES, (2**63 - 1) // 60, "AllowedJobDuration (seconds)", 2**63 - 1),
])
def test_a_request_beyond_what_the_batch_systems_field_holds_is_refused(
        batch, requirement, most, field, bound):
    """Checked in the option's own unit, after conversion: 10**18 minutes of wall time
    were 6 x 10**19 s, which HTCondor reads as 0."""
    assert printed(requirement.format(most), batch, now=NOW)
    with pytest.raises(Unexpressible, match=rf"`.*` becomes {re.escape(field)} \d+ for "
                       rf"{batch}, which holds at most {bound}$"):
        printed(requirement.format(most + 1), batch, now=NOW)


def test_the_htcondor_wall_limit_is_bounded_in_the_sites_unit():
    """10**18 minutes: too many seconds for an int64, as minutes they fit."""
    with pytest.raises(Unexpressible, match="60000000000000000000 for htcondor"):
        printed(WALL_MINUTES.format(10**18), "htcondor")
    assert printed(WALL_MINUTES.format(10**18), "htcondor", htcondor_wall_unit="minutes") \
        == [["request_cpus = 1"], [f"+AllowedJobDuration = {10**18}"]]


def test_whole_node_is_slurm_exclusive_and_an_error_elsewhere():
    needs = jdl_needs('[ WholeNode = "yes"; ]', None)
    assert ["--exclusive"] in options(needs, "slurm", Settings())
    for batch in ("pbs", "gridengine", "lsf", "htcondor"):
        with pytest.raises(Unexpressible, match="WholeNode"):
            options(needs, batch, Settings())


def test_tag_alternatives_on_slurm_and_lsf():
    alternatives = ("member(\"a\", other.GlueHostApplicationSoftwareRunTimeEnvironment) || "
                    "member(\"b\", other.GlueHostApplicationSoftwareRunTimeEnvironment)")
    assert printed(alternatives, "slurm")[-1] == ["--constraint=a|b"]
    assert printed(alternatives, "lsf")[1] == ["-R", "select[(a||b)] span[hosts=1]"]


def test_words_and_directives():
    lines = printed("other.GlueHostArchitectureSMPSize >= 2 && member(\"x\", "
                    "other.GlueHostApplicationSoftwareRunTimeEnvironment)", "lsf")
    assert words("lsf", lines) == ["-n", "2", "-R", "select[x] span[hosts=1]"]
    assert directives("lsf", lines) == ["#BSUB -n 2", '#BSUB -R "select[x] span[hosts=1]"']
    condor = printed("other.GlueHostArchitectureSMPSize >= 2", "htcondor")
    assert words("htcondor", condor) == ["-append", "request_cpus = 2"]
    assert directives("htcondor", condor) == ["request_cpus = 2"]
    assert directives("gridengine", printed("other.GlueHostArchitectureSMPSize >= 2",
                                            "gridengine")) == ["#$ -pe smp 2"]


# --- scaling ----------------------------------------------------------------------------

def tags_jdl(count: int) -> str:
    """A DIRAC JDL listing ``count`` tags (60,000 of them: 520 KB)."""
    return "[ Tags = {" + ", ".join(f'"tag{number}"' for number in range(count)) + "}; ]"


def python_calls(function) -> int:
    """How many Python functions ``function()`` calls: a measure of its work that, unlike
    a time, is the same on any machine (the suite asserts no times)."""
    calls = 0

    def count(frame, event, arg):
        nonlocal calls
        calls += event == "call"

    sys.setprofile(count)
    try:
        function()
    finally:
        sys.setprofile(None)
    return calls


def test_reducing_and_printing_grow_linearly_with_the_tags():
    """10,000 tags took 3.3 s and 60,000 minutes (each tag was compared with every
    earlier one); now 60,000 take about a second (docs/performance.md)."""
    def work(count: int) -> int:
        text = tags_jdl(count)
        return python_calls(lambda: options(jdl_needs(text, None), "lsf", Settings()))

    assert work(60000) / work(10000) < 6.5  # linear: 6 at most; quadratic: about 36


# --- robustness: the reducer's requests satisfy the requirement -----------------------

REQUEST_ATTRIBUTES = ["GlueHostArchitectureSMPSize", "MJF_JOB_ALLOCATED_CPU",
                      "GlueHostMainMemoryRAMSize", "MJF_JOB_MAX_RSS_BYTES",
                      "GlueCEPolicyMaxWallClockTime", "MJF_JOB_WALL_LIMIT_SECS",
                      "GlueCEPolicyMaxCPUTime", "MJF_JOB_CPU_LIMIT_SECS"]
clauses = st.tuples(st.sampled_from(REQUEST_ATTRIBUTES),
                    st.sampled_from([">", ">=", "<", "<=", "=="]),
                    st.integers(min_value=0, max_value=10**7),
                    st.sampled_from(["other.", "TARGET.", ""]))


def slot_of(needs) -> dict:
    """The slot a job given the needs' requests gets, as `mjf describe` writes it."""
    cores = needs.request("cores") or 1
    memory, wall, cpu = (needs.request(kind) for kind in ("memory_mib", "wall_secs",
                                                           "cpu_secs"))
    slot = {"GlueHostArchitectureSMPSize": cores, "MJF_JOB_ALLOCATED_CPU": cores}
    if memory is not None:
        slot.update(GlueHostMainMemoryRAMSize=memory, MJF_JOB_MAX_RSS_BYTES=memory << 20)
    if wall is not None:
        slot.update(GlueCEPolicyMaxWallClockTime=wall // 60, MJF_JOB_WALL_LIMIT_SECS=wall)
    if cpu is not None:
        slot.update(GlueCEPolicyMaxCPUTime=cpu // 60, MJF_JOB_CPU_LIMIT_SECS=cpu)
    return slot


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(clauses, min_size=1, max_size=6))
def test_property_the_requests_satisfy_the_requirement_by_the_library(terms):
    """Any conjunction of request bounds: either one clause is named as unsatisfiable, or
    the slot those requests give satisfies the whole requirement, judged by HTCondor's
    library as `mjf match` judges it."""
    from mjf_hooks.match.classad import ClassAdSlot

    expression = " && ".join(f"{scope}{name} {op} {value}" for name, op, value, scope in terms)
    try:
        needs = expression_needs(expression)
    except Unexpressible as error:
        assert any(why in str(error) for why in ("contradicts", "whole number", "asks for no"))
        return
    assert ClassAdSlot(slot_of(needs)).requirements(expression).matched, expression


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_property_any_text_is_options_or_one_line(text):
    try:
        needs = expression_needs(text)
        for batch in submit_options.BATCH_SYSTEMS:
            try:
                options(needs, batch, Settings())
            except Unexpressible as error:
                assert "\n" not in str(error)
    except Unexpressible as error:
        assert "\n" not in str(error) and str(error)


# --- the site's [submit] section --------------------------------------------------------

def test_the_submit_section_is_read_and_checked():
    from mjf_hooks import config
    from mjf_hooks.errors import SiteInputError

    parsed = config.parse("[submit]\nhs06_per_cpu = 12.5\nhs06_name = HS06\ngridengine_pe = mpi\n")
    assert parsed.submit == {"hs06_per_cpu": 12.5, "hs06_name": "HS06", "gridengine_pe": "mpi"}
    for line, why in (("hs06_name = a;b", "letters"), ("hs06_name = $(x)", "letters"),
                      ("hs06_per_cpu = 0", "positive"), ("queue = q", "unknown option")):
        with pytest.raises(SiteInputError, match=why):
            config.parse(f"[submit]\n{line}\n")


@pytest.mark.parametrize("unit, words", [
    (None, ["-M", "2048MB"]),  # with its unit, as IBM LSF takes it
    ("KB", ["-M", "2097152"]), ("MB", ["-M", "2048"]),
    ("GB", ["-M", "2"]), ("TB", ["-M", "1"]),  # rounded up: never below what is asked
])
def test_lsfs_memory_limit_is_a_plain_number_in_the_sites_unit(unit, words):
    assert printed(EVERY_KIND, "lsf", lsf_memory_unit=unit)[2] == words


def test_lsf_conf_names_the_unit_of_its_plain_limits():
    from mjf_hooks.batch.lsf import unit_for_limits

    assert unit_for_limits("LSF_ENVDIR=/x\nLSF_UNIT_FOR_LIMITS=MB\n") == "MB"
    assert unit_for_limits('  LSF_UNIT_FOR_LIMITS = "gb"\n') == "GB"
    assert unit_for_limits("#LSF_UNIT_FOR_LIMITS=MB\n") is None
    assert unit_for_limits("LSF_UNIT_FOR_LIMITS=PB\n") is None  # not one -M takes here
    assert unit_for_limits("") is None
