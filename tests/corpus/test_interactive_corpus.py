"""The bad-input corpus of the interactive commands a job's user can feed.

``mjf match``: a seeded list of hostile requirements and JDL files (deep chains, deep
nesting, a megabyte, binary, unclosed comments and strings, numbers of 400 digits,
1e400, NaN, negative, values too deep for HTCondor's ClassAd library), each mutated from
a valid one. Every case: one verdict, never an exception; an unreadable one is one line
naming what failed, and exit 2 for it; the same cases as one ``--jdl`` directory through
the installed command give one line per file and the worst status.

``mjf submit-args``: the same requirements and JDLs, reduced and printed for every batch
system: options, or one line naming what failed (never an exception, never a second
line), each within the time bound; through the installed command, exit 0 or 2 and
at most one line on stderr besides warnings.

``mjf drain --plan``: a job directory a local user plants in its own private store, each
with one hostile thing (a million cores, 400 digits, 1e400, NaN, negative, a runner that
is no process of its own, a FIFO or a symlink in place of its bookkeeping, a batch
system's name). Every case: exit 0, the plan's choice and candidates those of the node
without it, and the planted job listed as unverified (or not a job at all), never counted.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import subprocess
import time

import pytest
from click.testing import CliRunner

from mjf_hooks import jobstatus, store_locations
from mjf_hooks.cli.interactive import cli
from mjf_hooks.match import classad, dirac
from mjf_hooks.probe import process
from mjf_hooks.store import BACKEND_MARKER, Store
from tests.conftest import DEFAULTS_CONFIG, installed_command, require

SEED = 20261127
SLOT = {"MJF_JOB_ALLOCATED_CPU": 8, "GlueHostMainMemoryRAMSize": 16000,
        "GlueHostOperatingSystemName": "AlmaLinux", "Tags": ["cvmfs"]}
RESOURCE = {"Site": "LCG.CERN.cern", "NumberOfProcessors": 8, "MaxRAM": 16000,
            "CPUTime": 1000000, "Tag": ["GPU"]}
TERM = "other.MJF_JOB_ALLOCATED_CPU >= 8"
VALID_JDL = '[ Executable = "x"; NumberOfProcessors = 4; CPUTime = 1000; Site = "ANY"; ]'
HOSTILE_PIECES = ["(", ")", "[", "]", "{", "}", "&&", "||", "?", ":", "!", '"', "'", "/*",
                  "*/", "\\", "\x00", "\x1b[2J", "\n", ";", "=", "=?=", "1e400", "NaN",
                  "-1", "9" * 400, "other.", "strcat(", "regexp(\"(\"", "\u00e9", "\ud7ff"]


class Case:
    """One corpus case: the entry point (for the corpus summary) and its input."""

    def __init__(self, entry: str, label: str, text: str) -> None:
        self.entry, self.label, self.text = entry, label, text

    def __repr__(self) -> str:
        return self.label



def _mutated(rng, text: str) -> str:
    """``text`` with one to four of its spans replaced by hostile pieces."""
    pieces = list(text)
    for _ in range(rng.randint(1, 4)):
        at = rng.randint(0, len(pieces))
        pieces[at:at + rng.randint(0, 3)] = [rng.choice(HOSTILE_PIECES)]
    return "".join(pieces)

def _match_cases() -> list[Case]:
    rng = random.Random(SEED)
    deep = [
        ("500 ands", " && ".join([TERM] * 500)),
        ("5000 ands", " && ".join([TERM] * 5000)),
        ("500 ors", " || ".join(["false"] * 499 + [TERM])),
        ("chain in a conditional", f"true ? ({' && '.join([TERM] * 600)}) : false"),
        ("600 pluses", " + ".join(["1"] * 600) + " > 0"),
        ("500 nots", "!" * 500 + "true"),
        ("5000 parentheses", "(" * 5000 + "true" + ")" * 5000),
        ("nested chains", "(" * 100 + " && ".join(["true"] * 300) + ")" * 100),
        ("a megabyte", "true && " * 130000 + "true"),
        ("unclosed comments", "true && " + "/*" * 100000),
        ("unclosed string", 'other.X == "' + "a" * 100000),
        ("400 digits", f"other.MJF_JOB_ALLOCATED_CPU > {'9' * 400}"),
        ("1e400", "other.MJF_JOB_ALLOCATED_CPU > 1e400"),
        ("empty", ""), ("spaces", " \t\n "),
    ]
    cases = [Case("mjf-match", f"expression:{label}", text) for label, text in deep]
    base = f"{TERM} && other.GlueHostMainMemoryRAMSize > 100"
    cases += [Case("mjf-match", f"expression:mutated-{number}", _mutated(rng, base))
              for number in range(120)]
    jdl_deep = [
        ("deep value", f"[ CPUTime = {' + '.join(['1'] * 600)}; ]"),
        ("deep requirements", f"[ Requirements = {' && '.join([TERM] * 500)}; ]"),
        ("deep section", f"[ Requirements = [ Memory = {' + '.join(['1'] * 600)} ]; ]"),
        ("nested ads", "[ " + "a = [ " * 3000 + "b = 1" + " ]" * 3000 + " ]"),
        ("400 digits", f'[ NumberOfProcessors = "{"9" * 400}"; ]'),
        ("5000 digits", f'[ CPUTime = "{"9" * 5000}"; ]'),
        ("1e400", "[ MinRAM = 1e400; ]"), ("negative", "[ CPUTime = -1; ]"),
        ("a float", "[ NumberOfProcessors = 2.5; ]"),
        ("10**18 processors", "[ NumberOfProcessors = 999999999999999999; ]"),
        ("50000 tags", "[ Tags = {" + ", ".join(['"x"'] * 50000) + "}; ]"),
        # Deep enough to crash the library (SIGSEGV) printing and parsing it.
        ("60000 operators", f"[ Requirements = {'1&&' * 60000}1; ]"),
        ("300000 operators", f"[ Requirements = {'1&&' * 300000}1; ]"),
    ]
    cases += [Case("mjf-match", f"jdl:{label}", text) for label, text in jdl_deep]
    cases += [Case("mjf-match", f"jdl:mutated-{number}", _mutated(rng, VALID_JDL))
              for number in range(80)]
    return cases


MATCH_CASES = _match_cases()


@pytest.fixture(scope="module")
def judges():
    require(importlib.util.find_spec("classad2") is not None,
            "needs HTCondor's ClassAd library: pip install 'mjf-hooks[match]'")
    slot = classad.ClassAdSlot(SLOT)
    return slot, dirac.DiracResource(RESOURCE)


@pytest.mark.parametrize("case", [case for case in MATCH_CASES], ids=repr)
def test_case(case, judges):
    slot, resource = judges
    started = time.monotonic()
    if case.label.startswith("jdl:"):
        verdict = dirac.jdl_requirements(case.text, slot, resource, explain=True)
    else:
        verdict = slot.requirements(case.text, explain=True)
    assert time.monotonic() - started < 10, case.label
    assert verdict.exit_code in (0, 1, 2)
    for line in [verdict.unreadable or "", *verdict.reasons, *verdict.warnings]:
        assert "\n" not in line and len(line) < 2000, line[:200]
    if verdict.unreadable is not None:
        assert verdict.unreadable and not verdict.reasons


def test_installed_command(tmp_path, judges):
    """Every JDL case as one file of a directory, through the installed `mjf match`: a
    line per file, on stdout (a verdict) or stderr (why not), and the worst status."""
    jdls = tmp_path / "jdl"
    jdls.mkdir()
    cases = [case for case in MATCH_CASES if case.label.startswith("jdl:")]
    for number, case in enumerate(cases):
        (jdls / f"{number:03d}.jdl").write_bytes(case.text.encode("utf-8", "surrogatepass"))
    (jdls / "zz-binary.jdl").write_bytes(bytes(range(256)) * 64)
    env = {key: value for key, value in os.environ.items()
           if key not in ("MACHINEFEATURES", "JOBFEATURES")}
    env["MJF_CONFIG"] = DEFAULTS_CONFIG
    result = subprocess.run([installed_command("mjf"), "match", "--jdl", str(jdls)],
                            capture_output=True, text=True, env=env, timeout=300)
    assert "Traceback" not in result.stderr
    named = [line.removeprefix("mjf match: ").split(": ")[0]
             for line in result.stdout.splitlines() + result.stderr.splitlines()
             if not line.startswith("  ") and ": warning: " not in line]
    assert sorted(named) == sorted(str(path) for path in jdls.iterdir()), result.stderr
    assert result.returncode == 2


# --- mjf submit-args: the same hostile requirements, as submit options ------------------

@pytest.mark.parametrize("case", MATCH_CASES, ids=repr)
def test_submit_args_case(case, judges):
    from mjf_hooks import submit as submit_options
    from mjf_hooks.match.reduce import Unexpressible, expression_needs, jdl_needs

    started = time.monotonic()
    try:
        needs = (jdl_needs(case.text, 10.0) if case.label.startswith("jdl:")
                 else expression_needs(case.text))
        for batch in submit_options.BATCH_SYSTEMS:
            try:
                lines = submit_options.options(needs, batch, submit_options.Settings())
                assert all(submit_options.directives(batch, lines))
            except Unexpressible as error:
                assert str(error) and "\n" not in str(error) and len(str(error)) < 2000
    except Unexpressible as error:
        assert str(error) and "\n" not in str(error) and len(str(error)) < 2000
    assert time.monotonic() - started < 10, case.label


@pytest.mark.parametrize("label", ["expression:5000 ands", "expression:a megabyte",
                                   "expression:5000 parentheses", "jdl:300000 operators",
                                   "jdl:nested ads", "expression:unclosed comments"])
def test_submit_args_installed_command(label, tmp_path, judges):
    case = next(case for case in MATCH_CASES if case.label == label)
    env = {key: value for key, value in os.environ.items()
           if key not in ("MACHINEFEATURES", "JOBFEATURES")}
    env["MJF_CONFIG"] = DEFAULTS_CONFIG
    # An expression as a gLite JDL's Requirements: a megabyte is no command-line argument.
    text = case.text if label.startswith("jdl:") else f"[ Requirements = {case.text}; ]"
    (tmp_path / "job.jdl").write_text(text)
    args = [installed_command("mjf"), "submit-args", "--batch", "slurm",
            "--jdl", str(tmp_path / "job.jdl")]
    result = subprocess.run(args, capture_output=True, text=True, env=env, timeout=60)
    assert "Traceback" not in result.stderr and result.returncode in (0, 2)
    errors = [line for line in result.stderr.splitlines() if ": warning: " not in line]
    assert len(errors) == (1 if result.returncode else 0), result.stderr[:500]


# --- mjf drain --plan: what a user plants in its own store ------------------------------

NOBODY = 65534


def _plan_cases() -> list[Case]:
    labels = ["a million cores", "400 digits of cores", "1e400 cores", "NaN cores",
              "negative cores", "no runner", "runner: pid 1", "runner: garbage",
              "runner: 400 digits", "runner: a recycled pid", "runner: a FIFO",
              "state: a symlink to root's", "backend: slurm", "backend: a path",
              "backend: a FIFO", "jobs: a symlink", "jobfeatures: a symlink",
              "the job of the node, again", "jobstatus: a symlink to the node's job"]
    return [Case("mjf-drain-plan", label, label) for label in labels]


PLAN_CASES = _plan_cases()


@pytest.fixture
def node(tmp_path, write_config, monkeypatch):
    """A node with one job a root hook made (it ends in 5400 s: the plan's best time),
    and a private parent directory for the planted store."""
    require(os.geteuid() == 0, "needs root: the planted store is another user's")
    monkeypatch.setattr(store_locations, "PRIVATE_PARENTS", (str(tmp_path / "tmp"),
                                                       str(tmp_path / "run-user")))
    conf, base = write_config("jobstatus = yes\n[machinefeatures]\ngrace_secs = 600\n"
                              f"[htcondor]\nexecute_dir = {tmp_path}/execute\n")
    monkeypatch.setenv("MJF_CONFIG", str(conf))
    now = int(time.time())
    Store(str(base)).create_job("node-job", {"job_id": "node-job", "allocated_cpu": "4",
                                             "jobstart_secs": str(now - 3600),
                                             "wall_limit_secs": "9000"},
                                status=True, state={BACKEND_MARKER: "slurm"})
    return tmp_path, base


def _plant(case: Case, store, base) -> None:
    label = case.label
    top = store / "jobs" / ("node-job" if "again" in label else "planted")
    (top / "jobfeatures").mkdir(parents=True)
    (top / "jobstatus").mkdir()
    cores = {"400 digits of cores": "9" * 400, "1e400 cores": "1e400", "NaN cores": "NaN",
             "negative cores": "-4"}.get(label, "1000000")
    now = int(time.time())
    for key, value in (("job_id", top.name), ("allocated_cpu", cores),
                       ("jobstart_secs", str(now - 100)), ("wall_limit_secs", "9100")):
        (top / "jobfeatures" / key).write_text(value)
    jobstatus.update({"used_CPU": 4, "last_job_start": now - 100,
                      "first_exp_job_end": now + 9000, "last_exp_job_end": now + 9000},
                     str(top / "jobstatus"))
    state = top / "state"
    state.mkdir()
    runner = {"runner: pid 1": process.identity(1), "runner: garbage": "x y\n\x00",
              "runner: 400 digits": "9" * 400 + " 1",
              "runner: a recycled pid": f"{os.getpid()} 1"}.get(label)
    backend = {"backend: slurm": "slurm", "backend: a path": "../../../etc/passwd",
               "again": "slurm"}.get(label.split()[-1] if "again" in label else label,
                                     None if label == "no runner" else "standalone")
    if backend is not None and label != "backend: a FIFO":
        (state / "backend").write_text(backend)
    if label == "backend: a FIFO":
        os.mkfifo(state / "backend")
    if label == "runner: a FIFO":
        os.mkfifo(state / "runner")
    elif runner is not None:
        (state / "runner").write_text(runner)
    if label == "state: a symlink to root's":
        os.rename(state, top / "state-moved")
        os.symlink(base / "jobs" / "node-job" / "state", state)
    if label == "jobs: a symlink":
        os.rename(store / "jobs", store / "jobs-moved")
        os.symlink(base / "jobs", store / "jobs")
    if label == "jobfeatures: a symlink":
        (top / "jobfeatures").rename(top / "jobfeatures-moved")
        os.symlink(base / "jobs" / "node-job" / "jobfeatures", top / "jobfeatures")
    if label == "jobstatus: a symlink to the node's job":
        os.rename(top / "jobstatus", top / "jobstatus-moved")
        os.symlink(base / "jobs" / "node-job" / "jobstatus", top / "jobstatus")
    for path in (store, *store.rglob("*")):
        os.chown(path, NOBODY, NOBODY, follow_symlinks=False)


@pytest.mark.parametrize("case", PLAN_CASES, ids=repr)
def test_plan_case(case, node):
    tmp_path, base = node
    plan_args = ["drain", "--plan", "--within", "3h", "--json"]
    before = json.loads(CliRunner().invoke(cli, plan_args, catch_exceptions=False).stdout)
    store = tmp_path / "tmp" / f"mjf-{NOBODY}"
    store.mkdir(parents=True)
    store.chmod(0o700)
    _plant(case, store, base)
    result = CliRunner().invoke(cli, plan_args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["best"] == before["best"] or plan["best"] - plan["now"] == 600, plan
    assert [c["why"] for c in plan["candidates"]] == [c["why"] for c in before["candidates"]]
    for candidate in plan["candidates"]:
        assert [job["jobstatus"] for job in candidate["jobs"]] == [
            str(base / "jobs" / "node-job" / "jobstatus")], candidate
    listed = CliRunner().invoke(cli, ["status", "--json"], catch_exceptions=False)
    for job in json.loads(listed.stdout)["jobs"]:
        if str(store) in job["jobstatus"]:
            assert job["unverified"] and job["counted"] is None, job
