"""The matching engine: ClassAd Requirements and DIRAC JDLs against one job slot,
read with HTCondor's ClassAd library (the `match` extra; the `test` extra installs it)."""

from __future__ import annotations

import importlib.util
import sys
import time

import pytest

from mjf_hooks import match
from mjf_hooks.match import classad, dirac
from tests.conftest import require

MATCH, NO, UNREADABLE = "match", "no match", "unreadable"


@pytest.fixture(autouse=True)
def _classad_library():
    require(importlib.util.find_spec("classad2") is not None,
            "needs HTCondor's ClassAd library: pip install 'mjf-hooks[match]'")


def outcome(verdict: match.Verdict) -> str:
    if verdict.unreadable is not None:
        return UNREADABLE
    return MATCH if verdict.matched else NO


GLITE = ("other.GlueHostBenchmarkSI00 > 500 ? other.GlueCEPolicyMaxCPUTime > 1000 :"
         " other.GlueCEPolicyMaxCPUTime > 2000")


def glue(si00, cputime):
    return {"GlueHostBenchmarkSI00": si00, "GlueCEPolicyMaxCPUTime": cputime}


SLOT = {"MJF_MACHINE_HS06": 400.0, "MJF_MACHINE_TOTAL_CPU": 32, "MJF_JOB_ALLOCATED_CPU": 8,
        "MJF_JOB_HS06_JOB": 100.0, "GlueHostMainMemoryRAMSize": 16000,
        "GlueHostOperatingSystemName": "AlmaLinux", "Tags": ["cvmfs", "gpu"]}

CLASSAD_CASES = [
    # The gLite text's example, on both sides of 500 and of each CPU-time threshold.
    (GLITE, glue(600, 1500), MATCH),
    (GLITE, glue(600, 1000), NO),
    (GLITE, glue(600, 1001), MATCH),
    (GLITE, glue(500, 1500), NO),       # 500 is not > 500: the 2000 branch
    (GLITE, glue(500, 2001), MATCH),
    (GLITE, glue(400, 2000), NO),
    (GLITE, glue(400, 2500), MATCH),
    (GLITE, {"GlueCEPolicyMaxCPUTime": 5000}, NO),  # no benchmark: undefined
    # The same in HTCondor's style, and other. in any case.
    (GLITE.replace("other.", "TARGET."), glue(600, 1500), MATCH),
    (GLITE.replace("other.", "TARGET."), glue(400, 1500), NO),
    (GLITE.replace("other.", "OTHER."), glue(400, 2500), MATCH),
    # Numbers on both sides of equal.
    ("TARGET.MJF_JOB_ALLOCATED_CPU >= 8", SLOT, MATCH),
    ("TARGET.MJF_JOB_ALLOCATED_CPU > 8", SLOT, NO),
    ("TARGET.MJF_JOB_ALLOCATED_CPU == 8", SLOT, MATCH),
    ("other.MJF_JOB_HS06_JOB >= 100.5", SLOT, NO),
    ("other.MJF_JOB_HS06_JOB <= 100", SLOT, MATCH),
    ("TARGET.MJF_MACHINE_HS06 >= 400 && TARGET.GlueHostMainMemoryRAMSize >= 16001", SLOT, NO),
    ("TARGET.MJF_MACHINE_HS06 > 500 || TARGET.GlueHostMainMemoryRAMSize >= 16000", SLOT, MATCH),
    # Strings, lists, bare and MY. references (no job ad: they all mean the slot).
    ('other.GlueHostOperatingSystemName == "almalinux"', SLOT, MATCH),  # == ignores case
    ('other.GlueHostOperatingSystemName =?= "almalinux"', SLOT, NO),    # =?= does not
    ('member("gpu", TARGET.Tags)', SLOT, MATCH),
    ('member("fpga", TARGET.Tags)', SLOT, NO),
    ("MJF_JOB_ALLOCATED_CPU == 8 && MY.MJF_JOB_ALLOCATED_CPU == 8", SLOT, MATCH),
    ('other.GlueHostOperatingSystemName == "a || b"', SLOT, NO),  # operators in a string
    # An attribute the slot lacks: undefined, which is no match (as in HTCondor).
    ("TARGET.MJF_JOB_GPUS >= 1", SLOT, NO),
    ("isUndefined(TARGET.MJF_JOB_GPUS)", SLOT, MATCH),
    # Cannot be read.
    ("TARGET.MJF_JOB_ALLOCATED_CPU >=", SLOT, UNREADABLE),
    ("(TARGET.MJF_JOB_ALLOCATED_CPU > 1", SLOT, UNREADABLE),
    ("TARGET.MJF_JOB_ALLOCATED_CPU > 1 ]", SLOT, UNREADABLE),
    ('other.GlueHostOperatingSystemName > 3', SLOT, UNREADABLE),   # an error value
    ('"yes"', SLOT, UNREADABLE),                                  # not a truth value
    ("", SLOT, UNREADABLE),
]


