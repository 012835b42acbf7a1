"""mjf_hooks.hooks.pbs_embedded: mjf-pbs's code run in PBS's own interpreter, bounded
(the hook file around it: tests/cli/test_mjf_pbs.py, on the real complex:
tests/integration/test_pbs.py)."""

import os
import signal
import time

import pytest

from mjf_hooks.hooks import pbs_embedded


def _state():
    return signal.getsignal(signal.SIGUSR1), signal.pthread_sigmask(signal.SIG_BLOCK, [])


def test_bounded_returns_what_the_call_returns_and_leaves_the_thread_as_it_was():
    before = _state()
    assert pbs_embedded.bounded(lambda: 42, time.monotonic() + 10, "late") == 42
    assert _state() == before


def test_bounded_stops_a_call_waiting_for_ever_and_leaves_the_thread_as_it_was(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])  # as a mom does
    try:
        before = _state()
        with pytest.raises(RuntimeError, match=r"^late$"):
            pbs_embedded.bounded(lambda: os.open(fifo, os.O_RDONLY), time.monotonic() + 0.2,
                                 "late")
        assert _state() == before
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def test_an_exception_of_the_call_is_its_own():
    def fail():
        raise ValueError("its own")

    with pytest.raises(ValueError, match="its own"):
        pbs_embedded.bounded(fail, time.monotonic() + 10, "late")


def test_run_leaves_the_stop_signal_to_whoever_took_it():
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: None)
    try:
        assert pbs_embedded.run("begin", "", time.monotonic() + 10, {}, 15) is None
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_run_restores_the_environment_whatever_happens(monkeypatch):
    monkeypatch.setenv("MJF_TEST_OWN", "kept")

    def broken(role, text):
        assert dict(os.environ) == {"PATH": "/usr/bin:/bin"}
        raise RuntimeError("broken")

    monkeypatch.setattr(pbs_embedded, "_run", broken)
    before = dict(os.environ)
    with pytest.raises(RuntimeError, match="broken"):
        pbs_embedded.run("begin", "", time.monotonic() + 10, {"PATH": "/usr/bin:/bin"}, 15)
    assert dict(os.environ) == before
