"""Site configuration: defaults, every option, and the errors an admin sees."""

import os
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from mjf_hooks import config, spec
from mjf_hooks.errors import SiteInputError
from tests.conftest import CHECKOUT_ROOT, taskprolog_copy


def test_missing_file_means_all_defaults(tmp_path):
    loaded = config.load(str(tmp_path / "absent.conf"))
    assert loaded.base_dir == "/run/mjf"
    assert loaded.on_error == "continue"
    assert loaded.log == ("syslog", "stderr")
    assert not loaded.legacy_keys
    assert (loaded.dir_mode, loaded.file_mode) == (0o755, 0o644)
    assert loaded.machine == {} and loaded.job == {}


def test_path_comes_from_mjf_config_variable():
    assert config.config_path({"MJF_CONFIG": "/x/y.conf"}) == "/x/y.conf"
    assert config.config_path({}) == "/etc/mjf/mjf.conf"


def test_every_option_is_read(tmp_path):
    path = tmp_path / "mjf.conf"
    path.write_text("""
# site config
[mjf]
base_dir = /var/run/mjf/   ; trailing slash is normalised
on_error = fail
log = syslog
legacy_keys = yes
dir_mode = 0750
file_mode = 0640
command_timeout = 2.5

[machinefeatures]
HS06 = 2400.5   # measured 2025
grace_secs = 3600
total_cpu = 64

[jobfeatures]
grace_secs_job = 600
scratch_limit_bytes = 100000000000
max_swap_bytes = 0
wall_limit_secs = 172800
""")
    loaded = config.load(str(path))
    assert loaded.base_dir == "/var/run/mjf"
    assert loaded.on_error == "fail" and loaded.log == ("syslog",) and loaded.legacy_keys
    assert (loaded.dir_mode, loaded.file_mode, loaded.command_timeout_secs) == (0o750, 0o640, 2.5)
    assert loaded.machine == {"hs06": 2400.5, "grace_secs": 3600, "total_cpu": 64}
    assert loaded.job == {"grace_secs_job": 600, "scratch_limit_bytes": 100000000000,
                          "max_swap_bytes": 0, "wall_limit_secs": 172800}


def test_hs06_per_cpu_and_log_none():
    loaded = config.parse("[mjf]\nlog = none\n[machinefeatures]\nhs06_per_cpu = 12.5\n")
    assert loaded.hs06_per_cpu == 12.5 and loaded.log == ()


@pytest.mark.parametrize(("text", "expected"), [
    ("HEPSPEC", "HEPSPEC"), ("hepspec", "HEPSPEC"), ("HepSpec", "HEPSPEC"),
    ("HEPscore23", "HEPscore23"), ("hepscore23", "HEPscore23"), ("HEPSCORE23", "HEPscore23"),
    ("HEPscore23   ; since the 2024 purchase", "HEPscore23"),
])
def test_benchmark_is_read_in_any_case_and_kept_in_its_canonical_spelling(text, expected):
    loaded = config.parse(f"[machinefeatures]\nbenchmark = {text}\nhs06 = 1024\n")
    assert loaded.benchmark == expected
    assert loaded.machine == {"hs06": 1024}  # not a key: no machinefeatures/benchmark file


def test_benchmark_defaults_to_hepspec():
    assert config.parse("").benchmark == "HEPSPEC"
    assert config.parse("[machinefeatures]\nhs06 = 10\n").benchmark == "HEPSPEC"


@pytest.mark.parametrize("value", ["HS06", "hep-spec06", "HEPscore", "HEPscore20", "DB12", "",
                                   "HEPSPEC HEPscore23", "HEPSPEC,HEPscore23"])
def test_benchmark_other_values_are_refused_naming_file_line_key_and_the_allowed_ones(
        tmp_path, value):
    path = tmp_path / "mjf.conf"
    path.write_text(f"[mjf]\nlog = stderr\n[machinefeatures]\nbenchmark = {value}\n")
    with pytest.raises(SiteInputError) as raised:
        config.load(str(path))
    assert str(raised.value) == (
        f"{path}, line 4: [machinefeatures] benchmark = {value!r}: must be HEPSPEC or "
        "HEPscore23 (in any case): the benchmark the hs06 and hs06_job values come from")


def test_benchmark_belongs_to_machinefeatures():
    with pytest.raises(SiteInputError, match=r"\[jobfeatures\] benchmark = 'HEPscore23': "
                                             "is not an MJF key"):
        config.parse("[jobfeatures]\nbenchmark = HEPscore23\n")
    with pytest.raises(SiteInputError, match=r"line 3: \[machinefeatures\] benchmark is set "
                                             "twice"):
        config.parse("[machinefeatures]\nbenchmark = HEPSPEC\nbenchmark = HEPscore23\n")


