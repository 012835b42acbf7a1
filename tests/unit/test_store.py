"""The store's safety invariants: atomicity, symlinks, ownership, full disks."""

import os
import stat
import subprocess
import threading
import time
from pathlib import Path

import pyfakefs
import pytest
from hypothesis import given
from hypothesis import strategies as st

try:
    from pyfakefs.helpers import set_uid
except ImportError:  # pyfakefs 4 (Debian bookworm's, whose package build runs these tests)
    from pyfakefs.fake_filesystem import set_uid

from mjf_hooks import safefs, spec
from mjf_hooks.errors import StoreError
from mjf_hooks.store import JOB_DIR_NAME_CHARS, Store, job_dir_name, job_id_of_dir_name
from tests.conftest import require

VALUES = {"job_id": "7", "allocated_cpu": "4", "wall_limit_secs": "3600"}


def listing(path):
    return sorted(os.listdir(path))


@pytest.fixture
def victim(tmp_path):
    """A directory outside base_dir holding one file, `precious`, that must stay as it is."""
    path = tmp_path / "victim"
    path.mkdir()
    (path / "precious").write_text("keep")
    return path


def test_job_directory_holds_exact_files_with_contract_modes(tmp_path):
    store = Store(str(tmp_path / "base"))
    path = store.create_job("7", VALUES)
    assert path == f"{tmp_path}/base/jobs/7/jobfeatures"
    assert listing(path) == sorted(VALUES)
    for name, content in VALUES.items():
        assert (tmp_path / "base/jobs/7/jobfeatures" / name).read_bytes() == content.encode()
        assert stat.S_IMODE(os.stat(f"{path}/{name}").st_mode) == 0o644
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o755
    assert stat.S_IMODE(os.stat(f"{tmp_path}/base/jobs/7").st_mode) == 0o755
    assert listing(tmp_path / "base/jobs") == ["7"]  # no temporary leftovers


def test_narrowed_modes_are_applied(tmp_path):
    store = Store(str(tmp_path / "base"), dir_mode=0o750, file_mode=0o640)
    path = store.create_job("7", VALUES)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o750
    assert stat.S_IMODE(os.stat(f"{path}/job_id").st_mode) == 0o640


def test_root_gives_the_job_group_read_access(tmp_path):
    require(os.geteuid() == 0, "needs root to chown to another group")
    store = Store(str(tmp_path / "base"), dir_mode=0o750, file_mode=0o640)
    path = store.create_job("7", VALUES, gid=4321)
    for entry in (path, f"{path}/job_id", os.path.dirname(path)):
        info = os.stat(entry)
        assert (info.st_uid, info.st_gid) == (0, 4321)


def test_recreating_a_job_replaces_it_whole(tmp_path):
    store = Store(str(tmp_path / "base"))
    store.create_job("7", {**VALUES, "max_rss_bytes": "1"})
    path = store.create_job("7", VALUES)
    assert listing(path) == sorted(VALUES)
    assert listing(tmp_path / "base/jobs") == ["7"]


def test_other_jobs_are_untouched(tmp_path):
    store = Store(str(tmp_path / "base"))
    other = store.create_job("6", {"job_id": "6"})
    store.create_job("7", VALUES)
    store.remove_job("7")
    assert listing(other) == ["job_id"]
    assert (tmp_path / "base/jobs/6/jobfeatures/job_id").read_text() == "6"


def test_planted_symlink_at_the_job_directory_is_moved_aside_not_followed(tmp_path, victim):
    store = Store(str(tmp_path / "base"))
    store.create_job("1", {"job_id": "1"})
    os.symlink(victim, tmp_path / "base/jobs/8")
    path = store.create_job("8", {"job_id": "8"})
    assert not os.path.islink(tmp_path / "base/jobs/8")
    assert listing(path) == ["job_id"]
    assert listing(victim) == ["precious"] and (victim / "precious").read_text() == "keep"
    os.symlink(victim, tmp_path / "base/jobs/9")
    assert store.remove_job("9")  # removes the link, not what it points to
    assert listing(victim) == ["precious"]


