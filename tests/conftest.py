"""Shared test helpers.

Tests that need root or real daemons are marked ``integration``. A developer
without root gets them skipped; CI sets ``MJF_REQUIRE_INTEGRATION=1`` and
there a skip is a failure, so they cannot silently stop running.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from mjf_hooks.log import Log

FIXTURES = Path(__file__).parent / "fixtures"
CHECKOUT_ROOT = Path(__file__).parent.parent
REQUIRE_INTEGRATION = os.environ.get("MJF_REQUIRE_INTEGRATION") == "1"
# A config of all defaults for $MJF_CONFIG or --config: an empty file (an admin command
# refuses a named config that is not there).
DEFAULTS_CONFIG = "/dev/null"
# What building and testing leave in a tree, never in a clean clone (.gitignore).
TOP_LEVEL_ARTEFACTS = {"build", "dist", ".pytest_cache", ".hypothesis", ".ruff_cache"}
ARTEFACTS = re.compile(r"^(\.git|__pycache__|.*\.egg-info|.*\.py[co])$")
# Other projects' test-only sources (OpenPBS's, AGPL-3.0): a clone has them, a source
# package leaves them out, and its unit tests run at build time all the same.
VENDORED = CHECKOUT_ROOT / "tests" / "vendor"


def fixture_text(relative: str) -> str:
    return (FIXTURES / relative).read_text()


def write_script(path: Path, body: str) -> Path:
    """An executable ``/bin/sh`` script at ``path`` running ``body``: a batch system's
    command faked (scontrol, qstat, bjobs, pbsnodes, condor_status...) or a job's script."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def printing(output: str) -> str:
    """A script's body that prints ``output`` (whole lines) as it is."""
    return f"cat <<'EOF'\n{output}EOF"


def run(argv, check=True, timeout=60, **kwargs) -> subprocess.CompletedProcess:
    """``argv``'s result, its output captured as text; with ``check``, a failure that shows
    the command and the end of what it printed (a set-up step's own words say why)."""
    result = subprocess.run(argv, timeout=timeout, capture_output=True, text=True, **kwargs)
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, argv))}: exit {result.returncode}\n"
                             f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


def taskprolog_copy(path: Path, run_dir: Path | str, default_conf: Path | str) -> Path:
    """bin/mjf-slurm-taskprolog written to ``path``, its two fixed paths - the directory
    of the settings the Prolog keeps, and the default config - a test's own."""
    text = (CHECKOUT_ROOT / "bin/mjf-slurm-taskprolog").read_text()
    for line, replaced in (
            ("kept=/run/mjf-hooks/", f"kept={run_dir}/"),
            ("default_conf=/etc/mjf/mjf.conf\n", f"default_conf={default_conf}\n")):
        assert text.count(f"\n{line}") == 1, line
        text = text.replace(f"\n{line}", f"\n{replaced}")
    path.write_text(text)
    path.chmod(0o755)
    return path


def require(condition: bool, reason: str) -> None:
    """Skip (or, in CI, fail) when an integration prerequisite is missing."""
    if condition:
        return
    if REQUIRE_INTEGRATION:
        pytest.fail(f"integration prerequisite missing in CI: {reason}")
    pytest.skip(reason)


