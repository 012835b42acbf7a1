"""Slurm's entry points: the Prolog, Epilog, TaskProlog (Python and sh) and TaskEpilog,
as recorded on Slurm 22.05 and 24.11; and the model of what Slurm's input means to them:
which variables name the job and the role, what a 24.11 Prolog writes, what scontrol
prints, what a TaskProlog makes of the job's cgroup."""

from __future__ import annotations

from mjf_hooks.hooks import slurm as slurm_hook
from tests.conftest import FIXTURES, fixture_text
from tests.corpus.entries import COMMON_CONFIG, RECORDS_SECTION, Entry, options, prepare, root
from tests.corpus.mutations import (
    DROPS,
    MAX_ID,
    MAX_JOB_ID,
    MIB,
    PATH,
    SETUP_FAILS,
    V1_MOUNTINFO,
    V1_UNLIMITED,
    V2_JOB,
    Case,
    EntryModel,
    cgroup_model,
    digits,
    encoded,
    file_mutations,
    value_mutations,
)
from tests.corpus.mutations import recorded_env as recorded_text_env


def recorded_env(relative: str) -> dict[str, str]:
    """A recorded environment (``NAME=value`` lines before any scontrol dump)."""
    return recorded_text_env(relative, "# scontrol show job")


SCONTROL_JOB = fixture_text("slurm-22.05/scontrol-show-job-o.txt").replace("JobId=2 ", "JobId=3 ")
SCONTROL_PARTITION = fixture_text("slurm-22.05/scontrol-show-partition-o.txt")

# Slurm 24.11 (slurm-24.11/README.md): job 9 (PrologFlags=Alloc,Contain) and job 14
# (RunInJob), each hook's /proc/self/cgroup as recorded, on cgroup v1 mounted as on the
# recorded host (host/mountinfo-v1-hybrid.txt: the same v1 layout). Where a hook runs inside
# the job (the TaskProlog; the Prolog with RunInJob) the job's limit files are there too.
# They were not recorded: they follow the 22.05 job's (slurm-22.05/job-cgroup-v1.txt: the
# job and step levels limited to the request, memsw = memory, the task level unlimited), for
# the recorded request (--mem=300M -c 2).
S24 = "slurm-24.11"
S24_MEMORY = 300 * MIB


def slurm_2411_tree(hook: str) -> dict[str, bytes]:
    """The fake /proc and cgroup tree (paths below D/root) of the recorded 24.11 ``hook``."""
    text = (FIXTURES / f"{S24}/{hook}.cgroup").read_bytes()
    tree = {"proc/self/cgroup": text, "proc/self/mountinfo": V1_MOUNTINFO}
    paths = dict(line.split(":", 2)[1:] for line in text.decode().splitlines())
    memory = paths["memory"].strip("/").split("/")
    levels = [index for index, part in enumerate(memory) if part.startswith("job_")]
    if levels:
        for depth in range(levels[0], len(memory)):
            limit = V1_UNLIMITED if memory[depth].startswith("task_") else S24_MEMORY
            directory = "sys/fs/cgroup/memory/" + "/".join(memory[:depth + 1])
            for name in ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes"):
                tree[f"{directory}/{name}"] = b"%d\n" % limit
        if paths.get("cpuset", "/") != "/":
            tree[f"sys/fs/cgroup/cpuset{paths['cpuset']}/cpuset.effective_cpus"] = b"0-1\n"
    return tree


# The recorded hook of each 24.11 entry point (its environment, slurm-24.11/HOOK.env, and
# its /proc/self/cgroup).
S24_HOOKS = {"slurm-24.11-prolog": "cgv1-prolog", "slurm-24.11-runinjob-prolog": "runinjob-prolog",
             "slurm-24.11-epilog": "cgv1-epilog", "slurm-24.11-taskprolog": "cgv1-taskprolog",
             "slurm-24.11-taskprolog-sh": "cgv1-taskprolog"}
S24_TREES = {entry: slurm_2411_tree(hook) for entry, hook in S24_HOOKS.items()}


