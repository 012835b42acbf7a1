"""A stand-in for PBS's ``pbs`` module (which imports only inside a mom), as much of it
as contrib/pbs/mjf_hook.py uses, playing the recorded job 5200.vm (2 CPUs, 300 MB,
10 minutes). ``$MJF_BENCH_EVENT`` says which event this run is, ``$MJF_BENCH_USER`` whose
job it is, ``$MJF_BENCH_BASE`` the base_dir whose job directory execjob_begin named in
the job's variables."""

import os
import sys

EXECJOB_BEGIN, EXECJOB_LAUNCH, EXECJOB_END, LOG_WARNING = 64, 2048, 256, 4
_USER, _BASE = os.environ["MJF_BENCH_USER"], os.environ["MJF_BENCH_BASE"]


class _Queue:
    name = "workq"


class _Job:
    id, euser, egroup, Job_Name, Account_Name = "5200.vm", _USER, _USER, "a", None
    exec_vnode, queue = "(vm:ncpus=2:mem=307200kb)", _Queue()

    def __init__(self):
        self.Resource_List = dict(mem="300mb", walltime="00:10:00", ncpus="2", place="free")
        self.Variable_List = dict()
        self.resources_used = dict(cput="00:00:03", mem="20480kb", walltime="00:00:05")


class _Event:
    type = dict(begin=EXECJOB_BEGIN, launch=EXECJOB_LAUNCH,
                end=EXECJOB_END)[os.environ["MJF_BENCH_EVENT"]]

    def __init__(self):
        self.job, self.vnode_list = _Job(), dict(vm=None)
        # At launch, what execjob_begin put into the job's Variable_List.
        self.env = dict(MACHINEFEATURES=_BASE + "/machinefeatures",
                        JOBFEATURES=_BASE + "/jobs/5200.vm/jobfeatures")

    def accept(self):
        sys.exit(0)

    def reject(self, message):
        sys.exit(1)


_EVENT = _Event()


def event():
    return _EVENT


def logmsg(level, message):
    sys.stderr.write(message + "\n")


def get_local_nodename():
    return "vm"
