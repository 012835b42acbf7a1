"""Run an external command with a hard time limit (no hook may hang).

Not ``subprocess``: its import alone costs a good part of a hook's start-up
budget. The command gets no stdin, its own process group (so a timeout kills
whatever it started too), and may print at most ``MAX_OUTPUT_BYTES``: more is an
error naming the command, never silently cut (what we look for may come last).
"""

from __future__ import annotations

import os
import select
import time

from .errors import MJFError
from .signals import signal

MAX_OUTPUT_BYTES = 1 << 20


class CommandError(MJFError):
    """The command is missing, failed, or did not finish in time."""


def run_command(argv: list[str], timeout_secs: float,
                env: dict[str, str] | None = None) -> str:
    """The command's stdout as text; CommandError naming the command otherwise."""
    name = argv[0]
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        pid = os.posix_spawn(name, argv, os.environ if env is None else env, file_actions=[
            (os.POSIX_SPAWN_DUP2, null, 0),
            (os.POSIX_SPAWN_DUP2, out_write, 1),
            (os.POSIX_SPAWN_DUP2, err_write, 2),
        ], setpgroup=0, setsigdef=(signal.SIGPIPE,))
    except OSError as error:
        for fd in (out_read, out_write, err_read, err_write):
            os.close(fd)
        raise CommandError(f"cannot run {name}: {error.strerror}") from None
    finally:
        os.close(null)
    os.close(out_write)
    os.close(err_write)
    deadline = time.monotonic() + timeout_secs
    try:
        output, errors = _collect(out_read, err_read, deadline)
        status = _wait(pid, deadline)
    except TimeoutError:
        _kill(pid)
        raise CommandError(f"{name} did not finish within {timeout_secs:g} s; killed") from None
    except _TooMuchOutput:
        _kill(pid)
        raise CommandError(f"{' '.join(argv)[:200]} printed more than {MAX_OUTPUT_BYTES} bytes; "
                           "killed, its output not used") from None
    finally:
        os.close(out_read)
        os.close(err_read)
    text = output.decode("utf-8", "replace")
    if status != 0:
        detail = errors.decode("utf-8", "replace").strip().splitlines()
        reason = f": {detail[-1]}" if detail else ""
        raise CommandError(f"{' '.join(argv)} exited with status {status}{reason}")
    return text


class _TooMuchOutput(Exception):
    pass


def _collect(out_fd: int, err_fd: int, deadline: float) -> tuple[bytes, bytes]:
    buffers = {out_fd: bytearray(), err_fd: bytearray()}
    poller = select.poll()
    for fd in buffers:
        poller.register(fd, select.POLLIN | select.POLLHUP)
    open_fds = set(buffers)
    while open_fds:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        for fd, _ in poller.poll(remaining * 1000):
            data = os.read(fd, 65536)
            if not data:
                poller.unregister(fd)
                open_fds.discard(fd)
            elif fd == out_fd and len(buffers[fd]) + len(data) > MAX_OUTPUT_BYTES:
                raise _TooMuchOutput
            elif len(buffers[fd]) < MAX_OUTPUT_BYTES:
                buffers[fd] += data  # stderr: only its last line is shown, the rest dropped
    return bytes(buffers[out_fd]), bytes(buffers[err_fd])


def _wait(pid: int, deadline: float) -> int:
    """Exit status (or 128 + signal) once the command ends, before the deadline."""
    delay = 0.001
    while True:
        waited, status = os.waitpid(pid, os.WNOHANG)
        if waited == pid:
            return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)
        if time.monotonic() >= deadline:
            raise TimeoutError
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def _kill(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def ask(argv: list[str], timeout_secs: float, env: dict[str, str], log,
        unknown: str) -> str | None:
    """A batch system's answer, or None: a failure is one warning naming the command
    and saying what is ``unknown`` because of it."""
    try:
        return run_command(argv, timeout_secs, env)
    except CommandError as error:
        log.warning(f"{error}: {unknown}")
        return None