def test_planted_symlink_at_a_key_file_is_replaced_not_written_through(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    store = Store(str(tmp_path / "base"))
    path = store.create_job("7", VALUES)
    os.unlink(f"{path}/wall_limit_secs")
    os.symlink(victim, f"{path}/wall_limit_secs")
    store.set_job_keys("7", {"wall_limit_secs": "60", "shutdowntime_job": "1795400000"})
    assert victim.read_text() == "keep"
    assert not os.path.islink(f"{path}/wall_limit_secs")
    assert Path(path, "wall_limit_secs").read_text() == "60"
    assert Path(path, "shutdowntime_job").read_text() == "1795400000"


@pytest.mark.parametrize("planted", ["jobs", "machinefeatures"])
def test_symlinked_top_directories_are_refused(tmp_path, planted):
    victim = tmp_path / "victim"
    victim.mkdir()
    (tmp_path / "base").mkdir()
    os.symlink(victim, tmp_path / "base" / planted)
    store = Store(str(tmp_path / "base"))
    with pytest.raises(StoreError, match="refusing to follow"):
        if planted == "jobs":
            store.create_job("7", VALUES)
        else:
            store.machine.write({"total_cpu": "4"}, frozenset())
    assert listing(victim) == []


def test_a_jobs_directory_others_can_write_is_refused(tmp_path):
    (tmp_path / "base/jobs").mkdir(parents=True)
    os.chmod(tmp_path / "base/jobs", 0o777)
    with pytest.raises(StoreError, match="refusing to use a directory others can write"):
        Store(str(tmp_path / "base")).create_job("7", VALUES)


def test_removal_never_follows_symlinks_inside_a_job(tmp_path, victim):
    store = Store(str(tmp_path / "base"))
    path = store.create_job("7", VALUES)
    os.symlink(victim, f"{path}/link")
    os.makedirs(f"{path}/nested/deeper")
    os.symlink(victim / "precious", f"{path}/nested/deeper/file-link")
    assert store.remove_job("7")
    assert listing(victim) == ["precious"]
    assert listing(tmp_path / "base/jobs") == []


def test_removal_is_idempotent(tmp_path):
    store = Store(str(tmp_path / "base"))
    assert not store.remove_job("7")  # no base dir at all
    store.create_job("7", VALUES)
    assert store.remove_job("7")
    assert not store.remove_job("7")


def test_removal_never_crosses_a_mount_point(tmp_path):
    require(os.geteuid() == 0, "needs root to mount a tmpfs")
    store = Store(str(tmp_path / "base"))
    path = store.create_job("7", VALUES)
    mount_point = f"{path}/mounted"
    os.mkdir(mount_point)
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", mount_point], check=True)
    try:
        with open(f"{mount_point}/precious", "w") as handle:
            handle.write("keep")
        with pytest.raises(StoreError, match="mount point"):
            store.remove_job("7")
        (trash,) = listing(tmp_path / "base/jobs")
        assert trash.startswith(".old-7.")  # gone from readers' view all the same
        moved = f"{tmp_path}/base/jobs/{trash}/jobfeatures/mounted/precious"
        assert Path(moved).read_text() == "keep"
    finally:
        subprocess.run(["umount", "-l", mount_point], check=False)
        for name in listing(tmp_path / "base/jobs"):
            subprocess.run(["umount", "-l", f"{tmp_path}/base/jobs/{name}/jobfeatures/mounted"],
                           check=False, capture_output=True)


@pytest.mark.parametrize(("job_id", "reason"), [
    ("", "empty"), ("../x", "would name a path"), ("/", "would name a path"),
    ("..", "would name a path"), (".", "would name a path"), ("a b", "printable ASCII"),
    ("x" * 201, "printable ASCII"), ("a\nb", "printable ASCII"), ("é", "printable ASCII"),
])
def test_unsafe_job_ids_are_rejected_with_the_reason(job_id, reason):
    with pytest.raises(StoreError, match=reason):
        job_dir_name(job_id)


@pytest.mark.parametrize(("job_id", "name"), [
    ("1234", "1234"), ("1234_7", "1234_7"), ("1234[7]", "1234[7]"),
    ("vm#1.0#1795319385", "vm#1.0#1795319385"), ("a%b", "a%25b"), (".hidden", "%2Ehidden"),
    ("a*b?", "a%2Ab%3F"),
])
def test_job_dir_names_are_readable_and_safe(job_id, name):
    assert job_dir_name(job_id) == name


@given(st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=1,
               max_size=spec.MAX_JOB_ID_LENGTH))
