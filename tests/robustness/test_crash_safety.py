"""kill -9 at every point where a hook changes the filesystem.

Each scenario runs a real entry point (Slurm Prolog, Epilog, TaskProlog
completion; Grid Engine prolog, epilog, and starter - completing a prolog's job,
or writing one itself; PBS execjob_begin and execjob_end, a classic (Torque)
prologue and epilogue; ``mjf drain``, ``mjf machine``) in a child process whose
``os`` calls that change the filesystem (mkdir, open for writing, write, rename,
unlink, rmdir, chmod, chown) are counted; the child SIGKILLs itself just
before the N-th one, for N = 1, 2, ... until a run gets through. After every
kill, what a reader can see must be whole (each visible job complete, each
value valid); then the next run of a hook repairs it: the same state as an
uninterrupted run, and no hidden leftovers.
"""

from __future__ import annotations

import grp
import os
import pwd
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from mjf_hooks import spec
from tests.conftest import ConfigPath, fixture_text, printing, write_script

# The child: counts the filesystem-changing os calls, dies at the N-th.
INJECTOR = r'''
import os, signal, sys
limit, entry, argv = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
state = {"count": 0}
# SIGKILL, or (MJF_INJECT_SIGNAL) one a hook may survive: the injection is then said on
# stderr, so that a run that got through can be told from one that saw no signal.
injected = getattr(signal, os.environ.get("MJF_INJECT_SIGNAL", "SIGKILL"))

def point():
    state["count"] += 1
    if state["count"] == limit:
        if injected != signal.SIGKILL:
            sys.stderr.write(f"injected {injected} at point {limit}\n")
            sys.stderr.flush()
        os.kill(os.getpid(), injected)

def counted(real):
    def call(*args, **kwargs):
        point()
        return real(*args, **kwargs)
    return call

for name in ("mkdir", "rename", "replace", "unlink", "rmdir", "write", "fchmod", "chmod",
             "fchown", "chown", "symlink"):
    setattr(os, name, counted(getattr(os, name)))
real_open = os.open
WRITING = os.O_WRONLY | os.O_RDWR | os.O_CREAT

def open_(path, flags, *args, **kwargs):
    if flags & WRITING:
        point()
    return real_open(path, flags, *args, **kwargs)

os.open = open_
# The job's attributes on stdin (what PBS's hook adapter hands mjf-pbs): --stdin-file=PATH.
if argv and argv[0].startswith("--stdin-file="):
    sys.stdin = open(argv.pop(0).split("=", 1)[1])
module, function = entry.split(":")
main = getattr(__import__(module, fromlist=[function]), function)
sys.exit(main(argv))
'''
MAX_POINTS = 400
SLURM = "mjf_hooks.hooks.slurm:main"
MJF = "mjf_hooks.cli.mjf:main"
# What a killed hook left, and what a job end had no time for, `mjf sync` removes.
SYNC = [MJF, "sync"]
SCONTROL_OUTPUT = fixture_text("slurm-22.05/scontrol-show-job-o.txt")
GRIDENGINE = "mjf_hooks.hooks.gridengine:main"
GE = "gridengine-8.1.9"
GE_JOB = f"{GE}/pe-job"  # qsub -pe smp 2 -l h_rt=1:00:00,h_vmem=1G,h_cpu=1800
HOST = os.uname().nodename
# A root prolog gives the job's directory to the job's user, who must exist here.
USER = pwd.getpwuid(os.getuid()).pw_name
# What `mjf sync` asks Grid Engine (qstat -u '*' -q '*@host*' -xml): jobs 1 and 2 run.
PBS = "mjf_hooks.hooks.pbs:main"
# The job's user and group in the PBS attributes (pbsuser1 where they were recorded).
GROUP = grp.getgrgid(pwd.getpwnam(USER).pw_gid).gr_name
QSTAT_XML = "<?xml version='1.0'?>\n<job_info><queue_info>{}</queue_info></job_info>\n".format(
    "".join(f'<job_list state="running"><JB_job_number>{job}</JB_job_number></job_list>'
            for job in (1, 2)))


