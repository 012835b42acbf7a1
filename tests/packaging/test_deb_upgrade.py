"""Upgrading the Debian package on a node running jobs, and what its maintainer scripts
do with the systemd units meanwhile: the two claims of docs/rollout.md, with real
dpkg and apt in the bookworm chroot of test_deb.py.

The earlier package is built from ``git archive`` of an earlier commit of this
repository (OLD_COMMIT) with a lower Debian version, the new one from the checkout;
both once for the module, without their unit tests. Jobs are started as a node starts
them: the earlier package's ``mjf-slurm prolog`` replaying a recorded Slurm 24.11
Prolog environment (the job's user made ``nobody``), and an ``mjf run`` still running
its command while the package is replaced. The new package's Epilog must then end
them.

The chroot gets what a booted systemd node shows a maintainer script: the directory
/run/systemd/system, by which they tell systemd runs, and a ``systemctl`` that records
every call and acts out run-mjf.mount's start and stop (mounting and unmounting its
tmpfs on /run/mjf), so a script that started, stopped or restarted a unit shows both
in the record and on the mounts. No real systemd runs there: what it would do with
a call is not tested, only that none is made.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import CHECKOUT_ROOT, FIXTURES, require
from tests.packaging import bookworm_root
from tests.packaging.bookworm_root import ScratchRoot, changes, manifest
from tests.packaging.sources import package_version

pytestmark = pytest.mark.integration

# Main before drop-ins, the bash completion and this test: a stand-in for the release
# a node runs. Its Debian version is made lower than the checkout's, so that dpkg
# sees an upgrade (a "~" sorts before anything).
OLD_COMMIT = "4226f7a"
OLD_VERSION = f"0.1.0~git{OLD_COMMIT}"
UNITS = ("mjf-sync.service", "mjf-sync.timer", "run-mjf.mount")
JOB_USER = "nobody:nogroup"  # the recorded job's user, as a user every root has
SYSTEMCTL_LOG = "/root/systemctl.log"
GO = "/root/go"  # the FIFO the running `mjf run` job waits on
# An admin's edit of the conffile under the earlier package (it read no drop-ins).
ADMIN_EDIT = "\n[machinefeatures]\nhs06 = 1234.5\n"

SYSTEMCTL = f"""#!/bin/sh
# What a maintainer script's systemctl call would do on a booted node, as far as this
# test needs: recorded, and run-mjf.mount's tmpfs mounted or unmounted.
echo "$*" >> {SYSTEMCTL_LOG}
verb= now= unit=
for arg; do
    case $arg in
        --now) now=yes ;;
        -*) ;;
        *) if [ -z "$verb" ]; then verb=$arg; elif [ "$arg" = run-mjf.mount ]; then unit=yes; fi ;;
    esac
