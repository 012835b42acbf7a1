"""`mjf publish`: the facts and names chosen, what differs, and the commands run, against
fake batch-system commands that keep what they were told (the real ones:
tests/integration/test_publish_*.py)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mjf_hooks import batch, config, publish
from mjf_hooks.external_command import CommandError
from mjf_hooks.publish import gridengine, pbs, slurm
from tests.conftest import LeveledLog

# `qconf -se vm` of the Son of Grid Engine 8.1.9 cell, its load values cut short.
QCONF_SE = """hostname              vm
load_scaling          NONE
complex_values        {values}
load_values           arch=lx-amd64,num_proc=2,mem_total=3925.378906M, \\
                      swap_total=0.000000M,virtual_total=3925.378906M
processors            2
user_lists            NONE
xuser_lists           NONE
projects              NONE
xprojects             NONE
usage_scaling         NONE
report_variables      NONE
"""


class FakeGridEngine:
    """``qconf -se``/``-mattr``/``-aattr`` on one host's complex_values, recording every
    command; ``refuse``: complexes the cell lacks; ``silent``: it says so and exits 0."""

    def __init__(self, values: dict[str, str] | None = None, refuse=(), silent=False):
        self.values = dict(values or {})
        self.refuse, self.silent = set(refuse), silent
        self.commands: list[list[str]] = []

    def __call__(self, argv, timeout, env, log, unknown):
        self.commands.append(argv)
        assert argv[0] == "/usr/bin/qconf" and env["SGE_ROOT"]
        if argv[1] == "-se":
            shown = ",".join(f"{k}={v}" for k, v in self.values.items()) or "NONE"
            return QCONF_SE.format(values=shown)
        assert argv[1:4] == [argv[1], "exechost", "complex_values"] and argv[5] == "vm"
        pairs = dict(pair.split("=") for pair in argv[4].split(","))
        if set(pairs) & self.refuse:
            if self.silent:
                return "denied: complex attribute does not exist\n"
            log.warning(f"{argv[0]} exited with status 1: {unknown}")
            return None
        assert all((name in self.values) == (argv[1] == "-mattr") for name in pairs)
        self.values.update(pairs)
        return ""

    def writes(self) -> list[list[str]]:
        return [argv for argv in self.commands if argv[1] != "-se"]


def site(text: str = "") -> config.Config:
    return config.parse("[mjf]\nbatch_systems = gridengine\n[machinefeatures]\nhs06 = 62.5\n"
                        "total_cpu = 4\n" + text)


@pytest.fixture
def node(monkeypatch):
    monkeypatch.setattr(batch, "node_name", lambda module, options: "vm.example.org")


def run(fake, conf: config.Config, monkeypatch, dry_run=False):
    monkeypatch.setattr(publish, "ask", fake)
    log = LeveledLog()
    machine = {"hs06": "62.5", "total_cpu": "4"}
    return publish.publish(conf, log, machine, dry_run), log


# --- which facts, under which names --------------------------------------------------

def test_the_facts_are_the_machine_features_and_hs06_per_cpu_is_rounded_down():
    values, warnings = publish.fact_values({"hs06": "62.5", "total_cpu": "3"},
                                           ("hs06", "hs06_per_cpu", "total_cpu"))
    assert values == {"hs06": "62.5", "hs06_per_cpu": "20.83", "total_cpu": "3"}
    assert warnings == []


def test_a_fact_the_node_has_no_value_for_is_one_warning_and_not_published():
    values, warnings = publish.fact_values({"total_cpu": "4"}, ("hs06", "hs06_per_cpu"))
    assert values == {}
    assert len(warnings) == 2 and all("no hs06 value" in line for line in warnings)


def test_the_names_are_submits_one_naming():
    conf = site("[submit]\nhs06_name = power\n[publish]\nfacts = hs06, total_cpu\n")
    assert conf.fact_names()["hs06"] == "power"
    assert publish.wanted(conf, {"hs06": "62.5", "total_cpu": "4"}) == \
        ({"power": "62.5", "total_cpu": "4"}, [])


@pytest.mark.parametrize("text,why", [
    ("[publish]\nfacts = hs06, shutdowntime\n", "must be node facts"),
    ("[publish]\nfacts =\n", "must be node facts"),
    ("[publish]\nsync = maybe\n", "yes or no"),
    ("[publish]\nwhere = here\n", "unknown option"),
    ("[submit]\nhs06_name = hs06 -dattr\n", "letters, digits and _"),
    ("[submit]\nhs06_name = hs06=1,x\n", "letters, digits and _"),
    ("[gridengine]\nqconf = qconf\n", "absolute path"),
])
def test_a_bad_publish_setting_is_an_error_naming_it(text, why):
    with pytest.raises(config.SiteInputError, match=why):
        config.parse(text)


def test_publishing_is_off_in_sync_and_hs06_alone_by_default():
    conf = config.parse("")
    assert (conf.publish_on_sync, conf.publish_facts) == (False, ("hs06",))
    assert config.parse("[publish]\nfacts = none\nsync = yes\n").publish_facts == ()


# --- what differs ------------------------------------------------------------------------

@pytest.mark.parametrize("published,same", [
    ("62.5", True), ("62.500000", True), ("6.25e1", True), ("62.49", False), ("62", False),
    ("", False), (None, False), ("NONE", False), ("nan", False), ("inf", False),
    ("1e999", False), ("\uff16\uff12.\uff15", False),
])
def test_a_published_value_is_compared_as_a_number(published, same):
    assert publish.same_number(published, "62.5") is same


@given(st.integers(0, 10**15))
def test_a_value_in_hundredths_reads_back(hundredths):
    text = publish.as_text(hundredths)
    assert publish.hundredths(text) == hundredths
    assert publish.same_number(f"{hundredths / 100:.6f}", text)


@pytest.mark.parametrize("text", ["1.234", "-1", "1e3", "0x10", " 1", "1_0", "", "٣"])
def test_only_a_plain_number_goes_into_a_command(text):
    with pytest.raises(ValueError):
        publish.hundredths(text)


# --- Grid Engine --------------------------------------------------------------------------

def test_grid_engine_complex_values_are_read_with_continued_lines():
    output = QCONF_SE.format(values="hs06=62.500000,total_cpu=4, \\\n"
                                    "                      hs06_per_cpu=15")
    assert gridengine.published(output, ["hs06", "hs06_per_cpu", "power"]) == \
        {"hs06": "62.500000", "hs06_per_cpu": "15"}
    assert gridengine.published(QCONF_SE.format(values="NONE"), ["hs06"]) == {}
    with pytest.raises(ValueError, match="no exec host configuration"):
        gridengine.published("error: host vm is not an execution host\n", ["hs06"])


def test_a_first_publish_adds_and_a_second_only_reads(node, monkeypatch):
    fake = FakeGridEngine()
    outcome, log = run(fake, site("[publish]\nfacts = hs06, total_cpu\n"), monkeypatch)
    assert fake.writes() == [["/usr/bin/qconf", "-aattr", "exechost", "complex_values",
                              "hs06=62.5,total_cpu=4", "vm"]]
    assert outcome.done == ["Grid Engine node vm: hs06 unset -> 62.5, total_cpu unset -> 4"]
    assert not outcome.failed and [level for level, _ in log.lines] == ["info"]
    fake.commands.clear()
    outcome, log = run(fake, site("[publish]\nfacts = hs06, total_cpu\n"), monkeypatch)
    assert fake.commands == [["/usr/bin/qconf", "-se", "vm"]]  # no write
    assert (outcome.done, outcome.failed, log.lines) == ([], False, [])


def test_a_changed_value_is_modified_and_a_new_one_added(node, monkeypatch):
    fake = FakeGridEngine({"hs06": "60.000000", "total_cpu": "4"})
    run(fake, site("[publish]\nfacts = hs06, total_cpu, hs06_per_cpu\n"), monkeypatch)
    assert fake.writes() == [
        ["/usr/bin/qconf", "-mattr", "exechost", "complex_values", "hs06=62.5", "vm"],
        ["/usr/bin/qconf", "-aattr", "exechost", "complex_values", "hs06_per_cpu=15.62", "vm"]]
    assert fake.values == {"hs06": "62.5", "total_cpu": "4", "hs06_per_cpu": "15.62"}


def test_a_failed_write_is_one_warning_and_nothing_else_is_written(node, monkeypatch):
    fake = FakeGridEngine({"hs06": "1"}, refuse={"total_cpu"})
    outcome, log = run(fake, site("[publish]\nfacts = hs06, total_cpu\n"), monkeypatch)
    assert outcome.failed and outcome.done == []
    assert [level for level, _ in log.lines] == ["warning"]
    assert log.lines[0][1].endswith("Grid Engine node vm: not all of hs06, total_cpu "
                                    "published (the next run tries again)")
    assert fake.values == {"hs06": "62.5"}  # the -mattr before it went through
    assert fake.writes()[-1][1] == "-aattr" and fake.commands[-1][1] == "-aattr"


def test_a_write_that_exits_0_without_taking_is_caught_by_reading_again(node, monkeypatch):
    fake = FakeGridEngine(refuse={"hs06"}, silent=True)
    outcome, log = run(fake, site(), monkeypatch)
    assert outcome.failed and outcome.done == []
    assert log.lines == [("warning", "Grid Engine node vm: the write of hs06 did not take "
                                     "(the next run tries again)")]


def test_a_failed_or_unreadable_read_writes_nothing(node, monkeypatch):
    def failing(argv, timeout, env, log, unknown):
        log.warning(f"{argv[0]} did not finish within 5 s; killed: {unknown}")

    outcome, log = run(failing, site(), monkeypatch)
    assert outcome.failed and len(log.lines) == 1
    assert log.lines[0][1].endswith("nothing published to Grid Engine this time")
    calls = []

    def garbage(argv, timeout, env, log, unknown):
        calls.append(argv)
        return "\x00" * 100

    outcome, log = run(garbage, site(), monkeypatch)
    assert outcome.failed and len(calls) == 1 and len(log.lines) == 1


def test_a_dry_run_reads_and_says_what_it_would_run(node, monkeypatch):
    fake = FakeGridEngine()
    outcome, _ = run(fake, site(), monkeypatch, dry_run=True)
    assert fake.writes() == [] and outcome.done == [
        "Grid Engine: would run /usr/bin/qconf -aattr exechost complex_values hs06=62.5 vm"]


@pytest.mark.parametrize("name", ["-help", "vm;rm", "vm x", "", ".vm", "v\nm", "vm,x=1"])
def test_a_host_name_no_command_takes_runs_no_command(monkeypatch, name):
    monkeypatch.setattr(batch, "node_name", lambda module, options: name)
    fake = FakeGridEngine()
    outcome, log = run(fake, site(), monkeypatch)
    assert fake.commands == [] and outcome.failed and len(log.lines) == 1


def test_nothing_selected_runs_no_command(node, monkeypatch):
    fake = FakeGridEngine()
    outcome, log = run(fake, site("[publish]\nfacts = none\n"), monkeypatch)
    assert (fake.commands, outcome.failed, log.lines) == ([], False, [])


def test_a_batch_system_without_a_publisher_is_not_written_to(node, monkeypatch):
    conf = config.parse("[mjf]\nbatch_systems = htcondor, lsf\n[machinefeatures]\n"
                        "hs06 = 62.5\n")
    outcome, log = run(FakeGridEngine(), conf, monkeypatch)
    assert (outcome.done, outcome.failed, log.lines) == ([], False, [])


# --- PBS ----------------------------------------------------------------------------------

def pbsnodes(available: dict) -> str:
    """``pbsnodes -v vm -F json`` of OpenPBS 23.06, trimmed."""
    return json.dumps({"timestamp": 1795400000, "pbs_version": "23.06.06",
                       "pbs_server": "vm", "nodes": {"vm": {
                           "Mom": "vm", "state": "free", "resources_available": {
                               "arch": "linux", "host": "vm", "ncpus": 2, **available}}}})


def test_pbs_resources_are_read_and_set_in_one_qmgr_statement(node, monkeypatch):
    commands = []

    def fake(argv, timeout, env, log, unknown):
        commands.append(argv)
        return pbsnodes({"hs06": 62.5} if len(commands) > 2 else {"hs06": 60})

    conf = config.parse("[mjf]\nbatch_systems = pbs\n[pbs]\npbs_exec = /opt/pbs\n")
    outcome, _ = run(fake, conf, monkeypatch)
    assert commands == [["/opt/pbs/bin/pbsnodes", "-v", "vm", "-F", "json"],
                        ["/opt/pbs/bin/qmgr", "-c", "set node vm resources_available.hs06=62.5"],
                        ["/opt/pbs/bin/pbsnodes", "-v", "vm", "-F", "json"]]
    assert outcome.done == ["PBS node vm: hs06 60 -> 62.5"] and not outcome.failed


def test_pbs_output_that_is_not_one_node_is_unreadable():
    assert pbs.published(pbsnodes({"hs06": 62.5}), ["hs06", "x"]) == {"hs06": "62.5"}
    for output in ("", "{}", '{"nodes": {}}', '{"nodes": {"a": {}, "b": {}}}',
                   '{"nodes": {"a": {"resources_available": 1}}}', "[1]"):
        with pytest.raises(ValueError):
            pbs.published(output, ["hs06"])


def test_pbs_writes_several_values_in_one_statement():
    [(argv, env)] = pbs.write_commands({"pbs_exec": "/opt/pbs"}, "vm",
                                       {"hs06": "62.5", "total_cpu": "4"}, {})
    assert argv == ["/opt/pbs/bin/qmgr", "-c", "set node vm resources_available.hs06=62.5, "
                    "resources_available.total_cpu=4"]
    assert env["PATH"] == "/usr/bin:/bin"


# --- Slurm ----------------------------------------------------------------------------

def scontrol_node(extra: str | None) -> str:
    """``scontrol show node -o vm`` of Slurm 24.11, trimmed; ``extra`` None: no field."""
    field = "" if extra is None else f" Extra={extra}"
    return (f"NodeName=vm Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 CPUTot=2 Features=(null)"
            f"{field} NodeAddr=127.0.0.1 RealMemory=4000 State=IDLE Reason=(null)\n")


def test_slurm_extra_is_read_and_set_keeping_the_sites_own_keys(node, monkeypatch):
    commands, extra = [], ['{"rack":"b7","gpu":0}']

    def fake(argv, timeout, env, log, unknown):
        commands.append(argv)
        if argv[1] == "update":
            extra.append(argv[3][len("Extra="):])
        return scontrol_node(extra[-1]) if argv[1] == "show" else ""

    conf = config.parse("[mjf]\nbatch_systems = slurm\n[slurm]\nscontrol = /opt/s/scontrol\n")
    outcome, _ = run(fake, conf, monkeypatch)
    assert commands == [["/opt/s/scontrol", "show", "node", "-o", "vm"],
                        ["/opt/s/scontrol", "update", "NodeName=vm",
                         'Extra={"gpu":0,"hs06":62.5,"rack":"b7"}'],
                        ["/opt/s/scontrol", "show", "node", "-o", "vm"]]
    assert outcome.done == ["Slurm node vm: hs06 unset -> 62.5"] and not outcome.failed
    commands.clear()
    outcome, _ = run(fake, conf, monkeypatch)  # nothing changed: the read alone
    assert [argv[1] for argv in commands] == ["show"] and outcome.done == []


@pytest.mark.parametrize("extra, read", [
    (None, {}), ("(null)", {}), ("", {}), ('{"hs06":62.50}', {"hs06": "62.5"}),
    ('{"hs06":"62.5","x":[1]}', {"hs06": '"62.5"', "x": "[1]"}),
])
def test_slurm_extra_as_printed(extra, read):
    assert slurm.published(scontrol_node(extra), ["hs06"]) == read


@pytest.mark.parametrize("output", [
    "", "Node vm not found\n", scontrol_node("fast-nodes"), scontrol_node("[1,2]"),
    scontrol_node('{"a":'), scontrol_node("[" * 100000),
    scontrol_node("{}") + scontrol_node("{}"),
])
def test_slurm_output_or_extra_it_cannot_keep_is_refused(output):
    """Another node's text in Extra is the site's: never overwritten; nor is what is
    not one node's record."""
    with pytest.raises(ValueError):
        slurm.published(output, ["hs06"])


