"""The Debian package: built with dpkg-buildpackage from the checkout's source files,
installed with ``apt-get install ./mjf-hooks_*.deb`` into a clean debootstrap bookworm
chroot (nothing of ours there, not even python3), used there as root and as an
unprivileged user, and purged again.

The chroot is a scratch copy of the pristine root ``build-bookworm-root`` keeps in
/srv/mjf-bookworm-root (built once, a few minutes; ~30 s for this module after), so
every run starts from the same clean state; the copy is removed afterwards. The tests
run in order on one installation: they are the stages of its life.

What purge may leave (asserted, against a manifest of the clean root taken before the
install): nothing of the package - no file, no /etc/mjf, no dpkg or
deb-systemd-helper state. Only runtime state the commands made when they ran, not the
package: /run/mjf (the default base_dir; /run is a tmpfs emptied at boot, FHS 3.0) and
/tmp/mjf-<uid> (an unprivileged `mjf run`'s private directory). Once the dependencies
apt pulled in are autoremoved too, the root differs from the clean one only in that
runtime state and apt's and dpkg's own bookkeeping (logs, status, caches).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import CHECKOUT_ROOT, FIXTURES, require
from tests.packaging import bookworm_root, sources
from tests.packaging.bookworm_root import ScratchRoot, changes, manifest
from tests.packaging.sources import package_version

COMMANDS = sources.commands()
UNITS = ("mjf-sync.service", "mjf-sync.timer", "run-mjf.mount")
USER = "nobody:nogroup"  # an unprivileged user every Debian root has (uid 65534)
USER_DIR = "/tmp/mjf-65534"  # where its `mjf run` puts its job (README, `mjf run`)
# The README's first command, as the package installs it (no venv: /usr/bin/mjf).
FIRST_COMMAND = "mjf run -- sh -c 'cat $JOBFEATURES/allocated_cpu'"
# Runtime state made by running the commands, not by the package (see the docstring).
RUNTIME_STATE = ("/run/mjf", USER_DIR)
# apt's and dpkg's own records of installing and removing packages.
# (man-db's index of the installed manual pages, /var/cache/man, is rebuilt from them.)
BOOKKEEPING = ("/var/lib/dpkg/", "/var/lib/apt/", "/var/cache/apt/", "/var/cache/debconf/",
               "/var/cache/ldconfig/", "/var/log/", "/etc/ld.so.cache", "/var/cache/man/")
REPLAY = "/tmp/replay"  # recorded job starts, copied in for the replays (removed after)


def test_changelog_repeats_the_one_version():
    """The version lives in mjf_hooks/__init__.py; debian/changelog must repeat it
    (debian/bump-version sets both; debian/rules refuses to build a mismatch), and
    CHANGELOG.md, what admins read, has a heading for every version Debian's has."""
    assert sources.debian_changelog_versions()[0] == package_version()
    assert sources.changelog_md_versions() == sources.debian_changelog_versions()


def unreleased_section(text: str) -> str:
    """What CHANGELOG.md gathers under ``## Unreleased`` (empty where it has none)."""
    start = text.find("\n## Unreleased\n")
    if start < 0:
        return ""
    body = text[start + len("\n## Unreleased\n"):]
    return body.split("\n## ", 1)[0]


