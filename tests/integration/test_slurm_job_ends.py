"""Every job's end removes its directory, on Slurm 24.11 with PrologFlags=RunInJob.

There the job's extern step runs our Epilog (after the Prolog, always, and before the job
leaves the queue). It once left a directory behind now and then - after a short job, a
cancelled one, an array task - which a `mjf sync` in the tests removed and so hid: the
tests rewrote the site config in place (truncate, then write) right after a job's output
was seen, and an Epilog that read it in between took it for a config of defaults, found
no job there and said nothing. Here 32 jobs of every kind end, two at a time, while the
site config is rewritten (as the tests do, now by rename) the whole time; no `mjf sync`
runs: no job's directory may be left, and each job that ran has its record (the Epilog
wrote it, from the directory it had already taken out of sight).

It still left one now and then on a loaded machine. Every Prolog and Epilog run is
recorded (its ids as it started, its end and status, what ours said), and the records
showed two causes, both slurmstepd forking the Epilog while switched to the job's user
(as it ends the extern step): with root's real uid but the user's effective ids (the
Epilog takes root back), and, rarer, with all its uids the user's (an array task's, on
a node kept busy writing and dropping its caches): nothing unprivileged takes root back,
so the Epilog says so and the job's directory goes with the next Prolog or Epilog, which
sees the job's recorded extern slurmstepd gone (docs/slurm.md). Tests start the hooks
both ways.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest

from tests.conftest import fixture_text, require
from tests.integration.site import HOOKS_BIN, SITE_CONFIG, ensure_user
from tests.integration.slurm_cluster import (
    assert_no_job_directories_left,
    mjf_cluster,
    sbatch,
    seen,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster():
    with mjf_cluster(cgroups=True, version="24.11", run_in_job=True, records=True,
                     record_hooks=True) as slurm:
        slurm.records = slurm.job_root / "records"
        slurm.good_config += f"[records]\ndir = {slurm.records}\n"
        SITE_CONFIG.write_text(slurm.good_config)
        yield slurm


class Rewriter(threading.Thread):
    """Rewrites the site config (the same text) every few milliseconds, as tests do
    between jobs, until stopped."""

    def __init__(self, text: str) -> None:
        super().__init__(daemon=True)
        self.text = text
        self.stopping = threading.Event()
        self.count = 0

    def run(self) -> None:
        while not self.stopping.wait(0.005):
            SITE_CONFIG.write_text(self.text)
            self.count += 1


def submit(cluster, user: str, name: str, *options: str, script: str = "") -> str:
    """``dump.py name`` (then ``script``) as a batch job of ``user``, without waiting."""
    wrap = f"/usr/bin/python3 {cluster.job_root}/dump.py {name}" + (f"; {script}" if script else "")
    result = cluster.as_user(user, ["sbatch", "--parsable", "-J", name, "-c", "1", "--mem=100M",
                                    "--time=5", "-o", "/dev/null", *options, "--wrap", wrap])
    return result.stdout.strip().split(";")[0]


def test_no_job_leaves_its_directory_whatever_its_end(cluster):
    ran: dict[str, str] = {}  # job id -> the name its dump was written under
    rewriter = Rewriter(cluster.good_config)
    rewriter.start()
    try:
        # Short jobs, two users, submitted at once: they run two at a time (2 CPUs).
        for index in range(8):
            name = f"short{index}"
            ran[submit(cluster, ("mjfuser1", "mjfuser2")[index % 2], name)] = name
        # Cancelled while running, two at once, as soon as each has seen its directory.
        for pair in range(3):
            names = [f"cancel{pair}{side}" for side in "ab"]
            ids = [submit(cluster, user, name, script="sleep 60")
                   for user, name in zip(("mjfuser1", "mjfuser2"), names)]
            for job_id, name in zip(ids, names):
                seen(cluster, name)
                ran[job_id] = name
            cluster.command(["scancel", *ids])
        # Cancelled before they started: no Prolog, no Epilog, nothing to leave.
        never = [submit(cluster, "mjfuser1", f"pending{index}", "--begin=now+600")
                 for index in range(2)]
        cluster.command(["scancel", *never])
        # An array of ten tasks, each its own job.
        array = sbatch(cluster, "mjfuser2", "array", "--array=1-10", "--time=3", "--mem=100M",
                       wait=False)
        # Six more, in pairs of two users.
        for index in range(6):
            name = f"pair{index}"
            ran[submit(cluster, ("mjfuser1", "mjfuser2")[index % 2], name)] = name
        cluster.wait_until_no_jobs(timeout=300)
    finally:
        rewriter.stopping.set()
        rewriter.join()
    for task in range(1, 11):
        view = seen(cluster, "array", task)
        ran[view["env"]["SLURM_JOB_ID"]] = f"array task {task} of {array}"
    views = {name: seen(cluster, name) for name in ran.values() if " " not in name}
    assert all(view["env"]["JOBFEATURES"] for view in views.values()), views
    assert len(ran) + len(never) >= 30 and rewriter.count > 100
    assert_no_job_directories_left(cluster)  # no `mjf sync`: each Epilog removed its own
    # Where slurmstepd started a hook with the job user's ids (its race: rare, more so on an
    # idle machine), ours said so and acted as root.
    said = (cluster.root / "hooks.err").read_text()
    for role, job_id, as_user in cluster.hooks_started_switched():
        assert f"mjf-slurm {role} job {job_id}: warning: started " + (
            "as uid" if as_user else "with root's real uid") in said
    unrecorded = [f"{job_id} ({name})" for job_id, name in ran.items()
                  if len(list(cluster.records.glob(f"*/*-{job_id}.json"))) != 1]
    assert unrecorded == [], f"jobs without exactly one record: {unrecorded}\n" \
        + cluster.log("slurmd")


def as_slurmstepd_switched_to(uid: int, gid: int):
    """What a process forked by slurmstepd while another of its threads had switched to
    the job's user holds (Slurm's drop_privileges: setegid, setgroups, seteuid): root's
    real ids, the user's effective and saved ones and groups, no effective capability."""

    def switch() -> None:
        os.setegid(gid)
        os.setgroups([gid])
        os.seteuid(uid)

    return switch