# Each Slurm entry point's role, and the SLURM_SCRIPT_CONTEXT the Prolog and the Epilog take
# theirs from (the TaskProlog is named on its command line).
SLURM_ROLES = {"slurm-prolog": "prolog", "slurm-epilog": "epilog",
               "slurm-taskprolog": "taskprolog", "slurm-taskprolog-sh": "taskprolog",
               "slurm-24.11-prolog": "prolog", "slurm-24.11-runinjob-prolog": "prolog",
               "slurm-24.11-epilog": "epilog", "slurm-24.11-taskprolog": "taskprolog",
               "slurm-24.11-taskprolog-sh": "taskprolog", "slurm-taskepilog": "taskepilog"}
# The TaskEpilog is not named on its command line: it follows SLURM_SCRIPT_CONTEXT too.
_SLURM_ROLE_CONTEXTS = {"prolog": "prolog_slurmd", "epilog": "epilog_slurmd",
                        "taskepilog": "epilog_task"}
# The Prologs of Slurm >= 23.02 (SLURM_JOB_START_TIME, SLURM_JOB_END_TIME in their
# environment): what they write is modelled (slurm_prolog_keys).
TIMED_PROLOGS = ("slurm-24.11-prolog", "slurm-24.11-runinjob-prolog")


def slurm_environment_effect(entry: str, recorded: dict[str, str | None],
                             environ: dict[str, str | None], jobstatus: bool = False) -> str:
    """Set-up fails where the hook cannot tell which job it is for (docs/slurm.md: "a missing or
    non-numeric SLURM_JOB_ID writes nothing"), which role it plays (the Prolog and Epilog
    follow SLURM_SCRIPT_CONTEXT), or whose the job's directory is (the Prolog makes it the
    job's user's and group's, and its jobstatus/ the job's user's)."""
    def value(name):
        return environ.get(name) or ""

    role = SLURM_ROLES[entry]
    context = _SLURM_ROLE_CONTEXTS.get(role)
    if context and value("SLURM_SCRIPT_CONTEXT") != context:
        return SETUP_FAILS
    job = value("SLURM_JOB_ID") or value("SLURM_JOBID")
    if not digits(job, MAX_JOB_ID):
        return SETUP_FAILS
    # cgroup.conf constrains RAM, so the Prolog marks the job pending and gives its
    # directory to the job's user (and always to its group). One that runs inside the
    # job's cgroups (RunInJob) marks nothing pending: jobfeatures/ stays root's, and
    # only a jobstatus/ (where the site offers $JOBSTATUS) is the job's user's.
    owners = ("SLURM_JOB_GID",) if slurm_in_job(entry, job) and not jobstatus else (
        "SLURM_JOB_UID", "SLURM_JOB_GID")
    if role == "prolog" and not all(
            not value(name) or (digits(value(name)) and int(value(name)) <= MAX_ID)
            for name in owners):
        return SETUP_FAILS
    return DROPS


_RECORDED = object()  # the entry point's recorded /proc/self/cgroup


def slurm_in_job(entry: str, job_id: str, proc_cgroup=_RECORDED) -> bool:
    """Whether a Slurm Prolog runs inside job ``job_id``'s cgroups (docs/slurm.md, RunInJob: "a
    ``job_<id>`` level in its own memory or unified cgroup"), its /proc/self/cgroup the
    recorded one or ``proc_cgroup`` (a file as a case lays it out: bytes, None, DIRECTORY).
    False where no /proc/self/cgroup of the entry point's is faked (22.05's Prolog reads the
    host's own, which is no Slurm job's)."""
    if SLURM_ROLES.get(entry) != "prolog" or entry not in S24_TREES:
        return False
    data = S24_TREES[entry]["proc/self/cgroup"] if proc_cgroup is _RECORDED else proc_cgroup
    if not isinstance(data, bytes):
        return False
    text = data.decode("ascii", "replace").replace("\r\n", "\n").replace("\r", "\n")
    for line in text.split("\n"):
        number, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if ((number == "0" and not controllers) or "memory" in controllers.split(",")) \
                and f"job_{job_id}" in path.split("/"):
            return True
    return False


_MAX_VALUE = 2**63 - 1  # what a key file may hold (a 64-bit reader)
CLOCK = "the Prolog's clock"  # jobstart_secs: the time the Prolog ran
PRESENT = "present"  # a key written, with whatever valid value
# What the fake scontrol (SCONTROL_JOB) says: TimeLimit=00:05:00.
SCONTROL_WALL = 300
_START, _END = "SLURM_JOB_START_TIME", "SLURM_JOB_END_TIME"