@pytest.mark.parametrize(("expression", "slot", "expected"), CLASSAD_CASES)
def test_classad_requirements(expression, slot, expected):
    verdict = classad.classad_requirements(expression, slot)
    assert outcome(verdict) == expected, verdict
    assert verdict.exit_code == {MATCH: 0, NO: 1, UNREADABLE: 2}[expected]
    if expected == UNREADABLE:
        assert "\n" not in verdict.unreadable and verdict.unreadable


def test_explain_names_the_failing_branch_with_both_values():
    verdict = classad.classad_requirements(GLITE, glue(400, 1500), explain=True)
    assert verdict.reasons == [
        "`other.GlueHostBenchmarkSI00 > 500` is false: other.GlueHostBenchmarkSI00 = 400 > 500,"
        " so `other.GlueCEPolicyMaxCPUTime > 2000` applies",
        "`other.GlueCEPolicyMaxCPUTime > 2000` is false: other.GlueCEPolicyMaxCPUTime = 1500"
        " > 2000"]


def test_explain_walks_and_or_and_parentheses():
    verdict = classad.classad_requirements(
        "TARGET.MJF_MACHINE_HS06 >= 100 && (TARGET.MJF_JOB_ALLOCATED_CPU > 8 || "
        'other.Foo == "x")', SLOT, explain=True)
    assert verdict.reasons == [
        "none of the 2 alternatives of `TARGET.MJF_JOB_ALLOCATED_CPU > 8 || other.Foo == \"x\"`"
        " holds:",
        "`TARGET.MJF_JOB_ALLOCATED_CPU > 8` is false: TARGET.MJF_JOB_ALLOCATED_CPU = 8 > 8",
        '`other.Foo == "x"` is undefined: the slot has no Foo']


def test_explain_only_when_asked():
    assert classad.classad_requirements(GLITE, glue(400, 1500)).reasons == []


def test_unreadable_messages_say_where():
    def why(expression):
        return classad.classad_requirements(expression, SLOT).unreadable

    assert "character 1 is never closed" in why("(TARGET.MJF_JOB_ALLOCATED_CPU > 1")
    assert "does not parse as a ClassAd expression" in why("TARGET.X >=\n")
    assert why("TARGET.MJF_MACHINE_HS06 > 1 && other.GlueHostOperatingSystemName > 3") == (
        "the requirement cannot be evaluated: `other.GlueHostOperatingSystemName > 3` is error:"
        ' other.GlueHostOperatingSystemName = "AlmaLinux" > 3')


def test_many_requirements_against_one_slot():
    verdicts = classad.classad_requirements_many([GLITE, "TARGET.X >", "TARGET.Y > 1"],
                                               glue(600, 1500))
    assert [outcome(v) for v in verdicts] == [MATCH, UNREADABLE, NO]


# --- DIRAC -----------------------------------------------------------------------------

