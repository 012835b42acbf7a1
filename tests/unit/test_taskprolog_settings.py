"""What the Slurm Prolog keeps for the sh TaskProlog (keep_taskprolog_settings), and the
TaskProlog's use of it: sourced while the config is not newer, the config read where it
is, where another config is named, or where the kept file is missing or broken.

The script is run as a copy with its two paths (the kept file and the default config)
pointing into the test's directory; everything else is the installed script's text."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from mjf_hooks import config
from mjf_hooks.errors import StoreError
from mjf_hooks.hooks.slurm import keep_taskprolog_settings, taskprolog_settings_name
from tests.conftest import require, taskprolog_copy

JOB = "7"
NODE = "wn1"
KEPT = f"slurm-taskprolog.{NODE}.sh"


class Node:
    """A test's /etc/mjf/mjf.conf, /run/mjf-hooks and TaskProlog copy, and two base_dirs
    (``a``, ``b``) each holding the job's directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.conf = root / "etc/mjf.conf"
        self.run_dir = root / "run/mjf-hooks"
        self.kept = self.run_dir / KEPT
        self.conf.parent.mkdir()
        self.run_dir.parent.mkdir()
        for base in ("a", "b"):
            (root / base / "jobs" / JOB / "jobfeatures").mkdir(parents=True)
        self.script = taskprolog_copy(root / "mjf-slurm-taskprolog", self.run_dir, self.conf)

    def write_config(self, text: str) -> None:
        self.conf.write_text(text)

    def prolog(self, path: Path | None = None, node: str = NODE) -> None:
        """What a Prolog of ``node`` given ``path`` (default: the default config) keeps."""
        loaded = config.load(str(path or self.conf))
        keep_taskprolog_settings(loaded, node, str(self.run_dir), str(self.conf))

    def taskprolog(self, shell: str = "dash", *args: str, **env: str):
        return subprocess.run([shell, str(self.script), *args], capture_output=True, text=True,
                              timeout=30, env={"PATH": "/usr/bin:/bin", "SLURM_JOB_ID": JOB,
                                               "SLURMD_NODENAME": NODE, **env})

    def exported_base(self, shell: str = "dash", **env: str) -> str:
        """The base_dir whose job the TaskProlog exported (stdout checked, stderr empty)."""
        result = self.taskprolog(shell, **env)
        assert result.returncode == 0 and result.stderr == "", result
        lines = result.stdout.splitlines()
        assert len(lines) == 2 and lines[1].endswith(f"/jobs/{JOB}/jobfeatures"), lines
        return lines[1].split("=", 1)[1][:-len(f"/jobs/{JOB}/jobfeatures")]


@pytest.fixture
def node(tmp_path):
    return Node(tmp_path)


def set_mtime(path: Path, seconds_ago: float) -> None:
    when = int((os.path.getmtime(path) - seconds_ago) * 1e9)
    os.utime(path, ns=(when, when))


def test_the_prolog_keeps_the_three_settings_with_the_configs_mtime(node):
    node.write_config(f"[mjf]\nbase_dir = {node.root}/it's here/\nexport = url\n"
                      "url_base = https://mjf.example.org/a'b/\n")
    node.prolog()
    assert node.kept.read_text() == (
        f"base_dir='{node.root}/it'\\''s here'\nexport_as='url'\n"
        "url_base='https://mjf.example.org/a'\\''b'\n")
    assert node.kept.stat().st_mtime_ns == node.conf.stat().st_mtime_ns
    assert node.kept.stat().st_mode & 0o777 == 0o644
    assert node.run_dir.stat().st_mode & 0o777 == 0o755
    # What sh makes of it is what Python read.
    shown = subprocess.run(["dash", "-c", '. "$1"; printf "%s|%s|%s" "$base_dir" "$export_as" '
                            '"$url_base"', "sh", str(node.kept)], capture_output=True,
                           text=True, check=True).stdout
    assert shown == f"{node.root}/it's here|url|https://mjf.example.org/a'b"


def test_it_is_rewritten_only_when_a_value_or_the_configs_mtime_changed(node):
    node.write_config(f"[mjf]\nbase_dir = {node.root}/a\n")
    node.prolog()
    first = node.kept.stat()
    node.prolog()
    assert node.kept.stat().st_ino == first.st_ino  # only read
    set_mtime(node.conf, 100)
    node.prolog()
    again = node.kept.stat()
    assert again.st_ino != first.st_ino and again.st_mtime_ns == node.conf.stat().st_mtime_ns
    node.write_config(f"[mjf]\nbase_dir = {node.root}/b\n")
    node.prolog()
    assert f"{node.root}/b" in node.kept.read_text()


