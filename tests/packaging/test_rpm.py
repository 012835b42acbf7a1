"""The RPM (rpm): built with rpmbuild from a clean copy of the checkout.

rpm/build makes the source RPM and the noarch RPM; these tests check what
EL9 would install - the file list, the config file, the declared dependencies, the
version, the commands' interpreters, the payload itself - and that a source tree
missing a file the spec installs fails cleanly, naming it, with nothing written.
Needs rpmbuild (Debian: the `rpm` package) and the system python3's pip,
setuptools and wheel, which the spec builds with, and pytest, hypothesis and pyfakefs,
with which its %check runs the unit tests.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.conftest import CHECKOUT_ROOT, require
from tests.packaging.sources import clean_copy, commands, man_pages, not_ours, package_version

pytestmark = pytest.mark.integration

BUILD = Path("rpm/build")
SITE = re.compile(r"^/usr/lib/python3\.\d+/site-packages/")
UNITDIR = "/usr/lib/systemd/system"
DOCDIR = "/usr/share/doc/mjf-hooks"
UNITS = ("mjf-sync.service", "mjf-sync.timer", "run-mjf.mount")
def run_build(source: Path, outdir: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(source / BUILD), str(outdir)], capture_output=True, text=True, timeout=120
    )


def rpm_query(*args: str) -> list[str]:
    result = subprocess.run(["rpm", *args], capture_output=True, text=True, check=True)
    return result.stdout.splitlines()


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    require(shutil.which("rpmbuild") is not None, "needs rpmbuild (Debian: apt-get install rpm)")
    require(shutil.which("rpm2archive") is not None, "needs rpm2archive (Debian: rpm2cpio)")
    tools = [
        subprocess.run(["/usr/bin/python3", "-c", f"import {module}"], capture_output=True)
        for module in ("pip", "setuptools", "wheel", "pytest", "hypothesis", "pyfakefs")
    ]
    require(all(tool.returncode == 0 for tool in tools),
            "needs the system python3's pip, setuptools and wheel, and for the unit tests "
            "of %check pytest, hypothesis and pyfakefs (python3-pip, python3-setuptools, "
            "python3-wheel, python3-pytest, python3-hypothesis, python3-pyfakefs)")
    base = tmp_path_factory.mktemp("rpm")
    source = clean_copy(base / "src")
    outdir = base / "out"
    result = run_build(source, outdir)
    assert result.returncode == 0, result.stderr
    srpms = sorted(outdir.glob("*.src.rpm"))
    rpms = sorted(outdir.glob("*.noarch.rpm"))
    assert len(srpms) == 1 and len(rpms) == 1, sorted(os.listdir(outdir))
    assert result.stdout.split() == [str(srpms[0]), str(rpms[0])]
    assert sorted(os.listdir(outdir)) == sorted([srpms[0].name, rpms[0].name])
    archive = subprocess.run(
        ["rpm2archive", "-"], stdin=rpms[0].open("rb"), capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        payload = {
            member.name.lstrip("."): (member, tar.extractfile(member).read() if member.isfile()
                                      else None)
            for member in tar.getmembers()
        }
    yield {"srpm": srpms[0], "rpm": rpms[0], "payload": payload, "base": base}


def test_file_list_is_what_el9_installs(built):
    files = set(rpm_query("-qpl", str(built["rpm"])))
    for name in commands():
        assert f"/usr/bin/{name}" in files
    library = {path for path in files if SITE.match(path)}
    assert len({SITE.match(path).group(0) for path in library}) == 1  # one python3 site-packages
    sitelib = SITE.match(next(iter(library))).group(0)
    for module in (CHECKOUT_ROOT / "mjf_hooks").rglob("*.py"):
        assert f"{sitelib}{module.relative_to(CHECKOUT_ROOT)}" in files
    assert f"{sitelib}mjf_hooks-{package_version()}.dist-info/METADATA" in files
    assert "/etc/mjf/mjf.conf" in files
    assert "/etc/mjf/mjf.conf.d" in files  # the drop-ins' directory, the package's
    assert "/usr/share/bash-completion/completions/mjf" in files
    for unit in UNITS:
        assert f"{UNITDIR}/{unit}" in files
    for snippet in (CHECKOUT_ROOT / "contrib").rglob("*"):
        if snippet.is_file():
            assert f"{DOCDIR}/{snippet.relative_to(CHECKOUT_ROOT)}" in files
    assert f"{DOCDIR}/README.md" in files
    assert f"{DOCDIR}/docs/configuration.md" in files
    assert f"{DOCDIR}/CHANGELOG.md" in files
    # A manual page for every command and for mjf.conf(5), compressed as on EL9.
    assert {path for path in files if path.startswith("/usr/share/man/")} >= {
        f"/usr/share/man/man{section}/{page}.{section}.gz" for page, section, _ in man_pages()}
    assert {path for path in files if path.startswith("/usr/share/man/man") and
            path.count("/") == 5} == {f"/usr/share/man/man{section}/{page}.{section}.gz"
                                      for page, section, _ in man_pages()}
    # Nothing of the build host's layout, nothing enabled.
    for path in files:
        assert not path.startswith(("/usr/local", "/tmp", "/root", "/home", "/work")), path
        assert "dist-packages" not in path and "python3.11" not in path, path
        assert not path.startswith("/etc/systemd"), path
        assert "__pycache__" not in path or path.startswith(sitelib), path


def test_neither_rpm_holds_a_vendored_source(built):
    """The SRPM's source tarball holds the unit tests (its %check runs them) and none of
    tests/vendor/, other projects' test-only sources; nor does the RPM."""
    archive = subprocess.run(["rpm2archive", "-"], stdin=built["srpm"].open("rb"),
                             capture_output=True, check=True).stdout
    top = f"mjf-hooks-{package_version()}"
    with tarfile.open(fileobj=io.BytesIO(archive)) as srpm:
        tarball = srpm.extractfile(f"./{top}.tar.gz").read()
    with tarfile.open(fileobj=io.BytesIO(tarball)) as source:
        names = [member.name for member in source.getmembers() if not member.isdir()]
    assert not_ours(names, {f"{top}/LICENSE", f"{top}/debian/copyright"}) == []
    assert f"{top}/tests/unit/test_spec.py" in names
    payload = list(built["payload"])
    dist_info = next(path for path in payload if path.endswith(".dist-info/METADATA"))
    ours = {"/usr/share/licenses/mjf-hooks/LICENSE",
            dist_info.replace("/METADATA", "/LICENSE")}  # setuptools's copy
    assert not_ours(payload, ours) == []
    assert not [path for path in payload if "/tests/" in path]


