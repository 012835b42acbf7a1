"""Site configuration: defaults, every option, and the errors an admin sees."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mjf_hooks import config
from mjf_hooks.errors import SiteInputError


def test_missing_file_means_all_defaults(tmp_path):
    loaded = config.load(str(tmp_path / "absent.conf"))
    assert loaded.base_dir == "/run/mjf"
    assert loaded.on_error == "continue"
    assert loaded.log == ("syslog", "stderr")
    assert not loaded.legacy_keys
    assert (loaded.dir_mode, loaded.file_mode) == (0o755, 0o644)
    assert loaded.machine == {} and loaded.job == {}


def test_path_comes_from_mjf_config_variable():
    assert config.config_path({"MJF_CONFIG": "/x/y.conf"}) == "/x/y.conf"
    assert config.config_path({}) == "/etc/mjf/mjf.conf"


def test_every_option_is_read(tmp_path):
    path = tmp_path / "mjf.conf"
    path.write_text("""
# site config
[mjf]
base_dir = /var/run/mjf/   ; trailing slash is normalised
on_error = fail
log = syslog
legacy_keys = yes
dir_mode = 0750
file_mode = 0640
command_timeout = 2.5

[machinefeatures]
HS06 = 2400.5   # measured 2025
grace_secs = 3600
total_cpu = 64

[jobfeatures]
grace_secs_job = 600
scratch_limit_bytes = 100000000000
max_swap_bytes = 0
wall_limit_secs = 172800
""")
    loaded = config.load(str(path))
    assert loaded.base_dir == "/var/run/mjf"
    assert loaded.on_error == "fail" and loaded.log == ("syslog",) and loaded.legacy_keys
    assert (loaded.dir_mode, loaded.file_mode, loaded.command_timeout_secs) == (0o750, 0o640, 2.5)
    assert loaded.machine == {"hs06": 2400.5, "grace_secs": 3600, "total_cpu": 64}
    assert loaded.job == {"grace_secs_job": 600, "scratch_limit_bytes": 100000000000,
                          "max_swap_bytes": 0, "wall_limit_secs": 172800}


def test_hs06_per_cpu_and_log_none():
    loaded = config.parse("[mjf]\nlog = none\n[machinefeatures]\nhs06_per_cpu = 12.5\n")
    assert loaded.hs06_per_cpu == 12.5 and loaded.log == ()


@pytest.mark.parametrize(("text", "expected"), [
    ("[machinefeatures]\nhs07 = 1\n",
     r"line 2: \[machinefeatures\] hs07 = '1': is not an MJF key"),
    ("[machinefeatures]\nhs06 = fast\n",
     r"\[machinefeatures\] hs06 = 'fast': must be a non-negative"),
    ("[jobfeatures]\nwall_limit_secs = -5\n",
     r"wall_limit_secs = '-5': must be a non-negative whole"),
    ("[jobfeatures]\nwall_limit_secs = 1.5\n", "must be a non-negative whole number"),
    ("[jobfeatures]\ntotal_cpu = 4\n", r"is a machine key: put it in \[machinefeatures\]"),
    ("[machinefeatures]\nshutdowntime = 4\n", "is set per job or by `mjf drain`"),
    ("[jobfeatures]\njob_id = x\n", "is set per job"),
    ("[jobfeatures]\nallocated_cpu = 4\n", "is set per job"),
    ("[torque]\nx = 1\n", r"line 1: unknown section \[torque\]"),
    ("[slurm]\nx = 1\n", r"\[slurm\] x = '1': unknown option; \[slurm\] takes scontrol"),
    ("[slurm]\nscontrol = scontrol\n", "must be an absolute path"),
    ("hs06 = 1\n", "comes before any"),
    ("[mjf]\nbase_dir\n", "is not `key = value`"),
    ("[mjf\n", "is not a \\[section\\] header"),
    ("[mjf]\nbase_dir = relative/path\n", "must be an absolute path"),
    ("[mjf]\non_error = ignore\n", "must be `continue`"),
    ("[mjf]\nlog = file\n", "must be `syslog`, `stderr`"),
    ("[mjf]\nlegacy_keys = maybe\n", "must be yes or no"),
    ("[mjf]\nfile_mode = 0666\n", "may only narrow the default 0644"),
    ("[mjf]\ndir_mode = 0644\n", "must leave the owner able"),
    ("[mjf]\ndir_mode = rwx\n", "must be an octal mode"),
    ("[mjf]\ncommand_timeout = 0\n", "must be a positive number"),
    ("[mjf]\ncommand_timeout = 3600\n", "between 0 and 300"),
    ("[mjf]\nbase_dir = /a\nbase_dir = /b\n", r"line 3: \[mjf\] base_dir is set twice"),
    ("[mjf]\nfrobnicate = 1\n", "unknown option"),
])
def test_bad_config_names_file_line_section_key_and_reason(tmp_path, text, expected):
    path = tmp_path / "mjf.conf"
    path.write_text(text)
    with pytest.raises(SiteInputError, match=expected) as raised:
        config.load(str(path))
    assert str(raised.value).startswith(str(path))


def test_unreadable_and_binary_files_are_clear_errors(tmp_path):
    path = tmp_path / "mjf.conf"
    path.write_bytes(b"[mjf]\nbase_dir = /\xff\n")
    with pytest.raises(SiteInputError, match="not UTF-8"):
        config.load(str(path))
    with pytest.raises(SiteInputError, match="cannot read the config"):
        config.load(str(tmp_path))  # a directory


@given(st.text(max_size=200))
def test_any_text_is_either_a_config_or_a_site_input_error(text):
    try:
        config.parse(text, "/etc/mjf/mjf.conf")
    except SiteInputError as error:
        assert str(error).startswith("/etc/mjf/mjf.conf")


def test_shipped_example_parses_and_its_commented_values_are_valid():
    from tests.conftest import FIXTURES

    text = (FIXTURES.parent.parent / "contrib/mjf.conf.example").read_text()
    assert config.parse(text).base_dir == "/run/mjf"
    uncommented = "\n".join(
        line[2:] if line.startswith("# ") and " = " in line else line
        for line in text.splitlines()
    )
    loaded = config.parse(uncommented)
    assert loaded.machine["hs06"] == 1024.5 and loaded.job["max_swap_bytes"] == 0