def test_job_dir_names_are_injective_single_components(job_id):
    try:
        name = job_dir_name(job_id)
    except StoreError:
        assert "/" in job_id or job_id in (".", "..") or len(job_id) > 80
        return
    assert "/" not in name and not name.startswith(".") and name not in (".", "..")
    assert job_id_of_dir_name(name) == job_id


@given(st.text(alphabet=sorted(JOB_DIR_NAME_CHARS), min_size=1, max_size=60))
def test_a_directory_name_is_its_jobs_id_or_stands_for_itself(name):
    """What `mjf status` and `mjf metrics` call a job: the id its directory name encodes,
    or, for a name no hook makes (a user's own), the name itself."""
    job_id = job_id_of_dir_name(name)
    assert job_id == name or job_dir_name(job_id) == name


def _fake_root_dirs(*paths):
    """pyfakefs makes directories writable by all; a real / and /run are not."""
    for path in ("/", *paths):
        os.chmod(path, 0o755)


def require_pyfakefs_5() -> None:
    """pyfakefs 4 (Debian bookworm's, whose package build runs these tests) fakes a full
    disk and a refused write with other errors than the kernel's."""
    require(int(pyfakefs.__version__.split(".")[0]) >= 5, "needs pyfakefs 5 or later")


def test_full_disk_leaves_nothing_partial(fs):
    require_pyfakefs_5()
    fs.create_dir("/run/mjf")
    _fake_root_dirs("/run", "/run/mjf")
    fs.set_disk_usage(20000)
    store = Store("/run/mjf")
    with pytest.raises(StoreError, match="No space left on device"):
        store.create_job("7", {"job_id": "7", "big": "1" * 30000})
    assert os.listdir("/run/mjf/jobs") == []


def test_read_only_base_dir_is_a_clear_error_and_changes_nothing(fs):
    require_pyfakefs_5()
    fs.create_dir("/run/mjf/jobs")
    _fake_root_dirs("/run")
    os.chmod("/run/mjf/jobs", 0o555)
    os.chmod("/run/mjf", 0o555)
    set_uid(1000)
    store = Store("/run/mjf")
    with pytest.raises(StoreError, match="Permission denied"):
        store.create_job("7", VALUES)
    assert os.listdir("/run/mjf/jobs") == []


def test_machine_keys_are_only_rewritten_when_changed(tmp_path):
    store = Store(str(tmp_path / "base"))
    managed = frozenset({"total_cpu", "hs06", "grace_secs"})
    assert store.machine.write({"total_cpu": "4", "hs06": "40"}, managed) == ["total_cpu", "hs06"]
    before = os.stat(f"{store.machine_dir}/total_cpu").st_ino
    store.machine.set_key("shutdowntime", "1795400000")
    assert store.machine.write({"total_cpu": "4"}, managed) == ["hs06"]  # hs06 unconfigured
    assert os.stat(f"{store.machine_dir}/total_cpu").st_ino == before
    assert listing(store.machine_dir) == ["shutdowntime", "total_cpu"]  # dynamic key kept
    assert store.machine.read_key("shutdowntime") == "1795400000"


def test_readers_never_see_a_partial_value(tmp_path):
    store = Store(str(tmp_path / "base"))
    path = store.create_job("7", {"shutdowntime_job": "1" * 10})
    values = {"1" * 10, "2" * 10}
    seen = set()
    stop = threading.Event()

    def read():
        while not stop.is_set():
            with open(f"{path}/shutdowntime_job") as handle:
                seen.add(handle.read())

    reader = threading.Thread(target=read)
    reader.start()
    for round_number in range(300):
        store.set_job_keys("7", {"shutdowntime_job": ("1", "2")[round_number % 2] * 10})
    stop.set()
    reader.join()
    assert seen <= values and seen
    assert listing(path) == ["shutdowntime_job"]