@pytest.mark.parametrize(("text", "expected"), [
    ("[machinefeatures]\nhs07 = 1\n",
     r"line 2: \[machinefeatures\] hs07 = '1': is not an MJF key"),
    ("[machinefeatures]\nhs06 = fast\n",
     r"\[machinefeatures\] hs06 = 'fast': must be a non-negative"),
    ("[jobfeatures]\nwall_limit_secs = -5\n",
     r"wall_limit_secs = '-5': must be a non-negative whole"),
    ("[jobfeatures]\nwall_limit_secs = 1.5\n", "must be a non-negative whole number"),
    ("[jobfeatures]\ntotal_cpu = 4\n", r"is a machine key: put it in \[machinefeatures\]"),
    ("[machinefeatures]\nshutdowntime = 4\n", "is set per job or by `mjf drain`"),
    ("[jobfeatures]\njob_id = x\n", "is set per job"),
    ("[jobfeatures]\nallocated_cpu = 4\n", "is set per job"),
    ("[torque]\nx = 1\n", r"line 1: unknown section \[torque\]"),
    ("[slurm]\nx = 1\n", r"\[slurm\] x = '1': unknown option; \[slurm\] takes nodename, scontrol"),
    ("[slurm]\nscontrol = scontrol\n", "must be an absolute path"),
    ("hs06 = 1\n", "comes before any"),
    ("[mjf]\nbase_dir\n", "is not `key = value`"),
    ("[mjf\n", "is not a \\[section\\] header"),
    ("[mjf]\nbase_dir = relative/path\n", "must be an absolute path"),
    ("[mjf]\non_error = ignore\n", "must be `continue`"),
    ("[mjf]\nlog = file\n", "must be `syslog`, `stderr`"),
    ("[mjf]\nlegacy_keys = maybe\n", "must be yes or no"),
    ("[mjf]\nfile_mode = 0666\n", "may only narrow the default 0644"),
    ("[mjf]\ndir_mode = 0644\n", "must leave the owner able"),
    ("[mjf]\ndir_mode = rwx\n", "must be an octal mode"),
    ("[mjf]\ncommand_timeout = 0\n", "must be a positive number"),
    ("[mjf]\ncommand_timeout = 0.000\n", "must be a positive number"),
    ("[mjf]\ncommand_timeout = 0." + "0" * 400 + "1\n", "must be a positive number"),
    ("[mjf]\ncommand_timeout = 3600\n", "between 0 and 300"),
    ("[mjf]\ncommand_timeout = 300.01\n", "between 0 and 300"),
    ("[mjf]\ncommand_timeout = 1_0\n", r"command_timeout = '1_0': must be a plain number"),
    ("[mjf]\ncommand_timeout = \u0661\n", "must be a plain number"),
    ("[mjf]\ncommand_timeout = 1e2\n", "must be a plain number"),
    ("[mjf]\ncommand_timeout = nan\n", "must be a plain number"),
    ("[mjf]\ncommand_timeout = +5\n", "must be a plain number"),
    ("[machinefeatures]\nhs06_per_cpu = 1e300\n",
     r"line 2: \[machinefeatures\] hs06_per_cpu = '1e300': must be a plain number"),
    ("[machinefeatures]\nhs06_per_cpu = inf\n", "must be a plain number"),
    ("[machinefeatures]\nhs06_per_cpu = 1_0\n", "must be a plain number"),
    ("[machinefeatures]\nhs06_per_cpu = 0\n", "must be a positive number"),
    ("[machinefeatures]\nhs06_per_cpu = 0.00\n", "must be a positive number"),
    ("[machinefeatures]\nhs06_per_cpu = 10.125\n", "has more than two decimals"),
    ("[machinefeatures]\nhs06_per_cpu = 1000000.01\n", "is larger than 1000000 per processor"),
    ("[machinefeatures]\nhs06_per_cpu = 99999999999999999999.5\n", "is larger than 1000000"),
    ("[machinefeatures]\nhs06_per_cpu = 1000000\ntotal_cpu = 10000000\n",
     r"line 2: \[machinefeatures\] hs06_per_cpu = '1000000': hs06 = hs06_per_cpu x total_cpu = "
     r"1000000 x 10000000 would be 10000000000000 or more, too large to write exactly "
     r"\(total_cpu on line 3\)"),
    ("[machinefeatures]\nhs06 = 0.001\n",
     r"line 2: \[machinefeatures\] hs06 = '0.001': has more than two decimals: hs06 files are "
     r"written with at most two, so it would be written as 0$"),
    ("[jobfeatures]\nhs06_job = 12.345\n", "would be written as 12.35$"),
    ("[machinefeatures]\nhs06 = 99999999999999999999.5\n",
     r"hs06 = '99999999999999999999.5': is too large to write with its fraction: hs06 may have "
     r"a fraction below 10000000000000, and be a whole number up to 9223372036854775807"),
    ("[machinefeatures]\nhs06 = 10000000000000.5\n", "is too large to write with its fraction"),
    ("[machinefeatures]\nhs06 = 99999999999999999999.0\n", "is larger than 9223372036854775807"),
    ("[machinefeatures]\nhs06 = 99999999999999999999\n", "is larger than 9223372036854775807"),
    ("[machinefeatures]\nhs06 = 1_0\n", "must be a non-negative whole number"),
    ("[machinefeatures]\nhs06 = 1e3\n", "must be a non-negative"),
    ("[machinefeatures]\nhs06 = \u0661.5\n", "must be a non-negative number"),
    ("[machinefeatures]\ntotal_cpu = \u0661\n", "must be a non-negative whole number"),
    ("[mjf]\nbase_dir = /x/nonexistent/../base\n",
     r"line 2: \[mjf\] base_dir = '/x/nonexistent/../base': must not contain `..`: the sh "
     r"TaskProlog reads the path literally"),
    ("[mjf]\nbase_dir = /..\n", "must not contain `..`"),
    ("[mjf]\nbase_dir = /run/mjf/..\n", "must not contain `..`"),
    ("[slurm]\nscratch_dir = /scratch/../tmp\n", r"\[slurm\] scratch_dir = .*must not contain"),
    ("[mjf]\nbase_dir = /run/mjf\u2000\n", r"line 2: contains '\\u2000', a control character"),
    ("[mjf]\nbase_dir = /run/mjf\xa0# x\n", r"line 2: contains '\\xa0'"),
    ("[mjf]\x1cbase_dir = /run/mjf\n", r"line 1: contains '\\x1c'"),
    ("[mjf]\rbase_dir = /x\n", r"line 1: contains '\\r'"),
    ("[mjf]\nbase_dir = /x\u2028\n", r"line 2: contains '\\u2028'"),
    ("\u3000[mjf]\nbase_dir = /x\n", r"line 1: contains '\\u3000'"),
    ("[mjf]\nbase_dir = /a\nbase_dir = /b\n", r"line 3: \[mjf\] base_dir is set twice"),
    ("[mjf]\nfrobnicate = 1\n", "unknown option"),
])
def test_bad_config_names_file_line_section_key_and_reason(tmp_path, text, expected):
    path = tmp_path / "mjf.conf"
    path.write_text(text)
    with pytest.raises(SiteInputError, match=expected) as raised:
        config.load(str(path))
    assert str(raised.value).startswith(str(path))