class JobKeys:
    """What a Slurm >= 23.02 Prolog leaves in job ``job``'s directory (slurm_prolog_keys):
    ``keys``, {key: its content, PRESENT, CLOCK, or None where it must be absent} (a key not
    named is not modelled); ``pending``, whether the job is marked pending (None: not
    modelled); ``scontrol``, whether the Prolog asks scontrol (None: not modelled); ``lost``,
    the keys it leaves out of what its input should have given, each of which a warning must
    name (DROPS: "the affected keys are left out (a warning each)")."""

    __slots__ = ("job", "keys", "lost", "pending", "scontrol")

    def __init__(self, job, keys, lost, pending, scontrol):
        self.job, self.keys, self.lost = job, keys, lost
        self.pending, self.scontrol = pending, scontrol


# The plausible UNIX times (2000..2100, as spec.py's EARLIEST_TIME/LATEST_TIME): outside
# them a time is a unit mistake, not a time.
_EARLIEST, _LATEST = 946684800, 4102444800


def _epoch(text: str) -> int | None:
    """A UNIX time as Slurm gives one: plain digits of a plausible time (2000..2100)."""
    return int(text) if digits(text) and _EARLIEST <= int(text) <= _LATEST else None


def slurm_prolog_keys(entry: str, recorded: dict[str, str | None],
                      environ: dict[str, str | None], proc_cgroup=_RECORDED) -> JobKeys | None:
    """The keys a Slurm >= 23.02 Prolog writes, for an environment ``environ`` (``recorded``,
    changed) it sets up with (docs/slurm.md: the key table, the versions table, RunInJob):

    * it asks scontrol only where SLURM_JOB_START_TIME or SLURM_JOB_END_TIME is missing
      (unset or empty, as before 23.02); scontrol then gives the start, the time limit and the
      memory request (the fake's job: SCONTROL_JOB);
    * jobstart_secs: SLURM_JOB_START_TIME where it is a UNIX time (plain digits, 2000..2100), else
      scontrol's StartTime, else the Prolog's clock;
    * wall_limit_secs: END - START where both are UNIX times and the end is after the start,
      else scontrol's TimeLimit; else it is lost (a warning names it) - and with it only
      cpu_limit_secs (wall_limit_secs x allocated_cpu, itself left out above 2**63 - 1): the
      rest is written;
    * max_rss_bytes: no 24.11 Prolog's environment has the memory request: scontrol's, or the
      job's cgroup limit where the Prolog runs inside it (RunInJob);
    * the job is pending unless the Prolog runs inside its cgroup: its memory request is
      unknown, or (scontrol's known) cgroup.conf beside $SLURM_CONF constrains RAM.

    None for an entry point whose keys are not modelled."""
    if entry not in TIMED_PROLOGS:
        return None

    def value(name):
        return environ.get(name) or ""

    job = value("SLURM_JOB_ID") or value("SLURM_JOBID")
    in_job = slurm_in_job(entry, job, proc_cgroup)
    scontrol = not (value(_START) and value(_END))
    start, end = _epoch(value(_START)), _epoch(value(_END))
    keys = {"job_id": job, "jobstart_secs": str(start) if start else PRESENT if scontrol
            else CLOCK}
    wall = end - start if start and end and end > start else SCONTROL_WALL if scontrol \
        else None
    if wall is not None and wall > _MAX_VALUE:
        wall = None
    keys["wall_limit_secs"] = keys["wall_limit_secs_lrms"] = None if wall is None else str(wall)
    cpus = recorded.get("SLURM_JOB_CPUS_PER_NODE") or ""
    if digits(cpus) and environ.get("SLURM_JOB_CPUS_PER_NODE") == cpus:  # one node
        cpu_limit = None if wall is None or wall * int(cpus) > _MAX_VALUE else wall * int(cpus)
        keys["cpu_limit_secs"] = keys["cpu_limit_secs_lrms"] = \
            None if cpu_limit is None else str(cpu_limit)
    if proc_cgroup is _RECORDED or not in_job:  # a cgroup it is in, broken: not modelled
        keys["max_rss_bytes"] = keys["mem_limit_MB"] = PRESENT if scontrol or in_job else None
    if in_job or not scontrol:
        pending = not in_job
    else:  # cgroup.conf decides: the case directory's, or one elsewhere (the host's)
        pending = True if environ.get("SLURM_CONF") == recorded.get("SLURM_CONF") else None
    return JobKeys(job, keys, () if wall is not None else ("wall_limit_secs",), pending,
                   scontrol)