@pytest.mark.parametrize("unreleased", ["as it is", "none"])
def test_bump_version_changes_both(tmp_path, unreleased):
    copy = tmp_path / "tree"
    for part in ("debian", "mjf_hooks"):
        shutil.copytree(CHECKOUT_ROOT / part, copy / part,
                        ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(CHECKOUT_ROOT / "CHANGELOG.md", copy)
    if unreleased == "none":
        text = (copy / "CHANGELOG.md").read_text()
        section = unreleased_section(text)
        if section:
            (copy / "CHANGELOG.md").write_text(text.replace("\n## Unreleased\n" + section, "\n"))
    before = (copy / "CHANGELOG.md").read_text()
    bump = [str(copy / "debian/bump-version"), "9.8.7", "A change.", "Another."]
    environment = {"PATH": "/usr/bin:/bin", "DEBEMAIL": "a@b.c", "DEBFULLNAME": "A B"}
    subprocess.run(bump, check=True, env=environment)
    assert '__version__ = "9.8.7"' in (copy / "mjf_hooks/__init__.py").read_text()
    changelog = (copy / "debian/changelog").read_text()
    assert changelog.startswith("mjf-hooks (9.8.7) unstable; urgency=medium\n\n  * A change.\n"
                                "  * Another.\n\n -- A B <a@b.c>  ")
    assert f"mjf-hooks ({package_version()})" in changelog  # the history is kept
    # CHANGELOG.md: the same changes under a heading of their own, above the others, and
    # what "## Unreleased" gathered after them (that heading gone, its entries kept).
    gathered = [line for line in unreleased_section(before).splitlines() if line]
    text = (copy / "CHANGELOG.md").read_text()
    new = text[text.index("## 9.8.7 - "):]
    assert new.split("\n", 1)[1].startswith(
        "\n" + "\n".join(["- A change.", "- Another.", *gathered]) + "\n\n## ")
    assert "## Unreleased" not in text
    assert text.startswith(before.split("\n## ")[0])
    assert sources.changelog_md_versions(copy) == sources.debian_changelog_versions(copy) \
        == ["9.8.7", *sources.debian_changelog_versions()]
    # A version that is there already changes nothing.
    kept = {path: (copy / path).read_text()
            for path in ("CHANGELOG.md", "debian/changelog", "mjf_hooks/__init__.py")}
    again = subprocess.run(bump, env=environment, capture_output=True, text=True)
    assert again.returncode == 2 and "CHANGELOG.md already has 9.8.7" in again.stderr
    assert kept == {path: (copy / path).read_text() for path in kept}


@pytest.fixture(scope="module")
def deb(tmp_path_factory) -> Path:
    bookworm_root.require_build_tools()
    return bookworm_root.build_deb(tmp_path_factory.mktemp("deb"))


@pytest.fixture(scope="module")
def root(deb):
    """A clean bookworm root; its manifest before anything of ours; the .deb installed."""
    bookworm_root.ensure_pristine()
    scratch = ScratchRoot(Path("/var/tmp"))
    try:
        scratch.create()
        # man-db, to read the manual pages as a site would (`man mjf`): not a dependency
        # of ours, so it is part of the clean state.
        scratch.apt_get_install("man-db")
        scratch.clean = manifest(scratch.path)
        assert not [path for path in scratch.clean if "mjf" in path], "not a clean root"
        assert scratch.chroot(["sh", "-c", "command -v python3"], check=False).returncode != 0
        scratch.installed = scratch.install_deb(deb)
        yield scratch
    finally:
        scratch.destroy()


def in_root(root: ScratchRoot, script: str, user: str | None = None, env=None,
            check: bool = True) -> subprocess.CompletedProcess:
    """``sh -c script`` in the root, as root or ``user``, with a clean environment."""
    base = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8",
            "HOME": "/root" if user is None else "/nonexistent"}
    result = root.chroot(["sh", "-c", script], user=user, env={**base, **(env or {})},
                         check=False)
    if check and result.returncode != 0:
        raise AssertionError(f"{script}: exit {result.returncode}\n{result.stdout}\n"
                             f"{result.stderr}")
    return result


