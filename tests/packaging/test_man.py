"""The manual pages (man/build): one per installed command and mjf.conf(5), made by
help2man from each command's --help, so a page shows the synopsis its command gives.

The pages are built here from the checkout as the packages build them, and read as
`man -l` renders them; the packages' own tests check they are installed (test_deb.py,
test_rpm.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from mjf_hooks import config, spec
from tests.conftest import CHECKOUT_ROOT, installed_command, require
from tests.packaging import sources


def test_a_page_for_every_command_and_the_config_file():
    pages = [(page, section) for page, section, _ in sources.man_pages()]
    assert sorted(pages) == sorted([*((name, "1" if name == "mjf" else "8")
                                      for name in sources.commands()), ("mjf.conf", "5")])
    for page, section in pages:
        assert (CHECKOUT_ROOT / f"man/{page}.{section}.h2m").is_file()
    assert sorted(path.name for path in (CHECKOUT_ROOT / "man").glob("*.h2m")) == \
        sorted(f"{page}.{section}.h2m" for page, section in pages)


def test_mjf_conf_page_names_every_section_and_key():
    """mjf.conf(5)'s text lists under each section the keys the parser takes there: its
    option lists (config.*_OPTIONS), and the spec's keys a site may set."""
    text = (CHECKOUT_ROOT / "man/mjf.conf.5.txt").read_text()
    keys: dict[str, set[str]] = {section: set() for section in config.SECTIONS}
    keys["mjf"] |= set(config.MJF_OPTIONS)
    keys["records"] |= set(config.RECORDS_OPTIONS)
    for section, options in config.BACKEND_OPTIONS.items():
        keys[section] |= set(options)
    keys["describe"] |= set(config.DESCRIBE_OPTIONS)
    keys["submit"] |= set(config.SUBMIT_OPTIONS)
    keys["publish"] |= set(config.PUBLISH_OPTIONS)
    keys["metrics"] |= set(config.METRICS_OPTIONS)
    for name, key in spec.KEYS.items():
        if key.configurable:
            keys["machinefeatures" if key.scope == spec.MACHINE else "jobfeatures"].add(name)
    keys["machinefeatures"] |= set(config.EXTRA_MACHINE_OPTIONS)
    for section, names in keys.items():
        block = text.split(f"\n[{section}]:\n", 1)
        assert len(block) == 2, f"[{section}] is not in man/mjf.conf.5.txt"
        listed = {line.split()[0] for line in block[1].split("\n\n", 1)[0].splitlines()
                  if line.startswith("  ") and not line.startswith("   ")}
        assert listed == names, section


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    require(shutil.which("help2man") is not None, "needs help2man (apt-get install help2man)")
    require(shutil.which("man") is not None, "needs man (apt-get install man-db)")
    out = tmp_path_factory.mktemp("man")
    result = subprocess.run([str(CHECKOUT_ROOT / "man/build"), str(out)], capture_output=True,
                            text=True, timeout=300,
                            env={**os.environ, "PYTHON": sys.executable})
    assert result.returncode == 0, result.stderr
    return out


def rendered(path) -> str:
    """The page as man shows it, its words one space apart (lines as wide as they get)."""
    shown = subprocess.run(["man", "-l", str(path)], capture_output=True, text=True,
                           check=True, env={**os.environ, "MANWIDTH": "1000",
                                            "LC_ALL": "C", "MAN_KEEP_FORMATTING": ""})
    return " ".join(shown.stdout.split())


def usage_lines(text: str) -> list[str]:
    """The synopsis a --help gives: its first paragraph's usage line and the other forms
    indented under it, without the "usage:"."""
    first = text.split("\n\n", 1)[0].splitlines()
    assert first[0].lower().startswith("usage: "), first[0]
    return [" ".join(line.split(None, 1)[1].split()) if index == 0 else " ".join(line.split())
            for index, line in enumerate(first)]


def help_text(words: list[str]) -> str:
    if words[0].startswith("man/"):
        return (CHECKOUT_ROOT / words[0]).read_text()
    command = [installed_command(words[0].removeprefix("bin/")), *words[1:]]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, (command, result.stderr)
    return result.stdout


@pytest.mark.integration
@pytest.mark.parametrize("page, section, words", sources.man_pages(),
                         ids=[f"{page}.{section}" for page, section, _ in sources.man_pages()])
def test_the_page_shows_its_commands_synopsis(built, page, section, words):
    path = built / f"{page}.{section}"
    shown = rendered(path)
    assert shown.startswith(f"{page.upper()}({section}) mjf-hooks manual"), shown[:200]
    assert f"NAME {page} - " in shown
    for line in usage_lines(help_text(words)):
        assert line in shown, line
    for heading in ("SYNOPSIS", "DESCRIPTION", "FILES", "SEE ALSO"):
        assert f" {heading} " in shown, heading
    if section != "5":
        assert " EXIT STATUS " in shown
    # The page is help2man's, at the package's version, and man finds nothing wrong in it.
    assert path.read_text().startswith(".\\\" DO NOT MODIFY THIS FILE!  It was generated by "
                                       "help2man")
    assert f"mjf-hooks {sources.package_version()}" in shown
    warnings = subprocess.run(["man", "--warnings", "-l", str(path)], capture_output=True,
                              text=True, env={**os.environ, "MANWIDTH": "80"})
    assert warnings.stderr == ""


@pytest.mark.integration
def test_mjf_page_has_every_subcommand(built):
    shown = rendered(built / "mjf.1")
    listed = help_text(["bin/mjf", "--help"]).split("Commands:\n", 1)[1]
    subcommands = [line.split()[0] for line in listed.splitlines() if line.startswith("  ")]
    assert len(subcommands) >= 14
    for subcommand in [*subcommands, "status set"]:
        text = help_text(["bin/mjf", *subcommand.split(), "--help"])
        assert f"mjf {subcommand}: " in shown
        for line in usage_lines(text):
            assert line in shown, line


def test_build_needs_an_outdir():
    result = subprocess.run([str(CHECKOUT_ROOT / "man/build")], capture_output=True, text=True)
    assert result.returncode == 2 and "usage: man/build OUTDIR" in result.stderr
