"""The integration harnesses make what a booted system would before a daemon starts
(tests/integration/boot_dirs.py): the declarations are read right, and every harness
that starts daemons asks for them."""

import os
from pathlib import Path

import pytest

from tests.integration import boot_dirs

HARNESSES = Path(__file__).resolve().parents[1] / "integration"

# Debian bookworm's postgresql-common.conf and munge.service, as installed.
POSTGRESQL_TMPFILES = """\
# Directory for PostgreSQL sockets, lockfiles and stats tempfiles
d /run/postgresql 2775 postgres postgres - -
# Log directory - ensure that our logrotate config fixes the permissions
d /var/log/postgresql 1775 root postgres - -
"""
MUNGE_UNIT = """\
[Service]
Type=forking
ExecStart=/usr/sbin/munged $OPTIONS
User=munge
Group=munge
RuntimeDirectory=munge
RuntimeDirectoryMode=0755
"""


def test_tmpfiles_directories_with_their_modes_and_owners():
    found = boot_dirs.tmpfiles_dirs(POSTGRESQL_TMPFILES + "f /etc/x 0644 - - -\n"
                                    "d! /run/once - - -\nL /run/link - - - - /x\n", "pg")
    assert [(d.path, oct(d.mode), d.user, d.group) for d in found] == [
        ("/run/postgresql", "0o2775", "postgres", "postgres"),
        ("/var/log/postgresql", "0o1775", "root", "postgres"),
        ("/run/once", "0o755", "root", "root")]


def test_a_specifier_is_refused_by_name_rather_than_made_literally():
    with pytest.raises(ValueError, match="specifiers"):
        boot_dirs.tmpfiles_dirs("d /run/user/%U 0700 - - -\n", "x.conf")


def test_a_units_runtime_logs_and_state_directories_belong_to_its_user():
    found = boot_dirs.unit_dirs(MUNGE_UNIT + "LogsDirectory=condor\nStateDirectory=a b\n", "u")
    assert [(d.path, oct(d.mode), d.user, d.group) for d in found] == [
        ("/run/munge", "0o755", "munge", "munge"), ("/var/lib/a", "0o755", "munge", "munge"),
        ("/var/lib/b", "0o755", "munge", "munge"), ("/var/log/condor", "0o755", "munge", "munge")]


def test_make_creates_inside_the_root_owned_as_declared_and_keeps_what_is_there(tmp_path):
    (tmp_path / "etc").mkdir()
    uid, gid = os.getuid(), os.getgid()
    (tmp_path / "etc/passwd").write_text(f"me:x:{uid}:{gid}::/:/bin/sh\n")
    (tmp_path / "etc/group").write_text(f"us:x:{gid}:\n")
    boot_dirs.make(tmp_path, boot_dirs.BootDir("/var/log/condor", 0o750, "me", "us", "t"))
    made = tmp_path / "var/log/condor"
    assert made.is_dir() and (made.stat().st_mode & 0o7777) == 0o750
    assert (made.stat().st_uid, made.stat().st_gid) == (uid, gid)
    made.chmod(0o700)
    boot_dirs.make(tmp_path, boot_dirs.BootDir("/var/log/condor", 0o750, "me", "us", "t"))
    assert made.stat().st_mode & 0o7777 == 0o700


@pytest.mark.parametrize("harness", ["trixie_root.py", "slurm_cluster.py", "gridengine_cell.py",
                                     "pbs_complex.py", "test_http.py"])
def test_every_harness_that_starts_daemons_makes_their_boot_directories(harness):
    assert "make_boot_dirs(" in (HARNESSES / harness).read_text()
