"""`mjf sync` with fake scontrol/squeue: reservations become drains, stale jobs go."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from mjf_hooks.probe import process
from mjf_hooks.store import BACKEND_MARKER, RUNNER_MARKER, Store
from tests.conftest import (
    FIXTURES,
    LeveledLog,
    installed_command,
    printing,
    require,
    users_job,
    write_script,
)

NODE = os.uname().nodename.split(".")[0]


@pytest.fixture
def node(tmp_path, write_config):
    bindir = tmp_path / "slurm-bin"
    bindir.mkdir()
    conf, base = write_config(f"[machinefeatures]\ngrace_secs = 600\n"
                              f"[slurm]\nscontrol = {bindir}/scontrol\n")
    return Node(bindir, conf, base)


class Node:
    def __init__(self, bindir, conf, base):
        self.bindir, self.conf, self.base = bindir, conf, base
        self.store = Store(str(base))
        self.reservations("")
        self.squeue("")

    def reservations(self, text):
        write_script(self.bindir / "scontrol", printing(text))

    def squeue(self, text):
        write_script(self.bindir / "squeue", printing(text))

    def sync(self):
        return subprocess.run([installed_command("mjf"), "sync"], capture_output=True,
                              text=True, timeout=60, env={"MJF_CONFIG": str(self.conf)})

    def machine(self, name):
        path = self.base / "machinefeatures" / name
        return path.read_text() if path.exists() else None


def reservation(start, nodes=NODE, flags="MAINT,SPEC_NODES", name="maint1"):
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(start))
    end = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(start + 3600))
    return (f"ReservationName={name} StartTime={stamp} EndTime={end} Duration=01:00:00 "
            f"Nodes={nodes} NodeCnt=1 CoreCnt=2 Features=(null) PartitionName=(null) "
            f"Flags={flags} TRES=cpu=2 Users=root Groups=(null) Accounts=(null) "
            "Licenses=(null) State=INACTIVE BurstBuffer=(null) Watts=n/a\n")


def test_a_maintenance_reservation_becomes_a_drain_and_goes_with_it(node):
    node.store.create_job("5", {"job_id": "5"})
    node.squeue("5\n")
    start = int(time.time()) + 7200
    node.reservations(reservation(start) + reservation(start - 600, nodes="other[1-3]",
                                                       name="elsewhere"))
    result = node.sync()
    assert result.returncode == 0, result.stderr
    assert f"shutdowntime = {start} from Slurm maintenance reservation maint1" in result.stdout
    assert node.machine("shutdowntime") == str(start)
    job = node.base / "jobs/5/jobfeatures/shutdowntime_job"
    assert job.read_text() == str(start)
    assert node.sync().stdout == ""  # nothing new
    node.reservations("")
    result = node.sync()
    assert "withdrawn" in result.stdout
    assert node.machine("shutdowntime") is None and not job.exists()


def test_reservations_that_do_not_apply_are_ignored(node):
    start = int(time.time()) + 7200
    node.reservations(reservation(start, flags="SPEC_NODES") +
                      reservation(start, nodes="other1") +
                      reservation(int(time.time()) - 7200))  # already over
    assert node.sync().stdout == "" and node.machine("shutdowntime") is None


def test_a_node_slurm_knows_by_another_name_follows_its_reservations(node):
    # slurm.conf: NodeName=wn17 NodeHostname=<this host>; [slurm] nodename says so.
    node.conf.write_text(node.conf.read_text() + "nodename = wn17\n")
    start = int(time.time()) + 7200
    node.reservations(reservation(start, nodes="wn[16-18]") + reservation(start - 600))
    result = node.sync()
    assert f"shutdowntime = {start} from Slurm maintenance reservation maint1" in result.stdout
    squeue_args = node.bindir / "squeue.args"
    node.store.create_job("5", {"job_id": "5"}, state={"backend": "slurm"})
    write_script(node.bindir / "squeue", f'echo "$@" > {squeue_args}')
    node.sync()
    assert squeue_args.read_text().split()[:3] == ["-h", "-w", "wn17"]


def test_an_admins_drain_is_never_withdrawn_or_overridden_by_a_later_one(node):
    admin = int(time.time()) + 3600
    subprocess.run([installed_command("mjf"), "drain", "--at", str(admin)], check=True,
                   capture_output=True, env={"MJF_CONFIG": str(node.conf)})
    node.reservations(reservation(admin + 3600))
    node.sync()
    assert node.machine("shutdowntime") == str(admin)
    node.reservations("")
    node.sync()
    assert node.machine("shutdowntime") == str(admin)


def admin_drain(node, *args):
    result = subprocess.run([installed_command("mjf"), "drain", *args], capture_output=True,
                            text=True, env={"MJF_CONFIG": str(node.conf)})
    assert result.returncode == 0, result.stderr
    return result


def test_an_admins_later_drain_returns_when_the_batch_systems_earlier_one_goes(node):
    node.store.create_job("5", {"job_id": "5"})
    node.squeue("5\n")
    admin = int(time.time()) + 7 * 86400
    admin_drain(node, "--at", str(admin))
    maintenance = int(time.time()) + 86400
    node.reservations(reservation(maintenance))
    assert "from Slurm maintenance reservation maint1" in node.sync().stdout
    assert node.machine("shutdowntime") == str(maintenance)
    node.reservations("")  # the reservation is deleted
    node.sync()
    assert node.machine("shutdowntime") == str(admin)
    assert (node.base / "jobs/5/jobfeatures/shutdowntime_job").read_text() == str(admin)


def test_an_admins_drain_set_during_a_batch_drain_outlives_it(node):
    node.reservations(reservation(int(time.time()) + 86400))
    node.sync()
    admin = int(time.time()) + 3600
    admin_drain(node, "--at", str(admin))
    node.reservations("")
    node.sync()
    assert node.machine("shutdowntime") == str(admin)


def test_cancelling_leaves_no_mark_that_withdraws_a_later_admin_drain(node):
    maintenance = int(time.time()) + 86400
    node.reservations(reservation(maintenance))
    node.sync()
    # The admin's cancel withdraws the admin's drain only: the batch system's stands.
    assert "Slurm maintenance reservation maint1" in admin_drain(node, "--cancel").stdout
    assert node.machine("shutdowntime") == str(maintenance)
    node.reservations("")
    node.sync()
    assert node.machine("shutdowntime") is None
    admin_drain(node, "--in", "3h")  # weeks later
    admin = node.machine("shutdowntime")
    node.sync()
    assert node.machine("shutdowntime") == admin
    # The bookkeeping is root's, beside machinefeatures/, which holds key files only.
    assert sorted(os.listdir(node.base / "machinefeatures")) == sorted(
        name for name in os.listdir(node.base / "machinefeatures") if not name.startswith("."))
    assert sorted(os.listdir(node.base / "state")) == ["shutdowntime_admin"]


def test_a_drain_an_earlier_version_announced_is_taken_over(node):
    node.store.machine.write({"total_cpu": "4"}, frozenset())
    admin = int(time.time()) + 3600
    (node.base / "machinefeatures/shutdowntime").write_text(str(admin))
    node.sync()  # no batch-system drain: the admin's stands
    assert node.machine("shutdowntime") == str(admin)
    batch = int(time.time()) + 1800
    node.store.machine.set_key("shutdowntime", str(batch))
    (node.base / "state/shutdowntime_admin").unlink()
    (node.base / "machinefeatures/.shutdowntime_source").write_text("Slurm reservation x")
    node.sync()  # that one was the batch system's, and it is gone
    assert node.machine("shutdowntime") is None
    assert not (node.base / "machinefeatures/.shutdowntime_source").exists()


@pytest.mark.parametrize("planted", [b"\xff", "١٧٩٥٠٠٠٠٠٠".encode(), b"12 34", b"-5",
                                     b"9" * 40])
def test_a_users_garbled_own_value_stops_no_other_jobs_cancel(node, planted):
    for job in ("1", "2", "3"):
        node.store.create_job(job, {"job_id": job})
    node.squeue("1\n2\n3\n")
    own = node.base / "jobs/2/state/own_shutdowntime_job"
    own.parent.mkdir(exist_ok=True)
    own.write_bytes(planted)  # what the job's user wrote while it owned state/
    node.reservations(reservation(int(time.time()) + 7200))
    node.sync()
    admin_drain(node, "--in", "2h")
    result = admin_drain(node, "--cancel")
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    assert "own_shutdowntime_job" in result.stderr  # named, and ignored
    node.reservations("")
    result = node.sync()
    assert result.returncode == 0 and "internal error" not in result.stderr
    assert node.machine("shutdowntime") is None
    for job in ("1", "2", "3"):
        assert not (node.base / f"jobs/{job}/jobfeatures/shutdowntime_job").exists(), job
    hidden = [path for path in node.base.rglob(".*")]
    assert hidden == []


SLURM_JOB = {BACKEND_MARKER: "slurm"}


def test_stale_jobs_are_removed_only_when_proven(node):
    node.store.create_job("7", {"job_id": "7"}, state=SLURM_JOB)  # Slurm still runs it
    node.store.create_job("8", {"job_id": "8"}, state=SLURM_JOB)  # Slurm no longer does
    node.store.create_job("x.1", {"job_id": "x.1"}, state={RUNNER_MARKER: "999999 1"})  # gone
    alive = process.identity(os.getpid())
    node.store.create_job("x.2", {"job_id": "x.2"}, state={RUNNER_MARKER: alive})
    node.store.create_job("weird", {"job_id": "weird"})   # nothing proves it stale
    # Digits too, but LSF's, of an earlier version's, or marked by its user: squeue does
    # not speak for them.
    node.store.create_job("9", {"job_id": "9"}, state={BACKEND_MARKER: "lsf"})
    node.store.create_job("10", {"job_id": "10"})
    node.store.create_job("11", {"job_id": "11"}, state={BACKEND_MARKER: "slurm\n"})
    node.squeue("7\n")
    result = node.sync()
    assert sorted(os.listdir(node.base / "jobs")) == ["10", "11", "7", "9", "weird", "x.2"]
    assert "removed job 8: Slurm no longer runs it" in result.stdout
    assert "removed job x.1: its process has ended" in result.stdout


def test_a_slurm_job_whose_extern_step_ended_is_removed_without_asking(node):
    """A RunInJob job records its extern slurmstepd: gone, the job is over here, even
    where squeue cannot answer; one whose slurmstepd runs is not removed by that."""
    node.store.create_job("8", {"job_id": "8"}, state={**SLURM_JOB, RUNNER_MARKER: "999999 1"})
    alive = process.identity(os.getpid())
    node.store.create_job("9", {"job_id": "9"}, state={**SLURM_JOB, RUNNER_MARKER: alive})
    write_script(node.bindir / "squeue", "exit 1")
    result = node.sync()
    assert os.listdir(node.base / "jobs") == ["9"]
    assert "removed job 8: the process it lived in has ended" in result.stdout


def test_a_failing_squeue_removes_nothing_and_fails_the_pass(node):
    node.store.create_job("8", {"job_id": "8"}, state=SLURM_JOB)
    write_script(node.bindir / "squeue", "exit 1")
    result = node.sync()
    assert result.returncode == 1 and os.listdir(node.base / "jobs") == ["8"]
    assert "no job directory removed" in result.stderr
    assert "error: sync: stale jobs failed: Slurm could not be asked which jobs run here" \
        in result.stderr


@pytest.mark.parametrize(("job_id", "dir_name"), [("orphan", "orphan"), ("a!b", "a%21b")])
def test_a_standalone_job_left_by_a_killed_runner_is_cleaned(node, tmp_path, job_id, dir_name):
    pid_file = tmp_path / "job.pid"
    runner = subprocess.Popen([installed_command("mjf"), "run", "--job-id", job_id, "--",
                               "sh", "-c", f'echo $$ > {pid_file}; exec sleep 60'],
                              env={"MJF_CONFIG": str(node.conf), "PATH": "/usr/bin:/bin"})
    deadline = time.monotonic() + 20
    while not (node.base / f"jobs/{dir_name}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    node.sync()
    assert (node.base / f"jobs/{dir_name}").exists()  # still running
    runner.kill()
    runner.wait()
    node.sync()
    assert not (node.base / f"jobs/{dir_name}").exists()
    os.kill(int(pid_file.read_text()), signal.SIGKILL)  # the job we started, by its pid


def test_a_fifo_or_symlink_a_job_planted_as_its_runner_is_neither_waited_on_nor_followed(
        node, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("not a process identity")
    for job, plant in (("fifo", os.mkfifo), ("link", lambda path: os.symlink(secret, path))):
        node.store.create_job(job, {"job_id": job})
        state = node.base / "jobs" / job / "state"
        state.mkdir()
        plant(state / RUNNER_MARKER)
    result = node.sync()
    assert result.returncode == 0, result.stderr
    # Nothing proves these jobs stale (no runner could be read, their ids are no Slurm ids).
    assert sorted(os.listdir(node.base / "jobs")) == ["fifo", "link"]


def test_a_node_that_runs_no_slurm_never_asks_it(node, tmp_path):
    calls = tmp_path / "calls"
    for name in ("scontrol", "squeue"):  # installed, but this is an HTCondor node
        write_script(node.bindir / name, f"echo {name} >> {calls}\nexit 1")
    node.conf.write_text(node.conf.read_text().replace(
        "[mjf]\n", "[mjf]\nbatch_systems = htcondor\n"))
    node.store.create_job("8", {"job_id": "8"}, state=SLURM_JOB)
    result = node.sync()
    assert "scontrol" not in result.stderr and "squeue" not in result.stderr
    assert "condor_status" in result.stderr  # the one it runs (absent here) is asked
    assert result.returncode == 1 and "sync: drains failed: HTCondor" in result.stderr
    assert not calls.exists()
    assert os.listdir(node.base / "jobs") == ["8"]


def test_a_failing_query_withdraws_no_drain(node):
    start = int(time.time()) + 7200
    node.reservations(reservation(start))
    node.sync()
    write_script(node.bindir / "scontrol", "echo down >&2\nexit 1")
    result = node.sync()
    assert "Slurm drains not known this time" in result.stderr
    assert result.returncode == 1 and "sync: drains failed: Slurm" in result.stderr
    assert node.machine("shutdowntime") == str(start)  # not known is not gone
    node.reservations("")
    assert "withdrawn" in node.sync().stdout


# --- a phase that fails stops no other -----------------------------------------------------

DEAD_PID = 2**22 + 123  # above the largest pid_max Linux allows


def records_node(tmp_path, write_config, records):
    """A node keeping records in ``records``, with what a killed job end left in the trash
    of jobs/ (for the last phase to remove)."""
    conf, base = write_config(f"batch_systems = slurm\n[slurm]\nscontrol = /bin/true\n"
                              f"[records]\ndir = {records}\nformat = sss\n")
    trash = base / f"jobs/.old-9.{DEAD_PID}.0123abcd"
    trash.mkdir(parents=True)
    (trash / "jobfeatures").mkdir()
    return conf, base, trash


def test_a_failing_phase_is_one_line_the_others_still_run_and_sync_exits_1(
        tmp_path, write_config):
    """The records directory refused (another user's): filing and expiring fail, each in
    one line naming its phase; the machine features and the trash are still done; the
    exit status says something failed."""
    require(os.geteuid() == 0, "needs root to give the records directory to another user")
    records = tmp_path / "records"
    records.mkdir()
    os.chown(records, 54321, 54321)
    conf, base, trash = records_node(tmp_path, write_config, records)
    result = subprocess.run([installed_command("mjf"), "sync"], capture_output=True,
                            text=True, timeout=60, env={"MJF_CONFIG": str(conf)})
    assert result.returncode == 1, result.stderr
    errors = [line for line in result.stderr.splitlines() if ": error: " in line]
    assert len(errors) == 2, result.stderr
    assert "sync: job records handed in failed: " in errors[0] and str(records) in errors[0]
    assert "sync: old job records failed: " in errors[1]
    assert (base / "machinefeatures/total_cpu").exists()
    assert not trash.exists()


def test_an_unexpected_error_in_one_phase_stops_no_other(tmp_path, write_config, monkeypatch):
    """Whatever a phase raises (here: a bug in the removal of stale jobs), the records are
    still filed and expired and the trash emptied; the pass says which phase failed."""
    from mjf_hooks import config as config_module
    from mjf_hooks import sync
    from mjf_hooks.log import Log

    conf, _, trash = records_node(tmp_path, write_config, tmp_path / "records")

    def broken(*args):
        raise RuntimeError("a bug\nin two lines")

    monkeypatch.setattr(sync, "_remove_stale_jobs", broken)
    lines = []
    log = Log("mjf sync", ())
    monkeypatch.setattr(log, "_emit", lambda level, message: lines.append((level, message)))
    done = sync.sync(config_module.load(str(conf)), log, {})
    assert done.failed == ["stale jobs"]
    assert ("error", "sync: stale jobs failed: RuntimeError: a bug in two lines") in lines
    assert os.path.isdir(tmp_path / "records/incoming")  # the records phase ran
    assert not trash.exists()  # and the last one


def test_a_poisoned_hand_in_stops_no_later_sync(tmp_path, write_config):
    """A hand-in whose end_time is 1e20 (OverflowError before: it stayed, and every later
    sync stopped at it): removed with one line; a good one is filed in the same run."""
    require(os.geteuid() == 0, "needs root: hand-ins are a user's files in root's drop box")
    records = tmp_path / "records"
    conf, _, _ = records_node(tmp_path, write_config, records)

    def sync():
        return subprocess.run([installed_command("mjf"), "sync"], capture_output=True,
                              text=True, timeout=60, env={"MJF_CONFIG": str(conf)})

    assert sync().returncode == 0  # makes the drop box
    incoming = records / "incoming"
    end = int(time.time()) - 60  # within keep_days: the same sync expires no record of it
    good = {"job_id": "good", "delivered": {"end_time": {"value": end, "source": "x"}}}
    poisoned = {"job_id": "bad", "delivered": {"end_time": {"value": 1e20, "source": "x"}}}
    for name, data in (("1000000000-bad.1.json", poisoned), (f"{end}-good.2.json", good)):
        (incoming / name).write_text(json.dumps(data))
        os.chown(incoming / name, 54321, 54321)
    result = sync()
    assert result.returncode == 0, result.stderr
    assert os.listdir(incoming) == []
    (warning,) = [line for line in result.stderr.splitlines()
                  if ": warning: " in line and "/incoming" in line]
    assert "removed the hand-in '1000000000-bad.1.json' of uid 54321: not a record: " \
           "ValueError: end_time must be a number from 0 to 253402300799, not 1e+20" in warning
    assert [path.name for path in records.glob("[0-9]*/*.json")] == [f"{end}-good~54321.json"]


# --- a dry run changes nothing anywhere -------------------------------------------------------

# What a pass may run that changes a batch system (the rest are queries).
MUTATING = ("scontrol update", "qmgr ", "qconf -mattr", "qconf -aattr")


class FakeBatchSystems:
    """Slurm, PBS and Grid Engine as fake commands that log every call (``calls``) and
    answer from files in ``answers``; a write makes the batch system hold what it wrote
    (its answer's ``_after`` file), as the real one would."""

    def __init__(self, root, node):
        self.answers, self.calls = root / "answers", root / "calls"
        self.answers.mkdir()
        self.bindir, self.pbs_exec = root / "bin", root / "pbs"
        for directory, name, cases in (
                (self.bindir, "scontrol", [('"show reservation"*', "cat {}/reservations"),
                                           ('"show node"*', "cat {}/slurm_node"),
                                           ("update*", "cp {0}/slurm_node_after {0}/slurm_node")]),
                (self.bindir, "squeue", [("*", "cat {}/squeue")]),
                (self.bindir, "qstat", [("*", "cat {}/qstat")]),
                (self.bindir, "qconf", [('"-se"*', "cat {}/ge_host"),
                                        ("*", "cp {0}/ge_host_after {0}/ge_host")]),
                (self.pbs_exec / "bin", "pbs_rstat", [("*", "cat {}/pbs_rstat")]),
                (self.pbs_exec / "bin", "pbsnodes", [('"-H"*', "cat {}/pbs_vnodes"),
                                                     ('"-v"*', "cat {}/pbs_node")]),
                (self.pbs_exec / "bin", "qmgr", [("*", "cp {0}/pbs_node_after {0}/pbs_node")])):
            body = [f"printf '%s\\n' \"{name} $*\" >> {self.calls}", 'case "$*" in']
            body += [f"  {pattern}) {action.format(self.answers)} ;;"
                     for pattern, action in cases]
            write_script(directory / name, "\n".join([*body, "esac"]))

    def answer(self, **answers):
        for name, text in answers.items():
            (self.answers / name).write_text(text)

    def logged(self):
        calls = self.calls.read_text().splitlines() if self.calls.exists() else []
        self.calls.unlink(missing_ok=True)
        return calls


def pbs_reservation(start, node=NODE):
    def ctime(moment):
        return time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(moment))

    return (f"Resv ID: M1.{node}\nReserve_Name = maint\nreserve_state = RESV_CONFIRMED\n"
            f"reserve_start = {ctime(start)}\nreserve_end = {ctime(start + 3600)}\n"
            f"resv_nodes = ({node}:ncpus=1)\n")


def tree_state(*roots):
    """Every path below ``roots`` with its type and mode, owner, mtime and content."""
    import stat

    state = {}
    for root in roots:
        for directory, subdirs, files in os.walk(root):
            for path in [directory, *(os.path.join(directory, name) for name in subdirs + files)]:
                info = os.lstat(path)
                content = os.readlink(path) if stat.S_ISLNK(info.st_mode) else \
                    Path(path).read_bytes() if stat.S_ISREG(info.st_mode) else None
                state[path] = (stat.filemode(info.st_mode), info.st_uid, info.st_gid,
                               info.st_mtime_ns, content)
    return state


def test_a_dry_run_changes_nothing_anywhere_and_says_what_each_phase_would_do(
        tmp_path, write_config, ended_runner):
    """Every phase has something to do: a machine key deleted, a Slurm and a PBS
    maintenance reservation, jobs Slurm, PBS and Grid Engine no longer run, a RunInJob
    job and a standalone one whose process ended, the node's facts unpublished in all
    three, a hand-in and a file that is none in the drop box, an old record, trash, the
    metrics file. --dry-run leaves the whole tree as it was and runs no command that
    changes a batch system; the same pass without it does all of that."""
    require(os.geteuid() == 0, "needs root: sync files hand-ins of other users")
    from mjf_hooks.records import store as record_store

    fake = FakeBatchSystems(tmp_path, NODE)
    records, metrics = tmp_path / "records", tmp_path / "metrics"
    conf, base = write_config(
        "batch_systems = slurm, pbs, gridengine\n"
        "[machinefeatures]\nhs06 = 40\ngrace_secs = 600\n"
        f"[slurm]\nscontrol = {fake.bindir}/scontrol\n[pbs]\npbs_exec = {fake.pbs_exec}\n"
        f"[gridengine]\nqstat = {fake.bindir}/qstat\nqconf = {fake.bindir}/qconf\n"
        f"[publish]\nsync = yes\n[records]\ndir = {records}\nkeep_days = 30\n"
        f"[metrics]\noutput = {metrics}/mjf.prom\n")
    environment = {"MJF_CONFIG": str(conf), "PATH": "/usr/bin:/bin"}

    def mjf(*args):
        return subprocess.run([installed_command("mjf"), *args], capture_output=True,
                              text=True, timeout=120, env=environment)

    assert mjf("machine").returncode == 0
    (base / "machinefeatures/total_cpu").unlink()
    store = Store(str(base))
    for job, state in (("7", SLURM_JOB), ("8", SLURM_JOB),
                       ("9", {**SLURM_JOB, RUNNER_MARKER: ended_runner}),
                       ("12.pbs", {BACKEND_MARKER: "pbs"}), ("77", {BACKEND_MARKER: "gridengine"}),
                       ("x.1", {BACKEND_MARKER: "standalone", RUNNER_MARKER: ended_runner})):
        store.create_job(job, {"job_id": job, "jobstart_secs": str(int(time.time()) - 60)},
                         state=state)
    trash = base / f"jobs/.old-5.{DEAD_PID}.0123abcd"
    (trash / "jobfeatures").mkdir(parents=True)
    now = int(time.time())
    fake.answer(reservations=reservation(now + 7200), pbs_rstat=pbs_reservation(now + 3600),
                squeue="7\n", qstat=(FIXTURES / "gridengine-8.1.9/qstat-xml.txt").read_text(),
                pbs_vnodes=json.dumps({"nodes": {NODE: {"state": "free", "jobs": []}}}),
                slurm_node=f"NodeName={NODE} Arch=x86_64 Extra=(null) State=IDLE\n",
                slurm_node_after=f'NodeName={NODE} Arch=x86_64 Extra={{"hs06":40}} State=IDLE\n',
                pbs_node=json.dumps({"nodes": {NODE: {"resources_available": {}}}}),
                pbs_node_after=json.dumps({"nodes": {NODE: {"resources_available": {"hs06": 40}}}}),
                ge_host=f"hostname {NODE}\ncomplex_values NONE\n",
                ge_host_after=f"hostname {NODE}\ncomplex_values hs06=40\n")
    incoming = records / "incoming"
    incoming.mkdir(parents=True)
    incoming.chmod(0o1733)
    handed = incoming / f"{now - 60}-good.2.json"
    handed.write_text(json.dumps({"job_id": "good",
                                  "delivered": {"end_time": {"value": now - 60, "source": "x"}}}))
    os.chown(handed, 54321, 54321)
    (incoming / "junk").write_text("")
    old = now - 400 * 86400
    (records / record_store.day_name(old)).mkdir()
    (records / record_store.day_name(old) / f"{old}-1.json").write_text("{}")
    metrics.mkdir()
    (metrics / "mjf.prom").write_text("# the last pass's\n")
    before = tree_state(base, records, metrics)

    result = mjf("sync", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert tree_state(base, records, metrics) == before
    calls = fake.logged()
    assert [call for call in calls if call.startswith(MUTATING)] == []
    assert "squeue -h -w" in " ".join(calls) and "pbsnodes -v" in " ".join(calls)
    said = result.stdout
    for line in (f"would write {base}/machinefeatures/total_cpu = ",
                 f"would follow the batch system's drain: shutdowntime = {now + 3600}",
                 "PBS maintenance reservation M1",
                 "would remove job 8: Slurm no longer runs it on this node",
                 "would end job 9: the process it lived in has ended",
                 "would remove job 12.pbs: PBS no longer runs it on this node",
                 "would remove job 77: Grid Engine no longer runs it on this node",
                 "would end job x.1: its process has ended",
                 "Slurm: would run ", "PBS: would run ", "Grid Engine: would run ",
                 "would file the 1 job record(s) handed in",
                 f"would remove 1 file(s) of {incoming} that are not records handed in",
                 f"would remove 1 job record(s) older than 30 days from {records}",
                 f"would remove what job ends left in {base}/jobs: {trash.name}",
                 f"would write this node's metrics to {metrics}/mjf.prom"):
        assert line in said, (line, said)

    result = mjf("sync")  # not vacuous: the same pass does all of it
    assert result.returncode == 0, result.stderr
    calls = fake.logged()
    for command in ("scontrol update", "qmgr -c", "qconf -aattr"):
        assert any(call.startswith(command) for call in calls), (command, calls)
    assert (base / "machinefeatures/total_cpu").exists()
    assert (base / "machinefeatures/shutdowntime").read_text() == str(now + 3600)
    assert (base / "jobs/7/jobfeatures/shutdowntime_job").read_text() == str(now + 3600)
    assert os.listdir(base / "jobs") == ["7"]
    filed = sorted(path.name.split("-", 1)[1] for path in records.glob("*/*.json"))
    assert filed == ["9.json", "good~54321.json", "x.1.json"]  # the ended jobs' records too
    assert os.listdir(incoming) == [] and not list(records.glob(f"*/{old}-*"))
    assert "mjf_sync_failed_phases 0" in (metrics / "mjf.prom").read_text()
    fake.answer(reservations="", pbs_rstat="")
    assert mjf("sync").returncode == 0  # the drain withdrawn (other stores on this host)


# --- a failing phase is seen -----------------------------------------------------------------

def test_an_scontrol_that_cannot_reach_its_controller_fails_the_pass_and_its_metric(node):
    """The drains and the stale jobs could not be asked of Slurm: two failed phases, each
    one error line naming it; exit 1; mjf_sync_failed_phases says 2 (what the shipped
    MJFSyncFailing alert fires on)."""
    from tests.cli.test_mjf_metrics import parse_exposition, value

    metrics = node.base.parent / "mjf.prom"
    node.conf.write_text(node.conf.read_text() + f"[metrics]\noutput = {metrics}\n")
    node.store.create_job("8", {"job_id": "8"}, state=SLURM_JOB)
    for command in ("scontrol", "squeue"):
        write_script(node.bindir / command, "echo 'slurm_load_reservations error: Unable to "
                     "contact slurm controller (connect failure)' >&2\nexit 1")
    result = node.sync()
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if ": error: " in line]
    assert [line.split(": error: ", 1)[1].split(":")[0] for line in errors] == [
        "sync", "sync"], result.stderr
    assert "sync: drains failed: Slurm could not be asked" in errors[0]
    assert "sync: stale jobs failed: Slurm could not be asked" in errors[1]
    assert value(parse_exposition(metrics.read_text()), "mjf_sync_failed_phases") == 2
    assert os.listdir(node.base / "jobs") == ["8"]
    node.reservations("")
    node.squeue("8\n")
    assert node.sync().returncode == 0
    assert value(parse_exposition(metrics.read_text()), "mjf_sync_failed_phases") == 0


# --- what proves a job's end ---------------------------------------------------------------

@pytest.mark.parametrize("claimed", [None, "standalone"])
@pytest.mark.parametrize(("backend", "job_id"), [("slurm", "31"), ("gridengine", "14.2"),
                                                 ("lsf", "33")])
def test_a_runner_the_jobs_user_wrote_proves_nothing(tmp_path, write_config, ended_runner,
                                                     backend, job_id, claimed):
    """The user of a running job writes the pid of an ended process as its runner (and
    says it is a standalone job): sync removes nothing; the batch system that runs it
    still lists it (LSF is never asked: its jobs are left to their ends)."""
    require(os.geteuid() == 0, "needs root to give the job's state/ to its user")
    fake = FakeBatchSystems(tmp_path, NODE)
    conf, base = write_config(
        f"batch_systems = slurm, gridengine, lsf\n[slurm]\nscontrol = {fake.bindir}/scontrol\n"
        f"[gridengine]\nqstat = {fake.bindir}/qstat\n")
    fake.answer(reservations="", squeue="31\n",
                qstat=(FIXTURES / "gridengine-8.1.9/qstat-xml.txt").read_text())
    users_job(Store(str(base)), base, job_id, backend, ended_runner, claimed)
    result = subprocess.run([installed_command("mjf"), "sync"], capture_output=True,
                            text=True, timeout=60, env={"MJF_CONFIG": str(conf)})
    assert result.returncode == 0, result.stderr
    assert os.listdir(base / "jobs") == [job_id], result.stdout


def test_a_job_whose_user_owns_its_state_is_removed_when_no_batch_system_here_runs_it(
        node, ended_runner):
    """Its state/ proves nothing, not even which batch system made it: every one this node
    runs is asked, and the job goes when none lists it."""
    require(os.geteuid() == 0, "needs root to give the job's state/ to its user")
    node.conf.write_text(node.conf.read_text().replace("[mjf]\n",
                                                       "[mjf]\nbatch_systems = slurm\n"))
    users_job(node.store, node.base, "41", "slurm", ended_runner)
    users_job(node.store, node.base, "42", "slurm", ended_runner)
    node.squeue("41\n")
    result = node.sync()
    assert result.returncode == 0, result.stderr
    assert os.listdir(node.base / "jobs") == ["41"]
    assert "removed job 42: no batch system here runs it (Slurm asked; its state/ is its " \
        "user's)" in result.stdout


def test_a_runinjob_job_left_behind_is_ended_by_sync_with_the_record_its_epilog_writes(
        tmp_path, ended_runner):
    """Its extern slurmstepd has ended and its directory is in sight: sync ends it as
    root's Slurm hooks end such a job (lifecycle.end_jobs_left_behind, with the Epilog's
    ending), its record - the TaskEpilog's usage report included - the same."""
    from mjf_hooks import config as config_module
    from mjf_hooks import lifecycle
    from mjf_hooks.batch import slurm
    from mjf_hooks.hooks.slurm import _job_end
    from mjf_hooks.records.job import usage_report
    from tests.conftest import config_writer

    records = {}
    for how in ("sync", "epilog"):
        (tmp_path / how).mkdir()
        conf, base = config_writer(tmp_path / how)(
            f"batch_systems = slurm\n[slurm]\nscontrol = /bin/true\n"
            f"[records]\ndir = {tmp_path / how}/records\n")
        store = Store(str(base))
        store.create_job("9", {"job_id": "9", "allocated_cpu": "2",
                               "jobstart_secs": "1795400000"},
                         state={**SLURM_JOB, RUNNER_MARKER: ended_runner}, usage=True)
        store.write_usage_report("9", usage_report({"cpu_secs": (12.5, "cgroup")}))
        if how == "sync":
            result = subprocess.run([installed_command("mjf"), "sync"], capture_output=True,
                                    text=True, timeout=60, env={"MJF_CONFIG": str(conf)})
            assert result.returncode == 0, result.stderr
            assert "removed job 9: the process it lived in has ended" in result.stdout
        else:
            ending = _job_end({}, None, None)  # what the Prolog and Epilog pass
            assert lifecycle.end_jobs_left_behind(config_module.load(str(conf)), store,
                                                  LeveledLog(), ending) == ["9"]
        assert os.listdir(base / "jobs") == []
        (record,) = (tmp_path / how / "records").glob("*/*-9.json")
        records[how] = json.loads(record.read_text())
        for clock in ("end_time", "wall_secs", "consumption_rate"):  # each end's own
            del records[how]["delivered"][clock]
    assert records["sync"] == records["epilog"]
    assert records["sync"]["delivered"]["cpu_secs"] == {"value": 12.5,
                                                        "source": slurm.USAGE_SOURCE}
    assert records["sync"]["backend"] == "slurm"


def test_a_dry_run_follows_no_htcondor_drain_into_the_jobs_scratch(tmp_path, write_config,
                                                                    monkeypatch):
    """An HTCondor graceful drain (condor_status faked; its path is HTCondor's own), its
    job's directory in the job's scratch: a dry run says what it would set and leaves the
    machine and the scratch as they were; the pass without it sets both."""
    require(os.geteuid() == 0, "needs root to give the scratch directory to the job's user")
    from mjf_hooks import config as config_module
    from mjf_hooks import store_locations, sync
    from mjf_hooks.batch import htcondor
    from tests.conftest import JOB_USER

    calls, answer = tmp_path / "calls", tmp_path / "condor_status.out"
    completion = int(time.time()) + 7200
    answer.write_text(f"{NODE}.example.org, false, 0\n")
    condor_status = write_script(tmp_path / "bin/condor_status",
                                 f'echo "$*" >> {calls}\ncat {answer}')
    monkeypatch.setattr(htcondor, "CONDOR_STATUS", str(condor_status))
    monkeypatch.setattr(store_locations, "PRIVATE_PARENTS",  # this host's users' are not ours
                        (str(tmp_path / "tmp"), str(tmp_path / "run-user")))
    execute = tmp_path / "execute"
    conf, base = write_config(f"batch_systems = htcondor\n[machinefeatures]\ngrace_secs = 60\n"
                              f"[htcondor]\nexecute_dir = {execute}\n")
    scratch = execute / "dir_1234"
    scratch.mkdir(parents=True)
    job = Path(Store(str(scratch / ".mjf")).create_job("vm#1.0#17", {"job_id": "vm#1.0#17"}))
    for path in [scratch, *scratch.rglob("*")]:
        os.chown(path, JOB_USER, JOB_USER)
    config = config_module.load(str(conf))
    assert sync.sync(config, LeveledLog(), {}).failed == []  # all but the drain done
    answer.write_text(f"{NODE}.example.org, true, {completion}\n")
    before = tree_state(base, execute)
    done = sync.sync(config, LeveledLog(), {}, dry_run=True)
    assert done.failed == [] and tree_state(base, execute) == before
    assert done.done == [f"would follow the batch system's drain: shutdowntime = {completion} "
                         "from HTCondor graceful drain"]
    assert "-constraint" in calls.read_text()  # the query ran
    assert sync.sync(config, LeveledLog(), {}).failed == []
    assert (job / "shutdowntime_job").read_text() == str(completion)
    assert (base / "machinefeatures/shutdowntime").read_text() == str(completion)