def test_unreadable_and_binary_files_are_clear_errors(tmp_path):
    path = tmp_path / "mjf.conf"
    path.write_bytes(b"[mjf]\nbase_dir = /\xff\n")
    with pytest.raises(SiteInputError, match="not UTF-8"):
        config.load(str(path))
    with pytest.raises(SiteInputError, match="cannot read the config"):
        config.load(str(tmp_path))  # a directory


@given(st.text(max_size=200))
def test_any_text_is_either_a_config_or_a_site_input_error(text):
    try:
        config.parse(text, "/etc/mjf/mjf.conf")
    except SiteInputError as error:
        assert str(error).startswith("/etc/mjf/mjf.conf")


def test_shipped_example_parses_and_its_commented_values_are_valid():
    from tests.conftest import FIXTURES

    text = (FIXTURES.parent.parent / "contrib/mjf.conf.example").read_text()
    assert config.parse(text).base_dir == "/run/mjf"
    uncommented = "\n".join(
        line[2:] if line.startswith("# ") and " = " in line else line
        for line in text.splitlines()
    )
    loaded = config.parse(uncommented)
    assert loaded.machine["hs06"] == 1024.5 and loaded.job["max_swap_bytes"] == 0


# -- numbers: plain ASCII digits, written exactly as configured ------------------------------