class Node:
    """A base_dir, a config and recorded Slurm environments for the scenarios."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.base = root / "base"
        scontrol = write_script(root / "scontrol", printing(SCONTROL_OUTPUT))
        self.config = ConfigPath(root / "mjf.conf")  # replaced atomically
        self.config.write_text(
            f"[mjf]\nbase_dir = {self.base}\nlog = stderr\ncommand_timeout = 2\n"
            f"[machinefeatures]\nhs06_per_cpu = 10\ngrace_secs = 600\n"
            f"[slurm]\nscontrol = {scontrol}\n")

        # A cluster that constrains memory: the job's values stay pending until its
        # first task completes them from inside the job's cgroup.
        (root / "slurm.conf").write_text("ClusterName=crash\n")
        (root / "cgroup.conf").write_text("ConstrainRAMSpace=yes\n")

        # Grid Engine: the recorded job's spool directory (its host this one), a qstat
        # printing what the cell printed, the job's scratch and script, the user's runtime dir.
        # Each job's spool directory where execd keeps it (active_jobs/<job>.1: a root
        # prolog or epilog reads no other), its TMPDIR the scratch here.
        config = fixture_text(f"{GE_JOB}/spool-config").replace(
            "\nhost=vm\n", f"\nhost={HOST}\n").replace(
            "\ntmpdir=/tmp/13.1.all.q\n", f"\ntmpdir={root / 'scratch'}\n")
        for job_id in ("1", "2"):
            spool = self.spool_dir(job_id)
            spool.mkdir(parents=True)
            (spool / "config").write_text(config.replace(
                "/var/spool/gridengine/execd/localhost/active_jobs/13.1", str(spool)))
            (spool / "pe_hostfile").write_text(f"{HOST} 2 all.q@{HOST} UNDEFINED\n")
        # A lower memory limit than the prolog saw, as the job's own process may find
        # (a memory-limited cgroup): completing the prolog's values then changes them.
        self.lower_spool = root / "spool-lower"
        self.lower_spool.mkdir()
        (self.lower_spool / "config").write_text(config.replace("\nh_vmem=1G\n",
                                                                "\nh_vmem=256M\n"))
        qstat = write_script(root / "qstat", (
            f"case \"$1\" in\n"
            f"-j) {printing(fixture_text(f'{GE_JOB}/qstat-j.txt'))}\n;;\n"
            f"-F) {printing(fixture_text(f'{GE}/qstat-F-queue-instance.txt'))}\n;;\n"
            f"-u) {printing(QSTAT_XML)}\n;;\n*) exit 2 ;;\nesac"))
        self.config.write_text(self.config.read_text() + f"[gridengine]\nqstat = {qstat}\n")
        # PBS: PBS_EXEC here (never the host's /etc/pbs.conf), its pbsnodes saying jobs 1.vm
        # and 2.vm run on this host (what `mjf sync` asks), a pbs_cgroups prefix no host has.
        short = HOST.split(".")[0]
        write_script(root / "pbs/bin/pbsnodes", printing(
            f'{{"nodes": {{"{short}": {{"state": "job-busy", '
            '"jobs": ["1.vm/0", "1.vm/1", "2.vm/0", "2.vm/1"]}}}\n'))
        # and its pbs_rstat no reservation (`mjf sync` asks it for drains: a query that
        # fails would fail the pass).
        write_script(root / "pbs/bin/pbs_rstat", "exit 0")
        self.config.write_text(self.config.read_text()
                               + f"[pbs]\npbs_exec = {root / 'pbs'}\ntmpdir = {root / 'scratch'}\n"
                               "cgroup_prefix = /mjf-crash-no-such-cgroup\nquery_qstat = no\n")
        (root / "scratch").mkdir()
        (root / "runtime").mkdir(mode=0o700)
        self.job_script = root / "job"  # as execd spools it: run by the queue's shell
        self.job_script.write_text("exit 0\n")

    def env_file(self, fixture: str, job_id: str, **changes: str) -> Path:
        lines = fixture_text(f"slurm-22.05/{fixture}").split("# scontrol")[0].splitlines()
        environ = dict(line.split("=", 1) for line in lines if "=" in line and line[0] != "#")
        environ["SLURM_JOB_ID"] = job_id
        environ["SLURM_CONF"] = str(self.root / "slurm.conf")
        environ.update(changes)
        path = self.root / f"{fixture}.{job_id}"
        path.write_text("".join(f"{name}={value}\n" for name, value in environ.items()))
        return path

    def slurm(self, role: str, job_id: str, **changes: str) -> list[str]:
        fixture = {"prolog": "prolog-sbatch.env", "epilog": "epilog.env",
                   "taskprolog": "taskprolog-batchstep.env"}[role]
        return [SLURM, role, "--env-file", str(self.env_file(fixture, job_id, **changes))]

    def spool_dir(self, job_id: str) -> Path:
        return self.root / "execd" / "active_jobs" / f"{job_id}.1"

    def gridengine(self, role: str, job_id: str, spool: Path | None = None) -> list[str]:
        """``mjf-gridengine ROLE`` for job ``job_id`` in the recorded job's environment of
        that hook (its spool directory ``spool``); the starter with the job's script, as
        the shepherd gives it."""
        text = fixture_text(f"{GE_JOB}/{role}.env")
        environ = dict(line.split("=", 1) for line in text.splitlines())
        own = self.spool_dir(job_id)
        environ.update({"JOB_ID": job_id, "SGE_JOB_SPOOL_DIR": str(spool or own),
                        "PE_HOSTFILE": str(own / "pe_hostfile"), "USER": USER,
                        "LOGNAME": USER, "HOME": str(self.root),
                        "XDG_RUNTIME_DIR": str(self.root / "runtime")})
        for name in ("TMP", "TMPDIR"):
            if name in environ:
                environ[name] = str(self.root / "scratch")
        path = self.root / f"gridengine-{role}.{job_id}"
        path.write_text("".join(f"{name}={value}\n" for name, value in environ.items()))
        # --config: a prolog or epilog takes no $MJF_CONFIG as root (the job's environment).
        return [GRIDENGINE, "--config", str(self.config), "--env-file", str(path), role] + (
            [str(self.job_script), "a"] if role == "starter" else [])

    def pbs(self, role: str, job_id: str) -> list[str]:
        """``mjf-pbs begin|end`` for job ``job_id``.vm, its attributes on stdin as the hook
        adapter recorded them (job a's), its user ours."""
        fixture = {"begin": "begin-a", "end": "end-a"}[role]
        text = fixture_text(f"pbs-23.06/hook-input/{fixture}.txt").replace(
            "id=20.vm\n", f"id={job_id}.vm\n").replace(
            "euser=pbsuser1\n", f"euser={USER}\n").replace("egroup=pbsuser1\n", f"egroup={GROUP}\n")
        path = self.root / f"pbs-{role}.{job_id}"
        path.write_text(text)
        return [PBS, f"--stdin-file={path}", role]

    def pbs_classic(self, role: str, job_id: str) -> list[str]:
        """A Torque ``mom_priv/prologue`` or ``epilogue`` of job ``job_id``.vm (its argv)."""
        words = [f"{job_id}.vm", USER, GROUP, "jobp"]
        if role == "prologue":
            words += ["mem=300mb,nodes=1:ppn=2,walltime=00:10:00", "workq", "null"]
        else:
            words += ["556441", "mem=300mb,ncpus=2,walltime=00:10:00",
                      "cput=00:00:02,mem=1024kb,walltime=00:00:05", "workq", "null", "0"]
        return [PBS, role, *words]

    def pending(self, job_id: str) -> bool:
        return (self.base / "jobs" / job_id / "state/pending").exists()

    def keep_records(self) -> Node:
        """Records kept (``[records] dir``), and an squeue saying that only job 1 runs, so
        that `mjf sync` can tell a job whose end never ran."""
        self.config.write_text(self.config.read_text() + f"[records]\ndir = {self.records}\n")
        write_script(self.root / "squeue", "echo 1")  # beside [slurm] scontrol, where sync looks
        return self

    def running_only(self, batch_system: str) -> Node:
        """The node runs ``batch_system`` alone (``[mjf] batch_systems``), as a site's does:
        `mjf sync` asks no other of the fakes here (Grid Engine's qstat lists jobs 1 and 2,
        which keeps a job whose state/ is its user's while any batch system here lists it)."""
        text = self.config.read_text()
        mjf = f"[mjf]\nbatch_systems = {batch_system}\n"
        self.config.write_text(text.replace("[mjf]\n", mjf, 1))
        return self

    @property
    def records(self) -> Path:
        return self.root / "records"

    def recorded(self, job_id: str) -> list[str]:
        """The records filed for ``job_id``."""
        return sorted(path.name for path in self.records.glob(f"*/*-{job_id}.json")
                      if path.parent.name != "incoming")

    def run(self, command: list[str], kill_at: int = 0,
            signal_name: str = "SIGKILL") -> subprocess.CompletedProcess:
        environment = {"PATH": "/usr/bin:/bin", "MJF_CONFIG": str(self.config),
                       "MJF_INJECT_SIGNAL": signal_name}
        return subprocess.run([sys.executable, "-c", INJECTOR, str(kill_at), *command],
                              capture_output=True, text=True, timeout=60, env=environment)

    def jobs(self) -> dict[str, dict[str, str]]:
        """What a reader sees: every visible job's keys."""
        jobs_dir = self.base / "jobs"
        if not jobs_dir.exists():
            return {}
        return {entry.name: keys(entry / "jobfeatures")
                for entry in jobs_dir.iterdir() if not entry.name.startswith(".")}

    def machine(self) -> dict[str, str]:
        return keys(self.base / "machinefeatures")

    def hidden_leftovers(self) -> list[str]:
        return sorted(str(path.relative_to(self.base)) for path in self.base.rglob(".*"))


def keys(directory: Path) -> dict[str, str]:
    """The visible key files of a directory, each checked to be a whole, valid value."""
    if not directory.is_dir():
        return {}
    found = {}
    for path in directory.iterdir():
        if path.name.startswith("."):
            continue  # temporary names: readers never look at them
        content = path.read_text()
        spec.parse_value(spec.typed_like(path.name), content)  # raises on a partial value
        found[path.name] = content
    return found


def stable(jobs: dict[str, dict[str, str]],
           timed: tuple[str, ...] = ()) -> dict[str, dict[str, str]]:
    """Job values without those that depend on when a hook ran (and ``timed``: Grid
    Engine gives no start time, its jobstart_secs is when the hook ran)."""
    return {job: {key: value for key, value in values.items()
                  if key not in ("shutdowntime_job", *timed)}
            for job, values in jobs.items()}


GE_TIMED = ("jobstart_secs",)
PBS_TIMED = ("jobstart_secs",)  # the time the hook ran


class Hooks:
    """A batch system's hooks at a job's start and end, as the scenarios drive them, and
    the closures every scenario of a killed start or end hands to crash_everywhere:
    job 1 (uninterrupted) and job 2 (the one killed), with the values of ``reference``."""

    def __init__(self, start, end, reference: dict, timed: tuple[str, ...] = (),
                 suffix: str = "") -> None:
        self.start, self.end, self.reference, self.timed = start, end, reference, timed
        self.one, self.two = f"1{suffix}", f"2{suffix}"

    def started(self, *jobs: str):
        """``prepare``: the jobs' start hooks ran, uninterrupted."""
        def prepare(node):
            for job in jobs:
                node.run(self.start(node, job))
        return prepare

    def job_1_kept_job_2_whole_or_gone(self, two: str = ""):
        """``check_crashed``: job 1 as it was, job 2 absent or whole (its values those of
        ``reference[two]``, by default of job 2)."""
        reference = self.reference

        def check_crashed(node, kill_at):
            seen = stable(node.jobs(), self.timed)
            assert seen.get(self.one) == reference[self.one], f"job 1 touched (kill at {kill_at})"
            assert seen.get(self.two) in (None, reference[two or self.two]), \
                f"job 2 partial (kill at {kill_at})"
        return check_crashed

    def only_job_1_left(self, machine: bool = False, also=None):
        """``check_repaired``: job 1 as it was and nothing else, nothing hidden left (with
        ``machine``, the machine features there; ``also(node, kill_at)``: more checks)."""
        def check_repaired(node, kill_at):
            assert stable(node.jobs(), self.timed) == {self.one: self.reference[self.one]}, \
                kill_at
            if also:
                also(node, kill_at)
            assert node.hidden_leftovers() == [], kill_at
            if machine:
                assert node.machine().keys() >= {"total_cpu", "hs06"}
        return check_repaired

    def start_killed_anywhere(self, nodes, also=None) -> int:
        """Job 2's start hook killed at each point, job 1 running; then, as the batch
        system does, its start again, later its end, and the timer's `mjf sync`."""
        return crash_everywhere(
            nodes, self.started("1"), lambda node: self.start(node, "2"),
            self.job_1_kept_job_2_whole_or_gone(),
            lambda node: [self.start(node, "2"), self.end(node, "2"), SYNC],
            self.only_job_1_left(machine=True, also=also))

    def end_killed_anywhere(self, nodes) -> int:
        """Job 2's end hook killed at each point, both jobs running; then its end again
        (the batch system's retry) and the timer's `mjf sync`."""
        return crash_everywhere(
            nodes, self.started("1", "2"), lambda node: self.end(node, "2"),
            self.job_1_kept_job_2_whole_or_gone(),
            lambda node: [self.end(node, "2"), SYNC], self.only_job_1_left())


def slurm_hooks(reference: dict) -> Hooks:
    return Hooks(lambda node, job: node.slurm("prolog", job),
                 lambda node, job: node.slurm("epilog", job), reference)


def gridengine_hooks(reference: dict) -> Hooks:
    return Hooks(lambda node, job: node.gridengine("prolog", job),
                 lambda node, job: node.gridengine("epilog", job), reference, GE_TIMED)


def pbs_hooks(kind: str, reference: dict) -> Hooks:
    """execjob_begin and execjob_end (``begin``), or a Torque prologue and epilogue."""
    if kind == "begin":
        return Hooks(lambda node, job: node.pbs("begin", job),
                     lambda node, job: node.pbs("end", job), reference, PBS_TIMED, ".vm")
    return Hooks(lambda node, job: node.pbs_classic("prologue", job),
                 lambda node, job: node.pbs_classic("epilogue", job), reference, PBS_TIMED,
                 ".vm")


def crash_everywhere(node_factory, prepare, command, check_crashed, repair, check_repaired):
    """Kill ``command`` before each of its filesystem changes in turn; return how many."""
    for kill_at in range(1, MAX_POINTS):
        node = node_factory()
        prepare(node)
        result = node.run(command(node), kill_at)
        if result.returncode != -signal.SIGKILL:
            assert result.returncode == 0, result.stderr
            assert "internal error" not in result.stderr
            shown = " ".join(part for part in command(node) if not part.startswith(("/", "-")))
            print(f"{shown}: killed at each of {kill_at - 1} points")  # shown with -s
            return kill_at - 1
        check_crashed(node, kill_at)
        for step in repair(node):
            assert node.run(step).returncode == 0
        check_repaired(node, kill_at)
    pytest.fail(f"{command} still killed after {MAX_POINTS} injection points")


@pytest.fixture
def nodes(tmp_path):
    counter = iter(range(10**6))

    def make() -> Node:
        root = tmp_path / f"n{next(counter)}"
        root.mkdir()
        return Node(root)

    return make


@pytest.fixture
def reference(nodes):
    """Job 1 and job 2 as uninterrupted Prologs write them."""
    node = nodes()
    for job in ("1", "2"):
        assert node.run(node.slurm("prolog", job)).returncode == 0
    return stable(node.jobs())


def test_a_prolog_killed_anywhere_leaves_whole_jobs_and_the_next_hooks_repair(nodes, reference):
    # Slurm runs the Prolog again for the requeued job, later the Epilog.
    assert slurm_hooks(reference).start_killed_anywhere(nodes) >= 10


def test_an_epilog_killed_anywhere_is_finished_by_the_next(nodes, reference):
    assert slurm_hooks(reference).end_killed_anywhere(nodes) >= 2


def test_an_epilog_keeping_records_hides_the_job_first_and_a_kill_leaves_what_sync_removes(
        nodes, reference):
    """The first act of a job's end is the rename of its directory out of sight; only then
    is the record written (from the renamed tree) and the tree removed. So a kill at any
    point leaves the job whole and in sight (killed before it did anything: as if the
    Epilog never ran) or nothing in sight, and `mjf sync` alone - no second Epilog -
    removes what is left."""
    hooks = slurm_hooks(reference)

    def prepare(node):
        hooks.started("1", "2")(node.keep_records().running_only("slurm"))

    def check_crashed(node, kill_at):
        seen = stable(node.jobs())
        assert seen.get("1") == reference["1"], kill_at
        if kill_at == 1:  # the rename itself: nothing done yet
            assert seen.get("2") == reference["2"]
        else:
            assert "2" not in seen, f"job 2 in sight after the end's first act (kill at {kill_at})"

    points = crash_everywhere(nodes, prepare, lambda node: hooks.end(node, "2"),
                              check_crashed, lambda node: [SYNC], hooks.only_job_1_left())
    assert points >= 5  # the rename, the record's files, the removal


def test_a_sigterm_anywhere_in_an_epilog_is_ignored_and_it_finishes(nodes, reference):
    """With PrologFlags=RunInJob on cgroup v2 the Epilog runs in the extern step's cgroup,
    where Slurm's SIGTERM to the step (sent again while the job ends) reaches it: at any
    point it must finish - the job out of sight, its record written, nothing hidden left,
    exit 0 (a failed Epilog drains the node)."""
    for point in range(1, MAX_POINTS):
        node = nodes().keep_records()
        for job in ("1", "2"):
            node.run(node.slurm("prolog", job))
        result = node.run(node.slurm("epilog", "2"), point, "SIGTERM")
        assert result.returncode == 0, (point, result.returncode, result.stderr)
        assert stable(node.jobs()) == {"1": reference["1"]}, point
        assert node.hidden_leftovers() == [], point
        assert len(node.recorded("2")) == 1, point
        if "injected" not in result.stderr:
            break  # the Epilog made fewer changes: every point had its signal
    assert point > 5


def test_a_drain_killed_anywhere_never_tears_a_value_and_running_it_again_completes(
        nodes, reference):
    drain = [MJF, "drain", "--in", "2h"]

    def prepare(node):
        for job in ("1", "2", "3"):
            node.run(node.slurm("prolog", job))

    def check_crashed(node, kill_at):
        jobs = node.jobs()
        assert sorted(jobs) == ["1", "2", "3"], kill_at
        for values in jobs.values():  # each job: the old value (none) or the whole new one
            assert values.get("shutdowntime_job", "1") != "", kill_at

    def check_repaired(node, kill_at):
        shutdown = int(node.machine()["shutdowntime"])
        for job, values in node.jobs().items():
            assert int(values["shutdowntime_job"]) <= shutdown, (job, kill_at)
        assert node.hidden_leftovers() == [], kill_at

    points = crash_everywhere(nodes, prepare, lambda node: drain, check_crashed,
                              lambda node: [drain], check_repaired)
    assert points >= 4


def test_a_task_completing_a_pending_job_killed_anywhere_is_finished_by_the_next(nodes):
    def prepare(node):
        node.run(node.slurm("prolog", "2"))
        # Pending until the first task completes the values inside the job.
        assert (node.base / "jobs/2/state/pending").exists()

    def check_crashed(node, kill_at):
        assert "2" in node.jobs(), kill_at  # keys() validated every visible value

    def check_repaired(node, kill_at):
        assert not (node.base / "jobs/2/state/pending").exists(), kill_at
        assert node.jobs()["2"]["max_rss_bytes"] == str(100 * 2**20), kill_at
        assert node.hidden_leftovers() == [], kill_at

    # The task's request (100 MiB) is below what the Prolog wrote (200 MiB): it completes.
    def task(node):
        return node.slurm("taskprolog", "2", SLURM_MEM_PER_NODE="100")

    points = crash_everywhere(nodes, prepare, task, check_crashed, lambda node: [task(node)],
                              check_repaired)
    assert points >= 3


def test_machine_features_killed_anywhere_are_whole_and_the_next_run_cleans_up(nodes):
    def check_crashed(node, kill_at):
        node.machine()  # every visible value whole

    def check_repaired(node, kill_at):
        assert node.machine().keys() >= {"total_cpu", "hs06", "grace_secs"}, kill_at
        assert node.hidden_leftovers() == [], kill_at

    points = crash_everywhere(nodes, lambda node: None, lambda node: [MJF, "machine"],
                              check_crashed, lambda node: [[MJF, "machine"]], check_repaired)
    assert points >= 5


# -- Grid Engine: the prolog (root, outside the job, values pending), the starter (the job's
# process: it completes them, or writes them itself without a prolog), the epilog.


@pytest.fixture
def gridengine_reference(nodes):
    """Jobs 1 and 2 as uninterrupted prologs write them (pending); job 2 as an
    uninterrupted starter then completes it, finding a lower memory limit than the prolog
    did; and job 2 as a starter without a prolog writes it."""
    node = nodes()
    for job in ("1", "2"):
        assert node.run(node.gridengine("prolog", job)).returncode == 0
    reference = stable(node.jobs(), GE_TIMED)
    result = node.run(node.gridengine("starter", "2", node.lower_spool))
    assert result.returncode == 0, result.stderr
    assert node.pending("1") and not node.pending("2")
    reference["2-completed"] = stable(node.jobs(), GE_TIMED)["2"]
    assert reference["2-completed"] != reference["2"]  # completing writes values
    alone = nodes()
    assert alone.run(alone.gridengine("starter", "2")).returncode == 0
    reference["2-started"] = stable(alone.jobs(), GE_TIMED)["2"]
    return reference


def test_a_gridengine_prolog_killed_anywhere_leaves_whole_jobs_and_the_next_hooks_repair(
        nodes, gridengine_reference):
    def still_pending(node, kill_at):
        assert node.pending("1"), kill_at

    # Grid Engine runs the prolog again for the rescheduled job, later the epilog.
    hooks = gridengine_hooks(gridengine_reference)
    assert hooks.start_killed_anywhere(nodes, also=still_pending) >= 10


def test_a_gridengine_epilog_killed_anywhere_is_finished_by_the_next(
        nodes, gridengine_reference):
    assert gridengine_hooks(gridengine_reference).end_killed_anywhere(nodes) >= 2


def test_a_gridengine_starter_completing_a_pending_job_killed_anywhere_is_finished_by_the_next(
        nodes, gridengine_reference):
    reference = gridengine_reference
    hooks = gridengine_hooks(reference)

    def prepare(node):
        hooks.started("1", "2")(node)
        # Pending until the starter, the job's own process, completes the values.
        assert node.pending("2")

    def check_crashed(node, kill_at):
        seen = stable(node.jobs(), GE_TIMED)  # keys() validated every visible value
        assert seen.get("1") == reference["1"], kill_at
        # Each value the prolog's or the completed one (the keys are written one by one).
        before, after = reference["2"], reference["2-completed"]
        assert seen["2"].keys() <= before.keys() | after.keys(), kill_at
        for key, value in seen["2"].items():
            assert value in (before.get(key), after.get(key)), (key, kill_at)

    def check_repaired(node, kill_at):
        assert not node.pending("2") and node.pending("1"), kill_at
        assert stable(node.jobs(), GE_TIMED) == {
            "1": reference["1"], "2": reference["2-completed"]}, kill_at
        assert node.hidden_leftovers() == [], kill_at

    def starter(node):
        return node.gridengine("starter", "2", node.lower_spool)

    # The job, rescheduled, is started again (the prolog's values still pending, or not);
    # the timer runs `mjf sync` (job 2 still runs).
    points = crash_everywhere(nodes, prepare, starter, check_crashed,
                              lambda node: [starter(node), SYNC], check_repaired)
    assert points >= 3


def test_a_gridengine_starter_without_a_prolog_killed_anywhere_leaves_whole_jobs(
        nodes, gridengine_reference):
    reference = gridengine_reference
    hooks = gridengine_hooks(reference)

    def check_repaired(node, kill_at):
        assert stable(node.jobs(), GE_TIMED) == {
            "1": reference["1"], "2": reference["2-started"]}, kill_at
        assert not node.pending("2"), kill_at
        assert node.hidden_leftovers() == [], kill_at
        assert node.machine().keys() >= {"total_cpu", "hs06"}

    points = crash_everywhere(
        nodes, hooks.started("1"), lambda node: node.gridengine("starter", "2"),
        hooks.job_1_kept_job_2_whole_or_gone("2-started"),
        # The job, rescheduled, starts again; the timer runs `mjf sync` (job 2 still runs).
        lambda node: [node.gridengine("starter", "2"), SYNC], check_repaired)
    assert points >= 10


# -- PBS: execjob_begin (root, before the job: writes its directory from the attributes the
# hook adapter hands over on stdin), execjob_end (removes it); a classic Torque prologue and
# epilogue (the job in argv) do the same.

@pytest.fixture
def pbs_reference(nodes):
    """Jobs 1.vm and 2.vm as uninterrupted execjob_begin hooks write them, and as
    uninterrupted Torque prologues do."""
    reference = {}
    for name in ("begin", "prologue"):
        node = nodes()
        for job in ("1", "2"):
            result = node.run(pbs_hooks(name, reference).start(node, job))
            assert result.returncode == 0 and not result.stderr, result.stderr
        reference[name] = stable(node.jobs(), PBS_TIMED)
        assert set(reference[name]) == {"1.vm", "2.vm"}
    return reference


@pytest.mark.parametrize("kind", ["begin", "prologue"])
def test_a_pbs_begin_killed_anywhere_leaves_whole_jobs_and_the_next_hooks_repair(
        nodes, pbs_reference, kind):
    # PBS requeues a job whose execjob_begin failed and runs it again, later its end
    # (pbsnodes: both jobs still run).
    assert pbs_hooks(kind, pbs_reference[kind]).start_killed_anywhere(nodes) >= 10


@pytest.mark.parametrize("kind", ["end", "epilogue"])
def test_a_pbs_end_killed_anywhere_is_finished_by_the_next(nodes, pbs_reference, kind):
    started = "begin" if kind == "end" else "prologue"
    assert pbs_hooks(started, pbs_reference[started]).end_killed_anywhere(nodes) >= 2