# What the cgroup model (cgroup_job_keys) knows of the Slurm 22.05 TaskProlog's job 3: the
# Prolog wrote scontrol's MinMemoryNode=200M (the task's SLURM_MEM_PER_NODE=300 is more), and
# the corpus's config caps max_swap_bytes at 1 GiB.
SLURM_TASK_MEMORY = 200 * MIB
CONFIG_SWAP = 1 << 30


def cgroup_job_keys(entry: str, files: dict) -> JobKeys | None:
    """The limits the Slurm 22.05 TaskProlog completes job 3 with (docs/slurm.md's key table):
    max_rss_bytes the least of the Prolog's (SLURM_TASK_MEMORY) and the cgroup's memory limit,
    max_swap_bytes the least of the config's (CONFIG_SWAP) and the cgroup's swap limit. A lost
    cgroup limit only lets the others decide: no key is left out. Nothing pending after it.
    (The other entry points' keys are not modelled here: they declare none.)"""
    memory, swap = cgroup_model(files)
    keys = {"max_rss_bytes": str(min(SLURM_TASK_MEMORY, memory if memory is not None
                                     else SLURM_TASK_MEMORY)),
            "max_swap_bytes": str(min(CONFIG_SWAP, swap if swap is not None else CONFIG_SWAP)),
            "mem_limit_MB": PRESENT}
    return JobKeys("3", keys, (), False, None)


def recorded_cgroup_cases(entry: str, environ: dict[str, str]) -> list[Case]:
    """The recorded /proc/self/cgroup of a 24.11 entry point (S24_TREES) broken, and (where
    the hook runs inside the job) the job level's limit files. For a TaskProlog these only
    give limits; for a RunInJob Prolog /proc/self/cgroup says whether it runs inside the job,
    and what it writes follows (slurm_prolog_keys). Written below D/root, where the probes
    read the fake tree."""
    tree = S24_TREES[entry]
    original = tree["proc/self/cgroup"]
    variants = [*file_mutations(original),
                ("another-job", original.replace(b"/job_", b"/job_7")),
                ("no-memory-line", b"".join(line for line in original.splitlines(True)
                                            if b":memory:" not in line))]
    cases = [Case(entry, f"recorded-cgroup:{label}", ("cgroup",),
                  files={"root/proc/self/cgroup": data},
                  job_keys=slurm_prolog_keys(entry, environ, environ, data))
             for label, data in variants]
    for path in sorted(tree):
        directory, name = path.rsplit("/", 1)
        if not directory.rsplit("/", 1)[-1].startswith("job_"):
            continue
        for label, text in value_mutations(tree[path].decode().strip()):
            cases.append(Case(entry, f"recorded-cgroup:job-{name}:{label}", (name,),
                              files={f"root/{path}": encoded(text + "\n")},
                              job_keys=slurm_prolog_keys(entry, environ, environ)))
    return cases


# -- what the generic model takes from here (backends/__init__.py hands it over) -----------

CONFIG_KEYS = {("slurm", "scontrol"): PATH, ("slurm", "scratch_dir"): PATH}
# scontrol show job (the job's record), or show partition (its partition's, scontrol's
# second record: "scontrol-partition" in Case.outputs).
COMMANDS = {"scontrol": lambda argv: ("scontrol", SCONTROL_JOB) if argv[2] == "job"
            else ("scontrol-partition", SCONTROL_PARTITION)}
ALSO_NAMED = {"SLURM_NODELIST": ("SLURM_JOB_CPUS_PER_NODE",),
              "SLURM_JOB_NODELIST": ("SLURM_JOB_CPUS_PER_NODE",),
              "SLURM_JOBID": ("SLURM_JOB_ID",), "SLURM_JOB_ID": ("SLURM_JOBID",)}
