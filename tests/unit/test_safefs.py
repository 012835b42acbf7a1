"""safefs's checked opens and bounded reads: how a hook opens a file whose path a job's
environment names (open_checked_dir, read_checked, read_checked_text) and a file of the
batch system's own (read_bounded): never through a symlink (the first), never waiting on a
FIFO, never past a size bound, as root only what root and the batch system's user own;
a refusal names the path, never a byte of the file."""

import os
import time

import pytest

from mjf_hooks.safefs import (
    MAX_BATCH_FILE_BYTES,
    RefusedPath,
    open_checked_dir,
    read_bounded,
    read_checked,
    read_checked_text,
)
from tests.conftest import require


@pytest.fixture
def as_root():
    require(os.geteuid() == 0, "giving files to another owner needs root")


needs_root = pytest.mark.usefixtures("as_root")
OTHER = 1  # a uid that is neither root nor the job's (daemon's, on Debian and EL)
SECRET = "mjf-secret-marker"


@pytest.fixture
def tree(tmp_path):
    """tmp_path/spool/config, holding SECRET; the directories root's when run as root."""
    spool = tmp_path / "spool"
    spool.mkdir()
    (spool / "config").write_text(f"a=1\n{SECRET}\n")
    return spool


def refusal(call, *args, **kwargs) -> str:
    with pytest.raises(RefusedPath) as raised:
        call(*args, **kwargs)
    message = str(raised.value)
    assert SECRET not in message
    return message


def test_a_plain_file_is_read_whole(tree):
    assert read_checked_text(str(tree / "config")) == f"a=1\n{SECRET}\n"
    with open_checked_dir(str(tree)) as directory:
        assert read_checked(directory, "config") == f"a=1\n{SECRET}\n".encode()
    assert read_bounded(str(tree / "config")) == f"a=1\n{SECRET}\n".encode()


def test_crlf_reads_as_text_mode_would(tree):
    (tree / "config").write_bytes(b"a=1\r\nb=2\rc=3\xff\n")
    assert read_checked_text(str(tree / "config")) == "a=1\nb=2\nc=3\ufffd\n"


@pytest.mark.parametrize("path", ["relative/config", "", "/a/../b", "/a/./b", "//a",
                                  "/a//b", "/a/\0/b", "/a/b//"])
def test_a_path_that_is_not_plain_is_refused_not_normalised(path):
    assert "not" in refusal(read_checked_text, path)


@needs_root
def test_only_the_owners_symlinks_are_followed_and_only_when_asked(tree, tmp_path):
    root = frozenset([0])
    (tmp_path / "alias").symlink_to(tree)
    refusal(open_checked_dir, str(tmp_path / "alias"), root, "root")  # not asked
    with open_checked_dir(str(tmp_path / "alias"), root, "root", owners_symlinks=True) as d:
        assert read_checked(d, "config").endswith(SECRET.encode() + b"\n")
    os.lchown(tmp_path / "alias", OTHER, OTHER)
    assert "is a symbolic link" in refusal(open_checked_dir, str(tmp_path / "alias"), root,
                                           "root", owners_symlinks=True)


def test_a_symlink_anywhere_on_the_way_is_refused(tree, tmp_path):
    (tmp_path / "alias").symlink_to(tree)
    message = refusal(read_checked_text, str(tmp_path / "alias" / "config"))
    assert f"{tmp_path}/alias is a symbolic link" in message
    (tree / "linked").symlink_to(tree / "config")
    assert "is a symbolic link" in refusal(read_checked_text, str(tree / "linked"))
    # ...even one to a directory of the same tree, and one a directory's last component
    assert "is a symbolic link" in refusal(open_checked_dir, str(tmp_path / "alias"))


def test_the_batch_systems_own_file_may_be_reached_through_a_symlink(tree, tmp_path):
    (tmp_path / "alias").symlink_to(tree)
    assert read_bounded(str(tmp_path / "alias" / "config")).endswith(SECRET.encode() + b"\n")


def test_a_fifo_no_one_writes_is_refused_at_once(tree):
    os.mkfifo(tree / "fifo")
    started = time.monotonic()
    assert "not a regular file" in refusal(read_checked_text, str(tree / "fifo"))
    assert "not a regular file" in refusal(read_bounded, str(tree / "fifo"))
    assert time.monotonic() - started < 1


def test_a_huge_sparse_file_is_refused_unread(tree):
    with open(tree / "huge", "wb") as handle:
        handle.truncate(1 << 40)  # a terabyte that takes no space
    started = time.monotonic()
    message = refusal(read_checked_text, str(tree / "huge"))
    assert f"is larger than {MAX_BATCH_FILE_BYTES} bytes" in message
    assert "larger than" in refusal(read_bounded, str(tree / "huge"))
    assert time.monotonic() - started < 0.5


def test_the_bound_is_inclusive(tree):
    (tree / "full").write_bytes(b"x" * 100)
    assert len(read_checked_text(str(tree / "full"), limit=100)) == 100
    assert "larger than 99 bytes" in refusal(read_checked_text, str(tree / "full"), limit=99)
    assert "larger than 99 bytes" in refusal(read_bounded, str(tree / "full"), limit=99)


def test_a_device_a_directory_and_a_missing_file_are_refused(tree):
    assert "not a regular file" in refusal(read_checked_text, "/dev/null")
    assert "not a regular file" in refusal(read_checked_text, str(tree))
    assert "No such file" in refusal(read_checked_text, str(tree / "absent"))
    assert "not a directory" in refusal(open_checked_dir, str(tree / "config"))
    assert "No such file" in refusal(open_checked_dir, str(tree / "absent" / "deeper"))