@pytest.mark.integration
def test_the_package_holds_what_it_should(deb):
    listing = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True,
                             check=True).stdout
    paths = {line.split()[5].lstrip(".") for line in listing.splitlines()}
    assert {f"/usr/bin/{command}" for command in COMMANDS} <= paths
    assert {f"/lib/systemd/system/{unit}" for unit in UNITS} <= paths
    assert "/usr/lib/python3/dist-packages/mjf_hooks/__init__.py" in paths
    assert "/usr/share/doc/mjf-hooks/contrib/mjf.conf.example" in paths
    assert "/etc/mjf/mjf.conf.d/" in paths  # the drop-ins' directory, the package's
    assert "/usr/share/bash-completion/completions/mjf" in paths
    assert "/usr/share/doc/mjf-hooks/docs/README.md" in paths  # the map; larger pages .gz
    assert "/usr/share/doc/mjf-hooks/contrib/systemd/mjf-sync.timer" in paths
    assert not [path for path in paths if "/tests/" in path or "egg-info" in path]
    info = subprocess.run(["dpkg-deb", "-f", str(deb), "Version", "Architecture", "Depends"],
                          capture_output=True, text=True, check=True).stdout
    assert f"Version: {package_version()}\n" in info and "Architecture: all\n" in info
    assert "python3-click" in info and "python3:any (>= 3.9~)" in info
    conffiles = subprocess.run(["dpkg-deb", "-I", str(deb), "conffiles"], capture_output=True,
                               text=True, check=True).stdout.split()
    assert conffiles == ["/etc/mjf/mjf.conf"]
    # A manual page for every command and for mjf.conf(5); the changelogs.
    pages = {path for path in paths if path.startswith("/usr/share/man/") and path[-1] != "/"}
    assert pages == {f"/usr/share/man/man{section}/{page}.{section}.gz"
                     for page, section, _ in sources.man_pages()}
    # CHANGELOG.md compressed once it is over 4 KiB, as dh_compress does every doc
    # (`find -size +4k`).
    changelog_md = "/usr/share/doc/mjf-hooks/CHANGELOG.md" + (
        ".gz" if (CHECKOUT_ROOT / "CHANGELOG.md").stat().st_size > 4096 else "")
    assert {"/usr/share/doc/mjf-hooks/changelog.gz", changelog_md,
            "/usr/share/doc/mjf-hooks/copyright"} <= paths


@pytest.mark.integration
def test_the_build_ran_the_unit_tests(deb):
    """dh_auto_test runs tests/unit (no root, no daemon); the build fails if one fails."""
    log = (deb.parent / "build.log").read_text()
    assert "python3 -m pytest -p no:cacheprovider -q tests/unit\n" in log
    assert re.search(r"^\d+ passed, \d+ skipped in ", log, re.M), log[-3000:]


@pytest.mark.integration
def test_lintian_finds_no_error_and_no_warning(deb):
    require(shutil.which("lintian") is not None, "needs lintian (apt-get install lintian)")
    result = subprocess.run(["lintian", "--fail-on", "error,warning", str(deb)],
                            capture_output=True, text=True, timeout=600)
    tags = [line for line in result.stdout.splitlines() if line[:2] in ("E:", "W:")]
    assert (result.returncode, tags) == (0, []), result.stdout + result.stderr


@pytest.mark.integration
def test_installed_with_apt_into_a_clean_root(root):
    assert "Setting up mjf-hooks" in root.installed.stdout
    status = in_root(root, "dpkg-query -W -f='${Status} ${Version}' mjf-hooks").stdout
    assert status == f"install ok installed {package_version()}"
    assert in_root(root, "dpkg --audit").stdout == ""
    # The system python imports the package, at the version it was built with.
    version = in_root(root, "python3 -I -c 'import mjf_hooks; print(mjf_hooks.__version__)'",
                      user=USER)
    assert version.stdout.strip() == package_version()
    for command in COMMANDS:
        first = (root.path / "usr/bin" / command).read_text().splitlines()[0]
        # -I: a root hook's Python ignores the job's PYTHONPATH and its user's
        # site-packages; -S: the command adds the system's site-packages itself
        assert first == ("#!/bin/sh" if command == "mjf-slurm-taskprolog"
                         else "#!/usr/bin/python3 -IS"), command
        assert os.stat(root.path / "usr/bin" / command).st_mode & 0o755 == 0o755


@pytest.mark.integration
def test_man_shows_every_page(root):
    """`man mjf` (and every other page) in the root, as an admin reads it, shows the
    synopsis its --help gives."""
    for page, section, _ in sources.man_pages():
        shown = in_root(root, f"MANWIDTH=200 man {section} {page}", user=USER).stdout
        assert f"{page.upper()}({section})" in shown.splitlines()[0], shown[:300]
    assert "mjf [OPTIONS] COMMAND [ARGS]..." in in_root(root, "MANWIDTH=200 man mjf").stdout
    taskprolog = in_root(root, "mjf-slurm-taskprolog --help").stdout.splitlines()[0]
    assert taskprolog.replace("usage: ", "") in " ".join(
        in_root(root, "MANWIDTH=200 man mjf-slurm-taskprolog").stdout.split())