RESOURCE = {"Site": "LCG.CERN.cern", "GridCE": "ce1.cern.ch", "Platform": "x86_64_glibc-2.34",
            "NumberOfProcessors": 8, "MaxRAM": 16000, "CPUTime": 1000000, "Tag": ["GPU"],
            "SoftwareTag": ["AppVersion2"], "CPUModel": "Intel Xeon", "Memory": 4000}

RFC7_EXAMPLE = """[
Executable = "my_executable";
Requirements = [
SoftwareTag = { "AppVersion1","AppVersion2" };
CPUModel = "Intel Xeon";
Memory = 4000;
]
]"""

DIRAC_CASES = [
    ("RFC #7 example", RFC7_EXAMPLE, RESOURCE, MATCH),
    ("RFC #7: memory capacity below", RFC7_EXAMPLE, {**RESOURCE, "Memory": 3999}, NO),
    ("RFC #7: list, no value in common", RFC7_EXAMPLE,
     {**RESOURCE, "SoftwareTag": ["AppVersion3"]}, NO),
    ("RFC #7: absent from the resource", RFC7_EXAMPLE,
     {k: v for k, v in RESOURCE.items() if k != "CPUModel"}, NO),
    ("RFC #7: string differs", RFC7_EXAMPLE, {**RESOURCE, "CPUModel": "AMD EPYC"}, NO),
    ("nothing asked", "[ Executable = \"x\"; ]", RESOURCE, MATCH),
    ("bare key list, as DIRAC also accepts", 'Executable = "x"; CPUTime = 500;', RESOURCE, MATCH),
    # Processors and tags.
    ("8 of 8 processors", "[ NumberOfProcessors = 8 ]", RESOURCE, MATCH),
    ("9 of 8 processors", "[ NumberOfProcessors = 9 ]", RESOURCE, NO),
    ("4 processors as a string", '[ NumberOfProcessors = "4" ]', RESOURCE, MATCH),
    ("multiprocessor job on a single-core slot", "[ NumberOfProcessors = 2 ]",
     {**RESOURCE, "NumberOfProcessors": 1}, NO),
    ("single-core job anywhere", "[ NumberOfProcessors = 1 ]",
     {**RESOURCE, "NumberOfProcessors": 1}, MATCH),
    ("min only wants MultiProcessor", "[ MinNumberOfProcessors = 1 ]",
     {**RESOURCE, "NumberOfProcessors": 1}, NO),
    ("min and max 1", "[ MinNumberOfProcessors = 1; MaxNumberOfProcessors = 1 ]",
     {**RESOURCE, "NumberOfProcessors": 1}, MATCH),
    ("min 4 max 16 on 8", "[ MinNumberOfProcessors = 4; MaxNumberOfProcessors = 16 ]",
     RESOURCE, MATCH),
    ("WholeNode job, resource without WholeNode", '[ WholeNode = "yes" ]', RESOURCE, NO),
    ("WholeNode job, WholeNode present (any value)", '[ WholeNode = "yes" ]',
     {**RESOURCE, "WholeNode": False}, MATCH),
    ("WholeNode = no asks nothing", '[ WholeNode = "no" ]', RESOURCE, MATCH),
    ("job tag the resource has", '[ Tags = { "GPU" } ]', RESOURCE, MATCH),
    ("job tag the resource lacks", '[ Tag = "FPGA" ]', RESOURCE, NO),
    ("resource RequiredTag the job lacks", "[ NumberOfProcessors = 1 ]",
     {**RESOURCE, "RequiredTag": ["GPU"]}, NO),
    ("resource RequiredTag the job has", '[ Tags = { "GPU" } ]',
     {**RESOURCE, "RequiredTag": ["GPU"]}, MATCH),
    ("RequiredTag MultiProcessor met by derived tag", "[ NumberOfProcessors = 4 ]",
     {**RESOURCE, "RequiredTag": ["MultiProcessor"]}, MATCH),
    # CPU time and memory, both sides of equal.
    ("CPUTime equal", "[ CPUTime = 1000000 ]", RESOURCE, MATCH),
    ("CPUTime above", "[ CPUTime = 1000001 ]", RESOURCE, NO),
    ("no CPUTime: 86400 asked", "[ ]", {**RESOURCE, "CPUTime": 86399}, NO),
    ("resource without CPUTime matches nothing", "[ ]",
     {k: v for k, v in RESOURCE.items() if k != "CPUTime"}, NO),
    ("MinRAM equal", "[ MinRAM = 16000 ]", RESOURCE, MATCH),
    ("MinRAM above", "[ MinRAM = 16001 ]", RESOURCE, NO),
    ("MaxRAM is a limit, not matched", "[ MaxRAM = 64000 ]", RESOURCE, MATCH),
    # Lists.
    ("Site list with ours", '[ Site = { "LCG.RAL.uk", "LCG.CERN.cern" } ]', RESOURCE, MATCH),
    ("Site list without ours", '[ Site = { "LCG.RAL.uk", "LCG.PIC.es" } ]', RESOURCE, NO),
    ("Site ANY", '[ Site = "ANY" ]', RESOURCE, MATCH),
    ("Site comma-separated", '[ Site = "LCG.RAL.uk, LCG.CERN.cern" ]', RESOURCE, MATCH),
    ("BannedSite ours", '[ BannedSite = { "LCG.CERN.cern" } ]', RESOURCE, NO),
    ("BannedSite other", '[ BannedSite = { "LCG.RAL.uk" } ]', RESOURCE, MATCH),
    ("Platform list with ours", '[ Platform = { "x86_64_glibc-2.34", "aarch64" } ]',
     RESOURCE, MATCH),
    ("Platform list without ours", '[ Platform = { "aarch64" } ]', RESOURCE, NO),
    ("Platform asked, resource has none", '[ Platform = "x86_64_glibc-2.34" ]',
     {k: v for k, v in RESOURCE.items() if k != "Platform"}, NO),
    ("GridCE", '[ GridCE = { "ce2.cern.ch" } ]', RESOURCE, NO),
    ("JobType asked, resource has none", '[ JobType = "User" ]', RESOURCE, NO),
    # Cannot be read.
    ("type error", '[ NumberOfProcessors = "four" ]', RESOURCE, UNREADABLE),
    ("CPUTime a list", "[ CPUTime = { 1, 2 } ]", RESOURCE, UNREADABLE),
    ("syntax error", "[ NumberOfProcessors = ; ]", RESOURCE, UNREADABLE),
    ("unclosed", "[ NumberOfProcessors = 4;", RESOURCE, UNREADABLE),
    ("text after the ad", "[ NumberOfProcessors = 4 ] junk", RESOURCE, UNREADABLE),
    ("Requirements not a section", '[ Requirements = "x" ]', RESOURCE, UNREADABLE),
]