def test_a_file_name_must_be_one_component(tree):
    with open_checked_dir(str(tree)) as directory:
        for name in ("", ".", "..", "a/b"):
            assert "not a file name" in refusal(read_checked, directory, name)


@needs_root
def test_as_root_every_directory_and_the_file_must_be_the_owners(tree):
    root = frozenset([0])
    assert read_checked_text(str(tree / "config"), root, "root").endswith(SECRET + "\n")
    os.chown(tree / "config", OTHER, OTHER)
    message = refusal(read_checked_text, str(tree / "config"), root, "root")
    assert message == f"{tree}/config belongs to uid {OTHER}, not to root: not read"
    # the owner named: their file is read
    assert read_checked_text(str(tree / "config"), frozenset([0, OTHER]), "them")
    os.chown(tree / "config", 0, 0)
    os.chown(tree, OTHER, OTHER)
    message = refusal(read_checked_text, str(tree / "config"), root, "root")
    assert message == f"{tree} belongs to uid {OTHER}, not to root"
    assert read_checked_text(str(tree / "config"), frozenset([0, OTHER]), "them")


@needs_root
def test_as_root_nothing_on_the_way_may_be_writable_by_others(tree):
    root = frozenset([0])
    (tree / "config").chmod(0o664)
    assert "can be written by others (mode 0664)" in refusal(
        read_checked_text, str(tree / "config"), root, "root")
    (tree / "config").chmod(0o644)
    tree.chmod(0o775)
    assert "can be written by others (mode 0775)" in refusal(
        read_checked_text, str(tree / "config"), root, "root")
    # A sticky directory (/tmp) may lie on the way: only an entry's owner can replace it.
    tree.chmod(0o1777)
    (tree / "inner").mkdir(mode=0o755)
    (tree / "inner" / "config").write_text("x\n")
    assert read_checked_text(str(tree / "inner" / "config"), root, "root") == "x\n"
    # ...but not be the directory a file is read from
    assert "can be written by others" in refusal(
        read_checked_text, str(tree / "config"), root, "root")


@needs_root
def test_a_last_directory_of_anyones_below_the_owners_ones(tree):
    """A job's own scratch directory, in a parent of root's (its size only is read)."""
    root = frozenset([0])
    scratch = tree / "scratch"
    scratch.mkdir()
    os.chown(scratch, OTHER, OTHER)
    refusal(open_checked_dir, str(scratch), root, "root")
    with open_checked_dir(str(scratch), root, "root", any_last_owner=True) as directory:
        assert os.fstatvfs(directory.fd).f_blocks > 0
    os.chown(tree, OTHER, OTHER)  # ...but every directory above it is checked
    refusal(open_checked_dir, str(scratch), root, "root", any_last_owner=True)


# -- the size of a job's scratch filesystem (probe.scratch) -----------------------------


def test_a_scratch_directory_gives_its_filesystems_size(tmp_path):
    from mjf_hooks.probe.scratch import filesystem_size_bytes

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    info = os.statvfs(scratch)
    assert filesystem_size_bytes(str(scratch)) == info.f_blocks * info.f_frsize


@needs_root
def test_root_is_not_steered_to_another_filesystem_nor_made_to_wait(tmp_path):
    """A job's TMPDIR as root sees it: a symlink (to /dev/shm, an automount) anywhere on
    the way, a FIFO, a directory below one of the job's user's own: no size at all."""
    from mjf_hooks.probe.scratch import filesystem_size_bytes

    (tmp_path / "link").symlink_to("/dev/shm")  # the job's user's, in a sticky /tmp
    os.lchown(tmp_path / "link", OTHER, OTHER)
    os.mkfifo(tmp_path / "fifo")
    users = tmp_path / "users"
    (users / "inner").mkdir(parents=True)
    os.chown(users, OTHER, OTHER)
    started = time.monotonic()
    for path in (tmp_path / "link", tmp_path / "link" / "x", tmp_path / "fifo", users / "inner",
                 "relative", tmp_path / "absent"):
        assert filesystem_size_bytes(str(path)) is None, path
    assert time.monotonic() - started < 1
    assert filesystem_size_bytes(str(users)) is not None  # the job's own, below root's
    # The site's own symlinks (root's, in root's directories) are followed: the path is
    # one its config gives (Slurm's TmpFS, PBS's $tmpdir) or execd made.
    (tmp_path / "sites").symlink_to(users)
    assert filesystem_size_bytes(str(tmp_path / "sites")) == filesystem_size_bytes(str(users))
    (tmp_path / "relative").symlink_to("users/../users")
    assert filesystem_size_bytes(str(tmp_path / "relative")) is not None
    (tmp_path / "loop").symlink_to("loop")
    assert filesystem_size_bytes(str(tmp_path / "loop")) is None


def test_a_directorys_whole_file_is_a_regular_file_within_its_bound_or_nothing(tree, tmp_path):
    """Dir.read_whole, what the records directory reads with: no symlink, no FIFO, nothing
    past the bound, nothing its caller refuses on sight."""
    (tree / "full").write_bytes(b"x" * 100)
    (tree / "link").symlink_to(tree / "config")
    os.mkfifo(tree / "fifo")
    started = time.monotonic()
    with open_checked_dir(str(tree)) as directory:
        data, info = directory.read_whole("full", 100)
        assert (data, info.st_size) == (b"x" * 100, 100)
        assert directory.read_whole("full", 99) is None
        assert directory.read_whole("full", 100, lambda info: info.st_nlink > 1) is None
        assert [directory.read_whole(name, 100) for name in ("link", "fifo", "gone")] == \
            [None, None, None]
        assert directory.read_bytes("full", 10) == b"x" * 10  # a prefix, as before
    assert time.monotonic() - started < 1