def _dead_pid():
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_leftovers_of_a_killed_hook_are_removed_by_the_next_one(tmp_path):
    store = Store(str(tmp_path / "base"))
    features = Path(store.create_job("7", VALUES))
    jobs = tmp_path / "base/jobs"
    dead, alive = _dead_pid(), os.getppid()
    (jobs / f".new-8.{dead}.0badcafe/jobfeatures").mkdir(parents=True)
    (jobs / f".old-6.{dead}.0badcafe").mkdir()
    (jobs / f".new-9.{alive}.0badcafe").mkdir()  # still at work: left alone
    (features / f".shutdowntime_job.{dead}.0badcafe").write_text("17")
    store.create_job("10", VALUES)
    # Directories (a job's user may have filled them) are left to `mjf sync`.
    assert listing(jobs) == sorted(["7", "10", f".new-9.{alive}.0badcafe",
                                    f".new-8.{dead}.0badcafe", f".old-6.{dead}.0badcafe"])
    assert not store.empty_trash()  # the one still at work stays
    assert listing(jobs) == sorted(["7", "10", f".new-9.{alive}.0badcafe"])
    store.set_job_keys("7", {"shutdowntime_job": "1795400000"})
    assert listing(features) == sorted([*VALUES, "shutdowntime_job"])
    store.machine.write({"total_cpu": "4"}, frozenset({"total_cpu"}))
    (Path(store.machine_dir) / f".total_cpu.{dead}.0badcafe").write_text("4")
    store.machine.write({"total_cpu": "4"}, frozenset({"total_cpu"}))
    assert listing(store.machine_dir) == ["total_cpu"]


def test_removal_survives_a_job_nesting_thousands_of_unreadable_directories(tmp_path, victim):
    store = Store(str(tmp_path / "base"))
    features = store.create_job("7", VALUES)
    # Deeper than the open-file limit and Python's recursion limit, locked on the way.
    fd = os.open(features, os.O_RDONLY)
    for level in range(3000):
        os.mkdir("d", dir_fd=fd)
        os.symlink(str(victim), "link", dir_fd=fd)
        child = os.open("d", os.O_RDONLY, dir_fd=fd)
        if level % 500 == 499:
            os.chmod(f"/proc/self/fd/{fd}", 0)  # locked behind us
        os.close(fd)
        fd = child
    os.close(fd)
    try:
        assert store.remove_job("7")
        assert len(listing(tmp_path / "base/jobs")) <= 1  # the rest, if any, waits
        assert store.empty_trash()
        assert listing(tmp_path / "base/jobs") == []
        assert (victim / "precious").read_text() == "keep"
    finally:  # whatever is left would break pytest's own clean-up of old runs (recursion)
        subprocess.run(["chmod", "-R", "u+rwx", str(tmp_path / "base")], check=False)
        subprocess.run(["rm", "-rf", str(tmp_path / "base")], check=False)


def test_a_base_dir_others_can_write_is_refused(tmp_path):
    base = tmp_path / "base"
    base.mkdir()
    base.chmod(0o777)
    with pytest.raises(StoreError, match="refusing a base_dir others can write"):
        Store(str(base)).create_job("7", VALUES)
    assert listing(base) == []


def test_a_base_dir_another_user_planted_in_a_public_directory_is_refused(tmp_path):
    require(os.geteuid() == 0, "needs root to plant as another user")
    public = tmp_path / "tmp"
    public.mkdir()
    public.chmod(0o1777)
    target = tmp_path / "etc"
    target.mkdir()
    os.symlink(target, public / "mjf")
    os.lchown(public / "mjf", 4321, 4321)
    with pytest.raises(StoreError, match=r"tmp/mjf belongs to uid 4321\b.* could redirect"):
        Store(str(public / "mjf" / "base")).create_job("7", VALUES)
    assert listing(target) == []
    # The same symlink made by root (the site's own) is followed.
    os.lchown(public / "mjf", 0, 0)
    Store(str(public / "mjf" / "base")).create_job("7", VALUES)
    assert listing(target / "base/jobs") == ["7"]


def test_a_base_dir_below_a_directory_another_user_owns_is_refused(tmp_path):
    require(os.geteuid() == 0, "needs root to own a directory as another user")
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    os.chown(home, 4321, 4321)  # mode 0755: nobody else may write, but its owner may
    target = tmp_path / "etc"
    target.mkdir()
    # Its owner swaps the base_dir the site meant for a symlink to anywhere.
    os.symlink(target, home / "mjf")
    with pytest.raises(StoreError, match=r"home belongs to uid 4321\b.* could redirect"):
        Store(str(home / "mjf")).machine.write({"total_cpu": "4"}, frozenset({"total_cpu"}))
    assert listing(target) == []
    (home / "mjf").unlink()
    (home / "mjf").mkdir()  # even a real directory of root's: its parent's owner can swap it
    with pytest.raises(StoreError, match="could redirect"):
        Store(str(home / "mjf")).create_job("7", VALUES)
    assert listing(home / "mjf") == []