@pytest.mark.integration
def test_the_conffile_is_all_comments_and_means_the_defaults(root):
    conffile = (root.path / "etc/mjf/mjf.conf").read_text()
    assert conffile == (CHECKOUT_ROOT / "contrib" / "mjf.conf").read_text()
    lines = [line for line in conffile.splitlines() if line.strip()]
    assert lines and all(line.startswith("#") for line in lines)
    # Short (the sh TaskProlog reads it a byte at a time per task), and what it names is
    # there: the example with every option, and the manual page.
    assert len(conffile) < 1024
    assert "/usr/share/doc/mjf-hooks/contrib/mjf.conf.example" in conffile
    assert (root.path / "usr/share/doc/mjf-hooks/contrib/mjf.conf.example").is_file()
    assert "man 5 mjf.conf" in conffile
    assert in_root(root, "man -w 5 mjf.conf").returncode == 0
    # The commands read it (it is the default path) and find nothing wrong in it.
    result = in_root(root, "mjf run --verbose -- true")
    assert "error" not in result.stderr and "warning" not in result.stderr, result.stderr


@pytest.mark.integration
def test_a_command_finds_the_package_without_importing_site(root):
    """`python3 -IS`, as the commands start: the .deb's package is found where the .deb
    puts it (dist-packages) without site's module, a sixtieth of a bare start."""
    block = (root.path / "usr/bin/mjf-slurm").read_text().split("\nfrom mjf_hooks", 1)[0]
    probe = root.path / "root/mjf-start-probe.py"
    probe.write_text(block + "\nimport mjf_hooks\nprint('site' in sys.modules, "
                             "mjf_hooks.__file__)\n")
    try:
        out = in_root(root, "/usr/bin/python3 -IS /root/mjf-start-probe.py").stdout.split()
    finally:
        probe.unlink()
    assert out == ["False", "/usr/lib/python3/dist-packages/mjf_hooks/__init__.py"]


@pytest.mark.integration
def test_units_are_shipped_disabled(root):
    for unit in UNITS:
        assert (root.path / "lib/systemd/system" / unit).is_file()
    etc = root.path / "etc/systemd/system"
    enabled = [str(path) for path in etc.rglob("*")
               if "mjf" in path.name] if etc.exists() else []
    assert enabled == []
    assert "ExecStart=/usr/bin/mjf sync" in (root.path / "lib/systemd/system/mjf-sync.service"
                                              ).read_text()


@pytest.mark.integration
@pytest.mark.parametrize("user", [None, USER], ids=["root", "user"])
def test_the_readme_first_command(root, user):
    result = in_root(root, FIRST_COMMAND, user=user)
    assert result.stdout.strip().isdigit() and int(result.stdout) >= 1
    if user is None:
        assert result.stderr == ""
        assert (root.path / "run/mjf/machinefeatures/total_cpu").is_file()
        assert list((root.path / "run/mjf/jobs").iterdir()) == []  # removed when CMD ended
    else:
        assert f"using {USER_DIR} for this job" in result.stderr
        assert list((root.path / USER_DIR.lstrip("/") / "jobs").iterdir()) == []


@pytest.mark.integration
@pytest.mark.parametrize("user", [None, USER], ids=["root", "user"])
def test_mjf_check_passes_on_what_mjf_run_writes(root, user):
    result = in_root(root, "mjf run --wall-limit 3600 -- mjf check --json", user=user,
                     check=False)
    report = json.loads(result.stdout)
    errors = [f for f in report["findings"] if f["severity"] == "error"]
    assert errors == [] and result.returncode in (0, 1), result.stdout + result.stderr
    # Warnings only for site values this bare install has not configured.
    warned = {f["key"] for f in report["findings"] if f["severity"] == "warning"}
    assert warned <= {"hs06", "hs06_job", "max_rss_bytes", "max_swap_bytes",
                      "scratch_limit_bytes"}, report


