"""The batch systems this node runs, asked (mjf_hooks.batch.here): which they are, which
jobs each lists here (asked once each, only when needed), the drain each knows of."""

from __future__ import annotations

from types import SimpleNamespace

from mjf_hooks import batch
from mjf_hooks.batch import here
from mjf_hooks.config import parse
from tests.conftest import LeveledLog


def fake(name: str, listing: str | None, calls: list) -> SimpleNamespace:
    """A batch module whose job listing is ``listing`` printed by a real command (None:
    a command that fails)."""
    def jobs_query(options, environ, nodename):
        calls.append(name)
        script = "exit 3" if listing is None else f"printf '{listing}'"
        return ["/bin/sh", "-c", script], {}

    return SimpleNamespace(NAME=name, TITLE=name.upper(), jobs_query=jobs_query,
                           running_jobs=lambda output: set(output.split()),
                           installed=lambda options: True)


def test_the_batch_systems_here_are_those_configured_else_those_installed(monkeypatch):
    assert [m.NAME for m in here.batch_systems(parse("[mjf]\nbatch_systems = lsf, pbs\n"))] \
        == ["lsf", "pbs"]
    installed = {"slurm", "pbs"}
    for name in batch.NAMES:
        monkeypatch.setattr(batch.backend(name), "installed",
                            lambda options, name=name: name in installed)
    assert [m.NAME for m in here.batch_systems(parse(""))] == ["slurm", "pbs"]


def test_each_batch_system_is_asked_once_and_only_when_needed(monkeypatch):
    calls: list[str] = []
    modules = [fake("slurm", "7 8", calls), fake("pbs", None, calls)]
    monkeypatch.setattr(here, "batch_systems", lambda config: modules)
    listings = here.BatchListings(parse(""), LeveledLog(), {})
    assert calls == []
    assert listings.running("slurm") == {"7", "8"} and listings.running("slurm") == {"7", "8"}
    assert listings.running("pbs") is None and listings.running("pbs") is None
    assert listings.running("lsf") is None  # not here: never asked
    assert calls == ["slurm", "pbs"] and listings.unanswered == ["PBS"]


def test_a_drain_is_asked_only_of_an_installed_batch_system(monkeypatch):
    asked = []
    module = SimpleNamespace(NAME="slurm", TITLE="Slurm", installed=lambda options: False,
                             drain_query=lambda *args: asked.append(args))
    assert here.drain_time(module, parse(""), LeveledLog()) is None and asked == []


def test_asking_loads_no_typing():
    """`mjf publish` and HTCondor's cron run every minute: typing (with re, enum and
    collections) would cost each ~10 ms, as it did once."""
    import subprocess
    import sys

    code = "import sys, mjf_hooks.batch.here; print('typing' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"
