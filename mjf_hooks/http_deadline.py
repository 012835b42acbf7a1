"""http.client connections whose every request keeps to its own deadline, over connect,
TLS handshake, request, status line, headers and body: what :mod:`mjf_hooks.reader`
reads a URL through.

A socket timeout bounds each wait, not the request: a server trickling one header line a
second would hold a 3 s reader for as long as it likes. Here each wait gets only what is
left of the deadline of the request under way (``connection.exchange``, an
:class:`Exchange`, set before each one, so a kept connection never carries one request's
deadline into the next). (Name resolution stays unbounded: getaddrinfo takes no
timeout.) A module of its own, imported when a URL is first read: no hook, which reads
only files, ever imports http.client.
"""

from __future__ import annotations

import http.client
import io
import socket
import time

# Status line, headers and body of one HTTP answer, at most.
MAX_ANSWER_BYTES = 1 << 20


class Exchange:
    """One read: the deadline all its steps share, and the answers it opened.

    A failed read can leave an answer open: closing them all here frees the sockets now
    rather than whenever the GC gets to them.
    """

    def __init__(self, timeout_secs: float) -> None:
        self.deadline = time.monotonic() + timeout_secs
        self.answers: list = []  # http.client.HTTPResponse

    def time_left(self) -> float:
        """Seconds left, for a socket timeout (never 0, which would mean non-blocking)."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("timed out")
        return left

    def close(self) -> None:
        for answer in self.answers:
            answer.close()


class DeadlineReader(io.RawIOBase):
    """A socket's input where every recv waits at most until the deadline."""

    def __init__(self, sock, exchange: Exchange) -> None:
        super().__init__()
        self._sock = sock
        self._exchange = exchange
        # The socket's own raw stream keeps it open until the answer is closed.
        self._stream = sock.makefile("rb", buffering=0)
        # http.client reads some bodies whole (a redirect's; a chunk of negative size):
        # a server must not fill memory for as long as the deadline lasts.
        self._budget = MAX_ANSWER_BYTES

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int | None:
        if self._budget <= 0:
            raise http.client.HTTPException(f"answer longer than {MAX_ANSWER_BYTES} bytes")
        self._sock.settimeout(self._exchange.time_left())
        count = self._stream.readinto(memoryview(buffer)[:self._budget])
        self._budget -= count or 0
        return count

    def fileno(self) -> int:
        return self._stream.fileno()

    def close(self) -> None:
        self._stream.close()
        super().close()

class DeadlineSocket:
    """What http.client.HTTPResponse uses of a socket - makefile("rb") - under the deadline."""

    def __init__(self, sock, exchange: Exchange) -> None:
        self._sock = sock
        self._exchange = exchange

    def makefile(self, mode: str = "rb") -> io.BufferedReader:
        return io.BufferedReader(DeadlineReader(self._sock, self._exchange))

class DeadlineConnection:
    """Mixin for http.client connections: every step waits only until the deadline of
    the request under way."""

    exchange: Exchange

    def __init__(self, host: str, **kwargs) -> None:
        super().__init__(host, **kwargs)
        self._create_connection = self._connect_socket  # an instance attribute upstream

    def _connect_socket(self, address, timeout=None, source_address=None):
        """socket.create_connection, with one deadline over every address tried (an IPv6
        address that drops packets must not take the whole timeout per address)."""
        host, port = address
        error: OSError = OSError(f"{host}: no address")
        for family, kind, proto, _, target in socket.getaddrinfo(host, port, 0,
                                                                 socket.SOCK_STREAM):
            sock = socket.socket(family, kind, proto)
            try:
                if source_address:
                    sock.bind(source_address)
                sock.settimeout(self.exchange.time_left())
                sock.connect(target)
                # Small requests answered at once: Nagle would hold each one back.
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                # A TLS handshake takes the socket timeout as its total: what is left.
                sock.settimeout(self.exchange.time_left())
                return sock
            except OSError as failure:
                sock.close()
                error = failure
        raise error

    def send(self, data) -> None:
        # The request is one sendall, which takes the socket timeout as its total.
        if self.sock is not None:
            self.sock.settimeout(self.exchange.time_left())
        super().send(data)

    def connect(self) -> None:
        super().connect()
        self.sock.settimeout(self.exchange.time_left())

    def response_class(self, sock, *args, **kwargs) -> http.client.HTTPResponse:
        # http.client reads every answer - a proxy's answer to CONNECT too - through the
        # response_class it makes from the socket.
        answer = http.client.HTTPResponse(DeadlineSocket(sock, self.exchange), *args,
                                          **kwargs)
        self.exchange.answers.append(answer)
        return answer


class HTTPConnection(DeadlineConnection, http.client.HTTPConnection):
    pass


# None in a Python built without ssl.
HTTPSConnection = type("HTTPSConnection", (DeadlineConnection, http.client.HTTPSConnection),
                       {}) if hasattr(http.client, "HTTPSConnection") else None