NUMBER_OPTIONS = [("mjf", "command_timeout"), ("machinefeatures", "hs06_per_cpu"),
                  ("machinefeatures", "hs06"), ("jobfeatures", "hs06_job"),
                  ("machinefeatures", "total_cpu"), ("jobfeatures", "wall_limit_secs")]


def is_plain_number(text):
    whole, dot, fraction = text.partition(".")
    digits = "0123456789"
    return bool(whole) and all(c in digits for c in whole) and (
        not dot or (bool(fraction) and all(c in digits for c in fraction)))


def float_accepts(text):
    try:
        float(text)
    except ValueError:
        return False
    return True


# Texts float() takes: exponents, signs, `_`, inf/nan, inner spaces, non-ASCII digits.
FLOAT_TEXTS = st.one_of(
    st.floats().map(repr),
    st.floats().map(lambda number: f"{number:e}"),
    st.text(alphabet=st.sampled_from("0123456789._+-eE \tinfa\u0661\u06f5\u0967\uff11"),
            min_size=1, max_size=14),
    st.sampled_from(["1_0", "1e300", "1E3", "+5", "-0", "inf", "-Infinity", "NaN", "\u0661",
                     "\u0661.5", "1 ", "0x10", ".5", "5.", "1__0", "1.5e-3", "\uff15"]),
)


@given(st.sampled_from(NUMBER_OPTIONS), FLOAT_TEXTS)
def test_a_number_float_takes_but_not_plain_digits_is_refused_naming_the_line(option, text):
    assume(float_accepts(text) and "\n" not in text)
    assume(not is_plain_number(text.strip(" \t\r\v\f")))  # what the parser sees of the line
    section, key = option
    with pytest.raises(SiteInputError) as raised:
        config.parse(f"# site\n[{section}]\n{key} = {text}\n", "/etc/mjf/mjf.conf")
    assert str(raised.value).startswith("/etc/mjf/mjf.conf, line 3: ")


@pytest.mark.parametrize(("text", "expected"), [
    ("2400.50", 2400.5), ("2400.0", 2400), ("007.5", 7.5), ("0", 0), ("0.01", 0.01),
    ("9999999999999.99", 9999999999999.99), ("9223372036854775807.00", spec.MAX_INTEGER),
])
def test_a_static_decimal_is_kept_when_its_file_says_the_same(text, expected):
    loaded = config.parse(f"[machinefeatures]\nhs06 = {text}\n[jobfeatures]\nhs06_job = {text}\n")
    assert loaded.machine["hs06"] == expected and loaded.job["hs06_job"] == expected
    assert type(loaded.machine["hs06"]) is type(expected)


@given(st.integers(0, 10**13 - 1), st.integers(0, 99), st.integers(0, 3))
def test_decimals_with_two_places_and_13_digits_are_written_as_configured(whole, hundredths,
                                                                         zeros):
    text = f"{whole}.{hundredths:02d}" + "0" * zeros
    value = config.parse(f"[machinefeatures]\nhs06 = {text}\n").machine["hs06"]
    canonical = text.rstrip("0").rstrip(".")
    assert spec.format_value("hs06", value) == canonical


@given(st.integers(0, 10**13 - 1), st.integers(1, 10**6))
def test_a_third_decimal_is_refused_not_rounded_away(whole, thousandths):
    digits = f"{thousandths:06d}".rstrip("0")
    assume(len(digits) > 2)
    with pytest.raises(SiteInputError, match="has more than two decimals"):
        config.parse(f"[jobfeatures]\nhs06_job = {whole}.{digits}\n")


def test_plain_numbers_of_the_mjf_options_are_read():
    loaded = config.parse("[mjf]\ncommand_timeout = 300.000\n"
                          "[machinefeatures]\nhs06_per_cpu = 001000000.00\n")
    assert loaded.command_timeout_secs == 300 and loaded.hs06_per_cpu == 1000000
    assert config.parse("[mjf]\ncommand_timeout = 0.001\n").command_timeout_secs == 0.001


@given(st.integers(1, config.MAX_HS06_PER_CPU * 100), st.integers(1, 100000))
def test_hs06_per_cpu_times_any_plausible_cpu_count_is_written_exactly(hundredths, cpus):
    text = f"{hundredths // 100}.{hundredths % 100:02d}"
    loaded = config.parse(f"[machinefeatures]\nhs06_per_cpu = {text}\ntotal_cpu = {cpus}\n")
    product = hundredths * cpus  # in hundredths, exactly
    exact = f"{product // 100}.{product % 100:02d}".rstrip("0").rstrip(".")
    assert spec.format_value("hs06", loaded.hs06_per_cpu * cpus) == exact
    assert spec.format_value("hs06_job", loaded.hs06_per_cpu * cpus) == exact