@pytest.mark.parametrize(("jdl", "resource", "expected"),
                         [case[1:] for case in DIRAC_CASES],
                         ids=[case[0] for case in DIRAC_CASES])
def test_dirac_requirements(jdl, resource, expected):
    verdict = dirac.dirac_requirements(jdl, resource)
    assert outcome(verdict) == expected, verdict
    if expected == UNREADABLE:
        assert "\n" not in verdict.unreadable and verdict.unreadable


def test_dirac_explain():
    verdict = dirac.dirac_requirements(
        '[ NumberOfProcessors = 16; CPUTime = 2000000; Site = { "LCG.RAL.uk" } ]',
        RESOURCE, explain=True)
    assert verdict.reasons[0].startswith("the job's tags 16Processors are not among")
    assert verdict.reasons[1:] == [
        "CPUTime: the job's 2000000 > the resource's 1000000",
        "Site: the resource's LCG.CERN.cern is not among LCG.RAL.uk"]
    type_error = dirac.dirac_requirements('[ NumberOfProcessors = "four" ]', RESOURCE)
    assert type_error.unreadable == "NumberOfProcessors = 'four' is not a whole number"


def test_many_jdls_against_one_resource():
    verdicts = dirac.dirac_requirements_many(
        ["[ NumberOfProcessors = 8 ]", "[ NumberOfProcessors = 9 ]", "[ x = ]"], RESOURCE)
    assert [outcome(v) for v in verdicts] == [MATCH, NO, UNREADABLE]