@pytest.fixture
def replays(root):
    """The recorded job starts, copied into the root: Slurm 24.11's and 22.05's Prolog
    environments and HTCondor 23.9's wrapper environment with its two ads (the
    recorded scratch directory replaced by one in the root)."""
    directory = root.path / REPLAY.lstrip("/")
    scratch = directory / "scratch"
    scratch.mkdir(parents=True)
    shutil.copy(FIXTURES / "slurm-24.11/cgv1-prolog.env", directory / "prolog-24.11.env")
    recorded = (FIXTURES / "slurm-22.05/prolog-sbatch.env").read_text()
    (directory / "prolog-22.05.env").write_text(recorded.split("# scontrol show job")[0])
    condor = FIXTURES / "htcondor-23.9"
    shutil.copy(condor / "job.ad", scratch / ".job.ad")
    shutil.copy(condor / "machine.ad", scratch / ".machine.ad")
    (directory / "wrapper.env").write_text((condor / "wrapper.env").read_text().replace(
        "/var/lib/condor/execute/dir_18677", f"{REPLAY}/scratch"))
    for path in [directory, *directory.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    yield directory
    shutil.rmtree(directory)


@pytest.mark.integration
@pytest.mark.parametrize("user", [None, USER], ids=["root", "user"])
def test_replay_a_recorded_slurm_prolog(root, replays, user):
    result = in_root(root, f"mjf-slurm --dry-run --env-file {REPLAY}/prolog-24.11.env prolog",
                     user=user)
    assert result.stderr == ""
    for line in ("/run/mjf/jobs/9/jobfeatures/job_id = 9",
                 "/run/mjf/jobs/9/jobfeatures/wall_limit_secs = 300",
                 "/run/mjf/jobs/9/jobfeatures/allocated_cpu = 2"):
        assert line in result.stdout.splitlines()
    assert not (root.path / "run/mjf/jobs/9").exists()  # a dry run writes nothing
    # 22.05 passes no time limit: the Prolog would ask scontrol, which this root lacks.
    old = in_root(root, f"mjf-slurm --dry-run --env-file {REPLAY}/prolog-22.05.env prolog",
                  user=user)
    assert "/run/mjf/jobs/3/jobfeatures/job_id = 3" in old.stdout.splitlines()
    assert "cannot run /usr/bin/scontrol" in old.stderr and old.stderr.count("\n") == 1


@pytest.mark.integration
@pytest.mark.parametrize("user", [None, USER], ids=["root", "user"])
def test_replay_a_recorded_htcondor_wrapper(root, replays, user):
    result = in_root(root, f"mjf htcondor-wrapper --env-file {REPLAY}/wrapper.env --dry-run "
                           "-- /bin/true", user=user)
    assert result.stderr == ""
    assert "/jobs/vm#1.0#1795319385/jobfeatures/wall_limit_secs = 300" in result.stdout
    assert "would exec: ['/bin/true']" in result.stdout
    assert not (replays / "scratch/.mjf").exists()


@pytest.mark.integration
def test_without_the_conffile_everything_runs_on_defaults(root, replays, deb):
    """An admin deleted /etc/mjf/mjf.conf: a missing file means all defaults (README,
    Configuration) - the commands run, say nothing about it and exit 0; the package
    stays fully installed; dpkg keeps the deletion (a reinstall does not undo the
    admin's choice) until asked to bring the default back."""
    (root.path / "etc/mjf/mjf.conf").unlink()
    for user in (None, USER):
        result = in_root(root, FIRST_COMMAND, user=user)
        assert result.stdout.strip().isdigit()
        replay = in_root(root, f"mjf-slurm --dry-run --env-file {REPLAY}/prolog-24.11.env "
                               "prolog", user=user)
        assert replay.stderr == "" and "/run/mjf/jobs/9/jobfeatures/job_id = 9" in replay.stdout
        check = in_root(root, "mjf run --wall-limit 3600 -- mjf check", user=user, check=False)
        assert check.returncode in (0, 1) and "ERROR" not in check.stdout
    assert in_root(root, "dpkg-query -W -f='${Status}' mjf-hooks").stdout == \
        "install ok installed"
    assert in_root(root, "dpkg --audit").stdout == ""
    verify = in_root(root, "dpkg --verify mjf-hooks", check=False).stdout
    assert verify.split() == ["missing", "c", "/etc/mjf/mjf.conf"]
    # A broken config instead: one line naming the file and line, exit 0, the job runs.
    (root.path / "etc/mjf/mjf.conf").write_text("[mjf]\nbase_dir = relative\n")
    broken = in_root(root, "mjf run -- echo ran")
    assert broken.stdout == "ran\n"
    assert "/etc/mjf/mjf.conf, line 2: [mjf] base_dir = 'relative': must be an absolute " \
           "path" in broken.stderr
    (root.path / "etc/mjf/mjf.conf").unlink()
    # The package's default comes back only when asked for.
    shutil.copy(deb, root.path / "root" / deb.name)
    try:
        in_root(root, f"cd /root && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
                      f"--reinstall ./{deb.name}")
        assert not (root.path / "etc/mjf/mjf.conf").exists()
        in_root(root, f"cd /root && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
                      f"--reinstall -o Dpkg::Options::=--force-confmiss ./{deb.name}")
    finally:
        (root.path / "root" / deb.name).unlink()
    assert (root.path / "etc/mjf/mjf.conf").read_text().startswith("# /etc/mjf/mjf.conf")


def _runtime(path: str) -> bool:
    return any(path == top or path.startswith(top + "/") for top in RUNTIME_STATE)


@pytest.mark.integration
def test_purge_leaves_nothing_of_the_package(root):
    in_root(root, "DEBIAN_FRONTEND=noninteractive apt-get purge -y -q mjf-hooks")
    assert in_root(root, "dpkg-query -W -f='${Status}' mjf-hooks", check=False).stdout in \
        ("", "unknown ok not-installed")
    diff = changes(root.clean, manifest(root.path))
    ours = [path for kind in ("added", "changed") for path in diff[kind]
            if "mjf" in path and not _runtime(path)]
    assert ours == []  # no file, no /etc/mjf, no dpkg or deb-systemd-helper state
    assert not (root.path / "etc/mjf").exists()
    assert not (root.path / "usr/lib/python3/dist-packages/mjf_hooks").exists()
    # What apt pulled in for it goes too: then only runtime state and apt's and dpkg's
    # own bookkeeping differ from the clean root.
    in_root(root, "DEBIAN_FRONTEND=noninteractive apt-get autoremove --purge -y -q")
    diff = changes(root.clean, manifest(root.path))
    assert diff["removed"] == []
    left = [path for kind in ("added", "changed") for path in diff[kind]
            if not _runtime(path) and not path.startswith(BOOKKEEPING)]
    assert left == []
    assert {path for path in diff["added"] if _runtime(path)} >= {"/run/mjf", USER_DIR}


@pytest.mark.integration
def test_an_unsatisfiable_dependency_fails_clearly_and_installs_nothing(deb):
    """apt cannot get python3-click (no package lists, nothing cached): it says which
    dependency, exits non-zero, and neither the package nor anything of it is there."""
    bookworm_root.ensure_pristine()
    scratch = ScratchRoot(Path("/var/tmp"))
    try:
        scratch.create()
        for directory in ("var/lib/apt/lists", "var/cache/apt/archives"):
            for path in (scratch.path / directory).glob("*"):
                if path.is_file():
                    path.unlink()
        clean = manifest(scratch.path)
        with pytest.raises(AssertionError) as failed:
            scratch.install_deb(deb)
        assert "mjf-hooks : Depends: python3-click but it is not installable" in \
            str(failed.value)
        assert in_root(scratch, "dpkg-query -W -f='${Status}' mjf-hooks",
                       check=False).stdout in ("", "unknown ok not-installed")
        assert in_root(scratch, "dpkg --audit").stdout == ""
        diff = changes(clean, manifest(scratch.path))
        assert [path for kind in diff.values() for path in kind if "mjf" in path] == []
    finally:
        scratch.destroy()
