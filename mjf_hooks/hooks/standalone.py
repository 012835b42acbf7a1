"""Standalone mode: ``mjf run -- CMD``, a job of this machine without a batch system.

It sets up machine and job features, runs CMD as a child with
``MACHINEFEATURES``/``JOBFEATURES`` set, forwards signals to it, removes the
job directory when it ends, and exits as CMD did.
"""

from __future__ import annotations

import os
import sys
import time

from .. import lifecycle, store_locations
from ..options import UsageError, positive_int
from ..probe import cpu, process
from ..signals import signal
from ..store import STANDALONE, Store
from .frame import HookContext

# Signals a job runner is expected to pass on to its job.
FORWARDED_SIGNALS = (
    signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM,
    signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM,
)
# si_code values <= 0 mean another process sent the signal (SI_USER, SI_QUEUE, SI_TKILL);
# positive ones are the kernel's: a terminal's Ctrl-C already reached the whole
# foreground process group, the child included, and must not be delivered twice.
_SENT_BY_A_PROCESS = 0


def run(context: HookContext) -> int:
    """Body of ``mjf run``: set up, run the command, clean up, exit as it did."""
    if not context.args:
        raise UsageError("no command given: mjf run [options] -- CMD [ARGS...]")
    options = _job_options(context.options)
    environ = dict(context.environ)
    setup = context.fail_safe(_set_up, context, options)
    if setup is not None:
        store, job_id, exports = setup
        environ.update(exports)
    else:
        store = job_id = None
        context.log.warning("running the command without MJF")
    if context.dry_run:
        return 0
    child = _Child()
    try:
        status = _spawn_and_wait(context.args, environ, child)
    finally:
        if store is not None:
            context.fail_safe(lifecycle.end_job, context.config, store, context.log, job_id,
                              False, child.ending())
    return _exit_like(status)


class _Child:
    """What ``mjf run`` measured of its command: from spawn to exit on its own clock,
    and the kernel's account of it (wait4's rusage: the command and every descendant
    it waited for)."""

    __slots__ = ("ended", "rusage", "started", "wall_secs")

    def __init__(self) -> None:
        self.started = self.ended = self.wall_secs = None
        self.rusage = None

    def ending(self) -> lifecycle.JobEnd:
        delivered: dict[str, tuple] = {}
        if self.ended is not None:
            delivered["end_time"] = (self.ended, "the clock when the command exited")
            delivered["wall_secs"] = (self.wall_secs, "mjf run's clock, spawn to exit")
        if self.rusage is not None:
            delivered["cpu_secs"] = (self.rusage.ru_utime + self.rusage.ru_stime,
                                     "wait4 rusage: user + system time")
            delivered["peak_memory_bytes"] = (
                self.rusage.ru_maxrss * 1024,
                "wait4 rusage: the largest resident set of the command or a descendant")
        import pwd

        try:
            user = pwd.getpwuid(os.geteuid()).pw_name
        except KeyError:
            user = str(os.geteuid())
        return lifecycle.JobEnd(STANDALONE, delivered, user=user)


_OPTION_KEYS = (("cpus", "allocated_cpu"), ("wall_limit", "wall_limit_secs"),
                ("memory", "max_rss_bytes"), ("job_id", "job_id"))


def _job_options(options: dict) -> dict:
    parsed: dict = {}
    for name, key in _OPTION_KEYS[:3]:
        if name in options:
            parsed[key] = positive_int(name.replace("_", "-"), str(options[name]))
    if "job_id" in options:
        parsed["job_id"] = str(options["job_id"])
    return parsed


def _set_up(context: HookContext, options: dict) -> tuple[Store, str, dict[str, str]]:
    config, log = context.config, context.log
    site = store_locations.store_for(config)
    store = store_locations.user_job_store(config, context.environ, log, context.dry_run)
    now = int(time.time())
    job_id = options.get("job_id") or f"{os.uname().nodename}.{os.getpid()}.{now}"
    source = {key: f"mjf run --{name.replace('_', '-')}" for name, key in _OPTION_KEYS}
    batch = {
        "job_id": (job_id, source["job_id"] if "job_id" in options else "generated"),
        "jobstart_secs": (now, "time of `mjf run`"),
        "allocated_cpu": (options["allocated_cpu"], source["allocated_cpu"])
        if "allocated_cpu" in options
        else (cpu.affinity_cpus(), "CPU affinity of the process"),
    }
    for key in ("wall_limit_secs", "max_rss_bytes"):
        if key in options:
            batch[key] = (options[key], source[key])
    # EGI's $TMPDIR policy: where TMPDIR is set, it is the job's scratch space.
    scratch_dir = context.environ.get("TMPDIR") or os.getcwd()
    job = lifecycle.JobStart(STANDALONE, batch, cgroup_pid="self", scratch_dir=scratch_dir,
                             runner=process.identity(os.getpid()))
    return store, job_id, lifecycle.set_up_job(config, store, log, job, site,
                                               dry_run=context.dry_run)


def _spawn_and_wait(argv: list[str], environ: dict[str, str], child: _Child) -> int:
    """Run the command, forward signals to it, return its wait status; what it used
    goes into ``child``."""
    watched = set(FORWARDED_SIGNALS) | {signal.SIGCHLD}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    try:
        try:
            child.started = time.monotonic()
            pid = os.posix_spawnp(
                argv[0], argv, environ,
                setsigmask=previous,
                # Python ignores SIGPIPE and SIGXFSZ; the job must get the defaults back.
                setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
            )
        except OSError as error:
            sys.stderr.write(f"mjf run: {argv[0]}: {error.strerror}\n")
            return (127 if isinstance(error, FileNotFoundError) else 126) << 8
        while True:
            info = signal.sigwaitinfo(watched)
            if info.si_signo == signal.SIGCHLD:
                waited, status, rusage = os.wait4(pid, os.WNOHANG)
                if waited == pid:
                    child.wall_secs = time.monotonic() - child.started
                    child.ended, child.rusage = time.time(), rusage
                    return status
            elif info.si_code <= _SENT_BY_A_PROCESS or info.si_signo not in (
                signal.SIGINT, signal.SIGQUIT, signal.SIGHUP
            ):
                try:
                    os.kill(pid, info.si_signo)
                except ProcessLookupError:
                    pass
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _exit_like(status: int) -> int:
    """Exit with the command's status; if a signal killed it, die of the same signal, so
    that a calling shell sees what it would have seen without us (137 for SIGKILL)."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        sys.stdout.flush()
        sys.stderr.flush()
        if number not in (signal.SIGKILL, signal.SIGSTOP):  # their action cannot be changed
            signal.signal(number, signal.SIG_DFL)
        if _dumps_core(number):
            # The job's core, if any, is the job's: ours would only overwrite it.
            import resource

            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [number])
        os.kill(os.getpid(), number)
        return 128 + number  # a signal whose default is to be ignored
    return os.waitstatus_to_exitcode(status)


_CORE_SIGNALS = ("SIGQUIT", "SIGILL", "SIGTRAP", "SIGABRT", "SIGBUS", "SIGFPE", "SIGSEGV",
                 "SIGXCPU", "SIGXFSZ", "SIGSYS")


def _dumps_core(number: int) -> bool:
    return any(getattr(signal, name, None) == number for name in _CORE_SIGNALS)