def test_a_narrow_umask_leaves_the_directory_readable(node):
    node.write_config(f"[mjf]\nbase_dir = {node.root}/a\n")
    old = os.umask(0o077)
    try:
        node.prolog()
    finally:
        os.umask(old)
    assert node.run_dir.stat().st_mode & 0o777 == 0o755
    assert node.kept.stat().st_mode & 0o777 == 0o644


def test_nothing_is_kept_for_another_config(node, tmp_path):
    other = tmp_path / "other.conf"
    other.write_text(f"[mjf]\nbase_dir = {node.root}/a\n")
    node.prolog(other)
    assert not node.run_dir.exists()


def test_without_a_config_the_defaults_are_kept(node):
    node.prolog()
    assert node.kept.read_text() == "base_dir='/run/mjf'\nexport_as='path'\nurl_base=''\n"


@pytest.mark.parametrize("planted", ["writable", "symlink"])
def test_a_run_directory_others_control_is_refused(node, tmp_path, planted):
    node.write_config(f"[mjf]\nbase_dir = {node.root}/a\n")
    if planted == "writable":
        node.run_dir.mkdir(mode=0o777)
        node.run_dir.chmod(0o777)
    else:
        (tmp_path / "elsewhere").mkdir()
        node.run_dir.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(StoreError, match="refusing"):
        node.prolog()
    assert not (tmp_path / "elsewhere" / KEPT).exists()
    assert not (node.run_dir / KEPT).exists()


@pytest.mark.parametrize("shell", ["dash", "bash"])
def test_the_taskprolog_takes_what_was_kept_while_the_config_is_not_newer(node, shell):
    node.write_config(f"[mjf]\nbase_dir = {node.root}/a\n")
    node.prolog()
    # Proof that the kept file is what is read: it says b, the config a.
    node.kept.write_text(f"base_dir='{node.root}/b'\nexport_as=path\nurl_base=\n")
    os.utime(node.kept, ns=(node.conf.stat().st_mtime_ns,) * 2)
    assert node.exported_base(shell) == f"{node.root}/b"
    # The config edited since: read.
    set_mtime(node.kept, 10)
    assert node.exported_base(shell) == f"{node.root}/a"


@pytest.mark.parametrize("shell", ["dash", "bash"])
def test_the_config_is_read_where_the_kept_file_is_missing_or_broken(node, shell):
    node.write_config(f"[mjf]\nbase_dir = {node.root}/a\n")
    assert node.exported_base(shell) == f"{node.root}/a"  # nothing kept yet
    node.prolog()
    node.kept.write_text(f"base_dir='{node.root}/b'\nif then\n")  # sets b, then fails
    os.utime(node.kept, ns=(node.conf.stat().st_mtime_ns,) * 2)
    assert node.exported_base(shell) == f"{node.root}/a"
    node.kept.unlink()
    node.run_dir.rmdir()
    assert node.exported_base(shell) == f"{node.root}/a"


def test_each_node_of_a_host_keeps_its_own(node, tmp_path):
    """Two slurmds of one host, each its own config at the same path (a mount namespace
    each), share /run: each TaskProlog takes its own node's."""
    node.write_config(f"[mjf]\nbase_dir = {node.root}/a\n")
    node.prolog(node="n1")
    node.write_config(f"[mjf]\nbase_dir = {node.root}/b\n")
    node.prolog(node="n2")
    set_mtime(node.conf, 100)  # neither kept file is older than the config
    assert node.exported_base(SLURMD_NODENAME="n1") == f"{node.root}/a"
    assert node.exported_base(SLURMD_NODENAME="n2") == f"{node.root}/b"


@pytest.mark.parametrize("name", ["", "a/b", "../x", "a\0b"])
def test_a_node_name_that_is_not_a_files_keeps_nothing(node, name):
    assert taskprolog_settings_name(name) is None
    node.write_config(f"[mjf]\nbase_dir = {node.root}/a\n")
    node.prolog(node=name)
    assert not node.run_dir.exists()
    if "\0" not in name:  # the environment cannot hold it
        assert node.exported_base(SLURMD_NODENAME=name) == f"{node.root}/a"  # read itself


def test_another_config_is_read_itself(node, tmp_path):
    node.write_config(f"[mjf]\nbase_dir = {node.root}/a\n")
    node.prolog()
    other = tmp_path / "other.conf"
    other.write_text(f"[mjf]\nbase_dir = {node.root}/b\n")
    set_mtime(other, 100)  # older than what was kept: still not taken for it
    assert node.exported_base(MJF_CONFIG=str(other)) == f"{node.root}/b"