def test_config_file_is_noreplace_and_all_comments(built):
    assert rpm_query("-qpc", str(built["rpm"])) == ["/etc/mjf/mjf.conf"]
    flags = dict(
        line.rsplit(" ", 1)
        for line in rpm_query("-qp", "--qf", "[%{FILENAMES} %{FILEFLAGS:fflags}\n]",
                              str(built["rpm"]))
    )
    assert flags["/etc/mjf/mjf.conf"] == "cn"  # %config(noreplace)
    member, content = built["payload"]["/etc/mjf/mjf.conf"]
    assert member.mode & 0o777 == 0o644
    text = content.decode()
    assert text == (CHECKOUT_ROOT / "contrib" / "mjf.conf").read_text()
    for line in text.splitlines():
        assert line.strip() == "" or line.startswith(("#", ";")), line
    # The example it names is in the package (every option, commented), and it reads as
    # all defaults.
    assert f"{DOCDIR}/contrib/mjf.conf.example" in built["payload"]
    assert f"{DOCDIR}/contrib/mjf.conf.example" in text
    from mjf_hooks import config

    def settings(parsed: config.Config) -> dict:
        return {name: repr(getattr(parsed, name, None)) for name in config.Config.__slots__}

    assert settings(config.parse(text, "/etc/mjf/mjf.conf")) == settings(
        config.parse("", "/etc/mjf/mjf.conf"))


def test_the_licence_is_the_packages_licence(built):
    flags = dict(line.rsplit(" ", 1) for line in rpm_query(
        "-qp", "--qf", "[%{FILENAMES} %{FILEFLAGS:fflags}\n]", str(built["rpm"])))
    assert flags["/usr/share/licenses/mjf-hooks/LICENSE"] == "l"  # %license
    _, content = built["payload"]["/usr/share/licenses/mjf-hooks/LICENSE"]
    assert content == (CHECKOUT_ROOT / "LICENSE").read_bytes()
    assert rpm_query("-qp", "--qf", "%{LICENSE}", str(built["rpm"])) == ["Apache-2.0"]


def test_rpmlint_finds_nothing_but_what_the_rpmlintrc_explains(built):
    """rpmlint with EL9's conventions (rpm/rpmlint.toml) and the reasons for
    what the package lacks on purpose (rpm/mjf-hooks.rpmlintrc): no error, no
    warning - and every filter is used, so none hides a fixed problem."""
    require(shutil.which("rpmlint") is not None, "needs rpmlint (apt-get install rpmlint)")
    result = subprocess.run(
        ["rpmlint", "-c", str(CHECKOUT_ROOT / "rpm/rpmlint.toml"),
         "-r", str(CHECKOUT_ROOT / "rpm/mjf-hooks.rpmlintrc"), str(built["rpm"])],
        capture_output=True, text=True, timeout=300)
    found = [line for line in result.stdout.splitlines() if re.search(r": [EW]: ", line)]
    assert (result.returncode, found) == (0, []), result.stdout + result.stderr
    assert " 0 errors, 0 warnings" in result.stdout
    lines = (CHECKOUT_ROOT / "rpm/mjf-hooks.rpmlintrc").read_text().splitlines()
    for before, line in zip(lines, lines[1:]):
        if line.startswith("addFilter"):
            assert before.startswith("# "), line  # its reason, on the line before it


