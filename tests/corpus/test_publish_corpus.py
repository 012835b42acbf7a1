"""The bad-input corpus of `mjf publish`: what the batch system's commands print, and the
names and host names it is given, made hostile.

``qconf -se`` and ``pbsnodes -F json`` output, each from a valid one with one hostile
thing (a value that is a shell or qmgr statement, an option, 400 digits, 1e400, NaN,
negative, binary, a megabyte, a name twice, JSON nested 100,000 deep, a value of the
wrong type); a fact's name or this host's name that is no name. Every case: no exception,
every command run an argv whose words are checked (a name of letters, digits and _, a
plain number of at most two decimals, a host name), and a pass that is not what it
should be says so (failed, with a warning line).
"""

from __future__ import annotations

import json
import random
import re

import pytest

from mjf_hooks import batch, config, publish
from tests.conftest import LeveledLog

SEED = 20261127
NAME = r"[A-Za-z][A-Za-z0-9_]{0,63}"
NUMBER = r"[0-9]+(\.[0-9]{1,2})?"
HOST = r"[A-Za-z0-9_][A-Za-z0-9_.-]*"
GRIDENGINE_WRITE = re.compile(rf"{NAME}={NUMBER}(,{NAME}={NUMBER})*")
PBS_WRITE = re.compile(rf"set node {HOST} resources_available\.{NAME}={NUMBER}"
                       rf"(, resources_available\.{NAME}={NUMBER})*")
HOSTILE_VALUES = ["1;rm -rf /", "1 -dattr", "$(reboot)", "`id`", "9" * 400, "1e400", "nan",
                  "-1", "inf", "\x00", "\x1b[2J", "1\nset server scheduling=false", "=",
                  "1,hs06=2", '"', "\\", "\u0663", "0x10", "1_000", ""]
QCONF_SE = ("hostname              vm\nload_scaling          NONE\n"
            "complex_values        {values}\nprocessors            2\n")


class Case:
    def __init__(self, entry: str, label: str, batch_system: str, output: str,
                 names: dict | None = None, host: str = "vm") -> None:
        self.entry, self.label, self.batch = entry, label, batch_system
        self.output, self.names, self.host = output, names or {}, host

    def __repr__(self) -> str:
        return self.label


def pbsnodes(value) -> str:
    return json.dumps({"nodes": {"vm": {"resources_available": {"ncpus": 2, "hs06": value}}}})


def scontrol_node(extra: str) -> str:
    return f"NodeName=vm CPUTot=2 Extra={extra} RealMemory=4000 State=IDLE\n"


