"""The tests' own config writes: a hook reading the config meanwhile sees it whole."""

import os

from tests.conftest import ConfigPath
from tests.integration.site import SITE_CONFIG


def test_a_config_the_tests_rewrite_is_replaced_never_truncated(tmp_path):
    """Tests rewrite the site config while jobs may still be ending: a hook reading it
    meanwhile must see the old text or the new, whole (an empty file is a config of
    defaults, whose base_dir holds no job), so it is renamed over, never rewritten."""
    assert isinstance(SITE_CONFIG, ConfigPath)
    path = ConfigPath(tmp_path / "mjf.conf")
    path.write_text("[mjf]\nbase_dir = /old\n")
    with open(path) as reader:  # a hook that opened the old file
        path.write_text("[mjf]\nbase_dir = /new\n")
        assert reader.read() == "[mjf]\nbase_dir = /old\n"
    assert path.read_text() == "[mjf]\nbase_dir = /new\n"
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    assert sorted(os.listdir(tmp_path)) == ["mjf.conf"]
    # Where a test appends, it reads and replaces: the same whole-file guarantee.
    path.write_bytes(path.read_bytes() + b"[slurm]\nscontrol = /x\n")
    assert path.read_text().endswith("[slurm]\nscontrol = /x\n")