ENV_FILE_CULPRITS = ("SLURM_",)
# What every Slurm entry point's model shares: the variables that name its job and role,
# what a 24.11 Prolog writes.
SLURM = {"set_up": slurm_environment_effect, "job_keys": slurm_prolog_keys}
# The pure-sh TaskPrologs (run only as installed commands, test_corpus.SH_ENTRIES): they
# export what the Prolog made, and exit 0 whatever happens (a failing TaskProlog cancels
# the task).
MODELS = [EntryModel(name, "completes", always_zero=True, **SLURM)
          for name in ("slurm-taskprolog-sh", "slurm-24.11-taskprolog-sh")]


SLURM_CONFIG = COMMON_CONFIG + "[slurm]\nscontrol = @D@/bin/scontrol\nscratch_dir = @D@/scratch\n"

SLURM_PROLOG_ENV = {**recorded_env("slurm-22.05/prolog-sbatch.env"),
                    "SLURM_CONF": "@D@/etc/slurm.conf"}
SLURM_2302_ENV = {**SLURM_PROLOG_ENV, "SLURM_JOB_START_TIME": "1795319470",
                  "SLURM_JOB_END_TIME": "1795323070"}
SLURM_MULTI_NODE_ENV = {**SLURM_PROLOG_ENV, "SLURM_JOB_CPUS_PER_NODE": "4(x2),2",
                        "SLURM_NODELIST": "vm[01-02],gpu7", "SLURMD_NODENAME": "vm02"}
SLURM_EPILOG_ENV = {**recorded_env("slurm-22.05/epilog.env"), "SLURM_CONF": "@D@/etc/slurm.conf"}
SLURM_TASK_ENV = {**recorded_env("slurm-22.05/taskprolog-batchstep.env"),
                  "SLURM_CONF": "@D@/etc/slurm.conf"}
# The TaskEpilog of the same task: Slurm gives it the TaskProlog's environment, its
# SLURM_SCRIPT_CONTEXT epilog_task.
SLURM_TASK_EPILOG_ENV = {**SLURM_TASK_ENV, "SLURM_SCRIPT_CONTEXT": "epilog_task"}
# What job 3's cgroup (v2, CGROUP_TREE) counted when its TaskEpilog ran: 1.5 s of CPU,
# a peak of 100 MiB - not recorded (the recorded hosts gave no TaskEpilog), the files the
# kernel keeps (cpu.stat's usage_usec, memory.peak).
CPU_STAT = b"usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n"
USAGE_TREE = {f"{V2_JOB}/cpu.stat": CPU_STAT, f"{V2_JOB}/memory.peak": b"104857600\n"}
USAGE_REPORT = "cpu_secs 1.5\npeak_memory_bytes 104857600\n"


def slurm_2411_env(entry):
    """A recorded Slurm 24.11 environment, SLURM_CONF moved into the case directory as the
    22.05 ones' (the recorded /etc/slurm/slurm.conf is not this host's). The job's uid and
    gid (4711) stay as recorded: the hooks use them only as numbers (the Prolog, as root,
    gives the job's directory to them), no user of that id need exist."""
    return {**recorded_env(f"slurm-24.11/{S24_HOOKS[entry]}.env"),
            "SLURM_CONF": "@D@/etc/slurm.conf"}


S24_PROLOG_ENV = slurm_2411_env("slurm-24.11-prolog")
S24_RUNINJOB_ENV = slurm_2411_env("slurm-24.11-runinjob-prolog")
S24_EPILOG_ENV = slurm_2411_env("slurm-24.11-epilog")
S24_TASK_ENV = slurm_2411_env("slurm-24.11-taskprolog")
# 24.11 gives the Prolog SLURM_JOB_NODELIST beside SLURM_NODELIST (22.05 only the latter).
S24_MULTI_NODE_ENV = {**S24_PROLOG_ENV, "SLURM_JOB_CPUS_PER_NODE": "4(x2),2",
                      "SLURM_JOB_NODELIST": "vm[01-02],gpu7", "SLURM_NODELIST": "vm[01-02],gpu7",
                      "SLURMD_NODENAME": "vm02", "SLURM_JOB_NUM_NODES": "3"}


def slurm(role=None):
    def call(sandbox, case, environ):
        argv = options(sandbox, case) + ([role] if role else [])
        return sandbox.run(lambda: slurm_hook.main(argv), environ, case.outputs)
    return call


