"""One config for a cluster: drop-ins read after the main file, and sections for some
nodes only (by host name pattern, by CPU model); which line applies, and what is a
problem (docs/configuration.md, "One config for a cluster")."""

from __future__ import annotations

import fnmatch

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mjf_hooks import config
from mjf_hooks.config import Node, glob_match
from mjf_hooks.config_report import problems
from mjf_hooks.errors import SiteInputError

EPYC = "AMD EPYC 7543 32-Core Processor"
XEON = "Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz"


@pytest.fixture
def site(tmp_path):
    """A main config file and its drop-in directory: write(name, text) writes the main
    file (name None) or a drop-in."""
    main = tmp_path / "mjf.conf"
    main.write_text("[mjf]\nlog = none\n")
    (tmp_path / "mjf.conf.d").mkdir()

    def write(name: str | None, text: str) -> None:
        (main if name is None else tmp_path / "mjf.conf.d" / name).write_text(text)

    write.main = str(main)
    return write


def read(path: str) -> str:
    with open(path) as handle:
        return handle.read()


def drop_ins(main: str) -> tuple[tuple[str, str], ...]:
    return tuple((path, read(path)) for path in config.drop_in_paths(main))


def loaded(site, host="wn-001.example.org", cpu=EPYC, **kwargs) -> config.Config:
    return config.parse(read(site.main), site.main, drop_ins=drop_ins(site.main),
                        node=Node(host, cpu), **kwargs)


def test_drop_ins_are_read_in_name_order_after_the_main_file_the_last_one_winning(site):
    site(None, "[mjf]\nlog = none\n[machinefeatures]\ngrace_secs = 60\n")
    site("20-late.conf", "[machinefeatures]\ngrace_secs = 120\n")
    site("10-early.conf", "[machinefeatures]\ngrace_secs = 90\nhs06 = 10\n")
    site("30-editor.conf~", "[machinefeatures]\ngrace_secs = 1\n")
    site(".hidden.conf", "[machinefeatures]\ngrace_secs = 2\n")
    site("40-new.conf.rpmnew", "[machinefeatures]\ngrace_secs = 3\n")
    assert [path.rsplit("/", 1)[1] for path in config.drop_in_paths(site.main)] == [
        "10-early.conf", "20-late.conf"]
    assert loaded(site).machine == {"grace_secs": 120, "hs06": 10}
    assert config.load(site.main).machine == {"grace_secs": 120, "hs06": 10}


def test_a_config_without_a_drop_in_directory_is_the_main_file_alone(tmp_path):
    main = tmp_path / "mjf.conf"
    main.write_text("[machinefeatures]\nhs06 = 5\n")
    assert config.drop_in_paths(str(main)) == []
    assert config.load(str(main)).machine == {"hs06": 5}


def test_a_missing_main_file_still_has_its_drop_ins_read(tmp_path):
    (tmp_path / "mjf.conf.d").mkdir()
    (tmp_path / "mjf.conf.d" / "site.conf").write_text("[machinefeatures]\nhs06 = 7\n")
    assert config.load(str(tmp_path / "mjf.conf")).machine == {"hs06": 7}


def test_an_unreadable_drop_in_is_a_config_problem(site):
    site("10-site.conf", "[machinefeatures]\nhs06 = 7\n")
    site("20-bad.conf", "")
    path = f"{site.main}.d/20-bad.conf"
    with open(path, "wb") as handle:
        handle.write(b"[machinefeatures]\nhs06 = \xff\n")
    with pytest.raises(SiteInputError, match=r"20-bad\.conf: not UTF-8"):
        config.load(site.main)
    _, found = problems(site.main, missing_ok=False)
    assert len(found) == 1 and "20-bad.conf: not UTF-8" in found[0]


HS06_TABLE = f"""[machinefeatures]
hs06_per_cpu = 10
[machinefeatures cpu="{EPYC}"]
hs06_per_cpu = 18.5
[machinefeatures cpu="{XEON}"]
hs06_per_cpu = 12.25
[machinefeatures host=wn-gpu-*]
hs06_per_cpu = 20
"""


@pytest.mark.parametrize(("host", "cpu", "per_cpu", "from_line"), [
    ("wn-001", EPYC, 18.5, 4),  # the CPU model's
    ("wn-002.example.org", XEON, 12.25, 6),
    ("wn-003", "ARM Neoverse", 10, 2),  # no section for its model: the plain one
    ("wn-004", "", 10, 2),  # a kernel naming no model
    ("wn-gpu-07.example.org", EPYC, 20, 8),  # its host's section, over its CPU model's
    ("WN-GPU-08", XEON, 20, 8),  # host names match whatever their case
])
def test_the_most_specific_section_that_applies_wins(site, host, cpu, per_cpu, from_line):
    site("50-hs06.conf", HS06_TABLE)
    origins: dict = {}
    assert loaded(site, host, cpu, origins=origins).hs06_per_cpu == per_cpu
    assert origins[("machinefeatures", "hs06_per_cpu")][:2] == (
        f"{site.main}.d/50-hs06.conf", from_line)


def test_the_section_a_value_came_from_is_shown_as_written(site):
    site("50-hs06.conf", HS06_TABLE)
    origins: dict = {}
    loaded(site, "wn-001", EPYC, origins=origins)
    assert origins[("machinefeatures", "hs06_per_cpu")][2] == f'machinefeatures cpu="{EPYC}"'
    loaded(site, "wn-gpu-1", EPYC, origins=origins)
    assert origins[("machinefeatures", "hs06_per_cpu")][2] == "machinefeatures host=wn-gpu-*"