def test_a_prolog_and_epilog_started_with_the_job_users_ids_act_as_root():
    """What most likely left job 17 of 32 in CI: slurmstepd's extern step forks the Epilog
    while switched to the job's user to shut X11 forwarding down (a recorded run caught it
    starting job 30's so), and the Epilog, denied the rename in root's jobs/, logged that
    on a stderr slurmd shows only at debug2 and exited 0. Started so, both hooks act as
    root again, say so in one line, and do their whole work: the directory is made, then
    removed, the record root's."""
    require(os.geteuid() == 0, "needs root to start a hook as slurmstepd does")
    require((HOOKS_BIN / "mjf-slurm").exists(),
            f"needs the hooks installed in {HOOKS_BIN} (tests/run does it)")
    uid, gid = ensure_user("mjfuser1")
    root = Path(tempfile.mkdtemp(prefix="mjf-slurm-ids-"))
    try:
        root.chmod(0o755)  # the hook starts as the user: it reads the config, as a TaskProlog
        config = root / "mjf.conf"
        config.write_text(f"[mjf]\nbase_dir = {root}/mjf\n[records]\ndir = {root}/records\n")
        jobs = root / "mjf" / "jobs"

        def hook(context: str) -> subprocess.CompletedProcess:
            lines = fixture_text(f"slurm-24.11/runinjob-{context}.env").splitlines()
            environ = dict(line.split("=", 1) for line in lines)
            environ.update(SLURM_JOB_UID=str(uid), SLURM_JOB_GID=str(gid),
                           MJF_CONFIG=str(config), PATH="/usr/bin:/bin")
            return subprocess.run([str(HOOKS_BIN / "mjf-slurm")], env=environ, timeout=60,
                                  capture_output=True, text=True,
                                  preexec_fn=as_slurmstepd_switched_to(uid, gid))

        for context, left in (("prolog", ["14"]), ("epilog", [])):
            result = hook(context)
            assert result.returncode == 0, result.stderr
            [line] = result.stderr.splitlines()
            assert f"mjf-slurm {context} job 14: warning: started with root's real uid but " \
                f"effective uid {uid}, gid {gid} " in line and "acting as root again" in line
            assert sorted(os.listdir(jobs)) == left, result.stderr
            if left:
                assert (jobs / "14").stat().st_uid == 0
        [record] = (root / "records").glob("*/*-14.json")
        assert (record.stat().st_uid, record.stat().st_gid) == (0, 0)
    finally:
        shutil.rmtree(root)


def test_an_epilog_started_wholly_as_the_job_user_leaves_the_directory_to_the_next_hook(
        cluster):
    """What a recorded run caught on a loaded machine (job 3 of an array): slurmstepd
    started the Epilog with all its uids the job user's, so nothing could take root back
    and root's directory stayed. Started so (setpriv, in the recording hook), the Epilog
    says so in one line and leaves it; the next job's Prolog removes it, since the
    job's extern step, which its Prolog recorded, has ended. No `mjf sync` runs."""
    cluster.wait_until_no_jobs()
    flag = cluster.root / "epilog-as-user"
    flag.touch()
    try:
        job = sbatch(cluster, "mjfuser1", "epilog-as-user", "--time=2", "--mem=100M")
    finally:
        flag.unlink()
    uid = ensure_user("mjfuser1")[0]
    said = (cluster.root / "hooks.err").read_text()
    assert f"mjf-slurm epilog job {job}: warning: started as uid {uid}, not root" in said
    assert (cluster.mjf_base / "jobs" / job / "state" / "runner").exists()
    following = sbatch(cluster, "mjfuser2", "after-epilog-as-user", "--time=2", "--mem=100M")
    said = (cluster.root / "hooks.err").read_text()
    # Nothing left but, on a loaded machine, the following job's own directory where
    # slurmstepd started its Epilog as the job's user too (that Epilog says so).
    left = [name for name in os.listdir(cluster.mjf_base / "jobs") if not name.startswith(".")]
    assert left in ([], [following]), cluster.hook_record()
    if left:
        assert f"mjf-slurm epilog job {following}: warning: started as uid" in said, \
            cluster.hook_record()
    # Its Prolog, or where job's slurmstepd had not quite exited by then, its Epilog.
    assert any(f"mjf-slurm {role} job {following}: info: removed job {job}: the process "
               "it lived in has ended" in said for role in ("prolog", "epilog")), said