# -- paths, and what the sh TaskProlog reads of the same file -----------------------------------

def test_paths_keep_dot_and_double_slash_normalisation_but_not_dot_dot():
    assert config.parse("[mjf]\nbase_dir = /x/./base//\n").base_dir == "/x/base"
    assert config.parse("[mjf]\nbase_dir = /x/..base/...\n").base_dir == "/x/..base/..."
    with pytest.raises(SiteInputError, match=r"must not contain `\.\.`"):
        config.parse("[htcondor]\nexecute_dir = /var/lib/condor/../execute\n")


def test_crlf_tabs_and_odd_characters_in_comments_are_fine():
    text = ("[mjf]\r\n\tbase_dir\t=\t/srv/mjf\t# \u2000 measured\xa02025\r\n"
            "# \x1c\u2028 a comment holds anything\r\nlog = stderr ; \x85\r\n")
    loaded = config.parse(text)
    assert loaded.base_dir == "/srv/mjf" and loaded.log == ("stderr",)


TASKPROLOG = str(CHECKOUT_ROOT / "bin/mjf-slurm-taskprolog")
# Line separators Python knows and `read` does not, and spaces [[:space:]] may not strip.
ODD = ["\r", "\v", "\f", "\x1c", "\x1e", "\x85", "\u2028", "\xa0", "\u2000", "\u3000", "\t", " "]


@st.composite
def config_texts(draw, base):
    """Config files around [mjf] base_dir, with odd separators and spaces anywhere."""
    paths = [f"{base}/a", f"{base}/b/", f"{base}//a", f"{base}/./b", f"{base}/x/../a"]
    pieces = st.one_of(
        st.sampled_from(["[mjf]", "[ MJF ]", "[slurm]", "[machinefeatures]", "# c", "; c"]),
        st.builds(lambda key, path, tail: f"{key} = {path}{tail}",
                  st.sampled_from(["base_dir", "BASE_DIR", "Base_Dir"]),
                  st.sampled_from(paths), st.sampled_from(["", " # c", "\t; c", *ODD])),
        st.sampled_from(ODD),
    )
    joins = st.sampled_from(["\n", "\n", "\r\n", *ODD])
    parts = draw(st.lists(st.tuples(pieces, joins), min_size=1, max_size=6))
    return "".join(piece + join for piece, join in parts)


@pytest.mark.parametrize("shell", ["dash", "bash"])
@pytest.mark.parametrize("locale", ["C", "C.UTF-8"])
@pytest.mark.parametrize("kept", [False, True], ids=["read", "kept"])
def test_the_sh_taskprolog_finds_the_base_dir_python_reads(shell, locale, kept):
    """Whenever Python accepts the config, the TaskProlog exports that base_dir's job:
    reading the config itself, or (``kept``) sourcing what the Prolog kept of it as the
    default config."""
    from mjf_hooks.hooks.slurm import keep_taskprolog_settings

    with tempfile.TemporaryDirectory() as base:
        for name in ("a", "b"):
            os.makedirs(f"{base}/{name}/jobs/7/jobfeatures")
        os.mkdir(f"{base}/run")
        taskprolog, env = TASKPROLOG, {"MJF_CONFIG": f"{base}/mjf.conf"}
        if kept:  # a copy whose default config is the test's, and whose kept file too
            taskprolog = str(taskprolog_copy(Path(base, "taskprolog"), f"{base}/run/mjf-hooks",
                                             f"{base}/mjf.conf"))
            env = {}

        @settings(max_examples=60, deadline=None)
        @given(config_texts(base))
        # Most drawn texts are refused: these two, always tried, are read.
        @example(f"[ MJF ]\r\nBase_Dir = {base}//a\t; c\n")
        @example(f"[slurm]\n[mjf]\nbase_dir = {base}/./b/ # c")
        def check(text):
            try:
                python_base = config.parse(text).base_dir
            except SiteInputError:
                return  # no hook writes anything: the TaskProlog finds no job and exports nothing
            with open(f"{base}/mjf.conf", "w", encoding="utf-8") as handle:
                handle.write(text)
            if kept:
                keep_taskprolog_settings(config.parse(text, f"{base}/mjf.conf"), "wn1",
                                         f"{base}/run/mjf-hooks", f"{base}/mjf.conf")
            if python_base.startswith(base):  # where the hooks would have made the job's
                os.makedirs(f"{python_base}/jobs/7/jobfeatures", exist_ok=True)
            result = subprocess.run(
                [shell, taskprolog], capture_output=True, timeout=30, check=True,
                env={"PATH": "/usr/bin:/bin", "LC_ALL": locale, "SLURM_JOB_ID": "7",
                     "SLURMD_NODENAME": "wn1", **env})
            exported = result.stdout.decode("utf-8", "replace").splitlines()
            if python_base.startswith(base):
                assert len(exported) == 2, (text, python_base, exported)
                jobfeatures = exported[1].split("=", 1)[1]
                assert os.path.samefile(jobfeatures, f"{python_base}/jobs/7/jobfeatures")
            else:  # the default /run/mjf: the TaskProlog must not have read one of ours
                assert not any(base in line for line in exported), (text, exported)

        check()