def build_cases() -> list[Case]:
    rng = random.Random(SEED)
    cases = []
    for index, value in enumerate(HOSTILE_VALUES):
        cases.append(Case("mjf publish (gridengine)", f"qconf-value-{index}", "gridengine",
                          QCONF_SE.format(values=f"hs06={value},total_cpu=2")))
        cases.append(Case("mjf publish (pbs)", f"pbsnodes-value-{index}", "pbs",
                          pbsnodes(value)))
    for label, output in [
        ("no-hostname", "complex_values hs06=1\n"),
        ("empty", ""),
        ("binary", bytes(rng.randrange(256) for _ in range(4096)).decode("latin-1")),
        ("megabyte", QCONF_SE.format(values="x=1," * 250000 + "hs06=1")),
        ("twice", QCONF_SE.format(values="hs06=1,hs06=40")),
        ("continued-at-end", QCONF_SE.format(values="hs06=1,\\").rstrip("\n")),
        ("error-exit-0", 'error: "vm" is not an execution host\n'),
    ]:
        cases.append(Case("mjf publish (gridengine)", f"qconf-{label}", "gridengine", output))
    for label, output in [
        ("deep", "[" * 100000 + "]" * 100000),
        ("deep-object", '{"nodes": ' + '{"a": ' * 50000 + "1" + "}" * 50001),
        ("not-json", "pbsnodes: Server has no node list\n"),
        ("list", "[1, 2]"),
        ("two-nodes", json.dumps({"nodes": {"a": {}, "b": {}}})),
        ("object-value", pbsnodes({"hs06": 1})),
        ("list-value", pbsnodes([1, 2])),
        ("bool-value", pbsnodes(True)),
        ("null-value", pbsnodes(None)),
        ("nan-value", pbsnodes(float("nan"))),
        ("resources-not-object", json.dumps({"nodes": {"vm": {"resources_available": 1}}})),
    ]:
        cases.append(Case("mjf publish (pbs)", f"pbsnodes-{label}", "pbs", output))
    for index, value in enumerate(HOSTILE_VALUES):
        cases.append(Case("mjf publish (slurm)", f"scontrol-value-{index}", "slurm",
                          scontrol_node(json.dumps({"hs06": value, "rack": value}))))
    for label, extra in [
        ("text", "fast nodes"), ("list", "[1,2]"), ("cut", '{"hs06":'), ("deep", "[" * 100000),
        ("megabyte", json.dumps({f"k{i}": i for i in range(60000)})),
        ("nan", '{"hs06":NaN}'), ("huge", '{"hs06":1e400}'), ("twice", '{"hs06":1,"hs06":2}'),
    ]:
        cases.append(Case("mjf publish (slurm)", f"scontrol-extra-{label}", "slurm",
                          scontrol_node(extra)))
    for label, output in [("empty", ""), ("not-found", "Node vm not found\n"),
                          ("two", scontrol_node("{}") * 2), ("binary", "\x00" * 100)]:
        cases.append(Case("mjf publish (slurm)", f"scontrol-{label}", "slurm", output))
    for index, name in enumerate(["hs06 -dattr", "hs06=1,x", "hs06\nset", "", "1hs06",
                                  "h" * 65, "hs06;x", "\u00e9"]):
        for system in ("gridengine", "pbs", "slurm"):
            cases.append(Case(f"mjf publish ({system})", f"{system}-name-{index}", system,
                              "", names={"hs06_name": name}))
    for index, host in enumerate(["-se", "vm x", "vm;id", "", ".", "vm\nset", "v" * 300,
                                  "vm,x", "vm resources_available.x=1"]):
        for system in ("gridengine", "pbs", "slurm"):
            cases.append(Case(f"mjf publish ({system})", f"{system}-host-{index}", system,
                              "", host=host))
    return cases


CASES = build_cases()


def well_formed(case: Case, argv: list[str]) -> bool:
    """Whether a command run holds only checked words where values go."""
    if case.batch == "gridengine":
        if argv[1] == "-se":
            return len(argv) == 3 and re.fullmatch(HOST, argv[2]) is not None
        return len(argv) == 6 and argv[1] in ("-mattr", "-aattr") and \
            GRIDENGINE_WRITE.fullmatch(argv[4]) is not None and \
            re.fullmatch(HOST, argv[5]) is not None
    if case.batch == "slurm":
        if argv[1] == "show":
            return argv[2:4] == ["node", "-o"] and re.fullmatch(HOST, argv[4]) is not None
        extra = json.loads(argv[3][len("Extra="):])
        return len(argv) == 4 and argv[1] == "update" and \
            re.fullmatch(f"NodeName={HOST}", argv[2]) is not None and \
            argv[3].startswith("Extra=") and isinstance(extra, dict) and \
            all(re.fullmatch(NUMBER, json.dumps(extra[name])) for name in ("hs06", "total_cpu"))
    if argv[0].endswith("pbsnodes"):
        return argv[1:] == ["-v", argv[2], "-F", "json"] and \
            re.fullmatch(HOST, argv[2]) is not None
    return len(argv) == 3 and argv[1] == "-c" and PBS_WRITE.fullmatch(argv[2]) is not None


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_publish_case(case, monkeypatch):
    conf = config.parse(f"[mjf]\nbatch_systems = {case.batch}\n[pbs]\npbs_exec = /opt/pbs\n"
                        "[publish]\nfacts = hs06, total_cpu\n")
    conf.submit.update(case.names)  # past the config's own check: publish checks again
    monkeypatch.setattr(batch, "node_name", lambda module, options: case.host)
    ran = []

    def fake(argv, timeout, env, log, unknown):
        ran.append(argv)
        return case.output if len(argv) < 4 or argv[1] in ("-se", "-v", "show") else ""

    monkeypatch.setattr(publish, "ask", fake)
    log = LeveledLog()
    outcome = publish.publish(conf, log, {"hs06": "40", "total_cpu": "2"})
    assert all(well_formed(case, argv) for argv in ran), ran
    warnings = [message for level, message in log.lines if level == "warning"]
    assert all(len(message) < 2000 for message in warnings)
    if outcome.failed:
        assert warnings
    if case.names or case.host != "vm":
        assert all(argv[1] in ("-se", "-v", "show") for argv in ran)  # nothing written
