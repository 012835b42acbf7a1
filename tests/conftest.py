"""Shared test helpers.

Tests that need root or real daemons are marked ``integration``. A developer
without root gets them skipped; CI sets ``MJF_REQUIRE_INTEGRATION=1`` and
there a skip is a failure, so they cannot silently stop running.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
CHECKOUT_ROOT = Path(__file__).parent.parent
REQUIRE_INTEGRATION = os.environ.get("MJF_REQUIRE_INTEGRATION") == "1"


def fixture_text(relative: str) -> str:
    return (FIXTURES / relative).read_text()


def require(condition: bool, reason: str) -> None:
    """Skip (or, in CI, fail) when an integration prerequisite is missing."""
    if condition:
        return
    if REQUIRE_INTEGRATION:
        pytest.fail(f"integration prerequisite missing in CI: {reason}")
    pytest.skip(reason)


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


def config_writer(directory: Path):
    """Write an mjf.conf in ``directory`` whose base_dir is a fresh directory there;
    the writer returns (config path, base_dir)."""

    def write(body: str = "", base_dir: Path | None = None) -> tuple[Path, Path]:
        base = base_dir or directory / "base"
        path = directory / "mjf.conf"
        path.write_text(f"[mjf]\nbase_dir = {base}\nlog = stderr\n{body}")
        return path, base

    return write


@pytest.fixture
def write_config(tmp_path):
    return config_writer(tmp_path)


@pytest.fixture
def public_tmp_path():
    """A temporary directory other users can reach (pytest's tmp_path is private)."""
    path = Path(tempfile.mkdtemp(prefix="mjf-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)