def test_kept_defaults_and_the_config_unreadable_or_gone(node):
    """Where the job's user may not read the config, what root read of it is used; where
    there is none, the defaults (kept or not)."""
    node.write_config(f"[mjf]\nbase_dir = {node.root}/a\n")
    node.prolog()
    node.conf.chmod(0o600)
    if os.geteuid() != 0:  # root reads any file: the kept one is used either way
        assert node.exported_base() == f"{node.root}/a"
    node.conf.unlink()
    node.prolog()
    result = node.taskprolog()
    assert result.returncode == 0 and result.stdout == ""  # /run/mjf holds no job 7


def test_help_is_still_given(node):
    node.prolog()
    result = node.taskprolog("dash", "--help")
    assert result.returncode == 0 and result.stdout.startswith("usage: mjf-slurm-taskprolog")


def test_a_prolog_that_cannot_keep_them_warns_and_the_job_goes_on(tmp_path, monkeypatch,
                                                                  capsys):
    """Even with on_error = fail: no job depends on the kept settings."""
    from mjf_hooks.hooks import slurm as hook

    require(os.geteuid() == 0, "a Prolog writes as root")
    conf = tmp_path / "mjf.conf"
    conf.write_text(f"[mjf]\nbase_dir = {tmp_path}/base\nlog = stderr\non_error = fail\n")

    def refused(config, node):
        raise StoreError("/run/mjf-hooks is owned by uid 1000 with mode 0755: refusing")

    monkeypatch.setattr(hook, "keep_taskprolog_settings", refused)
    for name, value in {"SLURM_JOB_ID": JOB, "SLURM_SCRIPT_CONTEXT": "prolog_slurmd",
                        "SLURMD_NODENAME": "wn1", "SLURM_JOB_CPUS_PER_NODE": "4",
                        "SLURM_JOB_UID": "0", "SLURM_JOB_GID": "0",
                        "SLURM_JOB_START_TIME": "1795000000",
                        "SLURM_JOB_END_TIME": "1795003600"}.items():
        monkeypatch.setenv(name, value)
    assert hook.main(["--config", str(conf)]) == 0
    err = capsys.readouterr().err
    assert "warning" in err and "settings were not kept" in err and "refusing" in err, err
    assert (tmp_path / "base/jobs" / JOB / "jobfeatures/allocated_cpu").read_text() == "4"


@pytest.mark.parametrize("shell", ["dash", "bash"])
def test_the_drop_ins_are_read_after_the_config_by_both(node, shell):
    """A drop-in's [mjf] base_dir is what the TaskProlog exports, read itself or kept; a
    drop-in changed since (in place, the directory's mtime unchanged) is read again."""
    node.write_config(f"[mjf]\nbase_dir = {node.root}/a\n")
    drop_ins = node.conf.parent / "mjf.conf.d"
    drop_ins.mkdir()
    (drop_ins / "20-site.conf").write_text(f"[mjf]\nbase_dir = {node.root}/b  # ours\n")
    (drop_ins / "10-first.conf").write_text(f"[mjf]\nbase_dir = {node.root}/a\n")
    (drop_ins / ".hidden.conf").write_text("[mjf]\nbase_dir = /nowhere\n")
    assert node.exported_base(shell) == f"{node.root}/b"  # read itself: nothing kept
    node.prolog()
    assert f"base_dir='{node.root}/b'" in node.kept.read_text()
    for path in (node.conf, drop_ins, *drop_ins.iterdir()):
        set_mtime(path, 100)
    node.kept.write_text(f"base_dir='{node.root}/a'\nexport_as=path\nurl_base=\n")
    assert node.exported_base(shell) == f"{node.root}/a"  # kept, newer than them all
    directory_mtime = drop_ins.stat().st_mtime_ns
    (drop_ins / "20-site.conf").write_text(f"[mjf]\nbase_dir = {node.root}/b\n")
    assert drop_ins.stat().st_mtime_ns == directory_mtime
    assert node.exported_base(shell) == f"{node.root}/b"  # the edited drop-in is newer


def test_the_kept_file_has_the_newest_mtime_of_the_config_and_its_drop_ins(node):
    node.write_config(f"[mjf]\nbase_dir = {node.root}/a\n")
    drop_ins = node.conf.parent / "mjf.conf.d"
    drop_ins.mkdir()
    (drop_ins / "10-site.conf").write_text(f"[mjf]\nbase_dir = {node.root}/b\n")
    set_mtime(node.conf, 200)
    set_mtime(drop_ins, 100)
    node.prolog()
    assert node.kept.stat().st_mtime_ns == (drop_ins / "10-site.conf").stat().st_mtime_ns