def test_declared_dependencies(built):
    requires = rpm_query("-qpR", str(built["rpm"]))
    assert "python3-click" in requires
    assert "python3 >= 3.9" in requires
    for requirement in requires:
        assert "3.11" not in requirement, requirement  # the build host's python
        assert not re.search(r"/(tmp|root|home|work|usr/local|opt)/|venv", requirement), requirement
        assert "dist(" not in requirement, requirement  # python3.Xdist(...) from metadata
        if requirement.startswith("/"):
            assert requirement in {"/bin/sh", "/usr/bin/python3"}, requirement
        if requirement.startswith("python(abi)"):
            assert requirement == "python(abi) = 3.9", requirement  # EL9's python3
    assert not any(re.match(r"python3?-?pip", requirement) for requirement in requires)
    # The units stay disabled: no scriptlet enables anything.
    scripts = subprocess.run(["rpm", "-qp", "--scripts", str(built["rpm"])],
                             capture_output=True, text=True, check=True).stdout
    assert "enable" not in scripts.replace("--no-reload preset", "")
    assert rpm_query("-qp", "--qf", "%{ARCH}", str(built["rpm"])) == ["noarch"]


def test_no_scriptlet_starts_restarts_or_stops_run_mjf_mount():
    """The scriptlets, as the spec writes them for EL9 (the RPM built here, without
    systemd's rpm macros, has none): %systemd_post applies the presets on a first
    install, %systemd_postun - not its _with_restart - only reloads after an upgrade,
    and %systemd_preun, which stops what it names on removal, does not name
    run-mjf.mount: stopping it unmounts the tmpfs that holds running jobs' directories
    (docs/rollout.md). It is only disabled."""
    spec = (CHECKOUT_ROOT / "rpm/mjf-hooks.spec.in").read_text()
    scriptlets = spec.split("\n%post\n", 1)[1].split("\n%files\n", 1)[0]
    lines = [line.strip() for line in scriptlets.splitlines()
             if line.strip() and not line.startswith("#")]
    macros = [line for line in lines if line.startswith("%systemd")]
    assert macros == ["%systemd_post %{mjf_units}",
                      "%systemd_preun mjf-sync.service mjf-sync.timer",
                      "%systemd_postun %{mjf_units}"]
    assert [line for line in lines if "systemctl" in line] == [
        "if [ $1 -eq 0 ] && [ -x /usr/bin/systemctl ]; then",
        "systemctl --no-reload disable run-mjf.mount > /dev/null 2>&1 || :"]


def test_version_comes_from_the_package(built):
    import mjf_hooks

    version = package_version()
    assert version == mjf_hooks.__version__
    for package in (built["srpm"], built["rpm"]):
        assert rpm_query("-qp", "--qf", "%{NAME} %{VERSION}", str(package)) == [
            f"mjf-hooks {version}"]
    # The SRPM's spec was filled in; the template holds no number of its own.
    template = (CHECKOUT_ROOT / "rpm" / "mjf-hooks.spec.in").read_text()
    assert "@VERSION@" in template and version not in template


def test_commands_run_with_the_system_python(built):
    payload = built["payload"]
    for name in commands():
        member, content = payload[f"/usr/bin/{name}"]
        assert member.mode & 0o755 == 0o755, name
        first = content.split(b"\n", 1)[0]
        # -I: a root hook's Python ignores the job's PYTHONPATH and its user's
        # site-packages; -S: the command adds the system's site-packages itself
        expected = b"#!/bin/sh" if name == "mjf-slurm-taskprolog" else b"#!/usr/bin/python3 -IS"
        assert first == expected, (name, first)


def test_payload_library_and_command_work(built, tmp_path):
    """The payload as installed: its `mjf` runs against its own library."""
    for path, (member, content) in built["payload"].items():
        if member.isfile():
            target = tmp_path / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
    (sitelib,) = (tmp_path / "usr" / "lib").glob("python3.*/site-packages")
    env = {**os.environ, "PYTHONPATH": str(sitelib)}
    result = subprocess.run(
        [sys.executable, str(tmp_path / "usr/bin/mjf"), "--version"],
        capture_output=True, text=True, env=env, timeout=30,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-1] == package_version()
    located = subprocess.run(
        [sys.executable, "-c", "import mjf_hooks; print(mjf_hooks.__file__)"],
        capture_output=True, text=True, env=env, cwd=tmp_path, check=True,
    ).stdout.strip()
    assert located.startswith(str(sitelib))


@pytest.mark.parametrize("removed", ["bin/mjf-lsf", "contrib/systemd/mjf-sync.timer"])
def test_missing_file_fails_cleanly(built, tmp_path, removed):
    source = clean_copy(tmp_path / "src")
    (source / removed).unlink()
    outdir = tmp_path / "out"
    result = run_build(source, outdir)
    assert result.returncode == 1, result.stderr  # documented: 1, the build failed
    assert f"missing file in the source tree: {removed}" in result.stderr
    assert "nothing was written" in result.stderr
    assert list(outdir.iterdir()) == []


def test_usage_error(built, tmp_path):
    result = subprocess.run([str(CHECKOUT_ROOT / BUILD)], capture_output=True, text=True)
    assert result.returncode == 2
    assert "usage:" in result.stderr