done
[ "$unit" = yes ] || exit 0
case $verb/$now in
    stop/*|disable/yes|restart/*|try-restart/*|reload-or-restart/*|try-reload-or-restart/*)
        umount /run/mjf ;;
esac
case $verb/$now in
    start/*|enable/yes|restart/*|try-restart/*|reload-or-restart/*|try-reload-or-restart/*)
        mkdir -p /run/mjf && mount -t tmpfs -o mode=0755 tmpfs /run/mjf ;;
esac
exit 0
"""


@pytest.fixture(scope="module")
def debs(tmp_path_factory) -> dict[str, Path]:
    """The earlier package and the checkout's, built side by side."""
    bookworm_root.require_build_tools()
    known = subprocess.run(["git", "-C", str(CHECKOUT_ROOT), "cat-file", "-e",
                            f"{OLD_COMMIT}^{{commit}}"], capture_output=True)
    require(known.returncode == 0,
            f"needs commit {OLD_COMMIT} of this repository to build the earlier package "
            "from (a shallow clone lacks it: git fetch --unshallow)")
    base = tmp_path_factory.mktemp("debs")
    old_source = base / "old" / "mjf-hooks"
    old_source.mkdir(parents=True)
    subprocess.run(f"git -C '{CHECKOUT_ROOT}' archive {OLD_COMMIT} | tar -x -C '{old_source}'",
                   shell=True, check=True)
    changelog = old_source / "debian/changelog"
    first, rest = changelog.read_text().split("\n", 1)
    changelog.write_text(first.replace("(0.1.0)", f"({OLD_VERSION})", 1) + "\n" + rest)
    assert OLD_VERSION in changelog.read_text().split("\n", 1)[0]
    # Its debian/rules refuses a Debian version other than mjf_hooks.__version__ (0.1.0,
    # which cannot hold a "~"): the check is given the changelog's instead.
    rules = f"debian/rules VERSION={OLD_VERSION}"
    with ThreadPoolExecutor(2) as pool:
        old = pool.submit(bookworm_root.build_deb, base / "old", False, old_source, rules)
        new = pool.submit(bookworm_root.build_deb, base / "new", False)
        built = {"old": old.result(), "new": new.result()}
    assert subprocess.run(["dpkg", "--compare-versions", OLD_VERSION, "lt",
                           package_version()]).returncode == 0
    return built


def sh(root: ScratchRoot, script: str, user: str | None = None,
       check: bool = True) -> subprocess.CompletedProcess:
    """``sh -c script`` in the root, as root or ``user``, with a clean environment."""
    environment = {"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "LC_ALL": "C.UTF-8",
                   "HOME": "/root" if user is None else "/nonexistent"}
    result = root.chroot(["sh", "-c", script], user=user, env=environment, check=False,
                         timeout=300)
    if check and result.returncode != 0:
        raise AssertionError(f"{script}: exit {result.returncode}\n{result.stdout}\n"
                             f"{result.stderr}")
    return result


def mounts(root: ScratchRoot) -> list[tuple[str, str, str]]:
    """The mounts inside the root but its /proc: (mount id, where, filesystem type)."""
    inside = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        where, kind = fields[4], fields[fields.index("-") + 1]
        if where.startswith(f"{root.path}/") and where != f"{root.path}/proc":
            inside.append((fields[0], where[len(str(root.path)):], kind))
    return inside


def install(root: ScratchRoot, deb: Path, *options: str) -> subprocess.CompletedProcess:
    """``apt-get install -y ./the.deb`` (``options`` for dpkg), stdin not a terminal."""
    shutil_copy = (root.path / "root" / deb.name)
    shutil_copy.write_bytes(deb.read_bytes())
    dpkg = " ".join(f"-o Dpkg::Options::={option}" for option in options)
    try:
        return sh(root, f"cd /root && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
                        f"--no-install-recommends {dpkg} ./{deb.name} < /dev/null")
    finally:
        shutil_copy.unlink()


def installed_version(root: ScratchRoot) -> str:
    return sh(root, "dpkg-query -W -f='${Status} ${Version}' mjf-hooks").stdout


def slurm_env(root: ScratchRoot, hook: str, job: str) -> str:
    """A recorded Slurm 24.11 Prolog or Epilog environment for ``job`` of ``nobody``,
    copied into the root; its path there."""
    recorded = (FIXTURES / f"slurm-24.11/cgv1-{hook}.env").read_text()
    environment = dict(line.split("=", 1) for line in recorded.splitlines() if "=" in line)
    environment.update(SLURM_JOB_ID=job, SLURM_JOBID=job, SLURM_JOB_UID="65534",
                       SLURM_UID="65534", SLURM_JOB_GID="65534", SLURM_JOB_USER="nobody")
    path = f"/root/{hook}-{job}.env"
    (root.path / path.lstrip("/")).write_text(
        "".join(f"{key}={value}\n" for key, value in environment.items()))
    return path


def hook(root: ScratchRoot, name: str, job: str) -> subprocess.CompletedProcess:
    """The installed ``mjf-slurm`` hook ``name`` for ``job``, as slurmd runs it (root)."""
    return sh(root, f"mjf-slurm {name} --env-file {slurm_env(root, name, job)}")


def as_the_job_reads_it(root: ScratchRoot, job: str) -> dict[str, str]:
    """Every file of the job's directory, read by its user through $JOBFEATURES's path."""
    listing = sh(root, f"cd /run/mjf/jobs/{job}/jobfeatures && for f in *; do "
                       "printf '%s=%s\\n' \"$f\" \"$(cat \"$f\")\"; done", user=JOB_USER)
    return dict(line.split("=", 1) for line in listing.stdout.splitlines())


def systemctl_calls(root: ScratchRoot) -> list[str]:
    log = root.path / SYSTEMCTL_LOG.lstrip("/")
    return log.read_text().splitlines() if log.exists() else []


def naming_our_units(calls: list[str]) -> list[str]:
    return [call for call in calls if any(unit in call.split() for unit in UNITS)]


def our_unit_links(root: ScratchRoot) -> list[str]:
    """Links that enable one of the units (``*.wants/``, ``*.requires/``, aliases)."""
    etc = root.path / "etc/systemd/system"
    return sorted(str(path.relative_to(root.path)) for path in etc.rglob("*")
                  if path.name in UNITS) if etc.exists() else []


def booted_root() -> ScratchRoot:
    """A scratch bookworm root that looks booted with systemd to maintainer scripts."""
    bookworm_root.ensure_pristine()
    root = ScratchRoot(Path("/var/tmp"))
    root.create()
    (root.path / "run/systemd/system").mkdir(parents=True)
    systemctl = root.path / "usr/bin/systemctl"
    assert not systemctl.exists(), "the pristine root has a systemctl of its own"
    systemctl.write_text(SYSTEMCTL)
    systemctl.chmod(0o755)
    return root


def tear_down(root: ScratchRoot, running: subprocess.Popen | None = None) -> None:
    if running is not None and running.poll() is None:
        os.killpg(running.pid, signal.SIGKILL)  # its session: the job command too
        running.wait(timeout=30)
    for _, where, _ in reversed(mounts(root)):  # a tmpfs this test (or a script) mounted
        subprocess.run(["umount", "-l", f"{root.path}{where}"], check=False)
    root.destroy()


@pytest.fixture(scope="module")
def busy_node(debs):
    """A node with the earlier package, its conffile edited by the admin, and jobs: two
    started by the earlier Prolog (9 and 10), one `mjf run` still running (waiting on
    GO); then upgraded to the new package, `apt-get install` keeping the admin's
    conffile as a fleet's upgrade does (--force-confdef, --force-confold)."""
    root = booted_root()
    running = None
    try:
        install(root, debs["old"])
        node = {"root": root, "old_install": systemctl_calls(root)}
        assert installed_version(root) == f"install ok installed {OLD_VERSION}"
        conffile = root.path / "etc/mjf/mjf.conf"
        node["old_conffile"] = conffile.read_text()
        conffile.write_text(node["old_conffile"] + ADMIN_EDIT)
        for job in ("9", "10"):
            started = hook(root, "prolog", job)
            assert started.returncode == 0 and (root.path / f"run/mjf/jobs/{job}").is_dir(), \
                started.stderr
        sh(root, f"mkfifo {GO}")
        before_run = set(os.listdir(root.path / "run/mjf/jobs"))
        running = subprocess.Popen(
            [bookworm_root.CHROOT, str(root.path), "/usr/bin/mjf", "run", "--", "sh", "-c",
             f'read line < {GO}; cat "$JOBFEATURES/allocated_cpu"'],
            env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8", "HOME": "/root"},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        node["running"] = running
        for _ in range(300):  # its directory appears whole (renamed into place)
            started_dirs = {name for name in os.listdir(root.path / "run/mjf/jobs")
                            if not name.startswith(".")} - before_run
            if started_dirs:
                break
            assert running.poll() is None, running.communicate()
            time.sleep(0.1)
        else:
            raise AssertionError("the `mjf run` job did not start within 30 s")
        [node["run_job"]] = started_dirs
        node["jobs_before"] = manifest(root.path / "run/mjf")
        node["read_before"] = {job: as_the_job_reads_it(root, job) for job in ("9", "10")}
        node["mounts_before"] = mounts(root)
        node["calls_before"] = len(systemctl_calls(root))
        node["upgrade"] = install(root, debs["new"], "--force-confdef", "--force-confold")
        yield node
    finally:
        tear_down(root, running)


def test_it_is_an_upgrade_from_the_earlier_package(busy_node):
    assert f"Unpacking mjf-hooks ({package_version()}) over ({OLD_VERSION})" in \
        busy_node["upgrade"].stdout
    root = busy_node["root"]
    assert installed_version(root) == f"install ok installed {package_version()}"
    assert sh(root, "dpkg --audit").stdout == ""
    # What only the new package has is there now.
    assert (root.path / "usr/share/bash-completion/completions/mjf").is_file()
    assert (root.path / "etc/mjf/mjf.conf.d").is_dir()


def test_running_jobs_directories_stay_as_they_are_and_readable(busy_node):
    root = busy_node["root"]
    assert changes(busy_node["jobs_before"], manifest(root.path / "run/mjf")) == \
        {"added": [], "removed": [], "changed": []}
    for job, values in busy_node["read_before"].items():
        assert as_the_job_reads_it(root, job) == values
        assert values["job_id"] == job and values["allocated_cpu"] == "2"
    assert busy_node["running"].poll() is None  # the `mjf run` job still runs


def test_the_admins_conffile_is_kept_and_the_new_default_set_beside_it(busy_node):
    root = busy_node["root"]
    assert (root.path / "etc/mjf/mjf.conf").read_text() == \
        busy_node["old_conffile"] + ADMIN_EDIT
    assert (root.path / "etc/mjf/mjf.conf.dpkg-dist").read_text() == \
        (CHECKOUT_ROOT / "contrib/mjf.conf").read_text()
    # The new version reads it as the earlier one did.
    shown = sh(root, "mjf config show").stdout
    assert "1234.5" in shown, shown


def test_the_new_epilog_ends_the_jobs_the_earlier_prolog_started(busy_node):
    root = busy_node["root"]
    ended = hook(root, "epilog", "9")
    assert (ended.returncode, ended.stderr) == (0, "")
    jobs = root.path / "run/mjf/jobs"
    assert not (jobs / "9").exists() and (jobs / "10" / "jobfeatures").is_dir()
    ended = hook(root, "epilog", "10")
    assert (ended.returncode, ended.stderr) == (0, "")
    assert not (jobs / "10").exists()


def test_the_running_mjf_run_ends_its_job_after_the_upgrade(busy_node):
    """Started by the earlier version's code, its command ends after the upgrade: it
    reads its $JOBFEATURES, and `mjf run` removes its directory and exits with it."""
    root, running = busy_node["root"], busy_node["running"]
    with open(root.path / GO.lstrip("/"), "w") as fifo:
        fifo.write("go\n")
    out, err = running.communicate(timeout=60)
    assert (running.returncode, err) == (0, "") and out.strip().isdigit(), (out, err)
    assert not (root.path / "run/mjf/jobs" / busy_node["run_job"]).exists()


def test_nothing_was_mounted_started_or_enabled(busy_node):
    """Installed, then upgraded with jobs' directories under /run/mjf: no unit of ours was
    started, stopped, restarted or enabled, nothing was mounted over /run/mjf."""
    root = busy_node["root"]
    assert mounts(root) == busy_node["mounts_before"] == []
    assert naming_our_units(busy_node["old_install"]) == []
    assert naming_our_units(systemctl_calls(root)) == [], systemctl_calls(root)
    assert our_unit_links(root) == []


def test_no_maintainer_script_starts_stops_or_enables_a_unit(debs, tmp_path):
    """The new package's maintainer scripts, as dh_installsystemd made them: no
    deb-systemd-invoke (which starts, stops and restarts), systemctl only to reload
    after a removal, and deb-systemd-helper's enable only for a unit the admin had
    enabled (recreating its links)."""
    control = tmp_path / "control"
    subprocess.run(["dpkg-deb", "-e", str(debs["new"]), str(control)], check=True)
    scripts = {path.name: path.read_text() for path in control.iterdir()
               if path.name in ("preinst", "postinst", "prerm", "postrm")}
    assert "postinst" in scripts  # dh_installsystemd's and dh_python3's snippets
    for name, text in scripts.items():
        assert "deb-systemd-invoke" not in text, name
        lines = [line.strip() for line in text.splitlines()]
        assert [line for line in lines if line.startswith("systemctl")] in (
            [], ["systemctl --system daemon-reload >/dev/null || true"]), name
        for number, line in enumerate(lines):
            if line.startswith("deb-systemd-helper enable"):
                guard = [earlier for earlier in lines[:number] if earlier.startswith("if ")]
                assert "was-enabled" in guard[-1], (name, line)


@pytest.fixture(scope="module")
def mounted_node(debs):
    """A node where the site started run-mjf.mount, a job's directory in its tmpfs."""
    root = booted_root()
    try:
        install(root, debs["old"])
        node = {"root": root, "old_install": systemctl_calls(root)}
        sh(root, "systemctl start run-mjf.mount")  # the site's, on a drained node
        (root.path / SYSTEMCTL_LOG.lstrip("/")).unlink()
        [tmpfs] = mounts(root)
        assert tmpfs[1:] == ("/run/mjf", "tmpfs")
        node["tmpfs"] = tmpfs
        assert hook(root, "prolog", "9").returncode == 0
        node["jobs_before"] = manifest(root.path / "run/mjf")
        node["read_before"] = as_the_job_reads_it(root, "9")
        node["upgrade"] = install(root, debs["new"])
        yield node
    finally:
        tear_down(root)


def test_an_upgrade_leaves_the_mounted_tmpfs_and_its_jobs_alone(mounted_node):
    root = mounted_node["root"]
    assert installed_version(root) == f"install ok installed {package_version()}"
    assert naming_our_units(mounted_node["old_install"]) == []
    assert naming_our_units(systemctl_calls(root)) == [], systemctl_calls(root)
    assert mounts(root) == [mounted_node["tmpfs"]]  # the same mount, not a new one
    assert changes(mounted_node["jobs_before"], manifest(root.path / "run/mjf")) == \
        {"added": [], "removed": [], "changed": []}
    assert as_the_job_reads_it(root, "9") == mounted_node["read_before"]
    assert our_unit_links(root) == []


def test_an_unedited_conffile_becomes_the_new_default(mounted_node):
    """Nobody changed it: apt replaces it without asking (stdin is not a terminal)."""
    root = mounted_node["root"]
    assert (root.path / "etc/mjf/mjf.conf").read_text() == \
        (CHECKOUT_ROOT / "contrib/mjf.conf").read_text()
    assert sorted(path.name for path in (root.path / "etc/mjf").iterdir()) == \
        ["mjf.conf", "mjf.conf.d"]


def test_the_new_epilog_ends_the_job_in_the_tmpfs(mounted_node):
    root = mounted_node["root"]
    assert (hook(root, "epilog", "9").returncode, mounts(root)) == \
        (0, [mounted_node["tmpfs"]])
    assert not (root.path / "run/mjf/jobs/9").exists()


def test_removal_and_a_fresh_install_leave_the_tmpfs_mounted(mounted_node, debs):
    """Removing the package (a job still running) does not stop run-mjf.mount either, nor
    does installing it afresh; the job's directory waits in the tmpfs."""
    root = mounted_node["root"]
    assert hook(root, "prolog", "11").returncode == 0
    before = manifest(root.path / "run/mjf")
    sh(root, "DEBIAN_FRONTEND=noninteractive apt-get purge -y -q mjf-hooks < /dev/null")
    gone = sh(root, "dpkg-query -W -f='${Status}' mjf-hooks", check=False).stdout
    assert gone in ("", "unknown ok not-installed")
    install(root, debs["new"])
    assert naming_our_units(systemctl_calls(root)) == [], systemctl_calls(root)
    assert mounts(root) == [mounted_node["tmpfs"]]
    assert changes(before, manifest(root.path / "run/mjf")) == \
        {"added": [], "removed": [], "changed": []}
    assert our_unit_links(root) == []


def test_unattended_an_edited_conffile_the_package_changed_stops_dpkg(debs):
    """Without --force-conf* options and with no terminal, dpkg stops at its question:
    the new files are unpacked, the package is not configured, and the admin's file is
    still there; configuring it with the options finishes the upgrade."""
    root = booted_root()
    try:
        install(root, debs["old"])
        conffile = root.path / "etc/mjf/mjf.conf"
        edited = conffile.read_text() + ADMIN_EDIT
        conffile.write_text(edited)
        with pytest.raises(AssertionError) as stopped:
            install(root, debs["new"])
        assert "end of file on stdin at conffile prompt" in str(stopped.value)
        assert installed_version(root) == f"install ok unpacked {package_version()}"
        assert conffile.read_text() == edited
        sh(root, "dpkg --force-confdef --force-confold --configure -a < /dev/null")
        assert installed_version(root) == f"install ok installed {package_version()}"
        assert conffile.read_text() == edited
        assert (root.path / "etc/mjf/mjf.conf.dpkg-dist").is_file()
    finally:
        tear_down(root)
