"""The quick-start pages (docs/quickstart-<batch system>.md) hold what their real-daemon
test (tests/integration/test_quickstarts.py) cannot run: the install line matches the
files the packages are built as, the commands and contrib/ files a page names are in
the packages, the config goes where both packages make room for it, and the hook lines
are contrib/'s and the harnesses' own. And each page is linked, and one screen long."""

from __future__ import annotations

import configparser
import fnmatch
import re
from pathlib import Path

import pytest

from mjf_hooks import __version__, batch, config
from tests.integration import quickstart

ROOT = Path(__file__).resolve().parents[2]
# One screen: the lines a reader sees (blank lines and the test's markers left out).
SCREEN = 40


def installed_commands() -> list[str]:
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    return [Path(line).name for line in setup["options"]["scripts"].split()]


@pytest.mark.parametrize("name", batch.NAMES)
def test_every_batch_system_has_its_quick_start_linked_from_the_readme(name):
    assert quickstart.path(name).is_file()
    readme = (ROOT / "README.md").read_text()
    listed = readme[readme.index("\n## Quick start\n"):]
    listed = listed[:listed.index("\n## ", 1)]
    assert f"](docs/quickstart-{name}.md)" in listed


@pytest.mark.parametrize("name", batch.NAMES)
def test_a_quick_start_is_one_screen_with_each_block_once(name):
    quickstart.page(name)  # each kind of block exactly once
    seen = [line for line in quickstart.path(name).read_text().splitlines()
            if line.strip() and not line.startswith("<!-- quickstart:")]
    assert len(seen) <= SCREEN


def package_file_names() -> list[str]:
    """The names the .deb and the RPM are built as, for this version."""
    control = (ROOT / "debian/control").read_text()
    package = re.search(r"^Package: (\S+)$", control, re.M).group(1)
    arch = re.search(r"^Architecture: (\S+)$", control, re.M).group(1)
    spec = (ROOT / "rpm/mjf-hooks.spec.in").read_text()
    name = re.search(r"^%global srcname (\S+)$", spec, re.M).group(1)
    assert re.search(r"^Name: +%\{srcname\}$", spec, re.M)
    release = re.search(r"^Release: +(\d+)%\{\?dist\}$", spec, re.M).group(1)
    build_arch = re.search(r"^BuildArch: +(\S+)$", spec, re.M).group(1)
    return [f"{package}_{__version__}_{arch}.deb",
            f"{name}-{__version__}-{release}.el9.{build_arch}.rpm"]


@pytest.mark.parametrize("name", batch.NAMES)
def test_the_install_line_names_the_packages_as_built(name):
    deb, rpm = package_file_names()
    line = quickstart.page(name).install.strip()
    found = re.fullmatch(r"apt install \./(\S+) +# EL9: dnf install \./(\S+)", line)
    assert found, line
    assert fnmatch.fnmatchcase(deb, found[1]) and fnmatch.fnmatchcase(rpm, found[2])


@pytest.mark.parametrize("name", batch.NAMES)
def test_the_paths_a_quick_start_names_are_in_the_packages(name):
    text = quickstart.path(name).read_text()
    commands = re.findall(r"/usr/bin/([\w-]+)", text)
    assert sorted(set(commands) - set(installed_commands())) == []
    for relative in re.findall(r"/usr/share/doc/mjf-hooks/contrib/(\S+)", text):
        assert (ROOT / "contrib" / relative).is_file(), relative
    # Both packages ship contrib/ under /usr/share/doc/mjf-hooks/, as it is (the .deb's
    # other docs are compressed, its contrib/ not).
    assert "contrib" in (ROOT / "debian/mjf-hooks.docs").read_text().split()
    assert "dh_compress -X/contrib/" in (ROOT / "debian/rules").read_text()
    doc = re.search(r"^%doc (.*)$", (ROOT / "rpm/mjf-hooks.spec.in").read_text(), re.M)
    assert "contrib" in doc.group(1).split()


@pytest.mark.parametrize("name", batch.NAMES)
def test_the_config_is_a_valid_drop_in_where_both_packages_make_room(name):
    page = quickstart.page(name)
    assert re.fullmatch(r"/etc/mjf/mjf\.conf\.d/\d\d-[a-z0-9-]+\.conf", page.config_path)
    config.parse(page.config, page.config_path)
    assert "install -d -m 0755 debian/mjf-hooks/etc/mjf/mjf.conf.d" in \
        (ROOT / "debian/rules").read_text()
    assert "%dir %{_sysconfdir}/mjf/mjf.conf.d" in (ROOT / "rpm/mjf-hooks.spec.in").read_text()


def setting_lines(text: str) -> list[str]:
    """``KEY = value`` lines (not comments), spaces around ``=`` made one."""
    return [re.sub(r"\s*=\s*", " = ", line.strip(), count=1) for line in text.splitlines()
            if "=" in line and not line.lstrip().startswith("#")]


def test_the_slurm_lines_are_contribs_and_the_harness_clusters():
    from tests.integration.slurm_cluster import SlurmCluster

    lines = quickstart.page("slurm").hooks.splitlines()
    assert set(lines) <= set((ROOT / "contrib/slurm/slurm.conf").read_text().splitlines())
    harness = SlurmCluster(Path("/nonexistent"), Path("/usr/bin"), cgroups=False).slurm_conf()
    assert set(lines) <= set(harness.splitlines())


def test_the_lsf_queue_lines_are_contribs_and_the_harness_clusters():
    from tests.integration.lsf_cluster import HOOK_LINES

    lines = setting_lines(quickstart.page("lsf").hooks)
    hooks = [line for line in lines if not line.startswith("QUEUE_NAME")]
    assert set(hooks) <= set(setting_lines((ROOT / "contrib/lsf/lsb.queues").read_text()))
    assert sorted(hooks) == sorted(setting_lines(HOOK_LINES.format(bin="/usr/bin")))


def test_the_grid_engine_lines_are_contribs():
    contrib = (ROOT / "contrib/gridengine/queue.conf").read_text()
    for line in quickstart.page("gridengine").hooks.splitlines():
        if line.startswith("qconf -mattr"):
            assert f"#   {line}\n" in contrib, line


def test_the_htcondor_and_pbs_hooks_are_contribs_files():
    # The pool's config.d gets contrib/htcondor/mjf.config as it is; the complex's hook
    # is installed by contrib/pbs/install-hook.
    assert "contrib/htcondor/mjf.config " in quickstart.page("htcondor").hooks
    assert "contrib/pbs/install-hook /usr/bin" in quickstart.page("pbs").hooks
    assert "mjf-pbs" in installed_commands()  # what install-hook wants in /usr/bin


def test_an_output_block_matches_only_what_it_says():
    expected = "Job <job id> exited.\nallocated_cpu:2\n"
    assert quickstart.matches(expected, "Job 12.host exited.\nallocated_cpu:2\n")
    assert not quickstart.matches(expected, "Job 12 exited.\nallocated_cpu:4\n")
    assert not quickstart.matches(expected, "Job 12 exited.\nallocated_cpu:2\nmore\n")
    assert not quickstart.matches(expected, "Job  exited.\nallocated_cpu:2\n")
