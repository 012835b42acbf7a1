"""Job records on a real HTCondor 23.9 pool, handed in by the job's user.

Runs as root (CI): the pool of ``htcondor_pool`` with contrib/htcondor/mjf-records.config
in its config.d, so the starter runs ``mjf-htcondor-job-exit`` as the job's owner with
the final job ad. That hook cannot write root's records: it hands the record in to the
records directory's drop box (``incoming/``, made by `mjf sync` as root), and the next
`mjf sync` files it. The job is ``record_job.py``: two children burn a known CPU time
while it holds 200 MiB; it writes what it saw in $JOBFEATURES and what the kernel
accounted to it.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.htcondor_pool import GOOD_CONFIG, ROOT, USER, condor_arguments, condor_pool
from tests.integration.trixie_root import CHECKOUT, VENV

pytestmark = pytest.mark.integration

MIB = 2**20
RECORDS = "/var/lib/mjf-records"  # inside the chroot, where the hooks run
# Long enough that what procd misses (each burner's CPU time since its last snapshot: up
# to a snapshot interval, two seen on a busy host) stays well inside the tolerance below.
CPU_PER_CHILD, TOUCHED_MIB = 12, 200
SITE = "MJF-TEST-SITE"
CONFIG = GOOD_CONFIG + f"[records]\ndir = {RECORDS}\nformat = sss, apel\nsite = {SITE}\n"
# This host's HTCondor cannot use cgroups: its procd samples the job's usage, every
# PROCD_MAX_SNAPSHOT_INTERVAL seconds (60 by default would miss a job this short).
POOL_CONFIG = "PROCD_MAX_SNAPSHOT_INTERVAL = 1\n"
# The job: record_job.py, then a pause, under a shell that waits for it. record_job's
# children end on their own (it reaps them), and procd sees a process's CPU time only
# in its snapshots: the pause keeps the shell (whose reaped children's time then
# includes all of record_job's) alive for a snapshot or two after it.
HOLD_SECS = 1.5
WRAPPER = """\
#!/bin/sh
start=$(date +%s.%N)
/usr/bin/python3 "$1" "$2" "$3" "$4"
sleep {hold}
echo "$start $(date +%s.%N)" > "$2.wall"
"""


@pytest.fixture(scope="module")
def pool():
    records = ROOT / RECORDS.lstrip("/")
    shutil.rmtree(records, ignore_errors=True)
    records.parent.mkdir(parents=True, exist_ok=True)  # root's, 0755: the site's to make
    contrib = CHECKOUT / "contrib/htcondor/mjf-records.config"
    with condor_pool(config=CONFIG, config_files=(contrib,), pool_config=POOL_CONFIG) as condor:
        condor.records = records
        shutil.copy(Path(__file__).with_name("record_job.py"), condor.work / "record_job.py")
        (condor.work / "record_job.py").chmod(0o644)
        (condor.work / "wrapper.sh").write_text(WRAPPER.format(hold=HOLD_SECS))
        (condor.work / "wrapper.sh").chmod(0o755)
        try:
            yield condor
        finally:
            shutil.rmtree(records, ignore_errors=True)


def sync(pool) -> subprocess.CompletedProcess:
    """`mjf sync` as root inside the chroot, with the pool's site config."""
    result = pool.chroot([f"{VENV}/bin/mjf", "sync"], check=False, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def records_in(directory: Path) -> list[Path]:
    return sorted(directory.glob("[0-9]*-*-*/*.json"))


def test_a_job_exit_hands_in_a_record_that_sync_files(pool):
    sync(pool)  # makes the drop box
    incoming = pool.records / "incoming"
    info = incoming.stat()
    assert (info.st_uid, info.st_mode & 0o7777) == (0, 0o1733)
    out = pool.work / "out/rec.json"
    log = pool.work / "rec.log"
    submit = pool.work / "rec.sub"
    argv = [str(pool.work / "record_job.py"), str(out), str(CPU_PER_CHILD), str(TOUCHED_MIB)]
    submit.write_text("\n".join([
        "universe = vanilla", f"executable = {pool.work}/wrapper.sh",
        "transfer_executable = false", "should_transfer_files = YES", f"log = {log}",
        f"output = {pool.work}/out/rec.out", f"error = {pool.work}/out/rec.err",
        "request_cpus = 2", "request_memory = 600", "request_disk = 102400",
        "allowed_job_duration = 600", f"arguments = {condor_arguments(argv)}", "queue"]) + "\n")
    pool.submit(USER, submit)
    assert "return value 0" in pool.wait(USER, log)
    job = json.loads(out.read_text())
    started, ended = map(float, Path(f"{out}.wall").read_text().split())
    # The hook ran as the job's user before the job's end was reported: it is in the
    # drop box, not yet filed.
    deadline = time.monotonic() + 30
    while not os.listdir(incoming) and time.monotonic() < deadline:
        time.sleep(0.5)
    handed = os.listdir(incoming)
    assert len(handed) == 1, (handed, "".join(
        pool.log(path.name)[-1500:] for path in (pool.root / "var/log/condor").glob("Starter*")))
    assert records_in(pool.records) == []
    result = sync(pool)
    assert os.listdir(incoming) == [], result.stdout + result.stderr
    found = records_in(pool.records)
    assert len(found) == 1, found
    path = found[0]
    record = json.loads(path.read_text())
    uid = pwd.getpwnam(USER).pw_uid
    print(f"\njob's own: cpu {job['cpu_secs']:.3f} s, wall {job['end'] - job['start']:.3f} s "
          f"(with the shell and its hold: {ended - started:.3f} s), maxrss "
          f"{job['maxrss_kib']} KiB\nrecord {path.name}: {json.dumps(record, indent=1)}")
    assert record["backend"] == "htcondor" and record["user"] == USER

    features = job["features"]
    requested = record["requested"]
    assert record["job_id"] == features["job_id"]
    assert requested["allocated_cpu"] == int(features["allocated_cpu"]) == 2
    assert requested["start_time"] == int(features["jobstart_secs"])
    assert requested["max_rss_bytes"] == int(features["max_rss_bytes"])
    # HTCondor rounds request_memory up (to 128 MiB steps by default): 600 gives 640.
    assert requested["max_rss_bytes"] >= 600 * MIB
    for name in ("wall_limit_secs", "cpu_limit_secs", "scratch_limit_bytes", "hs06_job"):
        if name in features:
            assert requested[name] == pytest.approx(float(features[name])), name
        else:
            assert name not in requested, name

    delivered = record["delivered"]
    for name in ("end_time", "wall_secs", "cpu_secs", "peak_memory_bytes"):
        assert f"handed in by uid {uid}" in delivered[name]["source"], (name, delivered[name])
    cpu = delivered["cpu_secs"]["value"]
    # procd samples (PROCD_MAX_SNAPSHOT_INTERVAL = 1): CPU time between a process's last
    # snapshot and its exit may be lost (the hold above makes that rare, not impossible:
    # up to a second of each of the two burners), so 30% of the job's own figure.
    assert abs(cpu - job["cpu_secs"]) <= 0.3 * job["cpu_secs"], (cpu, job["cpu_secs"])
    wall = delivered["wall_secs"]["value"]
    # JobDuration: the starter's clock from the job's start to its exit - the shell's
    # wall, which is record_job's plus the hold.
    assert abs(wall - (ended - started)) <= 2, (wall, ended - started)
    assert wall >= job["end"] - job["start"] - 1
    peak = delivered["peak_memory_bytes"]["value"]
    # ResidentSetSize: the high-water mark of the job's resident set in procd's snapshots.
    assert TOUCHED_MIB * MIB <= peak < 600 * MIB, peak

    assert (path.with_suffix(".xml")).read_text().startswith("<?xml")
    apel = path.with_suffix(".apel").read_text().splitlines()
    assert apel[0] == "APEL-individual-job-message: v0.3" and apel[-1] == "%%"
    assert f"Site: {SITE}" in apel
    for file in [pool.records, path.parent, *path.parent.iterdir()]:
        assert file.stat().st_uid == 0, file
        assert not file.stat().st_mode & 0o022, file


SECRET = "MJF-SECRET-7f3a1c"


def test_garbage_in_the_drop_box_is_removed_by_sync(pool):
    sync(pool)
    incoming = pool.records / "incoming"
    before = records_in(pool.records)
    secret = ROOT / "root/mjf-secret"
    secret.write_text(SECRET + "\n")
    secret.chmod(0o600)
    record = {"job_id": "planted", "requested": {"allocated_cpu": 1},
              "delivered": {"cpu_secs": {"value": 1, "source": SECRET}}}
    planted = {  # name: (the user's shell command, its stdin)
        "shadow.json": ("ln -s /etc/shadow shadow.json", ""),
        "secret.json": ("ln -s /root/mjf-secret secret.json", ""),
        "fifo.json": ("mkfifo fifo.json", ""),
        "huge.json": ("truncate -s 1G huge.json", ""),
        "big.json": ("head -c 200000 /dev/zero > big.json", ""),
        "invalid.json": ("cat > invalid.json", "{not json"),
        "notrecord.json": ("cat > notrecord.json", "[1, 2]"),
        # A record, but not named as one: refused too (its source would be filed).
        "wrong-name.txt": ("cat > wrong-name.txt", json.dumps(record)),
    }
    for name, (command, stdin) in planted.items():
        # As the user, outside the chroot: the same files (anyone may add to the drop box).
        result = subprocess.run(["runuser", "-u", USER, "--", "sh", "-c",
                                 f"cd {incoming} && {command}"], input=stdin,
                                capture_output=True, text=True, timeout=30)
        assert result.returncode == 0, (name, result.stderr)
    try:
        started = time.monotonic()
        result = sync(pool)
        took = time.monotonic() - started
    finally:
        secret.unlink()
    assert took < 30
    assert os.listdir(incoming) == [], os.listdir(incoming)
    assert "not records handed in by a user" in result.stdout + result.stderr
    assert records_in(pool.records) == before
    for path in pool.records.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert SECRET not in path.read_text(errors="replace"), path
    assert SECRET not in result.stdout + result.stderr
    assert "root:" not in result.stdout + result.stderr  # no line of /etc/shadow


def test_a_directory_planted_in_the_drop_box_is_removed_by_sync(pool):
    sync(pool)
    incoming = pool.records / "incoming"
    planted = subprocess.run(["runuser", "-u", USER, "--", "mkdir", f"{incoming}/dir.json"],
                             capture_output=True, text=True, timeout=30)
    assert planted.returncode == 0, planted.stderr
    try:
        sync(pool)
        assert os.listdir(incoming) == []
    finally:
        shutil.rmtree(incoming / "dir.json", ignore_errors=True)


ATTACKER = "mjfuser2"  # another real user of the node, with no job here


def run_short_job(pool, name: str) -> None:
    """A job of USER's that sleeps a second; its job-exit hook hands its record in."""
    log = pool.work / f"{name}.log"
    submit = pool.work / f"{name}.sub"
    submit.write_text("\n".join([
        "universe = vanilla", "executable = /bin/sleep", "arguments = 1",
        "transfer_executable = false", "should_transfer_files = YES", f"log = {log}",
        f"output = {pool.work}/out/{name}.out", f"error = {pool.work}/out/{name}.err",
        "request_cpus = 1", "request_memory = 100", "request_disk = 10240", "queue"]) + "\n")
    pool.submit(USER, submit)
    assert "return value 0" in pool.wait(USER, log)


def as_attacker(script: str) -> None:
    result = subprocess.run(["runuser", "-u", ATTACKER, "--", "sh", "-c", script],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_another_user_cannot_replace_a_record_nor_keep_the_next_one_out(pool):
    """mjfuser2 reads mjfuser1's filed record (records are world-readable),
    changes its figures and hands it in with the same job and end; plants 10,000 hidden
    files (they sorted before every hand-in: only the first 10,000 names were looked at),
    a hand-in whose end_time is 1e20 (it raised OverflowError and stopped every later
    sync) and one nested too deep. mjfuser1's record stays as it was, its next job's
    record is filed by the next sync, the poisoned ones go with a line each, and the
    copy is filed, if at all, as mjfuser2's own."""
    from tests.integration.site import ensure_user

    attacker_uid, _ = ensure_user(ATTACKER)
    victim_uid = pwd.getpwnam(USER).pw_uid
    sync(pool)
    incoming = pool.records / "incoming"
    before = set(records_in(pool.records))
    run_short_job(pool, "victim-1")
    deadline = time.monotonic() + 30
    while not os.listdir(incoming) and time.monotonic() < deadline:
        time.sleep(0.5)
    sync(pool)
    (filed,) = set(records_in(pool.records)) - before
    assert filed.name.endswith(f"~{victim_uid}.json"), filed.name
    victims = {path: path.read_bytes() for path in filed.parent.glob(filed.stem + ".*")}
    copy = json.loads(filed.read_text())
    copy["delivered"]["cpu_secs"] = {"value": 1.0, "source": "forged"}
    handed_name = filed.name.replace(f"~{victim_uid}.json", ".1.json")
    poisoned = json.dumps({"job_id": "poison", "delivered": {
        "end_time": {"value": 1e20, "source": "forged"}}})
    deep = "[" * 30000 + "]" * 30000
    work = pool.work / "attack"
    work.mkdir()
    for name, text in (("copy.json", json.dumps(copy)), ("poison.json", poisoned),
                       ("deep.json", deep)):
        (work / name).write_text(text)
        (work / name).chmod(0o644)
    as_attacker(f"cd {incoming} && cp {work}/copy.json '{handed_name}' && "
                f"cp {work}/poison.json 1000000000-poison.1.json && "
                f"cp {work}/deep.json 1000000001-deep.1.json && "
                "i=0; while [ $i -lt 10000 ]; do : > .a$i; i=$((i+1)); done")
    run_short_job(pool, "victim-2")
    deadline = time.monotonic() + 30
    while len(os.listdir(incoming)) < 10004 and time.monotonic() < deadline:
        time.sleep(0.5)
    result = sync(pool)
    output = result.stdout + result.stderr
    assert os.listdir(incoming) == [], len(os.listdir(incoming))
    for path, data in victims.items():
        assert path.read_bytes() == data, path
    new = set(records_in(pool.records)) - before - {filed}
    owners = sorted(path.name.rsplit("~", 1)[1] for path in new)
    # mjfuser1's second job; mjfuser2's copy, under its own uid and marked so.
    assert owners == sorted([f"{victim_uid}.json", f"{attacker_uid}.json"]), new
    (theirs,) = [path for path in new if path.name.endswith(f"~{attacker_uid}.json")]
    assert json.loads(theirs.read_text())["delivered"]["cpu_secs"]["source"] == \
        f"forged; handed in by uid {attacker_uid}"
    lines = [line for line in output.splitlines() if "/incoming: removed" in line]
    assert any("'1000000000-poison.1.json' of uid" in line and "end_time" in line
               for line in lines), output
    assert any("'1000000001-deep.1.json' of uid" in line and "RecursionError" in line
               for line in lines), output
    assert any("removed 10000 file(s) that are not records handed in by a user" in line
               for line in lines), output
    assert "Traceback" not in output
    result = sync(pool)
    assert "/incoming: removed" not in result.stdout + result.stderr