def test_missing_library_is_one_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "classad2", None)
    with pytest.raises(match.MatchUnavailable, match=r"pip install 'mjf-hooks\[match\]'"):
        classad.classad_requirements("true", {})


def test_importing_the_module_does_not_load_the_library():
    import subprocess

    code = "import sys, mjf_hooks.match; print('classad2' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"


def test_cost_per_requirement_for_ten_thousand():
    """The issue's speed figure: one call, 10,000 requirements, one slot (reported by
    `pytest -s`); a generous bound so a slow CI machine does not fail it."""
    expressions = [f"other.GlueHostBenchmarkSI00 > {n % 1000} ? other.GlueCEPolicyMaxCPUTime"
                   f" > {n} : other.GlueCEPolicyMaxCPUTime > {2 * n}" for n in range(10_000)]
    jdls = [f'[ NumberOfProcessors = {1 + n % 16}; CPUTime = {n * 100}; '
            f'Site = {{ "LCG.CERN.cern", "LCG.RAL.uk" }}; Tags = {{ "GPU" }} ]'
            for n in range(10_000)]
    started = time.perf_counter()
    classad.classad_requirements_many(expressions, glue(600, 1500))
    classad_cost = (time.perf_counter() - started) / len(expressions)
    started = time.perf_counter()
    dirac.dirac_requirements_many(jdls, RESOURCE)
    dirac_cost = (time.perf_counter() - started) / len(jdls)
    print(f"\nper requirement: ClassAd {classad_cost * 1e6:.1f} us, "
          f"DIRAC JDL {dirac_cost * 1e6:.1f} us")
    assert classad_cost < 0.002 and dirac_cost < 0.002


# --- deep and hostile requirements: never an exception, one line each ------------------

# HTCondor's ClassAd library evaluates recursively and gives up a few hundred operators
# deep: 500 `&&` terms raise ClassAdException out of its eval().
MEMORY_TERM = "other.GlueHostMainMemoryRAMSize >= 16000"


def chain(operator: str, terms: list[str]) -> str:
    return f" {operator} ".join(terms)


def test_a_chain_of_500_ands_is_judged_term_by_term():
    verdict = classad.classad_requirements(chain("&&", [MEMORY_TERM] * 500), SLOT)
    assert outcome(verdict) == MATCH, verdict
    assert len(verdict.warnings) == 1
    assert "HTCondor" in verdict.warnings[0] and "\n" not in verdict.warnings[0]
    terms = [MEMORY_TERM] * 499 + ["other.GlueHostMainMemoryRAMSize >= 16001"]
    verdict = classad.classad_requirements(chain("&&", terms), SLOT, explain=True)
    assert outcome(verdict) == NO
    assert verdict.reasons == ["`other.GlueHostMainMemoryRAMSize >= 16001` is false: "
                               "other.GlueHostMainMemoryRAMSize = 16000 >= 16001"]


