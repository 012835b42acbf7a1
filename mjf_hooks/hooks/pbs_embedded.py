"""mjf-pbs's code run inside PBS's own interpreter (``pbs_python``), where PBS's hook file
(``contrib/pbs/mjf_hook.py``) found it can be: :func:`run` runs one event's role of
:mod:`.pbs` there, within the hook's deadline, in the command's environment, and leaves
the interpreter as it found it.

Light on purpose (the standard library's built-in modules only): the hook file imports
it first, so that importing the rest of the package is bounded too. It is code the hook
file would otherwise hold, which PBS compiles from source on every event; this module
comes from its cached bytecode.
"""

from __future__ import annotations

import _signal
import _thread
import os
import sys
import time

# Type names only: importing collections.abc at run time costs every job start ~2 ms.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

# What stops the run at its deadline (see ``bounded``): a signal pbs_python has no use
# for, used only while its action is still the default.
STOP_SIGNAL = _signal.SIGUSR1


def run(role: str, text: str, deadline: float, environ: dict[str, str],
        timeout: int) -> tuple[int, str, str] | None:
    """``mjf-pbs ROLE`` with the attribute lines ``text`` as its stdin, run here ->
    (status, stdout, stderr); None where it cannot run here (STOP_SIGNAL taken, or the
    package fails to import): then the hook starts the command. It runs in ``environ``
    (the command's), restored after; stopped at ``deadline`` (RuntimeError, which says it
    did not finish in ``timeout`` s)."""
    if _signal.getsignal(STOP_SIGNAL) != _signal.SIG_DFL:
        return None
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(environ)
    try:
        return bounded(lambda: _run(role, text), deadline,
                       f"mjf-pbs {role} (in pbs_python) did not finish in {timeout} s: stopped")
    finally:
        os.environ.clear()
        os.environ.update(saved)
        if "syslog" in sys.modules:  # its ident back to this program's for PBS's own lines
            sys.modules["syslog"].closelog()
        _pbs_pythons_own()


def _pbs_pythons_own() -> None:
    """What importing the package did to pbs_python, undone: it starts its hooks without
    site (-S), which the package takes for a command started as packaged (no cyclic
    collection, its own finder for its modules: mjf_hooks/__init__.py)."""
    import mjf_hooks

    mjf_hooks.interactive_defaults()
    sys.meta_path[:] = [finder for finder in sys.meta_path
                        if not isinstance(finder, mjf_hooks._OwnModules)]


def _run(role: str, text: str) -> tuple[int, str, str] | None:
    try:
        from .pbs import run as run_role
    except Exception:  # noqa: BLE001 - the command is started instead: it says what is wrong
        return None
    return run_role([role], text)


class Overran(BaseException):
    """Raised in the hook's thread at its deadline; past the ``except Exception`` of the
    fail-safe frame, so that nothing more of the run happens."""


def bounded(call: Callable[[], object], deadline: float, message: str):
    """``call()`` in this thread, stopped at ``deadline`` (then RuntimeError(message)).

    A watchdog thread sends this one STOP_SIGNAL at the deadline, whose handler raises
    Overran: a system call it waits in returns at once, and raises it. Not SIGALRM,
    alarm() or setitimer(ITIMER_REAL): PBS's own hook alarm is alarm(2) with a C handler
    of its own (which interrupts the hook with KeyboardInterrupt, a failed event), and
    ours would replace both. The watchdog blocks every signal, so that PBS's alarm still
    reaches this thread; this thread never waits for it, and once ``call()`` has returned
    it sends nothing. A mom starts its hooks with STOP_SIGNAL blocked: it is open in this
    thread while ``call()`` runs. This thread's signal mask and STOP_SIGNAL's action are
    its own again afterwards.
    """
    main = _thread.get_ident()
    done, deciding = _thread.allocate_lock(), _thread.allocate_lock()
    returned: list[bool] = []
    sent: list[bool] = []
    arrived: list[bool] = []
    done.acquire()

    def stop(signum: int, frame: object) -> None:
        arrived.append(True)
        raise Overran()

    def watchdog() -> None:
        if not done.acquire(timeout=max(0.0, deadline - time.monotonic())):
            with deciding:
                if not returned:
                    sent.append(True)
                    _signal.pthread_kill(main, STOP_SIGNAL)

    _signal.signal(STOP_SIGNAL, stop)
    mask = _signal.pthread_sigmask(_signal.SIG_BLOCK, _signal.valid_signals())
    try:
        try:
            try:
                _thread.start_new_thread(watchdog, ())  # with every signal blocked
            finally:
                _signal.pthread_sigmask(_signal.SIG_SETMASK, set(mask) - {STOP_SIGNAL})
            try:
                return call()
            finally:
                with deciding:
                    returned.append(True)
                done.release()
                while sent and not arrived:  # on its way: its handler raises Overran here
                    time.sleep(0.01)
        except Overran:
            raise RuntimeError(message) from None
    finally:
        _signal.pthread_sigmask(_signal.SIG_SETMASK, mask)
        _signal.signal(STOP_SIGNAL, _signal.SIG_DFL)  # none can be on its way: see ``sent``