def source_files() -> list[str]:
    """The tree's files as a clone has them, relative to it: git's list in a clone, else
    (a source package) every file but what building and testing left there (build/,
    .pybuild/, __pycache__/, .hypothesis/)."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=CHECKOUT_ROOT,
                                capture_output=True, check=True).stdout.split(b"\0")
    except (OSError, subprocess.CalledProcessError):
        files = (path.relative_to(CHECKOUT_ROOT) for path in CHECKOUT_ROOT.rglob("*")
                 if path.is_file())
        return [str(path) for path in files if path.parts[0] not in TOP_LEVEL_ARTEFACTS
                and not any(ARTEFACTS.match(part) or part in (".pybuild", ".debhelper")
                            for part in path.parts)]
    return [name.decode() for name in listed if name]


def vendored_sources_left_out() -> bool:
    """Whether this tree is a source package's, without tests/vendor/. Never in CI, whose
    tree is a clone: there its absence is a failure like any missing prerequisite."""
    return not VENDORED.exists() and not REQUIRE_INTEGRATION


def any_character():
    """A hypothesis strategy for every code point, surrogates too (its default leaves them
    out), in the words of the hypothesis the test runs with: ``blacklist_categories`` up
    to 6.8x (Debian bookworm's, whose package build runs the unit tests), later
    ``exclude_categories``."""
    from hypothesis import strategies

    try:
        return strategies.characters(exclude_categories=())
    except TypeError:
        return strategies.characters(blacklist_categories=())


def installed_command(name: str) -> str:
    """Path of an installed command of this package, next to the running interpreter."""
    candidate = Path(sys.executable).parent / name
    if candidate.exists():
        return str(candidate)
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: pip install the package first")
    return found


def pending(base: Path, job_dir: str) -> bool:
    """Whether a job's values are marked to be completed from inside the job."""
    return (base / "jobs" / job_dir / "state" / "pending").exists()


def hooks_command(name: str) -> str:
    """An installed command that other users can run too (tests/run installs them, as root,
    with the system Python into $MJF_HOOKS_BIN): for tests that switch users."""
    bindir = os.environ.get("MJF_HOOKS_BIN", "/opt/mjf-hooks-ci/venv/bin")
    path = Path(bindir) / name
    require(path.exists(), f"needs {path} (tests/run installs it as root)")
    return str(path)


def replace_file(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` at once: written to a temporary name beside it and
    renamed over it. A hook reading it meanwhile (an Epilog of a job still completing)
    sees the old content or the new, whole: never an empty or half-written file, which
    it would take for a config of defaults."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(temp, "wb") as handle:
        handle.write(data)
    temp.chmod(mode)
    os.replace(temp, path)


class ConfigPath(type(Path())):
    """The path of a config file the hooks may be reading: ``write_text`` and
    ``write_bytes`` replace it atomically (:func:`replace_file`), so every test that
    rewrites it - mid-run, with jobs still ending - does so safely without saying so."""

    def write_text(self, data: str, encoding: str | None = None, errors: str | None = None,
                   newline: str | None = None) -> int:
        replace_file(self, data.encode(encoding or "utf-8", errors or "strict"))
        return len(data)

    def write_bytes(self, data: bytes) -> int:
        replace_file(self, bytes(data))
        return len(data)


def config_writer(directory: Path):
    """Write an mjf.conf in ``directory`` whose base_dir is a fresh directory there;
    the writer returns (config path, base_dir)."""

    def write(body: str = "", base_dir: Path | None = None) -> tuple[Path, Path]:
        base = base_dir or directory / "base"
        path = ConfigPath(directory / "mjf.conf")
        path.write_text(f"[mjf]\nbase_dir = {base}\nlog = stderr\n{body}")
        return path, base

    return write


@pytest.fixture
def write_config(tmp_path):
    return config_writer(tmp_path)


@pytest.fixture
def ended_runner():
    """The identity of a process that has ended (its pid free, or another's now): a job's
    runner whose end proves the job over."""
    from mjf_hooks.probe import process

    child = subprocess.Popen(["sleep", "60"])
    identity = process.identity(child.pid)
    child.kill()
    child.wait()
    return identity


# The uid of a job's user in tests that give it files as root (no such user need exist).
JOB_USER = 54321


def users_job(store, base: Path, job_id: str, backend: str, runner: str,
              claimed: str | None = None) -> None:
    """As root, in ``store`` (whose base_dir is ``base``): a job whose values are completed
    from inside it (a pending Slurm job; an LSF or Grid Engine job a root pre-start hook
    set up), so its state/ is its user's, who wrote there a runner (and, with
    ``claimed``, another backend)."""
    store.create_job(job_id, {"job_id": job_id}, features_owner=JOB_USER, pending=True,
                     state={"backend": backend})
    state = base / "jobs" / job_id / "state"
    for name, content in (("runner", runner), ("backend", claimed)):
        if content is not None:
            (state / name).unlink(missing_ok=True)
            (state / name).write_text(content)
            os.chown(state / name, JOB_USER, JOB_USER)
    assert (state.stat().st_uid, (state / "backend").stat().st_uid) == \
        (JOB_USER, JOB_USER if claimed else 0)


@pytest.fixture
def public_tmp_path():
    """A temporary directory other users can reach (pytest's tmp_path is private)."""
    path = Path(tempfile.mkdtemp(prefix="mjf-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)



class LeveledLog(Log):
    """A log that keeps its lines with their levels, for tests that assert what was logged."""

    def __init__(self) -> None:
        super().__init__("test", ())
        self.lines: list[tuple[str, str]] = []

    def _emit(self, level: str, message: str) -> None:
        self.lines.append((level, message))