def test_slurm_a_string_value_is_replaced_by_the_number():
    [(argv, _)] = slurm.write_commands({}, "vm", {"hs06": "62.5"}, {"hs06": '"62.5"'})
    assert argv[1:] == ["update", "NodeName=vm", 'Extra={"hs06":62.5}']


def test_a_command_error_is_the_warning_line(node, monkeypatch):
    """The real `ask`: a command that cannot run is one warning naming it."""
    from mjf_hooks import external_command

    def missing(argv, timeout, env=None):
        raise CommandError(f"cannot run {argv[0]}: No such file or directory")

    monkeypatch.setattr(external_command, "run_command", missing)
    log = LeveledLog()
    outcome = publish.publish(site(), log, {"hs06": "62.5"})
    assert outcome.failed and log.lines == [("warning", "cannot run /usr/bin/qconf: No such "
                                             "file or directory: nothing published to Grid "
                                             "Engine this time")]


def test_pbsnodes_json_nested_too_deep_is_unreadable_not_an_exception():
    """The JSON parser gives up on deep nesting with RecursionError, no ValueError: both
    readers of pbsnodes (mjf sync's job list, mjf publish) say it is unreadable."""
    from mjf_hooks.batch import pbs as pbs_batch

    deep = "[" * 100000 + "]" * 100000
    for read in (pbs_batch.running_jobs, lambda output: pbs.published(output, ["hs06"])):
        with pytest.raises(ValueError, match="printed no nodes"):
            read(deep)


# --- HTCondor: the cron, not a publisher ---------------------------------------------------

def test_htcondor_slots_carry_every_node_fact_submit_args_asks_htcondor_for():
    """HTCondor gets no write: mjf-htcondor-cron already prints every machine key, and the
    requirement `mjf submit-args --batch htcondor` prints names those very attributes."""
    import re

    from mjf_hooks.batch import htcondor
    from mjf_hooks.submit.htcondor import HTCONDOR_FACTS

    assert publish.publisher("htcondor") is None
    printed = htcondor.cron_attributes({"hs06": "62.5", "total_cpu": "4"})
    attributes = dict(line.split(" = ") for line in printed.splitlines())
    assert set(HTCONDOR_FACTS) == set(config.NODE_FACTS)
    for expression in HTCONDOR_FACTS.values():
        for name in re.findall(r"TARGET\.(\w+)", expression):
            assert attributes[name] in ("62.5", "4")
