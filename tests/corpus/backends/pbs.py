"""PBS's entry points: the execjob hooks (through the adapter's stdin), the classic
prologue and epilogue (OpenPBS's and Torque's argv) and the profile.d export lines."""

from __future__ import annotations

from mjf_hooks.hooks import pbs as pbs_hook
from tests.corpus.entries import COMMON_CONFIG, Entry, prepare
from tests.corpus.mutations import PBS_GROUP, PBS_QSTAT_F, PBS_USER, PBS_WORDS, Case, pbs_hook_input

# PBS: qstat and PBS_EXEC in the case directory (never the host's /etc/pbs.conf), TMPDIR's
# root the scratch, and a pbs_cgroups prefix no host has (the hooks' cgroup is not faked).
PBS_CONFIG = COMMON_CONFIG + (
    "[pbs]\nqstat = @D@/bin/qstat\npbs_exec = @D@/pbs\ntmpdir = @D@/scratch\n"
    "cgroup_prefix = /mjf-corpus-no-such-cgroup\n")

# PBS (tests/fixtures/pbs-23.06): the hook adapter's stdin of job a (20.vm) for each execjob
# role, and of array job 21[1].vm (another job on the host, which an end leaves alone); the
# classic prologue's argv of job 8 (OpenPBS: id, user, group; and as Torque gives it, with
# the job's name, resource list, queue and account), its epilogue's (recorded).
PBS_JOB, PBS_OTHER_JOB, PBS_CLASSIC_JOB = "20.vm", "21[1].vm", "8.vm"
PBS_STDIN = {"begin": "pbs/begin.txt", "launch": "pbs/launch.txt", "end": "pbs/end.txt",
             "begin-other": "pbs/begin-other.txt"}
PBS_FILES = {PBS_STDIN["begin"]: pbs_hook_input("begin-a"),
             PBS_STDIN["launch"]: pbs_hook_input("launch-a"),
             PBS_STDIN["end"]: pbs_hook_input("end-a"),
             PBS_STDIN["begin-other"]: pbs_hook_input("begin-arr-1"),
             "bin/pbs-qstat.out": PBS_QSTAT_F.encode()}
PBS_PROLOGUE_WORDS = [PBS_CLASSIC_JOB, PBS_USER, PBS_GROUP]
PBS_TORQUE_WORDS = [PBS_CLASSIC_JOB, PBS_USER, PBS_GROUP, "jobp",
                    "mem=300mb,neednodes=1:ppn=2,nodes=1:ppn=2,walltime=00:10:00", "workq",
                    "null"]
PBS_EPILOGUE_WORDS = [PBS_CLASSIC_JOB, PBS_USER, PBS_GROUP, "jobp", "556441",
                      "mem=300mb,ncpus=2,place=free,walltime=00:10:00",
                      "cpupercent=0,cput=00:00:02,mem=1024kb,ncpus=2,vmem=0kb,walltime=00:00:01",
                      "workq", "null", "0"]
PBS_PROFILE_ENV = {"PBS_JOBID": PBS_JOB}


def pbs_words(case: Case, words) -> list[str]:
    """A PBS role's words after the role: the case's (PBS_WORDS), else the entry point's."""
    return list(case.argv[1:]) if case.argv[:1] == (PBS_WORDS,) else list(words)


def pbs(role, words=(), stdin=None):
    """mjf-pbs ROLE [WORDS] (the hook adapter's stdin ``stdin``, where the role reads one),
    /proc/self/mountinfo read from the fake tree (where pbs_cgroups would have put the job)."""
    def call(sandbox, case, environ):
        sandbox.monkeypatch.setattr(pbs_hook, "read_text", sandbox.read_text)
        argv = ["--config", sandbox.path("mjf.conf")]
        if case.via_env_file:
            argv += ["--env-file", sandbox.path("job.env")]
        argv += [role, *pbs_words(case, words)]
        return sandbox.run(lambda: pbs_hook.main(argv), environ, case.outputs, stdin=stdin)
    return call


def prepare_two_pbs_jobs(sandbox):
    """Job a (20.vm) and array job 21[1].vm, each after its execjob_begin."""
    prepare(pbs("begin", stdin=PBS_STDIN["begin"]), {})(sandbox)
    prepare(pbs("begin", stdin=PBS_STDIN["begin-other"]), {})(sandbox)


def prepare_pbs_classic(sandbox):
    """Job 8 after its (OpenPBS) prologue, job a (20.vm) after its execjob_begin."""
    prepare(pbs("prologue", PBS_PROLOGUE_WORDS), {})(sandbox)
    prepare(pbs("begin", stdin=PBS_STDIN["begin"]), {})(sandbox)


ENTRIES = [
    Entry("pbs-begin", {}, PBS_CONFIG, pbs("begin", stdin=PBS_STDIN["begin"]),
          command=("mjf-pbs", ["begin"]), stdin=PBS_STDIN["begin"]),
    Entry("pbs-launch", {}, PBS_CONFIG, pbs("launch", stdin=PBS_STDIN["launch"]),
          prepare=prepare(pbs("begin", stdin=PBS_STDIN["begin"]), {}),
          command=("mjf-pbs", ["launch"]), stdin=PBS_STDIN["launch"]),
    Entry("pbs-end", {}, PBS_CONFIG, pbs("end", stdin=PBS_STDIN["end"]),
          prepare=prepare_two_pbs_jobs, command=("mjf-pbs", ["end"]), stdin=PBS_STDIN["end"]),
    Entry("pbs-prologue", {}, PBS_CONFIG, pbs("prologue", PBS_PROLOGUE_WORDS),
          command=("mjf-pbs", ["prologue", *PBS_PROLOGUE_WORDS])),
    Entry("pbs-prologue-torque", {}, PBS_CONFIG, pbs("prologue", PBS_TORQUE_WORDS),
          command=("mjf-pbs", ["prologue", *PBS_TORQUE_WORDS])),
    Entry("pbs-epilogue", {}, PBS_CONFIG, pbs("epilogue", PBS_EPILOGUE_WORDS),
          prepare=prepare_pbs_classic, command=("mjf-pbs", ["epilogue", *PBS_EPILOGUE_WORDS])),
    Entry("pbs-profile", PBS_PROFILE_ENV, PBS_CONFIG, pbs("profile"),
          prepare=prepare(pbs("begin", stdin=PBS_STDIN["begin"]), {}),
          command=("mjf-pbs", ["profile"])),
]