def test_a_chain_of_500_ors_and_a_deep_conditional():
    falses = ["other.MJF_JOB_ALLOCATED_CPU > 8"] * 499
    assert outcome(classad.classad_requirements(chain("||", [*falses, MEMORY_TERM]), SLOT)) \
        == MATCH
    assert outcome(classad.classad_requirements(chain("||", falses * 2), SLOT)) == NO
    deep = f"other.MJF_JOB_ALLOCATED_CPU == 8 ? ({chain('&&', [MEMORY_TERM] * 600)}) : false"
    assert outcome(classad.classad_requirements(deep, SLOT)) == MATCH
    # Mixed: && binds tighter than ||, as in the library.
    mixed = chain("||", [chain("&&", ["true"] * 300 + ["false"])] * 3 + [
        chain("&&", ["true"] * 300)])
    assert outcome(classad.classad_requirements(mixed, SLOT)) == MATCH
    # An attribute the slot lacks, deep in the chain: undefined, no match, named.
    lacks = chain("&&", [MEMORY_TERM] * 300 + ["other.MJF_JOB_GPUS >= 1"] + ["true"] * 300)
    verdict = classad.classad_requirements(lacks, SLOT, explain=True)
    assert outcome(verdict) == NO
    assert verdict.reasons == ["`other.MJF_JOB_GPUS >= 1` is undefined: the slot has no "
                               "MJF_JOB_GPUS"]


def test_what_cannot_be_judged_in_parts_is_one_unreadable_line():
    for text in (" + ".join(["1"] * 600) + " > 0", "!" * 480 + "true",
                 chain("&&", [MEMORY_TERM] * 400 + ['other.GlueHostOperatingSystemName > 3']),
                 "(" * 5000 + "true" + ")" * 5000):
        verdict = classad.classad_requirements(text, SLOT, explain=True)
        assert outcome(verdict) == UNREADABLE, text[:40]
        assert "\n" not in verdict.unreadable and len(verdict.unreadable) < 400


# The library's values and the fold's: every atom ClassAd distinguishes in && and ||.
ATOMS = ["true", "false", "undefined", "error", "0", "1", "2.5", "0.0", '"s"', "{ 1 }",
         "[ a = 1 ]", "1/0", "other.MJF_JOB_ALLOCATED_CPU == 8", "other.Nothing > 1"]


def _expressions():
    from hypothesis import strategies as st

    atom = st.sampled_from(ATOMS)

    def combine(children):
        return st.one_of(
            st.tuples(st.sampled_from(["&&", "||"]), st.lists(children, min_size=2,
                                                                max_size=6)).map(
                lambda pair: chain(pair[0], pair[1])),
            children.map(lambda text: f"({text})"),
            st.tuples(children, children, children).map(lambda t: f"{t[0]} ? {t[1]} : {t[2]}"))
    return st.recursive(atom, combine, max_leaves=30)


def test_judging_in_parts_gives_the_library_s_own_value():
    """The fold over a chain's terms is the library's logic, value for value, on every
    expression short enough for the library to evaluate whole."""
    import classad2  # the autouse fixture requires it
    from hypothesis import given, settings
    slot = classad.ClassAdSlot(SLOT)

    def deep(text):  # every chain in parts, at every level, not only where the library fails
        value = slot._in_parts(text, deep)
        return slot._evaluate(text) if value is None else value

    @settings(max_examples=400, deadline=None)
    @given(_expressions())
    def check(text):
        whole = slot._evaluate(text)
        parts = deep(text)
        if isinstance(whole, classad2.Value) or isinstance(parts, classad2.Value):
            assert parts == whole and type(parts) is type(whole), (text, whole, parts)
        elif isinstance(whole, bool):
            assert parts is whole, (text, whole, parts)
        else:  # a branch of ?: that is no truth value: the same value
            assert str(parts) == str(whole), (text, whole, parts)
    check()


def test_long_chains_have_the_verdict_of_their_short_equivalent():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    slot = classad.ClassAdSlot(SLOT)

    @settings(max_examples=60, deadline=None)
    @given(st.sampled_from(["&&", "||"]), st.lists(st.sampled_from(ATOMS), min_size=1,
                                                   max_size=8),
           st.integers(min_value=450, max_value=900))
    def check(operator, atoms, length):
        neutral = "true" if operator == "&&" else "false"
        short = slot.requirements(chain(operator, [neutral, *atoms]))
        long = slot.requirements(chain(operator, [neutral] * length + atoms))
        assert (long.matched, long.unreadable is None) == (short.matched,
                                                            short.unreadable is None)
    check()