def slurm_2411(role=None):
    """As slurm, the hook's own /proc/self/cgroup read from the fake tree too (the 24.11
    recordings have it: the Prolog asks it whether it runs inside the job's cgroups)."""
    call = slurm(role)

    def with_tree(sandbox, case, environ):
        sandbox.monkeypatch.setattr(slurm_hook, "read_text", sandbox.read_text)
        return call(sandbox, case, environ)
    return with_tree


def prepare_two_slurm_jobs(sandbox):
    """Jobs 3 and 33, each after its Prolog; job 3's task ended (its TaskEpilog, which
    reports what the job used where records are kept, and does nothing otherwise)."""
    prepare(slurm("prolog"), SLURM_PROLOG_ENV)(sandbox)
    prepare(slurm("prolog"), {**SLURM_PROLOG_ENV, "SLURM_JOB_ID": "33",
                              "SLURM_JOBID": "33"})(sandbox)
    prepare(slurm(), SLURM_TASK_EPILOG_ENV)(sandbox)


def prepare_slurm_2411(entry, jobs):
    """The 24.11 Prolog first, unbroken, for job 9 (and ``jobs``), in its own recorded
    /proc/self/cgroup (not in the job's cgroups); then the entry's tree again."""
    def prepare_jobs(sandbox):
        sandbox.write_files(root(S24_TREES["slurm-24.11-prolog"]))
        for job in ("9", *jobs):
            prepare(slurm_2411(), {**S24_PROLOG_ENV, "SLURM_JOB_ID": job,
                                   "SLURM_JOBID": job})(sandbox)
        sandbox.write_files(root(S24_TREES[entry]))
    return prepare_jobs


ENTRIES = [
    Entry("slurm-prolog", SLURM_PROLOG_ENV, SLURM_CONFIG, slurm(),
          command=("mjf-slurm", []), store_role="creates", **SLURM),
    Entry("slurm-epilog", SLURM_EPILOG_ENV, SLURM_CONFIG, slurm(),
          prepare=prepare_two_slurm_jobs, command=("mjf-slurm", []), tree=USAGE_TREE,
          store_role="removes", writes_records=True, **SLURM),
    # Where records are kept (always, here): the job's usage/ made by its Prolog, where it
    # writes only its report.
    Entry("slurm-taskepilog", SLURM_TASK_EPILOG_ENV, SLURM_CONFIG + RECORDS_SECTION, slurm(),
          prepare=prepare(slurm("prolog"), SLURM_PROLOG_ENV), command=("mjf-slurm", []),
          tree=USAGE_TREE, real_proc=False, store_role="reports", **SLURM),
    Entry("slurm-taskprolog", SLURM_TASK_ENV, SLURM_CONFIG, slurm("taskprolog"),
          prepare=prepare(slurm("prolog"), SLURM_PROLOG_ENV),
          command=("mjf-slurm", ["taskprolog"]), store_role="completes",
          cgroup_keys=cgroup_job_keys, **SLURM),
    Entry("slurm-24.11-prolog", S24_PROLOG_ENV, SLURM_CONFIG, slurm_2411(),
          tree=S24_TREES["slurm-24.11-prolog"], command=("mjf-slurm", []),
          store_role="creates", **SLURM),
    Entry("slurm-24.11-runinjob-prolog", S24_RUNINJOB_ENV, SLURM_CONFIG, slurm_2411(),
          tree=S24_TREES["slurm-24.11-runinjob-prolog"], command=("mjf-slurm", []),
          real_proc=False, store_role="creates", **SLURM),
    Entry("slurm-24.11-epilog", S24_EPILOG_ENV, SLURM_CONFIG, slurm_2411(),
          tree=S24_TREES["slurm-24.11-epilog"],
          prepare=prepare_slurm_2411("slurm-24.11-epilog", ("33",)), command=("mjf-slurm", []),
          store_role="removes", writes_records=True, **SLURM),
    Entry("slurm-24.11-taskprolog", S24_TASK_ENV, SLURM_CONFIG, slurm_2411("taskprolog"),
          tree=S24_TREES["slurm-24.11-taskprolog"],
          prepare=prepare_slurm_2411("slurm-24.11-taskprolog", ()),
          command=("mjf-slurm", ["taskprolog"]), store_role="completes", **SLURM),
]
