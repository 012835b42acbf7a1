"""What every entry point of the bad-input corpus shares: :class:`Entry`, the config all
start from, and the helpers each batch system's file (``backends/<name>.py``) builds its
entry points with."""

from __future__ import annotations

from tests.corpus.mutations import Case, EntryModel

COMMON_CONFIG = """\
[mjf]
base_dir = @D@/base
log = stderr
command_timeout = 0.5
legacy_keys = yes
[machinefeatures]
hs06 = 2400
grace_secs = 3600
benchmark = hepscore23
[jobfeatures]
max_swap_bytes = 1073741824
"""
# Where the site keeps job records (docs/records.md): the records variants add it.
RECORDS_SECTION = "[records]\ndir = @D@/records\nformat = sss, apel\nsite = CORPUS-SITE\n"

JOB_ARGV = ["/bin/echo", "a b"]


class Entry(EntryModel):
    """One entry point: its recorded environment, config, and how it is called; and
    (``model``: :class:`~tests.corpus.mutations.EntryModel`'s keywords) what decides its
    outcome."""

    def __init__(self, name, environ, config, call, job_argv=None, prepare=None,
                 command=None, job_file=None, tree=None, real_proc=True, stdin=None, **model):
        super().__init__(name, **model)
        self.environ = environ
        self.config = config
        self.call = call  # (sandbox, argv, environ, outputs) -> Outcome
        self.job_argv = job_argv  # what a job runner execs (None: not a job runner)
        self.job_file = job_file  # the file it execs, where argv[0] does not name it
        self.prepare = prepare  # runs first, unbroken (e.g. the Prolog before an Epilog)
        self.command = command  # (installed command, argv) for the subprocess sample
        # Its own fake /proc and cgroup files (below D/root), over the default tree.
        self.tree = tree or {}
        # Whether the installed command, reading the host's real /proc, runs as in-process
        # (False: what it does depends on the fake /proc/self/cgroup).
        self.real_proc = real_proc
        # The file of the case directory that is its standard input (None: none read).
        self.stdin = stdin


def options(sandbox, case):
    """The options every entry point is called with: the case's config (and env file)."""
    argv = ["--config", sandbox.path("mjf.conf")]
    if case.via_env_file:
        argv += ["--env-file", sandbox.path("job.env")]
    return argv + list(case.argv)


def prepare(call, environ):
    """Run another role first, unbroken (the Prolog before an Epilog, ...)."""
    def prepare(sandbox):
        outcome = call(sandbox, Case("prepare", "", ()), environ)
        assert outcome.status == 0 and not outcome.stderr_lines, outcome.stderr_lines
    return prepare


def root(tree):
    return {f"root/{path}": data for path, data in tree.items()}