def test_a_later_file_overrides_the_same_section_of_an_earlier_one(site):
    site("50-hs06.conf", HS06_TABLE)
    site("60-remeasured.conf", f'[machinefeatures cpu="{EPYC}"]\nhs06_per_cpu = 19\n')
    assert loaded(site, "wn-001", EPYC).hs06_per_cpu == 19


def test_two_sections_of_one_level_that_both_apply_and_disagree_are_a_problem(site):
    site("50-hs06.conf", "[machinefeatures host=wn-*]\nhs06_per_cpu = 11\n"
                         "[machinefeatures host=*-gpu-*]\nhs06_per_cpu = 12\n")
    with pytest.raises(SiteInputError, match=r"50-hs06.conf, line 4: \[machinefeatures "
                       r"host=\*-gpu-\*\] hs06_per_cpu = '12': clashes with .*line 2"):
        loaded(site, "wn-gpu-1", EPYC)
    # Where only one applies, or both agree, there is nothing to choose.
    assert loaded(site, "wn-001", EPYC).hs06_per_cpu == 11
    site("50-hs06.conf", "[machinefeatures host=wn-*]\nhs06_per_cpu = 11\n"
                         "[machinefeatures host=*-gpu-*]\nhs06_per_cpu = 11\n")
    assert loaded(site, "wn-gpu-1", EPYC).hs06_per_cpu == 11


def test_a_wrong_value_is_a_problem_on_every_node_not_only_where_it_applies(site):
    site("50-hs06.conf", f'[machinefeatures cpu="{XEON}"]\nhs06_per_cpu = lots\n')
    with pytest.raises(SiteInputError, match=r"line 2: \[machinefeatures cpu=\"Intel.*"
                                             r"hs06_per_cpu = 'lots'"):
        loaded(site, "wn-001", EPYC)


@pytest.mark.parametrize(("header", "why"), [
    ("[mjf host=wn-1]", "applies to every node"),
    ("[machinefeatures rack=12]", "only host=PATTERN or cpu=PATTERN"),
    ("[machinefeatures host=]", "only host=PATTERN or cpu=PATTERN"),
    ("[machinefeatures host wn-1]", "only host=PATTERN or cpu=PATTERN"),
    ('[machinefeatures cpu="AMD "EPYC""]', "only host=PATTERN or cpu=PATTERN"),
    ("[nope host=wn-1]", "unknown section"),
])
def test_a_section_header_that_cannot_be_read_is_refused_with_its_lines(site, header, why):
    site("10-site.conf", f"{header}\nhs06 = 3\n")
    with pytest.raises(SiteInputError, match=why):
        loaded(site)
    _, found = problems(site.main, missing_ok=False)
    assert len(found) == 1 and "10-site.conf, line 1" in found[0]  # its line not read


def test_config_check_lists_the_problems_of_every_file_in_the_order_read(site):
    site(None, "[mjf]\nbase_dir = relative\n")
    site("20-b.conf", "[machinefeatures]\nhs06 = -1\n")
    site("10-a.conf", "[nope]\nx = 1\n")
    _, found = problems(site.main, missing_ok=False)
    assert [problem.split(":")[0].rsplit("/", 1)[1] for problem in found] == [
        "mjf.conf, line 2", "10-a.conf, line 1", "20-b.conf, line 2"]


def test_config_check_sees_a_clash_as_the_node_named_sees_it(site):
    site("50-hs06.conf", "[machinefeatures host=wn-*]\nhs06_per_cpu = 11\n"
                         "[machinefeatures host=*-gpu-*]\nhs06_per_cpu = 12\n")
    assert problems(site.main, False, Node("wn-001", EPYC))[1] == []
    assert "clashes with" in problems(site.main, False, Node("wn-gpu-2", EPYC))[1][0]


def test_the_cpu_model_is_read_only_where_a_section_asks(site, monkeypatch):
    from mjf_hooks.probe import cpu

    asked = []
    monkeypatch.setattr(cpu, "model_name", lambda: asked.append(1) or EPYC)
    site("50-hs06.conf", "[machinefeatures host=wn-*]\nhs06_per_cpu = 11\n")
    config.parse(read(site.main), site.main, drop_ins=drop_ins(site.main))
    assert asked == []
    site("50-hs06.conf", HS06_TABLE)
    assert config.parse("", site.main, drop_ins=drop_ins(site.main),
                        node=Node("wn-1")).hs06_per_cpu == 18.5
    assert asked == [1]  # once, however many sections ask


def test_the_cpu_model_is_the_kernels_first_model_name(fs):
    from mjf_hooks.probe import cpu

    fs.create_file("/proc/cpuinfo", contents=(
        f"processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: {EPYC}\n\n"
        f"processor\t: 1\nmodel name\t: {EPYC}\n"))
    assert cpu.model_name() == EPYC
    fs.remove_object("/proc/cpuinfo")
    fs.create_file("/proc/cpuinfo", contents="processor\t: 0\nCPU part\t: 0xd0c\n")
    assert cpu.model_name() is None


# Patterns of the characters glob_match gives a meaning (* and ?) and of ordinary ones;
# no [ ], whose meaning fnmatch's differs from ours (ours: themselves).
PATTERN_CHARS = st.sampled_from("ab-.*?")


@given(st.text(PATTERN_CHARS, max_size=8), st.text(st.sampled_from("ab-."), max_size=8))
def test_glob_match_agrees_with_fnmatch_where_both_have_a_meaning(pattern, text):
    assert glob_match(pattern, text) == fnmatch.fnmatchcase(text, pattern)


def test_glob_match_takes_brackets_and_parentheses_as_themselves():
    assert glob_match("Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz", XEON)
    assert glob_match("Intel(R) Xeon(R) *", XEON)
    assert glob_match("wn[1]", "wn[1]") and not glob_match("wn[1]", "wn1")