@pytest.mark.parametrize(("value", "ok"), [
    ("vm24", True), ("wn-001.example.org", True), ("node_7", True),
    ("", False), (".hidden", False), ("-n", False), ("a b", False), ("a/b", False),
    ("nœud", False),
])
def test_a_node_or_cell_name_is_a_plain_name(tmp_path, value, ok):
    path = tmp_path / "mjf.conf"
    path.write_text(f"[slurm]\nnodename = {value}\n[gridengine]\nsge_cell = {value}\n")
    if ok:
        loaded = config.load(str(path))
        assert loaded.backend["slurm"]["nodename"] == loaded.backend["gridengine"]["sge_cell"] \
            == value
    else:
        with pytest.raises(SiteInputError, match="must be a name of letters"):
            config.load(str(path))


def test_a_file_an_admin_named_must_be_there_and_the_default_need_not(tmp_path, monkeypatch):
    typo = str(tmp_path / "x.cnof")
    with pytest.raises(SiteInputError, match=f"^{typo}: cannot read the config: No such file"):
        config.load_named(typo)
    with pytest.raises(SiteInputError, match=f"^{typo}: cannot read the config"):
        config.require_readable(typo)
    config.require_readable(None)  # nothing named: nothing to read
    assert config.load(typo).base_dir == "/run/mjf"  # a hook's load: all defaults
    monkeypatch.setattr(config, "DEFAULT_PATH", typo)
    assert config.load_named(None).base_dir == "/run/mjf"


def test_the_file_named_is_the_option_else_mjf_config():
    assert config.named_path("/a.conf", {"MJF_CONFIG": "/b.conf"}) == "/a.conf"
    assert config.named_path(None, {"MJF_CONFIG": "/b.conf"}) == "/b.conf"
    assert config.named_path(None, {"MJF_CONFIG": ""}) is None
    assert config.named_path(None, {}) is None


@given(st.text(max_size=200))
@example("[mjf]\nbase_dir = x\n[nope]\nlog = y\n[mjf]\nbase_dir = /a\nbase_dir = /b\n")
def test_listing_every_problem_starts_with_the_one_a_hook_stops_at(text):
    found: list[str] = []
    listed = config.parse(text, "/etc/mjf/mjf.conf", problems=found)
    try:
        config.parse(text, "/etc/mjf/mjf.conf")
    except SiteInputError as error:
        assert found[0] == str(error)
    else:
        assert found == []
        assert vars_of(listed) == vars_of(config.parse(text, "/etc/mjf/mjf.conf"))


def vars_of(loaded: config.Config) -> dict:
    return {name: getattr(loaded, name) for name in config.Config.__slots__}


def test_every_problem_is_listed_and_the_valid_options_applied():
    found: list[str] = []
    loaded = config.parse("[mjf]\nbase_dir = rel\nlog = stderr\n[nope]\nbase_dir = /x\n"
                          "[machinefeatures]\nhs06 = 1.234\ngrace_secs = 60\n"
                          "grace_secs = 70\n", "/c", problems=found)
    assert [problem.split(":")[0] for problem in found] == [
        "/c, line 2", "/c, line 4", "/c, line 7", "/c, line 9"]  # not line 5: in [nope]
    assert loaded.log == ("stderr",) and loaded.machine == {"grace_secs": 60}


def test_origins_are_recorded_only_where_asked():
    origins: dict = {}
    config.parse("[mjf]\n\nlog = stderr\n[MachineFeatures]\nhs06 = 10\n", "/c",
                 origins=origins)
    assert origins == {("mjf", "log"): ("/c", 3, "mjf"),
                       ("machinefeatures", "hs06"): ("/c", 5, "machinefeatures")}