def test_hostile_text_is_never_an_exception():
    from hypothesis import example, given, settings
    from hypothesis import strategies as st

    slot = classad.ClassAdSlot(SLOT)
    pieces = st.sampled_from(["(", ")", "[", "]", "{", "}", "&&", "||", "?", ":", "!", "-",
                              '"', "'", "/*", "*/", "\\", "\x00", "\ud800", "é", "1e400",
                              "9" * 400, "other.", "TARGET", "strcat(", "regexp(", " ",
                              "\n", ",", ";", "=", "==", "=?=", "is", "true", "x"])
    text = st.one_of(st.text(max_size=200), st.lists(pieces, max_size=300).map("".join))

    @settings(max_examples=500, deadline=None)
    @given(text, st.booleans())
    # The match's own ads, each many lines as the library prints them (found by this test).
    @example("root", False)
    @example("root == 1 && my == 2", True)
    @example('"' + "9" * 600 + '"', False)  # a long value, quoted whole before
    def check(expression, explain):
        verdict = slot.requirements(expression, explain)
        assert verdict.exit_code in (0, 1, 2)
        if verdict.unreadable is not None:
            assert "\n" not in verdict.unreadable and len(verdict.unreadable) < 1000
        assert all("\n" not in reason for reason in verdict.reasons)
    check()


def test_a_megabyte_of_unclosed_comments_is_read_in_linear_time():
    started = time.perf_counter()
    verdict = classad.classad_requirements("true && " + "/*" * 500_000, SLOT)
    assert outcome(verdict) == UNREADABLE
    assert time.perf_counter() - started < 5


@pytest.mark.parametrize("jdl", [
    "[ CPUTime = " + " + ".join(["1"] * 600) + " ]",
    '[ CPUTime = "' + "9" * 5000 + '" ]',
    '[ NumberOfProcessors = "' + "9" * 400 + '" ]',
    "[ MinRAM = 1e400 ]",
    "[ CPUTime = -5 ]",
    "[ Requirements = [ Memory = " + " + ".join(["1"] * 600) + " ] ]",
    "[ " + "a = [ " * 3000 + "b = 1" + " ]" * 3000 + " ]",
    "[ Tags = {" + ", ".join(['"x"'] * 50_000) + "} ]",
    "\x00\x01\x02 binary \xff",
])
def test_hostile_jdl_is_unreadable_or_judged_never_an_exception(jdl):
    verdict = dirac.dirac_requirements(jdl, RESOURCE, explain=True)
    assert verdict.exit_code in (1, 2), verdict
    if verdict.unreadable is not None:
        assert "\n" not in verdict.unreadable and len(verdict.unreadable) < 1000


def test_what_would_crash_the_library_is_never_handed_to_it():
    """HTCondor's ClassAd library dies (SIGSEGV) printing ~50,000 chained operators and
    parsing ~200,000: in a child process, so that a crash fails this test alone."""
    import subprocess

    code = ("from mjf_hooks.match import classad, dirac\n"
            "slot, resource = classad.ClassAdSlot({}), dirac.DiracResource({'CPUTime': 1})\n"
            "for n in (60_000, 300_000):\n"
            "    for text in (f'[ Requirements = {\"1&&\" * n}1; ]', f'[ X = {\"1+\" * n}1; ]'):\n"
            "        print(dirac.jdl_requirements(text, slot, resource).unreadable)\n"
            "    print(slot.requirements('1&&' * n + '1').unreadable)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert len(lines) == 6 and all(f"more than the {classad.MAX_OPERATORS}" in line
                                   for line in lines), lines


def test_a_glite_jdl_with_500_terms_is_judged():
    slot, resource = classad.ClassAdSlot(SLOT), dirac.DiracResource(RESOURCE)
    jdl = f'[ Executable = "x"; Requirements = {chain("&&", [MEMORY_TERM] * 500)}; ]'
    assert outcome(dirac.jdl_requirements(jdl, slot, resource)) == MATCH
