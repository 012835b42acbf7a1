"""`benchmarks/run --smoke`: every scenario of docs/performance.md's tables run once, on
tiny stores, against the installed commands, so that none can rot unnoticed. The figures
themselves mean nothing here; that each row has one (or says why not) does."""

from __future__ import annotations

import importlib
import inspect
import os
import pkgutil
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import CHECKOUT_ROOT, REQUIRE_INTEGRATION, installed_command
from tests.packaging import bookworm_root

BENCHMARKS = CHECKOUT_ROOT / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))  # the benchmark's package, as benchmarks/run finds it

from mjf_bench import scenarios  # noqa: E402
from mjf_bench.bench import SMOKE  # noqa: E402
from mjf_bench.measure import NOT_INSTALLED, NOT_MEASURED  # noqa: E402
from mjf_bench.scenario import Scenario  # noqa: E402
from mjf_bench.scenarios.match import CLASSAD_IMPORT, MATCH_START  # noqa: E402
from mjf_bench.scenarios.pbs import PBS_PYTHON  # noqa: E402
from mjf_bench.scenarios.reading import HTTP, NGINX  # noqa: E402

# About 23 s here (10 s of it the start-up devices' 7 runs under callgrind), 10 s more with
# the packaged rows (a root copied, the .deb installed into it); a minute is the most CI
# should pay.
SMOKE_SECONDS = 60


def scenario_classes() -> set[type]:
    """Every scenario a module of benchmarks/mjf_bench/scenarios/ defines (the bases
    others derive from left out)."""
    found: set[type] = set()
    for module in pkgutil.iter_modules(scenarios.__path__):
        imported = importlib.import_module(f"{scenarios.__name__}.{module.name}")
        found.update(kind for _, kind in inspect.getmembers(imported, inspect.isclass)
                     if issubclass(kind, Scenario) and kind.__module__ == imported.__name__)
    return {kind for kind in found if not any(issubclass(other, kind) and other is not kind
                                              for other in found)}


def test_every_scenario_module_defines_is_one_the_benchmark_runs():
    assert scenario_classes() == set(scenarios.ALL)
    assert len(scenarios.ALL) == len(set(scenarios.ALL))


@pytest.fixture(scope="module")
def deb(tmp_path_factory) -> Path | None:
    """The .deb the packaged rows time, where this machine can build and install one (root,
    the build tools: CI); else None, and those rows are not measured."""
    if os.geteuid() != 0 or bookworm_root.build_prerequisites():
        return None
    bookworm_root.ensure_pristine()  # minutes, once per machine (tests/packaging's too)
    # The package only: its build's unit tests are test_deb's to run, not the smoke's.
    return bookworm_root.build_deb(tmp_path_factory.mktemp("deb"), unit_tests=False)


@pytest.fixture(scope="module")
def smoke(deb):
    """One `benchmarks/run --smoke` with the installed commands' venv (and ``--deb``, where
    there is one), its work directory in a directory of its own (on tmpfs, open to nginx's
    workers): (stdout, stderr, seconds)."""
    venv = Path(installed_command("mjf")).parent.parent
    parent = tempfile.mkdtemp(prefix="mjf-bench-smoke-",
                              dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    os.chmod(parent, 0o755)
    try:
        started = time.monotonic()
        result = subprocess.run([sys.executable, str(BENCHMARKS / "run"), "--smoke", "--venv",
                                 str(venv), "--work-dir", parent,
                                 *(["--deb", str(deb)] if deb else [])],
                                capture_output=True, text=True, timeout=4 * SMOKE_SECONDS)
        seconds = time.monotonic() - started
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        assert os.listdir(parent) == [], "the benchmark left its work directory"
        assert not [pid for pid in os.listdir("/proc") if pid.isdigit()
                    and parent.encode() in _cmdline(pid)], "a process of the benchmark runs on"
        yield result.stdout, result.stderr, seconds
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def _cmdline(pid: str) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read()
    except OSError:  # gone meanwhile
        return b""


def tables(text: str) -> list[list[list[str]]]:
    """Each Markdown table of the output: its rows (header and alignment left out) as
    cells."""
    found = []
    for block in text.split("\n\n"):
        lines = block.splitlines()
        if lines and lines[0].startswith("|"):
            assert all(line.startswith("|") and line.endswith("|") for line in lines), block
            found.append([[cell.strip() for cell in line[1:-1].split("|")]
                          for line in lines[2:]])
    return found


def test_the_smoke_takes_well_under_a_minute(smoke):
    _, _, seconds = smoke
    assert seconds < SMOKE_SECONDS


def test_every_scenario_gave_rows(smoke):
    stdout, stderr, _ = smoke
    counts = {name: int(count) for name, count in
              re.findall(r"^smoke: (\w+): (\d+) rows$", stderr, re.MULTILINE)}
    assert set(counts) == {kind.__name__ for kind in scenarios.ALL}
    assert [name for name, count in counts.items() if count == 0] == []
    assert sum(counts.values()) == sum(len(rows) for rows in tables(stdout))


def test_every_row_has_a_figure_or_says_why_not(smoke, deb):
    stdout, _, _ = smoke
    found = tables(stdout)
    # start-up, the Slurm Prolog's config and its start-up devices in instructions, pilot,
    # storm, drain, status, summary, reading, match x3
    assert len(found) == 12
    placeholders, empty = set(), []
    for rows in found:
        for label, *cells in rows:
            if NOT_INSTALLED in cells or NOT_MEASURED in cells:
                placeholders.add(label)
            elif not any(re.fullmatch(r"[\d.,/ ]+( ms| µs)?", cell) for cell in cells):
                empty.append(label)
    assert empty == []
    labels = [label for rows in found for label, *_ in rows]
    expected = set()  # what cannot be measured on this machine
    if deb is None:
        expected |= {label for label in labels if label.startswith("packaged")}
    if os.geteuid() != 0:  # records are root's
        expected |= {label for label in labels
                     if "records kept" in label or "the job's record" in label}
    if not (os.geteuid() == 0 and os.path.exists(NGINX)):
        expected.add(HTTP)
    if subprocess.run([sys.executable, "-I", "-c", "import classad2"]).returncode:
        expected |= {CLASSAD_IMPORT, MATCH_START, *(label for label in labels
                                                    if "JDL files" in label
                                                    or label.endswith(" tags"))}
    if not os.access(PBS_PYTHON, os.X_OK):
        expected |= {label for label in labels if "pbs_python" in label}
    if shutil.which("valgrind") is None:  # the start-up devices' instruction counts
        expected |= {label for label, *cells in found[1]}
    if shutil.which("cc") is None:  # mjf status's floor, its system calls from C
        expected |= {f"{count:,} jobs" for count in SMOKE.status}
    assert placeholders == expected
    # CI has root, nginx, OpenPBS, the build tools and the test extras: everything runs.
    assert not (REQUIRE_INTEGRATION and expected), f"not measured in CI: {sorted(expected)}"