def test_a_directory_the_batch_system_gave_the_job_is_walked_from_there(tmp_path):
    require(os.geteuid() == 0, "needs root to own a directory as another user")
    execute = tmp_path / "execute"  # HTCondor's EXECUTE: the condor user's
    execute.mkdir(mode=0o755)
    os.chown(execute, 4321, 4321)
    scratch = execute / "dir_17"
    scratch.mkdir(mode=0o700)
    with pytest.raises(StoreError, match="could redirect"):
        Store(str(scratch / ".mjf")).create_job("7", VALUES)
    Store(str(scratch / ".mjf"), given_dir=str(scratch)).create_job("7", VALUES)
    assert listing(scratch / ".mjf/jobs") == ["7"]


def test_removing_what_a_job_made_takes_bounded_time_the_rest_waits_in_the_trash(
        tmp_path, monkeypatch):
    budget = 0.01  # small, so that this tree surely outlasts it on any filesystem
    monkeypatch.setattr(safefs, "REMOVAL_BUDGET_SECS", budget)
    store = Store(str(tmp_path / "base"))
    features = store.create_job("7", VALUES)
    # Long names, deep, then a wide directory: what the job's user may make in a minute.
    fd = os.open(features, os.O_RDONLY)
    for _ in range(14):
        os.mkdir("n" * 250, dir_fd=fd)
        child = os.open("n" * 250, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = child
    for index in range(5000):
        os.mkdir(str(index), dir_fd=fd)
    os.close(fd)
    started = time.monotonic()
    assert store.remove_job("7")
    took = time.monotonic() - started
    assert took < budget + 0.5, took
    (trash,) = listing(tmp_path / "base/jobs")  # out of sight at once
    assert trash.startswith(".old-7.")
    store.create_job("8", VALUES)  # the next job start does not sweep it either
    assert listing(tmp_path / "base/jobs") == [trash, "8"]
    assert store.empty_trash()  # `mjf sync`
    assert listing(tmp_path / "base/jobs") == ["8"]


def test_a_user_look_alike_of_our_temporary_files_is_not_swept_by_root(tmp_path):
    require(os.geteuid() == 0, "needs root to own files as another user")
    store = Store(str(tmp_path / "base"))
    features = Path(store.create_job("7", VALUES, features_owner=4321, pending=True))
    dead = _dead_pid()
    planted = features / f".max_rss_bytes.{dead}.0badcafe"
    planted.write_text("1")
    os.chown(planted, 4321, 4321)
    ours = features / f".job_id.{dead}.0badcafe"
    ours.write_text("7")
    store.set_job_keys("7", {"shutdowntime_job": "1795400000"})
    assert planted.exists() and not ours.exists()


def test_a_fifo_planted_in_place_of_a_key_neither_hangs_a_drain_nor_a_reader(tmp_path):
    from mjf_hooks.reader import Features

    store = Store(str(tmp_path / "base"))
    path = store.create_job("7", VALUES)
    os.mkfifo(f"{path}/shutdowntime_job")
    os.mkfifo(f"{path}/max_rss_bytes")
    assert Features(path).get("max_rss_bytes") is None  # not waited on
    assert store.update_every_job("shutdowntime_job", lambda own: 1795400000) == 1
    assert Path(f"{path}/shutdowntime_job").read_text() == "1795400000"


def test_a_job_that_planted_a_directory_at_a_key_keeps_no_other_job_from_its_update(tmp_path):
    store = Store(str(tmp_path / "base"))
    os.mkdir(f"{store.create_job('1', VALUES)}/shutdowntime_job")
    other = store.create_job("2", VALUES)
    skipped = []
    assert store.update_every_job("shutdowntime_job", lambda own: 1795400000,
                                  lambda name, error: skipped.append((name, str(error)))) == 1
    assert Path(f"{other}/shutdowntime_job").read_text() == "1795400000"
    assert skipped == [("1", f"{tmp_path}/base/jobs/1/jobfeatures/shutdowntime_job: "
                              "Is a directory")]
    with pytest.raises(StoreError, match="Is a directory"):
        store.update_every_job("shutdowntime_job", lambda own: 1795400001)
