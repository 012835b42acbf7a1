"""mjf-hooks: Machine/Job Features for batch systems (docs/design.md).

A command started as the packages start it (``python3 -IS``, bin/*) is a short process,
most often a hook on a job's start or end, and starts the way such a process should
(docs/performance.md):

- it finds this package's own modules with :class:`_OwnModules`: a hook imports some
  twenty of them, and Python's general search costs each a quarter again of its loading;
- the cyclic garbage collector stays off (importing those modules would otherwise run it
  again and again over every object made so far), and what is left at the end is frozen,
  so that the interpreter's shutdown does not walk it all once more. Nothing of ours
  needs either: every file is closed where it is written (``with``, or a descriptor
  closed explicitly), so no data waits for a collection;
- it ends at once once its work is done (:func:`run_command`), without the interpreter
  tearing down every module's objects one by one.

What each saves, in the Slurm Prolog's instructions as a ratio to a bare start's
(callgrind, a job of the same id already there; the benchmark's start-up devices table,
docs/performance.md): 1.075 with all three, 1.47 with none; undoing one at a time, the
search 1.18, the collector 1.15, the teardown 1.22 - and the collector and the teardown
together 1.42, as a teardown with the collector on walks every object.
tests/unit/test_own_modules.py and tests/cli/test_command_start.py notice any of them
undone.

An interactive ``mjf`` subcommand, which may run long, keeps Python's defaults for all of
it (:func:`interactive_defaults`).
"""

import sys

__version__ = "0.1.0"


class _OwnModules:
    """A finder for ``mjf_hooks.*`` alone: the compiled file Python itself wrote beside the
    source, taken where Python would take it (its magic number, timestamp-checked against
    the source's mtime and size) without searching; in an interpreter running optimized
    (-O, -OO: PBS starts its hooks -OO), the ``.opt-N`` one that Python reads there. Anything
    else - no compiled file, a stale or hash-checked one, another interpreter - returns
    None, and Python's own import system does what it always does (compiles, writes the
    file, raises)."""

    def __init__(self, root: str) -> None:
        self.root = root  # the directory mjf_hooks/ is in
        self._external = sys.modules["_frozen_importlib_external"]
        self._spec = sys.modules["_frozen_importlib"].ModuleSpec
        optimize = sys.flags.optimize
        # As importlib's cache_from_source names them.
        self._tag = sys.implementation.cache_tag + (f".opt-{optimize}" if optimize else "")

    def find_spec(self, name, path=None, target=None):
        if not name.startswith("mjf_hooks."):
            return None
        relative = name.replace(".", "/")
        folder, _, leaf = relative.rpartition("/")
        # A package before a module of the same name, as Python's own search goes.
        for source, cached, package in (
                (f"{self.root}/{relative}/__init__.py",
                 f"{self.root}/{relative}/__pycache__/__init__.{self._tag}.pyc", True),
                (f"{self.root}/{relative}.py",
                 f"{self.root}/{folder}/__pycache__/{leaf}.{self._tag}.pyc", False)):
            try:
                info = self._external._path_stat(source)
                with self._external._io.open_code(cached) as handle:
                    data = handle.read()
            except OSError:
                if package:
                    continue
                return None
            header = (self._external.MAGIC_NUMBER + b"\0\0\0\0"
                      + (int(info.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
                      + (info.st_size & 0xFFFFFFFF).to_bytes(4, "little"))
            if data[:16] != header:
                return None
            spec = self._spec(name, self, origin=source, is_package=package)
            spec.has_location = True
            spec.cached = cached
            spec.loader_state = data
            if package:
                spec.submodule_search_locations = [source.rpartition("/")[0]]
            return spec
        return None

    def create_module(self, spec):
        return None  # the default module

    def exec_module(self, module) -> None:
        data, module.__spec__.loader_state = module.__spec__.loader_state, None
        # The code Python compiled from our own source, as its own loader runs it.
        exec(self._external.marshal.loads(memoryview(data)[16:]), module.__dict__)  # noqa: S102


_ENDS_AT_ONCE = [bool(sys.flags.no_site)]  # a command started -S, until made interactive


def interactive_defaults() -> None:
    """A command a person waits for, which may run long: Python's own collection, and its
    own end, again."""
    if sys.flags.no_site:
        import atexit
        import gc

        atexit.unregister(gc.freeze)
        gc.enable()
        _ENDS_AT_ONCE[0] = False


def run_command(main) -> None:
    """Run a command's ``main`` and end the process with the status it returns (or exits
    with), as ``sys.exit(main())`` would.

    A command started -S, as packaged, then ends at once (``os._exit``), after what a
    normal end does that matters here: the atexit functions, and stdout and stderr
    flushed. What it skips, the interpreter freeing every object of every module one by
    one, is a tenth of a hook's start, and nothing of ours waits for it: every file is
    closed where it was written. Anything else ends the normal way: an exception, a
    status that is not a number, another thread still running, stdout or stderr that
    cannot be flushed (Python then says so, and exits 120)."""
    try:
        status = main()
    except SystemExit as exiting:
        status = exiting.code
    threading = sys.modules.get("threading")
    if not _ENDS_AT_ONCE[0] or not (status is None or isinstance(status, int)) \
            or (threading is not None and threading.active_count() > 1):
        sys.exit(status)
    import atexit
    import os

    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        sys.exit(status)
    os._exit(status or 0)


# Only for a command started -S, as packaged: a pilot or a test importing the package
# keeps Python's defaults.
if sys.flags.no_site:
    import atexit
    import gc

    gc.disable()
    atexit.register(gc.freeze)  # atexit runs first in the shutdown, before its collection
    # Python's own search where this is not CPython or was found through a relative path.
    if sys.implementation.name == "cpython" and __path__[0].startswith("/"):
        sys.meta_path.insert(0, _OwnModules(__path__[0].rpartition("/")[0]))
